/*
 * kcache.h -- the on-disk cache of compiled kernels (CUBIN).  Entries are
 * written atomically (temporary file + rename) and carry a checksum, so a
 * crash or a concurrent writer never leaves a half entry that is believed.
 *
 * The trust rule (as OpenSSH's for ~/.ssh): a CUBIN is loaded and launched,
 * so an entry is read only when nobody but this user could have written it.
 * The cache folder must be a folder, not a symbolic link, owned by the
 * effective user and not writable by group or others; so must each entry,
 * checked with fstat on the opened file.  Folders the cache makes are 0700
 * and entries 0600, whatever the umask.  Anything else is refused (not
 * loaded, not deleted, counted in kc_refusals) and the kernel is compiled.
 * Eviction and kc_clear remove only regular files of the cache's naming
 * ("KEY.cubin") that this user owns, in the folder checked.
 */
#ifndef RED_KCACHE_H
#define RED_KCACHE_H

#include <stddef.h>
#include <stdint.h>

/* kc_load's answers */
#define KC_HIT 0
#define KC_MISS (-1)
#define KC_CORRUPT 2   /* damaged, removed: reported as a miss */
#define KC_REFUSED 3   /* there, but failing the trust rule: not loaded */

/* 64-bit FNV-1a, chained by `seed`. */
uint64_t kc_hash(const void *p, size_t n, uint64_t seed);

/* The cache folder ($REDJIT_CACHE_DIR, else $XDG_CACHE_HOME/redjit, else
 * ~/.cache/redjit), created if needed; NULL when REDJIT_CACHE=0, or it cannot
 * be made, or it fails the trust rule (then everything compiles in memory). */
const char *kc_dir(char *buf, size_t n);

/* Read entry `key` (letters, digits, '_', '-'; at most 64): KC_HIT with a
 * malloc'd copy, KC_MISS, KC_CORRUPT (a damaged entry, deleted) or
 * KC_REFUSED.  On a miss in the user's cache, a folder an administrator
 * prepared, $REDJIT_CACHE_TRUSTED_DIR, is read too: never written, and
 * trusted when it and the entry belong to root or this user and are not
 * writable by group or others. */
int kc_load(const char *key, void **data, size_t *size);
/* Store an entry; failures (read-only, full or refused folder) are silent.
 * Evicts this user's oldest entries beyond $REDJIT_CACHE_MAX_MB (default 512). */
void kc_store(const char *key, const void *data, size_t size);
/* Remove every entry this user made; returns how many were removed. */
int kc_clear(void);
/* Folders and entries refused by the trust rule in this process. */
long long kc_refusals(void);

#endif
