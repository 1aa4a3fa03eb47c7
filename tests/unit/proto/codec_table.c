/* One row per message and enum of lianyaohu.proto. The rows are spelled once,
 * in LYH_MESSAGES / LYH_ENUMS, and expanded to both generators' naming
 * schemes (protobuf-c: lianyaohu__v1__snake_case__descriptor, nanopb:
 * lianyaohu_v1_CamelCase_msg), so a typo fails to compile rather than pairing
 * the wrong descriptors. Completeness is checked at test time against the
 * .proto text and the descriptor graph (test_codec_schema.c). */
#include "codec_table.h"

#include <string.h>

#include "lianyaohu.pb-c.h"
#include "lianyaohu.pb.h"

/* SIZED: nanopb emits lianyaohu_v1_<name>_size (the largest encoding).
 * UNSIZED: the message holds a callback field, so nanopb cannot bound it; the
 * frame limit (LYH_MAX_FRAME_BYTES) is then the only bound. */
#define LYH_MESSAGES(X)                                        \
    X(Request, request, UNSIZED)                               \
    X(Response, response, SIZED)                               \
    X(CapabilitiesRequest, capabilities_request, SIZED)        \
    X(CapabilitiesReply, capabilities_reply, SIZED)            \
    X(StatusRequest, status_request, SIZED)                    \
    X(GuardInfo, guard_info, SIZED)                            \
    X(StatusReply, status_reply, SIZED)                        \
    X(SessionsRequest, sessions_request, SIZED)                \
    X(SessionInfo, session_info, SIZED)                        \
    X(SessionsReply, sessions_reply, SIZED)                    \
    X(DestRule, dest_rule, SIZED)                              \
    X(EnvVar, env_var, SIZED)                                  \
    X(RunRequest, run_request, UNSIZED)                        \
    X(RunStarted, run_started, SIZED)                          \
    X(RunExited, run_exited, SIZED)                            \
    X(RunStopped, run_stopped, SIZED)                          \
    X(RunEvent, run_event, SIZED)                              \
    X(WindowSize, window_size, SIZED)                          \
    X(SignalRequest, signal_request, SIZED)                    \
    X(SignalReply, signal_reply, SIZED)                        \
    X(InstallRequest, install_request, SIZED)                  \
    X(InstallReply, install_reply, SIZED)                      \
    X(UninstallRequest, uninstall_request, SIZED)              \
    X(UninstallReply, uninstall_reply, SIZED)                  \
    X(AuditEvent, audit_event, SIZED)                          \
    X(AuditQueryRequest, audit_query_request, SIZED)           \
    X(AuditFollowRequest, audit_follow_request, SIZED)         \
    X(Policy, policy, SIZED)                                   \
    X(PolicyGetRequest, policy_get_request, SIZED)             \
    X(PolicyUpdateRequest, policy_update_request, SIZED)       \
    X(PolicyHistoryRequest, policy_history_request, SIZED)     \
    X(PolicyReply, policy_reply, SIZED)                        \
    X(PolicyEffect, policy_effect, SIZED)                      \
    X(CancelRequest, cancel_request, SIZED)                    \
    X(CancelReply, cancel_reply, SIZED)

/* An UNSIZED row whose message gained a static size would silently lose the
 * size check: refuse to build instead. */
#ifdef lianyaohu_v1_Request_size
#error "Request now has a static nanopb size: mark it SIZED in LYH_MESSAGES"
#endif
#ifdef lianyaohu_v1_RunRequest_size
#error "RunRequest now has a static nanopb size: mark it SIZED in LYH_MESSAGES"
#endif

#define NANO_SIZE_SIZED(Camel) lianyaohu_v1_##Camel##_size
#define NANO_SIZE_UNSIZED(Camel) 0

#define LYH_ENUMS(X)                                  \
    X(Code, code)                                     \
    X(Scope, scope)                                   \
    X(NetworkDefault, network_default)                \
    X(Verdict, verdict)                               \
    X(EventKind, event_kind)

#define MSG_ROW(Camel, snake, sized)                           \
    {                                                          \
        .name = #Camel,                                        \
        .pc = &lianyaohu__v1__##snake##__descriptor,           \
        .nano = &lianyaohu_v1_##Camel##_msg,                   \
        .nano_size = sizeof(lianyaohu_v1_##Camel),             \
        .nano_max_encoded = NANO_SIZE_##sized(Camel),          \
    },

#define ENUM_ROW(Camel, snake)                                 \
    {                                                          \
        .name = #Camel,                                        \
        .pc = &lianyaohu__v1__##snake##__descriptor,           \
        .nano_min = _lianyaohu_v1_##Camel##_MIN,               \
        .nano_max = _lianyaohu_v1_##Camel##_MAX,               \
    },

const struct codec_msg codec_msgs[] = { LYH_MESSAGES(MSG_ROW) };
const size_t codec_n_msgs = sizeof(codec_msgs) / sizeof(codec_msgs[0]);
const struct codec_enum codec_enums[] = { LYH_ENUMS(ENUM_ROW) };
const size_t codec_n_enums = sizeof(codec_enums) / sizeof(codec_enums[0]);

const struct codec_msg *codec_msg_by_pc(const ProtobufCMessageDescriptor *d) {
    for (size_t i = 0; i < codec_n_msgs; i++)
        if (codec_msgs[i].pc == d)
            return &codec_msgs[i];
    return NULL;
}

const struct codec_msg *codec_msg_by_nano(const pb_msgdesc_t *d) {
    for (size_t i = 0; i < codec_n_msgs; i++)
        if (codec_msgs[i].nano == d)
            return &codec_msgs[i];
    return NULL;
}

const struct codec_msg *codec_msg_by_name(const char *name) {
    for (size_t i = 0; i < codec_n_msgs; i++)
        if (strcmp(codec_msgs[i].name, name) == 0)
            return &codec_msgs[i];
    return NULL;
}

const struct codec_enum *codec_enum_by_pc(const ProtobufCEnumDescriptor *d) {
    for (size_t i = 0; i < codec_n_enums; i++)
        if (codec_enums[i].pc == d)
            return &codec_enums[i];
    return NULL;
}

const struct codec_enum *codec_enum_by_name(const char *name) {
    for (size_t i = 0; i < codec_n_enums; i++)
        if (strcmp(codec_enums[i].name, name) == 0)
            return &codec_enums[i];
    return NULL;
}
