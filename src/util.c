/*
 * util.c -- arena, string buffer and caret diagnostics (see util.h).
 */
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct util_arena_chunk {
    util_arena_chunk *next;
    size_t cap;
    _Alignas(16) unsigned char data[];
};

void util_arena_init(util_arena *a) { memset(a, 0, sizeof *a); }

void util_arena_free(util_arena *a)
{
    util_arena_chunk *c = a->head;
    while (c) {
        util_arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    memset(a, 0, sizeof *a);
}

size_t util_arena_bytes(const util_arena *a)
{
    size_t n = 0;
    for (const util_arena_chunk *c = a->head; c; c = c->next) n += sizeof *c + c->cap;
    return n;
}

void *util_arena_alloc(util_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (!a->head || a->used + n > a->cap) {
        size_t cap = n > 16384 ? n : 16384;
        util_arena_chunk *c = malloc(sizeof *c + cap);
        if (!c) {
            a->failed = 1;
            return NULL;
        }
        c->next = a->head;
        c->cap = cap;
        a->head = c;
        a->used = 0;
        a->cap = cap;
    }
    void *p = a->head->data + a->used;
    a->used += n;
    memset(p, 0, n);
    return p;
}

char *util_arena_strndup(util_arena *a, const char *s, size_t n)
{
    char *p = util_arena_alloc(a, n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

void util_buf_init(util_buf *b) { memset(b, 0, sizeof *b); }
void util_buf_free(util_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static int buf_reserve(util_buf *b, size_t extra)
{
    if (b->failed) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return 0;
    }
    b->p = p;
    b->cap = cap;
    return 1;
}

void util_buf_putn(util_buf *b, const char *s, size_t n)
{
    if (!buf_reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void util_buf_puts(util_buf *b, const char *s) { util_buf_putn(b, s, strlen(s)); }

void util_buf_vprintf(util_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !buf_reserve(b, (size_t)n)) return;
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void util_buf_printf(util_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    util_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

const char *util_buf_str(const util_buf *b) { return b->p && !b->failed ? b->p : ""; }

int util_diag_set(util_diag *d, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    d->code = code;
    return code;
}

void util_line_col(const char *src, int32_t off, int *line, int *col)
{
    int l = 1, c = 1;
    for (int32_t i = 0; i < off && src[i]; i++) {
        if (src[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

int util_diag_vat(util_diag *d, const char *src, util_pos pos, int code, const char *fmt,
                  va_list ap)
{
    int line, col;
    size_t srclen = strlen(src);
    if (pos.off < 0) pos.off = 0;
    if ((size_t)pos.off > srclen) pos.off = (int32_t)srclen;
    util_line_col(src, pos.off, &line, &col);

    char text[1024];
    vsnprintf(text, sizeof text, fmt, ap);

    /* The source line holding the position, cut to a readable width around
     * the caret so a 10 MB one-line input still gives a short message. */
    int32_t ls = pos.off;
    while (ls > 0 && src[ls - 1] != '\n') ls--;
    int32_t le = pos.off;
    while ((size_t)le < srclen && src[le] != '\n') le++;
    int32_t from = ls, to = le;
    const int width = 100;
    if (pos.off - from > width - 20) from = pos.off - (width - 20);
    if (to - from > width) to = from + width;
    int len = pos.len > 0 ? pos.len : 1;
    if (pos.off + len > to) len = to - pos.off > 0 ? to - pos.off : 1;

    util_buf b;
    util_buf_init(&b);
    util_buf_printf(&b, "%d:%d: %s\n", line, col, text);
    util_buf_printf(&b, "  %s", from > ls ? "..." : "");
    for (int32_t i = from; i < to; i++) util_buf_putn(&b, src[i] == '\t' ? " " : src + i, 1);
    util_buf_printf(&b, "%s\n  %s", to < le ? "..." : "", from > ls ? "   " : "");
    for (int32_t i = from; i < pos.off; i++) util_buf_puts(&b, " ");
    util_buf_puts(&b, "^");
    for (int i = 1; i < len; i++) util_buf_puts(&b, "~");
    snprintf(d->msg, sizeof d->msg, "%s", util_buf_str(&b));
    util_buf_free(&b);
    d->code = code;
    return code;
}

int util_diag_at(util_diag *d, const char *src, util_pos pos, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    util_diag_vat(d, src, pos, code, fmt, ap);
    va_end(ap);
    return code;
}
