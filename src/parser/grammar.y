/*
 * grammar.y -- the lemon grammar of the redjit language (docs/language.md).
 * Tokens come from lexer.re; the actions only call the parse_* builders of
 * parse.c, so that this file reads as the grammar and nothing else.
 */

%name ast_lemon
%token_prefix TK_
%token_type {lex_token}
%extra_context {parse_ctx *ctx}

/* The stack holds one entry (40 bytes) per pending symbol.  A level of tree
 * depth leaves at most seven pending (`sum(x) over j, i in 0..`: the call,
 * the clause so far, ',', the name, 'in', the lower bound, '..') and an open
 * bracket one more, so input within the limits of 512 levels and 256
 * brackets needs at most 7 * 512 + 256 entries (the worst case in
 * tests/test_parse.c takes 3830).  With 4096 the stack overflows only on
 * input that is over those limits anyway, such as 100 000 unary minuses,
 * which gets a clean RED_ERR_LIMIT instead of a crash. */
%stack_size 4096

%include {
#include "parse.h"

/* The first syntax error ends the parse: no error recovery, no cascades. */
#define YYNOERRORRECOVERY 1
}

%syntax_error {
    (void)yymajor; /* TOKEN.type says the same */
    parse_syntax_error(ctx, &TOKEN);
}
%stack_overflow {
    parse_stack_overflow(ctx, YYSTACKDEPTH);
}

/* Every value is arena memory (ast_node, list cells), freed with the arena
 * as a whole when the caller is done or the parse fails, so discarding a
 * symbol on a syntax error has nothing to free: the destructors are no-ops,
 * declared anyway so a reader knows nothing was forgotten.  (Tokens hold
 * no memory at all.) */
%default_destructor { (void)ctx; (void)yypminor; }

/* Token codes in a readable order (lemon numbers them by first appearance). */
%token NAME INT FLOAT TRUE FALSE.
%token OVER IN BY REDUCE OP ORDERED IDENTITY.
%token SEMI COMMA ICOMMA ASSIGN QUESTION COLON LP RP LB RB DOT DOTDOT.
%token OROR ANDAND PIPE CARET AMP EQ NE LT LE GT GE SHL SHR.
%token PLUS MINUS STAR SLASH PERCENT BANG TILDE POW.

/* Operator precedence is spelled out by the rule levels below, not by
 * precedence declarations.  These two lines settle only the "dangling
 * clause" choices, where a call's `over` / `by` clause ends in an additive
 * expression and the next token could continue it or what is around it:
 *     sum(x) over i in 0..n * 2     the bound is n * 2
 *     sum(x) by k[i] + 1            the key is k[i] + 1
 *     sum(x) over i in 0..n ** 2    the bound is n ** 2
 *     sum(x) over i, j              two indices, not two results (ICOMMA)
 *     f(y) by k, inside a bound     the inner call takes the clause
 * The clause always takes the longest text it can: the language reference
 * makes bounds and keys additive expressions, and for the rest this is the
 * dangling-else choice.  The rules that give way are marked [YIELD]; `lemon
 * -p` lists the 21 choices so made, and no conflict is left unresolved. */
%nonassoc YIELD.
%nonassoc BY ICOMMA PLUS MINUS STAR SLASH PERCENT POW LB DOT.

/* ---- Program and statements ------------------------------------------- */

/* Statements are separated by ';' or a newline (the lexer sends both as
 * SEMI); empty statements are allowed and skipped. */
program ::= stmts.
stmts ::= stmt_opt.
stmts ::= stmts SEMI stmt_opt.
stmt_opt ::= .
stmt_opt ::= stmt.

stmt ::= exprs(L).                               { parse_stmt_exprs(ctx, &L); }
/* `NAME = e` and `NAME[i, j] = e` are parsed as `expr = expr` and the left
 * side checked afterwards: deciding between a name and an expression that
 * starts with one would need more than one token of lookahead. */
stmt ::= expr(A) ASSIGN expr(B).                 { parse_stmt_assign(ctx, &A, &B); }
stmt ::= opkw(K) NAME(N) LP NAME(A) comma NAME(B) RP ASSIGN expr(C) IDENTITY expr(I).
                                                 { parse_stmt_op(ctx, &K, &N, &A, &B, &C, &I); }

/* The first keyword of an operator definition; v.ival says `ordered`. */
%type opkw {lex_token}
opkw(A) ::= OP(T).                               { A = T; A.v.ival = 0; }
opkw(A) ::= ORDERED(T) OP.                       { A = T; A.v.ival = 1; }

%type exprs {parse_exlist}
exprs(A) ::= expr(X).                            { parse_list_init(ctx, &A, &X); }
exprs(A) ::= exprs(A1) comma expr(X).            { A = A1; parse_list_add(ctx, &A, &X); }

/* A comma is ICOMMA when a name that does not start a call follows it (the
 * driver in parse.c looks two tokens ahead): only that comma can continue an
 * `over` list, so `sum(A[i,j]) over j, sum(B[i,j]) over j` is two results.
 * Every other list takes either kind. */
comma ::= COMMA.
comma ::= ICOMMA.

/* ---- Operators, in C's precedence, lowest first ------------------------ */

/* Every expression level, and any symbol not given a %type, is a parse_ex:
 * a node and the span of its text. */
%default_type {parse_ex}

expr(A) ::= lor(X).                              { A = X; }
expr(A) ::= lor(C) QUESTION(Q) expr(X) COLON expr(Y).
                                                 { A = parse_cond(ctx, &C, &Q, &X, &Y); }

lor(A) ::= land(X).                              { A = X; }
lor(A) ::= lor(X) OROR(T) land(Y).               { A = parse_binary(ctx, &X, BOP_LOR, &T, &Y); }
land(A) ::= bor(X).                              { A = X; }
land(A) ::= land(X) ANDAND(T) bor(Y).            { A = parse_binary(ctx, &X, BOP_LAND, &T, &Y); }
bor(A) ::= bxor(X).                              { A = X; }
bor(A) ::= bor(X) PIPE(T) bxor(Y).               { A = parse_binary(ctx, &X, BOP_BOR, &T, &Y); }
bxor(A) ::= band(X).                             { A = X; }
bxor(A) ::= bxor(X) CARET(T) band(Y).            { A = parse_binary(ctx, &X, BOP_BXOR, &T, &Y); }
band(A) ::= eq(X).                               { A = X; }
band(A) ::= band(X) AMP(T) eq(Y).                { A = parse_binary(ctx, &X, BOP_BAND, &T, &Y); }
eq(A) ::= rel(X).                                { A = X; }
eq(A) ::= eq(X) EQ(T) rel(Y).                    { A = parse_binary(ctx, &X, BOP_EQ, &T, &Y); }
eq(A) ::= eq(X) NE(T) rel(Y).                    { A = parse_binary(ctx, &X, BOP_NE, &T, &Y); }
rel(A) ::= shift(X).                             { A = X; }
rel(A) ::= rel(X) LT(T) shift(Y).                { A = parse_binary(ctx, &X, BOP_LT, &T, &Y); }
rel(A) ::= rel(X) LE(T) shift(Y).                { A = parse_binary(ctx, &X, BOP_LE, &T, &Y); }
rel(A) ::= rel(X) GT(T) shift(Y).                { A = parse_binary(ctx, &X, BOP_GT, &T, &Y); }
rel(A) ::= rel(X) GE(T) shift(Y).                { A = parse_binary(ctx, &X, BOP_GE, &T, &Y); }
shift(A) ::= add(X).                             { A = X; }
shift(A) ::= shift(X) SHL(T) add(Y).             { A = parse_binary(ctx, &X, BOP_SHL, &T, &Y); }
shift(A) ::= shift(X) SHR(T) add(Y).             { A = parse_binary(ctx, &X, BOP_SHR, &T, &Y); }
add(A) ::= mul(X). [YIELD]                       { A = X; }
add(A) ::= add(X) PLUS(T) mul(Y). [YIELD]        { A = parse_binary(ctx, &X, BOP_ADD, &T, &Y); }
add(A) ::= add(X) MINUS(T) mul(Y). [YIELD]       { A = parse_binary(ctx, &X, BOP_SUB, &T, &Y); }
mul(A) ::= unary(X).                             { A = X; }
mul(A) ::= mul(X) STAR(T) unary(Y).              { A = parse_binary(ctx, &X, BOP_MUL, &T, &Y); }
mul(A) ::= mul(X) SLASH(T) unary(Y).             { A = parse_binary(ctx, &X, BOP_DIV, &T, &Y); }
mul(A) ::= mul(X) PERCENT(T) unary(Y).           { A = parse_binary(ctx, &X, BOP_MOD, &T, &Y); }
unary(A) ::= power(X).                           { A = X; }
unary(A) ::= MINUS(T) unary(X).                  { A = parse_unary(ctx, &T, &X); }
unary(A) ::= PLUS(T) unary(X).                   { A = parse_unary(ctx, &T, &X); }
unary(A) ::= BANG(T) unary(X).                   { A = parse_unary(ctx, &T, &X); }
unary(A) ::= TILDE(T) unary(X).                  { A = parse_unary(ctx, &T, &X); }
/* `a ** b` is Python's power: it binds tighter than a unary operator on its
 * left and takes one on its right (-x**2 is -(x**2), 2**-1 is 2**(-1)), and
 * it groups to the right (a**b**c is a**(b**c)). */
power(A) ::= postfix(X). [YIELD]                 { A = X; }
power(A) ::= postfix(X) POW(T) unary(Y).         { A = parse_binary(ctx, &X, BOP_POW, &T, &Y); }
postfix(A) ::= primary(X).                       { A = X; }
postfix(A) ::= postfix(X) LB(L) subs(S) RB(R).   { A = parse_index(ctx, &X, &L, &S, &R); }
postfix(A) ::= postfix(X) DOT(D) INT(N).         { A = parse_field(ctx, &X, &D, &N); }
postfix(A) ::= postfix(X) DOT(D) NAME(N).        { A = parse_method(ctx, &X, &D, &N); }

/* Subscripts; on the left of '=' one may give its index a range,
 * `C[x in lo..hi] = ...` (an AST_RANGE, which parse_stmt_assign takes and
 * the checker refuses anywhere else, saying where it belongs). */
%type subs {parse_exlist}
subs(A) ::= sub(X).                              { parse_list_init(ctx, &A, &X); }
subs(A) ::= subs(A1) comma sub(X).               { A = A1; parse_list_add(ctx, &A, &X); }
sub(A) ::= expr(X).                              { A = X; }
sub(A) ::= NAME(N) IN add(L) DOTDOT add(H).      { A = parse_range_sub(ctx, &N, &L, &H); }

/* ---- Primaries --------------------------------------------------------- */

primary(A) ::= INT(T).                           { A = parse_int(ctx, &T); }
primary(A) ::= FLOAT(T).                         { A = parse_float(ctx, &T); }
primary(A) ::= TRUE(T).                          { A = parse_bool(ctx, &T, 1); }
primary(A) ::= FALSE(T).                         { A = parse_bool(ctx, &T, 0); }
primary(A) ::= NAME(T).                          { A = parse_name(ctx, &T); }
primary(A) ::= LP(L) exprs(X) RP(R).             { A = parse_paren(ctx, &L, &X, &R); }
primary(A) ::= call(C). [YIELD]                  { A = parse_clauses(ctx, &C, NULL, NULL); }
primary(A) ::= call(C) over(O). [YIELD]          { A = parse_clauses(ctx, &C, &O, NULL); }
primary(A) ::= call(C) BY add(K). [YIELD]        { A = parse_clauses(ctx, &C, NULL, &K); }
primary(A) ::= call(C) over(O) BY add(K). [YIELD] { A = parse_clauses(ctx, &C, &O, &K); }

call(A) ::= NAME(N) LP RP(R).                    { A = parse_call(ctx, &N, NULL, &R); }
call(A) ::= NAME(N) LP exprs(L) RP(R).           { A = parse_call(ctx, &N, &L, &R); }
call(A) ::= REDUCE(K) LP redop(O) comma expr(X) RP(R).
                                                 { A = parse_reduce(ctx, &K, &O, &X, &R); }

/* The operator of reduce(): its text is what AST_REDUCE keeps as name. */
%type redop {lex_token}
redop(A) ::= PLUS(T).                            { A = T; }
redop(A) ::= STAR(T).                            { A = T; }
redop(A) ::= AMP(T).                             { A = T; }
redop(A) ::= PIPE(T).                            { A = T; }
redop(A) ::= CARET(T).                           { A = T; }
redop(A) ::= ANDAND(T).                          { A = T; }
redop(A) ::= OROR(T).                            { A = T; }
redop(A) ::= NAME(T).                            { A = T; }

/* `over i, k in lo..hi`: the bounds, like a `by` key, are additive
 * expressions, so `0..n-1` is 0..(n-1) and `sum(x) over i / n` divides the
 * sum.  The list goes on only over an ICOMMA: a comma followed by a call,
 * a number or a bracket ends it. */
%type over {parse_overlist}
%type idx {parse_idx *}
over(A) ::= OVER idx(I).                         { parse_over_init(&A, I); }
over(A) ::= over(A1) ICOMMA idx(I).              { A = A1; parse_over_add(&A, I); }
idx(A) ::= NAME(N).                              { A = parse_over_idx(ctx, &N, NULL, NULL); }
idx(A) ::= NAME(N) IN add(L) DOTDOT add(H). [YIELD] { A = parse_over_idx(ctx, &N, &L, &H); }
