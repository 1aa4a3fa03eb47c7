/* lyh_darwin_tool: the Darwin backend from the command line, for
 * tests/darwin/mac_checks.sh on a Mac (built only there).
 *
 *   lyh_darwin_tool sbpl HOME CWD TMPDIR [deny PATH]...   print a profile
 *   lyh_darwin_tool pf UID IFACE [PEER]                     print an anchor (group scope)
 *   lyh_darwin_tool oif ADDR                                interface name of the route to ADDR
 *   lyh_darwin_tool preflight IFACE                         route_preflight() verdict
 *   lyh_darwin_tool canon PATH                              the path Seatbelt sees (F_GETPATH)
 *   lyh_darwin_tool pfcycle UID IFACE                       root: load the group anchor of UID
 *                                                           through pf.c, print what PF holds,
 *                                                           unload it (use an unused UID)
 *
 * Exit 0 on success, 1 with a message on failure, 2 on usage errors. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macros.h"
#include "platform/darwin/pf.h"
#include "platform/darwin/pf_render.h"
#include "platform/darwin/sandbox_exec.h"
#include "platform/darwin/sbpl_render.h"
#include "platform/route_preflight.h"

static int usage(void) {
    fprintf(stderr, "usage: lyh_darwin_tool sbpl HOME CWD TMPDIR [deny PATH]... | pf UID IFACE "
                    "[PEER] | oif ADDR | preflight IFACE | canon PATH | pfcycle UID IFACE\n");
    return 2;
}

/* Print and free what a renderer returned (r: its return value). */
static int print_rendered(const char *what, int r, char *text) {
    if (r < 0) {
        fprintf(stderr, "%s: %s\n", what, strerror(-r));
        return 1;
    }
    fputs(text, stdout);
    free(text);
    return 0;
}

static int cmd_sbpl(int argc, char **argv) {
    if (argc < 5)
        return usage();
    const char *deny[SBPLR_PATHS_MAX];
    size_t n_deny = 0;
    for (int i = 5; i + 1 < argc && n_deny < SBPLR_PATHS_MAX; i += 2)
        if (strcmp(argv[i], "deny") == 0)
            deny[n_deny++] = argv[i + 1];
    struct sbplr_input in = {.home = argv[2], .cwd = argv[3], .tmpdir = argv[4],
                             .deny = deny, .n_deny = n_deny};
    char *text = NULL;
    return print_rendered("sbpl", sbplr_render(&in, &text), text);
}

static int cmd_pf(int argc, char **argv) {
    if (argc < 4)
        return usage();
    struct pfr_input in = {.scope = PFR_SCOPE_GROUP,
                           .uid = (uint32_t)strtoul(argv[2], NULL, 10),
                           .guard_gid = PFR_DEFAULT_GUARD_GID,
                           .iface = argv[3]};
    if (argc > 4) {
        if (inet_pton(AF_INET, argv[4], in.peer) != 1)
            return usage();
        in.has_peer = true;
    }
    char *text = NULL;
    return print_rendered("pf", pfr_render(&in, &text), text);
}

static int cmd_oif(int argc, char **argv) {
    unsigned char addr[16];
    int family = argc > 2 && strchr(argv[2], ':') ? AF_INET6 : AF_INET;
    if (argc < 3 || inet_pton(family, argv[2], addr) != 1)
        return usage();
    int idx = 0;
    int r = route_oif_for(family, addr, &idx);
    char name[IF_NAMESIZE];
    if (r < 0 || !if_indextoname((unsigned)idx, name)) {
        fprintf(stderr, "oif %s: %s\n", argv[2], strerror(r < 0 ? -r : errno));
        return 1;
    }
    printf("%s\n", name);
    return 0;
}

static int cmd_preflight(int argc, char **argv) {
    if (argc < 3)
        return usage();
    struct route_preflight_result res;
    char why[256] = "";
    int r = route_preflight(argv[2], (int)if_nametoindex(argv[2]), false, &res, why, sizeof(why));
    if (r < 0) {
        printf("refused: %s\n", why);
        return 1;
    }
    printf("ok ipv6_blocked=%d %s\n", res.ipv6_blocked, res.ipv6_note);
    return 0;
}

static int cmd_canon(int argc, char **argv) {
    if (argc < 3)
        return usage();
    _cleanup_close_ int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
    char buf[SBPLR_PATH_MAX];
    int r = fd < 0 ? -errno : sbx_fd_path(fd, buf);
    if (r < 0) {
        fprintf(stderr, "canon %s: %s\n", argv[2], strerror(-r));
        return 1;
    }
    printf("%s\n", buf);
    return 0;
}

/* Prints `pfctl -a ANCHOR -s rules` between "--- rules" and "--- end". */
static int show_rules(const char *anchor) {
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "/sbin/pfctl -a '%s' -s rules 2>/dev/null", anchor);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -errno;
    char line[512];
    printf("--- rules\n");
    while (fgets(line, sizeof(line), f))
        fputs(line, stdout);
    printf("--- end\n");
    return pclose(f) == 0 ? 0 : -EIO;
}

static int cmd_pfcycle(int argc, char **argv) {
    if (argc < 4)
        return usage();
    struct pfr_input in = {.scope = PFR_SCOPE_GROUP,
                           .uid = (uint32_t)strtoul(argv[2], NULL, 10),
                           .guard_gid = PFR_DEFAULT_GUARD_GID,
                           .iface = argv[3]};
    char why[512] = "", anchor[PFR_NAME_MAX];
    struct pf *pf = NULL;
    if (pfr_anchor_name(in.scope, in.uid, anchor) < 0 || pf_open(NULL, &pf, why, sizeof(why)) < 0) {
        fprintf(stderr, "pfcycle: %s\n", why[0] ? why : "bad uid");
        return 1;
    }
    int rc = 0;
    if (pf_anchor_load(pf, &in, why, sizeof(why)) < 0) {
        fprintf(stderr, "pfcycle load: %s\n", why);
        pf_close(pf);
        return 1;
    }
    uint64_t tok = 0;
    pf_token_get(pf, in.scope, in.uid, &tok);
    printf("loaded %s token %llu\n", anchor, (unsigned long long)tok);
    if (show_rules(anchor) < 0)
        rc = 1;
    if (pf_anchor_unload(pf, in.scope, in.uid, why, sizeof(why)) < 0) {
        fprintf(stderr, "pfcycle unload: %s\n", why);
        rc = 1;
    }
    printf("unloaded %s\n", anchor);
    if (show_rules(anchor) < 0)
        rc = 1;
    pf_close(pf);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return usage();
    if (strcmp(argv[1], "sbpl") == 0)
        return cmd_sbpl(argc, argv);
    if (strcmp(argv[1], "pf") == 0)
        return cmd_pf(argc, argv);
    if (strcmp(argv[1], "oif") == 0)
        return cmd_oif(argc, argv);
    if (strcmp(argv[1], "preflight") == 0)
        return cmd_preflight(argc, argv);
    if (strcmp(argv[1], "canon") == 0)
        return cmd_canon(argc, argv);
    if (strcmp(argv[1], "pfcycle") == 0)
        return cmd_pfcycle(argc, argv);
    return usage();
}
