/*
 * util.h -- small pieces every stage uses: an arena allocator (ASTs and plans
 * are freed all at once, so a syntax error can never leak), a growable
 * string buffer, and diagnostics that point at the expression text.
 */
#ifndef RED_UTIL_H
#define RED_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "redjit.h"

#define RED_HIDDEN __attribute__((visibility("hidden")))

/* ---- Arena: bump allocation in chunks, freed all at once. --------------- */
typedef struct util_arena_chunk util_arena_chunk;
typedef struct util_arena {
    util_arena_chunk *head;
    size_t used, cap;        /* in the head chunk */
    int failed;              /* an allocation failed: callers check once */
} util_arena;

void  util_arena_init(util_arena *a);
void  util_arena_free(util_arena *a);
/* Zeroed memory, 16-byte aligned; NULL (and a->failed set) when out of memory. */
void *util_arena_alloc(util_arena *a, size_t n);
char *util_arena_strndup(util_arena *a, const char *s, size_t n);
/* Bytes the arena holds from malloc (its chunks). */
size_t util_arena_bytes(const util_arena *a);

/* ---- String buffer -------------------------------------------------------- */
typedef struct util_buf {
    char *p;
    size_t len, cap;
    int failed;
} util_buf;

void util_buf_init(util_buf *b);
void util_buf_free(util_buf *b);
void util_buf_puts(util_buf *b, const char *s);
void util_buf_putn(util_buf *b, const char *s, size_t n);
void util_buf_printf(util_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void util_buf_vprintf(util_buf *b, const char *fmt, va_list ap);
/* The text so far ("" if empty); owned by the buffer. */
const char *util_buf_str(const util_buf *b);

/* ---- Diagnostics ---------------------------------------------------------- */
#define UTIL_DIAG_MAX 2048

typedef struct util_diag {
    int  code;                  /* red_status, RED_OK when nothing went wrong */
    char msg[UTIL_DIAG_MAX];
} util_diag;

/* A position in the expression text: byte offset and length of the
 * offending token or node (len 0 is shown as one caret). */
typedef struct util_pos {
    int32_t off, len;
} util_pos;

/* Record an error without a source position (binding errors, limits). */
int util_diag_set(util_diag *d, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Record an error at `pos` in `src`:
 *     2:7: unknown name 'yy'
 *       d = x - yy
 *               ^~
 * Returns `code` so callers can `return util_diag_at(...)`. */
int util_diag_at(util_diag *d, const char *src, util_pos pos, int code,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
int util_diag_vat(util_diag *d, const char *src, util_pos pos, int code,
                  const char *fmt, va_list ap);

/* 1-based line and column of byte offset `off` in `src`. */
void util_line_col(const char *src, int32_t off, int *line, int *col);

#endif
