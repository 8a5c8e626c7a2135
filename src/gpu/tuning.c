/*
 * tuning.c -- the GPU runtime's tuning (tuning.h): the defaults, and the REDJIT_* overrides
 * read once per process.  The only place in src/gpu that reads those variables.
 */
#include "tuning.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static gpu_tuning tuning;
static pthread_once_t tuning_once = PTHREAD_ONCE_INIT;

/* A row threshold: the default without the variable; 0 or less turns the kernel off. */
static double env_row_min(const char *name, double dflt)
{
    const char *v = getenv(name);
    if (!v) return dflt;
    double d = atof(v);
    return d > 0 ? d : 1e300;
}

static void tuning_load(void)
{
    gpu_tuning *t = &tuning;
    const char *w = getenv("REDJIT_WAVES");   /* for bench/sweep.sh */
    t->waves = w && atoi(w) >= 1 && atoi(w) <= 16 ? atoi(w) : 0;
    t->segbv_min = env_row_min("REDJIT_SEGBV_MIN", 4096);
    t->seg1a_min = env_row_min("REDJIT_SEG1A_MIN", 8);
    const char *v = getenv("REDJIT_SEG1S");
    t->seg1s = !v || atoi(v) != 0;
    v = getenv("REDJIT_SEGNV");
    t->segnv = v ? atoi(v) : 16;
    if (t->segnv > 16) t->segnv = 16;
    v = getenv("REDJIT_SEGBS_MAX");
    t->segbs_max = v ? atoll(v) : 96 * 1024;
    t->merge_min = env_row_min("REDJIT_MERGE_MIN", 8);
    t->tree_long = env_row_min("REDJIT_TREE_LONG", 4096);
    v = getenv("REDJIT_TILE_MIN");
    t->tile_min = v ? atof(v) : 256;
    v = getenv("REDJIT_TILE2_KMIN");
    t->tile2_kmin = v ? atof(v) : 1;
    v = getenv("REDJIT_MERGE");
    t->merge = !v || atoi(v) != 0;
    v = getenv("REDJIT_SCANLV");
    t->scanlv = !v || atoi(v) != 0;
    v = getenv("REDJIT_EPI");
    t->epi = !v || atoi(v) != 0;
    v = getenv("REDJIT_NVRTC_OPTS");
    snprintf(t->nvrtc_opts, sizeof t->nvrtc_opts, "%s", v ? v : "");
    v = getenv("REDJIT_DUMP_CUBIN");
    snprintf(t->dump_cubin, sizeof t->dump_cubin, "%s", v ? v : "");
}

const gpu_tuning *gpu_tuning_get(void)
{
    pthread_once(&tuning_once, tuning_load);
    return &tuning;
}
