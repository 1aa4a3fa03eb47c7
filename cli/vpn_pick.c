/* Candidate VPN interfaces: tun* and wg* that are up and have an address
 * other than link-local (a veth or tun gets fe80:: the moment it is up).
 * Listing uses getifaddrs; nothing here needs privileges. */
#include "cli/vpn_pick.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/macros.h"

#define PICK_MAX 16

struct cand {
    char name[IF_NAMESIZE];
    char addrs[160];
    bool carrier;
};

static bool vpn_name(const char *n) {
    return strncmp(n, "tun", 3) == 0 || strncmp(n, "wg", 2) == 0;
}

static bool link_local(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET) {
        const uint8_t *a = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
        return a[0] == 169 && a[1] == 254;
    }
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return IN6_IS_ADDR_LINKLOCAL(a6);
}

static size_t list_candidates(struct cand *out, size_t max) {
    struct ifaddrs *ifa = NULL;
    size_t n = 0;

    if (getifaddrs(&ifa) < 0)
        return 0;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
        char buf[INET6_ADDRSTRLEN];
        size_t k;
        if (!i->ifa_addr || !vpn_name(i->ifa_name) || !(i->ifa_flags & IFF_UP))
            continue;
        if (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)
            continue;
        if (link_local(i->ifa_addr))
            continue;
        for (k = 0; k < n; k++)
            if (strcmp(out[k].name, i->ifa_name) == 0)
                break;
        if (k == n) {
            if (n >= max)
                continue;
            memset(&out[n], 0, sizeof(out[n]));
            snprintf(out[n].name, sizeof(out[n].name), "%s", i->ifa_name);
            out[n].carrier = (i->ifa_flags & IFF_RUNNING) != 0;
            n++;
        }
        const void *a = i->ifa_addr->sa_family == AF_INET
                            ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                            : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        if (inet_ntop(i->ifa_addr->sa_family, a, buf, sizeof(buf))) {
            size_t used = strlen(out[k].addrs);
            snprintf(out[k].addrs + used, sizeof(out[k].addrs) - used, "%s%s", used ? " " : "",
                     buf);
        }
    }
    freeifaddrs(ifa);
    return n;
}

int vpn_pick(const char *explicit_name, bool interactive, char *out, size_t outlen) {
    struct cand c[PICK_MAX];
    size_t n;
    FILE *in = stdin;
    char line[32];

    if (explicit_name) {
        if (!vpn_name(explicit_name) || strlen(explicit_name) >= IF_NAMESIZE) {
            fprintf(stderr, "lyh: '%s' is not a VPN interface name (tun*, wg*)\n",
                    explicit_name);
            return EXIT_USAGE;
        }
        snprintf(out, outlen, "%s", explicit_name);
        return EXIT_OK;
    }
    n = list_candidates(c, PICK_MAX);
    if (n == 0) {
        fprintf(stderr, "lyh: no VPN interface (tun*, wg*) is up and addressed.\n"
                        "Start your VPN, then run lyh again (or name one with --vpn).\n");
        return EXIT_DAEMON_ERROR;
    }
    if (n == 1) {
        snprintf(out, outlen, "%s", c[0].name);
        return EXIT_OK;
    }
    fprintf(stderr, "Several VPN interfaces are up; pick one:\n");
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "  %zu) %-10s %s  %s\n", i + 1, c[i].name,
                c[i].carrier ? "up" : "up, no carrier", c[i].addrs);
    if (interactive) {
        in = fopen("/dev/tty", "re");
        if (!in)
            in = stdin;
    }
    fprintf(stderr, "number (q to cancel): ");
    if (!fgets(line, sizeof(line), in)) {
        if (in != stdin)
            fclose(in);
        fprintf(stderr, "\nlyh run: no interface picked; pass --vpn NAME\n");
        return EXIT_USAGE;
    }
    if (in != stdin)
        fclose(in);
    char *end;
    long v = strtol(line, &end, 10);
    if (end == line || (*end != '\n' && *end != '\0') || v < 1 || (size_t)v > n) {
        fprintf(stderr, "lyh: cancelled\n");
        return EXIT_USAGE;
    }
    snprintf(out, outlen, "%s", c[v - 1].name);
    return EXIT_OK;
}
