/*
 * kcache.c -- on-disk CUBIN cache (see kcache.h).  File layout:
 *   "RJCB" | u32 format | u64 payload size | u64 payload hash | payload
 * The hash catches damage, not malice: the cache trusts an entry because of
 * who could have written it (the trust rule in kcache.h), so every file is
 * opened relative to a folder descriptor already checked, and checked itself
 * on the descriptor it is read from (no path check followed by an open).
 */
#include "kcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KC_MAGIC "RJCB"
#define KC_FORMAT 1u
#define KC_KEY_MAX 64

/* open_dir's answers besides a descriptor */
#define DIR_MISSING (-1)
#define DIR_REFUSED (-2)

static long long refusals;

uint64_t kc_hash(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    return h;
}

long long kc_refusals(void)
{
    return __atomic_load_n(&refusals, __ATOMIC_RELAXED);
}

static int refuse(void)
{
    __atomic_add_fetch(&refusals, 1, __ATOMIC_RELAXED);
    return KC_REFUSED;
}

/* A key is the cache's own kind of name: letters, digits, '_' and '-', so
 * it never names another folder and eviction can tell its files apart. */
static int key_ok(const char *key, size_t len)
{
    if (len == 0 || len > KC_KEY_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        char c = key[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* "KEY.cubin" with a key of the cache's naming: an entry the cache made. */
static int entry_name(const char *name)
{
    size_t len = strlen(name);
    return len > 6 && strcmp(name + len - 6, ".cubin") == 0 && key_ok(name, len - 6);
}

/* Belongs to this user (or, for the admin's trusted folder, to root) and
 * cannot be written by anyone else. */
static int owner_ok(const struct stat *st, int allow_root)
{
    uid_t me = geteuid();
    return (st->st_uid == me || (allow_root && st->st_uid == 0)) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* The path of the user's cache folder; NULL when REDJIT_CACHE=0 or there is
 * no home to put it in. */
static const char *cache_path(char *buf, size_t n)
{
    const char *off = getenv("REDJIT_CACHE");
    if (off && strcmp(off, "0") == 0) return NULL;
    const char *d = getenv("REDJIT_CACHE_DIR");
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int w;
    if (d && *d) w = snprintf(buf, n, "%s", d);
    else if (x && *x) w = snprintf(buf, n, "%s/redjit", x);
    else if (home && *home) w = snprintf(buf, n, "%s/.cache/redjit", home);
    else return NULL;
    return w > 0 && (size_t)w < n ? buf : NULL;
}

/* Open folder `path` one component at a time, each relative to the one
 * before.  Folders that already lead to the cache (/home, a scratch space)
 * are followed even where they are symbolic links: they are the system's.
 * A component missing is made 0700 (whatever the umask) when `create`, and
 * opened without following links; the last one is never followed.  The
 * folder opened must pass owner_ok.  A descriptor, DIR_MISSING when it does
 * not exist or cannot be made, DIR_REFUSED when it fails the trust rule. */
static int open_dir(const char *path, int create, int allow_root)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return DIR_MISSING;
    int dfd = open(buf[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return DIR_MISSING;
    char *c = buf;
    for (;;) {
        while (*c == '/') c++;
        if (!*c) break;
        char *end = c;
        while (*end && *end != '/') end++;
        char *next = end;
        while (*next == '/') next++;
        int last = *next == 0;
        *end = 0;
        int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (last ? O_NOFOLLOW : 0);
        int fd = openat(dfd, c, flags);
        if (fd < 0 && errno == ENOENT && create) {
            int made = mkdirat(dfd, c, 0700) == 0;
            fd = made || errno == EEXIST ? openat(dfd, c, flags | O_NOFOLLOW) : -1;
            if (fd >= 0 && made) fchmod(fd, 0700);
        }
        if (fd < 0) {
            /* a link where the cache's folder should be: planted, refused */
            struct stat st;
            int planted = fstatat(dfd, c, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
            close(dfd);
            if (!planted) return DIR_MISSING;
            refuse();
            return DIR_REFUSED;
        }
        close(dfd);
        dfd = fd;
        c = next;
    }
    struct stat st;
    if (fstat(dfd, &st) || !S_ISDIR(st.st_mode) || !owner_ok(&st, allow_root)) {
        close(dfd);
        refuse();
        return DIR_REFUSED;
    }
    return dfd;
}

const char *kc_dir(char *buf, size_t n)
{
    if (!cache_path(buf, n)) return NULL;
    int dfd = open_dir(buf, 1, 0);
    if (dfd < 0) return NULL;
    close(dfd);
    return buf;
}

/* Read entry `name` from folder `dfd`, checked on the opened file.  `own`:
 * the user's cache, where a damaged entry is removed and a hit is touched
 * for least-recently-used eviction; the trusted folder is only read. */
static int load_at(int dfd, const char *name, int allow_root, int own, void **data, size_t *size)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        struct stat st;
        return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode) ? refuse() : KC_MISS;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || !owner_ok(&st, allow_root)) {
        close(fd);
        return refuse();
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return KC_MISS;
    }
    unsigned char hdr[24];
    int bad = 1;
    void *buf = NULL;
    uint64_t n = 0, h = 0;
    if (fread(hdr, 1, sizeof hdr, f) == sizeof hdr && memcmp(hdr, KC_MAGIC, 4) == 0) {
        uint32_t fmt;
        memcpy(&fmt, hdr + 4, 4);
        memcpy(&n, hdr + 8, 8);
        memcpy(&h, hdr + 16, 8);
        if (fmt == KC_FORMAT && n > 0 && n < ((uint64_t)1 << 31)) {
            buf = malloc((size_t)n);
            if (buf && fread(buf, 1, (size_t)n, f) == n && fgetc(f) == EOF && kc_hash(buf, (size_t)n, 0) == h)
                bad = 0;
        }
    }
    if (!bad && own) futimens(fd, NULL);
    fclose(f);
    if (bad) {
        free(buf);
        if (!own) return KC_MISS;
        unlinkat(dfd, name, 0);   /* ours, corrupt or truncated: rebuilt by the caller */
        return KC_CORRUPT;
    }
    *data = buf;
    *size = (size_t)n;
    return KC_HIT;
}

int kc_load(const char *key, void **data, size_t *size)
{
    char dir[900], name[KC_KEY_MAX + 8];
    if (!key_ok(key, strlen(key)) || !cache_path(dir, sizeof dir)) return KC_MISS;
    snprintf(name, sizeof name, "%s.cubin", key);
    int dfd = open_dir(dir, 1, 0);
    int rc = dfd == DIR_REFUSED ? KC_REFUSED : KC_MISS;
    if (dfd >= 0) {
        rc = load_at(dfd, name, 0, 1, data, size);
        close(dfd);
    }
    const char *t = getenv("REDJIT_CACHE_TRUSTED_DIR");
    if (rc != KC_HIT && t && *t) {
        int tfd = open_dir(t, 0, 1);
        int trc = tfd == DIR_REFUSED ? KC_REFUSED : KC_MISS;
        if (tfd >= 0) {
            trc = load_at(tfd, name, 1, 0, data, size);
            close(tfd);
        }
        if (trc == KC_HIT || trc == KC_REFUSED) rc = trc;
    }
    return rc;
}

typedef struct entry {
    char name[KC_KEY_MAX + 8];
    time_t mtime;
    off_t size;
} entry;

static int by_age(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/* The folder's entries this user made: regular files of the cache's naming
 * owned by this user.  Between the fstatat here and a later unlinkat no one
 * else can swap a name: the folder passed owner_ok. */
static int own_entry(int dfd, const char *name, struct stat *st)
{
    return entry_name(name) && fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st->st_mode) &&
           st->st_uid == geteuid();
}

static DIR *list_dir(int dfd)
{
    int fd = dup(dfd);
    if (fd < 0) return NULL;
    DIR *d = fdopendir(fd);
    if (!d) close(fd);
    return d;
}

static void evict(int dfd)
{
    const char *m = getenv("REDJIT_CACHE_MAX_MB");
    long long mb = m ? atoll(m) : 0;
    if (mb <= 0) mb = 512;
    if (mb > (LLONG_MAX >> 20)) mb = LLONG_MAX >> 20;   /* a huge setting is "no limit", not an overflow */
    long long limit = mb << 20;
    DIR *d = list_dir(dfd);
    if (!d) return;
    entry *e = NULL;
    int n = 0, cap = 0;
    long long total = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        if (!own_entry(dfd, de->d_name, &st)) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            entry *ne = realloc(e, (size_t)cap * sizeof *e);
            if (!ne) break;
            e = ne;
        }
        snprintf(e[n].name, sizeof e[n].name, "%s", de->d_name);
        e[n].mtime = st.st_mtime;
        e[n].size = st.st_size;
        total += st.st_size;
        n++;
    }
    closedir(d);
    if (total > limit && e) {
        qsort(e, (size_t)n, sizeof *e, by_age);
        for (int i = 0; i < n && total > limit; i++)
            if (!unlinkat(dfd, e[i].name, 0)) total -= e[i].size;
    }
    free(e);
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *s = p;
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return 0;
        s += w;
        n -= (size_t)w;
    }
    return 1;
}

/* A new temporary file ".KEY.XXXXXX" in `dfd`, mode 0600 whatever the
 * umask; its name in `tmp`. */
static int make_temp(int dfd, const char *key, char *tmp, size_t n)
{
    static unsigned counter;
    for (int tries = 0; tries < 32; tries++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned r = (unsigned)getpid() * 2654435761u ^ (unsigned)ts.tv_nsec ^
                     __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * 40503u;
        snprintf(tmp, n, ".%s.%06x", key, r & 0xffffffu);
        int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            fchmod(fd, 0600);
            return fd;
        }
        if (errno != EEXIST) return -1;
    }
    return -1;
}

void kc_store(const char *key, const void *data, size_t size)
{
    char dir[900], name[KC_KEY_MAX + 8], tmp[KC_KEY_MAX + 16];
    if (!key_ok(key, strlen(key)) || !cache_path(dir, sizeof dir)) return;
    int dfd = open_dir(dir, 1, 0);
    if (dfd < 0) return;   /* missing, or one this cache would not read */
    snprintf(name, sizeof name, "%s.cubin", key);
    int fd = make_temp(dfd, key, tmp, sizeof tmp);
    if (fd < 0) {
        close(dfd);
        return;
    }
    unsigned char hdr[24];
    uint32_t fmt = KC_FORMAT;
    uint64_t n = size, h = kc_hash(data, size, 0);
    memcpy(hdr, KC_MAGIC, 4);
    memcpy(hdr + 4, &fmt, 4);
    memcpy(hdr + 8, &n, 8);
    memcpy(hdr + 16, &h, 8);
    int ok = write_all(fd, hdr, sizeof hdr) && write_all(fd, data, size);
    ok = close(fd) == 0 && ok;
    if (!ok || renameat(dfd, tmp, dfd, name) != 0) unlinkat(dfd, tmp, 0);
    else evict(dfd);
    close(dfd);
}

int kc_clear(void)
{
    char dir[900];
    if (!cache_path(dir, sizeof dir)) return 0;
    int dfd = open_dir(dir, 0, 0);
    if (dfd < 0) return 0;
    DIR *d = list_dir(dfd);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        struct stat st;
        if (own_entry(dfd, de->d_name, &st) && !unlinkat(dfd, de->d_name, 0)) n++;
    }
    if (d) closedir(d);
    close(dfd);
    return n;
}
