/*
 * explain.c -- the generated source of each pass of a plan, for red_explain:
 * every entry group a pass can use, with the embedded device helpers elided
 * to a line naming their file.
 */
#include "cuda.h"

#include <string.h>

/* s with each device helper's text replaced by a line naming its file */
static void put_elided(util_buf *out, const char *s)
{
    cg_device_file helpers[8] = {{"rj_prelude.cuh", rj_prelude_cuh}};
    int nh = 1;
    for (const cg_device_file *f = cg_strategy_files; f->name && nh < 8; f++) helpers[nh++] = *f;
    while (*s) {
        const char *next = NULL;
        int which = -1;
        for (int h = 0; h < nh; h++) {
            const char *f = strstr(s, helpers[h].text);
            if (f && (!next || f < next)) {
                next = f;
                which = h;
            }
        }
        if (!next) {
            util_buf_puts(out, s);
            break;
        }
        util_buf_putn(out, s, (size_t)(next - s));
        util_buf_printf(out, "// ... %s ...\n", helpers[which].name);
        s = next + strlen(helpers[which].text);
    }
}

int cg_explain(const plan *p, const cg_tuning *t, util_buf *out, util_diag *diag)
{
    util_arena a;
    util_arena_init(&a);
    int rc = 0;
    for (int pi = 0; pi < p->npasses && !rc; pi++) {
        cg_kernel k;
        rc = cg_generate(p, pi, t, &a, &k, diag);
        cg_add_group(&k.src, CG_ALL_GROUPS, &k);
        if (!rc && k.src.failed) rc = util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
        if (!rc) {
            static const char *const kinds[] = {[CG_MAP] = "map", [CG_FULL] = "full reduction",
                                                [CG_PARTIAL] = "partial reduction", [CG_KEYED] = "keyed reduction",
                                                [CG_SCAN] = "scan"};
            util_buf_printf(out, "---- pass %d: %s kernel, %d parameters, accumulator %d bytes ----\n", pi,
                            kinds[k.kind], k.lay.nparams, k.acc_size);
            if (k.gemm)
                util_buf_puts(out, "// a matrix product: under the automatic strategy cuBLASLt runs it instead of these\n"
                                   "// kernels (RED_OPT_BLAS 1, libcublasLt found, every index from 0, each matrix\n"
                                   "// with a stride of one element and the other at least that extent)\n");
            /* the generated part only: the helpers are in src/codegen/device */
            put_elided(out, util_buf_str(&k.src));
        }
        util_buf_free(&k.src);
    }
    util_arena_free(&a);
    return rc;
}
