/* Protocol constants and limits shared by the protobuf-c daemon and the nanopb
 * client. One definition each: both codecs and every test read them from here. */
#ifndef LYH_LIMITS_H
#define LYH_LIMITS_H

/* The protocol version this build speaks (Request.protocol_version). */
#define LYH_PROTOCOL_VERSION 1u

/* Frame = 1 flag byte + 4-byte big-endian length + body. */
#define LYH_FRAME_HEADER_BYTES 5u
/* Largest body accepted by either side; a larger length is refused before any
 * allocation. */
#define LYH_MAX_FRAME_BYTES (1u << 20)
/* Flag byte values. Bit 0 is gRPC's "compressed"; we never compress, so any
 * non-zero flag byte is a protocol error. */
#define LYH_FRAME_FLAGS_NONE 0u

/* Most fds one Request may carry (Run with a pty slave carries 1, without one 3). */
#define LYH_MAX_FDS_PER_MESSAGE 3u

/* Method numbers in Request.method are in this range; an unknown field number in
 * it means "a method this daemon does not know" (UNIMPLEMENTED), any other unknown
 * field is refused with FAILED_PRECONDITION. */
#define LYH_METHOD_FIELD_MIN 10u
#define LYH_METHOD_FIELD_MAX 99u

/* Default socket and state locations. */
#define LYH_DEFAULT_SOCKET "/var/run/lianyaohu-helper.sock"
#define LYH_DEFAULT_STATE_DIR "/var/lib/lianyaohu"
#define LYH_SOCKET_ENV "LYH_SOCKET"

/* The guard group: sockets owned by this gid are subject to the egress guard. */
#define LYH_GUARD_GID_DEFAULT 2000000u
/* Each user's agents get a guard gid of their own in guard_gid+1 ..
 * guard_gid+LYH_GUARD_GID_SPAN-1 (guard_gid itself is group _lianyaohu's);
 * the firewall guards the whole range. */
#define LYH_GUARD_GID_SPAN 65536u
#define LYH_GUARD_GROUP_NAME "_lianyaohu"

#endif
