/* The protocol process's own seccomp filter (daemon/proto_main.c): an
 * allowlist, installed on every thread of the calling process (TSYNC: its
 * closer's workers are started before it). No libseccomp type appears
 * here. */
#ifndef LYH_PLATFORM_SECCOMP_SELF_H
#define LYH_PLATFORM_SECCOMP_SELF_H

/* Confine the calling process (PR_SET_NO_NEW_PRIVS must be set) to the
 * system calls an event loop over sockets it was handed needs: reading and
 * writing them, UDP sockets of its own (AF_INET, AF_INET6) and unix datagram
 * ones (syslog), memory, time, randomness, exit. Anything else kills the
 * process (SIGSYS). Allocates (libseccomp): not for a child between fork and
 * exec. 0 or -errno. */
int sc_confine_protocol_self(void);

#endif
