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

/* Control bytes of a file (an agent may have written the project file)
 * never reach the terminal: shown as '?'. */
static void clean(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

static bool printable(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

static struct toml_doc *parse_text(const struct ui_file *f) {
    struct toml_doc *doc = NULL;
    struct toml_error terr;
    if (!f->text || toml_parse(f->text, f->len, CFG_MAX_FILE, &doc, &terr) < 0)
        return NULL;
    return doc;
}

/* What a value looks like in a row and on the edit line. */
struct shown {
    bool here;      /* the file sets the key */
    bool whole;     /* text holds all of it, and editing it as text gives it back */
    unsigned line;  /* where the file sets it */
    char text[UI_LINE];
};

/* The value doc (the file's text, parsed) gives k, as the row shows it (a
 * list ", "-joined). whole is false when the text is cut short, or a list
 * item has a comma, spaces at an end, or is empty (split at commas again,
 * it would not come back the same). */
static void file_value(const struct toml_doc *doc, const struct cfg_key_info *k,
                       struct shown *out) {
    const struct toml_value *sec, *v;

    memset(out, 0, sizeof(*out));
    out->whole = true;
    sec = doc ? toml_table_get(toml_root(doc), k->section) : NULL;
    v = sec && sec->type == TOML_TABLE ? toml_table_get(sec, k->name) : NULL;
    if (!v)
        return;
    out->here = true;
    out->line = v->pos.line;
    size_t len = sizeof(out->text), at = 0;
    int w = 0;
    if (v->type == TOML_BOOL) {
        w = snprintf(out->text, len, "%s", v->u.boolean ? "true" : "false");
    } else if (v->type == TOML_STRING) {
        w = snprintf(out->text, len, "%s", v->u.string.ptr);
        out->whole = strlen(v->u.string.ptr) == v->u.string.len;
    } else if (v->type == TOML_ARRAY) {
        for (size_t i = 0; i < toml_array_len(v); i++) {
            const struct toml_value *it = toml_array_at(v, i);
            const char *t = it->type == TOML_STRING ? it->u.string.ptr : "?";
            size_t tl = strlen(t);
            if (it->type != TOML_STRING || tl == 0 || strchr(t, ',') || t[0] == ' ' ||
                t[tl - 1] == ' ' || t[0] == '\t' || t[tl - 1] == '\t')
                out->whole = false;
            w = snprintf(out->text + at, len - at, "%s%s", i ? ", " : "", t);
            if (w < 0 || (size_t)w >= len - at) {
                out->whole = false;
                break;
            }
            at += (size_t)w;
        }
        w = 0;
    } else {
        w = snprintf(out->text, len, "(%s)", toml_type_name(v->type));
        out->whole = false;
    }
    if (w < 0 || (size_t)w >= len || !printable(out->text))
        out->whole = false;
    clean(out->text);
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
    char path[512];
    snprintf(path, sizeof(path), "%s", f->path ? f->path : "(none)");
    clean(path);
    mvprintw(0, 0, "lyh config: %s file %s%s", f->project ? "project" : "global", path,
             f->dirty ? "  [modified]" : "");
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
    _cleanup_(toml_freep) struct toml_doc *doc = parse_text(f);
    for (size_t i = u->top; i < u->n_keys && (int)(i - u->top) < list_rows; i++) {
        const struct cfg_key_info *k = &u->keys[i];
        char key[64], from[96];
        struct shown sh;
        char *val = sh.text;
        file_value(doc, k, &sh);
        bool here = sh.here;
        snprintf(key, sizeof(key), "%s.%s", k->section, k->name);
        if (here) {
            snprintf(from, sizeof(from), "this file:%u", sh.line);
        } else {
            const char *o = "";
            if (!u->merged || cfg_value_text(u->merged, k->section, k->name, val,
                                             sizeof(sh.text), &o) < 0)
                val[0] = '\0';
            const char *slash = strrchr(o, '/');
            snprintf(from, sizeof(from), "%s", slash ? slash + 1 : o);
            clean(val);
            clean(from);
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
        char st[UI_LINE];
        snprintf(st, sizeof(st), "%s", u->status);
        clean(st);
        if (u->status_err)
            attron(A_BOLD);
        mvprintw(rows - 2, 0, "%.*s", cols, st);
        clrtoeol();
        attroff(A_BOLD);
    }
    refresh();
}

/* Type a new value for key k at the bottom, checked as it is typed. */
static void edit_line(struct ui *u, const struct cfg_key_info *k) {
    char typed[UI_LINE] = "", cur[UI_LINE];
    const char *o;
    int rows, cols;
    struct shown sh;

    /* what this file says; else, for a single value, what applies now (a
     * list adds to the layers below: it starts empty). A value that would
     * not come back the same from the edit line is not edited here. */
    {
        _cleanup_(toml_freep) struct toml_doc *doc = parse_text(&u->file[u->cur]);
        file_value(doc, k, &sh);
    }
    if (sh.here && !sh.whole) {
        set_status(u, true, "%s.%s is too long, or has an item with a comma or spaces at an "
                            "end: edit the file by hand",
                   k->section, k->name);
        return;
    }
    if (sh.here)
        snprintf(typed, sizeof(typed), "%s", sh.text);
    else if (k->type != CFG_KEY_LIST && u->merged &&
             cfg_value_text(u->merged, k->section, k->name, cur, sizeof(cur), &o) == 0 &&
             strlen(cur) + 1 < sizeof(cur) && printable(cur))
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
                 typed); /* typed: printable ASCII only */
        clrtoeol();
        refresh();
        int ch = getch();
        size_t n = strlen(typed);
        if (ch == 27 || ch == ERR) { /* Esc, or the terminal is gone */
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

/* Saving the project file approves it: the whole screen says what that
 * lets the file do and shows the file itself, then asks. y: save and
 * approve; w: save without approving (its widenings stay ignored); anything
 * else: nothing. A file longer than the screen is not approved here. */
static int ask_approval(const struct ui_file *f, const char *widens) {
    int rows, cols, y = 0;
    getmaxyx(stdscr, rows, cols);
    erase();
    char path[512], w[512];
    snprintf(path, sizeof(path), "%s", f->path);
    snprintf(w, sizeof(w), "%s", widens[0] ? widens : "nothing");
    clean(path);
    clean(w);
    attron(A_BOLD);
    mvprintw(y++, 0, "Save %.*s", cols > 6 ? cols - 6 : 0, path);
    attroff(A_BOLD);
    mvprintw(y++, 0, "and approve it in your trust store? With the approval it widens:");
    attron(A_BOLD);
    for (const char *p = w; *p && y < rows - 4; y++) { /* wrapped */
        int n = (int)strlen(p) > cols - 2 ? cols - 2 : (int)strlen(p);
        mvprintw(y, 2, "%.*s", n, p);
        p += n;
    }
    attroff(A_BOLD);
    mvprintw(y++, 0, "The file as it would be saved:");
    bool fits = true;
    for (size_t off = 0; off < f->len;) {
        const char *line = f->text + off, *nl = memchr(line, '\n', f->len - off);
        size_t ll = nl ? (size_t)(nl - line) : f->len - off;
        off += ll + (nl != NULL);
        if (y >= rows - 2 || (int)ll > cols - 4) {
            fits = false;
            break;
        }
        char buf[UI_LINE];
        snprintf(buf, sizeof(buf), "%.*s", (int)ll, line);
        clean(buf);
        mvprintw(y++, 2, "| %s", buf);
    }
    attron(A_BOLD);
    if (fits)
        mvprintw(rows - 1, 0, "y: save and approve   w: save, not approved   n: neither");
    else
        mvprintw(rows - 1, 0, "The file does not fit this screen to be read here: w saves it "
                              "without approving (lyh config trust after reading it), n: neither");
    attroff(A_BOLD);
    refresh();
    int ch = getch();
    if (ch == 'y' || ch == 'Y')
        return fits ? 'y' : 'n';
    return ch == 'w' || ch == 'W' ? 'w' : 'n';
}

static void save(struct ui *u) {
    struct ui_file *f = &u->file[u->cur];
    struct cfg_error err = {{0}};
    char widens[512] = "", hex[CFG_SHA256_HEX];
    int r, answer = 0;

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
        answer = ask_approval(f, widens);
        if (answer == 'n') {
            set_status(u, false, "not saved");
            return;
        }
    }
    if ((r = cfg_write_file(f->path, f->text, f->len, &err)) < 0) {
        set_status(u, true, "not saved: %s", err.msg);
        return;
    }
    if (answer == 'y') {
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
        set_status(u, false, "saved %s%s", f->path,
                   answer == 'y'   ? " and approved it"
                   : answer == 'w' ? ", not approved: its widenings stay ignored"
                                   : "");
}

static void run(struct ui *u) {
    bool quit_armed = false;
    unsigned errs = 0;
    for (;;) {
        draw(u);
        int ch = getch();
        /* no more keys (the terminal went away): leave, saving nothing */
        if (ch == ERR && ++errs >= 3)
            return;
        if (ch != ERR)
            errs = 0;
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
                char cur[16] = "";
                const char *o;
                struct shown sh;
                {
                    _cleanup_(toml_freep) struct toml_doc *doc = parse_text(&u->file[u->cur]);
                    file_value(doc, k, &sh);
                }
                if (!sh.here && u->merged)
                    (void)cfg_value_text(u->merged, k->section, k->name, cur, sizeof(cur), &o);
                bool now = strcmp(sh.here ? sh.text : cur, "true") == 0;
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
