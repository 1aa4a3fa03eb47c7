/* For the daemon's unit tests that need a close that blocks: the loopback of
 * the test's own network namespace up, and a TCP socket whose close lingers.
 * Needs <cmocka.h>, <arpa/inet.h>, <errno.h>, <fcntl.h>, <net/if.h>,
 * <netinet/in.h>, <stdio.h>, <sys/ioctl.h>, <sys/socket.h>, <unistd.h>. */
#ifndef LYH_TEST_LINGERING_H
#define LYH_TEST_LINGERING_H

static inline bool lo_up(void) {
    struct ifreq ifr = {0};
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    bool ok;

    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    ok = s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
    ifr.ifr_flags |= IFF_UP;
    ok = ok && ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
    if (s >= 0)
        close(s);
    return ok;
}

/* A connected TCP client whose peer never reads, its send queue full, with
 * SO_LINGER 30 s: close() of it waits for the FIN to be acked. *ret_server
 * and *ret_listener stay open (the peer must not go away). */
static inline int lingering_socket(int *ret_server, int *ret_listener) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c, s;
    int small = 4096;
    struct linger lg = {.l_onoff = 1, .l_linger = 30};
    char buf[65536] = {0};

    assert_true(l >= 0);
    assert_int_equal(setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &len), 0);
    assert_int_equal(listen(l, 1), 0);
    c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(c >= 0);
    assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
    s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    assert_true(s >= 0);
    assert_int_equal(fcntl(c, F_SETFL, O_NONBLOCK), 0);
    for (int i = 0; i < 10000; i++)
        if (write(c, buf, sizeof(buf)) < 0)
            break;
    assert_true(errno == EAGAIN);
    assert_int_equal(fcntl(c, F_SETFL, 0), 0);
    assert_int_equal(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    *ret_server = s;
    *ret_listener = l;
    return c;
}

#endif
