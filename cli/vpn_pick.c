/* Candidate VPN interfaces: those named like the common VPN clients'
 * (common/vpn_names.h: tun*, wg*, tailscale*, ...) that are up and have an
 * address other than link-local (a veth or tun gets fe80:: the moment it is up).
 * Listing uses getifaddrs (vpn_list, which `lyh doctor` reads too); nothing
 * here needs privileges. */
#include "cli/vpn_pick.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/macros.h"
#include "common/vpn_names.h"

#define PICK_MAX 16

struct cand {
    char name[IF_NAMESIZE];
    char addrs[160];
    bool carrier;
    bool default4; /* carries the IPv4 default (or both halves of the split) */
    bool default6;
};

/* Which interfaces carry the default routes, from /proc/net/route and
 * /proc/net/ipv6_route (advisory: the daemon asks the kernel itself). */
static void mark_defaults(struct cand *c, size_t n) {
    char line[512], ifn[IF_NAMESIZE + 1];
    unsigned dst, mask;
    FILE *f = fopen("/proc/net/route", "re");

    if (f) {
        bool half_lo[16] = {0}, half_hi[16] = {0};
        while (fgets(line, sizeof(line), f)) {
            if (sscanf(line, "%16s %x %*x %*x %*d %*d %*d %x", ifn, &dst, &mask) != 3)
                continue;
            for (size_t i = 0; i < n && i < 16; i++) {
                if (strcmp(ifn, c[i].name) != 0)
                    continue;
                if (dst == 0 && mask == 0)
                    c[i].default4 = true;
                if (mask == 0x80 && dst == 0) /* 0.0.0.0/1, little-endian */
                    half_lo[i] = true;
                if (mask == 0x80 && dst == 0x80) /* 128.0.0.0/1 */
                    half_hi[i] = true;
            }
        }
        fclose(f);
        for (size_t i = 0; i < n && i < 16; i++)
            if (half_lo[i] && half_hi[i])
                c[i].default4 = true;
    }
    f = fopen("/proc/net/ipv6_route", "re");
    if (f) {
        char d6[33];
        unsigned plen;
        while (fgets(line, sizeof(line), f)) {
            if (sscanf(line, "%32s %x %*s %*s %*s %*s %*s %*s %*s %16s", d6, &plen, ifn) != 3)
                continue;
            for (size_t i = 0; i < n; i++)
                if (strcmp(ifn, c[i].name) == 0 && plen == 0 &&
                    strcmp(d6, "00000000000000000000000000000000") == 0)
                    c[i].default6 = true;
        }
        fclose(f);
    }
}

static void describe(const struct cand *c, char *out, size_t len) {
    snprintf(out, len, "%s%s%s  %s", c->carrier ? "up" : "up, no carrier",
             c->default4 ? ", IPv4 default" : ", not the IPv4 default",
             c->default6 ? ", IPv6 default" : "", c->addrs);
}

/* The arrow-key picker on the terminal: up/down (or k/j) move, digits pick,
 * Enter confirms, q, Esc or Ctrl-C cancel. Returns the index or -1. The
 * terminal is restored on every way out. */
static int pick_tui(const struct cand *c, size_t n) {
    struct termios saved, raw;
    int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
    int sel = 0, result = -1;
    char d[256];

    if (fd < 0 || tcgetattr(fd, &saved) < 0) {
        if (fd >= 0)
            close(fd);
        return -2; /* no terminal: caller falls back to the prompt */
    }
    raw = saved;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(fd, TCSANOW, &raw) < 0) {
        close(fd);
        return -2;
    }
    dprintf(fd, "Pick the VPN interface for the agent (arrows, digits, Enter; q to cancel):\r\n");
    for (int round = 0; round < 10000; round++) {
        for (size_t i = 0; i < n; i++) {
            describe(&c[i], d, sizeof(d));
            dprintf(fd, "\r\033[K%s %zu) %-10s %s\r\n", (int)i == sel ? "\033[7m>" : " ", i + 1,
                    c[i].name, d);
            if ((int)i == sel)
                dprintf(fd, "\033[0m");
        }
        unsigned char k[16];
        ssize_t m = read(fd, k, sizeof(k));
        bool done = false;
        if (m <= 0)
            break;
        /* Several keys may come in one read: handle each in turn. */
        for (ssize_t i = 0; i < m && !done; i++) {
            if (k[i] == '\r' || k[i] == '\n') {
                result = sel;
                done = true;
            } else if (k[i] == 'q' || k[i] == 3 /* Ctrl-C */) {
                done = true;
            } else if (k[i] >= '1' && k[i] <= '9' && (size_t)(k[i] - '1') < n) {
                result = k[i] - '1';
                done = true;
            } else if (k[i] == 27 && i + 2 < m && k[i + 1] == '[' &&
                       (k[i + 2] == 'A' || k[i + 2] == 'B')) {
                sel = k[i + 2] == 'A' ? (sel > 0 ? sel - 1 : (int)n - 1)
                                      : (sel + 1 < (int)n ? sel + 1 : 0);
                i += 2;
            } else if (k[i] == 27) {
                done = true; /* a lone Esc */
            } else if (k[i] == 'k') {
                sel = sel > 0 ? sel - 1 : (int)n - 1;
            } else if (k[i] == 'j') {
                sel = sel + 1 < (int)n ? sel + 1 : 0;
            }
        }
        if (done)
            break;
        dprintf(fd, "\033[%zuA", n); /* back up to redraw the list */
    }
    tcsetattr(fd, TCSANOW, &saved);
    close(fd);
    return result;
}

static bool link_local4(const struct in_addr *a) {
    const uint8_t *b = (const uint8_t *)a;
    return b[0] == 169 && b[1] == 254;
}

size_t vpn_list(struct vpn_if *out, size_t max) {
    struct ifaddrs *ifa = NULL;
    size_t n = 0;

    if (getifaddrs(&ifa) < 0)
        return 0;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
        size_t k;
        if (!lyh_vpn_name_default(i->ifa_name) || strlen(i->ifa_name) >= IF_NAMESIZE)
            continue;
        for (k = 0; k < n; k++)
            if (strcmp(out[k].name, i->ifa_name) == 0)
                break;
        if (k == n) {
            if (n >= max)
                continue;
            memset(&out[n], 0, sizeof(out[n]));
            snprintf(out[n].name, sizeof(out[n].name), "%s", i->ifa_name);
            n++;
        }
        struct vpn_if *v = &out[k];
        v->up = v->up || (i->ifa_flags & IFF_UP);
        v->running = v->running || (i->ifa_flags & IFF_RUNNING);
        if (!i->ifa_addr)
            continue;
        if (i->ifa_addr->sa_family == AF_INET) {
            const struct in_addr *a = &((const struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr;
            if (!link_local4(a))
                v->addressed = true;
            if (v->n4 < ARRAY_SIZE(v->a4))
                v->a4[v->n4++] = *a;
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            const struct in6_addr *a =
                &((const struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr;
            if (!IN6_IS_ADDR_LINKLOCAL(a))
                v->addressed = true;
            if (v->n6 < ARRAY_SIZE(v->a6))
                v->a6[v->n6++] = *a;
        }
    }
    freeifaddrs(ifa);
    return n;
}

static void add_addr(struct cand *c, int family, const void *a) {
    char buf[INET6_ADDRSTRLEN];
    size_t used = strlen(c->addrs);

    if (inet_ntop(family, a, buf, sizeof(buf)))
        snprintf(c->addrs + used, sizeof(c->addrs) - used, "%s%s", used ? " " : "", buf);
}

/* The candidates: up and addressed, with their addresses but the
 * link-local ones. */
static size_t list_candidates(struct cand *out, size_t max) {
    struct vpn_if v[2 * PICK_MAX];
    size_t n = 0, nv = vpn_list(v, ARRAY_SIZE(v));

    for (size_t i = 0; i < nv && n < max; i++) {
        if (!v[i].up || !v[i].addressed)
            continue;
        struct cand *c = &out[n++];
        memset(c, 0, sizeof(*c));
        _Static_assert(sizeof(c->name) >= sizeof(v[i].name), "an interface name fits");
        memcpy(c->name, v[i].name, sizeof(v[i].name)); /* NUL-terminated (vpn_list) */
        c->carrier = v[i].running;
        for (size_t k = 0; k < v[i].n4; k++)
            if (!link_local4(&v[i].a4[k]))
                add_addr(c, AF_INET, &v[i].a4[k]);
        for (size_t k = 0; k < v[i].n6; k++)
            if (!IN6_IS_ADDR_LINKLOCAL(&v[i].a6[k]))
                add_addr(c, AF_INET6, &v[i].a6[k]);
    }
    return n;
}

int vpn_pick(const char *explicit_name, bool interactive, char *out, size_t outlen) {
    struct cand c[PICK_MAX];
    size_t n;
    FILE *in = stdin;
    char line[32];

    if (explicit_name) {
        /* Any name: the admin policy (allowed_interface_patterns) decides,
         * in lyhd, which says what it allows. */
        if (!explicit_name[0] || strlen(explicit_name) >= IF_NAMESIZE) {
            fprintf(stderr, "lyh: '%s' is not an interface name (1 to %d characters)\n",
                    explicit_name, IF_NAMESIZE - 1);
            return EXIT_USAGE;
        }
        snprintf(out, outlen, "%s", explicit_name);
        return EXIT_OK;
    }
    n = list_candidates(c, PICK_MAX);
    mark_defaults(c, n);
    if (n == 0) {
        fprintf(stderr, "lyh: no VPN interface (tun*, wg*, tailscale*, nordlynx, proton*, "
                        "mullvad-*) is up and addressed.\n"
                        "Start your VPN, then run lyh again (or name one with --vpn).\n");
        return EXIT_DAEMON_ERROR;
    }
    if (n == 1) {
        snprintf(out, outlen, "%s", c[0].name);
        return EXIT_OK;
    }
    if (interactive) {
        int k = pick_tui(c, n);
        if (k >= 0) {
            snprintf(out, outlen, "%s", c[k].name);
            return EXIT_OK;
        }
        if (k == -1) {
            fprintf(stderr, "lyh: cancelled\n");
            return EXIT_USAGE;
        }
    }
    /* Never a prompt on something that is not a terminal: stdin is the
     * agent's input (printf '1\nhello\n' | lyh run -- cat would lose a
     * line to the prompt), and nobody is there to answer. */
    if (!isatty(STDIN_FILENO)) {
        fprintf(stderr, "lyh: several VPN interfaces are up and stdin is not a terminal, so lyh "
                        "does not ask; name one with --vpn NAME:\n");
        for (size_t i = 0; i < n; i++) {
            char d[256];
            describe(&c[i], d, sizeof(d));
            fprintf(stderr, "  --vpn %-10s %s\n", c[i].name, d);
        }
        return EXIT_USAGE;
    }
    /* A terminal, but no full-screen picker (--no-tui): a numbered prompt. */
    fprintf(stderr, "Several VPN interfaces are up; pick one:\n");
    for (size_t i = 0; i < n; i++) {
        char d[256];
        describe(&c[i], d, sizeof(d));
        fprintf(stderr, "  %zu) %-10s %s\n", i + 1, c[i].name, d);
    }
    fprintf(stderr, "number (q to cancel): ");
    if (!fgets(line, sizeof(line), in)) {
        fprintf(stderr, "\nlyh: no interface picked; pass --vpn NAME\n");
        return EXIT_USAGE;
    }
    char *end;
    long v = strtol(line, &end, 10);
    if (end == line || (*end != '\n' && *end != '\0') || v < 1 || (size_t)v > n) {
        fprintf(stderr, "lyh: cancelled\n");
        return EXIT_USAGE;
    }
    snprintf(out, outlen, "%s", c[v - 1].name);
    return EXIT_OK;
}
