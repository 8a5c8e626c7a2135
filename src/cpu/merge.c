/*
 * merge.c -- partial results of one reduction from several sources, combined in source
 * order with the executor's own operators: the ranks of a distributed run (src/ranks/).
 */
#include <stdlib.h>

#include "cpu/exec_internal.h"

int cpu_merge_partials(const plan *p, const plan_red *rd, int nparts, int64_t n, void *const *const *comp,
                       const int64_t *const *idx, const int *has, const int64_t *const *count, void *const *out, int64_t *out_idx, util_diag *diag)
{
    int arg = rd->rop == ROP_ARGMIN || rd->rop == ROP_ARGMAX, rc = 0;
    util_arena a;
    util_arena_init(&a);
    ustate u = {0};
    if (rd->rop == ROP_USER) {
        vm_prog *prog;
        rc = vm_compile(&a, p, rd->ncomp, rd->combine, &prog);
        if (!rc && vm_state_init(&u.st, prog, p->nvars)) rc = RED_ERR_NOMEM;
        if (!rc) {
            u.st.scalar_info = p->scalars;
            vm_prologue(&u.st);
        }
    }
    for (int64_t o = 0; !rc && o < n; o++) {
        cacc acc;
        acc_init(rd, &acc);
        for (int k = 0; k < nparts; k++) {
            if (!has[k] || (arg && idx[k][o] < 0) || (count && !count[k][o])) continue;
            cacc b;
            acc_init(rd, &b);
            b.has = 1;
            if (arg) b.idx = idx[k][o];
            for (int c = 0; c < (arg ? 1 : rd->ncomp); c++) b.v[c] = core_read_ct(comp[k][c], rd->acc[c], o);
            cpu_acc_combine(rd, &u, &acc, &b);
        }
        if (arg) {
            out_idx[o] = acc.has ? acc.idx : -1;
            core_write_ct(out[0], rd->acc[0], o, acc.v[0]);
        } else {
            if (!acc.has) acc_init(rd, &acc);   /* no source had one: the identity, as one rank */
            for (int c = 0; c < rd->ncomp; c++) core_write_ct(out[c], rd->acc[c], o, acc.v[c]);
        }
    }
    if (rd->rop == ROP_USER) vm_state_free(&u.st);
    util_arena_free(&a);
    if (rc) return util_diag_set(diag, rc, "cannot combine the ranks' partial results");
    return 0;
}
