/*
 * kcache.h -- the on-disk cache of compiled kernels (CUBIN).  Entries are
 * written atomically (temporary file + rename) and carry a checksum, so a
 * crash or a concurrent writer never leaves a half entry that is believed.
 */
#ifndef RED_KCACHE_H
#define RED_KCACHE_H

#include <stddef.h>
#include <stdint.h>

/* 64-bit FNV-1a, chained by `seed`. */
uint64_t kc_hash(const void *p, size_t n, uint64_t seed);

/* The cache folder ($REDJIT_CACHE_DIR, else $XDG_CACHE_HOME/redjit, else
 * ~/.cache/redjit), created if needed; NULL when REDJIT_CACHE=0 or it cannot
 * be made (then everything compiles in memory). */
const char *kc_dir(char *buf, size_t n);

/* Read entry `key` (hex name): 0 with a malloc'd copy, -1 if missing; a
 * corrupt or truncated entry is deleted and reported as missing (2). */
int kc_load(const char *key, void **data, size_t *size);
/* Store an entry; failures (read-only or full folder) are silent. Evicts the
 * oldest entries beyond $REDJIT_CACHE_MAX_MB (default 512). */
void kc_store(const char *key, const void *data, size_t size);
/* Remove every entry; returns how many were removed. */
int kc_clear(void);

#endif
