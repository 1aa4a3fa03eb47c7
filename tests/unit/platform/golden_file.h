/* Golden files for the renderer tests (nftables, PF, SBPL): read a file whole,
 * and compare rendered text with <dir>/<name>.<ext>, or rewrite that file when
 * LYH_UPDATE_GOLDEN=1 (review the diff!). A mismatch fails the cmocka test
 * and prints both texts. */
#ifndef LYH_TESTS_GOLDEN_FILE_H
#define LYH_TESTS_GOLDEN_FILE_H

/* The file's bytes, NUL-terminated, newly allocated (free()); NULL when it
 * cannot be read. */
char *golden_read(const char *path);

void golden_check(const char *dir, const char *name, const char *ext, const char *text);

#endif
