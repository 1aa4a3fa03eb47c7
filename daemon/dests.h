/* Destination lists as a request carries them (DestRule: RunRequest.allow,
 * deny, lan_allow; InstallRequest.lan_allow; the admin policy's lists), turned
 * into struct dr_rule with one check for all three paths. Pure. */
#ifndef LYHD_DESTS_H
#define LYHD_DESTS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/dest_rule.h"
#include "lianyaohu.pb-c.h"

/* Check in[0..n) (each well formed as dr_from_parts says, host bits zero;
 * with must_be_lan inside the blocked ranges, which a LAN exception must be)
 * into out (room for max). what names the list in why ("deny", "LAN
 * exception", a policy key), rules numbered from 1. -E2BIG for more than
 * max, -EINVAL for a bad rule; out is then partly written. */
int dests_from_msg(const char *what, Lianyaohu__V1__DestRule *const *in, size_t n, size_t max,
                   bool must_be_lan, struct dr_rule *out, char *why, size_t whylen);

#endif
