/* Where a session's resolvers come from (see dns_config.h). */
#include "platform/linux/dns_config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/dns_addr.h"
#include "common/macros.h"

int dnscfg_parse_addr(const char *text, struct dr_rule *ret) {
    struct dr_rule d = {.family = AF_INET};
    if (dns_addr_parse(text, &d.family, d.addr, NULL) < 0)
        return -EINVAL;
    d.prefix_len = d.family == AF_INET ? 32 : 128;
    *ret = d;
    return 0;
}

static size_t add_unique(struct dr_rule *out, size_t n, size_t max, const struct dr_rule *d) {
    if (n >= max)
        return n;
    for (size_t i = 0; i < n; i++)
        if (out[i].family == d->family && memcmp(out[i].addr, d->addr, 16) == 0)
            return n;
    out[n] = *d;
    return n + 1;
}

/* The next line of *text into line (size bytes, NUL-terminated); a longer
 * line is skipped (line ""). false at the end. */
static bool next_line(const char **text, char *line, size_t size) {
    if (!*text || !**text)
        return false;
    const char *eol = strchr(*text, '\n');
    size_t len = eol ? (size_t)(eol - *text) : strlen(*text);
    if (len < size) {
        memcpy(line, *text, len);
        line[len] = '\0';
    } else {
        line[0] = '\0';
    }
    *text = eol ? eol + 1 : *text + len;
    return true;
}

size_t dnscfg_parse_resolv_conf(const char *text, struct dr_rule *out, size_t max) {
    char line[256];
    size_t n = 0;
    while (next_line(&text, line, sizeof(line))) {
        char *save = NULL, *key = strtok_r(line, " \t\r", &save);
        char *val = key ? strtok_r(NULL, " \t\r", &save) : NULL;
        struct dr_rule d;
        if (key && val && strcmp(key, "nameserver") == 0 && dnscfg_parse_addr(val, &d) == 0)
            n = add_unique(out, n, max, &d);
    }
    return n;
}

size_t dnscfg_parse_resolved_link(const char *text, struct dr_rule *out, size_t max) {
    char line[1024];
    size_t n = 0;
    while (next_line(&text, line, sizeof(line))) {
        char *v = NULL;
        if (strncmp(line, "SERVERS=", 8) == 0)
            v = line + 8;
        else if (strncmp(line, "DNS=", 4) == 0)
            v = line + 4;
        char *save = NULL;
        for (char *tok = v ? strtok_r(v, " \t\r", &save) : NULL; tok;
             tok = strtok_r(NULL, " \t\r", &save)) {
            char *p = strpbrk(tok, "%#");
            if (p)
                *p = '\0';
            if (tok[0] == '[') { /* [addr]:port */
                char *end = strchr(tok, ']');
                if (!end || (end[1] && strcmp(end + 1, ":53") != 0))
                    continue;
                *end = '\0';
                tok++;
            } else if (strchr(tok, '.') && strchr(tok, ':')) { /* a.b.c.d:port */
                char *c = strchr(tok, ':');
                if (strcmp(c, ":53") != 0)
                    continue;
                *c = '\0';
            }
            struct dr_rule d;
            if (dnscfg_parse_addr(tok, &d) == 0)
                n = add_unique(out, n, max, &d);
        }
    }
    return n;
}

/* Read a small file (at most 16 KiB) as text; -errno. follow: the path may
 * be a symlink (resolv.conf often is, into /run); records in the state
 * directories are read only as the files they are. */
static int read_small(int dirfd, const char *path, bool follow, char *buf, size_t size) {
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW));
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, size - 1);
    int e = errno;
    close(fd);
    if (n < 0)
        return -e;
    buf[n] = '\0';
    return 0;
}

static bool record_for(const char *name, const char *iface) {
    size_t il = strlen(iface);
    return strcmp(name, iface) == 0 || (strncmp(name, iface, il) == 0 && name[il] == '.') ||
           (strncmp(name, "tun.", 4) == 0 && strcmp(name + 4, iface) == 0);
}

static size_t from_resolvconf(const char *dir, const char *iface, struct dr_rule *out,
                              size_t max) {
    DIR *dp = opendir(dir);
    size_t n = 0;
    if (!dp)
        return 0;
    for (struct dirent *e; (e = readdir(dp)) && n < max;) {
        char buf[16384];
        if (e->d_name[0] == '.' || !record_for(e->d_name, iface) ||
            read_small(dirfd(dp), e->d_name, false, buf, sizeof(buf)) < 0)
            continue;
        struct dr_rule tmp[DNSCFG_MAX];
        size_t k = dnscfg_parse_resolv_conf(buf, tmp, DNSCFG_MAX);
        for (size_t i = 0; i < k; i++)
            n = add_unique(out, n, max, &tmp[i]);
    }
    closedir(dp);
    return n;
}

/* resolv.conf-form files, nameservers routed through the interface. */
static size_t routed_from(const char *path, bool follow, dnscfg_routed_fn routed, void *ud,
                          struct dr_rule out[static DNSCFG_MAX]) {
    char buf[16384];
    size_t n = 0;
    if (read_small(AT_FDCWD, path, follow, buf, sizeof(buf)) == 0) {
        struct dr_rule all[DNSCFG_MAX];
        size_t k = dnscfg_parse_resolv_conf(buf, all, DNSCFG_MAX);
        for (size_t i = 0; i < k; i++)
            if (routed(all[i].family, all[i].addr, ud))
                n = add_unique(out, n, DNSCFG_MAX, &all[i]);
    }
    return n;
}

int dnscfg_system_at(const char *root, const char *iface, int ifindex, const char *resolv_conf,
                     dnscfg_routed_fn routed, void *ud, struct dr_rule out[static DNSCFG_MAX],
                     size_t *ret_n, char *source, size_t sourcelen) {
    char buf[16384], path[4096];
    size_t n = 0;

    snprintf(path, sizeof(path), "%s/run/systemd/resolve/netif/%d", root, ifindex);
    if (read_small(AT_FDCWD, path, false, buf, sizeof(buf)) == 0)
        n = dnscfg_parse_resolved_link(buf, out, DNSCFG_MAX);
    if (n) {
        snprintf(source, sourcelen, "systemd-resolved");
        *ret_n = n;
        return 0;
    }
    static const char *const rc_dirs[] = {"/run/resolvconf/interface", "/run/resolvconf/interfaces"};
    for (size_t i = 0; i < ARRAY_SIZE(rc_dirs) && !n; i++) {
        snprintf(path, sizeof(path), "%s%s", root, rc_dirs[i]);
        n = from_resolvconf(path, iface, out, DNSCFG_MAX);
    }
    if (n) {
        snprintf(source, sourcelen, "resolvconf");
        *ret_n = n;
        return 0;
    }
    if (resolv_conf && (n = routed_from(resolv_conf, true, routed, ud, out)) > 0)
        snprintf(source, sourcelen, "%s", resolv_conf);
    /* A local stub's resolv.conf (127.0.0.53, dnsmasq's 127.0.1.1) names no
     * resolver beyond it; the upstream lists beside it do. */
    static const char *const upstream[] = {"/run/NetworkManager/no-stub-resolv.conf",
                                           "/run/systemd/resolve/resolv.conf"};
    for (size_t i = 0; i < ARRAY_SIZE(upstream) && !n; i++) {
        snprintf(path, sizeof(path), "%s%s", root, upstream[i]);
        if ((n = routed_from(path, false, routed, ud, out)) > 0)
            snprintf(source, sourcelen, "%s", upstream[i]);
    }
    *ret_n = n;
    return 0;
}

int dnscfg_system(const char *iface, int ifindex, const char *resolv_conf, dnscfg_routed_fn routed,
                  void *ud, struct dr_rule out[static DNSCFG_MAX], size_t *ret_n, char *source,
                  size_t sourcelen) {
    return dnscfg_system_at("", iface, ifindex, resolv_conf, routed, ud, out, ret_n, source,
                            sourcelen);
}
