/*
 * print.h -- formatting of results for people (NumPy-style text) and for
 * programs (JSON).  Shared by the one-shot command line and the session.
 */
#ifndef REDJIT_PRINT_H
#define REDJIT_PRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "redjit.h"

/* The shortest "%.Ng" that reads back as the same double ("nan", "inf"). */
void print_fmt_f64(char *buf, size_t n, double v);
/* One element of type `t` at `p`; JSON only differs in quoting NaN and
 * infinities ("\"nan\""). */
void print_fmt_elem(char *buf, size_t n, red_dtype t, const void *p, bool json);
size_t print_dtype_size(red_dtype t);

/* `a` (host memory) as NumPy prints it, prefixed "NAME = " when `name` is
 * non-empty, ending with a newline: lines wrapped to $COLUMNS, else the
 * width of the terminal `out` is, else 80; above 1000 elements only 3 items
 * at each end of every axis are shown. */
void print_text(FILE *out, const red_array *a, const char *name);

/* One member {"name", "dtype", "shape", "value"} of a "results" list;
 * `first` decides whether a comma goes in front. */
void print_json(FILE *out, const red_array *a, const char *name, bool first);
void print_json_string(FILE *out, const char *s);

/* One line: where the prompt keeps its history (repl_history_path), or
 * that it keeps none. */
void print_history_note(FILE *out);

/* What a run's first red_run did about kernels, from the cache statistics
 * before and after it: "compiled 1 kernel (NVRTC 95.0 ms)", "kernel cache
 * hit (disk)", ...; on the CPU, that there was nothing to compile. */
void print_cache_note(char *buf, size_t n, const red_cache_info *before, const red_cache_info *after, bool gpu);

/* --verbose: after a successful red_run of `e`, two lines on `out`: the
 * backend that ran it (the CPU's threads, the GPU's strategy; why not the
 * GPU when the device was auto), and where the time went (red_last_timings,
 * the kernels compiled or found since `before`). */
void print_run_note(FILE *out, red_ctx *ctx, red_expr *e, const red_cache_info *before);

#endif /* REDJIT_PRINT_H */
