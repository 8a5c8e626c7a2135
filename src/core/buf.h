/*
 * buf.h -- the descriptors both backends and the API pass between them: a
 * buffer (a bound array or a temporary, host or device memory) and the
 * cancellation flag a run checks between pieces of work.
 */
#ifndef RED_CORE_BUF_H
#define RED_CORE_BUF_H

#include <stdint.h>

#include "redjit.h"

/* A buffer a run reads or writes: a bound array or a temporary.  Shape and
 * strides are in elements; name is the bound name ("" for temporaries), for
 * error messages. */
typedef struct core_buf {
    const void *data;
    red_dtype dtype;
    int ndim;
    int64_t shape[RED_MAX_DIMS];
    int64_t strides[RED_MAX_DIMS];
    const char *name;
} core_buf;

/* Interruption: the run stops when *counter no longer equals seen. */
typedef struct core_cancel {
    const int *counter;
    int seen;
} core_cancel;

static inline int core_cancelled(const core_cancel *c)
{
    return c && c->counter && __atomic_load_n(c->counter, __ATOMIC_RELAXED) != c->seen;
}

#endif
