/*
 * test_kcache.c -- the on-disk kernel cache under damage and contention, on
 * any machine (it stores opaque bytes; no GPU needed): truncated, zero-length
 * and garbage entries are detected and removed, a read-only folder degrades to
 * no caching, a full disk leaves no half entry, and 8 processes writing the
 * same and different keys at once leave only whole, correct entries.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/kcache.h"

#include "check.h"

static void payload(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((i * 2654435761u + seed) >> 7);
}

static int load_equals(const char *key, const unsigned char *want, size_t n)
{
    void *d = NULL;
    size_t got = 0;
    int rc = kc_load(key, &d, &got);
    int ok = rc == 0 && got == n && memcmp(d, want, n) == 0;
    free(d);
    return ok;
}

static void entry_path(char *out, size_t n, const char *dir, const char *key)
{
    snprintf(out, n, "%s/%s.cubin", dir, key);
}

static void damage(void)
{
    char dir[512], path[700];
    kc_dir(dir, sizeof dir);
    unsigned char buf[5000];
    payload(buf, sizeof buf, 1);
    kc_store("aaaa", buf, sizeof buf);
    CHECK(load_equals("aaaa", buf, sizeof buf), "a stored entry reads back");

    /* truncated */
    entry_path(path, sizeof path, dir, "aaaa");
    CHECK(truncate(path, 1000) == 0, "truncate");
    void *d = NULL;
    size_t n = 0;
    CHECK(kc_load("aaaa", &d, &n) == 2 && access(path, F_OK) != 0, "a truncated entry is refused and removed");
    free(d);

    /* zero length */
    FILE *f = fopen(path, "wb");
    if (f) fclose(f);
    CHECK(kc_load("aaaa", &d, &n) == 2, "a zero-length entry is refused");

    /* garbage with a valid-looking header but a wrong checksum */
    kc_store("aaaa", buf, sizeof buf);
    f = fopen(path, "r+b");
    if (f) {
        fseek(f, 24 + 100, SEEK_SET);
        fputc(0x5a ^ buf[100], f);
        fclose(f);
    }
    CHECK(kc_load("aaaa", &d, &n) == 2, "a flipped byte is caught by the checksum");

    /* pure garbage */
    f = fopen(path, "wb");
    if (f) {
        fputs("this is not a cubin at all, not even close", f);
        fclose(f);
    }
    CHECK(kc_load("aaaa", &d, &n) == 2, "garbage is refused");

    /* rebuilt afterwards */
    kc_store("aaaa", buf, sizeof buf);
    CHECK(load_equals("aaaa", buf, sizeof buf), "the entry is rebuilt after damage");
    CHECK(kc_clear() >= 1, "clear removes entries");
    CHECK(kc_load("aaaa", &d, &n) == -1, "a cleared entry is gone");
}

static void readonly(const char *base)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ro", base);
    mkdir(dir, 0555);
    chmod(dir, 0555);
    setenv("REDJIT_CACHE_DIR", dir, 1);
    unsigned char buf[100];
    payload(buf, sizeof buf, 2);
    kc_store("bbbb", buf, sizeof buf);   /* must not fail loudly or crash */
    void *d = NULL;
    size_t n = 0;
    int rc = kc_load("bbbb", &d, &n);
    free(d);
    /* root can write anyway; either way the store and load must be sane */
    CHECK(rc == -1 || (rc == 0 && n == sizeof buf), "a read-only folder degrades to no caching (rc %d)", rc);
    setenv("REDJIT_CACHE", "0", 1);
    CHECK(kc_load("bbbb", &d, &n) == -1, "REDJIT_CACHE=0 disables the cache");
    unsetenv("REDJIT_CACHE");
}

/* A full disk, as a file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored so
 * a write past it fails with EFBIG the way one on a full disk fails with
 * ENOSPC): a store that does not fit leaves no entry and no temporary file,
 * and a later load is a miss; one that fits is stored.  In a child process,
 * whose exit status is its number of failures. */
static void full_disk(const char *base)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/full", base);
    setenv("REDJIT_CACHE_DIR", dir, 1);
    pid_t pid = fork();
    if (pid == 0) {
        int bad = 0;
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {4096, 4096};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(100);
        static unsigned char big[65536], small[200];
        payload(big, sizeof big, 3);
        payload(small, sizeof small, 4);
        kc_store("full0", big, sizeof big);   /* must not crash or leave a half entry */
        void *d = NULL;
        size_t n = 0;
        if (kc_load("full0", &d, &n) != -1) bad++;
        free(d);
        kc_store("full1", small, sizeof small);
        if (!load_equals("full1", small, sizeof small)) bad++;
        DIR *dd = opendir(dir);
        struct dirent *de;
        while (dd && (de = readdir(dd)))
            if (de->d_name[0] == '.' && strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) bad++;
        if (dd) closedir(dd);
        _exit(bad);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 100, "the file-size limit could be set (status %d)", st);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "a full disk: no half entry, no temporary file, a later load misses, a small entry still fits "
          "(%d failures)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* 8 processes store the same key (identical bytes) and their own keys 50
 * times each; every entry must load back whole. */
static void contention(const char *base)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/busy", base);
    setenv("REDJIT_CACHE_DIR", dir, 1);
    pid_t kids[8];
    for (int k = 0; k < 8; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            unsigned char shared[70000], own[3000];
            payload(shared, sizeof shared, 7);
            payload(own, sizeof own, 100 + (unsigned)k);
            char key[32];
            snprintf(key, sizeof key, "own%d", k);
            for (int i = 0; i < 50; i++) {
                kc_store("shared", shared, sizeof shared);
                kc_store(key, own, sizeof own);
                void *d = NULL;
                size_t n = 0;
                if (kc_load("shared", &d, &n) == 0 && (n != sizeof shared || memcmp(d, shared, n))) _exit(3);
                free(d);
            }
            _exit(0);
        }
    }
    int bad = 0;
    for (int k = 0; k < 8; k++) {
        int st = 0;
        waitpid(kids[k], &st, 0);
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    CHECK(!bad, "no process read a half-written or wrong shared entry");
    unsigned char shared[70000];
    payload(shared, sizeof shared, 7);
    CHECK(load_equals("shared", shared, sizeof shared), "the shared entry is whole afterwards");
    int ok = 1;
    for (int k = 0; k < 8; k++) {
        unsigned char own[3000];
        char key[32];
        payload(own, sizeof own, 100 + (unsigned)k);
        snprintf(key, sizeof key, "own%d", k);
        ok &= load_equals(key, own, sizeof own);
    }
    CHECK(ok, "every process's own entry is whole");
    /* no temporary files left behind */
    DIR *d = opendir(dir);
    int tmp = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] == '.' && strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) tmp++;
    if (d) closedir(d);
    CHECK(tmp == 0, "no temporary files are left (%d)", tmp);
}

int main(void)
{
    char base[] = "/tmp/redjit-kcache-XXXXXX";
    if (!mkdtemp(base)) return 2;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/main", base);
    setenv("REDJIT_CACHE_DIR", dir, 1);
    unsetenv("REDJIT_CACHE");
    damage();
    readonly(base);
    full_disk(base);
    contention(base);
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail != 0;
}
