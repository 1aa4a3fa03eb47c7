/* One check of destination lists from the wire (see dests.h). Run, Install
 * and the admin policy each used to convert and check their lists on their
 * own; a rule one path refused and another took would be a hole. */
#include "daemon/dests.h"

#include <errno.h>
#include <stdio.h>

int dests_from_msg(const char *what, Lianyaohu__V1__DestRule *const *in, size_t n, size_t max,
                   bool must_be_lan, struct dr_rule *out, char *why, size_t whylen) {
    if (n > max) {
        snprintf(why, whylen, "too many %s rules (%zu; at most %zu)", what, n, max);
        return -E2BIG;
    }
    for (size_t i = 0; i < n; i++) {
        char dwhy[DR_WHY_MAX];
        if (!in[i]) {
            snprintf(why, whylen, "%s rule %zu is missing", what, i + 1);
            return -EINVAL;
        }
        if (dr_from_parts(in[i]->addr.data, in[i]->addr.len, in[i]->prefix_len, in[i]->port_min,
                          in[i]->port_max, &out[i], dwhy, sizeof(dwhy)) < 0) {
            snprintf(why, whylen, "%s rule %zu: %s", what, i + 1, dwhy);
            return -EINVAL;
        }
        if (must_be_lan && !dr_in_blocked_ranges(&out[i])) {
            char txt[DR_FORMAT_MAX];
            dr_format(&out[i], txt, sizeof(txt));
            snprintf(why, whylen,
                     "%s rule %zu: %s is not inside a blocked range (LAN, CGN, link-local, ...); "
                     "it is reachable through the VPN already or not at all",
                     what, i + 1, txt);
            return -EINVAL;
        }
    }
    return 0;
}
