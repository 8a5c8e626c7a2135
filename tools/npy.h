/*
 * npy.h -- read and write NumPy .npy files as red_array descriptors, so the
 * command-line tool and the test runner can exchange arrays with NumPy.
 * Self-contained: uses only the types of redjit.h, none of its functions.
 */
#ifndef REDJIT_NPY_H
#define REDJIT_NPY_H

#include <stddef.h>

#include "redjit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read the .npy file at `path`: format versions 1.0, 2.0 and 3.0; dtypes
 * bool ('|b1'), int8 to int64, uint8 to uint64, float16, float32, float64,
 * complex64 and complex128 (each part byte-swapped where needed)
 * in little-endian ('<'), native ('=') or not-applicable ('|') byte order;
 * big-endian ('>') data is byte-swapped while loading.  0-d to 8-d arrays,
 * C or Fortran order (Fortran order gives column-major strides; nothing is
 * copied).  Bool bytes other than 0 and 1 are read as 1.
 *
 * On success returns 0, `*out` describes the array (host memory) and
 * `*owned` receives the buffer it points into, which the caller releases
 * with free().  On failure returns -1, leaves `*owned` NULL and writes a
 * message naming the file into `err` (e.g. "x.npy: unsupported dtype '<c8'",
 * "x.npy: truncated data: expected 4000 bytes, got 12").  Garbage or
 * truncated input is always an error, never a crash or a huge allocation. */
int npy_load(const char *path, red_array *out, void **owned, char *err, size_t errlen);

/* Write the host array `a` (any strides, including zero and negative) to
 * `path` in C order as a version 1.0 .npy file whose header is padded to a
 * multiple of 64 bytes, byte for byte as NumPy writes it.  bf16 has no NumPy
 * dtype and is written as float32 (exactly).  Returns 0, or -1 with a
 * message in `err`; a partly written file is removed. */
int npy_save(const char *path, const red_array *a, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* REDJIT_NPY_H */
