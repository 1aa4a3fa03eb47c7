/* lyh doctor [--json]: would a guarded `lyh run` work here, and if not, what
 * to do. Each check is ok, warn or fail with one line of detail and one of
 * advice (docs/doctor.md explains them).
 *
 * What the daemon decides is asked of the daemon: Capabilities (protocol,
 * Landlock, seccomp, cgroup v2, nftables), Status (audit.db), and for each VPN
 * interface a Run with print_firewall, which runs the daemon's own interface,
 * policy and route preflight and starts nothing. What only this host's view
 * can tell (which interfaces exist, the resolver) is read locally and is
 * advisory. This file sends no network traffic (the resolver check uses a UDP
 * connect(), which only asks the kernel for a route) and never includes
 * platform/ code. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pb_encode.h>

#include "platform/linux/dns_config.h"
#include "cli/cli.h"
#include "cli/vpn_pick.h"
#include "common/dest_rule.h"
#include "common/lyh_limits.h"
#include "common/macros.h"

#define DOCTOR_MAX_CHECKS 32
#define DOCTOR_MAX_IFACES 8
#define DOCTOR_MAX_NS 3 /* resolv(5): MAXNS */

enum { ST_OK, ST_WARN, ST_FAIL };

struct check {
    char name[32];
    int status;
    char detail[512];
    char fix[256];
};

struct doctor {
    struct check c[DOCTOR_MAX_CHECKS];
    size_t n;
};

void usage_doctor(FILE *f) {
    fprintf(f, "Usage: lyh doctor [--json]\n"
               "Check what a guarded `lyh run` needs: the daemon, Landlock, seccomp, cgroup v2,\n"
               "nftables, a VPN interface carrying the default routes, the resolver and the\n"
               "audit log. Run it as the user who runs agents.\n"
               "Exit codes: 0 no check failed, 1 one failed, 69 the daemon is unreachable.\n");
}

static void add(struct doctor *dr, const char *name, int status, const char *fix, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));
static void add(struct doctor *dr, const char *name, int status, const char *fix, const char *fmt,
                ...) {
    va_list ap;

    if (dr->n >= DOCTOR_MAX_CHECKS)
        return;
    struct check *c = &dr->c[dr->n++];
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->status = status;
    snprintf(c->fix, sizeof(c->fix), "%s", fix ? fix : "");
    va_start(ap, fmt);
    vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
    va_end(ap);
}

/* ---- the daemon ---------------------------------------------------------------- */

static bool has_feature(const lianyaohu_v1_CapabilitiesReply *cap, const char *f) {
    for (pb_size_t i = 0; i < cap->features_count; i++)
        if (strcmp(cap->features[i], f) == 0)
            return true;
    return false;
}

/* What each Landlock ABI adds (kernel Documentation/userspace-api/landlock.rst). */
static const char *const ll_rights[] = {
    NULL,
    "filesystem access (read, write, execute, create, remove)",
    "+ rename/link across directories (refer)",
    "+ truncate",
    "+ TCP bind/connect rules",
    "+ ioctl on devices",
    "+ scoping of abstract unix sockets and signals",
    "+ audit logging controls",
};

static void check_capabilities(struct doctor *dr, const lianyaohu_v1_CapabilitiesReply *cap) {
    if (cap->protocol_version != LYH_PROTOCOL_VERSION)
        add(dr, "protocol", ST_FAIL, "install lyh and lyhd from the same release",
            "lyhd %s speaks protocol %u, lyh %s speaks %u", cap->build_version,
            cap->protocol_version, LYH_VERSION, LYH_PROTOCOL_VERSION);
    else if (strcmp(cap->build_version, LYH_VERSION) != 0)
        add(dr, "protocol", ST_WARN, "upgrade the older of lyh and lyhd",
            "protocol %u on both sides, but lyhd is %s and lyh %s", cap->protocol_version,
            cap->build_version, LYH_VERSION);
    else
        add(dr, "protocol", ST_OK, NULL, "lyhd and lyh %s, protocol %u", LYH_VERSION,
            LYH_PROTOCOL_VERSION);

    int abi = 0;
    for (pb_size_t i = 0; i < cap->features_count; i++)
        if (sscanf(cap->features[i], "landlock-abi-%d", &abi) == 1)
            break;
    if (abi <= 0) {
        add(dr, "landlock", ST_FAIL,
            "boot a kernel with CONFIG_SECURITY_LANDLOCK=y and landlock in lsm= (e.g. "
            "lsm=landlock,lockdown,yama,apparmor), then restart lyhd",
            "the kernel has no Landlock: lyhd refuses to run agents");
    } else {
        char rights[400] = "";
        size_t used = 0;
        for (int i = 1; i <= abi && i < (int)ARRAY_SIZE(ll_rights); i++) {
            int k = snprintf(rights + used, sizeof(rights) - used, "%s%s", i > 1 ? " " : "",
                             ll_rights[i]);
            if (k < 0 || (size_t)k >= sizeof(rights) - used)
                break;
            used += (size_t)k;
        }
        if (abi < 6)
            add(dr, "landlock", ST_FAIL,
                "boot Linux 6.12 or newer; or an admin accepts the gap with `min_landlock_abi = "
                "N` in the policy (lyh policy set), and every launch says so",
                "ABI %d: %s; without ABI 6 abstract Unix sockets and signals are not scoped (an "
                "agent could reach X11's abstract socket and signal your other processes), so "
                "lyh run refuses unless the admin policy accepts it",
                abi, rights);
        else
            add(dr, "landlock", ST_OK, NULL, "ABI %d: %s%s", abi, rights,
                abi >= (int)ARRAY_SIZE(ll_rights) ? " (and newer rights lyhd does not use)" : "");
    }

    if (has_feature(cap, "seccomp"))
        add(dr, "seccomp", ST_OK, NULL, "the syscall filter is installed in every session");
    else
        add(dr, "seccomp", ST_FAIL, "use a kernel with CONFIG_SECCOMP_FILTER and a lyhd built "
                                    "with libseccomp",
            "lyhd does not report seccomp");

    if (has_feature(cap, "cgroup2"))
        add(dr, "cgroup2", ST_OK, NULL,
            "cgroup v2 delegated to lyhd: each session gets its own cgroup and firewall chain");
    else
        add(dr, "cgroup2", ST_WARN,
            "run lyhd from its systemd unit (Delegate=yes) on a cgroup v2 host "
            "(/sys/fs/cgroup of type cgroup2)",
            "no cgroup v2 for lyhd: sessions of one user share a chain (uid+gid fallback scope)");

    if (has_feature(cap, "nftables"))
        add(dr, "nftables", ST_OK, NULL, "lyhd drives nftables over netlink");
    else
        add(dr, "nftables", ST_FAIL, "load nf_tables (modprobe nf_tables) and restart lyhd",
            "lyhd does not report nftables");
}

static void human_bytes(uint64_t b, char *out, size_t len) {
    if (b >= (1ull << 30))
        snprintf(out, len, "%.1f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(out, len, "%.1f MiB", (double)b / (double)(1ull << 20));
    else
        snprintf(out, len, "%llu KiB", (unsigned long long)(b >> 10));
}

static void check_status(struct doctor *dr, const lianyaohu_v1_StatusReply *st) {
    char size[32], cap[32], age[32];

    human_bytes(st->audit_db_bytes, size, sizeof(size));
    if (st->audit_max_bytes)
        human_bytes(st->audit_max_bytes, cap, sizeof(cap));
    else
        snprintf(cap, sizeof(cap), "no size cap");
    if (st->audit_retention_days)
        snprintf(age, sizeof(age), "%u days", st->audit_retention_days);
    else
        snprintf(age, sizeof(age), "kept forever");
    if (!st->audit_max_bytes && !st->audit_retention_days)
        add(dr, "audit", ST_WARN,
            "set --audit-max-age-days or --audit-max-mb on lyhd, or audit_retention_days in the "
            "policy",
            "audit.db in %s uses %s and has no retention: it grows without bound", st->state_dir,
            size);
    else if (st->audit_max_bytes && st->audit_db_bytes > st->audit_max_bytes / 10 * 9)
        add(dr, "audit", ST_WARN, "raise --audit-max-mb if you need a longer history",
            "audit.db in %s uses %s of its %s cap (retention %s): the oldest records are being "
            "pruned",
            st->state_dir, size, cap, age);
    else if (st->audit_flow_rate)
        add(dr, "audit", ST_OK, NULL,
            "audit.db in %s uses %s; retention %s, cap %s; each session's new flows are "
            "recorded one by one up to %u/s",
            st->state_dir, size, age, cap, st->audit_flow_rate);
    else /* an older lyhd: it does not say */
        add(dr, "audit", ST_OK, NULL, "audit.db in %s uses %s; retention %s, cap %s",
            st->state_dir, size, age, cap);
    /* lyhd tried what every launch does first (its cgroup) */
    if (st->launch_problem[0])
        add(dr, "launch", ST_FAIL, "do what the detail says, then run lyh doctor again", "%s",
            st->launch_problem);
    else
        add(dr, "launch", ST_OK, NULL, "lyhd can make a session's cgroup now");
}

/* ---- the route preflight (interfaces: vpn_list) --------------------------------- */

static bool encode_argv(pb_ostream_t *os, const pb_field_iter_t *field, void *const *arg) {
    const char *argv0 = *arg;
    return pb_encode_tag_for_field(os, field) &&
           pb_encode_string(os, (const pb_byte_t *)argv0, strlen(argv0));
}

/* The daemon's preflight for one interface: a Run with print_firewall. Returns
 * false when the connection broke. *usable says whether a run would start. */
static bool preflight(struct doctor *dr, struct lyh_client *c, const char *ifname,
                      lianyaohu_v1_Request *req, lianyaohu_v1_Response *resp, bool *usable) {
    char name[32];
    lianyaohu_v1_RunRequest *rr;

    snprintf(name, sizeof(name), "vpn:%.15s", ifname);
    *usable = false;
    memset(req, 0, sizeof(*req));
    req->which_method = lianyaohu_v1_Request_run_tag;
    rr = &req->method.run;
    rr->argv.funcs.encode = encode_argv;
    rr->argv.arg = (void *)"true";
    snprintf(rr->interface, sizeof(rr->interface), "%.15s", ifname);
    snprintf(rr->cwd, sizeof(rr->cwd), "/");
    rr->network_default = lianyaohu_v1_NetworkDefault_NETWORK_DEFAULT_ALLOW;
    rr->print_firewall = true;
    int r = cli_call(c, req, resp);
    if (r < 0) {
        add(dr, name, ST_FAIL, "check lyhd's log (journalctl -u lyhd)",
            "the daemon went away during the preflight: %s", strerror(-r));
        return false;
    }
    if (resp->code != lianyaohu_v1_Code_OK) {
        const char *fix = "connect the VPN so that it carries the default routes (both 0.0.0.0/1 "
                          "and 128.0.0.0/1 or 0.0.0.0/0), or use --allow-non-default-route";
        if (resp->code == lianyaohu_v1_Code_PERMISSION_DENIED)
            fix = getuid() == 0 ? "run lyh doctor as the user who runs agents"
                                : "ask the admin: the policy refuses it (lyh policy get)";
        add(dr, name, ST_WARN, fix, "lyh run --vpn %s would be refused: %s", ifname,
            resp->message);
        return true;
    }
    *usable = true;
    const char *fw = resp->which_result == lianyaohu_v1_Response_run_event_tag &&
                             resp->result.run_event.which_event == lianyaohu_v1_RunEvent_firewall_tag
                         ? resp->result.run_event.event.firewall
                         : "";
    /* The IPv6 block is rendered as a reject of every IPv6 packet, or (a
     * session as data: docs/guard-as-data.md) said in a comment line. */
    if (strstr(fw, "meta nfproto ipv6") || strstr(fw, "# IPv6 blocked"))
        add(dr, name, ST_WARN, "route IPv6 through the VPN (a ::/0 or 2000::/3 route on it) "
                               "if the agent needs IPv6",
            "usable: IPv4 leaves through %s; IPv6 does not, so sessions get no IPv6", ifname);
    else
        add(dr, name, ST_OK, NULL, "usable: IPv4 and IPv6 leave through %s", ifname);
    return true;
}

/* ---- the resolver ---------------------------------------------------------------- */

/* Every DNS query of a session goes to lyhd, which asks the VPN interface's
 * resolver through it: say, per VPN interface, which resolver a launch will
 * find (the same search as lyhd's: the admin's dns_resolvers routed through
 * it when the policy names any, else the system's), or that it will refuse. */
static void check_resolver(struct doctor *dr, const struct vpn_if *v, size_t nv,
                           const struct dr_rule *adm, size_t nadm) {
    char detail[900] = "";
    size_t used = 0, missing = 0;
    const char *fix = NULL;

    for (size_t i = 0; i < nv; i++) {
        struct dr_rule res[DNSCFG_MAX];
        char source[80] = "", what[400], list[200] = "";
        size_t n = 0;
        unsigned ifindex = if_nametoindex(v[i].name);
        if (!v[i].up || !v[i].addressed)
            continue;
        if (nadm) {
            for (size_t k = 0; k < nadm && n < DNSCFG_MAX; k++)
                if (vpn_routed_via(adm[k].family, adm[k].addr, (void *)&v[i]))
                    res[n++] = adm[k];
            snprintf(source, sizeof(source), "the admin policy");
        } else if (ifindex == 0 ||
                   dnscfg_system(v[i].name, (int)ifindex, "/etc/resolv.conf", vpn_routed_via, (void *)&v[i],
                                 res, &n, source, sizeof(source)) < 0) {
            n = 0;
        }
        for (size_t k = 0; k < n; k++) {
            char a[INET6_ADDRSTRLEN];
            size_t l = strlen(list);
            if (inet_ntop(res[k].family, res[k].addr, a, sizeof(a)))
                snprintf(list + l, sizeof(list) - l, "%s%s", l ? " " : "", a);
        }
        if (n)
            snprintf(what, sizeof(what), "%.16s: lyhd asks %.200s (from %.80s) through it",
                     v[i].name, list, source);
        else {
            snprintf(what, sizeof(what), "%.16s: no resolver known, `lyh run --vpn %.16s` refuses",
                     v[i].name, v[i].name);
            missing++;
        }
        int k = snprintf(detail + used, sizeof(detail) - used, "%s%s", used ? "; " : "", what);
        if (k > 0 && (size_t)k < sizeof(detail) - used)
            used += (size_t)k;
    }
    if (missing && nadm)
        fix = "none of the admin's resolvers (dns_resolvers, lyh policy get) is behind it: ask "
              "the admin, or use the interface they are behind";
    else if (missing)
        fix = "name the VPN's DNS server: lyh run --dns ADDRESS, or dns = [\"ADDRESS\"] under "
              "[network] in your config (a private address inside the tunnel works)";
    if (used == 0)
        add(dr, "resolver", ST_WARN, "bring a VPN interface up (each needs a known resolver)",
            "no VPN interface is up to resolve through");
    else
        add(dr, "resolver", missing ? ST_WARN : ST_OK, fix, "%s", detail);
}

/* ---- output ---------------------------------------------------------------------- */

static const char *const st_name[] = {"ok", "warn", "fail"};

static bool print(const struct doctor *dr, bool json) {
    bool ok = true;

    for (size_t i = 0; i < dr->n; i++)
        ok = ok && dr->c[i].status != ST_FAIL;
    if (json) {
        printf("{\"checks\":[");
        for (size_t i = 0; i < dr->n; i++) {
            printf("%s{\"name\":", i ? "," : "");
            json_string(stdout, dr->c[i].name);
            printf(",\"status\":\"%s\",\"detail\":", st_name[dr->c[i].status]);
            json_string(stdout, dr->c[i].detail);
            printf(",\"fix\":");
            json_string(stdout, dr->c[i].fix);
            printf("}");
        }
        printf("],\"ok\":%s}\n", ok ? "true" : "false");
        return ok;
    }
    for (size_t i = 0; i < dr->n; i++) {
        const struct check *c = &dr->c[i];
        printf("%-4s  %-10s %s%s%s\n", st_name[c->status], c->name, c->detail,
               c->fix[0] ? " -> " : "", c->fix);
    }
    printf(ok ? "A guarded lyh run should work here.\n"
              : "A guarded lyh run would fail: fix the checks marked fail.\n");
    return ok;
}

int cmd_doctor(struct cli *cli, int argc, char **argv) {
    bool json, connected = false, reachable = false, usable_any = false;
    struct vpn_if vpn[DOCTOR_MAX_IFACES];
    struct lyh_client *c = NULL;
    int rc;

    rc = cli_json_only(cli, argc, argv, "doctor", usage_doctor, &json);
    if (rc >= 0)
        return rc;
    _cleanup_free_ struct doctor *dr = calloc(1, sizeof(*dr));
    _cleanup_free_ lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    _cleanup_free_ lianyaohu_v1_Response *resp = calloc(1, sizeof(*resp));
    if (!dr || !req || !resp)
        return EXIT_DAEMON_ERROR;

    /* 0. Who asks: lyhd runs no agents for root (unless --allow-root-run),
     * so what a root doctor finds is not what the user's lyh run meets. */
    if (getuid() == 0)
        add(dr, "user", ST_WARN, "run lyh doctor and lyh run as the user who runs agents",
            "you are root: lyh runs agents as a normal user (lyhd refuses root's sessions "
            "unless it was started with --allow-root-run)");

    /* 1. The daemon: Capabilities, then Status. cli_connect says on stderr
     * why it cannot connect and how to start lyhd. */
    if (cli_connect(cli, &c) == EXIT_OK) {
        connected = true;
        req->which_method = lianyaohu_v1_Request_capabilities_tag;
        int r = cli_call(c, req, resp);
        if (r < 0 || resp->code != lianyaohu_v1_Code_OK ||
            resp->which_result != lianyaohu_v1_Response_capabilities_tag) {
            add(dr, "daemon", ST_FAIL,
                "check that lyh and lyhd come from the same release and lyhd's log",
                "lyhd on %s does not answer Capabilities: %s", cli->socket_path,
                r < 0 ? strerror(-r) : resp->message);
        } else {
            reachable = true;
            add(dr, "daemon", ST_OK, NULL, "lyhd %s answers on %s",
                resp->result.capabilities.build_version, cli->socket_path);
            check_capabilities(dr, &resp->result.capabilities);
        }
    } else {
        add(dr, "daemon", ST_FAIL,
            "start it as root with `lyhd` (or `systemctl start lyhd`), or point lyh at its "
            "socket with --socket PATH or LYH_SOCKET",
            "lyhd is unreachable on %s", cli->socket_path);
    }
    if (reachable) {
        memset(req, 0, sizeof(*req));
        req->which_method = lianyaohu_v1_Request_status_tag;
        int r = cli_call(c, req, resp);
        if (r == 0 && resp->code == lianyaohu_v1_Code_OK &&
            resp->which_result == lianyaohu_v1_Response_status_tag)
            check_status(dr, &resp->result.status);
        else
            add(dr, "audit", ST_WARN, "check lyhd's log", "Status failed: %s",
                r < 0 ? strerror(-r) : resp->message);
    }

    /* 2. VPN interfaces, each through the daemon's preflight. */
    struct vpn_names vnames = {.n = 0};
    char pats[400];
    if (reachable)
        vpn_names_from_policy(cli, &vnames);
    vpn_names_text(&vnames, pats, sizeof(pats));
    size_t nv = vpn_list(&vnames, vpn, ARRAY_SIZE(vpn));
    char names[160] = "";
    size_t used = 0;
    for (size_t i = 0; i < nv; i++) {
        int k = snprintf(names + used, sizeof(names) - used, "%s%s%s", used ? ", " : "",
                         vpn[i].name,
                         !vpn[i].up ? " (down)" : !vpn[i].addressed ? " (no address)" : "");
        if (k > 0 && (size_t)k < sizeof(names) - used)
            used += (size_t)k;
    }
    for (size_t i = 0; i < nv && reachable; i++) {
        bool usable = false;
        if (!vpn[i].up || !vpn[i].addressed)
            continue;
        if (!preflight(dr, c, vpn[i].name, req, resp, &usable))
            reachable = false;
        usable_any = usable_any || usable;
    }
    if (nv == 0)
        add(dr, "vpn", ST_FAIL, "connect your VPN (OpenVPN, WireGuard, ...), then run lyh doctor "
                                "again",
            "no VPN interface (%s) in this network namespace", pats);
    else if (usable_any)
        add(dr, "vpn", ST_OK, NULL, "VPN interfaces: %s", names);
    else if (!reachable)
        add(dr, "vpn", ST_WARN, "start lyhd, then run lyh doctor again",
            "VPN interfaces: %s; not checked against lyhd's route preflight", names);
    else if (getuid() == 0 && reachable)
        add(dr, "vpn", ST_WARN, "run lyh doctor as the user who runs agents",
            "VPN interfaces: %s; lyhd runs no agents for root, so the preflight was refused",
            names);
    else
        add(dr, "vpn", ST_FAIL, "see the vpn:IFACE lines; bring the VPN up with its default routes",
            "VPN interfaces: %s; none would be accepted by lyh run", names);

    /* 3. The resolver, as a session would see it (the admin's, if any). */
    struct dr_rule adm[8];
    size_t nadm = 0;
    if (reachable) {
        memset(req, 0, sizeof(*req));
        req->which_method = lianyaohu_v1_Request_policy_get_tag;
        if (cli_call(c, req, resp) == 0 && resp->code == lianyaohu_v1_Code_OK &&
            resp->which_result == lianyaohu_v1_Response_policy_tag) {
            const lianyaohu_v1_Policy *pm = &resp->result.policy.policy;
            for (pb_size_t k = 0; k < pm->dns_resolvers_count && nadm < ARRAY_SIZE(adm); k++) {
                struct dr_rule *a = &adm[nadm];
                memset(a, 0, sizeof(*a));
                a->family = strchr(pm->dns_resolvers[k], ':') ? AF_INET6 : AF_INET;
                if (inet_pton(a->family, pm->dns_resolvers[k], a->addr) == 1)
                    nadm++;
            }
        }
    }
    check_resolver(dr, vpn, nv, adm, nadm);

    lyh_client_close(c);
    bool ok = print(dr, json);
    if (!connected)
        return EXIT_UNAVAILABLE;
    return ok ? EXIT_OK : EXIT_DAEMON_ERROR;
}
