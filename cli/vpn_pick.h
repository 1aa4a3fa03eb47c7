/* Choosing the VPN interface on the client side (advisory: the daemon checks
 * the interface and its routes again). */
#ifndef LYH_VPN_PICK_H
#define LYH_VPN_PICK_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A VPN-named interface (common/vpn_names.h) of this network namespace, as
 * getifaddrs (the kernel) shows it. */
struct vpn_if {
    char name[IF_NAMESIZE];
    bool up;        /* IFF_UP */
    bool running;   /* IFF_RUNNING: a carrier */
    bool addressed; /* an address other than link-local */
    struct in_addr a4[4]; /* the first addresses, link-local ones too */
    size_t n4;
    struct in6_addr a6[4];
    size_t n6;
    char peer[INET6_ADDRSTRLEN]; /* a point-to-point link's far end, "" none */
};

/* Which names are VPNs: the admin policy's allowed_interface_patterns
 * (fnmatch patterns, as lyhd matches them) when lyh could read them, else
 * the defaults (common/vpn_names.h). Never a loopback interface. */
struct vpn_names {
    char v[32][16];
    size_t n; /* 0: the defaults */
};

/* The policy's patterns into *ret (ret->n 0 when lyhd cannot be asked or the
 * policy names none: the defaults apply). Asks lyhd (PolicyGet) on a
 * connection of its own; prints nothing. */
struct cli;
void vpn_names_from_policy(struct cli *cli, struct vpn_names *ret);
/* "tun*, wg*, ..." (the patterns in force) into buf. */
void vpn_names_text(const struct vpn_names *names, char *buf, size_t len);

/* Up to max of them (up or down, addressed or not) into out, in getifaddrs
 * order. Returns how many; 0 when getifaddrs fails. Needs no privileges.
 * names NULL: the defaults. */
size_t vpn_list(const struct vpn_names *names, struct vpn_if *out, size_t max);

/* Would the kernel send to addr (family's length) out of the interface ud
 * points to (a const struct vpn_if): is the source address it picks one of
 * the interface's? A UDP connect() that sends nothing; dnscfg_routed_fn. */
bool vpn_routed_via(int family, const uint8_t *addr, void *ud);

/* The name that picks proxy-only mode (no interface; cli/proxy.h): an
 * interface really called "none" cannot be chosen by name. */
#define VPN_PICK_NONE "none"

struct vpn_pick_in {
    const char *explicit_name; /* --vpn or the config's vpn_interface: wins, NULL none */
    bool interactive;          /* the full-screen picker on /dev/tty */
    bool allow_non_default_route; /* an interface without the IPv4 default is usable */
    const char *save_path; /* the user's config file, where `s` saves the pick as
                            * [defaults] vpn_interface; NULL: not offered */
    const struct vpn_names *names; /* which names are VPNs; NULL: the defaults */
};

/* explicit wins; else the only candidate; else the picker when interactive
 * (a detail pane for the row under the marker; rows lyh run would refuse are
 * shown with the fix and cannot be chosen), a numbered prompt when stdin is a
 * terminal (--no-tui), and a refusal listing the candidates when it is not
 * (stdin is then the agent's, never read here). Returns an exit code
 * (EXIT_OK with the name in out). */
int vpn_pick(const struct vpn_pick_in *in, char *out, size_t outlen);

#endif
