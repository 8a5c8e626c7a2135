/*
 * lexer.h -- the re2c tokenizer for the redjit language (lexer.re).
 * It turns NUL-terminated text into lemon token codes (TK_* from the
 * generated grammar.h) with their positions and literal values.
 */
#ifndef RED_LEXER_H
#define RED_LEXER_H

#include <stdint.h>

#include "util.h"

/* Brackets ( and [ may nest at most this deep (docs/language.md). */
#define LEX_MAX_BRACKETS 256

typedef struct lex_token {
    int type;                /* TK_* code; 0 at the end of the input        */
    util_pos pos;            /* the token's bytes in the source text; a
                                NAME's text is src + pos.off, pos.len long   */
    int newline;             /* a TK_SEMI that was written as a newline    */
    union {
        uint64_t ival;       /* TK_INT                                     */
        double fval;         /* TK_FLOAT (including `inf` and `nan`)       */
    } v;
} lex_token;

typedef struct lex_state {
    const char *src;         /* the whole text, NUL-terminated             */
    const char *cur;         /* where the next token starts                */
    int depth;               /* open ( and [: newlines inside are blanks   */
    int after_dot;           /* the last token was '.': a number that
                                follows is a field number, digits only,
                                so that `t.0.1` is two field selections    */
    util_diag *diag;         /* where lexical errors are reported          */
} lex_state;

void lex_init(lex_state *ls, const char *src, util_diag *diag);

/* Read the next token into *t.  Returns its type (> 0), 0 at the end of the
 * input (again on every later call), or -1 after a lexical error, reported
 * in ls->diag with its red_status code (RED_ERR_SYNTAX, RED_ERR_LIMIT,
 * RED_ERR_NOMEM).  The end token's position is the end of the text. */
int lex_next(lex_state *ls, lex_token *t);

#endif
