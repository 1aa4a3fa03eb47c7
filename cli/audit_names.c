/* audit_names: counts per DNS name for `lyh audit summary --by-name`. See
 * audit_names.h. */
#include "cli/audit_names.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/dns_name.h"

#define MIN_SLOTS 256u
/* The names come from agents: a crafted set that shares its hash's low bits
 * would make one long cluster. The hash is seeded at random and mixed, and a
 * probe gives up after MAX_PROBE slots (that name counts as overflow), so
 * the cost stays bounded whatever the names. */
#define MAX_PROBE 64u

int audit_names_init(struct audit_names *t, size_t max_names) {
    if (max_names == 0 || max_names > SIZE_MAX / 4 / sizeof(struct audit_name))
        return -EINVAL;
    *t = (struct audit_names){.max_names = max_names};
    if (getrandom(&t->seed, sizeof(t->seed), GRND_NONBLOCK) != sizeof(t->seed))
        t->seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)t;
    t->slots = calloc(MIN_SLOTS, sizeof(*t->slots));
    if (!t->slots)
        return -ENOMEM;
    t->n_slots = MIN_SLOTS;
    return 0;
}

void audit_names_done(struct audit_names *t) {
    if (!t)
        return;
    free(t->slots);
    t->slots = NULL;
    t->n_slots = t->n = 0;
}

/* FNV-1a from a random start, then a full avalanche (splitmix64's), so the
 * index bits depend on every bit of the name and of the seed */
static uint64_t name_hash(uint64_t seed, const char *s) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

/* The slot holding name, or the free slot where it belongs; NULL when that
 * is more than max_probe slots on (max_probe 0: no bound). */
static struct audit_name *find(struct audit_name *slots, size_t n_slots, uint64_t seed,
                               const char *name, size_t max_probe) {
    size_t i = (size_t)name_hash(seed, name) & (n_slots - 1);
    for (size_t k = 0; slots[i].name[0] && strcmp(slots[i].name, name) != 0; k++) {
        if (max_probe && k >= max_probe)
            return NULL;
        i = (i + 1) & (n_slots - 1);
    }
    return &slots[i];
}

static int grow(struct audit_names *t) {
    size_t n = t->n_slots * 2;
    struct audit_name *slots = calloc(n, sizeof(*slots));
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < t->n_slots; i++)
        if (t->slots[i].name[0])
            *find(slots, n, t->seed, t->slots[i].name, 0) = t->slots[i];
    free(t->slots);
    t->slots = slots;
    t->n_slots = n;
    return 0;
}

/* What lyhd writes: lower case labels of [a-z0-9_-] joined by '.' (or "."
 * for the root). Anything else is not counted, so no odd byte reaches the
 * table or JSON. */
static bool name_ok(const char *s, size_t len) {
    if (len == 0 || len > AUDIT_NAMES_NAME_MAX)
        return false;
    if (len == 1 && s[0] == '.')
        return true;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              (c == '.' && i > 0 && i + 1 < len && s[i - 1] != '.')))
            return false;
    }
    return true;
}

/* The entry of name, made if new; NULL when over max_names (counted) or out
 * of memory (*err). */
static struct audit_name *entry(struct audit_names *t, const char *name, int *err) {
    struct audit_name *e = find(t->slots, t->n_slots, t->seed, name, MAX_PROBE);
    if (e && e->name[0])
        return e;
    if (!e || t->n >= t->max_names) {
        t->overflow++;
        return NULL;
    }
    if ((t->n + 1) * 2 > t->n_slots) {
        *err = grow(t);
        if (*err < 0)
            return NULL;
        e = find(t->slots, t->n_slots, t->seed, name, MAX_PROBE);
        if (!e) {
            t->overflow++;
            return NULL;
        }
    }
    snprintf(e->name, sizeof(e->name), "%s", name);
    t->n++;
    return e;
}

int audit_names_add(struct audit_names *t, const lianyaohu_v1_AuditEvent *ev, const char *pattern) {
    bool dns = ev->kind == lianyaohu_v1_EventKind_EVENT_KIND_DNS;
    bool flow = ev->kind == lianyaohu_v1_EventKind_EVENT_KIND_FLOW;
    const char *key = dns ? "name=" : "names=";
    size_t klen = strlen(key);
    int err = 0;

    if (!dns && !flow)
        return 0;
    if (flow && ev->verdict != lianyaohu_v1_Verdict_VERDICT_ALLOWED &&
        ev->verdict != lianyaohu_v1_Verdict_VERDICT_DENIED)
        return 0;
    /* the key=value pairs of the detail, space separated */
    char d[sizeof(ev->detail)];
    snprintf(d, sizeof(d), "%s", ev->detail);
    bool counted = false;
    for (char *save = NULL, *kv = strtok_r(d, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
        if (strncmp(kv, key, klen) != 0)
            continue;
        for (char *s2 = NULL, *n = strtok_r(kv + klen, ",", &s2); n; n = strtok_r(NULL, ",", &s2)) {
            if (!name_ok(n, strlen(n))) {
                t->odd++;
                continue;
            }
            if (pattern && !dn_match(pattern, n))
                continue;
            struct audit_name *e = entry(t, n, &err);
            if (err < 0)
                return err;
            counted = true;
            if (!e)
                continue;
            if (dns) {
                e->queries++;
                e->denied += strcmp(ev->action, "denied") == 0;
                e->failed += strcmp(ev->action, "failed") == 0;
            } else if (ev->verdict == lianyaohu_v1_Verdict_VERDICT_ALLOWED) {
                e->flows_allowed++;
            } else {
                e->flows_denied++;
            }
        }
        break; /* one such pair per record */
    }
    if (counted)
        *(dns ? &t->dns : &t->flows) += 1;
    return 0;
}

static uint64_t total(const struct audit_name *n) {
    return n->queries + n->flows_allowed + n->flows_denied;
}

static int name_cmp(const void *pa, const void *pb) {
    const struct audit_name *a = pa, *b = pb;
    uint64_t ta = total(a), tb = total(b);
    if (ta != tb)
        return ta > tb ? -1 : 1;
    return strcmp(a->name, b->name);
}

void audit_names_sort(struct audit_names *t, const struct audit_name **ret, size_t *ret_n) {
    size_t n = 0;
    for (size_t i = 0; i < t->n_slots; i++)
        if (t->slots[i].name[0])
            t->slots[n++] = t->slots[i];
    if (n > 0)
        qsort(t->slots, n, sizeof(*t->slots), name_cmp);
    *ret = t->slots;
    *ret_n = n;
}

const char *audit_names_header(void) {
    return "NAME                                         QUERIES   DENIED   FAILED  FLOWS OK  "
           "FLOWS DENIED";
}

static int fits(int k, size_t len) {
    return k < 0 ? -EINVAL : (size_t)k >= len ? -ENOSPC : 0;
}

int audit_names_table_line(const struct audit_name *n, char *buf, size_t len) {
    int k = snprintf(buf, len, "%-42s %9" PRIu64 " %8" PRIu64 " %8" PRIu64 " %9" PRIu64 " %13" PRIu64,
                     n->name, n->queries, n->denied, n->failed, n->flows_allowed, n->flows_denied);
    return fits(k, len);
}

int audit_names_json_line(const struct audit_name *n, char *buf, size_t len) {
    /* names hold only [a-z0-9._-] (name_ok): nothing to escape */
    int k = snprintf(buf, len,
                     "{\"name\":\"%s\",\"queries\":%" PRIu64 ",\"denied\":%" PRIu64
                     ",\"failed\":%" PRIu64 ",\"flows_allowed\":%" PRIu64
                     ",\"flows_denied\":%" PRIu64 "}",
                     n->name, n->queries, n->denied, n->failed, n->flows_allowed, n->flows_denied);
    return fits(k, len);
}
