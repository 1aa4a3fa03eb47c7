/* The admin policy file: TOML in, the typed lianyaohu.v1.Policy out (the
 * daemon parses no text; `lyh policy set` does this here). Pure: no I/O.
 *
 * The file holds top-level keys named like the Policy fields:
 *   allowed_interface_patterns = ["tun*", "wg*"]
 *   permit_allow_non_default_route = true
 *   permit_no_firewall = false
 *   permit_shared_user_firewall = true
 *   forbid_proxy_only = false
 *   permit_lan_proxy = false
 *   lan_allow_ceiling = ["192.168.0.0/16"]      (DestRule strings)
 *   always_deny = ["203.0.113.7", "[2001:db8::/32]:443"]
 *   extra_env_block = ["AWS_PROFILE"]
 *   writable_prefixes = ["/srv/work"]
 *   log_allowed_flows = true
 *   max_sessions_per_uid = 4
 *   audit_retention_days = 30
 *   audit_max_bytes = 1073741824
 * A key left out takes the built-in default's value for that key as the
 * daemon documents it (docs/admin.md): booleans false except
 * log_allowed_flows (true), lists empty, numbers 0. Unknown keys, wrong types
 * and bad values are errors naming NAME:LINE:COLUMN and the key; the daemon
 * validates everything again. */
#ifndef LYH_POLICY_TOML_H
#define LYH_POLICY_TOML_H

#include <stddef.h>

#include "lianyaohu.pb.h"

#define POLICY_FILE_MAX (256u * 1024u)

/* 0, or -EBADMSG / -EFBIG / -E2BIG / -ENOMEM with err set ("NAME:L:C: key: what"). */
int policy_from_toml(const char *name, const char *buf, size_t len, lianyaohu_v1_Policy *ret,
                     char *err, size_t errlen);

/* The policy as a file policy_from_toml() reads back to the same message.
 * Writes to f. */
#include <stdio.h>
void policy_print_toml(FILE *f, const lianyaohu_v1_Policy *p);

#endif
