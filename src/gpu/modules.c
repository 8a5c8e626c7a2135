/*
 * modules.c -- a plan pass's kernels: generated once per pass and kept (most recently used
 * first), each group of entry kernels compiled (or read from the disk cache) and loaded the
 * first time a run needs it, and an entry's function looked up once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_internal.h"
#include "kcache.h"

static int load_module(gpu_dev *g, const char *src, const gpu_limits *lim, CUmodule *out, util_diag *diag)
{
    /* the key names NVRTC's version: load it first, even when the CUBIN
     * will come from the disk cache */
    char keysrc[512];
    int krc = gpu_nvrtc_key(g->arch, keysrc, sizeof keysrc, diag);
    if (krc) return krc;
    size_t len = strlen(src);
    uint64_t key = kc_hash(src, len, kc_hash(keysrc, strlen(keysrc), 0));
    for (module_entry *m = g->mods; m; m = m->next)
        if (m->key == key && m->len == len && memcmp(m->src, src, len) == 0) {
            g->stats.mem_hits++;
            *out = m->mod;
            return 0;
        }
    char hex[40];
    snprintf(hex, sizeof hex, "%016llx%08llx", (unsigned long long)key,
             (unsigned long long)(kc_hash(src, strlen(src), 0x5eed) & 0xffffffffu));
    void *cubin = NULL;
    size_t n = 0;
    int disk = kc_load(hex, &cubin, &n);
    if (disk == KC_REFUSED) g->stats.disk_refused++;   /* kcache.h: the trust rule */
    if (disk != KC_HIT) {
        double ms = 0;
        int rc = gpu_limit_compile(lim, diag);
        if (!rc) rc = gpu_nvrtc_compile(src, g->arch, &cubin, &n, &ms, diag);
        if (rc) return rc;
        g->stats.compiles++;
        g->stats.compile_ms += ms;
        kc_store(hex, cubin, n);
        gpu_dump_kernel(hex, src, cubin, n);
    } else {
        g->stats.disk_hits++;
    }
    CUmodule mod;
    CUresult r = gpu_fault_now(GPU_FAULT_MODULE_LOAD) ? CUDA_ERROR_INVALID_IMAGE : g->cu.ModuleLoadData(&mod, cubin);
    free(cubin);
    if (r) return gpu_cu_fail(g, r, "cuModuleLoadData", diag);
    module_entry *m = calloc(1, sizeof *m);
    char *copy = m ? malloc(len + 1) : NULL;
    if (!copy) {
        free(m);
        g->cu.ModuleUnload(mod);
        return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    }
    memcpy(copy, src, len + 1);
    m->src = copy;
    m->len = len;
    m->key = key;
    m->mod = mod;
    m->next = g->mods;
    g->mods = m;
    *out = mod;
    return 0;
}

/* Everything modules.c keeps for a device: the loaded modules, the passes' kernels. */
void gpu_modules_free(gpu_dev *g)
{
    for (module_entry *m = g->mods; m;) {
        module_entry *n = m->next;
        g->cu.ModuleUnload(m->mod);
        free(m->src);
        free(m);
        m = n;
    }
    for (pass_entry *e = g->passes; e;) {
        pass_entry *n = e->next;
        util_buf_free(&e->k.src);
        util_arena_free(&e->arena);
        free(e);
        e = n;
    }
}

int gpu_pass_kernels(gpu_dev *g, const plan *p, int pi, pass_entry **out, util_diag *diag)
{
    int count = 0;
    for (pass_entry *e = g->passes, *prev = NULL; e; prev = e, e = e->next) {
        if (e->uid == p->uid && e->pi == pi) {
            if (prev) {   /* most recently used first */
                prev->next = e->next;
                e->next = g->passes;
                g->passes = e;
            }
            *out = e;
            return 0;
        }
        if (++count >= 512 && e->next) {
            /* drop the least recently used entries (their modules stay
             * loaded in the module cache) */
            pass_entry *d = e->next;
            e->next = NULL;
            while (d) {
                pass_entry *n = d->next;
                util_buf_free(&d->k.src);
                util_arena_free(&d->arena);
                free(d);
                d = n;
            }
            break;
        }
    }
    pass_entry *e = calloc(1, sizeof *e);
    if (!e) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory");
    util_arena_init(&e->arena);
    int rc = cg_generate(p, pi, cg_tuning_get(), &e->arena, &e->k, diag);
    if (rc) {
        util_buf_free(&e->k.src);
        util_arena_free(&e->arena);
        free(e);
        return rc;
    }
    e->uid = p->uid;
    e->pi = pi;
    e->next = g->passes;
    g->passes = e;
    *out = e;
    return 0;
}

/* The entry kernels' names, as the generated source defines them; codegen's groups
 * (cg_group_of, cg_group_has) are asked by name. */
const char *const gpu_entry_name[GPU_NENTRIES] = {
    [GPU_E_MAP] = "rj_map",         [GPU_E_BLOCK] = "rj_block",     [GPU_E_FINAL] = "rj_final",
    [GPU_E_SEQ] = "rj_seq",         [GPU_E_PERSIST] = "rj_persist", [GPU_E_PERSISTV] = "rj_persistv",
    [GPU_E_SEGB] = "rj_segb",       [GPU_E_SEG1] = "rj_seg1",       [GPU_E_SEG1V] = "rj_seg1v",
    [GPU_E_SEG1A] = "rj_seg1a",     [GPU_E_SEG1S] = "rj_seg1s",     [GPU_E_SEG32] = "rj_seg32",
    [GPU_E_SEG32V] = "rj_seg32v",   [GPU_E_SEGBV] = "rj_segbv",     [GPU_E_SEGNV] = "rj_segnv",
    [GPU_E_SPLIT1] = "rj_split1",   [GPU_E_SPLITB] = "rj_splitb",   [GPU_E_SPLITF] = "rj_splitf",
    [GPU_E_COUNT] = "rj_count",     [GPU_E_KENDS] = "rj_kends",     [GPU_E_KENDSV] = "rj_kendsv",
    [GPU_E_KOFFS] = "rj_koffs",     [GPU_E_KSCAN] = "rj_kscan",     [GPU_E_KFUSED] = "rj_kfused",
    [GPU_E_KFUSEDV] = "rj_kfusedv", [GPU_E_KPRIV] = "rj_kpriv",     [GPU_E_KCOMB] = "rj_kcomb",
    [GPU_E_SPLITBV] = "rj_splitbv", [GPU_E_SEGM] = "rj_segm",       [GPU_E_SEGMF] = "rj_segmf",
    [GPU_E_SEGBS] = "rj_segbs",     [GPU_E_TILE] = "rj_tile",
    [GPU_E_TILE2] = "rj_tile2",     [GPU_E_SCAN] = "rj_scan",     [GPU_E_SCANW] = "rj_scanw",
    [GPU_E_SCANWV] = "rj_scanwv",   [GPU_E_SCANLV] = "rj_scanlv",   [GPU_E_SEG32D] = "rj_seg32d",
    [GPU_E_SEGL] = "rj_segl",
};

/* The entry kernel `entry` (enum gpu_entry) of a pass's module, looked up once. */
int gpu_get_fn(run_ctx *r, pass_entry *e, int entry, int *slot)
{
    gpu_dev *g = r->g;
    util_diag *diag = r->diag;
    const char *name = gpu_entry_name[entry];
    for (int i = 0; i < e->nfn; i++)
        if (e->fn[i].entry == entry) {
            *slot = i;
            return 0;
        }
    if (e->nfn == (int)(sizeof e->fn / sizeof e->fn[0]))
        return util_diag_set(diag, RED_ERR_INTERNAL, "too many kernels in one pass");
    /* a group already loaded that defines it (rj_final after rj_seq), else its own */
    int grp = -1;
    for (int q = 0; q < CG_NGROUPS && grp < 0; q++)
        if (e->mods[q] && cg_group_has(q, name)) grp = q;
    if (grp < 0) grp = cg_group_of(name);
    if (!cg_group_usable(grp, &e->k))
        return util_diag_set(diag, RED_ERR_INTERNAL, "no kernel %s in this pass", name);
    if (!e->mods[grp]) {
        /* the body and this group's entry kernels */
        util_buf src;
        util_buf_init(&src);
        util_buf_puts(&src, util_buf_str(&e->k.src));
        cg_add_group(&src, grp, &e->k);
        const gpu_limits *lim = &r->run->limits;
        int rc = src.failed ? util_diag_set(diag, RED_ERR_NOMEM, "out of memory")
                            : gpu_limit_source(lim, e->pi, src.len, diag);
        if (!rc) rc = load_module(g, util_buf_str(&src), lim, &e->mods[grp], diag);
        util_buf_free(&src);
        if (rc) return rc;
    }
    CUfunction f;
    CU(g->cu.ModuleGetFunction(&f, e->mods[grp], name), "cuModuleGetFunction");
    e->fn[e->nfn].entry = entry;
    e->fn[e->nfn].f = f;
    e->fn[e->nfn].occupancy = 0;
    e->fn[e->nfn].smem = 0;
    e->fn[e->nfn].smem_static = -1;
    *slot = e->nfn++;
    return 0;
}

