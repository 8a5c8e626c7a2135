/*
 * parse.c -- the parser driver (tokens from the lexer into the lemon parser),
 * the tree builders the grammar's actions call, and ast_print, which writes
 * a tree back as fully parenthesised text.
 */
#include "parse.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

/* Depth is bounded by AST_MAX_DEPTH and brackets by the lexer; the caller's
 * ast_limits bound the breadth, so that a few megabytes of `x,x,x,...` cannot
 * make the arena grow by gigabytes (a node is ~100 bytes). */
#define PARSE_MAX_FIELD 65535              /* `t.N`: a tuple field number */

/* ---- Errors ----------------------------------------------------------------- */

static util_pos span_of(util_pos from, util_pos to)
{
    util_pos p = {from.off, to.off + to.len - from.off};
    return p;
}

void parse_error(parse_ctx *ctx, util_pos pos, int code, const char *fmt, ...)
{
    if (ctx->status) return;
    va_list ap;
    va_start(ap, fmt);
    util_diag_vat(ctx->diag, ctx->src, pos, code, fmt, ap);
    va_end(ap);
    ctx->status = code;
}

static void parse_nomem(parse_ctx *ctx)
{
    if (ctx->status) return;
    util_diag_set(ctx->diag, RED_ERR_NOMEM, "out of memory while parsing the expression");
    ctx->status = RED_ERR_NOMEM;
}

/* Whether only blank lines and comments follow the current token: then a
 * newline that the grammar did not expect is really the end of the input
 * ("a +\n" is as incomplete as "a +"). */
static int parse_rest_is_blank(const parse_ctx *ctx)
{
    util_diag scratch;
    lex_state peek = ctx->lex;
    lex_token t;
    int type;
    peek.diag = &scratch;
    while ((type = lex_next(&peek, &t)) == TK_SEMI && t.newline) {}
    return type == 0;
}

static int is_word(const parse_ctx *ctx, const lex_token *t, const char *w)
{
    size_t n = strlen(w);
    return t->type == TK_NAME && (size_t)t->pos.len == n && memcmp(ctx->src + t->pos.off, w, n) == 0;
}

/* The token after the one being fed (0 when there is none or it is bad). */
static int peek_next(const parse_ctx *ctx, lex_token *t)
{
    util_diag scratch;
    lex_state peek = ctx->lex;
    peek.diag = &scratch;
    int type = lex_next(&peek, t);
    return type > 0 ? type : 0;
}

/* Python and NumPy spellings that the language does not have, each reported
 * with what to write instead.  Returns 1 when t is one of them. */
static int syntax_hint(parse_ctx *ctx, const lex_token *t)
{
    static const struct {
        const char *word, *hint;
    } words[] = {
        {"and", "logical and is written '&&'"},
        {"or", "logical or is written '||'"},
        {"not", "logical not is written '!'"},
        {"if", "a conditional is written c ? a : b"},
    };
    const lex_token *p = &ctx->prev;
    int inner = ctx->nopen > 0 ? ctx->open[ctx->nopen - 1] : 0;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        /* `x and y` fails at the `and`, `not x` at the x after it */
        const lex_token *w = is_word(ctx, t, words[i].word) ? t
                             : is_word(ctx, p, words[i].word) ? p : NULL;
        if (!w) continue;
        parse_error(ctx, w->pos, RED_ERR_SYNTAX, "'%s' is not an operator: %s", words[i].word,
                    words[i].hint);
        return 1;
    }
    if (t->type == TK_ASSIGN && p->type == TK_NAME && inner == '(') {
        util_pos at = span_of(p->pos, t->pos);
        if (is_word(ctx, p, "axis")) {
            lex_token v;
            int axis = peek_next(ctx, &v) == TK_INT && v.v.ival <= 1 ? (int)v.v.ival : 1;
            parse_error(ctx, at, RED_ERR_SYNTAX,
                        "'axis=' is not part of the language: subscript the array and name the "
                        "index to reduce with 'over', e.g. sum(A[i,j]) over %s for NumPy's "
                        "axis=%d (%s sums)", axis ? "j" : "i", axis, axis ? "row" : "column");
        } else if (is_word(ctx, p, "dtype")) {
            parse_error(ctx, at, RED_ERR_SYNTAX,
                        "'dtype=' is not part of the language: cast the operand instead, "
                        "e.g. sum(f64(x))");
        } else {
            parse_error(ctx, at, RED_ERR_SYNTAX,
                        "keyword arguments such as '%.*s=' are not part of the language: "
                        "arguments are given by position", p->pos.len, ctx->src + p->pos.off);
        }
        return 1;
    }
    if (t->type == TK_COLON && inner == '[') {
        parse_error(ctx, t->pos, RED_ERR_SYNTAX,
                    "slices are not part of the language: write an index variable where NumPy "
                    "has ':', e.g. A[i, 0] for column 0 (one result per i), and "
                    "'over i in lo..hi' for part of a range");
        return 1;
    }
    return 0;
}

void parse_syntax_error(parse_ctx *ctx, const lex_token *t)
{
    if (ctx->status) return; /* the tree was already given up: keep that error */
    if (t->type == 0 || (t->type == TK_SEMI && t->newline && parse_rest_is_blank(ctx))) {
        util_pos end = {ctx->last_end, 0};
        parse_error(ctx, end, RED_ERR_SYNTAX, "unexpected end of input");
        ctx->incomplete = 1;
        return;
    }
    if (t->type == TK_SEMI && t->newline) {
        parse_error(ctx, t->pos, RED_ERR_SYNTAX,
                    "unexpected newline (outside brackets a newline ends the statement)");
        return;
    }
    if (syntax_hint(ctx, t)) return;
    /* Quote the token as written, cut short if it is a very long number. */
    const char *text = ctx->src + t->pos.off;
    int len = t->pos.len, shown = len > 40 ? 37 : len;
    const char *more = len > shown ? "..." : "";
    const char *what = "";
    if (t->type == TK_NAME)
        what = "name ";
    else if ((t->type == TK_INT || t->type == TK_FLOAT) && text[0] >= '0' && text[0] <= '9')
        what = "number ";
    parse_error(ctx, t->pos, RED_ERR_SYNTAX, "unexpected %s'%.*s%s'", what, shown, text, more);
}

/* The stack fills only on input nested deeper than AST_MAX_DEPTH levels
 * (grammar.y, %stack_size), before the tree that would show it is built:
 * the same limit is named. */
void parse_stack_overflow(parse_ctx *ctx, int depth)
{
    (void)depth;
    parse_error(ctx, ctx->tok.pos, RED_ERR_LIMIT, "expression nested too deeply: the limit is %d levels",
                AST_MAX_DEPTH);
}

/* ---- Nodes ------------------------------------------------------------------ */

static parse_ex ex_of(ast_node *n)
{
    parse_ex e = {n, n->pos};
    return e;
}

/* After any error the tree is thrown away: every builder returns at once,
 * handing out the context's (never written) scratch node, so that what the
 * actions pass around is never NULL. */
static parse_ex failed(parse_ctx *ctx)
{
    parse_ex e = {&ctx->dummy, {0, 0}};
    return e;
}

/* A zeroed node in the arena; NULL (with the error recorded) when over the
 * node limit or out of memory. */
static ast_node *new_node(parse_ctx *ctx, ast_kind kind, util_pos pos)
{
    if (++ctx->nnodes > ctx->max_nodes) {
        parse_error(ctx, pos, RED_ERR_LIMIT,
                    "expression has more than %ld syntax-tree nodes: the limit is %ld (RED_OPT_MAX_NODES)",
                    ctx->max_nodes, ctx->max_nodes);
        return NULL;
    }
    ast_node *n = util_arena_alloc(ctx->arena, sizeof *n);
    if (!n) {
        parse_nomem(ctx);
        return NULL;
    }
    n->kind = kind;
    n->pos = pos;
    n->depth = 1;
    return n;
}

static const char *token_text(parse_ctx *ctx, const lex_token *t)
{
    char *s = util_arena_strndup(ctx->arena, ctx->src + t->pos.off, (size_t)t->pos.len);
    if (!s) parse_nomem(ctx);
    return s ? s : "";
}

/* depth = 1 + the deepest child.  Every later pass over the tree recurses,
 * so this is what keeps them off the C stack's limit.  The left operand of a
 * binary operator that is itself one is the same level: x+x+...+x is a
 * chain, which every pass walks in a loop, not nesting (ast.h). */
static void set_depth(parse_ctx *ctx, ast_node *n, util_pos at)
{
    int d = 0;
    for (int i = 0; i < n->nargs; i++) {
        int di = n->args[i]->depth;
        if (n->kind == AST_BINARY && i == 0 && n->args[0]->kind == AST_BINARY) di--;
        if (di > d) d = di;
    }
    for (int i = 0; i < n->nover; i++) {
        if (n->over[i].lo && n->over[i].lo->depth > d) d = n->over[i].lo->depth;
        if (n->over[i].hi && n->over[i].hi->depth > d) d = n->over[i].hi->depth;
    }
    if (n->by && n->by->depth > d) d = n->by->depth;
    n->depth = d + 1;
    if (n->depth > AST_MAX_DEPTH)
        parse_error(ctx, at, RED_ERR_LIMIT, "expression nested too deeply: the limit is %d levels",
                    AST_MAX_DEPTH);
}

static int set_args(parse_ctx *ctx, ast_node *n, int nargs)
{
    n->args = util_arena_alloc(ctx->arena, (size_t)nargs * sizeof *n->args);
    if (!n->args) {
        parse_nomem(ctx);
        return 0;
    }
    n->nargs = nargs;
    return 1;
}

static void args_from_list(parse_ctx *ctx, ast_node *n, const parse_exlist *l)
{
    if (!l || l->n == 0 || !set_args(ctx, n, l->n)) return;
    int i = 0;
    for (const parse_cell *c = l->head; c; c = c->next) n->args[i++] = c->node;
}

parse_ex parse_int(parse_ctx *ctx, const lex_token *t)
{
    if (ctx->status) return failed(ctx);
    ast_node *n = new_node(ctx, AST_INT, t->pos);
    if (!n) return failed(ctx);
    n->u.ival = t->v.ival;
    return ex_of(n);
}

parse_ex parse_float(parse_ctx *ctx, const lex_token *t)
{
    if (ctx->status) return failed(ctx);
    ast_node *n = new_node(ctx, AST_FLOAT, t->pos);
    if (!n) return failed(ctx);
    n->u.fval = t->v.fval;
    return ex_of(n);
}

parse_ex parse_bool(parse_ctx *ctx, const lex_token *t, int value)
{
    if (ctx->status) return failed(ctx);
    ast_node *n = new_node(ctx, AST_BOOL, t->pos);
    if (!n) return failed(ctx);
    n->u.ival = (uint64_t)value;
    return ex_of(n);
}

parse_ex parse_name(parse_ctx *ctx, const lex_token *t)
{
    if (ctx->status) return failed(ctx);
    ast_node *n = new_node(ctx, AST_NAME, t->pos);
    if (!n) return failed(ctx);
    n->name = token_text(ctx, t);
    n->name_pos = t->pos;
    return ex_of(n);
}

parse_ex parse_range_sub(parse_ctx *ctx, const lex_token *name, const parse_ex *lo, const parse_ex *hi)
{
    if (ctx->status) return failed(ctx);
    ast_node *n = new_node(ctx, AST_RANGE, span_of(name->pos, hi->span));
    if (!n) return failed(ctx);
    n->name = token_text(ctx, name);
    n->name_pos = name->pos;
    if (set_args(ctx, n, 2)) {
        n->args[0] = lo->node;
        n->args[1] = hi->node;
    }
    set_depth(ctx, n, name->pos);
    return ex_of(n);
}

parse_ex parse_unary(parse_ctx *ctx, const lex_token *op, const parse_ex *x)
{
    if (ctx->status) return failed(ctx);
    ast_node *n = new_node(ctx, AST_UNARY, span_of(op->pos, x->span));
    if (!n) return failed(ctx);
    n->op = ctx->src[op->pos.off];
    if (set_args(ctx, n, 1)) n->args[0] = x->node;
    set_depth(ctx, n, op->pos);
    return ex_of(n);
}

parse_ex parse_binary(parse_ctx *ctx, const parse_ex *a, int op, const lex_token *optok,
                      const parse_ex *b)
{
    if (ctx->status) return failed(ctx);
    ast_node *n = new_node(ctx, AST_BINARY, span_of(a->span, b->span));
    if (!n) return failed(ctx);
    n->op = op;
    n->name_pos = optok->pos;
    if (set_args(ctx, n, 2)) {
        n->args[0] = a->node;
        n->args[1] = b->node;
    }
    set_depth(ctx, n, optok->pos);
    return ex_of(n);
}

parse_ex parse_cond(parse_ctx *ctx, const parse_ex *c, const lex_token *q, const parse_ex *a,
                    const parse_ex *b)
{
    if (ctx->status) return failed(ctx);
    ast_node *n = new_node(ctx, AST_COND, span_of(c->span, b->span));
    if (!n) return failed(ctx);
    if (set_args(ctx, n, 3)) {
        n->args[0] = c->node;
        n->args[1] = a->node;
        n->args[2] = b->node;
    }
    set_depth(ctx, n, q->pos);
    return ex_of(n);
}

parse_ex parse_index(parse_ctx *ctx, const parse_ex *base, const lex_token *lb,
                     const parse_exlist *subs, const lex_token *rb)
{
    if (ctx->status) return failed(ctx);
    /* The grammar lets any postfix expression take subscripts, so that the
     * mistake gets a message that says what is wrong instead of
     * "unexpected '['"; the tree only has room for name[...]. */
    if (base->node->kind != AST_NAME) {
        parse_error(ctx, lb->pos, RED_ERR_SYNTAX, "only an array name can be subscripted%s",
                    base->node->kind == AST_INDEX ? ": write a[i, j], not a[i][j]" : "");
        return failed(ctx);
    }
    ast_node *n = new_node(ctx, AST_INDEX, span_of(base->span, rb->pos));
    if (!n) return failed(ctx);
    n->name = base->node->name;
    n->name_pos = base->node->name_pos;
    args_from_list(ctx, n, subs);
    set_depth(ctx, n, lb->pos);
    return ex_of(n);
}

parse_ex parse_field(parse_ctx *ctx, const parse_ex *base, const lex_token *dot,
                     const lex_token *num)
{
    if (ctx->status) return failed(ctx);
    if (num->v.ival > PARSE_MAX_FIELD) {
        parse_error(ctx, num->pos, RED_ERR_SYNTAX, "tuple field number too large (at most %d)",
                    PARSE_MAX_FIELD);
        return failed(ctx);
    }
    ast_node *n = new_node(ctx, AST_FIELD, span_of(base->span, num->pos));
    if (!n) return failed(ctx);
    n->field = (int)num->v.ival;
    if (set_args(ctx, n, 1)) n->args[0] = base->node;
    set_depth(ctx, n, dot->pos);
    return ex_of(n);
}

parse_ex parse_method(parse_ctx *ctx, const parse_ex *base, const lex_token *dot,
                      const lex_token *name)
{
    if (ctx->status) return failed(ctx);
    util_pos at = span_of(dot->pos, name->pos);
    /* the receiver as written, less any parentheses around it: it is quoted
     * as an argument */
    const char *nm = ctx->src + name->pos.off, *bt = ctx->src + base->node->pos.off;
    int nl = name->pos.len, bl = base->node->pos.len;
    /* Whether a '(' follows the name: lemon may reduce this rule as the name
     * is shifted or only with the next token, so look from the name on. */
    util_diag scratch;
    lex_state peek;
    lex_token t;
    lex_init(&peek, ctx->src, &scratch);
    peek.cur = nm + nl;
    peek.depth = ctx->nopen;   /* a newline is blank inside brackets only */
    int call = lex_next(&peek, &t) == TK_LP;
    const ast_node *b = base->node;
    if (b->kind == AST_NAME && base->span.len == (int)strlen(b->name) &&
        (strcmp(b->name, "np") == 0 || strcmp(b->name, "numpy") == 0)) {
        parse_error(ctx, span_of(base->span, dot->pos), RED_ERR_SYNTAX,
                    "drop the '%s.' prefix: functions are called by their own names, e.g. "
                    "%.*s(x)", b->name, nl, nm);
    } else if (!call) {
        parse_error(ctx, at, RED_ERR_SYNTAX,
                    "'.%.*s' is not a field: tuple fields are selected by number (t.0, t.1, ...)",
                    nl, nm);
    } else if (nl == 6 && memcmp(nm, "astype", 6) == 0) {
        parse_error(ctx, at, RED_ERR_SYNTAX,
                    "methods are not part of the language: cast with the type's name, e.g. "
                    "f64(%.*s)", bl > 40 ? 3 : bl, bl > 40 ? "..." : bt);
    } else {
        const char *st = ctx->src + base->span.off;
        int sl = base->span.len;
        parse_error(ctx, at, RED_ERR_SYNTAX,
                    "methods are not part of the language: write %.*s(%.*s), not %.*s.%.*s()", nl,
                    nm, bl > 40 ? 3 : bl, bl > 40 ? "..." : bt, sl > 40 ? 3 : sl,
                    sl > 40 ? "..." : st, nl, nm);
    }
    return failed(ctx);
}

parse_ex parse_paren(parse_ctx *ctx, const lex_token *lp, const parse_exlist *l,
                     const lex_token *rp)
{
    if (ctx->status) return failed(ctx);
    util_pos span = span_of(lp->pos, rp->pos);
    if (l->n == 1) {
        parse_ex e = {l->head->node, span};
        return e;
    }
    ast_node *n = new_node(ctx, AST_TUPLE, span);
    if (!n) return failed(ctx);
    args_from_list(ctx, n, l);
    set_depth(ctx, n, lp->pos);
    return ex_of(n);
}

parse_ex parse_call(parse_ctx *ctx, const lex_token *name, const parse_exlist *args,
                    const lex_token *rp)
{
    if (ctx->status) return failed(ctx);
    ast_node *n = new_node(ctx, AST_CALL, span_of(name->pos, rp->pos));
    if (!n) return failed(ctx);
    n->name = token_text(ctx, name);
    n->name_pos = name->pos;
    args_from_list(ctx, n, args);
    set_depth(ctx, n, name->pos);
    return ex_of(n);
}

parse_ex parse_reduce(parse_ctx *ctx, const lex_token *kw, const lex_token *op,
                      const parse_ex *x, const lex_token *rp)
{
    if (ctx->status) return failed(ctx);
    ast_node *n = new_node(ctx, AST_REDUCE, span_of(kw->pos, rp->pos));
    if (!n) return failed(ctx);
    n->name = token_text(ctx, op);
    n->name_pos = op->pos;
    /* the keyword: reduce, scan or exscan (the lexer gives all three one token) */
    const char *k = ctx->src + kw->pos.off;
    n->op = k[0] == 's' ? AST_SCAN : k[0] == 'e' ? AST_EXSCAN : 0;
    if (set_args(ctx, n, 1)) n->args[0] = x->node;
    set_depth(ctx, n, kw->pos);
    return ex_of(n);
}

parse_ex parse_clauses(parse_ctx *ctx, const parse_ex *call, const parse_overlist *over,
                       const parse_ex *by)
{
    if (ctx->status) return failed(ctx);
    ast_node *n = call->node;
    if (!over && !by) return *call;
    int32_t end = n->pos.off + n->pos.len;
    if (over && over->n > 0) {
        n->over = util_arena_alloc(ctx->arena, (size_t)over->n * sizeof *n->over);
        if (!n->over) {
            parse_nomem(ctx);
            return failed(ctx);
        }
        n->has_over = 1;
        n->nover = over->n;
        int i = 0;
        for (const parse_idx *x = over->head; x; x = x->next) n->over[i++] = x->over;
        end = over->end;
    }
    if (by) {
        n->by = by->node;
        end = by->span.off + by->span.len;
    }
    n->pos.len = end - n->pos.off;
    set_depth(ctx, n, n->name_pos);
    return ex_of(n);
}

parse_idx *parse_over_idx(parse_ctx *ctx, const lex_token *name, const parse_ex *lo,
                          const parse_ex *hi)
{
    if (ctx->status) return NULL;
    parse_idx *x = util_arena_alloc(ctx->arena, sizeof *x);
    if (!x) {
        parse_nomem(ctx);
        return NULL;
    }
    x->over.name = token_text(ctx, name);
    x->over.pos = name->pos;
    x->end = name->pos.off + name->pos.len;
    if (lo && hi) {
        x->over.lo = lo->node;
        x->over.hi = hi->node;
        x->end = hi->span.off + hi->span.len;
    }
    return x;
}

/* ---- Lists ------------------------------------------------------------------ */

void parse_list_init(parse_ctx *ctx, parse_exlist *l, const parse_ex *x)
{
    memset(l, 0, sizeof *l);
    if (ctx->status) return;
    parse_cell *c = util_arena_alloc(ctx->arena, sizeof *c);
    if (!c) {
        parse_nomem(ctx);
        return;
    }
    c->node = x->node;
    l->head = l->tail = c;
    l->n = 1;
    l->span = x->span;
}

void parse_list_add(parse_ctx *ctx, parse_exlist *l, const parse_ex *x)
{
    if (ctx->status || !l->tail) return;
    parse_cell *c = util_arena_alloc(ctx->arena, sizeof *c);
    if (!c) {
        parse_nomem(ctx);
        return;
    }
    c->node = x->node;
    l->tail->next = c;
    l->tail = c;
    l->n++;
    l->span = span_of(l->span, x->span);
}

void parse_over_init(parse_overlist *l, parse_idx *i)
{
    memset(l, 0, sizeof *l);
    if (!i) return;
    l->head = l->tail = i;
    l->n = 1;
    l->end = i->end;
}

void parse_over_add(parse_overlist *l, parse_idx *i)
{
    if (!i || !l->tail) return;
    l->tail->next = i;
    l->tail = i;
    l->n++;
    l->end = i->end;
}

/* ---- Statements ------------------------------------------------------------- */

static ast_stmt *new_stmt(parse_ctx *ctx, ast_stmt_kind kind, util_pos pos)
{
    if (ctx->nstmts == ctx->capstmts) {
        /* Doubling in the arena: the old array stays behind, at most as much
         * again as the final one. */
        int cap = ctx->capstmts ? 2 * ctx->capstmts : 8;
        ast_stmt *s = util_arena_alloc(ctx->arena, (size_t)cap * sizeof *s);
        if (!s) {
            parse_nomem(ctx);
            return NULL;
        }
        if (ctx->nstmts) memcpy(s, ctx->stmts, (size_t)ctx->nstmts * sizeof *s);
        ctx->stmts = s;
        ctx->capstmts = cap;
    }
    ast_stmt *s = &ctx->stmts[ctx->nstmts++];
    s->kind = kind;
    s->pos = pos;
    return s;
}

static int set_exprs(parse_ctx *ctx, ast_stmt *s, int n)
{
    s->exprs = util_arena_alloc(ctx->arena, (size_t)n * sizeof *s->exprs);
    if (!s->exprs) {
        parse_nomem(ctx);
        return 0;
    }
    s->nexprs = n;
    return 1;
}

void parse_stmt_exprs(parse_ctx *ctx, const parse_exlist *l)
{
    if (ctx->status) return;
    ast_stmt *s = new_stmt(ctx, STMT_EXPR, l->span);
    if (!s || !set_exprs(ctx, s, l->n)) return;
    int i = 0;
    for (const parse_cell *c = l->head; c; c = c->next) s->exprs[i++] = c->node;
}

void parse_stmt_assign(parse_ctx *ctx, const parse_ex *lhs, const parse_ex *rhs)
{
    if (ctx->status) return;
    const ast_node *l = lhs->node;
    int ok = l->kind == AST_NAME || l->kind == AST_INDEX;
    util_pos bad = lhs->span;
    int ranged = 0;
    for (int i = 0; ok && l->kind == AST_INDEX && i < l->nargs; i++) {
        if (l->args[i]->kind != AST_NAME && l->args[i]->kind != AST_RANGE) {
            ok = 0;
            bad = l->args[i]->pos;
        }
        ranged |= l->args[i]->kind == AST_RANGE;
    }
    if (!ok) {
        parse_error(ctx, bad, RED_ERR_SYNTAX,
                    "left side of '=' must be a name or name[i, j, ...] (an index may take a range: x in lo..hi)");
        return;
    }
    ast_stmt *s = new_stmt(ctx, l->kind == AST_NAME ? STMT_LET : STMT_ASSIGN,
                           span_of(lhs->span, rhs->span));
    if (!s || !set_exprs(ctx, s, 1)) return;
    s->name = l->name;
    s->name_pos = l->name_pos;
    s->exprs[0] = rhs->node;
    if (l->kind == AST_INDEX) {
        s->idx = util_arena_alloc(ctx->arena, (size_t)l->nargs * sizeof *s->idx);
        s->idx_pos = util_arena_alloc(ctx->arena, (size_t)l->nargs * sizeof *s->idx_pos);
        if (!s->idx || !s->idx_pos) {
            parse_nomem(ctx);
            return;
        }
        s->nidx = l->nargs;
        if (ranged) {
            s->idx_lo = util_arena_alloc(ctx->arena, (size_t)l->nargs * sizeof *s->idx_lo);
            s->idx_hi = util_arena_alloc(ctx->arena, (size_t)l->nargs * sizeof *s->idx_hi);
            if (!s->idx_lo || !s->idx_hi) {
                parse_nomem(ctx);
                return;
            }
        }
        for (int i = 0; i < l->nargs; i++) {
            const ast_node *a = l->args[i];
            s->idx[i] = a->name;
            s->idx_pos[i] = a->kind == AST_RANGE ? a->name_pos : a->pos;
            if (ranged) {
                s->idx_lo[i] = a->kind == AST_RANGE ? a->args[0] : NULL;
                s->idx_hi[i] = a->kind == AST_RANGE ? a->args[1] : NULL;
            }
        }
    }
}

void parse_stmt_op(parse_ctx *ctx, const lex_token *kw, const lex_token *name,
                   const lex_token *a, const lex_token *b, const parse_ex *combine,
                   const parse_ex *identity)
{
    if (ctx->status) return;
    ast_stmt *s = new_stmt(ctx, STMT_OP, span_of(kw->pos, identity->span));
    if (!s || !set_exprs(ctx, s, 2)) return;
    s->ordered = kw->v.ival != 0;
    s->name = token_text(ctx, name);
    s->name_pos = name->pos;
    s->param[0] = token_text(ctx, a);
    s->param_pos[0] = a->pos;
    s->param[1] = token_text(ctx, b);
    s->param_pos[1] = b->pos;
    s->exprs[0] = combine->node;
    s->exprs[1] = identity->node;
}

/* ---- The driver ------------------------------------------------------------- */

/* Whether the comma just read is followed by a name that does not start a
 * call or a subscript: the one comma that can continue an `over` list
 * (grammar.y, ICOMMA).  A name followed by '(' or '[' cannot be an index, so
 * there the comma ends the list and starts another expression. */
static int comma_before_index(const parse_ctx *ctx)
{
    util_diag scratch;
    lex_state peek = ctx->lex;
    lex_token t;
    peek.diag = &scratch;
    if (lex_next(&peek, &t) != TK_NAME) return 0;
    int next = lex_next(&peek, &t);
    return next != TK_LP && next != TK_LB;
}

int ast_parse(util_arena *arena, const char *src, ast_program **out, util_diag *diag,
              int *incomplete)
{
    return ast_parse_limited(arena, src, NULL, out, diag, incomplete);
}

int ast_parse_limited(util_arena *arena, const char *src, const ast_limits *lim, ast_program **out,
                      util_diag *diag, int *incomplete)
{
    ast_limits ceil = {AST_MAX_TEXT, AST_MAX_NODES};
    if (!lim) lim = &ceil;
    util_diag scratch;
    if (!diag) diag = &scratch;
    if (out) *out = NULL;
    if (incomplete) *incomplete = 0;
    if (!arena || !src || !out)
        return util_diag_set(diag, RED_ERR_ARG, "ast_parse: NULL argument");

    size_t len = strlen(src);
    if (len > (size_t)lim->max_text)
        return util_diag_set(diag, RED_ERR_LIMIT,
                             "expression text is %zu bytes: the limit is %ld (RED_OPT_MAX_TEXT)", len,
                             lim->max_text);
    ast_program *prog = util_arena_alloc(arena, sizeof *prog);
    char *text = util_arena_strndup(arena, src, len);
    if (!prog || !text)
        return util_diag_set(diag, RED_ERR_NOMEM, "out of memory while parsing the expression");
    prog->src = text;

    parse_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.arena = arena;
    ctx.src = text;
    ctx.diag = diag;
    ctx.max_nodes = lim->max_nodes;
    lex_init(&ctx.lex, text, diag);

    void *lp = ast_lemonAlloc(malloc, &ctx);
    if (!lp) return util_diag_set(diag, RED_ERR_NOMEM, "out of memory while parsing the expression");
    for (;;) {
        lex_token t;
        int type = lex_next(&ctx.lex, &t);
        if (type < 0) {
            ctx.status = diag->code;
            break;
        }
        if (type == TK_COMMA && comma_before_index(&ctx)) type = t.type = TK_ICOMMA;
        ctx.tok = t;
        ast_lemon(lp, type, t);
        if (ctx.status || type == 0) break;
        ctx.prev = t;
        if ((type == TK_LP || type == TK_LB) && ctx.nopen < LEX_MAX_BRACKETS)
            ctx.open[ctx.nopen++] = type == TK_LP ? '(' : '[';
        else if ((type == TK_RP || type == TK_RB) && ctx.nopen > 0)
            ctx.nopen--;
        if (!(type == TK_SEMI && t.newline)) ctx.last_end = t.pos.off + t.pos.len;
    }
    ast_lemonFree(lp, free);

    if (!ctx.status && ctx.nstmts == 0) {
        util_pos start = {0, 0};
        parse_error(&ctx, start, RED_ERR_SYNTAX, "empty expression");
    }
    if (ctx.status) {
        if (incomplete) *incomplete = ctx.incomplete;
        return ctx.status;
    }
    prog->nstmts = ctx.nstmts;
    prog->stmts = ctx.stmts;
    prog->nnodes = ctx.nnodes;
    *out = prog;
    return RED_OK;
}

/* ---- Printing --------------------------------------------------------------- */

static const char *binop_text(int op)
{
    switch (op) {
    case BOP_ADD: return "+";
    case BOP_SUB: return "-";
    case BOP_MUL: return "*";
    case BOP_DIV: return "/";
    case BOP_MOD: return "%";
    case BOP_BAND: return "&";
    case BOP_BOR: return "|";
    case BOP_BXOR: return "^";
    case BOP_SHL: return "<<";
    case BOP_SHR: return ">>";
    case BOP_LT: return "<";
    case BOP_LE: return "<=";
    case BOP_GT: return ">";
    case BOP_GE: return ">=";
    case BOP_EQ: return "==";
    case BOP_NE: return "!=";
    case BOP_LAND: return "&&";
    case BOP_LOR: return "||";
    case BOP_POW: return "**";
    }
    return "?";
}

static void print_node(util_buf *b, const ast_node *n);

/* A call's `over` / `by` clause runs as far right as it can, so a call that
 * has one is wrapped in parentheses unless a closing bracket (or the end)
 * follows it; everything else prints its own parentheses already. */
static void print_sub(util_buf *b, const ast_node *n, int more_follows)
{
    int wrap = more_follows && (n->kind == AST_CALL || n->kind == AST_REDUCE) &&
               (n->has_over || n->by);
    if (wrap) util_buf_puts(b, "(");
    print_node(b, n);
    if (wrap) util_buf_puts(b, ")");
}

static void print_list(util_buf *b, ast_node *const *args, int n)
{
    for (int i = 0; i < n; i++) {
        if (i) util_buf_puts(b, ", ");
        print_sub(b, args[i], i + 1 < n);
    }
}

/* %.17g reads back as the same double; a ".0" keeps an integral value a
 * decimal literal when the text is parsed again. */
static void print_float(util_buf *b, double v)
{
    if (isnan(v)) {
        util_buf_puts(b, "nan");
        return;
    }
    if (isinf(v)) {
        util_buf_puts(b, v < 0 ? "(-inf)" : "inf");
        return;
    }
    char s[40];
    snprintf(s, sizeof s, "%.17g", v);
    util_buf_puts(b, s);
    if (!strpbrk(s, ".e")) util_buf_puts(b, ".0");
}

static void print_clauses(util_buf *b, const ast_node *n)
{
    if (n->has_over) {
        util_buf_puts(b, " over ");
        for (int i = 0; i < n->nover; i++) {
            const ast_over *o = &n->over[i];
            if (i) util_buf_puts(b, ", ");
            util_buf_puts(b, o->name);
            if (o->lo) {
                util_buf_puts(b, " in ");
                print_sub(b, o->lo, 1);
                util_buf_puts(b, "..");
                print_sub(b, o->hi, i + 1 < n->nover || n->by);
            }
        }
    }
    if (n->by) {
        util_buf_puts(b, " by ");
        print_sub(b, n->by, 0);
    }
}

/* ((a op b) op c) ..., a chain of binary operators down their left operands,
 * in a loop: a chain may be far longer than the nesting the C stack holds. */
static void print_chain(util_buf *b, const ast_node *n)
{
    int len = 0;
    for (const ast_node *m = n; m->kind == AST_BINARY; m = m->args[0]) len++;
    const ast_node **spine = malloc((size_t)len * sizeof *spine);
    if (!spine) {
        b->failed = 1;
        return;
    }
    const ast_node *m = n;
    for (int k = 0; k < len; k++, m = m->args[0]) {
        spine[k] = m;
        util_buf_puts(b, "(");
    }
    print_sub(b, m, 1);
    for (int k = len - 1; k >= 0; k--) {
        util_buf_printf(b, " %s ", binop_text(spine[k]->op));
        print_sub(b, spine[k]->args[1], 0);
        util_buf_puts(b, ")");
    }
    free(spine);
}

static void print_node(util_buf *b, const ast_node *n)
{
    switch (n->kind) {
    case AST_INT:
        util_buf_printf(b, "%" PRIu64, n->u.ival);
        break;
    case AST_FLOAT:
        print_float(b, n->u.fval);
        break;
    case AST_BOOL:
        util_buf_puts(b, n->u.ival ? "true" : "false");
        break;
    case AST_NAME:
        util_buf_puts(b, n->name);
        break;
    case AST_INDEX:
        util_buf_printf(b, "%s[", n->name);
        print_list(b, n->args, n->nargs);
        util_buf_puts(b, "]");
        break;
    case AST_RANGE:
        util_buf_printf(b, "%s in ", n->name);
        print_sub(b, n->args[0], 1);
        util_buf_puts(b, "..");
        print_sub(b, n->args[1], 1);
        break;
    case AST_UNARY:
        util_buf_printf(b, "(%c", n->op);
        print_sub(b, n->args[0], 0);
        util_buf_puts(b, ")");
        break;
    case AST_BINARY:
        print_chain(b, n);
        break;
    case AST_COND:
        util_buf_puts(b, "(");
        print_sub(b, n->args[0], 1);
        util_buf_puts(b, " ? ");
        print_sub(b, n->args[1], 1);
        util_buf_puts(b, " : ");
        print_sub(b, n->args[2], 0);
        util_buf_puts(b, ")");
        break;
    case AST_CALL:
        util_buf_printf(b, "%s(", n->name);
        print_list(b, n->args, n->nargs);
        util_buf_puts(b, ")");
        print_clauses(b, n);
        break;
    case AST_REDUCE:
        util_buf_printf(b, "%s(%s, ", n->op == AST_SCAN ? "scan" : n->op == AST_EXSCAN ? "exscan" : "reduce",
                        n->name);
        print_list(b, n->args, n->nargs);
        util_buf_puts(b, ")");
        print_clauses(b, n);
        break;
    case AST_TUPLE:
        util_buf_puts(b, "(");
        print_list(b, n->args, n->nargs);
        util_buf_puts(b, ")");
        break;
    case AST_FIELD: {
        /* `1.0` would read back as a decimal literal, so a literal base is
         * parenthesised. */
        const ast_node *base = n->args[0];
        int lit = base->kind == AST_INT || base->kind == AST_FLOAT || base->kind == AST_BOOL;
        if (lit) util_buf_puts(b, "(");
        print_sub(b, base, !lit);
        if (lit) util_buf_puts(b, ")");
        util_buf_printf(b, ".%d", n->field);
        break;
    }
    }
}

void ast_print(util_buf *b, const ast_node *n)
{
    if (n) print_node(b, n);
}
