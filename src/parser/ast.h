/*
 * ast.h -- the syntax tree the lemon grammar builds and the checker reads.
 * Every node lives in the program's arena (util_arena), so a syntax error
 * part-way through frees everything with the arena and nothing leaks.
 * The tree is purely syntactic: whether `x` is an array, a scalar or an
 * index variable is decided by the checker once bindings are known.
 */
#ifndef RED_AST_H
#define RED_AST_H

#include <stdint.h>

#include "util.h"

typedef enum ast_kind {
    AST_INT,      /* integer literal: u.ival (fits in uint64)                    */
    AST_FLOAT,    /* decimal, exponent, inf, nan: u.fval                         */
    AST_BOOL,     /* true / false: u.ival 1 / 0                                  */
    AST_NAME,     /* identifier: name                                            */
    AST_INDEX,    /* name[args...]: name, args (subscripts)                      */
    AST_UNARY,    /* op args[0]:  op is '-', '!', '~', '+'                       */
    AST_BINARY,   /* args[0] op args[1]: op is an ast_binop                      */
    AST_COND,     /* args[0] ? args[1] : args[2]                                 */
    AST_CALL,     /* name(args...) [over ...] [by key]: function, cast or
                     reduction shorthand (sum, min, ...); the checker decides     */
    AST_REDUCE,   /* reduce(opname, args[0]) [over ...] [by key]; op: 0, or
                     AST_SCAN / AST_EXSCAN for scan(...) and exscan(...)          */
    AST_TUPLE,    /* (args[0], args[1], ...), at least two elements              */
    AST_FIELD,    /* args[0].field                                               */
    AST_RANGE     /* name in args[0]..args[1]: a subscript of the left side of
                     '=' that gives its index a range (anywhere else an error)  */
} ast_kind;

/* AST_REDUCE's op: which keyword wrote it (0: reduce) */
enum { AST_SCAN = 1, AST_EXSCAN = 2 };

typedef enum ast_binop {
    BOP_ADD = 1, BOP_SUB, BOP_MUL, BOP_DIV, BOP_MOD,
    BOP_BAND, BOP_BOR, BOP_BXOR, BOP_SHL, BOP_SHR,
    BOP_LT, BOP_LE, BOP_GT, BOP_GE, BOP_EQ, BOP_NE,
    BOP_LAND, BOP_LOR, BOP_POW
} ast_binop;

typedef struct ast_node ast_node;

/* One index of an `over` clause: `i`, or `k in lo..hi` (half-open). */
typedef struct ast_over {
    const char *name;
    util_pos pos;           /* of the name */
    ast_node *lo, *hi;      /* both NULL when no range is given */
} ast_over;

struct ast_node {
    ast_kind kind;
    int op;                 /* AST_UNARY: the character; AST_BINARY: ast_binop */
    util_pos pos;           /* the whole node's text (for carets)            */
    const char *name;       /* AST_NAME, AST_INDEX, AST_CALL: identifier;
                               AST_REDUCE: the operator as written: "+", "*",
                               "min", "max", "&", "|", "^", "&&", "||",
                               "argmin", "argmax" or a user operator's name   */
    util_pos name_pos;      /* of `name` alone; AST_BINARY: of the operator  */
    union {
        uint64_t ival;
        double fval;
    } u;
    int field;              /* AST_FIELD: the field number                   */
    int nargs;
    ast_node **args;
    int has_over;           /* an `over` clause was written (possibly empty is
                               impossible: at least one index)              */
    int nover;
    ast_over *over;
    ast_node *by;           /* `by KEY`, or NULL                             */
    int depth;              /* 1 + the deepest child (args, bounds, key),
                               except that a binary operator's left operand
                               that is itself a binary operator is the same
                               level: x+x+...+x is a chain, not nesting.  The
                               parser rejects trees deeper than AST_MAX_DEPTH
                               so every recursive pass has bounded depth, and
                               every pass walks a chain in a loop, down its
                               left operands                                 */
};

#define AST_MAX_DEPTH 512

typedef enum ast_stmt_kind {
    STMT_EXPR,    /* e1, e2, ...        : results                                 */
    STMT_LET,     /* name = e           : a named value (args[0])                 */
    STMT_ASSIGN,  /* name[i, j] = e     : a named result with fixed index order   */
    STMT_OP       /* [ordered] op name(a, b) = combine identity ident              */
} ast_stmt_kind;

typedef struct ast_stmt {
    ast_stmt_kind kind;
    util_pos pos;
    const char *name;       /* LET, ASSIGN, OP                               */
    util_pos name_pos;
    int nidx;               /* ASSIGN: index names on the left side          */
    const char **idx;
    util_pos *idx_pos;
    ast_node **idx_lo, **idx_hi;   /* ASSIGN: `x in lo..hi` on the left, else
                                      NULL (both arrays NULL when none has one) */
    int nexprs;             /* EXPR: the results; LET/ASSIGN: 1 (the value);
                               OP: 2 (exprs[0] combine, exprs[1] identity)  */
    ast_node **exprs;
    const char *param[2];   /* OP: the two parameter names                   */
    util_pos param_pos[2];
    int ordered;            /* OP: declared `ordered op`                      */
} ast_stmt;

typedef struct ast_program {
    const char *src;        /* the text, NUL-terminated, owned by the arena  */
    int nstmts;
    ast_stmt *stmts;
    long nnodes;            /* syntax-tree nodes built (ast_limits.max_nodes) */
} ast_program;

/* What one text may build, set by the caller (the API's RED_OPT_MAX_TEXT and
 * RED_OPT_MAX_NODES, whose names the messages give).  The defaults are the
 * ceilings: positions are int32 offsets, and a million nodes is far beyond
 * any expression a person writes. */
#define AST_MAX_TEXT  (INT32_MAX - 1)
#define AST_MAX_NODES (1L << 20)
typedef struct ast_limits {
    long max_text;          /* bytes of text, 1..AST_MAX_TEXT               */
    long max_nodes;         /* syntax-tree nodes, 1..AST_MAX_NODES          */
} ast_limits;

/* Parse `src` into a program allocated in `arena`.  On error returns a
 * red_status (RED_ERR_SYNTAX, RED_ERR_LIMIT, RED_ERR_NOMEM) with a caret
 * message in `diag`, and *out is NULL.
 * `*incomplete` (may be NULL) is set to 1 when the error is only that the
 * text ended too early (unclosed bracket, trailing operator): the REPL uses
 * it to ask for a continuation line. */
int ast_parse(util_arena *arena, const char *src, ast_program **out, util_diag *diag,
              int *incomplete);
/* ast_parse under `lim` (NULL: the ceilings), whose limits past which the
 * text is refused with RED_ERR_LIMIT. */
int ast_parse_limited(util_arena *arena, const char *src, const ast_limits *lim, ast_program **out,
                      util_diag *diag, int *incomplete);

/* Print a node back as text (fully parenthesised), for explain and tests. */
void ast_print(util_buf *b, const ast_node *n);

#endif
