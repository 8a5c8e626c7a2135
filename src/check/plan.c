/*
 * plan.c -- hash-consed IR construction, identities, and the readable form
 * of a plan printed by red_explain.
 */
#include "plan.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *const ct_names[CT_COUNT] = {"bool", "i32", "i64", "u32", "u64", "f32", "f64"};

const char *plan_ct_name(int ct) { return ct >= 0 && ct < CT_COUNT ? ct_names[ct] : "?"; }

int plan_ct_of_dtype(red_dtype t)
{
    switch (t) {
    case RED_BOOL: return CT_BOOL;
    case RED_I8:
    case RED_U8:
    case RED_I16:
    case RED_U16:
    case RED_I32: return CT_I32;
    case RED_I64: return CT_I64;
    case RED_U32: return CT_U32;
    case RED_U64: return CT_U64;
    case RED_F16:
    case RED_BF16:
    case RED_F32: return CT_F32;
    case RED_F64: return CT_F64;
    /* complex arrays are read as their parts (plan_buf.cplx): the part's type */
    case RED_C64: return CT_F32;
    case RED_C128: return CT_F64;
    }
    return -1;
}

red_dtype plan_dtype_of_ct(int ct)
{
    static const red_dtype map[CT_COUNT] = {RED_BOOL, RED_I32, RED_I64, RED_U32,
                                             RED_U64,  RED_F32, RED_F64};
    return map[ct];
}

int plan_ct_size(int ct)
{
    static const int sz[CT_COUNT] = {1, 4, 8, 4, 8, 4, 8};
    return sz[ct];
}

static const char *const op_names[OP_COUNT_] = {
    "neg", "not", "bnot", "abs", "sqrt", "exp", "log", "log2", "log10", "sin", "cos",
    "tan", "tanh", "floor", "ceil", "round", "isnan", "isfinite", "f16round",
    "bf16round", "+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "<", "<=", ">",
    ">=", "==", "!=", "&&", "||", "min", "max", "pow", "hypot", "atan2", "fma", "select"};

const char *plan_op_name(int op) { return op >= 0 && op < OP_COUNT_ ? op_names[op] : "?"; }

const char *plan_rop_name(int rop)
{
    static const char *const n[] = {"sum", "prod", "min", "max", "&", "|", "^",
                                    "&&", "||", "argmin", "argmax", "user"};
    return rop >= 0 && rop <= ROP_USER ? n[rop] : "?";
}

const char *plan_red_name(const plan_red *rd)
{
    if (rd->rop == ROP_USER) return rd->uname;
    if (rd->skipnan) return rd->rop == ROP_ARGMAX ? "nanargmax" : "nanargmin";
    return plan_rop_name(rd->rop);
}

/* ---- hash-consing ------------------------------------------------------ */

struct plan_builder {
    util_arena *a;
    ir **table;
    uint32_t cap, count;
    int next_id;
};

plan_builder *plan_builder_new(util_arena *a)
{
    plan_builder *b = util_arena_alloc(a, sizeof *b);
    if (!b) return NULL;
    b->a = a;
    b->cap = 1024;
    b->table = util_arena_alloc(a, b->cap * sizeof *b->table);
    if (!b->table) return NULL;
    return b;
}

int plan_builder_count(plan_builder *b) { return b->next_id; }

uint64_t plan_next_uid(void)
{
    static uint64_t next_uid;
    return __atomic_add_fetch(&next_uid, 1, __ATOMIC_RELAXED);
}

static uint32_t mix(uint32_t h, uint64_t v)
{
    h ^= (uint32_t)v + 0x9e3779b9u + (h << 6) + (h >> 2);
    h ^= (uint32_t)(v >> 32) + 0x9e3779b9u + (h << 6) + (h >> 2);
    return h;
}

static int ir_same(const ir *x, const ir *y)
{
    if (x->kind != y->kind || x->type != y->type || x->op != y->op || x->nargs != y->nargs ||
        x->slot != y->slot || memcmp(&x->c, &y->c, sizeof x->c) != 0)
        return 0;
    for (int i = 0; i < x->nargs; i++)
        if (x->args[i] != y->args[i]) return 0;
    return 1;
}

static int grow(plan_builder *b)
{
    uint32_t ncap = b->cap * 2;
    ir **nt = util_arena_alloc(b->a, ncap * sizeof *nt);
    if (!nt) return 0;
    for (uint32_t i = 0; i < b->cap; i++) {
        ir *x = b->table[i];
        if (!x) continue;
        uint32_t j = x->hash & (ncap - 1);
        while (nt[j]) j = (j + 1) & (ncap - 1);
        nt[j] = x;
    }
    b->table = nt;
    b->cap = ncap;
    return 1;
}

static ir *intern(plan_builder *b, ir *proto, ir **args)
{
    if (!b) return NULL;
    for (int i = 0; i < proto->nargs; i++)
        if (!args[i]) return NULL;   /* propagate an earlier failure */
    uint32_t h = mix(mix(mix(proto->kind, proto->type), proto->op), (uint64_t)(int64_t)proto->slot);
    h = mix(h, proto->c.u);
    for (int i = 0; i < proto->nargs; i++) h = mix(h, (uint64_t)args[i]->id);
    proto->hash = h;
    proto->args = args;
    uint32_t j = h & (b->cap - 1);
    for (ir *x; (x = b->table[j]); j = (j + 1) & (b->cap - 1))
        if (x->hash == h && ir_same(x, proto)) return x;
    ir *n = util_arena_alloc(b->a, sizeof *n);
    if (!n) return NULL;
    *n = *proto;
    if (proto->nargs) {
        n->args = util_arena_alloc(b->a, proto->nargs * sizeof *n->args);
        if (!n->args) return NULL;
        memcpy(n->args, args, proto->nargs * sizeof *args);
    }
    n->id = b->next_id++;
    b->table[j] = n;
    if (++b->count * 2 > b->cap && !grow(b)) return NULL;
    return n;
}

static plan_value normalize(int type, plan_value v)
{
    switch (type) {
    case CT_BOOL: v.i = v.i != 0; break;
    case CT_I32: v.i = (int32_t)(uint32_t)v.u; break;
    case CT_U32: v.u = (uint32_t)v.u; break;
    case CT_F32: v.f = (float)v.f; break;
    default: break;
    }
    return v;
}

ir *ir_const(plan_builder *b, int type, plan_value v)
{
    ir p = {.kind = IR_CONST, .type = (uint8_t)type, .c = normalize(type, v)};
    if (CT_IS_FLOAT(type) && v.f == 0 && signbit(v.f)) p.c.f = -0.0;
    return intern(b, &p, NULL);
}

ir *ir_const_i(plan_builder *b, int type, int64_t v)
{
    plan_value pv;
    if (CT_IS_FLOAT(type))
        pv.f = (double)v;
    else
        pv.i = v;
    return ir_const(b, type, pv);
}

ir *ir_const_f(plan_builder *b, int type, double v)
{
    plan_value pv = {.f = v};
    return ir_const(b, type, pv);
}

ir *ir_index(plan_builder *b, int var)
{
    ir p = {.kind = IR_INDEX, .type = CT_I64, .slot = var};
    return intern(b, &p, NULL);
}

ir *ir_scalar(plan_builder *b, int type, int slot)
{
    ir p = {.kind = IR_SCALAR, .type = (uint8_t)type, .slot = slot};
    return intern(b, &p, NULL);
}

ir *ir_param(plan_builder *b, int type, int slot)
{
    ir p = {.kind = IR_PARAM, .type = (uint8_t)type, .slot = slot};
    return intern(b, &p, NULL);
}

ir *ir_load(plan_builder *b, int type, int buf, int nsub, ir **subs, util_pos pos)
{
    ir p = {.kind = IR_LOAD, .type = (uint8_t)type, .slot = buf, .nargs = (uint8_t)nsub};
    ir *x = intern(b, &p, subs);
    if (x && x->pos.len == 0) x->pos = pos;   /* first mention names the error */
    return x;
}

ir *ir_cast(plan_builder *b, int type, ir *x)
{
    if (!x) return NULL;
    if (x->type == type) return x;
    if (x->kind == IR_CONST) {
        /* Fold casts of constants (literal adaptation makes many). */
        plan_value v = x->c, r;
        if (CT_IS_FLOAT(x->type)) {
            if (CT_IS_FLOAT(type)) r.f = v.f;
            else if (type == CT_BOOL) r.i = v.f != 0;
            else {
                /* Same saturating rule as the executors' casts. */
                double f = v.f;
                if (f != f) r.i = 0;
                else if (type == CT_I32) r.i = f >= 2147483647.0 ? INT32_MAX : f <= -2147483648.0 ? INT32_MIN : (int64_t)f;
                else if (type == CT_I64) r.i = f >= 9223372036854775807.0 ? INT64_MAX : f <= -9223372036854775808.0 ? INT64_MIN : (int64_t)f;
                else if (type == CT_U32) r.u = f >= 4294967295.0 ? UINT32_MAX : f <= 0 ? 0 : (uint64_t)f;
                else r.u = f >= 18446744073709551615.0 ? UINT64_MAX : f <= 0 ? 0 : (uint64_t)f;
            }
        } else {
            int sgn = x->type != CT_U32 && x->type != CT_U64;
            if (CT_IS_FLOAT(type)) r.f = sgn ? (double)v.i : (double)v.u;
            else if (type == CT_BOOL) r.i = v.u != 0;
            else r.u = v.u;
        }
        return ir_const(b, type, r);
    }
    ir p = {.kind = IR_CAST, .type = (uint8_t)type, .nargs = 1};
    return intern(b, &p, &x);
}

ir *ir_op(plan_builder *b, int op, int type, int nargs, ir **args)
{
    ir p = {.kind = IR_OP, .type = (uint8_t)type, .op = (uint8_t)op, .nargs = (uint8_t)nargs};
    return intern(b, &p, args);
}

plan_value plan_identity(int rop, int ct)
{
    plan_value v = {.u = 0};
    switch (rop) {
    case ROP_PROD:
        if (CT_IS_FLOAT(ct)) v.f = 1; else v.i = 1;
        break;
    case ROP_MIN:
    case ROP_ARGMIN:
        switch (ct) {
        case CT_BOOL: v.i = 1; break;
        case CT_I32: v.i = INT32_MAX; break;
        case CT_I64: v.i = INT64_MAX; break;
        case CT_U32: v.u = UINT32_MAX; break;
        case CT_U64: v.u = UINT64_MAX; break;
        default: v.f = INFINITY;
        }
        break;
    case ROP_MAX:
    case ROP_ARGMAX:
        switch (ct) {
        case CT_BOOL: v.i = 0; break;
        case CT_I32: v.i = INT32_MIN; break;
        case CT_I64: v.i = INT64_MIN; break;
        case CT_U32:
        case CT_U64: v.u = 0; break;
        default: v.f = -INFINITY;
        }
        break;
    case ROP_BAND:
        if (ct == CT_BOOL) v.i = 1;
        else if (ct == CT_U32) v.u = UINT32_MAX;
        else v.i = -1;
        break;
    case ROP_LAND: v.i = 1; break;
    default: break;   /* sum, |, ^, || : zero */
    }
    return v;
}

/* ---- explain ------------------------------------------------------------ */

static void print_value(util_buf *o, int type, plan_value v)
{
    if (CT_IS_FLOAT(type)) util_buf_printf(o, "%.9g", v.f);
    else if (type == CT_U32 || type == CT_U64) util_buf_printf(o, "%llu", (unsigned long long)v.u);
    else if (type == CT_BOOL) util_buf_puts(o, v.i ? "true" : "false");
    else util_buf_printf(o, "%lld", (long long)v.i);
}

static void print_buf_name(util_buf *o, const plan *p, int slot)
{
    if (slot >= 0) util_buf_puts(o, p->bufs[slot].name);
    else util_buf_printf(o, "t%d", -1 - slot);
}

/* The IR is a graph: a node reached by many paths prints once per path, and
 * a short text can make 2^26 paths (x != x nested).  Printing stops once the
 * buffer holds PLAN_PRINT_MAX bytes; plan_explain says so at its end. */
#define PLAN_PRINT_MAX ((size_t)1 << 20)

/* The dimension of load x subscripted by variable v, or -1. */
static int load_dim(const ir *x, int v)
{
    for (int d = 0; v >= 0 && d < x->nargs; d++)
        if (x->args[d]->kind == IR_INDEX && x->args[d]->slot == v) return d;
    return -1;
}

/* A load of a bound array of type ct at n plain indices. */
static int plain_load(const ir *x, int ct, int n)
{
    if (x->kind != IR_LOAD || x->slot < 0 || x->nargs != n || x->type != ct) return 0;
    for (int d = 0; d < n; d++)
        if (x->args[d]->kind != IR_INDEX) return 0;
    return 1;
}

const ir *plan_index_plus(const ir *x, int64_t *c)
{
    *c = 0;
    if (x->kind == IR_OP && x->op == OP_ADD && x->args[1]->kind == IR_CONST && x->args[0]->kind == IR_INDEX) {
        *c = x->args[1]->c.i;
        x = x->args[0];
    }
    return x->kind == IR_INDEX ? x : NULL;
}

int plan_csr_bounds(const ir *lo, const ir *hi, int r)
{
    for (; lo->kind == IR_CAST || hi->kind == IR_CAST; lo = lo->args[0], hi = hi->args[0])
        if (lo->kind != hi->kind || lo->type != hi->type) return 0;
    if (lo->kind != IR_LOAD || hi->kind != IR_LOAD || lo->slot < 0 || lo->slot != hi->slot || lo->nargs != 1) return 0;
    int64_t ca, cb;
    const ir *a = plan_index_plus(lo->args[0], &ca), *b = plan_index_plus(hi->args[0], &cb);
    return a && b && a->slot == r && b->slot == r && ca < INT64_MAX && cb == ca + 1;
}

int plan_scan_ranged(const plan *p, const plan_pass *ps)
{
    return ps->scan && ps->nred == 1 && p->vars[ps->red[0]].lo != NULL;
}

int plan_find_product(const plan *p, const plan_pass *ps, plan_product *out)
{
    int nf = ps->nfree;
    if (ps->key || ps->scan || ps->reset || ps->nreds != 1 || ps->nred != 1 || (nf != 2 && nf != 3)) return 0;
    const plan_red *rd = &ps->reds[0];
    int ct = rd->acc[0];
    if (rd->rop != ROP_SUM || rd->ncomp != 1 || rd->uname || (ct != CT_F32 && ct != CT_F64)) return 0;
    const plan_var *kv = &p->vars[ps->red[0]];
    if (kv->lo || kv->hi) return 0;   /* a range, from the data */
    const ir *m = rd->map[0];
    if (m->kind != IR_OP || m->op != OP_MUL || m->type != ct || !plain_load(m->args[0], ct, nf) ||
        !plain_load(m->args[1], ct, nf))
        return 0;
    const int v[4] = {nf == 3 ? ps->free[0] : -1, ps->free[nf - 2], ps->free[nf - 1], ps->red[0]};
    const ir *A = NULL, *B = NULL;
    for (int s = 0; s < 2; s++) {
        const ir *x = m->args[s];
        if ((nf == 3 && load_dim(x, v[0]) < 0) || load_dim(x, v[3]) < 0) return 0;
        if (load_dim(x, v[1]) >= 0 && load_dim(x, v[2]) < 0) A = x;
        else if (load_dim(x, v[2]) >= 0 && load_dim(x, v[1]) < 0) B = x;
    }
    if (!A || !B) return 0;
    out->ct = ct;
    out->a = A;
    out->b = B;
    for (int q = 0; q < 4; q++) {
        out->var[q] = v[q];
        out->adim[q] = load_dim(A, v[q]);
        out->bdim[q] = load_dim(B, v[q]);
    }
    return 1;
}

void ir_print(util_buf *o, const plan *p, const ir *x)
{
    if (o->len >= PLAN_PRINT_MAX) return;
    switch (x->kind) {
    case IR_CONST:
        print_value(o, x->type, x->c);
        if (!(x->type == CT_I64 || x->type == CT_F64 || x->type == CT_BOOL))
            util_buf_printf(o, ":%s", plan_ct_name(x->type));
        return;
    case IR_INDEX: util_buf_puts(o, p->vars[x->slot].name); return;
    case IR_SCALAR: {
        /* a complex scalar's parts (two entries of one name): s.re, s.im */
        const plan_scalar *s = &p->scalars[x->slot];
        int cplx = s->part || (x->slot + 1 < p->nscalars && p->scalars[x->slot + 1].part);
        util_buf_printf(o, "%s%s", s->name, cplx ? (s->part ? ".im" : ".re") : "");
        return;
    }
    case IR_PARAM: util_buf_printf(o, "%c.%d", x->slot % 2 ? 'b' : 'a', x->slot / 2); return;
    case IR_LOAD:
        print_buf_name(o, p, x->slot);
        if (x->nargs) {
            util_buf_puts(o, "[");
            for (int i = 0; i < x->nargs; i++) {
                if (i) util_buf_puts(o, ", ");
                ir_print(o, p, x->args[i]);
            }
            util_buf_puts(o, "]");
        }
        return;
    case IR_CAST:
        util_buf_printf(o, "%s(", plan_ct_name(x->type));
        ir_print(o, p, x->args[0]);
        util_buf_puts(o, ")");
        return;
    case IR_OP:
        if (x->nargs == 2 && !(x->op >= OP_MIN && x->op <= OP_ATAN2)) {
            util_buf_puts(o, "(");
            ir_print(o, p, x->args[0]);
            util_buf_printf(o, " %s ", plan_op_name(x->op));
            ir_print(o, p, x->args[1]);
            util_buf_puts(o, ")");
        } else {
            util_buf_printf(o, "%s(", plan_op_name(x->op));
            for (int i = 0; i < x->nargs; i++) {
                if (i) util_buf_puts(o, ", ");
                ir_print(o, p, x->args[i]);
            }
            util_buf_puts(o, ")");
        }
        return;
    }
}

static void print_var(util_buf *o, const plan *p, int v)
{
    const plan_var *pv = &p->vars[v];
    util_buf_puts(o, pv->name);
    if (pv->lo) {
        util_buf_puts(o, " in ");
        ir_print(o, p, pv->lo);
        util_buf_puts(o, "..");
        ir_print(o, p, pv->hi);
    } else if (pv->key_pass >= 0) {
        util_buf_printf(o, " in 0..(number of keys of pass %d)", pv->key_pass);
    } else if (pv->nconstraints) {
        util_buf_puts(o, " in 0..min(");
        for (int i = 0; i < pv->nconstraints; i++) {
            const plan_constraint *c = &pv->constraints[i];
            util_buf_printf(o, "%s%s.shape[%d]", i ? ", " : "", p->bufs[c->buf].name, c->dim);
            if (c->offset) util_buf_printf(o, "-%lld", (long long)c->offset);
        }
        util_buf_puts(o, ")");
    }
}

void plan_explain(util_buf *o, const plan *p)
{
    util_buf_printf(o, "plan: %d pass%s", p->npasses, p->npasses == 1 ? "" : "es");
    for (int i = 0, n = 0; i < p->npasses; i++)
        if (p->passes[i].epilogue) util_buf_printf(o, "%s pass %d runs in pass %d", n++ ? "," : ";", i, i - 1);
    util_buf_puts(o, "\n");
    for (int i = 0; i < p->npasses; i++) {
        const plan_pass *ps = &p->passes[i];
        util_buf_printf(o, "pass %d: %s", i,
                        ps->nreds == 0 ? "map"
                        : ps->scan ? (ps->nfree ? "partial scan" : "scan")
                        : ps->key ? "keyed reduction"
                        : ps->nfree ? "partial reduction" : "full reduction");
        if (ps->epilogue)
            util_buf_printf(o, ", the epilogue of pass %d (each output's part right after its reduction)", i - 1);
        util_buf_puts(o, "\n");
        util_buf_puts(o, "  free:    ");
        if (!ps->nfree) util_buf_puts(o, "(none: one output)");
        for (int k = 0; k < ps->nfree; k++) {
            if (k) util_buf_puts(o, ", ");
            print_var(o, p, ps->free[k]);
        }
        util_buf_puts(o, "\n");
        if (ps->nreds) {
            util_buf_puts(o, ps->scan ? "  scanned: " : "  reduced: ");
            if (!ps->nred) util_buf_puts(o, "(none: one element)");
            for (int k = 0; k < ps->nred; k++) {
                if (k) util_buf_puts(o, ", ");
                print_var(o, p, ps->red[k]);
            }
            util_buf_puts(o, "\n");
        }
        if (ps->key) {
            util_buf_puts(o, "  by key:  ");
            ir_print(o, p, ps->key);
            util_buf_puts(o, "\n");
        }
        if (ps->reset) {
            util_buf_puts(o, "  restarts where this changes: ");
            ir_print(o, p, ps->reset);
            util_buf_puts(o, "\n");
        }
        if (!ps->nreds) {
            util_buf_printf(o, "  t%d = ", ps->map_temp);
            ir_print(o, p, ps->map);
            util_buf_puts(o, "\n");
        }
        for (int r = 0; r < ps->nreds; r++) {
            const plan_red *rd = &ps->reds[r];
            util_buf_puts(o, "  ");
            for (int c = 0; c < rd->ncomp; c++)
                util_buf_printf(o, "%st%d", c ? ", " : "", rd->temp[c]);
            const char *verb = !ps->scan ? "reduce" : ps->scan == 2 ? "exscan" : "scan";
            if (rd->rop == ROP_USER)
                util_buf_printf(o, " = %s(%s%s, identity (", verb, rd->ordered ? "ordered " : "", rd->uname);
            else
                util_buf_printf(o, " = %s(%s, identity ", verb, plan_red_name(rd));
            for (int c = 0; c < rd->ncomp; c++) {
                if (c) util_buf_puts(o, ", ");
                plan_value id = rd->rop == ROP_USER ? rd->identity[c] : plan_identity(rd->rop, rd->acc[c]);
                print_value(o, rd->acc[c], id);
            }
            util_buf_printf(o, "%s) of ", rd->rop == ROP_USER ? ")" : "");
            for (int c = 0; c < rd->ncomp; c++) {
                if (c) util_buf_puts(o, ", ");
                ir_print(o, p, rd->map[c]);
            }
            util_buf_printf(o, "  [%s accumulator]\n", plan_ct_name(rd->acc[0]));
        }
    }
    util_buf_puts(o, "results:\n");
    for (int i = 0; i < p->nresults; i++) {
        const plan_temp *t = &p->temps[p->results[i].temp];
        util_buf_printf(o, "  %d%s%s: t%d %s[", i, *p->results[i].name ? " " : "",
                        p->results[i].name, p->results[i].temp, plan_ct_name(t->type));
        for (int d = 0; d < t->ndim; d++)
            util_buf_printf(o, "%s%s", d ? ", " : "", p->vars[t->dims[d]].name);
        util_buf_puts(o, "]\n");
    }
    if (o->len >= PLAN_PRINT_MAX)
        util_buf_printf(o, "(expressions printed in part: the plan's text reached %zu bytes)\n",
                        PLAN_PRINT_MAX);
}
