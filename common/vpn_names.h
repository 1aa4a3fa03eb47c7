/* The interface names lyh takes for VPNs by default: the built-in admin
 * policy's allowed_interface_patterns (daemon/policy.c, cli/policy_toml.c)
 * and the names lyh's picker and lyh doctor offer. fnmatch(3) patterns.
 * OpenVPN and most clients: tun*; WireGuard (wg-quick, NetworkManager):
 * wg*; Tailscale: tailscale*; NordVPN: nordlynx; Proton VPN: proton*;
 * Mullvad: mullvad-*. Not ppp*: on a DSL or mobile-broadband host ppp0 is
 * the ISP uplink itself (an admin whose L2TP/PPTP VPN is ppp* adds it). An
 * admin widens or narrows the list with the policy; lyhd decides by it. */
#ifndef LYH_COMMON_VPN_NAMES_H
#define LYH_COMMON_VPN_NAMES_H

#include <fnmatch.h>
#include <stdbool.h>
#include <stddef.h>

static const char *const lyh_vpn_name_defaults[] = {
    "tun*", "wg*", "tailscale*", "nordlynx", "proton*", "mullvad-*",
};
#define LYH_VPN_NAME_DEFAULTS (sizeof(lyh_vpn_name_defaults) / sizeof(lyh_vpn_name_defaults[0]))

/* Does name match one of the default patterns? */
static inline bool lyh_vpn_name_default(const char *name) {
    for (size_t i = 0; i < LYH_VPN_NAME_DEFAULTS; i++)
        if (fnmatch(lyh_vpn_name_defaults[i], name, 0) == 0)
            return true;
    return false;
}

#endif
