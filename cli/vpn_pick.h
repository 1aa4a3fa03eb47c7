/* Choosing the VPN interface on the client side (advisory: the daemon checks
 * the interface and its routes again). */
#ifndef LYH_VPN_PICK_H
#define LYH_VPN_PICK_H

#include <stdbool.h>
#include <stddef.h>

/* explicit (--vpn) wins; else the only candidate; else a numbered prompt
 * (on the terminal when interactive, else on stdin/stderr). Returns an exit
 * code (EXIT_OK with the name in out). */
int vpn_pick(const char *explicit_name, bool interactive, char *out, size_t outlen);

#endif
