/* Proxy-only mode (`lyh run --vpn none`): the proxy URL the agent is given,
 * and the address lyhd lets it reach. Pure: no I/O. */
#ifndef LYH_PROXY_H
#define LYH_PROXY_H

#include <stdbool.h>
#include <stddef.h>

#include "common/dest_rule.h"

#define PROXY_URL_MAX 512
#define PROXY_WHY_MAX 256

struct proxy_url {
    char scheme[8];          /* http, https, socks5, socks5h */
    struct dr_rule dest;     /* one address (full prefix), one port */
    char text[DR_FORMAT_MAX]; /* dr_format of dest: "127.0.0.1:3128", "[::1]:1080" */
};

/* SCHEME://[USER[:PASS]@]HOST[:PORT][/], HOST an IPv4 literal, a bracketed
 * IPv6 literal or "localhost" (127.0.0.1): lyh resolves no name for a proxy,
 * since with no VPN the name would be looked up on the LAN. PORT defaults to
 * the scheme's (http 80, https 443, socks5/socks5h 1080). -EINVAL with why. */
int proxy_url_parse(const char *url, struct proxy_url *ret, char *why, size_t whylen);

/* The proxy among "NAME=VALUE" entries (--env, [env]): the first of
 * HTTPS_PROXY, ALL_PROXY, HTTP_PROXY (either case) that has a value. NULL
 * when none; *ret_name (may be NULL) gets its name. */
const char *proxy_from_env(const char *const *env, size_t n, const char **ret_name);

/* The variables lyh sets for a proxy-only agent, in this order: each of the
 * proxy names in both cases gets the URL, NO_PROXY / no_proxy the loopback
 * names (the agent's own servers are reached directly), unless env already
 * names it. */
#define PROXY_ENV_NAMES 8
extern const char *const proxy_env_names[PROXY_ENV_NAMES];
#define PROXY_NO_PROXY "localhost,127.0.0.1,::1"

#endif
