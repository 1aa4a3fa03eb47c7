/* See golden_file.h. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "golden_file.h"

char *golden_read(const char *path) {
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    while (m && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        fwrite(chunk, 1, n, m);
    fclose(f);
    if (!m)
        return NULL;
    fclose(m);
    return buf;
}

void golden_check(const char *dir, const char *name, const char *ext, const char *text) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s.%s", dir, name, ext);
    const char *upd = getenv("LYH_UPDATE_GOLDEN");
    if (upd && strcmp(upd, "1") == 0) {
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(fputs(text, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
        return;
    }
    _cleanup_free_ char *want = golden_read(path);
    if (!want)
        fail_msg("golden file %s missing (run with LYH_UPDATE_GOLDEN=1 to create it)", path);
    if (strcmp(want, text) != 0) {
        print_error("--- %s (golden)\n%s--- rendered\n%s", path, want, text);
        fail_msg("rendered text differs from %s", path);
    }
}
