/* guard_asan_defaults.c: compiled-in sanitizer options for the copy of
 * nft_guard_tool that tests/e2e/guard_daemon.sh runs as a probe *inside* the
 * lyh sandbox, in sanitizer builds only (tests/e2e/lib.sh links it in).
 *
 * Why: LeakSanitizer stops the world with ptrace at exit, which the sandbox's
 * seccomp filter denies, so every probe would end in "LeakSanitizer has
 * encountered a fatal error"; and the sandbox drops ASAN_OPTIONS/LSAN_OPTIONS
 * from the environment, so the defaults have to be built in. AddressSanitizer
 * and UBSan stay on. Leaks of the daemon and the CLI are still checked: they
 * run outside the sandbox and are not linked with this file. */
const char *__asan_default_options(void);
const char *__lsan_default_options(void);

__attribute__((used)) const char *__asan_default_options(void) {
    return "detect_leaks=0";
}

__attribute__((used)) const char *__lsan_default_options(void) {
    return "detect_leaks=0";
}
