/* Choosing the VPN interface on the client side (advisory: the daemon checks
 * the interface and its routes again). */
#ifndef LYH_VPN_PICK_H
#define LYH_VPN_PICK_H

#include <stdbool.h>
#include <stddef.h>

/* explicit (--vpn) wins; else the only candidate; else the picker when
 * interactive, a numbered prompt when stdin is a terminal (--no-tui), and a
 * refusal listing the candidates when it is not (stdin is then the agent's,
 * never read here). Returns an exit code (EXIT_OK with the name in out). */
int vpn_pick(const char *explicit_name, bool interactive, char *out, size_t outlen);

#endif
