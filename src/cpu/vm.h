/*
 * vm.h -- the CPU executor's block machine.  An IR DAG is compiled once into
 * a list of instructions over registers of VM_B elements; each instruction
 * is one typed loop the compiler vectorises, so interpretation costs one
 * dispatch per VM_B elements, never one per element.
 */
#ifndef RED_VM_H
#define RED_VM_H

#include <stdint.h>

#include "check/plan.h"
#include "core/buf.h"
#include "core/dtype.h"

#define VM_B 1024
#define VM_MAX_TERMS 4

/* Index variable values within a block. */
enum { VAR_CONST, VAR_RAMP, VAR_VEC };
typedef struct vm_var {
    int mode;
    int64_t base;       /* CONST: the value; RAMP: value at element 0      */
    int64_t *vec;       /* VEC: one value per element                      */
} vm_var;

typedef struct vm_affine {      /* c0 + sum coef[t] * var[t]               */
    int64_t c0;
    int nterm;
    int var[VM_MAX_TERMS];
    int64_t coef[VM_MAX_TERMS];
} vm_affine;

enum { VI_CONST, VI_SCALAR, VI_INDEX, VI_PARAM, VI_LOAD, VI_CAST, VI_OP };

typedef struct vm_instr {
    uint8_t kind, type, op, atype;  /* atype: operand type (OP, CAST)       */
    int invariant;                  /* computed once, before the blocks     */
    int dst, a, b, c;               /* registers                            */
    int slot;                       /* SCALAR / INDEX / PARAM / LOAD buffer */
    plan_value value;               /* CONST                                */
    int affine;                     /* LOAD: all subscripts affine          */
    int nsub;
    int sub[RED_MAX_DIMS];          /* LOAD (gather): subscript registers   */
    vm_affine aff[RED_MAX_DIMS];    /* LOAD (affine)                        */
    const ir *node;
} vm_instr;

typedef struct vm_prog {
    int ninstr;
    vm_instr *instr;
    int nregs;
    int nout;
    int out[PLAN_MAX_COMP * 4];     /* registers holding the roots          */
    int maxvar;                     /* var ids used are < maxvar            */
} vm_prog;

/* An error found while running (an index out of range). */
typedef struct vm_fault {
    int code;
    const ir *node;
    int dim;
    int64_t value, extent;
    int buf;
} vm_fault;

/* Per-thread state: registers and the block's variables. */
typedef struct vm_state {
    const vm_prog *prog;
    unsigned char *regs;            /* nregs * VM_B * 8 bytes, 64-aligned  */
    void **rp;                      /* where each register's values are:
                                       its own buffer, or (contiguous loads
                                       of the compute type) the array itself */
    vm_var *vars;                   /* indexed by var id                    */
    const core_buf *bufs;             /* bound arrays                         */
    const core_buf *temps;            /* temporaries                          */
    const plan_value *scalars;
    const plan_scalar *scalar_info;
    int64_t *scratch;               /* VM_B i64 for subscripts              */
    int64_t *scratch2;              /* VM_B i64 for offsets                 */
    int check_bounds;
    int flat;                       /* the block is a stretch of a box every
                                       affine load reads at one step a
                                       position, its bounds checked for the
                                       whole box (walk.c cpu_flat_walk): the
                                       innermost index ramps across rows
                                       and no subscript is checked       */
    vm_fault fault;
} vm_state;

/* Compile the roots into a program (registers shared by liveness). */
int vm_compile(util_arena *a, const plan *p, int nroots, ir *const *roots, vm_prog **out);
/* Prepare a state for a thread; returns 0 or RED_ERR_NOMEM. */
int vm_state_init(vm_state *s, const vm_prog *prog, int nvars);
void vm_state_free(vm_state *s);
/* Compute the invariant instructions (constants, scalars); once per state. */
void vm_prologue(vm_state *s);
/* Evaluate the block of n elements; returns 0 or the fault's code. */
int vm_run(vm_state *s, int n);
/* The register holding root r after vm_run. */
static inline void *vm_reg(const vm_state *s, int reg) { return s->rp[reg]; }
static inline void *vm_own(const vm_state *s, int reg) { return s->regs + (size_t)reg * VM_B * 8; }

/* Parameters of a user operator's combine program: set the registers. */
void *vm_param_reg(const vm_state *s, int param);

#endif
