/*
 * tuning.c -- the default tuning values, each with why it was chosen, and the
 * REDJIT_* overrides read once a process (for sweeps: the source, and so the
 * kernel cache key, changes with them).
 */
#include "gen.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

const cg_tuning cg_tuning_defaults = {
    /* more loads in flight paid off wherever the element is one load with no
     * check at each (sums, argmax, row, column and CSR sums) */
    .unroll_one = 8,
    /* two loads an element, or a subscript checked at each, gained nothing from 8 */
    .unroll = 4,
    /* as fast as 4 or 8, and the cheapest for NVRTC */
    .vunroll = 2,
    /* the kernel's own choice from its accumulator's and key's sizes did best */
    .kvt = 0,
    /* the short runs' loads hidden behind the fold before them */
    .kdb = 1,
    /* 128 registers, which two tiles in flight (kdb) need without spilling */
    .kminb = 2,
};

static cg_tuning tuning;
static pthread_once_t tuning_once = PTHREAD_ONCE_INIT;

static int env_int(const char *name, int *v)
{
    const char *s = getenv(name);
    if (!s) return 0;
    *v = atoi(s);
    return 1;
}

static void tuning_init(void)
{
    tuning = cg_tuning_defaults;
    int v;
    if (env_int("REDJIT_UNROLL", &v) && (v == 1 || v == 2 || v == 4 || v == 8 || v == 16))
        tuning.unroll_one = tuning.unroll = v;
    if (env_int("REDJIT_VUNROLL", &v) && (v == 1 || v == 2 || v == 4 || v == 8)) tuning.vunroll = v;
    const char *kvt = getenv("REDJIT_KVT");
    if (kvt && strcmp(kvt, "off") == 0) tuning.kvt = -1;
    else if (env_int("REDJIT_KVT", &v) && (v == 1 || v == 2 || v == 4 || v == 8)) tuning.kvt = v;
    const char *kdb = getenv("REDJIT_KDB");
    if (kdb && strcmp(kdb, "0") == 0) tuning.kdb = 0;
    if (env_int("REDJIT_KMINB", &v) && v >= 1 && v <= 8) tuning.kminb = v;
}

const cg_tuning *cg_tuning_get(void)
{
    pthread_once(&tuning_once, tuning_init);
    return &tuning;
}

/* Elements each thread loads before folding any (rj_fold_batch): more where
 * an element is a single load and no subscript is checked at each (partial
 * passes check ranged subscripts once an output, emit_range_checks; full
 * reductions over ranges and element code that still checks, x[k-1] or
 * x[2*k]: elem_checks, do not qualify). */
int cg_unroll(const cg_tuning *t, const cg_kernel *k)
{
    int one = k->nloads == 1 && !k->loads_overflow && (!k->ranged || (k->kind == CG_PARTIAL && !k->elem_checks));
    return one ? t->unroll_one : t->unroll;
}
