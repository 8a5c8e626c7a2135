/*
 * print.c -- how results look: numbers with the shortest digits that read
 * back exactly, arrays laid out like NumPy (wrapped to the terminal, elided
 * above 1000 elements), and JSON.  Shared by the one-shot command line and
 * the interactive session.
 */
#include "print.h"
#include "repl.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* NumPy's print options: arrays above THRESHOLD elements show EDGE items
 * at each end of every long axis. */
enum { PRINT_THRESHOLD = 1000, PRINT_EDGE = 3 };

/* ---- formatting numbers ------------------------------------------------------------ */

/* The shortest "%.Ng" that reads back as the same double: as exact as
 * "%.17g" without printing 0.1 as 0.10000000000000001. */
void print_fmt_f64(char *buf, size_t n, double v)
{
    if (isnan(v)) {
        snprintf(buf, n, "nan");
    } else if (isinf(v)) {
        snprintf(buf, n, v > 0 ? "inf" : "-inf");
    } else {
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(buf, n, "%.*g", prec, v);
            if (strtod(buf, NULL) == v)
                break;
        }
    }
}

static void print_fmt_f32(char *buf, size_t n, float v)
{
    if (isnan(v) || isinf(v)) {
        print_fmt_f64(buf, n, v);
        return;
    }
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, n, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v)
            break;
    }
}

static float print_half_to_float(uint16_t h)
{
    int e = h >> 10 & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? ldexpf((float)m, -24)
            : e == 31 ? (m ? NAN : INFINITY)
            : ldexpf((float)(m | 0x400), e - 25);
    return h & 0x8000 ? -v : v;
}

/* One element as text.  JSON differs only in quoting NaN and infinities. */
void print_fmt_elem(char *buf, size_t n, red_dtype t, const void *p, bool json)
{
    switch (t) {
    case RED_BOOL: snprintf(buf, n, "%s", *(const unsigned char *)p ? "true" : "false"); return;
    case RED_I32: { int32_t v; memcpy(&v, p, 4); snprintf(buf, n, "%" PRId32, v); return; }
    case RED_I64: { int64_t v; memcpy(&v, p, 8); snprintf(buf, n, "%" PRId64, v); return; }
    case RED_U32: { uint32_t v; memcpy(&v, p, 4); snprintf(buf, n, "%" PRIu32, v); return; }
    case RED_U64: { uint64_t v; memcpy(&v, p, 8); snprintf(buf, n, "%" PRIu64, v); return; }
    case RED_I8: snprintf(buf, n, "%d", *(const int8_t *)p); return;
    case RED_U8: snprintf(buf, n, "%d", *(const uint8_t *)p); return;
    case RED_I16: { int16_t v; memcpy(&v, p, 2); snprintf(buf, n, "%d", v); return; }
    case RED_U16: { uint16_t v; memcpy(&v, p, 2); snprintf(buf, n, "%d", v); return; }
    case RED_C64: case RED_C128: {
        /* 1.5-2j as NumPy writes a complex number; JSON: [re, im] */
        /* each part as an element of its part type, then the pair */
        char re[48], im[48];
        red_dtype pt = t == RED_C64 ? RED_F32 : RED_F64;
        print_fmt_elem(re, sizeof re, pt, p, json);
        print_fmt_elem(im, sizeof im, pt, (const char *)p + red_dtype_size(pt), json);
        if (json) {
            snprintf(buf, n, "[%s, %s]", re, im);
        } else {
            snprintf(buf, n, "%s%s%sj", re, im[0] == '-' ? "" : "+", im);
        }
        return;
    }
    default: break;
    }
    char num[40];
    double d;
    if (t == RED_F64) {
        memcpy(&d, p, 8);
        print_fmt_f64(num, sizeof num, d);
    } else {
        float f;
        uint16_t h;
        if (t == RED_F32) {
            memcpy(&f, p, 4);
        } else if (t == RED_F16) {
            memcpy(&h, p, 2);
            f = print_half_to_float(h);
        } else if (t == RED_BF16) {
            memcpy(&h, p, 2);
            uint32_t bits = (uint32_t)h << 16;
            memcpy(&f, &bits, 4);
        } else {
            snprintf(buf, n, json ? "null" : "?");
            return;
        }
        d = f;
        print_fmt_f32(num, sizeof num, f);
    }
    if (json && !isfinite(d))
        snprintf(buf, n, "\"%s\"", num);
    else
        snprintf(buf, n, "%s", num);
}

size_t print_dtype_size(red_dtype t)
{
    switch (t) {
    case RED_BOOL: case RED_I8: case RED_U8: return 1;
    case RED_F16: case RED_BF16: case RED_I16: case RED_U16: return 2;
    case RED_I32: case RED_U32: case RED_F32: return 4;
    case RED_I64: case RED_U64: case RED_F64: case RED_C64: return 8;
    case RED_C128: return 16;
    }
    return 0;
}

/* ---- printing arrays ----------------------------------------------------------------- */

/* Lines are as wide as the terminal: $COLUMNS when set (as `ls` reads it),
 * else the width of the terminal `out` writes to, else 80. */
static int print_line_width(FILE *out)
{
    const char *env = getenv("COLUMNS");
    if (env && *env) {
        char *end;
        long n = strtol(env, &end, 10);
        if (!*end && n > 0 && n <= 1 << 20)
            return (int)n;
    }
    struct winsize ws;
    if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 80;
}

typedef struct print_text_state {
    FILE *out;           /* NULL while measuring the widest element */
    const red_array *a;
    size_t esize;
    bool elide;
    int width;           /* every element is right-aligned to this */
    int indent;          /* columns before the outermost '[' */
    int line_width;      /* no line is longer than this, one word allowing */
    int col;             /* the column `out` is at */
} print_text_state;

/* A word of the last axis (an element or "..."), after a blank or, when it
 * would pass the room left for the closing brackets of `dim + 1` levels, on
 * a new line aligned under the first element: NumPy's _formatArray. */
static void print_word(print_text_state *t, int dim, const char *word, int len, bool first)
{
    int hang = t->indent + dim + 1, limit = t->line_width - dim - 1;
    if (!first && t->col + 1 + len > limit) {
        fprintf(t->out, "\n%*s", hang, "");
        t->col = hang;
    } else if (!first) {
        fputc(' ', t->out);
        t->col++;
    }
    fprintf(t->out, "%*s", len, word);
    t->col += len;
}

/* NumPy's layout: elements of the last axis on lines of at most
 * line_width, deeper blocks separated by one more newline per level, each
 * line indented to its depth. */
static void print_text_rec(print_text_state *t, int dim, const char *p)
{
    const red_array *a = t->a;
    char buf[64];
    if (dim == a->ndim) {   /* a 0-d array: one element, nothing to wrap */
        print_fmt_elem(buf, sizeof buf, a->dtype, p, false);
        fputs(buf, t->out);
        return;
    }
    bool last = dim == a->ndim - 1;
    int64_t n = a->shape[dim];
    bool cut = t->elide && n > 2 * PRINT_EDGE;
    if (t->out) {
        fputc('[', t->out);
        t->col++;
    }
    for (int64_t k = 0; k < n; k++) {
        if (k > 0 && t->out && !last) {
            fprintf(t->out, "%.*s%*s", a->ndim - dim - 1, "\n\n\n\n\n\n\n\n", t->indent + dim + 1, "");
            t->col = t->indent + dim + 1;
        }
        if (cut && k == PRINT_EDGE) {
            if (t->out && last)
                print_word(t, dim, "...", 3, false);
            else if (t->out)
                t->col += fputs("...", t->out) >= 0 ? 3 : 0;
            k = n - PRINT_EDGE - 1;
            continue;
        }
        const char *q = p + (ptrdiff_t)(k * a->strides[dim]) * (ptrdiff_t)t->esize;
        if (!last) {
            print_text_rec(t, dim + 1, q);
            continue;
        }
        print_fmt_elem(buf, sizeof buf, a->dtype, q, false);
        int len = (int)strlen(buf);
        if (!t->out)
            t->width = len > t->width ? len : t->width;
        else
            print_word(t, dim, buf, t->width, k == 0);
    }
    if (t->out) {
        fputc(']', t->out);
        t->col++;
    }
}

void print_text(FILE *out, const red_array *a, const char *name)
{
    int indent = 0;
    if (name && *name) {
        fprintf(out, "%s = ", name);
        indent = (int)strlen(name) + 3;
    }
    if (a->ndim > 0 && red_array_size(a) == 0) {
        fputs("[]\n", out);
        return;
    }
    print_text_state t = {NULL, a, print_dtype_size(a->dtype), red_array_size(a) > PRINT_THRESHOLD, 0, indent,
                          print_line_width(out), indent};
    if (a->ndim > 0)
        print_text_rec(&t, 0, a->data);   /* measure */
    t.out = out;
    print_text_rec(&t, 0, a->data);
    fputc('\n', out);
}

static void print_json_rec(FILE *out, const red_array *a, int dim, const char *p, size_t esize)
{
    char buf[64];
    if (dim == a->ndim) {
        print_fmt_elem(buf, sizeof buf, a->dtype, p, true);
        fputs(buf, out);
        return;
    }
    fputc('[', out);
    for (int64_t k = 0; k < a->shape[dim]; k++) {
        if (k)
            fputs(", ", out);
        print_json_rec(out, a, dim + 1, p + (ptrdiff_t)(k * a->strides[dim]) * (ptrdiff_t)esize, esize);
    }
    fputc(']', out);
}

void print_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

/* ---- notes on a run ------------------------------------------------------------------ */

void print_history_note(FILE *out)
{
    char *path = repl_history_path();
    if (path)
        fprintf(out, "The prompt keeps its history in %s\n  (%s).\n", path, repl_history_rule);
    else
        fprintf(out, "The prompt keeps no history: %s.\n",
#ifdef REDJIT_HAVE_LIBEDIT
                "neither $REDJIT_HISTORY nor $XDG_STATE_HOME nor $HOME is set"
#else
                "redjit was built without libedit"
#endif
        );
    free(path);
}

void print_cache_note(char *buf, size_t n, const red_cache_info *a, const red_cache_info *b, bool gpu)
{
    if (!gpu)
        snprintf(buf, n, "cpu executor, nothing to compile");
    else if (b->compiles > a->compiles)
        snprintf(buf, n, "compiled %lld kernel%s (NVRTC %.1f ms)", b->compiles - a->compiles,
                 b->compiles - a->compiles == 1 ? "" : "s", b->compile_ms - a->compile_ms);
    else if (b->disk_hits > a->disk_hits)
        snprintf(buf, n, "kernel cache hit (disk)");
    else
        snprintf(buf, n, "kernel cache hit (memory)");
}

void print_run_note(FILE *out, red_ctx *ctx, red_expr *e, const red_cache_info *before)
{
    /* The backend line of the plan is the library's own account of where
     * the run went and with how many threads. */
    const char *plan = NULL, *line = NULL;
    if (red_explain_ex(e, RED_EXPLAIN_PLAN, &plan) == RED_OK && plan)
        line = strstr(plan, "backend: ");
    size_t len = line ? strcspn(line, "\n") : 0;
    bool gpu = line && strncmp(line, "backend: gpu", 12) == 0;
    int device = RED_DEVICE_AUTO;
    red_get_option(ctx, RED_OPT_DEVICE, &device);
    fprintf(out, "redjit: %.*s", (int)len, line ? line : "backend: ?");
    if (!gpu && device == RED_DEVICE_AUTO && !red_gpu_available(ctx))
        fprintf(out, "; device auto: %s", red_errmsg(ctx));   /* why not the GPU */
    fputc('\n', out);

    red_timings t = {0};
    red_last_timings(e, &t);
    fprintf(out, "redjit: time: plan %.3f ms", t.plan_ms);
    if (gpu) {
        red_cache_info after;
        char note[128];
        red_cache_stats(ctx, &after);
        print_cache_note(note, sizeof note, before, &after, true);
        fprintf(out, ", compile %.3f ms (%s), upload %.3f ms, kernels %.3f ms, download %.3f ms", t.compile_ms,
                note, t.upload_ms, t.kernel_ms, t.download_ms);
    } else {
        fprintf(out, ", cpu executor %.3f ms", t.cpu_ms);
    }
    fprintf(out, ", red_run %.3f ms\n", t.total_ms);
}

void print_json(FILE *out, const red_array *a, const char *name, bool first)
{
    fputs(first ? "\n  {\"name\": " : ",\n  {\"name\": ", out);
    print_json_string(out, name ? name : "");
    fprintf(out, ", \"dtype\": \"%s\", \"shape\": [", red_dtype_name(a->dtype));
    for (int d = 0; d < a->ndim; d++)
        fprintf(out, d ? ", %" PRId64 : "%" PRId64, a->shape[d]);
    fputs("], \"value\": ", out);
    print_json_rec(out, a, 0, a->data, print_dtype_size(a->dtype));
    fputc('}', out);
}

