/* libFuzzer: bytes as the kernel (or a root process) would queue them on
 * lyhd's ruleset watch socket, through the count of changes made by someone
 * else (nft_watch_foreign), at every alignment the first byte picks. The
 * count must never read past the buffer or loop, must call a datagram of
 * nothing but lyhd's own well-formed messages not foreign, must count no more
 * than the whole messages of another's, and every one of them when they are
 * not nf_tables messages (only those can name another table). */
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "platform/linux/nft.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 5)
        return 0;
    uint32_t own;
    memcpy(&own, data, sizeof(own));
    data += 4;
    size -= 4;
    uint8_t *copy = malloc(size + 8);
    if (!copy)
        return 0;
    size_t shift = data[0] & 7;
    memcpy(copy + shift, data, size);
    int n = nft_watch_foreign(copy + shift, size, own);
    if (n < 0 || (size_t)n > size / NLMSG_HDRLEN + 1)
        abort();
    /* the same bytes with every message's port set to own: none foreign unless malformed */
    size_t off = 0;
    int whole = 1;
    while (off < size) {
        struct nlmsghdr h;
        if (size - off < sizeof(h)) {
            whole = 0;
            break;
        }
        memcpy(&h, copy + shift + off, sizeof(h));
        if (h.nlmsg_len < sizeof(h) || h.nlmsg_len > size - off) {
            whole = 0;
            break;
        }
        h.nlmsg_pid = own;
        memcpy(copy + shift + off, &h, sizeof(h));
        size_t step = ((size_t)h.nlmsg_len + 3) & ~(size_t)3;
        off += step < size - off ? step : size - off;
    }
    int m = nft_watch_foreign(copy + shift, size, own);
    if (whole && own != 0 && m != 0)
        abort();
    if (!whole && m == 0)
        abort();
    /* ... and with every port another's: each whole message counts */
    int msgs = 0;
    off = 0;
    while (whole && off < size) {
        struct nlmsghdr h;
        memcpy(&h, copy + shift + off, sizeof(h));
        h.nlmsg_pid = own + 1;
        memcpy(copy + shift + off, &h, sizeof(h));
        msgs++;
        size_t step = ((size_t)h.nlmsg_len + 3) & ~(size_t)3;
        off += step < size - off ? step : size - off;
    }
    /* (a message that names another table than lyhd's is not counted) */
    if (whole && nft_watch_foreign(copy + shift, size, own) > msgs)
        abort();
    /* ... and as messages of another subsystem than nf_tables, each counts */
    for (off = 0; whole && off < size;) {
        struct nlmsghdr h;
        memcpy(&h, copy + shift + off, sizeof(h));
        h.nlmsg_type = (uint16_t)(NFNL_SUBSYS_CTNETLINK << 8 | (h.nlmsg_type & 0xff));
        memcpy(copy + shift + off, &h, sizeof(h));
        size_t step = ((size_t)h.nlmsg_len + 3) & ~(size_t)3;
        off += step < size - off ? step : size - off;
    }
    if (whole && nft_watch_foreign(copy + shift, size, own) != msgs)
        abort();
    free(copy);
    return 0;
}
