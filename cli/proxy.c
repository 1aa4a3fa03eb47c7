/* Proxy-only mode's proxy URL (see proxy.h). */
#include "cli/proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "common/macros.h"

const char *const proxy_env_names[PROXY_ENV_NAMES] = {
    "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy",
    "HTTP_PROXY",  "http_proxy",  "NO_PROXY",  "no_proxy",
};

static int bad(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t whylen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

int proxy_url_parse(const char *url, struct proxy_url *ret, char *why, size_t whylen) {
    static const struct {
        const char *name;
        unsigned port;
    } schemes[] = {{"http", 80}, {"https", 443}, {"socks5", 1080}, {"socks5h", 1080}};
    struct proxy_url p = {.scheme = ""};
    char host[INET6_ADDRSTRLEN + 2];
    unsigned port = 0;
    const char *sep, *h, *end;

    if (!url || !*url)
        return bad(why, whylen, "empty proxy URL");
    if (strlen(url) >= PROXY_URL_MAX)
        return bad(why, whylen, "proxy URL longer than %d bytes", PROXY_URL_MAX - 1);
    sep = strstr(url, "://");
    if (!sep)
        return bad(why, whylen, "'%.200s' has no scheme; write it as http://127.0.0.1:PORT", url);
    for (size_t i = 0; i < ARRAY_SIZE(schemes) && !p.scheme[0]; i++)
        if ((size_t)(sep - url) == strlen(schemes[i].name) &&
            strncasecmp(url, schemes[i].name, (size_t)(sep - url)) == 0) {
            snprintf(p.scheme, sizeof(p.scheme), "%s", schemes[i].name);
            port = schemes[i].port;
        }
    if (!p.scheme[0])
        return bad(why, whylen, "proxy scheme '%.*s' is not http, https, socks5 or socks5h",
                   sep - url > 20 ? 20 : (int)(sep - url), url);
    h = sep + 3;
    end = h + strcspn(h, "/?#");
    if (*end && strcmp(end, "/") != 0)
        return bad(why, whylen, "a proxy URL has no path, query or fragment: '%.200s'", url);
    /* user info: everything up to the last '@' before the end */
    for (const char *a = h; a < end; a++)
        if (*a == '@')
            h = a + 1;
    const char *hend, *colon;
    if (*h == '[') {
        hend = memchr(h, ']', (size_t)(end - h));
        if (!hend)
            return bad(why, whylen, "unclosed '[' in the proxy's address");
        colon = hend + 1 < end ? hend + 1 : NULL;
        if (colon && *colon != ':')
            return bad(why, whylen, "junk after the proxy's IPv6 address");
        h++;
    } else {
        colon = memchr(h, ':', (size_t)(end - h));
        hend = colon ? colon : end;
    }
    if (hend == h || (size_t)(hend - h) >= sizeof(host))
        return bad(why, whylen, "the proxy URL names no address");
    memcpy(host, h, (size_t)(hend - h));
    host[hend - h] = '\0';
    if (colon) {
        char *pe;
        const char *ps = colon + 1;
        if (ps == end)
            return bad(why, whylen, "empty port in the proxy URL");
        if (*ps < '0' || *ps > '9')
            return bad(why, whylen, "the proxy's port is not a number");
        unsigned long v = strtoul(ps, &pe, 10);
        if (pe != end || v == 0 || v > 65535)
            return bad(why, whylen, "the proxy's port is not 1 to 65535");
        port = (unsigned)v;
    }
    if (strcasecmp(host, "localhost") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    p.dest.port_min = p.dest.port_max = (uint16_t)port;
    if (inet_pton(AF_INET, host, p.dest.addr) == 1) {
        p.dest.family = AF_INET;
        p.dest.prefix_len = 32;
    } else if (inet_pton(AF_INET6, host, p.dest.addr) == 1) {
        p.dest.family = AF_INET6;
        p.dest.prefix_len = 128;
    } else {
        return bad(why, whylen,
                   "the proxy's host '%.100s' is not an address: name it by address "
                   "(127.0.0.1, [::1]); with no VPN, lyh would look the name up on the LAN",
                   host);
    }
    if (dr_format(&p.dest, p.text, sizeof(p.text)) < 0)
        return bad(why, whylen, "the proxy's address is not usable");
    *ret = p;
    return 0;
}

const char *proxy_from_env(const char *const *env, size_t n, const char **ret_name) {
    for (size_t k = 0; k < 6; k++) {
        size_t l = strlen(proxy_env_names[k]);
        /* the last entry of a name wins, as in the agent's environment */
        const char *v = NULL;
        for (size_t i = 0; i < n; i++)
            if (strncmp(env[i], proxy_env_names[k], l) == 0 && env[i][l] == '=')
                v = env[i] + l + 1;
        if (v && *v) {
            if (ret_name)
                *ret_name = proxy_env_names[k];
            return v;
        }
    }
    return NULL;
}
