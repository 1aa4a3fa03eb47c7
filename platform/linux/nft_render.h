/* nft_render: the nftables rules of the egress guard, as plain data.
 *
 * A pure renderer: validated input in, a list of rule descriptions out, plus a
 * stable text form in nft syntax (one netlink message per line) used by the golden
 * tests and by `lyh run --print-firewall`. No I/O, no globals, no libnftnl:
 * platform/linux/nft.c turns these structs into netlink messages.
 *
 * Layout of table `inet lianyaohu` (see docs and nft_render.c for the why):
 *
 *   set lan4 / set lan6       interval sets of non-VPN destinations (LAN, CGN, ...)
 *   map sessions              cgroup v2 id (8 bytes) : verdict (jump s-<id>)
 *   chain output  (hook output, priority 0, policy accept)
 *       [meta skuid U jump LYH-U-U]          one per --shared-user-firewall user
 *       meta skgid GID jump guarded
 *   chain guarded
 *       [meta skuid U jump LYH-U]            one per uid-scope user (no cgroup v2)
 *       socket cgroupv2 level L vmap @sessions
 *       log "lyh:nosession:D ", reject       (no live session: nothing leaves)
 *   chain s-<id> / LYH-<uid> / LYH-U-<uid>   one per scope, see nftr_render_chain()
 *   map loopback              ct mark : verdict (jump lo-<id>)     (with chain input)
 *   map served                cgroup v2 id : ct mark                (with chain input)
 *   chain input   (hook input, priority -10, policy accept)        (sessions may listen)
 *       iifname != "lo" socket cgroupv2 level L-1 <base> ...      refuse the network
 *       iifname "lo" ct mark vmap @loopback                         a session's lo flows
 *       iifname "lo" ... ct mark set socket cgroupv2 level L map @served   flows it serves
 *   chain lo-<id>                             where a session's flow through lo may land
 *   map dnsport               cgroup v2 id : port of the session's DNS forwarder  (with dns)
 *   chain dnsnat  (hook output, type nat, priority -100)           (with dns)
 *       meta skgid G meta nfproto ipv4|ipv6 udp|tcp dport 53
 *           dnat to 127.0.0.1|[::1] : socket cgroupv2 level L map @dnsport
 *   chain dnsout  (hook postrouting, priority 0)                    (with dns)
 *       meta skgid G ct status dnat oifname != "lo" drop   (a rewritten flow leaves by lo only)
 *
 * Every function returns 0 or -errno; ret_* out-parameters are set only on success.
 */
#ifndef LYH_PLATFORM_LINUX_NFT_RENDER_H
#define LYH_PLATFORM_LINUX_NFT_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dest_rule.h"

#define NFTR_TABLE         "lianyaohu"
#define NFTR_CHAIN_OUTPUT  "output"
#define NFTR_CHAIN_GUARDED "guarded"
#define NFTR_CHAIN_INPUT   "input"
#define NFTR_SET_LAN4      "lan4"
#define NFTR_SET_LAN6      "lan6"
#define NFTR_MAP_SESSIONS  "sessions"
#define NFTR_MAP_LOOPBACK  "loopback"
#define NFTR_MAP_SERVED    "served"
#define NFTR_MAP_DNSPORT   "dnsport"
#define NFTR_SET_PROTO4    "proto4"   /* resolvers the protocol process may ask (IPv4) */
#define NFTR_SET_PROTO6    "proto6"
#define NFTR_CHAIN_DNSNAT  "dnsnat"
#define NFTR_CHAIN_DNSOUT  "dnsout"

/* The data layout (docs/guard-as-data.md): a session of the default policy is
 * elements keyed by its cgroup id in sets and maps every such session shares,
 * read by the base's chains data and drefuse (output) and dlo (input), plus
 * named counters and limits and two one-rule log chains of its own. Presence
 * opens, absence closes: every rule that accepts needs an element that names
 * the socket's cgroup. See nftr_data_sets() for the key and value of each. */
#define NFTR_CHAIN_DATA    "data"
#define NFTR_CHAIN_DREFUSE "drefuse"
#define NFTR_CHAIN_DLO     "dlo"
#define NFTR_CHAIN_DALOG   "dalog"
#define NFTR_SET_DLIVE     "dlive"
#define NFTR_SET_DVPN      "dvpn"
#define NFTR_SET_DVPN6     "dvpn6"
#define NFTR_SET_DFWD      "dfwd"
#define NFTR_MAP_DLOMARK   "dlomark"
#define NFTR_SET_DOWNMARK  "downmark"
#define NFTR_SET_DSRVMARK  "dsrvmark"
#define NFTR_MAP_ACCT      "acct"
#define NFTR_MAP_DNSC      "dnsc"
#define NFTR_MAP_ANEW      "anew"
#define NFTR_MAP_LNEW      "lnew"
#define NFTR_MAP_DROP      "refused"
#define NFTR_MAP_ALIM      "alim"
#define NFTR_MAP_LLIM      "llim"
#define NFTR_MAP_DLIM      "dlim"
#define NFTR_MAP_ILIM      "ilim"
#define NFTR_MAP_IDROP     "idrop"
#define NFTR_MAP_ALOG      "alog"
#define NFTR_MAP_DLOG      "dlog"
#define NFTR_MAP_DLOGM     "dlogm"
#define NFTR_ALOG_CHAIN_PREFIX "a-"
#define NFTR_DLOG_CHAIN_PREFIX "d-"

/* Conntrack marks of sessions' flows through lo: bit 31 set, bit 30 the kind
 * (0: the session started the flow, 1: it serves a flow a host process
 * started), bits 0..29 the session's slot (1..NFTR_LO_SLOT_MAX, lyhd gives
 * them out among live sessions). */
#define NFTR_LO_MARK_OURS   0x80000000u
#define NFTR_LO_MARK_SERVED 0x40000000u
#define NFTR_LO_MARK_KIND   0xc0000000u
#define NFTR_LO_SLOT_MAX    0x3fffffffu
/* A session's DNS flow (chain dnsnat sent it to its forwarder): kind 0, slot
 * 0, which no session's slot is. Chain input lets it land only on a socket
 * with NFTR_DNS_FWD_SOCKET_MARK (lyhd's forwarders; SO_MARK needs
 * CAP_NET_ADMIN or, since Linux 5.17, CAP_NET_RAW), and lets a forwarder
 * socket receive only such flows. */
#define NFTR_DNS_FLOW_MARK  0x80000000u
#define NFTR_DNS_FWD_SOCKET_MARK 0x4c594844u /* "LYHD" */

#define NFTR_SESSION_CHAIN_PREFIX "s-"
#define NFTR_UID_CHAIN_PREFIX     "LYH-"
#define NFTR_SHARED_CHAIN_PREFIX  "LYH-U-"
#define NFTR_LOOPBACK_CHAIN_PREFIX "lo-"
#define NFTR_DOMAIN_SET4_PREFIX    "a4-"
#define NFTR_DOMAIN_SET6_PREFIX    "a6-"
#define NFTR_DOMAIN_SET_SIZE       65536

#define NFTR_DEFAULT_GUARD_GID    2000000u
#define NFTR_DEFAULT_NFLOG_GROUP  7u
#define NFTR_DEFAULT_LOG_RATE     2000u /* log events per second, per log rule: the base's
                                         * own; lyhd gives sessions audit_flow_rate() */
#define NFTR_DEFAULT_LOG_BURST    1000u
#define NFTR_DEFAULT_CGROUP_LEVEL 1u

/* Session ids: 1..NFTR_SESSION_ID_MAX characters of [a-z0-9_-], first one [a-z0-9],
 * not "nosession". Lower case only, so an id can never look like the "LYH-" chain
 * names of the uid scopes in a log prefix; the bound keeps "lyh:<id>:A " within
 * 63 characters. */
#define NFTR_SESSION_ID_MAX   48
#define NFTR_NAME_MAX         64  /* chain, set and tag names, with the NUL */
#define NFTR_IFNAME_MAX       16  /* IFNAMSIZ, with the NUL */
#define NFTR_LOG_PREFIX_MAX   64  /* with the NUL: at most 63 characters */
#define NFTR_DESTS_MAX        256 /* entries per policy list */
#define NFTR_RULE_MATCHES_MAX 6
#define NFTR_NOSESSION_PREFIX "lyh:nosession:D "

/* ---- input ------------------------------------------------------------------------ */

enum nftr_scope {
    NFTR_SCOPE_SESSION = 1, /* chain s-<id>, reached through map sessions by cgroup id */
    NFTR_SCOPE_UID,         /* chain LYH-<uid>, reached from guarded by meta skuid */
    NFTR_SCOPE_SHARED_USER, /* chain LYH-U-<uid>, reached from output by meta skuid alone */
};

/* A policy destination is a struct dr_rule (common/dest_rule.h): addr in
 * network byte order, host bits zero; port_min == port_max == 0 means every
 * port and every protocol, otherwise the rule covers tcp and udp on those
 * ports. */

struct nftr_policy {
    const struct dr_rule *lan_exceptions; /* accepted before the LAN sets reject */
    size_t n_lan_exceptions;
    const struct dr_rule *deny; /* rejected after the LAN sets */
    size_t n_deny;
    bool deny_default;            /* on the VPN accept only `allow` */
    const struct dr_rule *allow;
    size_t n_allow;
    bool ipv6_blocked;            /* reject IPv6 before the VPN accept */
};

/* Logging of allowed new flows and of rejected packets. rate 0 = no rate limit. */
struct nftr_log_params {
    uint16_t group; /* NFLOG group */
    uint32_t rate;  /* log events per second, per log rule */
    uint32_t burst;
    /* Chains only: the log rules of the new flows the session's VPN
     * interface lets out (the one path a flood of recorded flows takes)
     * share vpn_rate and vpn_burst between them, each getting an equal part
     * (at least 1), so a policy with many allowed destinations does not
     * multiply it. 0: they have rate and burst like every other rule. */
    uint32_t vpn_rate;
    uint32_t vpn_burst;
    /* Chains only (Policy.log_allowed_flows = false): allowed new flows are
     * counted but not logged, `ct state new counter` with no limit and no log
     * statement, so the totals stay exact and no accept event reaches NFLOG.
     * Refused packets are always logged. */
    bool accept_unlogged;
};

struct nftr_input {
    enum nftr_scope scope;
    const char *session_id; /* NFTR_SCOPE_SESSION */
    uint64_t cgroup_id;     /* NFTR_SCOPE_SESSION: id of the session's cgroup, != 0 */
    uint32_t uid;           /* NFTR_SCOPE_UID, NFTR_SCOPE_SHARED_USER; not (uid_t)-1 */
    uint32_t guard_gid;     /* NFTR_SCOPE_SHARED_USER: the guard gids its dispatch skips, */
    uint32_t guard_gid_max; /* guard_gid..guard_gid_max (0: guard_gid alone) */
    /* NFTR_SCOPE_SESSION when sessions may listen (the base has chain input):
     * the session's slot, 1..NFTR_LO_SLOT_MAX. Its new flows through lo get
     * its mark, it sends through lo only on flows with its marks, and chain
     * lo-<id> lets them land only on its own sockets (found by cgroup at
     * cgroup_level), ICMP, the resolver's port and its loopback LAN
     * exceptions (listed host ports). 0: through lo the session reaches
     * only those (no marks, nothing on input). */
    uint32_t lo_slot;
    uint32_t cgroup_level;
    const char *cgroup_path; /* with lo_slot, optional: below the cgroup2 root, for text */
    uint64_t base_cgroup_id;   /* with lo_slot: the sessions' base cgroup (level cgroup_level-1) */
    const char *base_cgroup;   /* with lo_slot, optional: its path, for text */
    /* NFTR_SCOPE_SESSION on a base with dns: the port lyhd's forwarder for
     * this session listens on (127.0.0.1 and ::1). Its DNS flows (port 53,
     * anywhere) are sent there by chain dnsnat; the chain accepts them first
     * (`ct status dnat`, to that port only) and no longer lets port 53 through
     * lo. 0: no forwarder, the resolver's port 53 on loopback as before. */
    uint16_t dns_port;
    /* NFTR_SCOPE_SESSION with dns_port: a domain allowlist. On the VPN the
     * session reaches only the addresses in its sets a4-<id> / a6-<id> (which
     * its forwarder fills with what allowed names resolved to, each with a
     * timeout) and its explicit allow rules, whatever deny_default says. */
    bool domain_sets;
    /* The VPN: 1..15 chars of [A-Za-z0-9_.-], not "lo". NULL: proxy-only
     * (NFTR_SCOPE_SESSION, no dns_port): no VPN and no DNS; the session
     * reaches its LAN exceptions (the proxy) and its own listeners only. */
    const char *iface;
    struct nftr_log_params log;
    struct nftr_policy policy;
};

struct nftr_base_params {
    /* Sockets whose gid is in guard_gid..guard_gid_max are guarded (each user's
     * agents have a gid of their own in the range); != 0, != (gid_t)-1.
     * guard_gid_max 0: guard_gid alone. */
    uint32_t guard_gid;
    uint32_t guard_gid_max;
    bool cgroupv2;         /* false: no map sessions, no vmap rule (host without cgroup v2) */
    uint32_t cgroup_level; /* depth of the session cgroups below the cgroup2 root, 1..255 */
    struct nftr_log_params log;
    /* Sessions may listen: chain input (hook input) refuses every packet that
     * would reach a socket of a session (its cgroup is below the sessions'
     * base cgroup) from any interface but lo. Needs cgroupv2 and
     * cgroup_level >= 2 (the base sits one level above the sessions). */
    bool inbound;
    uint64_t base_cgroup_id;   /* the sessions' base cgroup (its directory's inode) */
    const char *base_cgroup;   /* its path below the cgroup2 root, for the text form */
    /* DNS goes to lyhd: chain dnsnat sends every guarded socket's port-53
     * flow to its session's forwarder (map dnsport). Needs cgroupv2. */
    bool dns;
    /* The uid of lyhd's protocol process (0: none). Its sockets send only
     * UDP to port 53 of the addresses in sets proto4/proto6 (the resolvers of
     * the sessions lyhd forwards DNS for); everything else they send is
     * dropped, through lo too. */
    uint32_t proto_uid;
    /* The data layout's sets and chains (nftr_render_data). Needs cgroupv2,
     * inbound and dns. Chain guarded then takes a data session's established
     * VPN flows first, and after map sessions' dispatch sends a socket of a
     * live data session (set dlive) to chain data; chain input sends a
     * session's marked flow that map loopback does not take to chain dlo. */
    bool data;
};

/* ---- output: rules as data -------------------------------------------------------- */

enum nftr_match_type {
    NFTR_M_OIFNAME,   /* oifname "<name>" (exact) */
    NFTR_M_NFPROTO,   /* meta nfproto ipv4|ipv6 (family) */
    NFTR_M_L4PROTO,   /* meta l4proto tcp|udp (l4proto) */
    NFTR_M_DADDR,     /* ip|ip6 daddr addr/prefix_len (family; implies the nfproto) */
    NFTR_M_DADDR_SET, /* ip daddr @lan4 | ip6 daddr @lan6 (family, name) */
    NFTR_M_DPORT,     /* tcp|udp dport min[-max] (l4proto; implies the l4proto) */
    NFTR_M_CT_NEW,    /* ct state new */
    NFTR_M_SKUID,     /* meta skuid <id> */
    NFTR_M_SKGID,     /* meta skgid <id>, or <id>-<id_max> when id_max > id */
    NFTR_M_SKGID_NE,  /* meta skgid != <id>, or != <id>-<id_max> */
    NFTR_M_IIFNAME_NE, /* iifname != "<name>" */
    NFTR_M_OIFNAME_NE, /* oifname != "<name>" */
    NFTR_M_CT_INVALID, /* ct state invalid,untracked */
    NFTR_M_CT_ORIGINAL, /* ct direction original */
    NFTR_M_CT_REPLY,    /* ct direction reply */
    NFTR_M_SOCK_CGROUP, /* socket cgroupv2 level <level> <cgroup_id> (name: its path, for text) */
    NFTR_M_TCP_SYNACK,  /* tcp flags & (syn | ack) == syn | ack (after meta l4proto tcp) */
    NFTR_M_CT_NOT_NEW,  /* ct state != new */
    NFTR_M_IIFNAME,     /* iifname "<name>" (exact) */
    NFTR_M_CT_MARK,     /* ct mark <id> */
    NFTR_M_CT_MARK_ORIG, /* ct mark & 0xc0000000 == 0x80000000: a session started it */
    NFTR_M_CT_DNAT,      /* ct status dnat */
    NFTR_M_CT_ESTABLISHED, /* ct state established,related */
    NFTR_M_SOCK_MARK,    /* socket mark <id> (a full socket's; no socket: no match) */
    NFTR_M_SOCK_MARK_NE, /* socket mark != <id> (likewise) */
    NFTR_M_CT_MARK_NE,   /* ct mark != <id> */
    NFTR_M_META_MARK_NE, /* meta mark != <id> (a packet's own mark: its socket's SO_MARK) */
    NFTR_M_DADDR_SET_NE, /* ip daddr != @lan4 | ip6 daddr != @lan6 (family, name) */
    NFTR_M_DPORT_NE,     /* tcp|udp dport != port_min (l4proto; implies the l4proto) */
    /* lookups keyed by the socket's cgroup at `level` (no full socket: no match) */
    NFTR_M_CG_SET,       /* socket cgroupv2 level <level> @<name> */
    NFTR_M_CG_IF_SET,    /* socket cgroupv2 level <level> . oifname @<name> */
    NFTR_M_PORT_CG_SET,  /* tcp|udp dport . socket cgroupv2 level <level> @<name> (l4proto) */
    NFTR_M_MARK_CG_SET,  /* ct mark . socket cgroupv2 level <level> @<name> */
    NFTR_M_CT_MARK_SET_NE, /* ct mark != @<name> (no key of that map) */
};

struct nftr_match {
    enum nftr_match_type type;
    int family;         /* AF_INET / AF_INET6 */
    uint8_t l4proto;    /* IPPROTO_TCP / IPPROTO_UDP / IPPROTO_ICMP / IPPROTO_ICMPV6 */
    uint8_t addr[16];   /* network byte order */
    uint8_t prefix_len; /* 1..32 / 1..128 (a /0 is rendered as NFTR_M_NFPROTO) */
    uint16_t port_min;  /* host order */
    uint16_t port_max;
    uint32_t id;
    uint32_t id_max;    /* SKGID, SKGID_NE: the top of a range (0: id alone) */
    uint32_t level;     /* SOCK_CGROUP */
    uint64_t cgroup_id; /* SOCK_CGROUP */
    char name[NFTR_NAME_MAX]; /* interface or set name */
};

enum nftr_verdict {
    NFTR_V_CONTINUE = 0,     /* no verdict: a log-only rule */
    NFTR_V_ACCEPT,
    NFTR_V_REJECT_TCP_RESET, /* always preceded by an l4proto tcp match */
    NFTR_V_REJECT_ADMIN,     /* reject with icmpx admin-prohibited */
    NFTR_V_JUMP,             /* jump <target> */
    NFTR_V_VMAP_CGROUP,      /* socket cgroupv2 level <cgroup_level> vmap @<target> */
    NFTR_V_DROP,
    NFTR_V_VMAP_CTMARK,      /* ct mark vmap @<target> */
    /* dnat ip to 127.0.0.1 (ip6 to [::1], by dnat_family) : the port that map
     * <target> gives the socket's cgroup at cgroup_level; no element: no match */
    NFTR_V_DNAT_CGROUP,
    NFTR_V_GOTO,             /* goto <target> */
};

/* Statements are emitted in this order: matches, named counter, ct mark set, named
 * limit, limit, log, counter, verdict (the mark ahead of the limit, which would skip
 * it when its bucket is empty; the named counter first: its map's miss ends the rule
 * before it changes anything). */
struct nftr_rule {
    struct nftr_match match[NFTR_RULE_MATCHES_MAX];
    size_t n_match;
    /* The data layout's named objects, found in a map by the socket's cgroup at
     * obj_level (0: by the flow's ct mark); no element: the rule ends there.
     *   counter_map: counter name <key> map @<counter_map>
     *   ct_mark_map: ct mark set <key> map @<ct_mark_map>   (obj_level != 0)
     *   limit_map:   limit name <key> map @<limit_map> */
    uint32_t obj_level;
    char counter_map[NFTR_NAME_MAX];
    char ct_mark_map[NFTR_NAME_MAX];
    char limit_map[NFTR_NAME_MAX];
    uint32_t ct_mark_set; /* != 0: ct mark set <value> */
    bool ct_mark_clear;   /* ct mark set 0 */
    /* != 0: ct mark set socket cgroupv2 level <this> map @served */
    uint32_t ct_mark_served_level;
    bool limit; /* limit rate limit_rate/second burst limit_burst packets */
    uint32_t limit_rate;
    uint32_t limit_burst;
    /* counter ahead of the limit: counts every packet the log rule sees, logged or
     * thinned out, so the audit can tell how many events the limit cost. */
    bool log_counter;
    bool log; /* log prefix "<log_prefix>" group <log_group> */
    bool vpn_log; /* the log rule of new flows out of the VPN interface (vpn_rate) */
    uint16_t log_group;
    char log_prefix[NFTR_LOG_PREFIX_MAX];
    bool counter;
    enum nftr_verdict verdict;
    char target[NFTR_NAME_MAX]; /* JUMP: chain, VMAP_CGROUP: map */
    uint32_t cgroup_level;      /* VMAP_CGROUP, DNAT_CGROUP */
    int dnat_family;            /* DNAT_CGROUP: AF_INET or AF_INET6 */
    char comment[NFTR_NAME_MAX]; /* "" or the rule's comment; dispatch rules carry
                                  * their chain's name here, which is how they are
                                  * found again for deletion; chain input's rules
                                  * the base cgroup's id ("sessions cgroup N") */
};

struct nftr_chain {
    enum nftr_scope scope;
    char name[NFTR_NAME_MAX];
    struct nftr_rule *rules; /* owned, n_rules entries, in chain order */
    size_t n_rules;
    /* How packets reach this chain. SESSION: element { cgroup_id : jump name } of
     * map sessions. UID / SHARED_USER: `dispatch`, inserted at the head of
     * dispatch_chain ("guarded" / "output"), comment = name. */
    uint64_t cgroup_id;
    char dispatch_chain[NFTR_NAME_MAX];
    struct nftr_rule dispatch;
    /* SESSION with a slot: chain lo-<id>, reached through element
     * { lo_mark : jump lo-<id> } of map loopback from chain input, and the
     * element { cgroup_id : served_mark } of map served. */
    uint32_t lo_mark;
    uint32_t served_mark;
    char lo_name[NFTR_NAME_MAX];
    struct nftr_rule *lo_rules; /* owned */
    size_t n_lo_rules;
    /* SESSION with a forwarder: element { cgroup_id : dns_port } of map dnsport */
    uint16_t dns_port;
    /* SESSION with a domain allowlist: its sets (ipv4_addr / ipv6_addr, flags
     * timeout, size NFTR_DOMAIN_SET_SIZE), made before the chain refers to them */
    char set4[NFTR_NAME_MAX];
    char set6[NFTR_NAME_MAX];
};

struct nftr_base {
    struct nftr_base_params params;
    struct nftr_rule *output; /* owned, rules of chain output in order */
    size_t n_output;
    struct nftr_rule *guarded; /* owned, rules of chain guarded in order */
    size_t n_guarded;
    struct nftr_rule *input;   /* owned, rules of chain input (params.inbound) */
    size_t n_input;
    struct nftr_rule *dnsnat;  /* owned, rules of chain dnsnat (params.dns) */
    size_t n_dnsnat;
    struct nftr_rule *dnsout;  /* owned, rules of chain dnsout (params.dns) */
    size_t n_dnsout;
    struct nftr_rule *data;    /* owned, rules of chains data, drefuse, dlo, dalog (params.data) */
    size_t n_data;
    struct nftr_rule *drefuse;
    size_t n_drefuse;
    struct nftr_rule *dlo;
    size_t n_dlo;
    struct nftr_rule *dalog;
    size_t n_dalog;
};

/* ---- the data layout: a session as elements ---------------------------------------- */

enum nftr_key {
    NFTR_K_CG = 1,   /* cgroupsv2 (8 bytes, host order) */
    NFTR_K_CG_IF,    /* cgroupsv2 . ifname (8 + 16 bytes) */
    NFTR_K_PORT_CG,  /* inet_service . cgroupsv2 (2 bytes in a 4-byte register, 8) */
    NFTR_K_MARK_CG,  /* mark . cgroupsv2 (4, 8) */
    NFTR_K_MARK,     /* mark */
};

enum nftr_val {
    NFTR_D_NONE = 0, /* a set */
    NFTR_D_MARK,
    NFTR_D_PORT,     /* inet_service */
    NFTR_D_COUNTER,  /* the name of a counter object */
    NFTR_D_LIMIT,    /* the name of a limit object */
    NFTR_D_VERDICT,  /* jump <chain> */
    NFTR_D_CONTINUE, /* the verdict continue (map loopback: a slot taken, nothing decided) */
};

struct nftr_data_set {
    const char *name;
    enum nftr_key key;
    enum nftr_val val;
    const char *what; /* for the docs and the text form */
};

/* The sets and maps of the data layout, in the order the base creates them;
 * static storage. Returns the count. */
size_t nftr_data_sets(const struct nftr_data_set **ret);

struct nftr_elem {
    const char *set; /* static: a name of nftr_data_sets(), or of the base's maps served,
                      * dnsport, loopback or sessions */
    enum nftr_key key;
    uint64_t cgroup_id;
    char ifname[NFTR_IFNAME_MAX];
    uint16_t port;
    uint32_t mark;
    enum nftr_val val;
    uint32_t vmark;
    uint16_t vport;
    char vname[NFTR_NAME_MAX]; /* COUNTER, LIMIT: the object; VERDICT: the chain */
};

struct nftr_obj {
    enum nftr_val type; /* NFTR_D_COUNTER or NFTR_D_LIMIT */
    char name[NFTR_NAME_MAX];
    uint32_t rate, burst; /* limit: packets per second, burst packets */
};

#define NFTR_DATA_OBJS_MAX  10
#define NFTR_DATA_ELEMS_MAX 24
#define NFTR_CGROUP_TEXT_MAX 256

struct nftr_data {
    char session_id[NFTR_SESSION_ID_MAX + 1];
    uint64_t cgroup_id;
    /* for the text form: the cgroup's path below /sys/fs/cgroup, which nft reads a
     * cgroupsv2 value from; "" (not given or too long): the elements are comments */
    char cgroup_text[NFTR_CGROUP_TEXT_MAX];
    struct nftr_obj objs[NFTR_DATA_OBJS_MAX]; /* made first */
    size_t n_objs;
    /* chains a-<id> (empty name when allowed flows are not logged) and d-<id>,
     * one log rule each, made after the objects */
    char alog[NFTR_NAME_MAX];
    struct nftr_rule alog_rule;
    char dlog[NFTR_NAME_MAX];
    struct nftr_rule dlog_rule;
    struct nftr_elem elems[NFTR_DATA_ELEMS_MAX]; /* added last, dlive's the last of them */
    size_t n_elems;
};

/* Whether a session scope can be a data session: a VPN interface, a forwarder
 * (dns_port), a loopback slot, a log rate, no policy lists, neither
 * deny-default nor a domain allowlist. IPv6 may be on or blocked, allowed
 * flows logged or not. */
bool nftr_data_eligible(const struct nftr_input *in);

/* Render an eligible session as data; -EINVAL if it is not (or invalid), -ENOMEM.
 * in->cgroup_path, when given, names the cgroup below /sys/fs/cgroup in the text.
 * *ret: nftr_data_free(). */
int nftr_render_data(const struct nftr_input *in, struct nftr_data **ret);
void nftr_data_free(struct nftr_data *d); /* NULL ok */
int nftr_data_text(const struct nftr_data *d, char **ret);

/* The blocked destination prefixes of set lan4 (AF_INET) or lan6 (AF_INET6), in a
 * fixed order; static storage (common/dest_rule.h). Returns the count, 0 for
 * another family. */
struct dr_rule;
size_t nftr_lan_prefixes(int family, const struct dr_rule **ret);

/* The marks of slot's flows through lo: started by it, served by it. */
uint32_t nftr_lo_mark(uint32_t slot);
uint32_t nftr_served_mark(uint32_t slot);

/* Validate `in` and render the scope's chain. -EINVAL on invalid input, -ENOMEM.
 * *ret is owned by the caller: nftr_chain_free(). */
int nftr_render_chain(const struct nftr_input *in, struct nftr_chain **ret);
void nftr_chain_free(struct nftr_chain *c); /* NULL ok */

/* The base objects of the table (sets, map, chains output and guarded). */
int nftr_render_base(const struct nftr_base_params *p, struct nftr_base **ret);
void nftr_base_free(struct nftr_base *b); /* NULL ok */

/* Chain name of a scope: "s-<session_id>", "LYH-<uid>", "LYH-U-<uid>". The session id
 * is validated as in nftr_input. buf must hold NFTR_NAME_MAX bytes. */
int nftr_chain_name(enum nftr_scope scope, const char *session_id, uint32_t uid,
                    char buf[static NFTR_NAME_MAX]);

/* Text forms, nft syntax, '\n'-terminated lines, newly allocated (*ret: free()).
 * nftr_rule_text() is the statement part only ("oifname \"lo\" counter accept").
 * nftr_chain_text() / nftr_base_text() are nft scripts with one line per netlink
 * message of the transaction that installs them (`nft -c -f` accepts them once the
 * base exists; the cgroup-id map element is a comment line, because nft parses
 * cgroupsv2 keys as paths below /sys/fs/cgroup). */
int nftr_rule_text(const struct nftr_rule *r, char **ret);
int nftr_chain_text(const struct nftr_chain *c, char **ret);
int nftr_base_text(const struct nftr_base *b, char **ret);

#endif
