/*
 * gen.c -- array generators for the session (iota, rand, randn, randint,
 * zeros, ones, full): not part of the language, so each call is made into a
 * hidden session array before the library sees the text.  The values are
 * computed on the host and then settled where session values live (uploaded
 * once to the GPU when there is one).
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "repl.h"

const char *const gen_names[] = {"iota", "rand", "randn", "randint", "zeros", "ones", "full", NULL};

enum { GEN_IOTA, GEN_RAND, GEN_RANDN, GEN_RANDINT, GEN_ZEROS, GEN_ONES, GEN_FULL };

/* Values are made in blocks, each from its own stream keyed by (call, block):
 * the same seed gives the same arrays whatever the number of threads. */
enum { GEN_BLOCK = 1 << 16 };
#define GEN_TWO_PI 6.283185307179586476925286766559

/* ---- xoshiro256** seeded through splitmix64 (Vigna's reference) -------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

static void xoshiro_seed(uint64_t s[4], uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        s[i] = splitmix64(&seed);
}

void gen_seed(repl_session *s, uint64_t seed)
{
    xoshiro_seed(s->rng, seed);
}

/* Uniform in [0, 1) with 53 random bits. */
static double unif(uint64_t s[4])
{
    return (double)(xoshiro(s) >> 11) * 0x1.0p-53;
}

/* Uniform in [0, 1) with 24 random bits: every value is a float, so storing
 * it as f32 cannot round up to 1 (53 bits rounded to 24 did, once in 2^25). */
static double unif24(uint64_t s[4])
{
    return (double)(xoshiro(s) >> 40) * 0x1.0p-24;
}

/* ---- filling ------------------------------------------------------------------ */

typedef struct gen_call {
    int kind;
    red_dtype dtype;
    int ndim;
    int64_t shape[RED_MAX_DIMS];
    double lo, hi, value;     /* randint's range, full's value */
} gen_call;

static void store(red_dtype t, void *base, int64_t i, double v)
{
    switch (t) {
    case RED_BOOL: ((unsigned char *)base)[i] = v != 0; break;
    case RED_I32: ((int32_t *)base)[i] = (int32_t)v; break;
    case RED_I64: ((int64_t *)base)[i] = (int64_t)v; break;
    case RED_U32: ((uint32_t *)base)[i] = (uint32_t)v; break;
    case RED_U64: ((uint64_t *)base)[i] = (uint64_t)v; break;
    case RED_I8: ((int8_t *)base)[i] = (int8_t)(int64_t)v; break;
    case RED_U8: ((uint8_t *)base)[i] = (uint8_t)(int64_t)v; break;
    case RED_I16: ((int16_t *)base)[i] = (int16_t)(int64_t)v; break;
    case RED_U16: ((uint16_t *)base)[i] = (uint16_t)(int64_t)v; break;
    case RED_F32: ((float *)base)[i] = (float)v; break;
    case RED_C64: ((float *)base)[2 * i] = (float)v, ((float *)base)[2 * i + 1] = 0; break;
    case RED_C128: ((double *)base)[2 * i] = v, ((double *)base)[2 * i + 1] = 0; break;
    default: ((double *)base)[i] = v; break;
    }
}

static void fill_block(const gen_call *c, void *data, int64_t b, int64_t e, uint64_t key)
{
    uint64_t rs[4];
    xoshiro_seed(rs, key ^ ((uint64_t)(b / GEN_BLOCK) * 0xd1b54a32d192ed03u));
    for (int64_t i = b; i < e; i++) {
        double v;
        switch (c->kind) {
        case GEN_IOTA: v = (double)i; break;
        case GEN_RAND: v = c->dtype == RED_F32 ? unif24(rs) : unif(rs); break;
        case GEN_RANDN: {
            /* Box-Muller, both values of each pair used */
            double u1 = 1.0 - unif(rs), u2 = unif(rs), r = sqrt(-2.0 * log(u1));
            store(c->dtype, data, i, r * cos(GEN_TWO_PI * u2));
            if (++i >= e)
                return;
            v = r * sin(GEN_TWO_PI * u2);
            break;
        }
        case GEN_RANDINT: {
            uint64_t span = (uint64_t)(c->hi - c->lo);
            v = c->lo + (double)(xoshiro(rs) % span);
            break;
        }
        case GEN_ZEROS: v = 0; break;
        case GEN_ONES: v = 1; break;
        default: v = c->value; break;
        }
        if (c->kind == GEN_IOTA && c->dtype == RED_I64)
            ((int64_t *)data)[i] = i;   /* exact beyond 2^53 */
        else
            store(c->dtype, data, i, v);
    }
}

static void fill(const gen_call *c, void *data, int64_t n, uint64_t key)
{
    gen_call parts;
    if ((c->dtype == RED_C64 || c->dtype == RED_C128) && (c->kind == GEN_RAND || c->kind == GEN_RANDN)) {
        /* random complex numbers: both parts drawn, as 2n values of the part type */
        parts = *c;
        parts.dtype = c->dtype == RED_C64 ? RED_F32 : RED_F64;
        c = &parts;
        n *= 2;
    }
    int64_t nblocks = (n + GEN_BLOCK - 1) / GEN_BLOCK;
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t k = 0; k < nblocks; k++) {
        if (repl_sigint)
            continue;   /* Ctrl-C: the statement is abandoned anyway */
        int64_t b = k * GEN_BLOCK, e = b + GEN_BLOCK < n ? b + GEN_BLOCK : n;
        fill_block(c, data, b, e, key);
    }
}

/* ---- parsing a call --------------------------------------------------------------- */

static char *trim(char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    size_t n = strlen(p);
    while (n && isspace((unsigned char)p[n - 1]))
        p[--n] = '\0';
    return p;
}

/* An argument's value: a number, a session scalar, or any expression the
 * library can compute from the session (n/2, sum(k)). */
static int arg_value(repl_session *s, const char *text, double *v)
{
    char *end;
    *v = strtod(text, &end);
    if (end != text && *end == '\0')
        return 0;
    red_binding *b = calloc((size_t)s->nvars + 1, sizeof *b);
    if (!b)
        return RED_ERR_NOMEM;
    for (int i = 0; i < s->nvars; i++)
        b[i] = (red_binding){s->vars[i].name, s->vars[i].a};
    int rc = red_eval_f64(s->ctx, text, b, s->nvars, v);
    free(b);
    return rc;
}

static const struct {
    const char *name;
    red_dtype t;
} gen_dtypes[] = {{"bool", RED_BOOL}, {"i32", RED_I32}, {"i64", RED_I64}, {"u32", RED_U32},
                  {"u64", RED_U64},   {"f32", RED_F32}, {"f64", RED_F64}, {"i8", RED_I8},
                  {"u8", RED_U8},     {"i16", RED_I16}, {"u16", RED_U16}, {"c64", RED_C64},
                  {"c128", RED_C128}};

/* Parse the arguments text of generator `kind` (between the brackets). */
static int parse_call(repl_session *s, const char *fname, int kind, char *args, gen_call *c)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->dtype = kind == GEN_IOTA || kind == GEN_RANDINT ? RED_I64 : RED_F32;
    double vals[RED_MAX_DIMS + 2];
    int nv = 0;
    char *p = args;
    while (*trim(p)) {
        /* split at the next top-level comma */
        scan_state st = {p, 0};
        scan_tok t;
        while ((t = scan_next(&st)).kind != SC_END && !(t.kind == SC_COMMA && t.depth == 0)) {}
        char *next = t.kind == SC_END ? NULL : (char *)t.p;
        if (next)
            *next = '\0';
        char *a = trim(p);
        if (strncmp(a, "dtype", 5) == 0 && trim(a + 5)[0] == '=') {
            char *tn = trim(strchr(a, '=') + 1);
            size_t k = 0;
            while (k < sizeof gen_dtypes / sizeof gen_dtypes[0] && strcmp(tn, gen_dtypes[k].name) != 0)
                k++;
            if (k == sizeof gen_dtypes / sizeof gen_dtypes[0]) {
                session_error(s, "%s: unknown dtype '%s' (bool, i8, u8, i16, u16, i32, i64, u32, u64, f32, f64, c64, c128)", fname, tn);
                return 1;
            }
            c->dtype = gen_dtypes[k].t;
        } else if (nv == RED_MAX_DIMS + 2) {
            session_error(s, "%s: too many arguments", fname);
            return 1;
        } else {
            int rc = arg_value(s, a, &vals[nv]);
            if (rc == RED_ERR_INTERRUPTED) {
                repl_sigint = 1;   /* Ctrl-C: reported as "interrupted" */
                return 1;
            }
            if (rc != RED_OK) {
                session_error(s, "%s: argument '%s' is not a number: %s", fname, a,
                              *red_errmsg(s->ctx) ? red_errmsg(s->ctx) : red_errstr(rc));
                return 1;
            }
            nv++;
        }
        if (!next)
            break;
        p = next + 1;
    }
    int first = kind == GEN_RANDINT ? 2 : 0, last = kind == GEN_FULL ? nv - 1 : nv;
    if (kind == GEN_RANDINT && nv >= 2) {
        c->lo = vals[0];
        c->hi = vals[1];
        if (!(c->hi > c->lo) || c->lo != floor(c->lo) || c->hi != floor(c->hi) || c->hi - c->lo > 0x1p63) {
            session_error(s, "randint(lo, hi, n...): integers lo < hi expected");
            return 1;
        }
    }
    if (kind == GEN_FULL && nv >= 1)
        c->value = vals[nv - 1];
    c->ndim = last - first;
    if (c->ndim < 1 || c->ndim > RED_MAX_DIMS) {
        static const char *const usage[] = {"iota(n...)", "rand(n...)", "randn(n...)", "randint(lo, hi, n...)",
                                            "zeros(n...)", "ones(n...)", "full(n..., value)"};
        session_error(s, "%s: give the shape as 1 to %d sizes: %s", fname, RED_MAX_DIMS, usage[kind]);
        return 1;
    }
    double total = 1;
    for (int d = 0; d < c->ndim; d++) {
        double v = vals[first + d];
        if (!(v >= 0) || v != floor(v) || v > 0x1p53) {
            session_error(s, "%s: size %g is not a non-negative integer", fname, v);
            return 1;
        }
        c->shape[d] = (int64_t)v;
        total *= v;
    }
    if (total * (double)red_dtype_size(c->dtype) > 0x1p46) {
        session_error(s, "%s: %.0f elements is too many", fname, total);
        return 1;
    }
    return 0;
}

/* ---- substitution ------------------------------------------------------------------- */

static int gen_kind(const scan_tok *t)
{
    for (int i = 0; gen_names[i]; i++)
        if (scan_is(t, gen_names[i]))
            return i;
    return -1;
}

/* Make the array of one call; its name is written to `name`. */
static int materialise(repl_session *s, const char *fname, int kind, char *args, char *name, size_t len)
{
    gen_call c;
    if (parse_call(s, fname, kind, args, &c) != 0)
        return 1;
    snprintf(name, len, "__g%d", ++s->ntemp);
    repl_var *v = session_new_array(s, name, c.dtype, c.ndim, c.shape);
    if (!v) {
        session_error(s, "%s: out of memory", fname);
        return 1;
    }
    v->hidden = true;
    v->weak = false;
    fill(&c, v->a.data, red_array_size(&v->a), xoshiro(s->rng));
    if (repl_sigint)
        return 1;   /* half-filled: the caller says "interrupted" */
    session_settle(s, v);   /* made on the host, uploaded once if it lives on the GPU */
    return 0;
}

char *gen_substitute(repl_session *s, const char *text)
{
    char *out = strdup(text);
    if (!out) {
        session_error(s, "out of memory");
        return NULL;
    }
    /* Innermost calls first: rescan after each replacement, so arguments
     * that hold generators were already replaced. */
    for (;;) {
        scan_state st = {out, 0};
        scan_tok t, prev = {SC_END, NULL, 0, 0};
        char *call = NULL, *open = NULL, *close = NULL;
        int kind = -1;
        while ((t = scan_next(&st)).kind != SC_END) {
            if (t.kind == SC_OPEN && *t.p == '(' && prev.kind == SC_NAME && gen_kind(&prev) >= 0) {
                call = (char *)prev.p;
                open = (char *)t.p;
                kind = gen_kind(&prev);
                close = NULL;
                int depth = t.depth;
                scan_tok u;
                bool nested = false;
                scan_tok last = t;
                while ((u = scan_next(&st)).kind != SC_END && !(u.kind == SC_CLOSE && u.depth == depth)) {
                    if (u.kind == SC_OPEN && *u.p == '(' && last.kind == SC_NAME && gen_kind(&last) >= 0)
                        nested = true;
                    last = u;
                }
                if (u.kind == SC_END) {
                    call = NULL;   /* unclosed: the parser will say so */
                    break;
                }
                close = (char *)u.p;
                if (!nested)
                    break;
                call = NULL;
                st = (scan_state){open + 1, depth + 1};
            }
            prev = t;
        }
        if (!call)
            return out;
        char fname[16], name[32];
        snprintf(fname, sizeof fname, "%.*s", (int)(open - call), call);
        char *args = strndup(open + 1, (size_t)(close - open - 1));
        int rc = args ? materialise(s, fname, kind, args, name, sizeof name) : 1;
        free(args);
        if (rc != 0) {
            free(out);
            return NULL;
        }
        /* Overwrite the call in place: the name, then blanks (newlines kept). */
        size_t nl = strlen(name), span = (size_t)(close + 1 - call);
        if (nl > span) {   /* "ones(1)" is shorter than "__g12345": rebuild */
            size_t head = (size_t)(call - out), tail = strlen(close + 1);
            char *grown = malloc(head + nl + tail + 1);
            if (!grown) {
                free(out);
                session_error(s, "out of memory");
                return NULL;
            }
            memcpy(grown, out, head);
            memcpy(grown + head, name, nl);
            memcpy(grown + head + nl, close + 1, tail + 1);
            free(out);
            out = grown;
        } else {
            memcpy(call, name, nl);
            for (char *c = call + nl; c <= close; c++)
                if (*c != '\n')
                    *c = ' ';
        }
    }
}
