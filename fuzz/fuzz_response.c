/* libFuzzer: bytes from a daemon, through the client's nanopb response
 * decoder. The client must never crash or overrun on what a (compromised or
 * buggy) daemon sends. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cli/lyh_client.h"
#include "common/lyh_limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static lianyaohu_v1_Response resp;

    if (size > LYH_MAX_FRAME_BYTES)
        return 0;
    resp = (lianyaohu_v1_Response)lianyaohu_v1_Response_init_zero;
    (void)lyh_client_decode_response(data, size, &resp);
    return 0;
}
