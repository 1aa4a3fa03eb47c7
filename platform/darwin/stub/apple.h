/* Declarations of the Apple-only parts platform/darwin uses, for compiling
 * that code on Linux (the syntax check and the routing-message unit test).
 *
 * Names, types and layouts are Apple's (xnu bsd/net/route.h, bsd/net/if_dl.h,
 * bsd/sys/socket.h, bsd/sys/fcntl.h, libc spawn.h); the values that differ
 * between the systems (AF_INET6, PF_ROUTE) keep Linux's meaning, so code that
 * uses them compiles but is never run against a kernel here. Only what
 * platform/darwin uses is declared. Never include this on Darwin. */
#ifndef LYH_PLATFORM_DARWIN_STUB_APPLE_H
#define LYH_PLATFORM_DARWIN_STUB_APPLE_H

#if defined(__APPLE__)
#error "stub/apple.h is for non-Darwin builds only"
#endif

#include <net/if.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* <sys/socket.h>: the routing socket family (Linux's PF_ROUTE is netlink) */
#ifndef AF_LINK
#define AF_LINK 18
#endif

/* <net/if_dl.h> */
struct sockaddr_dl {
    uint8_t sdl_len;
    uint8_t sdl_family;
    uint16_t sdl_index;
    uint8_t sdl_type;
    uint8_t sdl_nlen;
    uint8_t sdl_alen;
    uint8_t sdl_slen;
    char sdl_data[12];
};

/* <net/route.h> */
struct rt_metrics {
    uint32_t rmx_locks;
    uint32_t rmx_mtu;
    uint32_t rmx_hopcount;
    int32_t rmx_expire;
    uint32_t rmx_recvpipe;
    uint32_t rmx_sendpipe;
    uint32_t rmx_ssthresh;
    uint32_t rmx_rtt;
    uint32_t rmx_rttvar;
    uint32_t rmx_pksent;
    uint32_t rmx_state;
    uint32_t rmx_filler[3];
};

struct rt_msghdr {
    unsigned short rtm_msglen;
    unsigned char rtm_version;
    unsigned char rtm_type;
    unsigned short rtm_index;
    int rtm_flags;
    int rtm_addrs;
    pid_t rtm_pid;
    int rtm_seq;
    int rtm_errno;
    int rtm_use;
    uint32_t rtm_inits;
    struct rt_metrics rtm_rmx;
};

#define RTM_VERSION 5
#define RTM_GET 0x4

#define RTF_UP 0x1
#define RTF_GATEWAY 0x2
#define RTF_HOST 0x4
#define RTF_REJECT 0x8
#define RTF_BLACKHOLE 0x1000

#define RTA_DST 0x1
#define RTA_GATEWAY 0x2
#define RTA_NETMASK 0x4
#define RTA_GENMASK 0x8
#define RTA_IFP 0x10
#define RTA_IFA 0x20
#define RTA_AUTHOR 0x40
#define RTA_BRD 0x80
#define RTAX_MAX 8

/* <sys/fcntl.h>: the path of an open file (Darwin's value) */
#ifndef F_GETPATH
#define F_GETPATH 50
#endif

/* <spawn.h>: only the fds the file actions set up reach the child */
#ifndef POSIX_SPAWN_CLOEXEC_DEFAULT
#define POSIX_SPAWN_CLOEXEC_DEFAULT 0x4000
#endif

#endif
