/* Choosing the VPN interface on the client side (advisory: the daemon checks
 * the interface and its routes again). */
#ifndef LYH_VPN_PICK_H
#define LYH_VPN_PICK_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

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
};

/* Up to max of them (up or down, addressed or not) into out, in getifaddrs
 * order. Returns how many; 0 when getifaddrs fails. Needs no privileges. */
size_t vpn_list(struct vpn_if *out, size_t max);

/* explicit (--vpn) wins; else the only candidate; else the picker when
 * interactive, a numbered prompt when stdin is a terminal (--no-tui), and a
 * refusal listing the candidates when it is not (stdin is then the agent's,
 * never read here). Returns an exit code (EXIT_OK with the name in out). */
int vpn_pick(const char *explicit_name, bool interactive, char *out, size_t outlen);

#endif
