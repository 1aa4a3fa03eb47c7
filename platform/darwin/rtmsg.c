/* rtmsg: RTM_GET requests and answers of the Darwin routing socket, byte by
 * byte. It owns nothing and touches no socket (route.c does).
 *
 * Why the sockaddrs are handled as bytes: on Darwin every sockaddr starts
 * with its length (sa_len) and family, and in routing messages each one is
 * padded to a multiple of 4 bytes (a zero length still takes 4). Reading the
 * two leading bytes works the same for every family, including AF_LINK, and
 * needs no struct that Linux lacks; every length is checked against what is
 * left of the message before anything is read. */
#include "platform/darwin/rtmsg.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "platform/darwin/darwin_sys.h"

/* Darwin pads routing sockaddrs to 4 bytes (sizeof(uint32_t)). */
static size_t sa_roundup(size_t len) {
    return len > 0 ? 1 + ((len - 1) | (sizeof(uint32_t) - 1)) : sizeof(uint32_t);
}

int rtmsg_build_get(int family, const void *addr, int seq, void *buf, size_t cap,
                    size_t *ret_len) {
    /* Darwin's sockaddr_in (16 bytes) and sockaddr_in6 (28 bytes): length,
     * family, port, then the address (after flowinfo for IPv6). */
    size_t salen, addr_off, alen;
    if (family == AF_INET) {
        salen = 16;
        addr_off = 4;
        alen = 4;
    } else if (family == AF_INET6) {
        salen = 28;
        addr_off = 8;
        alen = 16;
    } else {
        return -EAFNOSUPPORT;
    }
    size_t dl_len = sizeof(struct sockaddr_dl);
    size_t total = sizeof(struct rt_msghdr) + sa_roundup(salen) + sa_roundup(dl_len);
    if (!addr || !buf || cap < total)
        return -ENOSPC;

    uint8_t *b = buf;
    memset(b, 0, total);
    struct rt_msghdr rtm;
    memset(&rtm, 0, sizeof(rtm));
    rtm.rtm_msglen = (unsigned short)total;
    rtm.rtm_version = RTM_VERSION;
    rtm.rtm_type = RTM_GET;
    rtm.rtm_flags = RTF_UP | RTF_HOST;
    rtm.rtm_addrs = RTA_DST | RTA_IFP;
    rtm.rtm_seq = seq;
    memcpy(b, &rtm, sizeof(rtm));

    uint8_t *sa = b + sizeof(rtm);
    sa[0] = (uint8_t)salen;
    sa[1] = (uint8_t)family;
    memcpy(sa + addr_off, addr, alen);

    uint8_t *dl = sa + sa_roundup(salen);
    dl[0] = (uint8_t)dl_len;
    dl[1] = AF_LINK;

    *ret_len = total;
    return 0;
}

/* The answer's sockaddrs, in RTA_* bit order; pick RTA_IFP's index. */
static int parse_addrs(const uint8_t *p, size_t left, int addrs, int *ret_ifindex) {
    for (int bit = 0; bit < RTAX_MAX; bit++) {
        if (!(addrs & (1 << bit)))
            continue;
        if (left < 1)
            return -EBADMSG;
        size_t salen = p[0];
        size_t step = sa_roundup(salen);
        if (step > left || (salen > 0 && salen < 2))
            return -EBADMSG;
        if ((1 << bit) == RTA_IFP && salen >= 4 && p[1] == AF_LINK) {
            uint16_t idx;
            memcpy(&idx, p + 2, sizeof(idx)); /* sdl_index, host order */
            *ret_ifindex = idx;
        }
        p += step;
        left -= step;
    }
    return 0;
}

int rtmsg_parse_get(const void *buf, size_t len, int seq, pid_t pid, struct rtmsg_answer *ret) {
    const uint8_t *b = buf;
    size_t off = 0;

    if (!buf || !ret)
        return -EINVAL;
    while (off < len) {
        struct rt_msghdr rtm;
        if (len - off < sizeof(rtm.rtm_msglen) + 2)
            return -EBADMSG;
        uint16_t mlen;
        memcpy(&mlen, b + off, sizeof(mlen));
        if (mlen < sizeof(rtm.rtm_msglen) + 2 || mlen > len - off)
            return -EBADMSG;
        /* Other message types share only the first four bytes. */
        if (mlen < sizeof(rtm) || b[off + 3] != RTM_GET) {
            off += mlen;
            continue;
        }
        memcpy(&rtm, b + off, sizeof(rtm));
        if (rtm.rtm_version != RTM_VERSION)
            return -EPROTO;
        if (rtm.rtm_seq != seq || rtm.rtm_pid != pid) {
            off += mlen;
            continue;
        }
        struct rtmsg_answer a = {.flags = rtm.rtm_flags, .ifindex = rtm.rtm_index};
        if (rtm.rtm_errno != 0) {
            a.error = -rtm.rtm_errno;
            a.ifindex = 0;
        } else {
            int r = parse_addrs(b + off + sizeof(rtm), mlen - sizeof(rtm), rtm.rtm_addrs,
                                &a.ifindex);
            if (r < 0)
                return r;
        }
        *ret = a;
        return 0;
    }
    return -EAGAIN;
}
