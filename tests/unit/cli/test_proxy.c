/* Proxy-only mode's proxy URL (cli/proxy.c): what lyh hands lyhd as the one
 * address the agent may reach, and what it refuses. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "cli/proxy.h"

static void ok(const char *url, const char *scheme, const char *text) {
    struct proxy_url p;
    char why[PROXY_WHY_MAX] = "";
    int r = proxy_url_parse(url, &p, why, sizeof(why));
    if (r != 0)
        fail_msg("%s: %s", url, why);
    assert_string_equal(p.scheme, scheme);
    assert_string_equal(p.text, text);
    assert_int_equal(p.dest.port_min, p.dest.port_max);
    assert_int_equal(p.dest.prefix_len, p.dest.family == AF_INET ? 32 : 128);
}

static void refused(const char *url, const char *why_has) {
    struct proxy_url p = {.scheme = "keep"};
    char why[PROXY_WHY_MAX] = "";
    assert_int_equal(proxy_url_parse(url, &p, why, sizeof(why)), -EINVAL);
    if (!strstr(why, why_has))
        fail_msg("%s: '%s' does not say '%s'", url, why, why_has);
    assert_string_equal(p.scheme, "keep"); /* *ret untouched */
}

static void test_accepted(void **state) {
    (void)state;
    ok("http://127.0.0.1:3128", "http", "127.0.0.1:3128");
    ok("HTTP://127.0.0.1:3128/", "http", "127.0.0.1:3128");
    ok("http://127.0.0.1", "http", "127.0.0.1:80");
    ok("https://127.0.0.1", "https", "127.0.0.1:443");
    ok("socks5h://localhost", "socks5h", "127.0.0.1:1080");
    ok("socks5://[::1]:9050", "socks5", "[::1]:9050");
    ok("http://user:p%40ss@127.0.0.1:8080", "http", "127.0.0.1:8080");
    ok("http://a@b@127.0.0.2:1", "http", "127.0.0.2:1");
    ok("http://192.168.1.5:3128", "http", "192.168.1.5:3128"); /* lyhd's to judge */
}

static void test_refused(void **state) {
    (void)state;
    refused("", "empty");
    refused("127.0.0.1:3128", "no scheme");
    refused("ftp://127.0.0.1:21", "not http, https, socks5");
    refused("socks4://127.0.0.1:1080", "not http, https, socks5");
    refused("http://proxy.example:3128", "not an address");
    refused("http://127.0.0.1:0", "1 to 65535");
    refused("http://127.0.0.1:65536", "1 to 65535");
    refused("http://127.0.0.1:-1", "not a number");
    refused("http://127.0.0.1:+80", "not a number");
    refused("http://127.0.0.1:80x", "1 to 65535");
    refused("http://127.0.0.1:", "empty port");
    refused("http://127.0.0.1:3128/path", "no path");
    refused("http://127.0.0.1:3128?q", "no path");
    refused("http://[::1:3128", "unclosed");
    refused("http://[::1]x:3128", "junk");
    refused("http://", "no address");
    refused("http://user@:3128", "no address");
    char longurl[PROXY_URL_MAX + 10];
    memset(longurl, 'a', sizeof(longurl) - 1);
    longurl[sizeof(longurl) - 1] = '\0';
    memcpy(longurl, "http://", 7);
    refused(longurl, "longer than");
}

static void test_from_env(void **state) {
    (void)state;
    const char *name = NULL;
    const char *e1[] = {"PATH=/bin", "http_proxy=http://127.0.0.1:1", "ALL_PROXY=socks5h://[::1]:2"};
    assert_string_equal(proxy_from_env(e1, 3, &name), "socks5h://[::1]:2");
    assert_string_equal(name, "ALL_PROXY");
    const char *e2[] = {"HTTPS_PROXY=", "https_proxy=http://127.0.0.1:3", "HTTPS_PROXYX=x"};
    assert_string_equal(proxy_from_env(e2, 3, &name), "http://127.0.0.1:3");
    assert_string_equal(name, "https_proxy");
    const char *e3[] = {"NO_PROXY=localhost", "HTTP_PROXYX=http://127.0.0.1:4"};
    assert_null(proxy_from_env(e3, 2, NULL));
    const char *e4[] = {"HTTP_PROXY=http://127.0.0.1:5", "HTTP_PROXY=http://127.0.0.1:6"};
    assert_string_equal(proxy_from_env(e4, 2, NULL), "http://127.0.0.1:6");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_from_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
