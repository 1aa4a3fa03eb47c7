#include "common/dns_addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

int dns_addr_parse(const char *text, int *ret_family, uint8_t addr[16], char *canon) {
    static const uint8_t v4mapped[12] = {[10] = 0xff, [11] = 0xff};
    uint8_t a[16] = {0};
    int family = AF_INET;

    if (!text || strlen(text) >= DNS_ADDR_TEXT_MAX)
        return -EINVAL;
    if (inet_pton(AF_INET, text, a) != 1) {
        family = AF_INET6;
        if (inet_pton(AF_INET6, text, a) != 1)
            return -EINVAL;
    }
    if (family == AF_INET) {
        if (a[0] == 0 || a[0] == 127 || a[0] >= 224 || (a[0] == 169 && a[1] == 254))
            return -EINVAL;
    } else {
        static const uint8_t zero[15] = {0};
        if (memcmp(a, zero, sizeof(zero)) == 0 /* :: and ::1 */ || a[0] == 0xff ||
            (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) || memcmp(a, v4mapped, sizeof(v4mapped)) == 0)
            return -EINVAL;
    }
    if (canon && !inet_ntop(family, a, canon, DNS_ADDR_TEXT_MAX))
        return -EINVAL;
    *ret_family = family;
    memcpy(addr, a, 16);
    return 0;
}

socklen_t dns_sockaddr(int family, const void *addr, uint16_t port, struct sockaddr_storage *ss) {
    memset(ss, 0, sizeof(*ss));
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        memcpy(&in->sin_addr, addr, 4);
        return sizeof(*in);
    }
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    memcpy(&in6->sin6_addr, addr, 16);
    return sizeof(*in6);
}
