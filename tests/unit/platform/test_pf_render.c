/* Golden, syntax and invariant tests for the PF anchor renderer (no PF on Linux).
 *
 * Each golden case renders one anchor and compares it byte for byte with
 * tests/unit/platform/golden/<case>.pf. LYH_UPDATE_GOLDEN=1 rewrites the golden
 * files instead (review the diff!); by default a mismatch fails and prints both.
 *
 * No pfctl exists here to load what we render, so every rendering also goes
 * through pfc_parse() below: an independent, deliberately narrow checker of the
 * pf.conf subset the anchor may use. It shares no code with pf_render.c: it
 * tokenizes each line, accepts exactly the table and rule forms listed at
 * pfc_rule() and pfc_table(), and checks the cross-rule properties (one owner,
 * one VPN interface, tables defined before use). Its own negative tests feed it
 * hand-made bad lines, so it cannot silently accept everything. The parsed
 * rules then serve the order invariants, which are checked against the input
 * rather than against the golden text. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/dest_rule.h"
#include "common/macros.h"
#include "golden_file.h"
#include "platform/darwin/pf_render.h"

#ifndef LYH_DARWIN_GOLDEN_DIR
#error "LYH_DARWIN_GOLDEN_DIR must name tests/unit/platform/golden"
#endif

/* ---- golden files ------------------------------------------------------------------ */

static void check_golden(const char *name, const char *text) {
    golden_check(LYH_DARWIN_GOLDEN_DIR, name, "pf", text);
}

/* ---- the independent pf.conf checker ----------------------------------------------- */

#define PFC_TOKS_MAX   48
#define PFC_TOKLEN     64
#define PFC_IF_MAX     16
#define PFC_RULES_MAX  2048
#define PFC_TABLES_MAX 4
#define PFC_TABLE_MAX  64 /* prefixes per table */

enum pfc_dest { PFC_D_ANY = 1, PFC_D_ADDR, PFC_D_TABLE };

struct pfc_rule {
    bool pass; /* else block return */
    bool on, on_not;
    char on_if[PFC_IF_MAX];
    bool route_to;
    char rt_if[PFC_IF_MAX];
    uint8_t rt_peer[4];
    int af; /* the family keyword, 0 when absent */
    enum pfc_dest dest;
    int dest_af; /* family of the address or table; 0 for any */
    uint8_t addr[16];
    unsigned plen;
    char table[PFC_TOKLEN];
    unsigned port_lo, port_hi; /* 0: no port clause */
    char owner[64];
};

struct pfc_table {
    char name[PFC_TOKLEN];
    int af;
    size_t n;
    uint8_t addr[PFC_TABLE_MAX][16];
    unsigned plen[PFC_TABLE_MAX];
};

struct pfc_doc {
    struct pfc_table tables[PFC_TABLES_MAX];
    size_t n_tables;
    struct pfc_rule rules[PFC_RULES_MAX];
    size_t n_rules;
    char owner[64]; /* of the first rule: every rule must carry it */
    char vpn[PFC_IF_MAX]; /* the first interface other than lo0 */
    size_t line;
    char why[256];
};

struct pfc_toks {
    char v[PFC_TOKS_MAX][PFC_TOKLEN];
    size_t n, i; /* count, cursor */
};

#define PFC_FAIL(d, ...)                                                                   \
    do {                                                                                   \
        int o_ = snprintf((d)->why, sizeof((d)->why), "line %zu: ", (d)->line);            \
        snprintf((d)->why + o_, sizeof((d)->why) - (size_t)o_, __VA_ARGS__);               \
        return -1;                                                                         \
    } while (0)

/* Brackets of every kind balance and nest on the line itself (no pf.conf form
 * we emit spans lines). */
static int pfc_balanced(struct pfc_doc *d, const char *s, size_t len) {
    char stack[PFC_TOKS_MAX];
    size_t depth = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i], open;
        switch (c) {
        case '{':
        case '(':
        case '<':
            if (depth == sizeof(stack))
                PFC_FAIL(d, "brackets nested too deep");
            stack[depth++] = c;
            continue;
        case '}': open = '{'; break;
        case ')': open = '('; break;
        case '>': open = '<'; break;
        default: continue;
        }
        if (depth == 0 || stack[depth - 1] != open)
            PFC_FAIL(d, "unbalanced '%c'", c);
        depth--;
    }
    if (depth > 0)
        PFC_FAIL(d, "unbalanced '%c'", stack[depth - 1]);
    return 0;
}

static bool pfc_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == ':' || c == '/' || c == '-';
}

/* Words, the one-character tokens { } ( ) , ! and <NAME> as one token. Any
 * other byte (quotes, '#' after the start, '$', '=', control characters) is
 * refused: none belongs in the subset. */
static int pfc_tokenize(struct pfc_doc *d, const char *s, size_t len, struct pfc_toks *t) {
    t->n = t->i = 0;
    for (size_t i = 0; i < len;) {
        char c = s[i];
        size_t start = i;
        if (c == ' ') {
            i++;
            continue;
        }
        if (strchr("{}(),!", c) && c) {
            i++;
        } else if (c == '<') {
            i++;
            while (i < len && pfc_word_char(s[i]))
                i++;
            if (i >= len || s[i] != '>' || i == start + 1)
                PFC_FAIL(d, "bad table reference");
            i++;
        } else if (pfc_word_char(c)) {
            while (i < len && pfc_word_char(s[i]))
                i++;
        } else {
            PFC_FAIL(d, "unexpected byte 0x%02x", (unsigned char)c);
        }
        if (t->n == PFC_TOKS_MAX)
            PFC_FAIL(d, "too many tokens");
        if (i - start >= PFC_TOKLEN)
            PFC_FAIL(d, "token too long");
        memcpy(t->v[t->n], s + start, i - start);
        t->v[t->n][i - start] = '\0';
        t->n++;
    }
    return 0;
}

static const char *pfc_peek(const struct pfc_toks *t) {
    return t->i < t->n ? t->v[t->i] : NULL;
}

static const char *pfc_next(struct pfc_toks *t) {
    return t->i < t->n ? t->v[t->i++] : NULL;
}

static bool pfc_accept(struct pfc_toks *t, const char *word) {
    const char *p = pfc_peek(t);
    if (!p || strcmp(p, word) != 0)
        return false;
    t->i++;
    return true;
}

/* Consume a fixed sequence of words, space-separated in `seq`. */
static int pfc_expect(struct pfc_doc *d, struct pfc_toks *t, const char *seq) {
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", seq);
    for (char *save = NULL, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save))
        if (!pfc_accept(t, w))
            PFC_FAIL(d, "expected '%s' at '%s'", w, pfc_peek(t) ? pfc_peek(t) : "end of line");
    return 0;
}

/* Plain decimal: digits only, no sign, no leading zero, at most max. */
static bool pfc_dec(const char *s, uint64_t max, uint64_t *ret) {
    if (!s || !s[0] || (s[0] == '0' && s[1]) || strlen(s) > 10)
        return false;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > max)
        return false;
    *ret = v;
    return true;
}

/* ADDRESS[/PREFIX] with inet_pton; host bits beyond the prefix must be zero. */
static bool pfc_net(const char *s, int *af, uint8_t addr[16], unsigned *plen) {
    char a[INET6_ADDRSTRLEN];
    const char *slash = strchr(s, '/');
    size_t alen = slash ? (size_t)(slash - s) : strlen(s);
    if (alen == 0 || alen >= sizeof(a))
        return false;
    memcpy(a, s, alen);
    a[alen] = '\0';
    memset(addr, 0, 16);
    unsigned full;
    if (inet_pton(AF_INET, a, addr) == 1) {
        *af = AF_INET;
        full = 32;
    } else if (inet_pton(AF_INET6, a, addr) == 1) {
        *af = AF_INET6;
        full = 128;
    } else {
        return false;
    }
    uint64_t p = full;
    if (slash && !pfc_dec(slash + 1, full, &p))
        return false;
    for (unsigned bit = (unsigned)p; bit < full; bit++)
        if (addr[bit / 8] & (0x80u >> (bit % 8)))
            return false;
    *plen = (unsigned)p;
    return true;
}

/* Interface names as Darwin spells them: letters then digits (lo0, utun4). */
static bool pfc_iface(const char *s) {
    size_t n = strlen(s), letters = 0;
    if (n == 0 || n >= PFC_IF_MAX)
        return false;
    while (letters < n && s[letters] >= 'a' && s[letters] <= 'z')
        letters++;
    if (letters == 0 || letters == n)
        return false;
    for (size_t i = letters; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static int pfc_iface_tok(struct pfc_doc *d, struct pfc_toks *t, char out[PFC_IF_MAX]) {
    const char *w = pfc_next(t);
    if (!w || !pfc_iface(w))
        PFC_FAIL(d, "bad interface '%s'", w ? w : "");
    snprintf(out, PFC_IF_MAX, "%s", w);
    if (strcmp(w, "lo0") != 0) {
        if (!d->vpn[0])
            snprintf(d->vpn, sizeof(d->vpn), "%s", w);
        else if (strcmp(d->vpn, w) != 0)
            PFC_FAIL(d, "second VPN interface '%s' (first '%s')", w, d->vpn);
    }
    return 0;
}

static const struct pfc_table *pfc_find_table(const struct pfc_doc *d, const char *name) {
    for (size_t i = 0; i < d->n_tables; i++)
        if (strcmp(d->tables[i].name, name) == 0)
            return &d->tables[i];
    return NULL;
}

/* table <NAME> const { PREFIX[, PREFIX]* } -- one family per table */
static int pfc_table(struct pfc_doc *d, struct pfc_toks *t) {
    if (pfc_expect(d, t, "table") < 0)
        return -1;
    const char *ref = pfc_next(t);
    if (!ref || ref[0] != '<')
        PFC_FAIL(d, "table without <NAME>");
    if (d->n_tables == PFC_TABLES_MAX)
        PFC_FAIL(d, "too many tables");
    struct pfc_table *tb = &d->tables[d->n_tables];
    memset(tb, 0, sizeof(*tb));
    snprintf(tb->name, sizeof(tb->name), "%.*s", (int)strlen(ref) - 2, ref + 1);
    if (pfc_find_table(d, tb->name))
        PFC_FAIL(d, "table <%s> defined twice", tb->name);
    if (pfc_expect(d, t, "const {") < 0)
        return -1;
    for (;;) {
        const char *w = pfc_next(t);
        int af;
        if (!w || tb->n == PFC_TABLE_MAX || !pfc_net(w, &af, tb->addr[tb->n], &tb->plen[tb->n]))
            PFC_FAIL(d, "bad table entry '%s'", w ? w : "end of line");
        if (tb->af && tb->af != af)
            PFC_FAIL(d, "table <%s> mixes families", tb->name);
        tb->af = af;
        tb->n++;
        if (pfc_accept(t, "}"))
            break;
        if (!pfc_accept(t, ","))
            PFC_FAIL(d, "expected ',' or '}' in table");
    }
    if (pfc_peek(t))
        PFC_FAIL(d, "trailing '%s' after table", pfc_peek(t));
    d->n_tables++;
    return 0;
}

/* The two rule forms, every word in this order:
 *   pass out quick [on [!] IF] [route-to (IF IPV4)] [inet|inet6]
 *        proto { tcp udp } from any to DEST [port N|port N:M] OWNER keep state
 *   block return out quick [on ! IF] [inet|inet6]
 *        proto { tcp udp } from any to DEST [port N|port N:M] OWNER
 * DEST = any | ADDRESS[/PREFIX] | <TABLE>; OWNER = user N [group N]. */
static int pfc_rule(struct pfc_doc *d, struct pfc_toks *t, struct pfc_rule *r) {
    memset(r, 0, sizeof(*r));
    if (pfc_accept(t, "pass")) {
        r->pass = true;
        if (pfc_expect(d, t, "out quick") < 0)
            return -1;
    } else if (pfc_accept(t, "block")) {
        if (pfc_expect(d, t, "return out quick") < 0)
            return -1;
    } else {
        PFC_FAIL(d, "unknown statement '%s'", pfc_peek(t) ? pfc_peek(t) : "");
    }

    if (pfc_accept(t, "on")) {
        r->on = true;
        r->on_not = pfc_accept(t, "!");
        if (pfc_iface_tok(d, t, r->on_if) < 0)
            return -1;
        if (!r->pass && !r->on_not)
            PFC_FAIL(d, "a block names an interface only as 'on ! IF'");
        if (strcmp(r->on_if, "lo0") == 0 && r->on_not)
            PFC_FAIL(d, "'on ! lo0'");
    }
    if (pfc_accept(t, "route-to")) {
        r->route_to = true;
        if (!r->pass)
            PFC_FAIL(d, "route-to on a block rule");
        if (pfc_expect(d, t, "(") < 0 || pfc_iface_tok(d, t, r->rt_if) < 0)
            return -1;
        const char *peer = pfc_next(t);
        if (!peer || inet_pton(AF_INET, peer, r->rt_peer) != 1)
            PFC_FAIL(d, "route-to peer '%s' is not an IPv4 address", peer ? peer : "");
        static const uint8_t zero[4], bcast[4] = {255, 255, 255, 255};
        if (memcmp(r->rt_peer, zero, 4) == 0 || memcmp(r->rt_peer, bcast, 4) == 0)
            PFC_FAIL(d, "route-to peer %s", peer);
        if (pfc_expect(d, t, ")") < 0)
            return -1;
    }
    if (pfc_accept(t, "inet"))
        r->af = AF_INET;
    else if (pfc_accept(t, "inet6"))
        r->af = AF_INET6;
    if (pfc_expect(d, t, "proto { tcp udp } from any to") < 0)
        return -1;

    const char *dest = pfc_next(t);
    if (!dest)
        PFC_FAIL(d, "no destination");
    if (strcmp(dest, "any") == 0) {
        r->dest = PFC_D_ANY;
    } else if (dest[0] == '<') {
        r->dest = PFC_D_TABLE;
        snprintf(r->table, sizeof(r->table), "%.*s", (int)strlen(dest) - 2, dest + 1);
        const struct pfc_table *tb = pfc_find_table(d, r->table);
        if (!tb)
            PFC_FAIL(d, "table <%s> used before its definition", r->table);
        r->dest_af = tb->af;
    } else {
        r->dest = PFC_D_ADDR;
        if (!pfc_net(dest, &r->dest_af, r->addr, &r->plen))
            PFC_FAIL(d, "bad destination '%s'", dest);
    }

    if (pfc_accept(t, "port")) {
        const char *p = pfc_next(t);
        char lo[16] = "", hi[16] = "";
        const char *colon = p ? strchr(p, ':') : NULL;
        uint64_t a, b;
        if (!p || strlen(p) >= sizeof(lo))
            PFC_FAIL(d, "bad port");
        if (colon) {
            snprintf(lo, sizeof(lo), "%.*s", (int)(colon - p), p);
            snprintf(hi, sizeof(hi), "%s", colon + 1);
        } else {
            snprintf(lo, sizeof(lo), "%s", p);
            snprintf(hi, sizeof(hi), "%s", p);
        }
        if (!pfc_dec(lo, 65535, &a) || !pfc_dec(hi, 65535, &b) || a < 1 || b < a)
            PFC_FAIL(d, "bad port '%s' (1..65535, N<=M)", p);
        r->port_lo = (unsigned)a;
        r->port_hi = (unsigned)b;
    }

    uint64_t uid, gid;
    if (!pfc_accept(t, "user") || !pfc_dec(pfc_next(t), UINT32_MAX - 1, &uid))
        PFC_FAIL(d, "no owner 'user N'");
    if (pfc_accept(t, "group")) {
        if (!pfc_dec(pfc_next(t), UINT32_MAX - 1, &gid) || gid == 0)
            PFC_FAIL(d, "bad 'group N'");
        snprintf(r->owner, sizeof(r->owner), "user %" PRIu64 " group %" PRIu64, uid, gid);
    } else {
        snprintf(r->owner, sizeof(r->owner), "user %" PRIu64, uid);
    }

    if (r->pass && pfc_expect(d, t, "keep state") < 0)
        return -1;
    if (!r->pass && pfc_peek(t) && strcmp(pfc_peek(t), "keep") == 0)
        PFC_FAIL(d, "a block rule keeps state");
    if (pfc_peek(t))
        PFC_FAIL(d, "trailing '%s'", pfc_peek(t));

    /* the words are right; now what they say together */
    if (r->dest != PFC_D_ANY && r->af != r->dest_af)
        PFC_FAIL(d, "family keyword does not match the destination's family");
    if (r->route_to &&
        (!r->on || !r->on_not || r->af != AF_INET || strcmp(r->rt_if, r->on_if) != 0))
        PFC_FAIL(d, "route-to only on 'pass out quick on ! IF route-to (IF PEER) inet'");
    if (!d->owner[0])
        snprintf(d->owner, sizeof(d->owner), "%s", r->owner);
    else if (strcmp(d->owner, r->owner) != 0)
        PFC_FAIL(d, "owner '%s' differs from the first rule's '%s'", r->owner, d->owner);
    return 0;
}

/* 0 when every line of text is a comment, blank, a table or a rule of the
 * subset, and there is at least one rule; else -1 with d->why. */
static int pfc_parse(struct pfc_doc *d, const char *text) {
    memset(d, 0, sizeof(*d));
    size_t n = strlen(text);
    if (n == 0 || text[n - 1] != '\n')
        PFC_FAIL(d, "text does not end with a newline");
    struct pfc_toks t;
    for (const char *s = text; *s;) {
        const char *nl = strchr(s, '\n');
        size_t len = (size_t)(nl - s);
        d->line++;
        if (len > 0 && s[0] != '#') {
            if (s[0] == ' ' || s[len - 1] == ' ')
                PFC_FAIL(d, "leading or trailing blank");
            if (pfc_balanced(d, s, len) < 0 || pfc_tokenize(d, s, len, &t) < 0)
                return -1;
            if (strcmp(t.v[0], "table") == 0) {
                if (d->n_rules > 0)
                    PFC_FAIL(d, "table after the first rule");
                if (pfc_table(d, &t) < 0)
                    return -1;
            } else {
                if (d->n_rules == PFC_RULES_MAX)
                    PFC_FAIL(d, "too many rules");
                if (pfc_rule(d, &t, &d->rules[d->n_rules]) < 0)
                    return -1;
                d->n_rules++;
            }
        } else if (len > 0) {
            for (size_t i = 0; i < len; i++)
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                    PFC_FAIL(d, "control byte in a comment");
        }
        s = nl + 1;
    }
    if (d->n_rules == 0)
        PFC_FAIL(d, "no rules");
    return 0;
}

static struct pfc_doc *pfc_new(void) {
    struct pfc_doc *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    return d;
}

static void pfc_assert_ok(const char *text) {
    _cleanup_free_ struct pfc_doc *d = pfc_new();
    if (pfc_parse(d, text) < 0)
        fail_msg("checker refused a valid ruleset: %s\n%s", d->why, text);
}

/* ---- inputs -------------------------------------------------------------------------- */

static struct dr_rule v4(const char *a, uint8_t len, uint16_t lo, uint16_t hi) {
    struct dr_rule d = {.family = AF_INET, .prefix_len = len, .port_min = lo, .port_max = hi};
    assert_int_equal(inet_pton(AF_INET, a, d.addr), 1);
    return d;
}

static struct dr_rule v6(const char *a, uint8_t len, uint16_t lo, uint16_t hi) {
    struct dr_rule d = {.family = AF_INET6, .prefix_len = len, .port_min = lo, .port_max = hi};
    assert_int_equal(inet_pton(AF_INET6, a, d.addr), 1);
    return d;
}

static struct pfr_input group_input(void) {
    return (struct pfr_input){
        .scope = PFR_SCOPE_GROUP,
        .uid = 501,
        .guard_gid = PFR_DEFAULT_GUARD_GID,
        .iface = "utun4",
        .has_peer = true,
        .peer = {10, 8, 0, 1},
    };
}

/* ---- invariants against the input ------------------------------------------------- */

static void want_dest(const struct pfc_rule *r, const struct dr_rule *want) {
    assert_int_equal(r->af, want->family);
    if (want->prefix_len == 0) {
        assert_int_equal(r->dest, PFC_D_ANY);
    } else {
        assert_int_equal(r->dest, PFC_D_ADDR);
        assert_int_equal(r->dest_af, want->family);
        assert_int_equal(r->plen, want->prefix_len);
        assert_memory_equal(r->addr, want->addr, want->family == AF_INET ? 4 : 16);
    }
    assert_int_equal(r->port_lo, want->port_min);
    assert_int_equal(r->port_hi, want->port_max);
}

static void want_any(const struct pfc_rule *r, int af) {
    assert_int_equal(r->af, af);
    assert_int_equal(r->dest, PFC_D_ANY);
    assert_int_equal(r->port_lo, 0);
}

/* The rule order the header promises, rule by rule, from the input alone. */
static void check_order(const struct pfr_input *in, const struct pfc_doc *d) {
    const struct pfr_policy *p = &in->policy;
    const struct pfc_rule *r = d->rules;
    size_t i = 0;

    char owner[64];
    if (in->scope == PFR_SCOPE_GROUP)
        snprintf(owner, sizeof(owner), "user %" PRIu32 " group %" PRIu32, in->uid, in->guard_gid);
    else
        snprintf(owner, sizeof(owner), "user %" PRIu32, in->uid);
    assert_string_equal(d->owner, owner);

    /* the tables hold exactly the blocked ranges */
    assert_int_equal(d->n_tables, 2);
    const struct pfc_table *t4 = pfc_find_table(d, PFR_TABLE_LAN4);
    const struct pfc_table *t6 = pfc_find_table(d, PFR_TABLE_LAN6);
    assert_non_null(t4);
    assert_non_null(t6);
    assert_int_equal(t4->af, AF_INET);
    assert_int_equal(t6->af, AF_INET6);
    assert_int_equal(t4->n, DR_BLOCKED_V4_COUNT);
    assert_int_equal(t6->n, DR_BLOCKED_V6_COUNT);
    for (size_t k = 0; k < DR_BLOCKED_V4_COUNT; k++) {
        assert_memory_equal(t4->addr[k], dr_blocked_v4[k].addr, 4);
        assert_int_equal(t4->plen[k], dr_blocked_v4[k].prefix_len);
    }
    for (size_t k = 0; k < DR_BLOCKED_V6_COUNT; k++) {
        assert_memory_equal(t6->addr[k], dr_blocked_v6[k].addr, 16);
        assert_int_equal(t6->plen[k], dr_blocked_v6[k].prefix_len);
    }

    /* 1 loopback, first */
    assert_true(r[i].pass && r[i].on && !r[i].on_not && !r[i].route_to);
    assert_string_equal(r[i].on_if, "lo0");
    want_any(&r[i], 0);
    i++;
    /* 2 LAN exceptions, on any interface, before the tables */
    for (size_t k = 0; k < p->n_lan_exceptions; k++, i++) {
        assert_true(r[i].pass && !r[i].on && !r[i].route_to);
        want_dest(&r[i], &p->lan_exceptions[k]);
    }
    /* 3 the tables */
    assert_true(!r[i].pass && !r[i].on && r[i].dest == PFC_D_TABLE && r[i].af == AF_INET);
    assert_string_equal(r[i].table, PFR_TABLE_LAN4);
    assert_int_equal(r[i].port_lo, 0);
    i++;
    assert_true(!r[i].pass && !r[i].on && r[i].dest == PFC_D_TABLE && r[i].af == AF_INET6);
    assert_string_equal(r[i].table, PFR_TABLE_LAN6);
    assert_int_equal(r[i].port_lo, 0);
    i++;
    /* 4 deny rules, after the tables */
    for (size_t k = 0; k < p->n_deny; k++, i++) {
        assert_true(!r[i].pass && !r[i].on);
        want_dest(&r[i], &p->deny[k]);
    }
    /* 5 IPv6 off */
    if (p->ipv6_blocked) {
        assert_true(!r[i].pass && !r[i].on);
        want_any(&r[i], AF_INET6);
        i++;
    }
    /* 6 route-to, only with a peer */
    if (in->has_peer) {
        for (size_t k = 0; k < (p->deny_default ? p->n_allow : 1); k++) {
            if (p->deny_default && p->allow[k].family != AF_INET)
                continue;
            assert_true(r[i].pass && r[i].on && r[i].on_not && r[i].route_to);
            assert_string_equal(r[i].on_if, in->iface);
            assert_string_equal(r[i].rt_if, in->iface);
            assert_memory_equal(r[i].rt_peer, in->peer, 4);
            if (p->deny_default)
                want_dest(&r[i], &p->allow[k]);
            else
                want_any(&r[i], AF_INET);
            i++;
        }
    }
    for (size_t k = 0; k < d->n_rules; k++)
        if (r[k].route_to)
            assert_true(in->has_peer);
    /* 7 any other interface */
    assert_true(!r[i].pass && r[i].on && r[i].on_not);
    assert_string_equal(r[i].on_if, in->iface);
    want_any(&r[i], 0);
    i++;
    /* 8 the VPN */
    for (size_t k = 0; k < (p->deny_default ? p->n_allow : 1); k++, i++) {
        assert_true(r[i].pass && r[i].on && !r[i].on_not && !r[i].route_to);
        assert_string_equal(r[i].on_if, in->iface);
        if (p->deny_default)
            want_dest(&r[i], &p->allow[k]);
        else
            want_any(&r[i], 0);
    }
    /* 9 the catch-all block, last */
    assert_true(!r[i].pass && !r[i].on);
    want_any(&r[i], 0);
    assert_int_equal(i + 1, d->n_rules);
}

static char *render_ok(const struct pfr_input *in) {
    char *text = NULL;
    assert_int_equal(pfr_render(in, &text), 0);
    assert_non_null(text);
    return text;
}

static void render_check(const struct pfr_input *in, const char *golden) {
    _cleanup_free_ char *text = render_ok(in);
    _cleanup_free_ struct pfc_doc *d = pfc_new();
    if (pfc_parse(d, text) < 0)
        fail_msg("%s: rendered ruleset fails the syntax check: %s\n%s", golden, d->why, text);
    check_order(in, d);

    /* the header names the anchor; the text ends with the catch-all block */
    char anchor[PFR_NAME_MAX], want[160];
    assert_int_equal(pfr_anchor_name(in->scope, in->uid, anchor), 0);
    snprintf(want, sizeof(want), "# lianyaohu anchor %s: ", anchor);
    assert_int_equal(strncmp(text, want, strlen(want)), 0);
    snprintf(want, sizeof(want), "\nblock return out quick proto { tcp udp } from any to any %s\n",
             d->owner);
    size_t tl = strlen(text), wl = strlen(want);
    assert_true(tl > wl);
    assert_string_equal(text + tl - wl, want);
    if (golden)
        check_golden(golden, text);
}

/* ---- golden cases ------------------------------------------------------------------ */

static void test_group_peer(void **state) {
    struct pfr_input in = group_input();
    render_check(&in, "group_peer");
}

static void test_group_no_peer(void **state) {
    struct pfr_input in = group_input();
    in.has_peer = false;
    memset(in.peer, 0, sizeof(in.peer)); /* ignored without has_peer */
    render_check(&in, "group_no_peer");
}

static void test_user_scope(void **state) {
    struct pfr_input in = group_input();
    in.scope = PFR_SCOPE_USER;
    in.uid = 502;
    in.guard_gid = 0; /* not used by the user scope */
    in.iface = "utun12";
    in.peer[3] = 9;
    render_check(&in, "user_scope");
}

static void test_lan_exceptions(void **state) {
    struct dr_rule lan[] = {
        v4("192.168.1.10", 32, 0, 0),    /* a printer, every port */
        v4("10.20.0.0", 16, 8000, 8080), /* a dev subnet, port range */
        v4("172.16.5.0", 24, 22, 22),    /* one port */
        v6("fd12:3456::", 32, 22, 22),   /* ULA, one port */
        v6("fe80::", 10, 0, 0),          /* link-local, every port */
        v6("fd00::1", 128, 443, 443),    /* one host */
    };
    struct pfr_input in = group_input();
    in.policy.lan_exceptions = lan;
    in.policy.n_lan_exceptions = ARRAY_SIZE(lan);
    render_check(&in, "lan_exceptions");
}

static void test_deny(void **state) {
    struct dr_rule deny[] = {
        v4("140.82.112.4", 32, 22, 22),
        v4("0.0.0.0", 0, 25, 25), /* no SMTP anywhere */
        v4("198.51.100.0", 24, 0, 0),
        v6("2a00:1450::", 32, 1, 1024),
        v6("::", 0, 0, 0), /* IPv6 /0: "inet6 ... to any" */
    };
    struct pfr_input in = group_input();
    in.policy.deny = deny;
    in.policy.n_deny = ARRAY_SIZE(deny);
    render_check(&in, "deny");
}

static void test_deny_default(void **state) {
    struct dr_rule allow[] = {
        v4("140.82.112.0", 20, 443, 443),
        v4("151.101.0.0", 16, 0, 0),
        v6("2606:50c0::", 32, 80, 443),
        v4("0.0.0.0", 0, 53, 53), /* DNS anywhere, a /0 */
        v6("2001:4860:4860::8888", 128, 0, 0),
        v6("::", 0, 853, 853),
    };
    struct pfr_input in = group_input();
    in.policy.deny_default = true;
    in.policy.allow = allow;
    in.policy.n_allow = ARRAY_SIZE(allow);
    render_check(&in, "deny_default");
}

static void test_ipv6_blocked(void **state) {
    struct pfr_input in = group_input();
    in.policy.ipv6_blocked = true;
    render_check(&in, "ipv6_blocked");
}

static void test_deny_default_no_peer(void **state) {
    struct dr_rule allow[] = {
        v4("140.82.112.0", 20, 443, 443),
        v6("2606:50c0::", 32, 0, 0),
    };
    struct pfr_input in = group_input();
    in.has_peer = false;
    in.policy.deny_default = true;
    in.policy.allow = allow;
    in.policy.n_allow = ARRAY_SIZE(allow);
    render_check(&in, "deny_default_no_peer");

    /* deny-default with an empty allow list: nothing passes on the VPN */
    in.policy.n_allow = 0;
    in.policy.allow = NULL;
    _cleanup_free_ char *text = render_ok(&in);
    _cleanup_free_ struct pfc_doc *d = pfc_new();
    assert_int_equal(pfc_parse(d, text), 0);
    check_order(&in, d);
    for (size_t i = 1; i < d->n_rules; i++)
        assert_false(d->rules[i].pass && d->rules[i].on);
}

static void test_combined(void **state) {
    struct dr_rule lan[] = {v4("192.168.1.0", 24, 631, 631), v6("fd00::", 8, 0, 0)};
    struct dr_rule deny[] = {v4("140.82.112.4", 32, 0, 0), v6("2a00:1450:4001::", 48, 25, 25)};
    struct dr_rule allow[] = {
        v4("140.82.112.0", 20, 22, 443),
        v6("2606:50c0::", 32, 443, 443),
        v4("8.8.8.8", 32, 53, 53),
    };
    struct pfr_input in = group_input();
    in.uid = 0; /* root's agents: uid 0 is a valid owner */
    in.guard_gid = 4294967294u;
    in.iface = "utun99999";
    in.peer[0] = 100;
    in.peer[1] = 64;
    in.peer[2] = 0;
    in.peer[3] = 1;
    in.policy = (struct pfr_policy){
        .lan_exceptions = lan,
        .n_lan_exceptions = ARRAY_SIZE(lan),
        .deny = deny,
        .n_deny = ARRAY_SIZE(deny),
        .deny_default = true,
        .allow = allow,
        .n_allow = ARRAY_SIZE(allow),
        .ipv6_blocked = true,
    };
    render_check(&in, "combined");
}

/* The longest lists render and still check (no golden: 800 rules). */
static void test_max_lists(void **state) {
    struct dr_rule *v = calloc(PFR_DESTS_MAX, sizeof(*v));
    assert_non_null(v);
    for (size_t i = 0; i < PFR_DESTS_MAX; i++)
        v[i] = v4("10.0.0.0", 24, (uint16_t)(i + 1), (uint16_t)(i + 1));
    for (size_t i = 0; i < PFR_DESTS_MAX; i++)
        v[i].addr[2] = (uint8_t)i;
    struct pfr_input in = group_input();
    in.policy = (struct pfr_policy){
        .lan_exceptions = v, .n_lan_exceptions = PFR_DESTS_MAX,
        .deny = v, .n_deny = PFR_DESTS_MAX,
        .deny_default = true, .allow = v, .n_allow = PFR_DESTS_MAX,
    };
    render_check(&in, NULL);
    free(v);
}

/* ---- names and validation ----------------------------------------------------------- */

static void test_anchor_name(void **state) {
    char buf[PFR_NAME_MAX];
    assert_int_equal(pfr_anchor_name(PFR_SCOPE_GROUP, 501, buf), 0);
    assert_string_equal(buf, "com.apple/lianyaohu-501");
    assert_int_equal(pfr_anchor_name(PFR_SCOPE_USER, 501, buf), 0);
    assert_string_equal(buf, "com.apple/lianyaohu-user-501");
    assert_int_equal(pfr_anchor_name(PFR_SCOPE_GROUP, 0, buf), 0);
    assert_string_equal(buf, "com.apple/lianyaohu-0");
    assert_int_equal(pfr_anchor_name(PFR_SCOPE_USER, UINT32_MAX - 1, buf), 0);
    assert_string_equal(buf, "com.apple/lianyaohu-user-4294967294");
    /* both live below the parent that the stock pf.conf evaluates */
    assert_int_equal(strncmp(buf, PFR_ANCHOR_PARENT "/", strlen(PFR_ANCHOR_PARENT) + 1), 0);

    strcpy(buf, "untouched");
    assert_int_equal(pfr_anchor_name(PFR_SCOPE_GROUP, UINT32_MAX, buf), -EINVAL);
    assert_int_equal(pfr_anchor_name(PFR_SCOPE_USER, UINT32_MAX, buf), -EINVAL);
    assert_int_equal(pfr_anchor_name((enum pfr_scope)0, 501, buf), -EINVAL);
    assert_int_equal(pfr_anchor_name((enum pfr_scope)3, 501, buf), -EINVAL);
    assert_string_equal(buf, "untouched");
}

static void test_iface_valid(void **state) {
    static const char *const ok[] = {"utun0", "utun1", "utun12", "utun99999", "utun10"};
    static const char *const bad[] = {
        "utun", "utun01", "tun0", "utun123456", "utun1a", "", "UTUN0", "utun-1",
        "utun 1", "utun0\n", "lo0", "en0", "utun00", "xutun0", "utun+1",
    };
    for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
        if (!pfr_iface_valid(ok[i]))
            fail_msg("'%s' refused", ok[i]);
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        if (pfr_iface_valid(bad[i]))
            fail_msg("'%s' accepted", bad[i]);
    assert_false(pfr_iface_valid(NULL));
}

static void expect_einval(const struct pfr_input *in) {
    char *text = (char *)0x1;
    assert_int_equal(pfr_render(in, &text), -EINVAL);
    assert_ptr_equal(text, (char *)0x1); /* untouched on failure */
}

static void test_invalid(void **state) {
    expect_einval(NULL);

    struct pfr_input in = group_input();
    in.uid = UINT32_MAX;
    expect_einval(&in);
    in = group_input();
    in.scope = PFR_SCOPE_USER;
    in.uid = UINT32_MAX;
    expect_einval(&in);
    in = group_input();
    in.guard_gid = 0;
    expect_einval(&in);
    in = group_input();
    in.guard_gid = UINT32_MAX;
    expect_einval(&in);
    in = group_input();
    in.scope = (enum pfr_scope)0;
    expect_einval(&in);
    in = group_input();
    in.scope = (enum pfr_scope)3;
    expect_einval(&in);

    static const char *const bad_ifaces[] = {
        "utun", "utun01", "tun0", "utun123456", "utun1a", "", "en0", "utun0 route-to",
        "utun0}", "lo0",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad_ifaces); i++) {
        in = group_input();
        in.iface = bad_ifaces[i];
        expect_einval(&in);
    }
    in = group_input();
    in.iface = NULL;
    expect_einval(&in);

    in = group_input();
    memset(in.peer, 0, sizeof(in.peer));
    expect_einval(&in);
    in = group_input();
    memset(in.peer, 255, sizeof(in.peer));
    expect_einval(&in);

    struct dr_rule bad[] = {
        v4("10.1.2.3", 8, 0, 0),   /* host bits */
        v4("10.0.0.0", 33, 0, 0),  /* prefix too long */
        v4("10.0.0.0", 8, 0, 80),  /* port_max without port_min */
        v4("10.0.0.0", 8, 90, 80), /* reversed */
        v6("fe80::1", 10, 0, 0),   /* host bits */
        v6("fd00::", 129, 0, 0),   /* prefix too long */
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        in = group_input();
        in.policy.lan_exceptions = &bad[i];
        in.policy.n_lan_exceptions = 1;
        expect_einval(&in);
        in = group_input();
        in.policy.deny = &bad[i];
        in.policy.n_deny = 1;
        expect_einval(&in);
        in = group_input();
        in.policy.deny_default = true;
        in.policy.allow = &bad[i];
        in.policy.n_allow = 1;
        expect_einval(&in);
    }
    struct dr_rule fam = v4("10.0.0.0", 8, 0, 0);
    fam.family = AF_UNIX;
    in = group_input();
    in.policy.allow = &fam;
    in.policy.n_allow = 1;
    expect_einval(&in);

    /* NULL lists with a count */
    in = group_input();
    in.policy.n_lan_exceptions = 1;
    expect_einval(&in);
    in = group_input();
    in.policy.n_deny = 1;
    expect_einval(&in);
    in = group_input();
    in.policy.deny_default = true;
    in.policy.n_allow = 1;
    expect_einval(&in);

    /* one entry over the limit, in each list */
    struct dr_rule *many = calloc(PFR_DESTS_MAX + 1, sizeof(*many));
    assert_non_null(many);
    for (size_t i = 0; i <= PFR_DESTS_MAX; i++)
        many[i] = v4("192.168.0.0", 16, 0, 0);
    in = group_input();
    in.policy.lan_exceptions = many;
    in.policy.n_lan_exceptions = PFR_DESTS_MAX + 1;
    expect_einval(&in);
    in = group_input();
    in.policy.deny = many;
    in.policy.n_deny = PFR_DESTS_MAX + 1;
    expect_einval(&in);
    in = group_input();
    in.policy.allow = many;
    in.policy.n_allow = PFR_DESTS_MAX + 1;
    expect_einval(&in);
    in.policy.n_allow = PFR_DESTS_MAX; /* the limit itself is fine */
    char *text = NULL;
    assert_int_equal(pfr_render(&in, &text), 0);
    free(text);
    free(many);
}

/* ---- the checker's own tests --------------------------------------------------------- */

#define T4 "table <lyh_lan4> const { 10.0.0.0/8, 192.168.0.0/16 }\n"
#define T6 "table <lyh_lan6> const { fc00::/7 }\n"
#define OWN "user 501 group 2000000"
#define CATCH_ALL "block return out quick proto { tcp udp } from any to any " OWN "\n"

static void expect_reject(const char *body, const char *why) {
    _cleanup_free_ char *text = NULL;
    assert_true(asprintf(&text, "# header\n" T4 T6 "%s" CATCH_ALL, body) > 0);
    _cleanup_free_ struct pfc_doc *d = pfc_new();
    if (pfc_parse(d, text) == 0)
        fail_msg("checker accepted a bad line:\n%s", body);
    if (!strstr(d->why, why))
        fail_msg("checker refused\n%sfor '%s', expected '%s'", body, d->why, why);
}

static void test_checker_accepts(void **state) {
    /* every form of the subset, hand-written */
    pfc_assert_ok("# comment\n\n" T4 T6
                  "pass out quick on lo0 proto { tcp udp } from any to any " OWN " keep state\n"
                  "pass out quick inet proto { tcp udp } from any to 192.168.1.10 " OWN
                  " keep state\n"
                  "pass out quick inet6 proto { tcp udp } from any to fd00::/8 port 22 " OWN
                  " keep state\n"
                  "block return out quick inet proto { tcp udp } from any to <lyh_lan4> " OWN "\n"
                  "block return out quick inet6 proto { tcp udp } from any to <lyh_lan6> " OWN "\n"
                  "block return out quick inet proto { tcp udp } from any to any port 25 " OWN "\n"
                  "pass out quick on ! utun4 route-to (utun4 10.8.0.1) inet proto { tcp udp } "
                  "from any to 140.82.112.0/20 port 1:65535 " OWN " keep state\n"
                  "block return out quick on ! utun4 proto { tcp udp } from any to any " OWN "\n"
                  "pass out quick on utun4 proto { tcp udp } from any to any " OWN " keep state\n"
                  CATCH_ALL);
    pfc_assert_ok("pass out quick proto { tcp udp } from any to any user 0 keep state\n");
}

static void test_checker_rejects(void **state) {
    static const struct {
        const char *line, *why;
    } bad[] = {
        /* brackets */
        {"pass out quick proto { tcp udp from any to any " OWN " keep state\n", "unbalanced '{'"},
        {"pass out quick proto tcp udp } from any to any " OWN " keep state\n", "unbalanced '}'"},
        {"pass out quick on ! utun4 route-to (utun4 10.8.0.1 inet proto { tcp udp } from any "
         "to any " OWN " keep state\n", "unbalanced '('"},
        {"block return out quick inet proto { tcp udp } from any to <lyh_lan4 " OWN "\n",
         "unbalanced '<'"},
        {"block return out quick inet proto { tcp udp ) from any to any " OWN "\n",
         "unbalanced ')'"},
        {"pass out quick proto { tcp udp } from any to any " OWN " keep state }\n",
         "unbalanced '}'"},
        /* state */
        {"pass out quick inet proto { tcp udp } from any to 8.8.8.8 " OWN "\n",
         "expected 'keep'"},
        {"pass out quick inet proto { tcp udp } from any to 8.8.8.8 " OWN " keep\n",
         "expected 'state'"},
        {"block return out quick inet proto { tcp udp } from any to 8.8.8.8 " OWN
         " keep state\n", "keeps state"},
        /* owner */
        {"block return out quick proto { tcp udp } from any to any user 502 group 2000000\n",
         "differs from the first rule's"},
        {"block return out quick proto { tcp udp } from any to any user 501\n",
         "differs from the first rule's"},
        {"block return out quick proto { tcp udp } from any to any\n", "no owner"},
        {"block return out quick proto { tcp udp } from any to any group 2000000\n", "no owner"},
        {"block return out quick proto { tcp udp } from any to any user 0501 group 2000000\n",
         "no owner"},
        {"block return out quick proto { tcp udp } from any to any user 4294967295\n",
         "no owner"},
        {"block return out quick proto { tcp udp } from any to any user 501 group 0\n",
         "bad 'group N'"},
        {"block return out quick proto { tcp udp } from any to any user 501 group\n",
         "bad 'group N'"},
        /* families */
        {"block return out quick inet proto { tcp udp } from any to fd00::1 " OWN "\n",
         "family keyword"},
        {"block return out quick inet6 proto { tcp udp } from any to 10.0.0.0/8 " OWN "\n",
         "family keyword"},
        {"block return out quick proto { tcp udp } from any to 10.0.0.0/8 " OWN "\n",
         "family keyword"},
        {"block return out quick inet6 proto { tcp udp } from any to <lyh_lan4> " OWN "\n",
         "family keyword"},
        {"block return out quick inet proto { tcp udp } from any to <lyh_nope> " OWN "\n",
         "used before its definition"},
        /* destinations */
        {"block return out quick inet proto { tcp udp } from any to 10.0.0.256 " OWN "\n",
         "bad destination"},
        {"block return out quick inet proto { tcp udp } from any to 10.0.0.1/8 " OWN "\n",
         "bad destination"},
        {"block return out quick inet proto { tcp udp } from any to 10.0.0.0/33 " OWN "\n",
         "bad destination"},
        {"block return out quick inet proto { tcp udp } from any to 10.0.0.0/ " OWN "\n",
         "bad destination"},
        {"block return out quick inet proto { tcp udp } from any to example.com " OWN "\n",
         "bad destination"},
        {"block return out quick inet6 proto { tcp udp } from any to fe80::1/10 " OWN "\n",
         "bad destination"},
        /* ports */
        {"block return out quick proto { tcp udp } from any to any port 0 " OWN "\n", "bad port"},
        {"block return out quick proto { tcp udp } from any to any port 65536 " OWN "\n",
         "bad port"},
        {"block return out quick proto { tcp udp } from any to any port 90:80 " OWN "\n",
         "bad port"},
        {"block return out quick proto { tcp udp } from any to any port 80: " OWN "\n",
         "bad port"},
        {"block return out quick proto { tcp udp } from any to any port 080 " OWN "\n",
         "bad port"},
        {"block return out quick proto { tcp udp } from any to any port ssh " OWN "\n",
         "bad port"},
        {"block return out quick proto { tcp udp } from any to any port 1:2:3 " OWN "\n",
         "bad port"},
        /* route-to */
        {"block return out quick on ! utun4 route-to (utun4 10.8.0.1) inet proto { tcp udp } "
         "from any to any " OWN "\n", "route-to on a block"},
        {"pass out quick route-to (utun4 10.8.0.1) inet proto { tcp udp } from any to any " OWN
         " keep state\n", "route-to only on"},
        {"pass out quick on utun4 route-to (utun4 10.8.0.1) inet proto { tcp udp } from any to "
         "any " OWN " keep state\n", "route-to only on"},
        {"pass out quick on ! utun4 route-to (utun4 10.8.0.1) inet6 proto { tcp udp } from any "
         "to any " OWN " keep state\n", "route-to only on"},
        {"pass out quick on ! utun4 route-to (utun4 10.8.0.1) proto { tcp udp } from any "
         "to any " OWN " keep state\n", "route-to only on"},
        {"pass out quick on ! utun4 route-to (utun4 fd00::1) inet proto { tcp udp } from any "
         "to any " OWN " keep state\n", "not an IPv4 address"},
        {"pass out quick on ! utun4 route-to (utun4 0.0.0.0) inet proto { tcp udp } from any "
         "to any " OWN " keep state\n", "route-to peer"},
        {"pass out quick on ! utun4 route-to (utun5 10.8.0.1) inet proto { tcp udp } from any "
         "to any " OWN " keep state\n", "second VPN interface"},
        /* quick, actions, the words themselves */
        {"pass out on lo0 proto { tcp udp } from any to any " OWN " keep state\n",
         "expected 'quick'"},
        {"block return out proto { tcp udp } from any to any " OWN "\n", "expected 'quick'"},
        {"block drop out quick proto { tcp udp } from any to any " OWN "\n", "expected 'return'"},
        {"block out quick proto { tcp udp } from any to any " OWN "\n", "expected 'return'"},
        {"pass in quick proto { tcp udp } from any to any " OWN " keep state\n",
         "expected 'out'"},
        {"match out quick proto { tcp udp } from any to any " OWN "\n", "unknown statement"},
        {"block return out quick on utun4 proto { tcp udp } from any to any " OWN "\n",
         "only as 'on ! IF'"},
        {"pass out quick on ! lo0 proto { tcp udp } from any to any " OWN " keep state\n",
         "'on ! lo0'"},
        {"pass out quick on en0 proto { tcp udp } from any to any " OWN " keep state\n"
         "pass out quick on utun4 proto { tcp udp } from any to any " OWN " keep state\n",
         "second VPN interface"},
        {"pass out quick on utun proto { tcp udp } from any to any " OWN " keep state\n",
         "bad interface"},
        {"pass out quick on $vpn proto { tcp udp } from any to any " OWN " keep state\n",
         "unexpected byte"},
        {"block return out quick proto { tcp } from any to any " OWN "\n", "expected 'udp'"},
        {"block return out quick proto { udp tcp } from any to any " OWN "\n", "expected 'tcp'"},
        {"block return out quick proto { tcp udp } from 10.0.0.1 to any " OWN "\n",
         "expected 'any'"},
        {"block return out quick proto { tcp udp } to any " OWN "\n", "expected 'from'"},
        {"block return out quick proto { tcp udp } from any to any " OWN " label \"x\"\n",
         "unexpected byte"},
        {"block return out quick proto { tcp udp } from any to any " OWN " log\n",
         "trailing 'log'"},
        {"block return out quick proto { tcp udp } from any to any " OWN " # note\n",
         "unexpected byte"},
        {"  block return out quick proto { tcp udp } from any to any " OWN "\n",
         "leading or trailing blank"},
        {"block return out quick proto { tcp udp } from any to any " OWN "\t\n",
         "unexpected byte"},
        /* tables */
        {"table <lyh_x> const { 10.0.0.0/8 192.168.0.0/16 }\n", "expected ',' or '}'"},
        {"table <lyh_x> { 10.0.0.0/8 }\n", "expected 'const'"},
        {"table <lyh_x> const { 10.0.0.0/8, fc00::/7 }\n", "mixes families"},
        {"table <lyh_x> const { 10.0.0.1/8 }\n", "bad table entry"},
        {"table <lyh_x> const { }\n", "bad table entry"},
        {"table <lyh_lan4> const { 10.0.0.0/8 }\n", "defined twice"},
        {"table lyh_x const { 10.0.0.0/8 }\n", "without <NAME>"},
        {"table <lyh_x> const { 10.0.0.0/8 } 1\n", "trailing"},
        {"table <> const { 10.0.0.0/8 }\n", "bad table reference"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        expect_reject(bad[i].line, bad[i].why);

    /* whole-text rules */
    _cleanup_free_ struct pfc_doc *d = pfc_new();
    assert_int_equal(pfc_parse(d, ""), -1);
    assert_int_equal(pfc_parse(d, "# only a comment\n"), -1);
    assert_non_null(strstr(d->why, "no rules"));
    assert_int_equal(pfc_parse(d, CATCH_ALL T4), -1);
    assert_non_null(strstr(d->why, "table after the first rule"));
    assert_int_equal(pfc_parse(d, "block return out quick proto { tcp udp } from any to any "
                                  "user 501"), -1); /* no final newline */
    assert_int_equal(pfc_parse(d, "# a\001b\n" CATCH_ALL), -1);
}

/* Mistakes in real output are caught: each mutation of a rendered ruleset
 * (first match after the header and tables) must fail the check. */
static void test_checker_mutations(void **state) {
    struct dr_rule lan[] = {v4("192.168.1.0", 24, 631, 631)};
    struct dr_rule deny[] = {v4("140.82.112.4", 32, 0, 0)};
    struct dr_rule allow[] = {v4("140.82.112.0", 20, 22, 443), v6("2606:50c0::", 32, 0, 0)};
    struct pfr_input in = group_input();
    in.policy = (struct pfr_policy){
        .lan_exceptions = lan, .n_lan_exceptions = 1, .deny = deny, .n_deny = 1,
        .deny_default = true, .allow = allow, .n_allow = ARRAY_SIZE(allow),
    };
    _cleanup_free_ char *text = NULL;
    assert_int_equal(pfr_render(&in, &text), 0);
    pfc_assert_ok(text);
    const char *rules = strstr(text, "\npass out quick on lo0 ");
    assert_non_null(rules);
    _cleanup_free_ struct pfc_doc *d = pfc_new();

    static const struct {
        const char *from, *to, *why;
    } mut[] = {
        {" keep state\n", "\n", "expected 'keep'"},
        {"pass out quick on lo0", "pass out on lo0", "expected 'quick'"},
        {"user 501 group 2000000\n", "user 501 group 2000001\n", "differs"},
        {"user 501 group 2000000 keep", "user 501 keep", "differs"},
        {"inet proto { tcp udp } from any to 140.82.112.4", "inet6 proto { tcp udp } from any "
         "to 140.82.112.4", "family keyword"},
        {"inet6 proto { tcp udp } from any to 2606", "inet proto { tcp udp } from any to 2606",
         "family keyword"},
        {"route-to (utun4 10.8.0.1) inet", "route-to (utun4 10.8.0.1)", "family keyword"},
        {"on ! utun4 route-to", "route-to", "route-to only on"},
        {"port 22:443", "port 443:22", "bad port"},
        {"port 631", "port 0", "bad port"},
        {"to <lyh_lan4>", "to <lyh_lan5>", "used before its definition"},
        {"to <lyh_lan4>", "to <lyh_lan4", "unbalanced '<'"},
        {"{ tcp udp }", "{ tcp udp", "unbalanced '{'"},
        {"(utun4 10.8.0.1)", "(utun4 10.8.0.1", "unbalanced '('"},
        {"block return out quick on ! utun4", "block return out quick on utun4", "'on ! IF'"},
        {"block return out quick on ! utun4", "block drop out quick on ! utun4",
         "expected 'return'"},
        {"any user 501 group 2000000\n", "any user 501 group 2000000 keep state\n",
         "keeps state"},
        {"140.82.112.4", "140.82.112.4/16", "bad destination"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(mut); i++) {
        const char *at = strstr(rules, mut[i].from);
        if (!at)
            fail_msg("mutation #%zu: '%s' not in the rendered text", i, mut[i].from);
        char *bad = NULL;
        assert_true(asprintf(&bad, "%.*s%s%s", (int)(at - text), text, mut[i].to,
                             at + strlen(mut[i].from)) > 0);
        int r = pfc_parse(d, bad);
        free(bad);
        if (r == 0)
            fail_msg("mutation #%zu ('%s' -> '%s') accepted", i, mut[i].from, mut[i].to);
        if (!strstr(d->why, mut[i].why))
            fail_msg("mutation #%zu refused for '%s', expected '%s'", i, d->why, mut[i].why);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_accepts),
        cmocka_unit_test(test_checker_rejects),
        cmocka_unit_test(test_checker_mutations),
        cmocka_unit_test(test_group_peer),
        cmocka_unit_test(test_group_no_peer),
        cmocka_unit_test(test_user_scope),
        cmocka_unit_test(test_lan_exceptions),
        cmocka_unit_test(test_deny),
        cmocka_unit_test(test_deny_default),
        cmocka_unit_test(test_ipv6_blocked),
        cmocka_unit_test(test_deny_default_no_peer),
        cmocka_unit_test(test_combined),
        cmocka_unit_test(test_max_lists),
        cmocka_unit_test(test_anchor_name),
        cmocka_unit_test(test_iface_valid),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
