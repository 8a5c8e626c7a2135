/*
 * check.h -- names, types and index extents: turns a parsed program plus the
 * signature of its bindings (names, kinds, dtypes, ranks) into a plan.
 * Shapes are not needed here; plan_resolve_extents checks them per run.
 */
#ifndef RED_CHECK_H
#define RED_CHECK_H

#include "ast.h"
#include "plan.h"

typedef struct chk_binding {
    const char *name;
    int is_array;       /* else a scalar                                  */
    red_dtype dtype;
    int ndim;           /* arrays                                          */
    int weak;           /* scalars bound by value adapt like literals      */
} chk_binding;

/* What one plan may hold, set by the caller (the API's RED_OPT_MAX_PASSES,
 * which the message names).  CHK_MAX_PASSES is the ceiling of the plan's table. */
#define CHK_MAX_PASSES 256
typedef struct chk_limits {
    int max_passes;     /* 1..CHK_MAX_PASSES; 0: the ceiling             */
} chk_limits;

/* Build the plan for `prog` under the given bindings and `lim` (NULL: the
 * ceilings).  The plan and all its IR live in `arena`.  Errors carry a caret
 * message in `diag`. */
int chk_build(const ast_program *prog, const chk_binding *binds, int nbinds, const chk_limits *lim,
              util_arena *arena, plan **out, util_diag *diag);

#endif
