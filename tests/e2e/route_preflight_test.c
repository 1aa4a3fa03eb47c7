/* End-to-end checks for platform/ifaces.c and platform/linux/route.c against the real
 * kernel. Run by route_preflight.sh inside a network namespace it built;
 * this program only reads (getifaddrs, RTM_GETROUTE, RTM_GETLINK) and never
 * changes or sends anything. Each invocation checks one expectation and
 * exits 0 when it holds, 1 when it does not, 2 on bad usage.
 *
 *   route_preflight_test preflight IFNAME [--allow-non-default] [--index-of NAME]
 *       (--ok | --error ERRNO) [--why TEXT]... [--why-contains TEXT]
 *       [--ipv4-checked yes|no] [--ipv6 blocked|open] [--note4 TEXT] [--note6 TEXT]
 *   route_preflight_test validate IFNAME (--ok | --error ERRNO) [--why TEXT]...
 *   route_preflight_test oif 4|6 ADDRESS (--is IFNAME | --error ERRNO)
 *
 * --why may be given several times: any one must match exactly. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "platform/ifaces.h"
#include "platform/linux/route.h"

#define MAX_WHY 4

struct expect {
    bool ok;
    int error; /* negative errno when !ok */
    const char *why[MAX_WHY];
    int n_why;
    const char *why_contains;
    const char *ipv4_checked; /* "yes" / "no" / NULL */
    const char *ipv6;         /* "blocked" / "open" / NULL */
    const char *note4;
    const char *note6;
    const char *is; /* oif: expected interface name */
};

static const struct {
    const char *name;
    int value;
} errnames[] = {
    {"EINVAL", EINVAL},           {"ENODEV", ENODEV},     {"ENETDOWN", ENETDOWN},
    {"EADDRNOTAVAIL", EADDRNOTAVAIL}, {"ENETUNREACH", ENETUNREACH},
    {"EHOSTUNREACH", EHOSTUNREACH}, {"EACCES", EACCES},
};

static const char *errname(int e) {
    for (size_t k = 0; k < sizeof(errnames) / sizeof(errnames[0]); k++)
        if (errnames[k].value == -e)
            return errnames[k].name;
    return e ? strerror(-e) : "0";
}

static int parse_errname(const char *s) {
    for (size_t k = 0; k < sizeof(errnames) / sizeof(errnames[0]); k++)
        if (strcmp(errnames[k].name, s) == 0)
            return -errnames[k].value;
    fprintf(stderr, "unknown errno name '%s'\n", s);
    exit(2);
}

static bool fail_count_;
__attribute__((format(printf, 1, 2))) static void mismatch(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("mismatch: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    fail_count_ = true;
}

static void check_rc_why(const struct expect *x, int rc, const char *why) {
    if (x->ok && rc != 0)
        mismatch("expected success, got %s: %s", errname(rc), why);
    if (!x->ok && rc != x->error)
        mismatch("expected %s, got %s (%s)", errname(x->error), errname(rc), why);
    if (rc == 0)
        return;
    if (x->n_why > 0) {
        bool any = false;
        for (int k = 0; k < x->n_why; k++)
            any |= strcmp(why, x->why[k]) == 0;
        if (!any)
            mismatch("why is \"%s\", expected \"%s\"%s", why, x->why[0],
                     x->n_why > 1 ? " (or an alternative)" : "");
    }
    if (x->why_contains && !strstr(why, x->why_contains))
        mismatch("why \"%s\" does not contain \"%s\"", why, x->why_contains);
}

static int lookup_ifindex(const char *name, int *ret) {
    struct ifc_list l = {0};
    const struct ifc *i = NULL;
    int r = ifc_list(&l);
    if (r < 0)
        return r;
    r = ifc_find(&l, name, &i);
    if (r == 0)
        *ret = i->ifindex;
    ifc_list_free(&l);
    return r;
}

static bool same_result(const struct route_preflight_result *a,
                        const struct route_preflight_result *b) {
    return a->ipv4_checked == b->ipv4_checked && a->ipv6_blocked == b->ipv6_blocked &&
           strcmp(a->ipv4_note, b->ipv4_note) == 0 && strcmp(a->ipv6_note, b->ipv6_note) == 0;
}

static int cmd_preflight(const char *ifname, const char *index_of, bool allow,
                         const struct expect *x) {
    int ifindex = 0;
    int r = lookup_ifindex(index_of ? index_of : ifname, &ifindex);
    if (r < 0) {
        printf("setup: interface '%s' not found: %s\n", index_of ? index_of : ifname,
               strerror(-r));
        return 1;
    }

    /* One-shot, then twice on one kept socket: all three must agree. */
    struct route_preflight_result res[3];
    char why[3][256];
    int rc[3];
    struct route_sock *rs = NULL;
    memset(res, 0xa5, sizeof(res));
    for (int k = 0; k < 3; k++)
        snprintf(why[k], sizeof(why[k]), "(unset)");
    rc[0] = route_preflight(ifname, ifindex, allow, &res[0], why[0], sizeof(why[0]));
    r = route_open(&rs);
    if (r < 0) {
        printf("route_open: %s\n", strerror(-r));
        return 1;
    }
    for (int k = 1; k < 3; k++)
        rc[k] = route_preflight_on(rs, ifname, ifindex, allow, &res[k], why[k], sizeof(why[k]));
    route_close(rs);

    for (int k = 1; k < 3; k++) {
        if (rc[k] != rc[0] || (rc[0] == 0 && !same_result(&res[0], &res[k])) ||
            (rc[0] != 0 && strcmp(why[0], why[k]) != 0))
            mismatch("kept-socket run %d differs from the one-shot run", k);
    }

    if (rc[0] == 0)
        printf("preflight %s: ok ipv4_checked=%d ipv6_blocked=%d note4=\"%s\" note6=\"%s\"\n",
               ifname, res[0].ipv4_checked, res[0].ipv6_blocked, res[0].ipv4_note,
               res[0].ipv6_note);
    else
        printf("preflight %s: %s \"%s\"\n", ifname, errname(rc[0]), why[0]);

    check_rc_why(x, rc[0], why[0]);
    if (rc[0] == 0) {
        if (x->ipv4_checked && res[0].ipv4_checked != (strcmp(x->ipv4_checked, "yes") == 0))
            mismatch("ipv4_checked is %d", res[0].ipv4_checked);
        if (x->ipv6 && res[0].ipv6_blocked != (strcmp(x->ipv6, "blocked") == 0))
            mismatch("ipv6_blocked is %d", res[0].ipv6_blocked);
        if (x->note4 && strcmp(res[0].ipv4_note, x->note4) != 0)
            mismatch("ipv4_note is \"%s\", expected \"%s\"", res[0].ipv4_note, x->note4);
        if (x->note6 && strcmp(res[0].ipv6_note, x->note6) != 0)
            mismatch("ipv6_note is \"%s\", expected \"%s\"", res[0].ipv6_note, x->note6);
    } else {
        /* ret_* untouched on failure. */
        unsigned char *p = (unsigned char *)&res[0];
        for (size_t k = 0; k < sizeof(res[0]); k++)
            if (p[k] != 0xa5) {
                mismatch("result written on failure");
                break;
            }
    }
    return fail_count_ ? 1 : 0;
}

static int cmd_validate(const char *ifname, const struct expect *x) {
    struct ifc_list l = {0};
    char why[256] = "(unset)";
    int r = ifc_list(&l);
    if (r < 0) {
        printf("ifc_list: %s\n", strerror(-r));
        return 1;
    }
    int rc = ifc_validate_vpn(&l, ifname, why, sizeof(why));
    ifc_list_free(&l);
    printf("validate %s: %s%s%s%s\n", ifname, rc == 0 ? "ok" : errname(rc), rc ? " \"" : "",
           rc ? why : "", rc ? "\"" : "");
    check_rc_why(x, rc, why);
    return fail_count_ ? 1 : 0;
}

static int cmd_oif(const char *fam, const char *text, const struct expect *x) {
    int family = strcmp(fam, "6") == 0 ? AF_INET6 : AF_INET;
    unsigned char addr[16];
    int ifindex = -1;
    if (inet_pton(family, text, addr) != 1) {
        fprintf(stderr, "bad address '%s'\n", text);
        return 2;
    }
    int rc = route_oif_for(family, addr, &ifindex);
    if (rc < 0) {
        printf("oif %s: %s\n", text, errname(rc));
        if (x->ok || rc != x->error)
            mismatch("expected %s", x->ok ? x->is : errname(x->error));
        if (ifindex != -1)
            mismatch("ret_ifindex written on failure");
        return fail_count_ ? 1 : 0;
    }
    char name[16] = "?";
    struct route_sock *rs = NULL;
    if (route_open(&rs) == 0) {
        if (route_link_name(rs, ifindex, name) < 0)
            snprintf(name, sizeof(name), "#%d", ifindex);
        route_close(rs);
    }
    printf("oif %s: %s (index %d)\n", text, name, ifindex);
    if (!x->ok)
        mismatch("expected %s", errname(x->error));
    else if (x->is && strcmp(name, x->is) != 0)
        mismatch("expected %s", x->is);
    return fail_count_ ? 1 : 0;
}

static void usage(void) {
    fputs("usage: route_preflight_test preflight|validate IFNAME ... | oif 4|6 ADDR ...\n",
          stderr);
    exit(2);
}

int main(int argc, char **argv) {
    struct expect x = {0};
    bool allow = false, have_expect = false;
    const char *index_of = NULL;

    if (argc < 3)
        usage();
    const char *cmd = argv[1];
    int first = strcmp(cmd, "oif") == 0 ? 4 : 3;
    if (argc < first)
        usage();
    for (int k = first; k < argc; k++) {
        const char *a = argv[k];
        const char *v = k + 1 < argc ? argv[k + 1] : NULL;
        if (strcmp(a, "--ok") == 0) {
            x.ok = have_expect = true;
            continue;
        }
        if (strcmp(a, "--allow-non-default") == 0) {
            allow = true;
            continue;
        }
        if (!v)
            usage();
        k++;
        if (strcmp(a, "--error") == 0) {
            x.error = parse_errname(v);
            have_expect = true;
        } else if (strcmp(a, "--is") == 0) {
            x.ok = have_expect = true;
            x.is = v;
        } else if (strcmp(a, "--why") == 0 && x.n_why < MAX_WHY) {
            x.why[x.n_why++] = v;
        } else if (strcmp(a, "--why-contains") == 0) {
            x.why_contains = v;
        } else if (strcmp(a, "--index-of") == 0) {
            index_of = v;
        } else if (strcmp(a, "--ipv4-checked") == 0) {
            x.ipv4_checked = v;
        } else if (strcmp(a, "--ipv6") == 0) {
            x.ipv6 = v;
        } else if (strcmp(a, "--note4") == 0) {
            x.note4 = v;
        } else if (strcmp(a, "--note6") == 0) {
            x.note6 = v;
        } else {
            usage();
        }
    }
    if (!have_expect)
        usage();

    if (strcmp(cmd, "preflight") == 0)
        return cmd_preflight(argv[2], index_of, allow, &x);
    if (strcmp(cmd, "validate") == 0)
        return cmd_validate(argv[2], &x);
    if (strcmp(cmd, "oif") == 0)
        return cmd_oif(argv[2], argv[3], &x);
    usage();
}
