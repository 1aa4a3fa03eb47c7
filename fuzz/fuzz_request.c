/* libFuzzer: bytes from a client, through the daemon's frame reader, request
 * decoder (protobuf-c) and unknown-field check. Input is a byte stream fed in
 * chunks whose sizes come from the input itself. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/frame.h"
#include "daemon/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct frame_reader r;
    size_t off = 0;

    if (size > 2 * 1024 * 1024)
        return 0;
    frame_reader_init(&r, 0);
    while (off < size) {
        /* First byte of the input picks the chunk size, so partial reads are explored. */
        size_t chunk = 1 + (size_t)(data[0] % 64);
        size_t n = size - off < chunk ? size - off : chunk;
        bool done = false;
        ssize_t used = frame_reader_feed(&r, data + off, n, &done);
        if (used < 0)
            break;
        off += (size_t)used;
        if (done) {
            uint32_t len;
            uint8_t *body = frame_reader_take(&r, &len, NULL, NULL);
            LyhRequest *req = NULL;
            if (wire_request_decode(body, len, &req) == 0) {
                struct wire_check chk;
                wire_request_check(req, &chk);
                (void)wire_find_nul_string(body, len, &chk);
                (void)wire_method_name(req->method_case);
                wire_request_free(req);
            }
            free(body);
        }
    }
    frame_reader_done(&r);
    return 0;
}
