/* dns_config: which resolver a session's DNS forwarder asks, from what the
 * system says about the VPN interface.
 *
 * Sources, in order (the first that names a usable resolver wins):
 *   1. systemd-resolved's per-link state, /run/systemd/resolve/netif/<ifindex>
 *      (SERVERS= or DNS=), written for the links a VPN client configured;
 *   2. resolvconf's record of the interface, /run/resolvconf/interface/<name>
 *      or /run/resolvconf/interfaces/<name> (openresolv), where name is the
 *      interface, "<iface>.<anything>" (OpenVPN's "tun0.openvpn") or
 *      "tun.<iface>" (wg-quick);
 *   3. the nameservers of resolv.conf whose route goes through the interface
 *      (a resolver the routing table would send elsewhere, such as a LAN
 *      router or a loopback stub, is never taken: lyhd asks through the VPN);
 *   4. where resolv.conf names only a local stub: the upstream lists beside
 *      it, NetworkManager's /run/NetworkManager/no-stub-resolv.conf, then
 *      systemd-resolved's /run/systemd/resolve/resolv.conf, each filtered
 *      by the route as in 3.
 * The parsers are pure; dnscfg_system() does the reading. lyhd and lyh doctor
 * share it (library lyh_dnscfg), so doctor says what a launch will find.
 * 0 or -errno. */
#ifndef LYH_PLATFORM_LINUX_DNS_CONFIG_H
#define LYH_PLATFORM_LINUX_DNS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/linux/nft_render.h"

#define DNSCFG_MAX 4

/* Does the routing table send packets to addr (family's length) through the
 * interface? The caller's answer (lyhd asks rtnetlink; lyh doctor asks the
 * kernel which source address it would use). */
typedef bool (*dnscfg_routed_fn)(int family, const uint8_t *addr, void *ud);

/* One resolver address, as text: an IPv4 or IPv6 literal (no port, no
 * scope), not unspecified, loopback, multicast or link-local (lyhd sends
 * from a socket bound to the VPN interface: a loopback or link-scoped
 * resolver cannot be reached so). -EINVAL otherwise. */
int dnscfg_parse_addr(const char *text, struct dr_rule *ret);

/* The resolvers of a resolv.conf ("nameserver ADDR" lines; comments and
 * other lines skipped, addresses dnscfg_parse_addr refuses skipped), at most
 * max. Also used for resolvconf's interface records, which have the same
 * form. */
size_t dnscfg_parse_resolv_conf(const char *text, struct dr_rule *out, size_t max);

/* The servers of a systemd-resolved link state file ("SERVERS=a b" or
 * "DNS=a b"; an entry may carry "%ifindex", "#name" or be "[addr]:port":
 * taken without those, and only at port 53). */
size_t dnscfg_parse_resolved_link(const char *text, struct dr_rule *out, size_t max);

/* Find the system's resolvers for iface (see above). resolv_conf: path of
 * resolv.conf. *ret_n = 0 when none is known; source says where they came
 * from ("systemd-resolved", "resolvconf", "/etc/resolv.conf"). */
int dnscfg_system(const char *iface, int ifindex, const char *resolv_conf, dnscfg_routed_fn routed,
                  void *ud, struct dr_rule out[static DNSCFG_MAX], size_t *ret_n, char *source,
                  size_t sourcelen);
/* The same with the /run paths under root ("" for the real ones; tests give
 * a directory of their own). resolv_conf is taken as given. */
int dnscfg_system_at(const char *root, const char *iface, int ifindex, const char *resolv_conf,
                     dnscfg_routed_fn routed, void *ud, struct dr_rule out[static DNSCFG_MAX],
                     size_t *ret_n, char *source, size_t sourcelen);

#endif
