/* Network interfaces of the current network namespace, as plain data, and
 * the rules for which of them may serve as a session's VPN interface. One
 * interface for both platforms: Linux (any plain name but lo, the admin
 * policy deciding which are VPNs; links from AF_PACKET entries) and Darwin
 * (utun<N>; links from AF_LINK entries).
 *
 * Return convention: 0 or -errno. ret_* out-parameters are written only on
 * success. Nothing here logs. `why`/`whylen` receive one human sentence
 * naming the interface (may be NULL/0 when the caller does not want it);
 * they are written on failure only and are always NUL-terminated.
 * Nothing blocks except ifc_list(), which asks the kernel (getifaddrs). */
#ifndef LYH_IFACES_H
#define LYH_IFACES_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ifaddrs;

/* Kernel IFNAMSIZ: 15 characters plus the NUL. */
#define IFC_NAME_MAX 15

struct ifc_addr {
    int family;   /* AF_INET or AF_INET6 */
    uint8_t prefixlen;
    bool has_peer; /* point-to-point peer address below is set */
    union {
        struct in_addr v4;
        struct in6_addr v6;
    } addr, peer;
};

struct ifc {
    char name[IFC_NAME_MAX + 1];
    int ifindex;       /* 0 when unknown (no link entry was seen) */
    unsigned flags;    /* raw IFF_* bits as the kernel reported them */
    bool up;           /* IFF_UP: administratively up */
    bool running;      /* IFF_RUNNING: operationally up */
    bool carrier;      /* IFF_LOWER_UP; a tun nobody has opened has none */
    bool pointopoint;  /* IFF_POINTOPOINT */
    bool loopback;     /* IFF_LOOPBACK */
    struct ifc_addr *addrs; /* owned, n_addrs entries, IPv4 and IPv6 only */
    size_t n_addrs;
};

struct ifc_list {
    struct ifc *items; /* owned, n entries, in the order the kernel listed them */
    size_t n;
};

/* Snapshot the interfaces of the calling thread's network namespace.
 * On success *ret owns its arrays; release with ifc_list_free(). Every
 * interface has its ifindex, except one that vanished while listing (0). */
int ifc_list(struct ifc_list *ret);

/* Pure: build a list from a getifaddrs()-shaped chain (which the caller
 * still owns). AF_PACKET (Linux) or AF_LINK (Darwin) entries give flags and
 * ifindex; AF_INET/AF_INET6
 * entries give addresses; an entry without ifa_addr only says that the
 * interface exists; other families are ignored. glibc makes no AF_PACKET
 * entry for a link without a hardware address (tun, WireGuard), so such an
 * interface keeps ifindex 0 here; ifc_list() fills it in. An IPv4 alias
 * label such as "eth0:1" is folded into its interface "eth0". A name that
 * is empty or longer than IFC_NAME_MAX is refused (-EINVAL): the kernel
 * never produces one. -ENOMEM on allocation failure. */
int ifc_list_from_ifaddrs(const struct ifaddrs *head, struct ifc_list *ret);

/* Free what the list owns and zero it. Accepts NULL, a zeroed list and a
 * half-built one. */
void ifc_list_free(struct ifc_list *l);

/* Find an interface by exact name. *ret points into l (valid until
 * ifc_list_free). -ENODEV when absent, -EINVAL for a NULL name. */
int ifc_find(const struct ifc_list *l, const char *name, const struct ifc **ret);

/* Number of addresses that can carry traffic off the host: everything except
 * IPv4 169.254.0.0/16 and IPv6 fe80::/10 (link-local addresses appear on any
 * Ethernet-like link the moment it is up; they say nothing about a VPN). */
size_t ifc_routable_addr_count(const struct ifc *i);

/* Whose naming rule: the VPN interfaces each platform's guard supports. */
enum ifc_os {
    IFC_OS_LINUX = 1, /* tun* or wg* (tun devices, WireGuard) */
    IFC_OS_DARWIN,    /* utun<N>: the only tunnels macOS VPN clients make */
};
/* The platform this build runs on. */
enum ifc_os ifc_os_native(void);

/* Check a name against the rules for a VPN interface: 1..15 characters of
 * [A-Za-z0-9_.-], not "." or "..", and then Linux: not "lo" (which names
 * are VPNs is the admin policy's allowed_interface_patterns); Darwin: "utun"
 * and 1..5 digits (pf_render.h, pfr_iface_valid). -EINVAL with the reason in
 * why otherwise. Pure. */
int ifc_name_check_for(enum ifc_os os, const char *name, char *why, size_t whylen);
/* ifc_name_check_for(ifc_os_native(), ...) */
int ifc_name_check(const char *name, char *why, size_t whylen);

/* ifc_name_check() == 0. */
bool ifc_name_supported(const char *name);

/* A usable VPN interface: supported name, present in l, administratively up,
 * at least one routable address. Carrier is not required (a tun whose
 * daemon is reconnecting has none and is still the right interface).
 * Errors: -EINVAL unsupported or malformed name, -ENODEV no such interface,
 * -ENETDOWN interface down, -EADDRNOTAVAIL no routable address. Pure. */
int ifc_validate_vpn(const struct ifc_list *l, const char *name, char *why, size_t whylen);

#endif
