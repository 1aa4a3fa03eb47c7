/* lyh config on a terminal: a full-screen editor (ncurses) of the user's
 * global config file and the current project file.
 *
 * Every key of the schema is a row: its value in the file being edited (or,
 * when that file does not set it, the merged value dimmed and where it comes
 * from) and a one-line description. An edit never reaches the file's text
 * unless the text it makes passes the loader's own checks (cfg_edit_set,
 * then cfg_check_text, as the user types): the error shows under the line
 * being typed and Enter does not apply it. Saving writes the file (0600,
 * temp file + rename); saving the project file approves it in the trust
 * store, after showing what it widens and asking. Nothing here talks to
 * lyhd. */
#include <curses.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/config.h"
#include "cli/toml.h"
#include "common/macros.h"

#define UI_MAX_KEYS 64
#define UI_LINE 1024

struct ui_file {
    char *path; /* owned; NULL: none (no project file here) */
    bool project;
    char *text; /* owned */
    size_t len;
    bool dirty;
};

struct ui {
    struct cfg_ctx ctx;
    struct cfg_ctx_buf ctx_buf;
    struct cfg *merged; /* as the files on disk say */
    struct ui_file file[2];
    int cur;         /* the file being edited */
    struct cfg_key_info keys[UI_MAX_KEYS];
    size_t n_keys, row, top;
    char status[UI_LINE];
    bool status_err;
};

static void set_status(struct ui *u, bool err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_status(struct ui *u, bool err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(u->status, sizeof(u->status), fmt, ap);
    va_end(ap);
    u->status_err = err;
}

/* The value the file's text gives section.key, as the row shows it (a list
 * ", "-joined); false when the file does not set it. line: where. */
static bool file_value(const struct ui_file *f, const struct cfg_key_info *k, char *buf,
                       size_t len, unsigned *line) {
    _cleanup_(toml_freep) struct toml_doc *doc = NULL;
    struct toml_error terr;
    const struct toml_value *sec, *v;

    if (!f->text || toml_parse(f->text, f->len, CFG_MAX_FILE, &doc, &terr) < 0)
        return false;
    sec = toml_table_get(toml_root(doc), k->section);
    v = sec && sec->type == TOML_TABLE ? toml_table_get(sec, k->name) : NULL;
    if (!v)
        return false;
    *line = v->pos.line;
    buf[0] = '\0';
    if (v->type == TOML_BOOL) {
        snprintf(buf, len, "%s", v->u.boolean ? "true" : "false");
    } else if (v->type == TOML_STRING) {
        snprintf(buf, len, "%s", v->u.string.ptr);
    } else if (v->type == TOML_ARRAY) {
        size_t at = 0;
        for (size_t i = 0; i < toml_array_len(v) && at + 1 < len; i++) {
            const struct toml_value *it = toml_array_at(v, i);
            int w = snprintf(buf + at, len - at, "%s%s", i ? ", " : "",
                             it->type == TOML_STRING ? it->u.string.ptr : "?");
            at = w < 0 ? at : at + (size_t)w >= len ? len - 1 : at + (size_t)w;
        }
    } else {
        snprintf(buf, len, "(%s)", toml_type_name(v->type));
    }
    return true;
}

/* What the user typed as a TOML value: a string quoted; a list split at
 * commas, each item trimmed and quoted ("" is the empty list). NULL: ENOMEM. */
static char *typed_to_toml(const struct cfg_key_info *k, const char *typed) {
    if (k->type != CFG_KEY_LIST)
        return cfg_toml_string(typed);
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    if (!f)
        return NULL;
    fputc('[', f);
    bool first = true;
    for (const char *p = typed; *p;) {
        const char *comma = strchr(p, ',');
        size_t l = comma ? (size_t)(comma - p) : strlen(p);
        while (l && (*p == ' ' || *p == '\t'))
            p++, l--;
        while (l && (p[l - 1] == ' ' || p[l - 1] == '\t'))
            l--;
        if (l) {
            _cleanup_free_ char *item = strndup(p, l), *q = item ? cfg_toml_string(item) : NULL;
            if (!q) {
                fclose(f);
                free(out);
                return NULL;
            }
            fprintf(f, "%s%s", first ? "" : ", ", q);
            first = false;
        }
        p = comma ? comma + 1 : p + strlen(p);
    }
    fputc(']', f);
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* The file's text with section.key set to value_toml (NULL: removed), if
 * the loader would take it: 0 with *ret (malloc'd), else -errno with the
 * loader's words in err. */
static int try_edit(struct ui *u, const struct cfg_key_info *k, const char *value_toml,
                    char **ret, struct cfg_error *err) {
    struct ui_file *f = &u->file[u->cur];
    _cleanup_free_ char *out = NULL;
    int r;

    if (k->global_only && f->project)
        return snprintf(err->msg, sizeof(err->msg),
                        "[%s] belongs in the global file only (Tab switches file)", k->section),
               -EINVAL;
    if ((r = cfg_edit_set(f->text ? f->text : "", f->len, k->section, k->name, value_toml, &out,
                          err)) < 0)
        return r;
    if ((r = cfg_check_text(&u->ctx, f->path, out, strlen(out), f->project, err)) < 0)
        return r;
    *ret = TAKE_PTR(out);
    return 0;
}

static void apply(struct ui *u, char *text) {
    struct ui_file *f = &u->file[u->cur];
    free(f->text);
    f->text = text;
    f->len = strlen(text);
    f->dirty = true;
}

static int reload(struct ui *u, struct cfg_error *err) {
    struct cfg_cli cli = CFG_CLI_INIT;
    struct cfg *c = NULL;
    int r = cfg_load(&u->ctx, &cli, &c, err);
    if (r < 0)
        return r;
    cfg_free(u->merged);
    u->merged = c;
    return 0;
}

static void draw(struct ui *u) {
    int rows, cols;
    getmaxyx(stdscr, rows, cols);
    erase();
    struct ui_file *f = &u->file[u->cur];
    attron(A_BOLD);
    mvprintw(0, 0, "lyh config: %s file %s%s", f->project ? "project" : "global",
             f->path ? f->path : "(none)", f->dirty ? "  [modified]" : "");
    attroff(A_BOLD);
    mvprintw(1, 0, "Up/Down move  Enter edit  Space toggle  d unset  Tab %s file  s save  q quit",
             u->cur ? "global" : "project");
    mvprintw(2, 0, "%-34s %-30s %-20s %s", "KEY", "VALUE", "FROM", "WHAT");
    int list_rows = rows - 6;
    if (list_rows < 1)
        list_rows = 1;
    if (u->row < u->top)
        u->top = u->row;
    if (u->row >= u->top + (size_t)list_rows)
        u->top = u->row - (size_t)list_rows + 1;
    for (size_t i = u->top; i < u->n_keys && (int)(i - u->top) < list_rows; i++) {
        const struct cfg_key_info *k = &u->keys[i];
        char key[64], val[UI_LINE], from[96];
        unsigned line = 0;
        bool here = file_value(f, k, val, sizeof(val), &line);
        snprintf(key, sizeof(key), "%s.%s", k->section, k->name);
        if (here) {
            snprintf(from, sizeof(from), "this file:%u", line);
        } else {
            const char *o = "";
            if (!u->merged || cfg_value_text(u->merged, k->section, k->name, val, sizeof(val),
                                             &o) < 0)
                val[0] = '\0';
            const char *slash = strrchr(o, '/');
            snprintf(from, sizeof(from), "%s", slash ? slash + 1 : o);
        }
        if (k->global_only && f->project)
            snprintf(from, sizeof(from), "(global only)");
        int y = 3 + (int)(i - u->top);
        if (i == u->row)
            attron(A_REVERSE);
        if (!here)
            attron(A_DIM);
        mvprintw(y, 0, "%-34.34s %-30.30s %-20.20s %.*s", key, val, from,
                 cols > 87 ? cols - 87 : 0, k->desc);
        attroff(A_DIM | A_REVERSE);
    }
    if (u->status[0]) {
        if (u->status_err)
            attron(A_BOLD);
        mvprintw(rows - 2, 0, "%.*s", cols, u->status);
        clrtoeol();
        attroff(A_BOLD);
    }
    refresh();
}

/* Type a new value for key k at the bottom, checked as it is typed. */
static void edit_line(struct ui *u, const struct cfg_key_info *k) {
    char typed[UI_LINE] = "", cur[UI_LINE];
    unsigned line;
    const char *o;
    int rows, cols;

    /* what this file says; else, for a single value, what applies now (a
     * list adds to the layers below: it starts empty) */
    if (file_value(&u->file[u->cur], k, cur, sizeof(cur), &line) ||
        (k->type != CFG_KEY_LIST && u->merged &&
         cfg_value_text(u->merged, k->section, k->name, cur, sizeof(cur), &o) == 0))
        snprintf(typed, sizeof(typed), "%s", cur);
    curs_set(1);
    for (;;) {
        struct cfg_error err = {{0}};
        _cleanup_free_ char *value = typed_to_toml(k, typed), *out = NULL;
        int r = value ? try_edit(u, k, value, &out, &err) : -ENOMEM;
        draw(u);
        getmaxyx(stdscr, rows, cols);
        if (r == 0) {
            mvprintw(rows - 2, 0, "ok: Enter applies, Esc cancels%s",
                     k->type == CFG_KEY_LIST ? " (a list: items separated by commas)" : "");
            clrtoeol();
        } else {
            attron(A_BOLD);
            mvprintw(rows - 2, 0, "error: %.*s", cols > 8 ? cols - 8 : 0,
                     err.msg[0] ? err.msg : strerror(-r));
            clrtoeol();
            attroff(A_BOLD);
        }
        mvprintw(rows - 1, 0, "%s.%s = %.*s", k->section, k->name, cols > 40 ? cols - 40 : 0,
                 typed);
        clrtoeol();
        refresh();
        int ch = getch();
        size_t n = strlen(typed);
        if (ch == 27) { /* Esc */
            set_status(u, false, "not changed");
            break;
        }
        if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
            if (r == 0) {
                apply(u, TAKE_PTR(out));
                set_status(u, false, "%s.%s set (s saves)", k->section, k->name);
                break;
            }
            continue; /* an invalid value is not applied */
        }
        if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && n > 0)
            typed[n - 1] = '\0';
        else if (ch == 21) /* Ctrl-U */
            typed[0] = '\0';
        else if (ch >= 0x20 && ch < 0x7f && n + 1 < sizeof(typed)) {
            typed[n] = (char)ch;
            typed[n + 1] = '\0';
        }
    }
    curs_set(0);
}

/* Space on a boolean: the opposite of what applies now. d: unset. */
static void set_direct(struct ui *u, const struct cfg_key_info *k, const char *value_toml) {
    struct cfg_error err = {{0}};
    char *out = NULL;
    int r = try_edit(u, k, value_toml, &out, &err);
    if (r < 0) {
        set_status(u, true, "not changed: %s", err.msg[0] ? err.msg : strerror(-r));
        return;
    }
    apply(u, out);
    set_status(u, false, "%s.%s %s (s saves)", k->section, k->name,
               value_toml ? "set" : "unset: the layers below apply");
}

static bool ask_yes(const char *question) {
    int rows, cols;
    getmaxyx(stdscr, rows, cols);
    attron(A_BOLD);
    mvprintw(rows - 2, 0, "%.*s", cols, question);
    attroff(A_BOLD);
    clrtoeol();
    move(rows - 1, 0);
    clrtoeol();
    refresh();
    int ch = getch();
    return ch == 'y' || ch == 'Y';
}

static void save(struct ui *u) {
    struct ui_file *f = &u->file[u->cur];
    struct cfg_error err = {{0}};
    char widens[512] = "", hex[CFG_SHA256_HEX];
    int r;

    if (!f->path || !f->dirty) {
        set_status(u, false, "nothing to save");
        return;
    }
    if (f->project) {
        /* saving approves it: what that lets the file do, first */
        if ((r = cfg_text_widenings(&u->ctx, f->path, f->text, f->len, widens, sizeof(widens),
                                    &err)) < 0) {
            set_status(u, true, "not saved: %s", err.msg);
            return;
        }
        char q[UI_LINE];
        snprintf(q, sizeof(q),
                 "Saving approves %s in your trust store; it widens: %s. Save and approve? [y/N]",
                 f->path, widens[0] ? widens : "nothing");
        if (!ask_yes(q)) {
            set_status(u, false, "not saved");
            return;
        }
    }
    if ((r = cfg_write_file(f->path, f->text, f->len, &err)) < 0) {
        set_status(u, true, "not saved: %s", err.msg);
        return;
    }
    if (f->project) {
        _cleanup_free_ char *dir = strdup(f->path);
        char *slash = dir ? strrchr(dir, '/') : NULL;
        if (slash)
            *slash = '\0';
        /* the hash of the bytes written, not of the file read back: an
         * agent that rewrites the file meanwhile gets no approval for it */
        cfg_sha256_hex(f->text, f->len, hex);
        if (!dir || cfg_trust_set(u->merged->trust_path, dir[0] ? dir : "/", hex, &err) < 0) {
            set_status(u, true, "saved, but not approved: %s", err.msg);
            f->dirty = false;
            return;
        }
    }
    f->dirty = false;
    if ((r = reload(u, &err)) < 0)
        set_status(u, true, "saved; the files do not load: %s", err.msg);
    else
        set_status(u, false, "saved %s%s", f->path, f->project ? " and approved it" : "");
}

static void run(struct ui *u) {
    bool quit_armed = false;
    for (;;) {
        draw(u);
        int ch = getch();
        const struct cfg_key_info *k = &u->keys[u->row];
        if (ch != 'q')
            quit_armed = false;
        switch (ch) {
        case KEY_UP:
        case 'k':
            if (u->row > 0)
                u->row--;
            break;
        case KEY_DOWN:
        case 'j':
            if (u->row + 1 < u->n_keys)
                u->row++;
            break;
        case '\t':
            if (u->file[!u->cur].path) {
                u->cur = !u->cur;
                set_status(u, false, " ");
            } else {
                set_status(u, false, "no project file here (%s from this directory up to $HOME)",
                           CFG_PROJECT_NAME);
            }
            break;
        case ' ':
        case '\n':
        case '\r':
        case KEY_ENTER:
            if (k->type == CFG_KEY_BOOL) {
                char cur[16];
                unsigned line;
                const char *o;
                bool now = (file_value(&u->file[u->cur], k, cur, sizeof(cur), &line) ||
                            (u->merged && cfg_value_text(u->merged, k->section, k->name, cur,
                                                         sizeof(cur), &o) == 0)) &&
                           strcmp(cur, "true") == 0;
                set_direct(u, k, now ? "false" : "true");
            } else if (ch != ' ') {
                edit_line(u, k);
            }
            break;
        case 'd': set_direct(u, k, NULL); break;
        case 's': save(u); break;
        case 'q':
            if ((u->file[0].dirty || u->file[1].dirty) && !quit_armed) {
                set_status(u, true, "unsaved changes: s saves, q again quits without saving");
                quit_armed = true;
                break;
            }
            return;
        default: break;
        }
    }
}

static int load_file_text(struct ui_file *f, struct cfg_error *err) {
    struct stat st;
    if (!f->path)
        return 0;
    if (stat(f->path, &st) < 0 && errno == ENOENT) {
        f->text = strdup("");
        return f->text ? 0 : -ENOMEM;
    }
    return cfg_read_file(f->path, &f->text, &f->len, err);
}

int config_edit(void) {
    _cleanup_free_ struct ui *u = calloc(1, sizeof(*u));
    struct cfg_error err = {{0}};
    int r;

    if (!u)
        return EXIT_DAEMON_ERROR;
    if ((r = cli_config_ctx(&u->ctx, &u->ctx_buf, NULL, false)) < 0) {
        fprintf(stderr, "lyh config: cannot tell the current directory: %s\n", strerror(-r));
        return EXIT_USAGE;
    }
    u->ctx.note = NULL;
    if ((r = reload(u, &err)) < 0) {
        fprintf(stderr, "lyh config: %s\nlyh config: fix that by hand first\n",
                err.msg[0] ? err.msg : strerror(-r));
        return EXIT_USAGE;
    }
    /* the paths are ours: a reload frees the cfg they came from */
    u->file[0] = (struct ui_file){.path = strdup(u->merged->global_path)};
    u->file[1] = (struct ui_file){.project = true};
    if (u->merged->project_path)
        u->file[1].path = strdup(u->merged->project_path);
    r = !u->file[0].path || (u->merged->project_path && !u->file[1].path) ? -ENOMEM : 0;
    for (int i = 0; r == 0 && i < 2; i++)
        r = load_file_text(&u->file[i], &err);
    if (r < 0) {
        fprintf(stderr, "lyh config: %s\n", err.msg[0] ? err.msg : strerror(-r));
        for (int i = 0; i < 2; i++) {
            free(u->file[i].text);
            free(u->file[i].path);
        }
        cfg_free(u->merged);
        return EXIT_USAGE;
    }
    u->n_keys = cfg_keys(u->keys, UI_MAX_KEYS);
    set_status(u, false, "[env] is edited by hand; lyh config show --origin prints everything");

    initscr();
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    set_escdelay(25);
    curs_set(0);
    run(u);
    endwin();

    for (int i = 0; i < 2; i++) {
        free(u->file[i].text);
        free(u->file[i].path);
    }
    cfg_free(u->merged);
    return EXIT_OK;
}
