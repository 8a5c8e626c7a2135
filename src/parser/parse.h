/*
 * parse.h -- private to the parser: the state the lemon actions share with
 * the driver in parse.c, the semantic values of the grammar's symbols, and
 * the tree builders the actions call.  Nothing outside src/parser uses it.
 */
#ifndef RED_PARSE_H
#define RED_PARSE_H

#include "ast.h"
#include "lexer.h"

/* An expression as the grammar sees it: the node, and the span of its text
 * including any parentheses written around it.  The node's own pos leaves
 * those parentheses out (a caret under `x` in `(x)` points at the x), but a
 * parent's pos must cover them: `(a+b)*c` starts at the '('. */
typedef struct parse_ex {
    ast_node *node;
    util_pos span;
} parse_ex;

/* Comma-separated expressions (arguments, subscripts, tuple elements,
 * results), collected in order and turned into an array by their user. */
typedef struct parse_cell parse_cell;
struct parse_cell {
    parse_cell *next;
    ast_node *node;
};
typedef struct parse_exlist {
    parse_cell *head, *tail;
    int n;
    util_pos span;
} parse_exlist;

/* The indices of an `over` clause. */
typedef struct parse_idx parse_idx;
struct parse_idx {
    parse_idx *next;
    ast_over over;
    int32_t end;            /* end of its text: the name or the upper bound */
};
typedef struct parse_overlist {
    parse_idx *head, *tail;
    int n;
    int32_t end;
} parse_overlist;

typedef struct parse_ctx {
    util_arena *arena;
    const char *src;        /* the arena's copy of the text                  */
    util_diag *diag;
    int status;             /* the first error, RED_OK while none            */
    int incomplete;         /* that error is an early end of the input       */
    lex_state lex;
    lex_token tok;          /* the token being fed, for stack overflow       */
    lex_token prev;         /* the token fed before it (type 0 at the start) */
    int nopen;              /* brackets open before tok, innermost last:     */
    char open[LEX_MAX_BRACKETS];   /* '(' or '[' (for the hints on errors)  */
    int32_t last_end;       /* end of the last token that was not a newline */
    long nnodes, max_nodes;   /* built so far; the caller's limit        */
    int nstmts, capstmts;
    ast_stmt *stmts;
    ast_node dummy;         /* handed out by builders after an error, so the
                               actions never pass NULL around; never written */
} parse_ctx;

/* The lemon parser in the generated grammar.c (grammar.h has only the token
 * codes): allocate with the context the actions get, feed one token at a
 * time (type 0 ends the input), free. */
void *ast_lemonAlloc(void *(*alloc)(size_t), parse_ctx *ctx);
void ast_lemon(void *parser, int type, lex_token t);
void ast_lemonFree(void *parser, void (*release)(void *));

/* Report an error at pos; only the first error of a parse is kept. */
void parse_error(parse_ctx *ctx, util_pos pos, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void parse_syntax_error(parse_ctx *ctx, const lex_token *t);
void parse_stack_overflow(parse_ctx *ctx, int depth);

/* Leaves and operators. */
parse_ex parse_int(parse_ctx *ctx, const lex_token *t);
parse_ex parse_float(parse_ctx *ctx, const lex_token *t);
parse_ex parse_bool(parse_ctx *ctx, const lex_token *t, int value);
parse_ex parse_name(parse_ctx *ctx, const lex_token *t);
parse_ex parse_unary(parse_ctx *ctx, const lex_token *op, const parse_ex *x);
parse_ex parse_binary(parse_ctx *ctx, const parse_ex *a, int op, const lex_token *optok,
                      const parse_ex *b);
parse_ex parse_cond(parse_ctx *ctx, const parse_ex *c, const lex_token *q, const parse_ex *a,
                    const parse_ex *b);
parse_ex parse_index(parse_ctx *ctx, const parse_ex *base, const lex_token *lb,
                     const parse_exlist *subs, const lex_token *rb);
parse_ex parse_field(parse_ctx *ctx, const parse_ex *base, const lex_token *dot,
                     const lex_token *num);
/* `x.name` is never valid (fields are numbers); it is parsed so that the
 * error can say what to write instead: sum(x) for x.sum(). */
parse_ex parse_method(parse_ctx *ctx, const parse_ex *base, const lex_token *dot,
                      const lex_token *name);
/* `( e )` is e with a wider span; `( e1, e2, ... )` a tuple. */
parse_ex parse_paren(parse_ctx *ctx, const lex_token *lp, const parse_exlist *l,
                     const lex_token *rp);

/* Calls and reductions: the call first, then its clauses. */
parse_ex parse_call(parse_ctx *ctx, const lex_token *name, const parse_exlist *args,
                    const lex_token *rp);
parse_ex parse_reduce(parse_ctx *ctx, const lex_token *kw, const lex_token *op,
                      const parse_ex *x, const lex_token *rp);
parse_ex parse_clauses(parse_ctx *ctx, const parse_ex *call, const parse_overlist *over,
                       const parse_ex *by);
parse_ex parse_range_sub(parse_ctx *ctx, const lex_token *name, const parse_ex *lo, const parse_ex *hi);
parse_idx *parse_over_idx(parse_ctx *ctx, const lex_token *name, const parse_ex *lo,
                          const parse_ex *hi);

/* Lists. */
void parse_list_init(parse_ctx *ctx, parse_exlist *l, const parse_ex *x);
void parse_list_add(parse_ctx *ctx, parse_exlist *l, const parse_ex *x);
void parse_over_init(parse_overlist *l, parse_idx *i);
void parse_over_add(parse_overlist *l, parse_idx *i);

/* Statements, appended to the program in order. */
void parse_stmt_exprs(parse_ctx *ctx, const parse_exlist *l);
void parse_stmt_assign(parse_ctx *ctx, const parse_ex *lhs, const parse_ex *rhs);
void parse_stmt_op(parse_ctx *ctx, const lex_token *kw, const lex_token *name,
                   const lex_token *a, const lex_token *b, const parse_ex *combine,
                   const parse_ex *identity);

#endif
