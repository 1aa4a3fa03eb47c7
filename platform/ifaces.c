/* Interface enumeration and the VPN-interface rules. Owns the ifc_list arrays
 * it builds and the getifaddrs() snapshot while it copies from it. It never
 * changes an interface or logs, and opens no socket of its own (getifaddrs and
 * if_nametoindex open glibc's, CLOEXEC, and close them); everything except
 * ifc_list() is a pure function of its arguments so it can be tested on a
 * hand-built ifaddrs chain.
 *
 * Why these checks are enough for their job: this file only answers "is this
 * the interface the user means, and is it configured". It is not what keeps
 * traffic on the VPN; the nftables session chain accepts only oifname ==
 * the VPN and the route preflight (route.c) checks where the kernel would
 * send packets. A wrong answer here can refuse a launch or start one whose
 * traffic is refused, never let traffic out elsewhere. */
#include "platform/ifaces.h"
#include "common/closest.h"
#include "common/macros.h"
#include "common/why.h"

#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
/* The Darwin branches also build on Linux in the syntax check
 * (-DLYH_DARWIN_STUBS, platform/darwin/darwin_sys.h). */
#if defined(__APPLE__) || defined(LYH_DARWIN_STUBS)
#define IFC_DARWIN 1
#include "platform/darwin/darwin_sys.h" /* struct sockaddr_dl: AF_LINK entries */
#else
#include <netpacket/packet.h> /* struct sockaddr_ll: AF_PACKET entries */
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/macros.h"

#include "platform/darwin/pf_render.h" /* pfr_iface_valid: the utun rule */

#if defined(IFC_DARWIN)
/* Darwin reports no lower-layer state; a running utun has its peer. */
#define IFC_LINK_FAMILY AF_LINK
#define IFC_CARRIER     IFF_RUNNING
#else
#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP 0x10000 /* <linux/if.h>; not in glibc's <net/if.h> */
#endif
#define IFC_LINK_FAMILY AF_PACKET
#define IFC_CARRIER     IFF_LOWER_UP
#endif


void ifc_list_free(struct ifc_list *l) {
    if (!l)
        return;
    for (size_t k = 0; k < l->n && l->items; k++)
        free(l->items[k].addrs);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

static void ifc_list_freep(struct ifc_list *l) { ifc_list_free(l); }

/* Make room for element n (0-based) of an array of *cap elements of size
 * sz. Returns the array, possibly moved, or NULL on overflow or allocation
 * failure (arr is then unchanged and still the caller's). Doubling keeps
 * the number of reallocations logarithmic. */
static void *grow(void *arr, size_t *cap, size_t n, size_t sz) {
    if (n < *cap)
        return arr;
    size_t ncap = *cap ? *cap * 2 : 8;
    if (ncap < *cap)
        return NULL;
    void *p = reallocarray(arr, ncap, sz);
    if (p)
        *cap = ncap;
    return p;
}

/* The interface an entry belongs to. glibc reports an IPv4 address under its
 * label, which is "eth0:1" for an alias; the kernel forbids ':' in interface
 * names, so everything before the first ':' is the interface. */
static int base_name(const char *ifa_name, char out[IFC_NAME_MAX + 1]) {
    if (!ifa_name)
        return -EINVAL;
    size_t len = strcspn(ifa_name, ":");
    if (len == 0 || len > IFC_NAME_MAX)
        return -EINVAL;
    memcpy(out, ifa_name, len);
    out[len] = '\0';
    return 0;
}

static uint8_t mask_prefixlen(const uint8_t *mask, size_t bytes) {
    /* Count leading one bits. A non-contiguous mask (never produced by the
     * kernel, which stores a prefix length) stops at its first zero bit. */
    uint8_t n = 0;
    for (size_t b = 0; b < bytes; b++) {
        for (int bit = 7; bit >= 0; bit--) {
            if (!(mask[b] & (1u << bit)))
                return n;
            n++;
        }
    }
    return n;
}

static void fill_addr(struct ifc_addr *a, const struct ifaddrs *p, int family) {
    memset(a, 0, sizeof(*a));
    a->family = family;
    const struct sockaddr *mask = p->ifa_netmask;
    const struct sockaddr *peer = (p->ifa_flags & IFF_POINTOPOINT) ? p->ifa_dstaddr : NULL;

    if (family == AF_INET) {
        a->addr.v4 = ((const struct sockaddr_in *)p->ifa_addr)->sin_addr;
        a->prefixlen = 32;
        if (mask && mask->sa_family == AF_INET)
            a->prefixlen = mask_prefixlen(
                (const uint8_t *)&((const struct sockaddr_in *)mask)->sin_addr, 4);
        if (peer && peer->sa_family == AF_INET) {
            a->peer.v4 = ((const struct sockaddr_in *)peer)->sin_addr;
            a->has_peer = true;
        }
    } else {
        a->addr.v6 = ((const struct sockaddr_in6 *)p->ifa_addr)->sin6_addr;
        a->prefixlen = 128;
        if (mask && mask->sa_family == AF_INET6)
            a->prefixlen = mask_prefixlen(
                (const uint8_t *)&((const struct sockaddr_in6 *)mask)->sin6_addr, 16);
        if (peer && peer->sa_family == AF_INET6) {
            a->peer.v6 = ((const struct sockaddr_in6 *)peer)->sin6_addr;
            a->has_peer = true;
        }
    }
}

static void set_flags(struct ifc *i, unsigned flags) {
    i->flags = flags;
    i->up = flags & IFF_UP;
    i->running = flags & IFF_RUNNING;
    i->carrier = flags & IFC_CARRIER;
    i->pointopoint = flags & IFF_POINTOPOINT;
    i->loopback = flags & IFF_LOOPBACK;
}

int ifc_list_from_ifaddrs(const struct ifaddrs *head, struct ifc_list *ret) {
    _cleanup_(ifc_list_freep) struct ifc_list l = {0};
    size_t cap = 0;
    /* Address capacities, parallel to l.items; freed on every path. */
    _cleanup_free_ size_t *acap = NULL;
    size_t acap_cap = 0;
    int r;

    for (const struct ifaddrs *p = head; p; p = p->ifa_next) {
        char name[IFC_NAME_MAX + 1];
        r = base_name(p->ifa_name, name);
        if (r < 0)
            return r;

        int family = p->ifa_addr ? p->ifa_addr->sa_family : AF_UNSPEC;
        if (family != AF_UNSPEC && family != IFC_LINK_FAMILY && family != AF_INET &&
            family != AF_INET6)
            continue;

        struct ifc *i = NULL;
        size_t idx = 0;
        for (idx = 0; idx < l.n; idx++)
            if (strcmp(l.items[idx].name, name) == 0) {
                i = &l.items[idx];
                break;
            }
        if (!i) {
            void *p_items = grow(l.items, &cap, l.n, sizeof(*l.items));
            if (!p_items)
                return -ENOMEM;
            l.items = p_items;
            void *p_acap = grow(acap, &acap_cap, l.n, sizeof(*acap));
            if (!p_acap)
                return -ENOMEM;
            acap = p_acap;
            idx = l.n++;
            i = &l.items[idx];
            memset(i, 0, sizeof(*i));
            acap[idx] = 0;
            memcpy(i->name, name, sizeof(name));
            set_flags(i, p->ifa_flags);
        }

        switch (family) {
        case IFC_LINK_FAMILY:
            /* The link entry is authoritative for flags and index. */
            set_flags(i, p->ifa_flags);
#if defined(IFC_DARWIN)
            i->ifindex = ((const struct sockaddr_dl *)p->ifa_addr)->sdl_index;
#else
            i->ifindex = ((const struct sockaddr_ll *)p->ifa_addr)->sll_ifindex;
#endif
            break;
        case AF_UNSPEC:
            /* glibc's link entry for a link without a hardware address. */
            set_flags(i, p->ifa_flags);
            break;
        case AF_INET:
        case AF_INET6: {
            void *p_addrs = grow(i->addrs, &acap[idx], i->n_addrs, sizeof(*i->addrs));
            if (!p_addrs)
                return -ENOMEM;
            i->addrs = p_addrs;
            fill_addr(&i->addrs[i->n_addrs++], p, family);
            break;
        }
        default:
            break;
        }
    }

    *ret = l;
    l = (struct ifc_list){0};
    return 0;
}

int ifc_list(struct ifc_list *ret) {
    struct ifaddrs *head = NULL;

    /* glibc's getifaddrs opens its netlink socket with SOCK_CLOEXEC and
     * closes it before returning. */
    if (getifaddrs(&head) < 0)
        return -errno;
    _cleanup_(ifc_list_freep) struct ifc_list l = {0};
    int r = ifc_list_from_ifaddrs(head, &l);
    freeifaddrs(head);
    if (r < 0)
        return r;

    /* glibc builds the AF_PACKET entry, and with it the index, only for a
     * link that has a hardware address; tun and WireGuard links have none.
     * Ask for the index by name (glibc's helper socket is SOCK_CLOEXEC). An
     * interface that vanished in between keeps index 0; a name reused in
     * between yields the new link's index, which route_preflight_on()
     * re-checks against the name. */
    for (size_t k = 0; k < l.n; k++)
        if (l.items[k].ifindex == 0) {
            unsigned idx = if_nametoindex(l.items[k].name);
            if (idx > 0 && idx <= INT_MAX)
                l.items[k].ifindex = (int)idx;
        }
    *ret = l;
    l = (struct ifc_list){0};
    return 0;
}

int ifc_find(const struct ifc_list *l, const char *name, const struct ifc **ret) {
    if (!l || !name)
        return -EINVAL;
    for (size_t k = 0; k < l->n; k++)
        if (strcmp(l->items[k].name, name) == 0) {
            *ret = &l->items[k];
            return 0;
        }
    return -ENODEV;
}

static bool addr_is_link_local(const struct ifc_addr *a) {
    if (a->family == AF_INET)
        return (ntohl(a->addr.v4.s_addr) & 0xffff0000u) == 0xa9fe0000u; /* 169.254/16 */
    return IN6_IS_ADDR_LINKLOCAL(&a->addr.v6);
}

size_t ifc_routable_addr_count(const struct ifc *i) {
    size_t n = 0;
    for (size_t k = 0; k < i->n_addrs; k++)
        if (!addr_is_link_local(&i->addrs[k]))
            n++;
    return n;
}

static bool name_char_ok(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-';
}

/* A printable rendering of a name that failed the checks, for messages: the
 * input may come from a client and must not put control characters or an
 * unbounded string into a log line. */
static void display_name(const char *name, char out[IFC_NAME_MAX + 4]) {
    size_t k = 0;
    for (; name[k] && k < IFC_NAME_MAX; k++)
        out[k] = name_char_ok(name[k]) ? name[k] : '?';
    if (name[k]) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
}

enum ifc_os ifc_os_native(void) {
#if defined(IFC_DARWIN)
    return IFC_OS_DARWIN;
#else
    return IFC_OS_LINUX;
#endif
}

int ifc_name_check(const char *name, char *why, size_t whylen) {
    return ifc_name_check_for(ifc_os_native(), name, why, whylen);
}

int ifc_name_check_for(enum ifc_os os, const char *name, char *why, size_t whylen) {
    char shown[IFC_NAME_MAX + 4];

    if (!name || !name[0]) {
        set_why(why, whylen, "empty interface name");
        return -EINVAL;
    }
    display_name(name, shown);
    size_t len = strnlen(name, IFC_NAME_MAX + 1);
    if (len > IFC_NAME_MAX) {
        set_why(why, whylen, "interface name '%s' is too long (at most %d characters)", shown,
                IFC_NAME_MAX);
        return -EINVAL;
    }
    for (size_t k = 0; k < len; k++)
        if (!name_char_ok(name[k])) {
            set_why(why, whylen,
                    "interface name '%s' has a character outside [A-Za-z0-9_.-]", shown);
            return -EINVAL;
        }
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        set_why(why, whylen, "interface name '%s' is not allowed", shown);
        return -EINVAL;
    }
    if (os == IFC_OS_DARWIN) {
        if (!pfr_iface_valid(name)) {
            set_why(why, whylen, "'%s' is not a supported VPN interface name (utun<N>)", shown);
            return -EINVAL;
        }
        return 0;
    }
    if (os != IFC_OS_LINUX) {
        set_why(why, whylen, "no VPN interface rule for this platform");
        return -EINVAL;
    }
    /* Which names are VPNs is the admin policy's word
     * (allowed_interface_patterns); loopback never is. */
    if (strcmp(name, "lo") == 0) {
        set_why(why, whylen, "'lo' is the loopback interface, not a VPN");
        return -EINVAL;
    }
    return 0;
}

bool ifc_name_supported(const char *name) {
    return ifc_name_check(name, NULL, 0) == 0;
}

int ifc_validate_vpn(const struct ifc_list *l, const char *name, char *why, size_t whylen) {
    const struct ifc *i = NULL;
    int r;

    r = ifc_name_check(name, why, whylen);
    if (r < 0)
        return r;
    /* From here on name is known to be short and printable. */
    if (!l || ifc_find(l, name, &i) < 0) {
        /* a typo: the nearest name, and the ones there are (a user can
         * list them anyway: ip link) */
        const char *names[8];
        char list[8 * (IFC_NAME_MAX + 2) + 8] = "";
        size_t n = 0, used = 0;
        for (size_t k = 0; l && k < l->n; k++) {
            /* only names lyh could take (no terminal escapes in the message) */
            if (l->items[k].loopback || ifc_name_check(l->items[k].name, NULL, 0) < 0)
                continue;
            bool more = n == ARRAY_SIZE(names);
            int w = snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "",
                             more ? "..." : l->items[k].name);
            if (w < 0 || (size_t)w >= sizeof(list) - used)
                break;
            used += (size_t)w;
            if (more)
                break;
            names[n++] = l->items[k].name;
        }
        const char *near = closest_word(name, names, n);
        set_why(why, whylen, "interface '%s' does not exist%s%s%s (interfaces here: %s)", name,
                near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "",
                used ? list : "none but loopback");
        return -ENODEV;
    }
    if (i->loopback) { /* whatever its name */
        set_why(why, whylen, "'%s' is a loopback interface, not a VPN", name);
        return -EINVAL;
    }
    if (!i->up) {
        set_why(why, whylen, "interface '%s' is down", name);
        return -ENETDOWN;
    }
    if (ifc_routable_addr_count(i) == 0) {
        set_why(why, whylen, "interface '%s' has no address%s", name,
                i->n_addrs > 0 ? " (only link-local)" : "");
        return -EADDRNOTAVAIL;
    }
    return 0;
}
