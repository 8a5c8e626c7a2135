/*
 * kcache.c -- on-disk CUBIN cache (see kcache.h).  File layout:
 *   "RJCB" | u32 format | u64 payload size | u64 payload hash | payload
 */
#include "kcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#define KC_MAGIC "RJCB"
#define KC_FORMAT 1u

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

static int mkdirs(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *q = tmp + 1; *q; q++)
        if (*q == '/') {
            *q = 0;
            if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
            *q = '/';
        }
    if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
    return 0;
}

const char *kc_dir(char *buf, size_t n)
{
    const char *off = getenv("REDJIT_CACHE");
    if (off && strcmp(off, "0") == 0) return NULL;
    const char *d = getenv("REDJIT_CACHE_DIR");
    if (d && *d) {
        snprintf(buf, n, "%s", d);
    } else {
        const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (x && *x) snprintf(buf, n, "%s/redjit", x);
        else if (home && *home) snprintf(buf, n, "%s/.cache/redjit", home);
        else return NULL;
    }
    if (mkdirs(buf)) return NULL;
    return buf;
}

int kc_load(const char *key, void **data, size_t *size)
{
    char dir[900], path[1100];
    if (!kc_dir(dir, sizeof dir)) return -1;
    snprintf(path, sizeof path, "%s/%s.cubin", dir, key);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
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
    fclose(f);
    if (bad) {
        free(buf);
        unlink(path);   /* corrupt or truncated: rebuilt by the caller */
        return 2;
    }
    /* touch it, for least-recently-used eviction */
    utimes(path, NULL);
    *data = buf;
    *size = (size_t)n;
    return 0;
}

typedef struct entry {
    char name[300];
    time_t mtime;
    off_t size;
} entry;

static int by_age(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

static void evict(const char *dir)
{
    const char *m = getenv("REDJIT_CACHE_MAX_MB");
    long long limit = (m && atoll(m) > 0 ? atoll(m) : 512) * 1024 * 1024;
    DIR *d = opendir(dir);
    if (!d) return;
    entry *e = NULL;
    int n = 0, cap = 0;
    long long total = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 7 || strcmp(de->d_name + len - 6, ".cubin") != 0 || len >= sizeof e->name) continue;
        char path[1300];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (stat(path, &st)) continue;
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
        for (int i = 0; i < n && total > limit; i++) {
            char path[1300];
            snprintf(path, sizeof path, "%s/%s", dir, e[i].name);
            if (!unlink(path)) total -= e[i].size;
        }
    }
    free(e);
}

void kc_store(const char *key, const void *data, size_t size)
{
    char dir[900], path[1100], tmp[1200];
    if (!kc_dir(dir, sizeof dir)) return;
    snprintf(path, sizeof path, "%s/%s.cubin", dir, key);
    snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dir, key);
    int fd = mkstemp(tmp);
    if (fd < 0) return;
    unsigned char hdr[24];
    uint32_t fmt = KC_FORMAT;
    uint64_t n = size, h = kc_hash(data, size, 0);
    memcpy(hdr, KC_MAGIC, 4);
    memcpy(hdr + 4, &fmt, 4);
    memcpy(hdr + 8, &n, 8);
    memcpy(hdr + 16, &h, 8);
    int ok = write(fd, hdr, sizeof hdr) == (ssize_t)sizeof hdr && write(fd, data, size) == (ssize_t)size;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return;
    }
    evict(dir);
}

int kc_clear(void)
{
    char dir[900];
    if (!kc_dir(dir, sizeof dir)) return 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 7 || strcmp(de->d_name + len - 6, ".cubin") != 0) continue;
        char path[1300];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (!unlink(path)) n++;
    }
    closedir(d);
    return n;
}
