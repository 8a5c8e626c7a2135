/*
 * repl.c -- reading statements: a prompt with line editing, history and tab
 * completion (libedit) at a terminal, plain lines from pipes and scripts, and
 * the continuation of unfinished statements on the next line.  Ctrl-C
 * abandons the line being typed, or stops the evaluation that is running.
 */
#define _DEFAULT_SOURCE   /* d_type of struct dirent */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <wchar.h>

#ifdef REDJIT_HAVE_LIBEDIT
#include <histedit.h>
#endif

#include "repl.h"

static const char prompt1[] = "redjit> ", prompt2[] = "   ...> ";

typedef struct repl_in {
    repl_session *s;
    FILE *f;
    const char *prompt;
    char *line;
    size_t cap;
#ifdef REDJIT_HAVE_LIBEDIT
    EditLine *el;
    History *hist;
    char *histpath;
#endif
} repl_in;

/* The context of the session at the terminal; set before the handler is
 * installed and cleared after it is removed. */
static red_ctx *sigint_ctx;

/* Async-signal-safe: two flags.  red_interrupt only bumps a counter that
 * running evaluations compare with its value when they started, so they
 * stop at their next safe point with RED_ERR_INTERRUPTED; at the prompt,
 * with nothing running, it changes nothing. */
static void on_sigint(int sig)
{
    (void)sig;
    repl_sigint = 1;
    if (sigint_ctx)
        red_interrupt(sigint_ctx);
}

/* ---- history file ------------------------------------------------------------ */

const char repl_history_rule[] =
    "$REDJIT_HISTORY, else $XDG_STATE_HOME/redjit/history, else ~/.local/state/redjit/history";

char *repl_history_path(void)
{
#ifndef REDJIT_HAVE_LIBEDIT
    return NULL;
#else
    const char *env = getenv("REDJIT_HISTORY");
    if (env && *env)
        return strdup(env);
    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    char *path;
    size_t n;
    if (state && *state) {
        n = strlen(state) + 32;
        if (!(path = malloc(n)))
            return NULL;
        snprintf(path, n, "%s/redjit/history", state);
    } else if (home && *home) {
        n = strlen(home) + 48;
        if (!(path = malloc(n)))
            return NULL;
        snprintf(path, n, "%s/.local/state/redjit/history", home);
    } else {
        return NULL;
    }
    return path;
#endif
}

#ifdef REDJIT_HAVE_LIBEDIT
/* repl_history_path, with the directories above it made as needed. */
static char *history_path(void)
{
    char *path = repl_history_path();
    if (!path)
        return NULL;
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0700);   /* failures show when the file is written */
            *p = '/';
        }
    return path;
}

/* ---- completion --------------------------------------------------------------- */

static const char *const lang_words[] = {
    "abs", "sqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "floor", "ceil", "round",
    "pow", "hypot", "atan2", "fma", "isnan", "isfinite", "real", "imag", "conj", "arg", "min", "max", "sum",
    "prod", "any", "all", "count", "mean", "argmin", "argmax", "nansum", "nanprod", "nanmin", "nanmax",
    "nanmean", "nanargmin", "nanargmax", "cumsum", "cumprod", "cummin", "cummax", "cumcount", "nancumsum",
    "nancumprod", "reduce", "scan", "exscan", "over", "in", "by", "op", "ordered", "identity", "true",
    "false", "inf", "nan", "bool", "i8", "u8", "i16", "u16", "i32", "i64", "u32", "u64", "f16", "bf16",
    "f32", "f64", "c64", "c128", NULL};

typedef struct cands {
    const char *prefix;
    size_t plen;
    char **v;
    int n, cap;
    size_t shown;   /* a list of candidates leaves out their first `shown` bytes */
} cands;

static void cand_add(cands *c, const char *w, size_t len)
{
    if (len < c->plen || strncmp(w, c->prefix, c->plen) != 0)
        return;
    for (int i = 0; i < c->n; i++)
        if (strlen(c->v[i]) == len && strncmp(c->v[i], w, len) == 0)
            return;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 32;
        char **nv = realloc(c->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return;
        c->v = nv;
        c->cap = cap;
    }
    char *d = malloc(len + 1);
    if (!d)
        return;
    memcpy(d, w, len);
    d[len] = '\0';
    c->v[c->n++] = d;
}

static void cand_words(cands *c, const char *const *words)
{
    for (int i = 0; words[i]; i++)
        cand_add(c, words[i], strlen(words[i]));
}

/* Names a statement can use: session values, saved operators, generators
 * and the language's own words. */
static void cand_names(cands *c, repl_session *s, bool values_only)
{
    for (int i = 0; i < s->nvars; i++)
        if (!s->vars[i].hidden)
            cand_add(c, s->vars[i].name, strlen(s->vars[i].name));
    if (values_only)
        return;
    scan_state st = {s->ops ? s->ops : "", 0};
    scan_tok t, prev = {SC_END, NULL, 0, 0};
    while ((t = scan_next(&st)).kind != SC_END) {
        if (t.kind == SC_NAME && prev.kind == SC_NAME && scan_is(&prev, "op"))
            cand_add(c, t.p, t.len);
        prev = t;
    }
    cand_words(c, gen_names);
    cand_words(c, lang_words);
}

/* Paths that complete `c->prefix`: the entries of its directory (the
 * working one when it has no '/'), a directory with a '/' after it, hidden
 * ones only when the prefix asks for them.  A list shows names only. */
static void cand_files(cands *c)
{
    size_t dlen = c->plen;
    while (dlen > 0 && c->prefix[dlen - 1] != '/')
        dlen--;
    const char *base = c->prefix + dlen;
    size_t blen = c->plen - dlen;
    char dir[4096];
    if (dlen >= sizeof dir)
        return;
    memcpy(dir, c->prefix, dlen);
    dir[dlen] = '\0';
    DIR *d = opendir(dlen ? dir : ".");
    if (!d)
        return;
    c->shown = dlen;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        const char *nm = ent->d_name;
        if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0 || (nm[0] == '.' && base[0] != '.') ||
            strncmp(nm, base, blen) != 0)
            continue;
        char path[8192];
        int len = snprintf(path, sizeof path, "%s%s", dir, nm);
        if (len < 0 || (size_t)len + 2 > sizeof path)
            continue;
        bool isdir = ent->d_type == DT_DIR;
        struct stat st;
        if ((ent->d_type == DT_UNKNOWN || ent->d_type == DT_LNK) && stat(path, &st) == 0)
            isdir = S_ISDIR(st.st_mode);
        if (isdir)
            path[len++] = '/';
        cand_add(c, path, (size_t)len);
    }
    closedir(d);
}

/* Whether the word at `b` is an argument that names a file: the FILE of
 * `:load NAME FILE` and `:save NAME FILE` (the third word of the line). */
static bool file_argument(const char *lead, const char *b)
{
    if ((strncmp(lead, ":load", 5) != 0 && strncmp(lead, ":save", 5) != 0) || (lead[5] != ' ' && lead[5] != '\t'))
        return false;
    int words = 0;
    for (const char *p = lead; p < b; words++) {
        p += strcspn(p, " \t");
        if (p >= b)
            return false;   /* the cursor is still in the command word */
        p += strspn(p, " \t");
    }
    return words >= 2;
}

static int cand_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static unsigned char complete(EditLine *el, int ch)
{
    (void)ch;
    repl_in *in = NULL;
    el_get(el, EL_CLIENTDATA, &in);
    const LineInfo *li = el_line(el);
    const char *b = li->cursor;
    while (b > li->buffer && (isalnum((unsigned char)b[-1]) || b[-1] == '_'))
        b--;
    const char *lead = li->buffer + strspn(li->buffer, " \t");
    bool is_cmd = b > li->buffer && b[-1] == ':' && b - 1 == lead;
    if (is_cmd)
        b--;
    /* a file name runs from the blank before it: '/', '.' and '-' too */
    const char *fb = li->cursor;
    while (fb > li->buffer && fb[-1] != ' ' && fb[-1] != '\t')
        fb--;
    bool is_file = *lead == ':' && file_argument(lead, fb);
    if (is_file)
        b = fb;
    cands c = {b, (size_t)(li->cursor - b), NULL, 0, 0, 0};
    if (is_cmd)
        cand_words(&c, command_names);
    else if (is_file)
        cand_files(&c);
    else if (*lead == ':')   /* :save NAME, :del NAME... */
        cand_names(&c, in->s, true);
    else
        cand_names(&c, in->s, false);
    unsigned char ret = CC_REFRESH;
    if (c.n == 0) {
        ret = CC_REFRESH_BEEP;
    } else {
        /* the longest prefix common to every candidate */
        size_t common = strlen(c.v[0]);
        for (int i = 1; i < c.n; i++) {
            size_t k = 0;
            while (k < common && c.v[i][k] == c.v[0][k])
                k++;
            common = k;
        }
        if (common > c.plen || c.n == 1) {
            char *add = c.v[0] + c.plen;
            char save = c.v[0][common];
            c.v[0][common] = '\0';
            el_insertstr(el, add);
            if (c.n == 1 && is_cmd)
                el_insertstr(el, " ");
            c.v[0][common] = save;
        } else {
            qsort(c.v, (size_t)c.n, sizeof c.v[0], cand_cmp);
            fputc('\n', stdout);
            for (int i = 0; i < c.n; i++)
                printf("%s%s", c.v[i] + c.shown, i + 1 < c.n ? "  " : "\n");
            ret = CC_REDISPLAY;
        }
    }
    for (int i = 0; i < c.n; i++)
        free(c.v[i]);
    free(c.v);
    return ret;
}

static char *prompt_fn(EditLine *el)
{
    repl_in *in = NULL;
    el_get(el, EL_CLIENTDATA, &in);
    return (char *)in->prompt;
}

/* libedit retries a read that a signal interrupted; this one gives up when
 * it was Ctrl-C, so the line can be abandoned at once. */
static int getc_fn(EditLine *el, wchar_t *wc)
{
    (void)el;
    mbstate_t mbs;
    memset(&mbs, 0, sizeof mbs);
    for (;;) {
        char byte;
        if (repl_sigint)
            return 0;   /* Ctrl-C came while the prompt was being drawn */
        ssize_t r = read(STDIN_FILENO, &byte, 1);
        if (r < 0 && errno == EINTR && !repl_sigint)
            continue;
        if (r <= 0)
            return r < 0 ? -1 : 0;
        size_t k = mbrtowc(wc, &byte, 1, &mbs);
        if (k == (size_t)-2)
            continue;   /* more bytes of one character */
        if (k == (size_t)-1) {
            *wc = (unsigned char)byte;
            memset(&mbs, 0, sizeof mbs);
        }
        return 1;
    }
}

static void edit_open(repl_in *in)
{
    in->el = el_init("redjit", in->f, stdout, stderr);
    if (!in->el)
        return;
    el_set(in->el, EL_CLIENTDATA, in);
    el_set(in->el, EL_PROMPT, prompt_fn);
    el_set(in->el, EL_EDITOR, "emacs");
    el_set(in->el, EL_GETCFN, getc_fn);
    /* the wide call: the narrow one copies both strings and never frees them */
    el_wset(in->el, EL_ADDFN, L"redjit-complete", L"complete a name or command", complete);
    el_set(in->el, EL_BIND, "^I", "redjit-complete", NULL);
    el_source(in->el, NULL);   /* the user's ~/.editrc */
    in->hist = history_init();
    if (in->hist) {
        HistEvent ev;
        history(in->hist, &ev, H_SETSIZE, 2000);
        history(in->hist, &ev, H_SETUNIQUE, 1);
        in->histpath = history_path();
        if (in->histpath)
            history(in->hist, &ev, H_LOAD, in->histpath);
        el_set(in->el, EL_HIST, history, in->hist);
    }
}

static void edit_close(repl_in *in)
{
    if (in->hist)
        history_end(in->hist);
    if (in->el)
        el_end(in->el);
    free(in->histpath);
}

static void history_add(repl_in *in, const char *line)
{
    HistEvent ev;
    if (!in->hist)
        return;
    history(in->hist, &ev, H_ENTER, line);
    /* saved at once: a session killed later keeps what was typed */
    if (in->histpath)
        history(in->hist, &ev, H_SAVE, in->histpath);
}
#endif /* REDJIT_HAVE_LIBEDIT */

/* ---- reading lines -------------------------------------------------------------------- */

/* One line without its newline in in->line: 1, 0 at the end, -1 for Ctrl-C. */
static int read_line(repl_in *in)
{
#ifdef REDJIT_HAVE_LIBEDIT
    if (in->el) {
        int count = 0;
        const char *l = el_gets(in->el, &count);
        if (repl_sigint) {
            repl_sigint = 0;
            el_reset(in->el);
            return -1;
        }
        if (!l || count <= 0)
            return 0;
        size_t n = strlen(l);
        if (n + 1 > in->cap) {
            char *nl = realloc(in->line, n + 1);
            if (!nl)
                return 0;
            in->line = nl;
            in->cap = n + 1;
        }
        memcpy(in->line, l, n + 1);
        goto strip;
    }
#endif
    if (in->s->tty) {
        fputs(in->prompt, stdout);
        fflush(stdout);
    }
    if (getline(&in->line, &in->cap, in->f) < 0) {
        if (repl_sigint) {
            repl_sigint = 0;
            clearerr(in->f);
            return -1;
        }
        return 0;
    }
#ifdef REDJIT_HAVE_LIBEDIT
strip:;
#endif
    size_t n = strlen(in->line);
    while (n && (in->line[n - 1] == '\n' || in->line[n - 1] == '\r'))
        in->line[--n] = '\0';
    return 1;
}

static bool blank_text(const char *text)
{
    scan_state st = {text, 0};
    scan_tok t;
    while ((t = scan_next(&st)).kind == SC_SEP) {}
    return t.kind == SC_END;
}

/* Append `line` to the pending statement: after a newline when inside
 * brackets (where the language takes it as white space), else after a
 * blank, since outside brackets a newline would end the statement. */
static int pending_add(char **pend, size_t *len, const char *line)
{
    scan_state st = {*len ? *pend : "", 0};
    while (scan_next(&st).kind != SC_END) {}
    size_t n = strlen(line);
    char *p = realloc(*pend, *len + n + 2);
    if (!p)
        return -1;
    if (*len)
        p[(*len)++] = st.depth > 0 ? '\n' : ' ';
    memcpy(p + *len, line, n + 1);
    *len += n;
    *pend = p;
    return 0;
}

int repl_run(repl_session *s, FILE *f, bool stop_on_error)
{
    repl_in in;
    memset(&in, 0, sizeof in);
    in.s = s;
    in.f = f;
    s->tty = isatty(fileno(f)) && !s->origin;
    struct sigaction old, sa;
    if (s->tty) {
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;   /* no SA_RESTART: Ctrl-C ends a read */
        sigemptyset(&sa.sa_mask);
        sigint_ctx = s->ctx;
        sigaction(SIGINT, &sa, &old);
#ifdef REDJIT_HAVE_LIBEDIT
        edit_open(&in);
#endif
    }
    char *pend = NULL;
    size_t plen = 0;
    int status = 0, lineno = 0, start = 0;
    while (!s->quit) {
        in.prompt = plen ? prompt2 : prompt1;
        int r = read_line(&in);
        if (r < 0) {
            fputc('\n', stdout);   /* Ctrl-C: drop what was typed */
            plen = 0;
            continue;
        }
        if (r == 0 && plen == 0)
            break;
        bool blank = r == 0 || blank_text(in.line);
        if (r > 0)
            lineno++;
        const char *text = NULL;
        if (plen == 0) {
            if (blank)
                continue;
            start = lineno;
            const char *p = in.line + strspn(in.line, " \t");
            if (*p == ':')
                text = p;   /* commands are one line */
        }
        if (!text && blank) {
            text = pend;    /* an empty line ends an unfinished statement */
        } else if (!text) {
            if (pending_add(&pend, &plen, in.line) != 0) {
                session_error(s, "out of memory");
                break;
            }
            int incomplete = 0;
            /* the parser's own verdict: an open bracket or a trailing operator */
            red_check_syntax(s->ctx, pend, &incomplete);
            if (incomplete)
                continue;
            text = pend;
        }
#ifdef REDJIT_HAVE_LIBEDIT
        /* A statement goes into the history whole, once complete: Up
         * brings back all its lines at once, as they will run again. */
        if (in.el)
            history_add(&in, text);
#endif
        /* At the prompt a statement is numbered from its own first line;
         * in a script or a pipe by the line of the input. */
        s->line = s->tty ? 1 : start;
        if (session_exec(s, text) != 0) {
            status = 1;
            if (stop_on_error)
                break;
        }
        plen = 0;
        if (r == 0)
            break;
    }
    if (s->tty && !s->quit)
        fputc('\n', stdout);   /* Ctrl-D leaves the cursor after the prompt */
    free(pend);
    free(in.line);
    if (s->tty) {
#ifdef REDJIT_HAVE_LIBEDIT
        edit_close(&in);
#endif
        sigaction(SIGINT, &old, NULL);
        sigint_ctx = NULL;
    }
    /* At a terminal a mistake was already seen and fixed; a script or a
     * pipe must tell its caller that something failed. */
    return s->tty ? 0 : status;
}
