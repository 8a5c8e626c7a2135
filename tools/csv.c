/*
 * csv.c -- plain comma-separated tables of numbers for :load and :save: the
 * format every spreadsheet writes.  One column is a 1-D array, more a 2-D one.
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "print.h"
#include "repl.h"

static int csv_err(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int csv_err(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

/* Parse one field; false when it is not a number. */
static bool csv_number(const char *b, const char *e, double *v, bool *integral)
{
    while (b < e && isspace((unsigned char)*b))
        b++;
    while (e > b && isspace((unsigned char)e[-1]))
        e--;
    if (b == e || e - b > 63)
        return false;
    char buf[64], *end;
    memcpy(buf, b, (size_t)(e - b));
    buf[e - b] = '\0';
    *v = strtod(buf, &end);
    *integral = strspn(buf + (buf[0] == '-' || buf[0] == '+'), "0123456789") ==
                strlen(buf) - (buf[0] == '-' || buf[0] == '+');
    return *end == '\0';
}

int csv_load(const char *path, red_array *out, void **owned, char *err, size_t errlen)
{
    *owned = NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return csv_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    double *vals = NULL;
    size_t n = 0, cap = 0, rows = 0, cols = 0, lineno = 0;
    bool all_int = true;
    char *line = NULL;
    size_t lcap = 0;
    int status = 0;
    while (status == 0 && getline(&line, &lcap, f) >= 0) {
        lineno++;
        const char *p = line + strspn(line, " \t\r\n");
        if (!*p)
            continue;
        size_t k = 0, start = n;
        bool ok = true;
        for (const char *b = line;; k++) {
            const char *e = b + strcspn(b, ",\n");
            double v;
            bool integral;
            ok = ok && csv_number(b, e, &v, &integral);
            if (ok) {
                if (n == cap) {
                    cap = cap ? 2 * cap : 1024;
                    double *nv = realloc(vals, cap * sizeof *nv);
                    if (!nv) {
                        status = csv_err(err, errlen, "%s: out of memory", path);
                        break;
                    }
                    vals = nv;
                }
                vals[n++] = v;
                all_int = all_int && integral;
            }
            if (*e != ',')
                break;
            b = e + 1;
        }
        if (status)
            break;
        if (!ok) {
            n = start;
            if (rows == 0 && lineno == 1)
                continue;   /* a header */
            status = csv_err(err, errlen, "%s:%zu: not a number", path, lineno);
        } else if (rows > 0 && k + 1 != cols) {
            status = csv_err(err, errlen, "%s:%zu: %zu fields; the first row has %zu", path, lineno, k + 1, cols);
        } else {
            cols = k + 1;
            rows++;
        }
    }
    free(line);
    fclose(f);
    if (status == 0 && rows == 0)
        status = csv_err(err, errlen, "%s: no numbers", path);
    if (status) {
        free(vals);
        return status;
    }
    int64_t shape[2] = {(int64_t)rows, (int64_t)cols};
    if (all_int) {
        int64_t *iv = malloc(n * sizeof *iv);
        if (!iv) {
            free(vals);
            return csv_err(err, errlen, "%s: out of memory", path);
        }
        for (size_t i = 0; i < n; i++)
            iv[i] = (int64_t)vals[i];
        free(vals);
        *owned = iv;
    } else {
        *owned = vals;
    }
    return red_array_init(out, *owned, all_int ? RED_I64 : RED_F64, cols == 1 ? 1 : 2, shape, NULL) == RED_OK
               ? 0
               : csv_err(err, errlen, "%s: bad shape", path);
}

int csv_save(const char *path, const red_array *a, char *err, size_t errlen)
{
    if (a->ndim < 1 || a->ndim > 2)
        return csv_err(err, errlen, "%s: .csv holds 1-D and 2-D arrays; this one has %d dimensions "
                       "(save it as .npy)", path, a->ndim);
    if (a->dtype == RED_C64 || a->dtype == RED_C128)   /* it would not load back */
        return csv_err(err, errlen, "%s: .csv holds real numbers; this array is complex (save it as .npy)", path);
    FILE *f = fopen(path, "w");
    if (!f)
        return csv_err(err, errlen, "%s: cannot create: %s", path, strerror(errno));
    int64_t rows = a->shape[0], cols = a->ndim == 2 ? a->shape[1] : 1;
    size_t es = red_dtype_size(a->dtype);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            int64_t off = r * a->strides[0] + (a->ndim == 2 ? c * a->strides[1] : 0);
            char buf[64];
            print_fmt_elem(buf, sizeof buf, a->dtype, (const char *)a->data + off * (int64_t)es, false);
            /* booleans as 0/1, so the file loads back as numbers */
            if (a->dtype == RED_BOOL)
                snprintf(buf, sizeof buf, "%d", ((const unsigned char *)a->data)[off] != 0);
            fprintf(f, "%s%s", buf, c + 1 < cols ? "," : "\n");
        }
    if (fclose(f) != 0) {
        remove(path);
        return csv_err(err, errlen, "%s: write error", path);
    }
    return 0;
}
