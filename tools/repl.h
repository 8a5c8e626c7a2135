/*
 * repl.h -- the interactive session shared by the prompt, script files and
 * pipes: named arrays that persist between statements, saved operators,
 * generators, ':' commands.  Internal to the redjit tool.
 */
#ifndef REDJIT_REPL_H
#define REDJIT_REPL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "redjit.h"

/* Set by the SIGINT handler while a session runs at a terminal; long work
 * (generators, :bench) polls it, and it is reported after each statement.
 * The handler also calls red_interrupt, which stops a running evaluation
 * at its next safe point with RED_ERR_INTERRUPTED. */
extern volatile sig_atomic_t repl_sigint;

/* Who releases a value's storage, and how. */
typedef enum repl_storage {
    STORE_NONE,               /* nothing to release                          */
    STORE_MALLOC,             /* host memory from malloc: free               */
    STORE_LIBRARY,            /* host memory from red_result_detach: red_free */
    STORE_DEVICE              /* GPU memory (a.memory == RED_MEM_CUDA) from
                               * red_device_alloc or red_result_detach:
                               * red_device_free(session ctx)                */
} repl_storage;

/* A session value: an array or a 0-d scalar, with its storage. */
typedef struct repl_var {
    char *name;
    red_array a;              /* the descriptor every evaluation binds      */
    void *data;               /* storage behind a.data, released by ...      */
    repl_storage storage;     /* ... this                                    */
    bool weak;                /* f64/i64 scalar bound like a literal          */
    bool hidden;              /* a generator's temporary (__gN)              */
} repl_var;

typedef struct repl_session {
    red_ctx *ctx;
    repl_var *vars;
    int nvars, capvars;
    char *ops;                /* saved `op` definitions, one per line        */
    uint64_t rng[4];          /* xoshiro256** state that keys generator calls */
    int ntemp;                /* temporaries made for the current statement  */
    bool tty;                 /* at a terminal: prompts, line editing        */
    bool json, explain;       /* --format json, --explain                    */
    bool verbose;             /* --verbose: print_run_note after each run    */
    int explain_what;         /* RED_EXPLAIN_*: what --explain adds to the plan */
    const char *origin;       /* script name put in front of errors, or NULL */
    int line;                 /* first line of the statement being run       */
    bool quit;                /* :quit was given                             */
    const char *move_error;   /* why session_move / session_host_array failed */
} repl_session;

/* ---- session.c: values and statements ----------------------------------- */

void session_init(repl_session *s, red_ctx *ctx);
void session_free(repl_session *s);

/* Where values live.  session_home is the one place that decides where a
 * new value belongs: in GPU memory when a GPU is usable and the device is
 * not `cpu` (arrays made there are bound where they are, with no upload per
 * evaluation), else in host memory.  Scalars, empty arrays and arrays whose
 * elements do not fill one block of memory always stay on the host. */
red_memory session_home(repl_session *s, const red_array *a);
/* Move `v`'s elements to `where` (a copy, then the old storage released).
 * A library status; on failure `v` is unchanged and s->move_error says why. */
int session_move(repl_session *s, repl_var *v, red_memory where);
/* Move `v` to session_home; when that fails a note is printed and the value
 * stays where it is (still usable).  Returns 0, or 1 after the note. */
int session_settle(repl_session *s, repl_var *v);
/* `v` in host memory: `*out` is v->a, or a copy of a GPU value whose buffer
 * `*tmp` the caller frees.  A library status; s->move_error says why. */
int session_host_array(repl_session *s, const repl_var *v, red_array *out, void **tmp);

/* A new host array for the session, to be filled and then settled
 * (session_settle uploads it once when it belongs on the GPU).  Returns the
 * new variable (replacing one of the same name) or NULL. */
repl_var *session_new_array(repl_session *s, const char *name, red_dtype t, int ndim,
                            const int64_t *shape);
/* Adopt `a` whose storage `data` is released as `storage` says, and settle
 * it where new values live (session_home).  NULL when out of memory (the
 * storage is released then). */
repl_var *session_adopt(repl_session *s, const char *name, const red_array *a, void *data,
                        repl_storage storage);
repl_var *session_find(repl_session *s, const char *name);
bool session_del(repl_session *s, const char *name);
void session_drop_hidden(repl_session *s);

/* Run one complete entry (statement, several on a line, or a command).
 * Errors are printed; returns 0 on success, 1 on an error. */
int session_exec(repl_session *s, const char *text);

/* A statement made ready to run: generators materialised, saved operators
 * in front, every session value bound.  For :explain, :time and :bench. */
typedef struct repl_stmt {
    char *prog;               /* the text given to red_prepare               */
    int oplines;              /* lines of saved operators before the entry   */
    char *target;             /* NAME of a final `NAME = EXPR`, else NULL    */
    bool indexed;             /* ... of a final `NAME[i,j] = EXPR`           */
    bool ops_only;            /* the entry only defines operators            */
    char *alias;              /* `NAME = randn(...)`: the temporary to rename */
    char **lets;              /* named values the entry defines: not bound   */
    int nlets;
    char *newops;             /* its `op` statements, saved once it has run  */
    red_expr *e;
} repl_stmt;

int stmt_prepare(repl_session *s, const char *text, repl_stmt *st);
int stmt_bind(repl_session *s, repl_stmt *st);
/* After a successful red_run: store the value of `NAME = ...`, or print the
 * results; keep the entry's operators.  Returns 0 or 1 after printing. */
int stmt_deliver(repl_session *s, repl_stmt *st);
void stmt_free(repl_session *s, repl_stmt *st);
/* Print a library error, with line numbers as the user typed them. */
void session_lib_error(repl_session *s, int status, const char *msg, int oplines);
void session_error(repl_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A minimal scanner of the language's tokens, enough to find statements,
 * brackets and generator calls without the library's parser. */
typedef enum { SC_END, SC_NAME, SC_NUM, SC_OPEN, SC_CLOSE, SC_SEP, SC_COMMA, SC_ASSIGN, SC_OP } scan_kind;
typedef struct scan_tok {
    scan_kind kind;
    const char *p;
    size_t len;
    int depth;                /* bracket depth before the token              */
} scan_tok;
typedef struct scan_state {
    const char *p;
    int depth;
} scan_state;
scan_tok scan_next(scan_state *st);
bool scan_is(const scan_tok *t, const char *word);

/* ---- gen.c: generators ---------------------------------------------------- */

/* Replace every generator call in `text` (randn(1e8), ...) by the name of a
 * hidden session temporary holding its values, padded so columns and lines
 * keep their places.  Returns a new string (free) or NULL after printing. */
char *gen_substitute(repl_session *s, const char *text);
void gen_seed(repl_session *s, uint64_t seed);
extern const char *const gen_names[];

/* ---- commands.c ------------------------------------------------------------ */

/* `line` starts with ':'.  Returns 0, or 1 after printing an error. */
int command_run(repl_session *s, const char *line);
extern const char *const command_names[];

/* ---- repl.c: input ------------------------------------------------------------ */

/* Read statements from `in` (a terminal: line editing, history, completion)
 * until EOF or :quit.  `stop_on_error` for scripts.  Returns 0, or 1 if a
 * statement failed and the input is not a terminal. */
int repl_run(repl_session *s, FILE *in, bool stop_on_error);
/* Where the prompt keeps its history: a path to free, or NULL when there
 * is none (no $HOME, or built without libedit); repl_history_rule says how
 * the path is chosen. */
char *repl_history_path(void);
extern const char repl_history_rule[];

/* ---- csv.c ---------------------------------------------------------------------- */

/* A 1-D (one column) or 2-D table of numbers: i64 if all are integers, else
 * f64; a first line that is not numbers is a header and skipped.  Returns 0
 * or -1 with a message in `err`; `*owned` is released with free(). */
int csv_load(const char *path, red_array *out, void **owned, char *err, size_t errlen);
/* Write a 1-D or 2-D host array, one row per line, exact digits. */
int csv_save(const char *path, const red_array *a, char *err, size_t errlen);

#endif /* REDJIT_REPL_H */
