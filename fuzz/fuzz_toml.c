/* libFuzzer: bytes as a TOML config file, through the CLI's parser (cli/toml.c),
 * then a walk of the tree (every lookup helper, every string read to its end,
 * so ASan sees a bad length) and the free. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cli/toml.h"

#define FUZZ_MAX (64u * 1024u)

/* Bounded by TOML_MAX_DEPTH, the parser's guarantee. */
static size_t walk(const struct toml_value *v) {
    size_t sum = v->pos.line + v->pos.column;
    const struct toml_key *k;
    const struct toml_value *item;

    switch (v->type) {
    case TOML_TABLE:
        for (size_t i = 0; (item = toml_table_at(v, i, &k)); i++) {
            sum += k->len + (k->len ? (unsigned char)k->name[k->len - 1] : 0);
            if (toml_table_get_n(v, k->name, k->len) != item)
                __builtin_trap(); /* a key that does not find itself */
            sum += walk(item);
        }
        break;
    case TOML_ARRAY:
        for (size_t i = 0; (item = toml_array_at(v, i)); i++)
            sum += walk(item);
        break;
    case TOML_STRING:
        sum += v->u.string.len + strlen(v->u.string.ptr);
        break;
    default:
        break;
    }
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct toml_doc *doc = NULL;
    struct toml_error err;

    if (size > FUZZ_MAX)
        return 0;
    if (toml_parse((const char *)data, size, FUZZ_MAX, &doc, &err) == 0) {
        volatile size_t sink = walk(toml_root(doc));
        (void)sink;
    } else if (memchr(err.msg, '\0', sizeof(err.msg)) == NULL) {
        __builtin_trap(); /* an unterminated message */
    }
    toml_free(doc);
    return 0;
}
