/* libFuzzer: one datagram through the background session's message decoder
 * (cli/hold_msg.c), as the holder reads a client's and `lyh attach` reads
 * the holder's. What decodes must encode again to the same bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/hold_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static uint8_t again[HOLD_MSG_MAX];
    struct hold_msg m;

    if (size > HOLD_MSG_MAX + 16)
        return 0;
    if (hold_msg_decode(data, size, &m) != 0)
        return 0;
    int n = hold_msg_encode(&m, again, sizeof(again));
    if (n < 0 || (size_t)n != size || memcmp(again, data, size) != 0)
        abort();
    return 0;
}
