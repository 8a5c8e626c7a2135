/*
 * print.c -- how results look: numbers with the shortest digits that read
 * back exactly, arrays laid out like NumPy (elided above 1000 elements), and
 * JSON.  Shared by the one-shot command line and the interactive session.
 */
#include "print.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    case RED_BOOL: return 1;
    case RED_F16: case RED_BF16: return 2;
    case RED_I32: case RED_U32: case RED_F32: return 4;
    case RED_I64: case RED_U64: case RED_F64: return 8;
    }
    return 0;
}

/* ---- printing arrays ----------------------------------------------------------------- */

typedef struct print_text_state {
    FILE *out;           /* NULL while measuring the widest element */
    const red_array *a;
    size_t esize;
    bool elide;
    int width;           /* every element is right-aligned to this */
    int indent;          /* columns before the outermost '[' */
} print_text_state;

/* NumPy's layout: elements of the last axis on one line, deeper blocks
 * separated by one more newline per level, each line indented to its depth. */
static void print_text_rec(print_text_state *t, int dim, const char *p)
{
    const red_array *a = t->a;
    char buf[64];
    if (dim == a->ndim) {
        print_fmt_elem(buf, sizeof buf, a->dtype, p, false);
        int len = (int)strlen(buf);
        if (!t->out)
            t->width = len > t->width ? len : t->width;
        else
            fprintf(t->out, "%*s", t->width, buf);
        return;
    }
    int64_t n = a->shape[dim];
    bool cut = t->elide && n > 2 * PRINT_EDGE;
    if (t->out)
        fputc('[', t->out);
    for (int64_t k = 0; k < n; k++) {
        if (k > 0 && t->out) {
            if (dim == a->ndim - 1)
                fputc(' ', t->out);
            else
                fprintf(t->out, "%.*s%*s", a->ndim - dim - 1, "\n\n\n\n\n\n\n\n", t->indent + dim + 1, "");
        }
        if (cut && k == PRINT_EDGE) {
            if (t->out)
                fputs("...", t->out);
            k = n - PRINT_EDGE - 1;
            continue;
        }
        print_text_rec(t, dim + 1, p + (ptrdiff_t)(k * a->strides[dim]) * (ptrdiff_t)t->esize);
    }
    if (t->out)
        fputc(']', t->out);
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
    print_text_state t = {NULL, a, print_dtype_size(a->dtype), red_array_size(a) > PRINT_THRESHOLD, 0, indent};
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

