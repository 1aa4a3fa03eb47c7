/* Candidate VPN interfaces: those the admin policy's allowed_interface_patterns
 * name (by default the common VPN clients', common/vpn_names.h: tun*, wg*,
 * tailscale*, ...) that are up and have an address other than link-local (a
 * veth or tun gets fe80:: the moment it is up).
 * Listing uses getifaddrs (vpn_list, which `lyh doctor` reads too); nothing
 * here needs privileges. The picker shows what lyh run would find for each
 * (the default routes, the resolver, as doctor does) and lets through only
 * what it would accept; lyhd checks all of it again. */
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
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/config.h"
#include "common/macros.h"
#include "common/vpn_names.h"
#include "platform/linux/dns_config.h"

#define PICK_MAX 16

struct cand {
    char name[IF_NAMESIZE];
    char addrs[160];
    char peer[INET6_ADDRSTRLEN];
    char resolver[160]; /* "10.8.0.1 (from systemd-resolved)", "" none known */
    bool carrier;
    bool default4; /* carries the IPv4 default (or both halves of the split) */
    bool default6;
    bool usable;   /* lyh run would take it (as far as the client can tell) */
    bool proxy_only; /* the row VPN_PICK_NONE: no interface, proxy-only mode */
    char why[240]; /* !usable: why not, and what to do */
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
    if (c->proxy_only) {
        snprintf(out, len, "proxy-only: no VPN; the agent reaches a proxy on this machine only");
        return;
    }
    snprintf(out, len, "%s%s%s  %s", c->carrier ? "up" : "up, no carrier",
             c->default4 ? ", IPv4 default" : ", not the IPv4 default",
             c->default6 ? ", IPv6 default" : "", c->addrs);
}

/* Can lyh run use it? lyhd refuses an interface that does not carry the IPv4
 * default route unless --allow-non-default-route (the route preflight). */
static void judge(struct cand *c, bool allow_non_default) {
    c->usable = c->proxy_only || c->default4 || allow_non_default;
    if (!c->usable)
        snprintf(c->why, sizeof(c->why),
                 "lyh run refuses %.15s: it does not carry the IPv4 default route. Route your VPN "
                 "as the default, or run with --allow-non-default-route",
                 c->name);
}

/* The detail pane's lines for c (PANE_LINES of them). */
#define PANE_LINES 5
static void pane(const struct cand *c, char lines[PANE_LINES][256]) {
    if (c->proxy_only) {
        snprintf(lines[0], 256, "  none: proxy-only mode");
        snprintf(lines[1], 256, "    reaches   your proxy (its port on loopback) and its own servers");
        snprintf(lines[2], 256, "    not       the VPN, the LAN, other services of this machine");
        snprintf(lines[3], 256, "    DNS       none: the proxy resolves names (socks5h, CONNECT)");
        snprintf(lines[4], 256, "    proxy     [defaults] proxy, --env HTTPS_PROXY=..., or asked");
        return;
    }
    snprintf(lines[0], 256, "  %.15s: %.200s", c->name, c->addrs[0] ? c->addrs : "(no address)");
    snprintf(lines[1], 256, "    peer      %.46s", c->peer[0] ? c->peer : "(none: not point-to-point)");
    snprintf(lines[2], 256, "    IPv4      %s",
             c->default4 ? "carries the default route"
                         : "does not carry the default route");
    snprintf(lines[3], 256, "    IPv6      %s",
             c->default6 ? "carries the default route"
                         : "no default route: sessions get no IPv6");
    snprintf(lines[4], 256, "    resolver  %s",
             c->resolver[0] ? c->resolver
                            : "none known: pass --dns ADDRESS (or the admin's dns_resolvers)");
}

/* One line of at most width - 1 characters (a longer one would wrap and the
 * redraw, which counts lines, would go wrong), cleared to its end. */
static void put_line(int fd, unsigned width, const char *attr, const char *text) {
    dprintf(fd, "\r\033[K%s%.*s%s\r\n", attr, (int)(width - 1), text, attr[0] ? "\033[0m" : "");
}

static unsigned term_width(int fd) {
    struct winsize ws;
    if (ioctl(fd, TIOCGWINSZ, &ws) < 0 || ws.ws_col < 20)
        return 80;
    return ws.ws_col > 400 ? 400 : ws.ws_col;
}

#define MSG_LINES 3

/* The arrow-key picker on the terminal: up/down (or k/j) move, a digit moves
 * the marker to that row, Enter picks, s picks and saves it as the default
 * (save_path), q, Esc or Ctrl-C cancel. A row lyh run would refuse cannot be
 * picked: its fix shows instead. Returns the index or -1 (cancelled), -2 (no
 * terminal). *ret_saved: the pick was saved. The terminal is restored on
 * every way out. */
static int pick_tui(const struct cand *c, size_t n, const char *save_path, bool *ret_saved) {
    struct termios saved, raw;
    int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
    int sel = 0, result = -1;
    char d[256], msg[CFG_ERR_MAX + 64] = "";

    *ret_saved = false;
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
    dprintf(fd, "Pick the VPN interface for the agent: arrows or a digit move, Enter runs%s, "
                "q cancels\r\n",
            save_path ? ", s runs and saves it as your default" : "");
    for (int round = 0; round < 10000; round++) {
        unsigned w = term_width(fd);
        for (size_t i = 0; i < n; i++) {
            char row[320];
            if (c[i].usable)
                describe(&c[i], d, sizeof(d));
            else
                snprintf(d, sizeof(d), "cannot be used: not the IPv4 default route");
            snprintf(row, sizeof(row), "%c %zu) %-10.15s %.256s", (int)i == sel ? '>' : ' ', i + 1,
                     c[i].name, d);
            put_line(fd, w, (int)i == sel ? "\033[7m" : "", row);
        }
        char lines[PANE_LINES][256];
        pane(&c[sel], lines);
        put_line(fd, w, "", "");
        for (size_t i = 0; i < PANE_LINES; i++)
            put_line(fd, w, "", lines[i]);
        /* the message (a refusal's fix, a save's error), wrapped */
        const char *mp = msg[0] ? msg : c[sel].usable ? "" : c[sel].why;
        for (size_t i = 0; i < MSG_LINES; i++) {
            size_t take = strnlen(mp, w - 1);
            char part[401];
            snprintf(part, sizeof(part), "%.*s", (int)take, mp);
            put_line(fd, w, "", part);
            mp += take;
        }
        unsigned char k[16];
        ssize_t m = read(fd, k, sizeof(k));
        bool done = false;
        if (m <= 0)
            break;
        msg[0] = '\0';
        /* Several keys may come in one read: handle each in turn. */
        for (ssize_t i = 0; i < m && !done; i++) {
            if (k[i] == '\r' || k[i] == '\n' || k[i] == 's') {
                if (!c[sel].usable) {
                    snprintf(msg, sizeof(msg), "%s", c[sel].why);
                    break;
                }
                if (k[i] == 's' && !save_path) {
                    snprintf(msg, sizeof(msg), "no config file to save to (--no-config?); "
                                               "Enter runs without saving");
                    break;
                }
                if (k[i] == 's') {
                    struct cfg_error err = {{0}};
                    if (cfg_save_default_vpn(save_path, c[sel].name, &err) < 0) {
                        snprintf(msg, sizeof(msg), "not saved: %s", err.msg);
                        break;
                    }
                    *ret_saved = true;
                }
                result = sel;
                done = true;
            } else if (k[i] == 'q' || k[i] == 3 /* Ctrl-C */) {
                done = true;
            } else if (k[i] >= '1' && k[i] <= '9' && (size_t)(k[i] - '1') < n) {
                sel = k[i] - '1'; /* moves the marker; Enter confirms */
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
        dprintf(fd, "\033[%zuA", n + 1 + PANE_LINES + MSG_LINES); /* back up to redraw */
    }
    tcsetattr(fd, TCSANOW, &saved);
    close(fd);
    return result;
}

static bool link_local4(const struct in_addr *a) {
    const uint8_t *b = (const uint8_t *)a;
    return b[0] == 169 && b[1] == 254;
}

void vpn_names_from_policy(struct cli *cli, struct vpn_names *ret) {
    struct lyh_client *c = NULL;
    _cleanup_free_ lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    _cleanup_free_ lianyaohu_v1_Response *resp = calloc(1, sizeof(*resp));

    ret->n = 0;
    if (!req || !resp || lyh_client_connect(cli->socket_path, &c) < 0)
        return;
    req->which_method = lianyaohu_v1_Request_policy_get_tag;
    if (cli_call(c, req, resp) == 0 && resp->code == lianyaohu_v1_Code_OK &&
        resp->which_result == lianyaohu_v1_Response_policy_tag) {
        const lianyaohu_v1_Policy *pm = &resp->result.policy.policy;
        for (pb_size_t k = 0; k < pm->allowed_interface_patterns_count && ret->n < 32; k++)
            snprintf(ret->v[ret->n++], sizeof(ret->v[0]), "%s", pm->allowed_interface_patterns[k]);
    }
    lyh_client_close(c);
}

void vpn_names_text(const struct vpn_names *names, char *buf, size_t len) {
    size_t used = 0, n = names && names->n ? names->n : LYH_VPN_NAME_DEFAULTS;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        int k = snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
                         names && names->n ? names->v[i] : lyh_vpn_name_defaults[i]);
        if (k < 0 || (size_t)k >= len - used)
            break;
        used += (size_t)k;
    }
}

static bool vpn_name(const struct vpn_names *names, const char *name) {
    if (!names || !names->n)
        return lyh_vpn_name_default(name);
    for (size_t i = 0; i < names->n; i++)
        if (fnmatch(names->v[i], name, 0) == 0)
            return true;
    return false;
}

size_t vpn_list(const struct vpn_names *names, struct vpn_if *out, size_t max) {
    struct ifaddrs *ifa = NULL;
    size_t n = 0;

    if (getifaddrs(&ifa) < 0)
        return 0;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
        size_t k;
        if ((i->ifa_flags & IFF_LOOPBACK) || !vpn_name(names, i->ifa_name) ||
            strlen(i->ifa_name) >= IF_NAMESIZE ||
            strspn(i->ifa_name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
                strlen(i->ifa_name)) /* lyhd takes no other; nothing odd reaches the terminal */
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
        if ((i->ifa_flags & IFF_POINTOPOINT) && i->ifa_dstaddr && !v->peer[0] &&
            i->ifa_dstaddr->sa_family == i->ifa_addr->sa_family) {
            const struct sockaddr *pa = i->ifa_dstaddr;
            const void *a = pa->sa_family == AF_INET
                                ? (const void *)&((const struct sockaddr_in *)(const void *)pa)->sin_addr
                                : (const void *)&((const struct sockaddr_in6 *)(const void *)pa)->sin6_addr;
            if ((pa->sa_family == AF_INET || pa->sa_family == AF_INET6) &&
                !inet_ntop(pa->sa_family, a, v->peer, sizeof(v->peer)))
                v->peer[0] = '\0';
        }
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

static bool addr_on(const struct vpn_if *v, int family, const void *a) {
    if (family == AF_INET)
        for (size_t k = 0; k < v->n4; k++)
            if (memcmp(&v->a4[k], a, 4) == 0)
                return true;
    if (family == AF_INET6)
        for (size_t k = 0; k < v->n6; k++)
            if (memcmp(&v->a6[k], a, 16) == 0)
                return true;
    return false;
}

/* The source address the kernel would pick for dst: a UDP connect() sends
 * nothing, it only looks up the route. */
static int source_for(int family, const void *dst, void *ret_src) {
    struct sockaddr_storage ss = {0}, src = {0};
    socklen_t slen = sizeof(src), len;
    int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int r = 0;

    if (fd < 0)
        return -errno;
    if (family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(53);
        memcpy(&s4->sin_addr, dst, 4);
        len = sizeof(*s4);
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(53);
        memcpy(&s6->sin6_addr, dst, 16);
        len = sizeof(*s6);
    }
    if (connect(fd, (struct sockaddr *)&ss, len) < 0 ||
        getsockname(fd, (struct sockaddr *)&src, &slen) < 0)
        r = -errno;
    else if (family == AF_INET)
        memcpy(ret_src, &((struct sockaddr_in *)&src)->sin_addr, 4);
    else
        memcpy(ret_src, &((struct sockaddr_in6 *)&src)->sin6_addr, 16);
    close(fd);
    return r;
}

bool vpn_routed_via(int family, const uint8_t *addr, void *ud) {
    uint8_t src[16];
    return source_for(family, addr, src) == 0 && addr_on(ud, family, src);
}


static void add_addr(struct cand *c, int family, const void *a) {
    char buf[INET6_ADDRSTRLEN];
    size_t used = strlen(c->addrs);

    if (inet_ntop(family, a, buf, sizeof(buf)))
        snprintf(c->addrs + used, sizeof(c->addrs) - used, "%s%s", used ? " " : "", buf);
}

/* The candidates: up and addressed, with their addresses but the
 * link-local ones. */
static size_t list_candidates(const struct vpn_names *names, struct cand *out, size_t max) {
    struct vpn_if v[2 * PICK_MAX];
    size_t n = 0, nv = vpn_list(names, v, ARRAY_SIZE(v));

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
        memcpy(c->peer, v[i].peer, sizeof(c->peer));
        /* the resolver lyhd would ask through it (the system's: an admin's
         * dns_resolvers or --dns would come first, the client does not know) */
        struct dr_rule res[DNSCFG_MAX];
        char source[80] = "";
        size_t nres = 0;
        unsigned ifindex = if_nametoindex(c->name);
        if (ifindex && dnscfg_system(c->name, (int)ifindex, "/etc/resolv.conf", vpn_routed_via,
                                     &v[i], res, &nres, source, sizeof(source)) == 0) {
            for (size_t k = 0; k < nres; k++) {
                char a[INET6_ADDRSTRLEN];
                size_t l = strlen(c->resolver);
                if (inet_ntop(res[k].family, res[k].addr, a, sizeof(a)))
                    snprintf(c->resolver + l, sizeof(c->resolver) - l, "%s%s", l ? " " : "", a);
            }
            size_t l = strlen(c->resolver);
            if (l)
                snprintf(c->resolver + l, sizeof(c->resolver) - l, " (from %s)", source);
        }
    }
    return n;
}

/* The candidates on stderr: "  N) NAME  state" or (as_options) "  --vpn NAME  state". */
static void list_rows(const struct cand *c, size_t n, bool as_options) {
    for (size_t i = 0; i < n; i++) {
        char d[256];
        if (c[i].usable)
            describe(&c[i], d, sizeof(d));
        else
            snprintf(d, sizeof(d), "cannot be used: not the IPv4 default route");
        if (as_options)
            fprintf(stderr, "  --vpn %-10s %s\n", c[i].name, d);
        else
            fprintf(stderr, "  %zu) %-10s %s\n", i + 1, c[i].name, d);
    }
}

int vpn_pick(const struct vpn_pick_in *in, char *out, size_t outlen) {
    struct cand c[PICK_MAX + 1]; /* + the proxy-only row */
    size_t n;
    char line[32];

    if (in->explicit_name) {
        /* Any name: the admin policy (allowed_interface_patterns) decides,
         * in lyhd, which says what it allows. */
        if (!in->explicit_name[0] || strlen(in->explicit_name) >= IF_NAMESIZE) {
            fprintf(stderr, "lyh: '%s' is not an interface name (1 to %d characters)\n",
                    in->explicit_name, IF_NAMESIZE - 1);
            return EXIT_USAGE;
        }
        snprintf(out, outlen, "%s", in->explicit_name);
        return EXIT_OK;
    }
    n = list_candidates(in->names, c, PICK_MAX);
    mark_defaults(c, n);
    for (size_t i = 0; i < n; i++)
        judge(&c[i], in->allow_non_default_route);
    if (n == 0) {
        char pats[400];
        vpn_names_text(in->names, pats, sizeof(pats));
        fprintf(stderr, "lyh: no VPN interface (%s) is up and addressed.\n"
                        "Start your VPN, then run lyh again (or name one with --vpn; "
                        "--vpn none runs proxy-only, through a proxy on this machine).\n",
                pats);
        return EXIT_DAEMON_ERROR;
    }
    /* the only one: taken without asking (lyhd says so if it refuses) */
    if (n == 1) {
        snprintf(out, outlen, "%s", c[0].name);
        return EXIT_OK;
    }
    /* several: proxy-only is offered too, last */
    memset(&c[n], 0, sizeof(c[n]));
    snprintf(c[n].name, sizeof(c[n].name), VPN_PICK_NONE);
    c[n].proxy_only = true;
    judge(&c[n], false);
    n++;
    if (in->interactive) {
        bool saved = false;
        int k = pick_tui(c, n, in->save_path, &saved);
        if (k >= 0) {
            snprintf(out, outlen, "%s", c[k].name);
            if (saved)
                fprintf(stderr, "lyh: saved vpn_interface = \"%s\" under [defaults] in %s\n",
                        c[k].name, in->save_path);
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
        list_rows(c, n, true);
        return EXIT_USAGE;
    }
    /* A terminal, but no full-screen picker (--no-tui): a numbered prompt. */
    fprintf(stderr, "Several VPN interfaces are up; pick one:\n");
    list_rows(c, n, false);
    fprintf(stderr, "number (q to cancel): ");
    if (!fgets(line, sizeof(line), stdin)) {
        fprintf(stderr, "\nlyh: no interface picked; pass --vpn NAME\n");
        return EXIT_USAGE;
    }
    char *end;
    long v = strtol(line, &end, 10);
    if (end == line || (*end != '\n' && *end != '\0') || v < 1 || (size_t)v > n) {
        fprintf(stderr, "lyh: cancelled\n");
        return EXIT_USAGE;
    }
    if (!c[v - 1].usable) {
        fprintf(stderr, "lyh: %s\n", c[v - 1].why);
        return EXIT_USAGE;
    }
    snprintf(out, outlen, "%s", c[v - 1].name);
    return EXIT_OK;
}
