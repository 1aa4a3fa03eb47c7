/* sbpl_render: turns a session's validated paths into a Seatbelt profile.
 *
 * This file owns the *meaning* of the macOS process sandbox, as landlock.c and
 * seccomp.c own it on Linux. It must never do I/O, exec, log or keep state:
 * sandbox_exec.c writes what we return, the golden tests pin it down.
 *
 * Why the profile reads the way it does:
 * - Seatbelt lets the last matching rule win. So the profile is in three
 *   layers: grants (broad to narrow), then the narrowing denials (identity
 *   files, system sockets, setuid exec) with the UTC time zone carved back
 *   after them, then the user's deny paths, last, so that nothing above can
 *   reopen them.
 * - Every string we print is either a constant of this file or a path that
 *   passed sbplr_path_valid(): no control characters, and '"' and '\' are
 *   escaped, so a path cannot end a string early and add a rule.
 * - Paths are matched by prefix (subpath) on the resolved path, so granting
 *   /Users/u does not grant /Users/u2; "/" would grant everything and is
 *   refused for writable and read-only extras.
 * - Metadata (stat, readlink) is readable everywhere: runtimes walk every
 *   parent of their paths. Contents are not. readlink of /etc/localtime would
 *   name the host's time zone, hence file-read* (metadata included) on it is
 *   denied after the grant.
 * - Outbound TCP/UDP is allowed to any address: where it may go is PF's job
 *   (pf_render.c), which confines the agent's sockets to the VPN. The profile
 *   keeps the agent from the sockets PF cannot see by owner (system sockets,
 *   raw sockets are not granted) and from listening anywhere but loopback.
 * - Setuid and setgid files never run: without Linux's no_new_privs, sudo
 *   would make the agent root, and root's sockets match no anchor of ours.
 *   macOS ships ps and top setuid root, so they do not run inside either.
 */
#include "platform/darwin/sbpl_render.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "platform/agent_paths.h"

/* ---- validation -------------------------------------------------------------------- */

bool sbplr_path_valid(const char *path) {
    if (!path || path[0] != '/')
        return false;
    size_t n = strnlen(path, SBPLR_PATH_MAX);
    if (n >= SBPLR_PATH_MAX)
        return false;
    if (n == 1)
        return true; /* "/" is canonical; the callers decide whether it is allowed */
    if (path[n - 1] == '/')
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)path[i];
        if (c < 0x20 || c == 0x7f)
            return false;
    }
    /* components: none empty, none "." or ".." */
    for (const char *c = path + 1; c <= path + n;) {
        const char *e = strchr(c, '/');
        size_t len = e ? (size_t)(e - c) : strlen(c);
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        if (!e)
            break;
        c = e + 1;
    }
    return true;
}

static bool not_root(const char *path) {
    return sbplr_path_valid(path) && strcmp(path, "/") != 0;
}

static bool list_valid(const char *const *v, size_t n) {
    if (n > SBPLR_PATHS_MAX || (n > 0 && !v))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!not_root(v[i]))
            return false;
    return true;
}

static bool name_valid(const char *s) {
    if (!s || !s[0] || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 || strchr(s, '/'))
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return strlen(s) < 256;
}

static int input_valid(const struct sbplr_input *in) {
    if (!in || !not_root(in->home) || !not_root(in->cwd) || !not_root(in->tmpdir))
        return -EINVAL;
    if (in->n_state_dirs > SBPLR_PATHS_MAX || (in->n_state_dirs > 0 && !in->state_dirs))
        return -EINVAL;
    for (size_t i = 0; i < in->n_state_dirs; i++)
        if (!name_valid(in->state_dirs[i]))
            return -EINVAL;
    /* home + "/" + name + "/Library/Preferences/..." must stay a valid path */
    if (strlen(in->home) + 256 + 48 >= SBPLR_PATH_MAX)
        return -EINVAL;
    if (!list_valid(in->writable, in->n_writable) || !list_valid(in->read_only, in->n_read_only) ||
        !list_valid(in->deny, in->n_deny))
        return -EINVAL;
    return 0;
}

/* ---- text -------------------------------------------------------------------------- */

/* A Scheme string literal: '"' and '\' escaped (validated input has no
 * control characters). */
static void put_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/*     (KIND "PREFIX[/NAME]") */
static void put_filter(FILE *f, const char *kind, const char *prefix, const char *name) {
    fprintf(f, "\n    (%s ", kind);
    if (!name) {
        put_str(f, prefix);
    } else {
        /* both validated: the joined path is valid too */
        char buf[SBPLR_PATH_MAX + 256];
        snprintf(buf, sizeof(buf), "%s/%s", prefix, name);
        put_str(f, buf);
    }
    fputc(')', f);
}

/* Is a (length n) a proper ancestor of p? */
static bool ancestor_of(const char *a, size_t n, const char *p) {
    return strncmp(a, p, n) == 0 && p[n] == '/';
}

/* (literal "/a") (literal "/a/b") for v[i] = "/a/b/c": every proper ancestor
 * but "/", each once: one that an earlier entry has is skipped. */
static void put_ancestors(FILE *f, const char *const *v, size_t i) {
    char buf[SBPLR_PATH_MAX];
    snprintf(buf, sizeof(buf), "%s", v[i]); /* validated: shorter than the buffer */
    for (char *slash = strchr(buf + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        size_t n = (size_t)(slash - buf);
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = ancestor_of(buf, n, v[j]);
        if (seen)
            continue;
        *slash = '\0';
        put_filter(f, "literal", buf, NULL);
        *slash = '/';
    }
}

static void put_subpaths(FILE *f, const char *const *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        put_filter(f, "subpath", v[i], NULL);
}

/* Read-only system and developer tool paths, with map-executable (dylibs,
 * frameworks, the dyld shared cache below /System). */
static const char *const system_ro[] = {
    "/System", "/usr", "/bin", "/sbin", "/opt", "/Applications", "/Library/Apple",
    "/Library/Developer", "/private/etc",
};

/* Written by the agent besides its own trees. */
static const char *const shared_rw_subpaths[] = {"/opt/homebrew", "/private/tmp",
                                                 "/private/var/tmp"};
static const char *const device_rw_literals[] = {"/dev/null", "/dev/zero", "/dev/random",
                                                 "/dev/urandom"};

/* Machine facts runtimes read at start (sysconf, uname, the CPU feature bits
 * of JITs): the benign keys Apple's own application profile allows.
 * Identity keys (kern.uuid, hw.serialnumber, kern.bootsessionuuid ...) stay
 * denied. kern.hostname is in because uname(3) fails as a whole without it;
 * the environment drops HOSTNAME regardless. */
static const char *const sysctl_names[] = {
    "hw.activecpu", "hw.busfrequency", "hw.busfrequency_compat", "hw.byteorder",
    "hw.cacheconfig", "hw.cachelinesize", "hw.cachelinesize_compat", "hw.cpu64bit_capable",
    "hw.cpufamily", "hw.cpufrequency", "hw.cpufrequency_compat", "hw.cpusubfamily",
    "hw.cpusubtype", "hw.cputype", "hw.l1dcachesize", "hw.l1dcachesize_compat",
    "hw.l1icachesize", "hw.l1icachesize_compat", "hw.l2cachesize", "hw.l2cachesize_compat",
    "hw.l3cachesize", "hw.l3cachesize_compat", "hw.logicalcpu", "hw.logicalcpu_max",
    "hw.machine", "hw.memsize", "hw.model", "hw.ncpu", "hw.nperflevels", "hw.pagesize",
    "hw.pagesize_compat", "hw.physicalcpu", "hw.physicalcpu_max", "hw.tbfrequency",
    "hw.tbfrequency_compat", "hw.vectorunit", "kern.argmax", "kern.hostname",
    "kern.maxfilesperproc", "kern.ngroups", "kern.osproductversion", "kern.osrelease",
    "kern.ostype", "kern.osvariant_status", "kern.osversion", "kern.safeboot",
    "kern.secure_kernel", "kern.usrstack64", "kern.version", "security.mac.lockdown_mode_state",
};
static const char *const sysctl_prefixes[] = {"hw.optional.", "hw.perflevel"};

/* Directory services (getpwuid, group membership) and TLS trust
 * (Security.framework asks securityd and trustd for the root certificates). */
static const char *const mach_services[] = {
    "com.apple.system.opendirectoryd.libinfo", "com.apple.system.opendirectoryd.membership",
    "com.apple.SecurityServer", "com.apple.trustd", "com.apple.trustd.agent",
};
static const char *const trust_ro_subpaths[] = {"/Library/Keychains", "/private/var/db/mds"};

/* Files that name the host's time zone or locale; read after TZ=UTC anyway. */
static const char *const identity_literals[] = {
    "/private/etc/localtime", "/Library/Preferences/.GlobalPreferences.plist"};

/* The UTC zone and ICU's time zone data, carved back after the denial: ICU
 * (JavaScriptCore, Bun) reads them even with TZ=UTC. Seatbelt matches the
 * resolved path (/var is /private/var). */
static const char *const utc_regexes[] = {
    "^/private/var/db/timezone/tz/[^/]+/zoneinfo/UTC$",
    "^/private/var/db/timezone/tz/[^/]+/zoneinfo/posixrules$",
    "^/private/var/db/timezone/tz/[^/]+/icutz/[^/]+\\.dat$",
};

static void put_consts(FILE *f, const char *kind, const char *const *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        put_filter(f, kind, v[i], NULL);
}

/* (regex #"...") : constants of this file only, printed verbatim */
static void put_regexes(FILE *f, const char *const *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        fprintf(f, "\n    (regex #\"%s\")", v[i]);
}

int sbplr_render(const struct sbplr_input *in, char **ret) {
    int r = input_valid(in);
    if (r < 0)
        return r;

    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return -ENOMEM;

    fputs(";; lianyaohu session profile (platform/darwin/sbpl_render.c).\n"
          ";; Seatbelt: the last matching rule wins.\n"
          "(version 1)\n"
          "(deny default)\n",
          f);

    fputs("\n;; processes: the agent tree forks and execs; signals and process\n"
          ";; information only within this sandbox\n"
          "(allow process-fork)\n"
          "(allow process-exec)\n"
          "(allow process-info* (target same-sandbox))\n"
          "(allow signal (target same-sandbox))\n",
          f);

    fputs("\n;; metadata everywhere (runtimes stat every parent); contents below\n"
          "(allow file-read-metadata)\n"
          "(allow file-read-data (literal \"/\"))\n",
          f);

    fputs("\n;; read-only: system and developer tools\n(allow file-read* file-map-executable",
          f);
    put_consts(f, "subpath", system_ro, ARRAY_SIZE(system_ro));
    fputs(")\n", f);

    if (in->n_read_only > 0) {
        fputs("\n;; read-only: the session's extra paths\n(allow file-read* file-map-executable",
              f);
        put_subpaths(f, in->read_only, in->n_read_only);
        fputs(")\n", f);
    }

    fprintf(f, "\n;; read/write: %s, the working directory, the per-launch tmpdir\n"
               "(allow file-read* file-write* file-map-executable",
            in->narrow_home ? "the agent state entries of home" : "home");
    if (in->narrow_home) {
        static const char *const entries[] = AGENT_NARROW_HOME_ENTRIES;
        for (size_t i = 0; i < ARRAY_SIZE(entries); i++)
            put_filter(f, "subpath", in->home, entries[i]);
    } else {
        put_filter(f, "subpath", in->home, NULL);
    }
    for (size_t i = 0; i < in->n_state_dirs; i++)
        put_filter(f, "subpath", in->home, in->state_dirs[i]);
    put_filter(f, "subpath", in->cwd, NULL);
    put_filter(f, "subpath", in->tmpdir, NULL);
    put_subpaths(f, in->writable, in->n_writable);
    fputs(")\n", f);

    fputs("\n;; read/write: Homebrew and the shared temporary directories\n"
          "(allow file-read* file-write* file-map-executable",
          f);
    put_consts(f, "subpath", shared_rw_subpaths, ARRAY_SIZE(shared_rw_subpaths));
    fputs(")\n;; device files; /dev/fd for process substitution\n(allow file-read* file-write*", f);
    put_consts(f, "literal", device_rw_literals, ARRAY_SIZE(device_rw_literals));
    put_filter(f, "subpath", "/dev/fd", NULL);
    fputs(")\n", f);

    fputs("\n;; terminals: raw mode (tcsetattr) and nested ptys\n"
          "(allow file-read* file-write* file-ioctl\n"
          "    (literal \"/dev/tty\")\n"
          "    (literal \"/dev/ptmx\")\n"
          "    (regex #\"^/dev/ttys[0-9]+$\"))\n"
          "(allow pseudo-tty)\n",
          f);

    fputs("\n;; POSIX semaphores and shared memory (Python multiprocessing)\n"
          "(allow ipc-posix-sem)\n"
          "(allow ipc-posix-shm)\n",
          f);

    fputs("\n;; directory services and TLS trust\n(allow mach-lookup", f);
    put_consts(f, "global-name", mach_services, ARRAY_SIZE(mach_services));
    fputs(")\n(allow file-read*", f);
    put_consts(f, "subpath", trust_ro_subpaths, ARRAY_SIZE(trust_ro_subpaths));
    /* the git shim refuses to run without the Xcode licence state */
    put_filter(f, "literal", "/Library/Preferences/com.apple.dt.Xcode.plist", NULL);
    fputs(")\n", f);

    fputs("\n;; machine facts (sysctl read allowlist)\n(allow sysctl-read", f);
    put_consts(f, "sysctl-name", sysctl_names, ARRAY_SIZE(sysctl_names));
    put_consts(f, "sysctl-name-prefix", sysctl_prefixes, ARRAY_SIZE(sysctl_prefixes));
    fputs(")\n", f);

    fputs("\n;; network: TCP/UDP out (PF confines it to the VPN), DNS through\n"
          ";; mDNSResponder; listening on loopback only\n"
          "(allow network-outbound\n"
          "    (remote tcp \"*:*\")\n"
          "    (remote udp \"*:*\")\n"
          "    (remote unix-socket (path-literal \"/private/var/run/mDNSResponder\")))\n"
          "(allow network-bind (local ip \"localhost:*\"))\n"
          "(allow network-inbound (local ip \"localhost:*\"))\n",
          f);

    fputs("\n;; ---- narrowing: after the grants, these win\n"
          ";; kernel control and event sockets, socket ioctls, sysctl writes\n"
          "(deny system-socket)\n"
          "(deny socket-ioctl)\n"
          "(deny sysctl-write)\n",
          f);

    fputs("\n;; files that name the host's time zone and locale\n(deny file-read*", f);
    put_consts(f, "literal", identity_literals, ARRAY_SIZE(identity_literals));
    put_filter(f, "literal", in->home, "Library/Preferences/.GlobalPreferences.plist");
    put_filter(f, "subpath", in->home, "Library/Preferences/ByHost");
    fputs(")\n;; UTC carved back\n(allow file-read*", f);
    put_regexes(f, utc_regexes, ARRAY_SIZE(utc_regexes));
    fputs(")\n", f);

    fputs("\n;; setuid and setgid files never run (no privilege gain from inside)\n"
          "(deny process-exec* (require-any (file-mode #o4000) (file-mode #o2000)))\n",
          f);

    if (in->n_deny > 0) {
        /* Seatbelt matches the path at each access: renaming an ancestor of a
         * deny path would carry its contents out from under the rule. So no
         * ancestor may be renamed, removed or replaced (its own entry only:
         * files inside it stay writable). */
        fputs("\n;; ancestors of the deny paths stay where they are\n(deny file-write*", f);
        for (size_t i = 0; i < in->n_deny; i++)
            put_ancestors(f, in->deny, i);
        fputs(")\n", f);
        fputs("\n;; the session's deny paths, last: nothing above reopens them\n"
              "(deny file-read* file-write* file-map-executable process-exec*",
              f);
        put_subpaths(f, in->deny, in->n_deny);
        fputs(")\n", f);
    }

    bool failed = ferror(f);
    if (fclose(f) != 0 || failed || !buf)
        return -ENOMEM;
    *ret = TAKE_PTR(buf);
    return 0;
}
