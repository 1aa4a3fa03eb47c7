/* closest_word: a bounded Levenshtein distance for "did you mean" (the
 * CLI's commands and options, lyhd's interface names). */
#include "common/closest.h"

#include <string.h>

/* Edits from a to b; words of 64 bytes or more count as far. */
static size_t edits(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la >= 64 || lb >= 64)
        return 99;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *closest_word(const char *word, const char *const *cands, size_t n) {
    const char *best = NULL;
    size_t best_d = 3, wl = strlen(word);
    for (size_t i = 0; i < n; i++) {
        size_t d = wl >= 2 && strncmp(cands[i], word, wl) == 0 ? 1 : edits(word, cands[i]);
        if (d < best_d) {
            best_d = d;
            best = cands[i];
        }
    }
    return best;
}
