/*
 * test_kcache.c -- the on-disk kernel cache under damage and contention, on
 * any machine (it stores opaque bytes; no GPU needed): truncated, zero-length
 * and garbage entries are detected and removed, a read-only folder degrades to
 * no caching, a full disk leaves no half entry, and 8 processes writing the
 * same and different keys at once leave only whole, correct entries.  And
 * the trust rule (kcache.h): only a folder and entries that are the user's
 * and no one else can write are read, and only the user's entries deleted.
 * Through the public API, with the stand-in driver (tests/fakecuda) and
 * NVRTC where present, a refusal shows in red_cache_stats.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <redjit.h>

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

/* ---- the trust rule ------------------------------------------------------ */

#define OTHER_UID 65534   /* nobody: "another user" when the test runs as root */

static int is_root;

static mode_t mode_of(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? st.st_mode & 07777 : (mode_t)-1;
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* kc_load's answer, and whether it counted one refusal. */
static int load_rc(const char *key, int *counted)
{
    long long before = kc_refusals();
    void *d = NULL;
    size_t n = 0;
    int rc = kc_load(key, &d, &n);
    free(d);
    *counted = kc_refusals() == before + 1;
    return rc;
}

/* A fresh cache folder `base`/`name`, made by the cache itself. */
static void use_dir(char *dir, size_t n, const char *base, const char *name)
{
    snprintf(dir, n, "%s/%s", base, name);
    setenv("REDJIT_CACHE_DIR", dir, 1);
}

/* Folders 0700 and entries 0600 under umask 0, a missing parent made too;
 * and a normal cache still hits, with nothing refused. */
static void modes(const char *base)
{
    char dir[600], parent[600], path[700];
    snprintf(parent, sizeof parent, "%s/um", base);
    use_dir(dir, sizeof dir, parent, "cache");
    mode_t old = umask(0);
    unsigned char buf[300];
    payload(buf, sizeof buf, 11);
    kc_store("m0", buf, sizeof buf);
    umask(old);
    entry_path(path, sizeof path, dir, "m0");
    CHECK(mode_of(parent) == 0700, "a parent folder the cache makes is 0700 under umask 0 (%o)", mode_of(parent));
    CHECK(mode_of(dir) == 0700, "the cache folder is 0700 under umask 0 (%o)", mode_of(dir));
    CHECK(mode_of(path) == 0600, "an entry is 0600 under umask 0 (%o)", mode_of(path));
    int counted;
    long long before = kc_refusals();
    CHECK(load_equals("m0", buf, sizeof buf) && kc_refusals() == before, "a normal cache hits, nothing refused");
    CHECK(load_rc("nothere", &counted) == KC_MISS && !counted, "a missing entry is a miss, not a refusal");
}

/* An entry with the right key and checksum that another user owns: refused,
 * counted, left in place (not ours to delete).  As root only. */
static void foreign_entry(const char *base)
{
    if (!is_root) {
        printf("skip: planted entry of another owner (chown needs root; running as uid %d)\n", (int)geteuid());
        return;
    }
    char dir[600], path[700];
    use_dir(dir, sizeof dir, base, "foreign");
    unsigned char buf[400];
    payload(buf, sizeof buf, 12);
    kc_store("f0", buf, sizeof buf);
    entry_path(path, sizeof path, dir, "f0");
    CHECK(chown(path, OTHER_UID, OTHER_UID) == 0, "chown the entry to %d", OTHER_UID);
    int counted;
    CHECK(load_rc("f0", &counted) == KC_REFUSED && counted, "an entry another user owns is refused and counted");
    CHECK(exists(path), "the refused entry is not deleted");
    /* the folder itself another user's, the entry ours */
    kc_store("f1", buf, sizeof buf);
    CHECK(chown(dir, OTHER_UID, OTHER_UID) == 0, "chown the folder to %d", OTHER_UID);
    CHECK(load_rc("f1", &counted) == KC_REFUSED && counted, "a folder another user owns is refused and counted");
    CHECK(kc_dir(path, sizeof path) == NULL, "kc_dir gives no folder another user owns");
}

/* Group- or other-writable entries and folders are refused, and read again
 * once fixed; nothing is stored into a refused folder. */
static void writable(const char *base)
{
    char dir[600], path[700];
    use_dir(dir, sizeof dir, base, "gw");
    unsigned char buf[500];
    payload(buf, sizeof buf, 13);
    kc_store("g0", buf, sizeof buf);
    entry_path(path, sizeof path, dir, "g0");
    int counted;
    chmod(path, 0620);
    CHECK(load_rc("g0", &counted) == KC_REFUSED && counted, "a group-writable entry is refused and counted");
    CHECK(exists(path), "the group-writable entry is not deleted");
    chmod(path, 0602);
    CHECK(load_rc("g0", &counted) == KC_REFUSED && counted, "an other-writable entry is refused");
    chmod(path, 0644);
    CHECK(load_equals("g0", buf, sizeof buf), "a readable but not writable entry (0644) is read");
    chmod(dir, 0770);
    CHECK(load_rc("g0", &counted) == KC_REFUSED && counted, "a group-writable folder is refused and counted");
    kc_store("g1", buf, sizeof buf);
    entry_path(path, sizeof path, dir, "g1");
    CHECK(!exists(path), "nothing is stored into a group-writable folder");
    chmod(dir, 0757);
    CHECK(load_rc("g0", &counted) == KC_REFUSED && counted, "an other-writable folder is refused");
    chmod(dir, 0755);
    CHECK(load_equals("g0", buf, sizeof buf), "a 0755 folder (the old default) is read");
}

/* Symbolic links: in place of an entry, of the cache folder (with and
 * without a trailing slash). */
static void links(const char *base)
{
    char dir[600], other[600], path[700], target[700];
    unsigned char buf[600];
    payload(buf, sizeof buf, 14);
    /* a whole, correct entry elsewhere, linked in under a key */
    use_dir(other, sizeof other, base, "elsewhere");
    kc_store("l0", buf, sizeof buf);
    entry_path(target, sizeof target, other, "l0");
    use_dir(dir, sizeof dir, base, "links");
    kc_store("l1", buf, sizeof buf);
    entry_path(path, sizeof path, dir, "l0");
    CHECK(symlink(target, path) == 0, "symlink an entry");
    int counted;
    CHECK(load_rc("l0", &counted) == KC_REFUSED && counted, "a symbolic link in place of an entry is refused");
    CHECK(exists(path) && exists(target), "the link and its target are left alone");
    CHECK(kc_clear() == 1 && exists(path) && exists(target), "kc_clear removes the entry, not the link");
    /* the folder a link to a good folder */
    char link[600];
    snprintf(link, sizeof link, "%s/linkdir", base);
    CHECK(symlink(other, link) == 0, "symlink the folder");
    setenv("REDJIT_CACHE_DIR", link, 1);
    CHECK(load_rc("l0", &counted) == KC_REFUSED && counted, "a cache folder that is a symbolic link is refused");
    kc_store("l2", buf, sizeof buf);
    entry_path(path, sizeof path, other, "l2");
    CHECK(!exists(path), "nothing is stored through a linked folder");
    CHECK(kc_clear() == 0 && exists(target), "kc_clear removes nothing through a linked folder");
    snprintf(path, sizeof path, "%s/", link);
    setenv("REDJIT_CACHE_DIR", path, 1);
    CHECK(load_rc("l0", &counted) == KC_REFUSED && counted, "... also written with a trailing slash");
}

/* Eviction and kc_clear delete only the user's entries of the cache's
 * naming: not another user's file of the right name (root only), not a file
 * of another name, not a temporary file, not a folder. */
static void foreign_files(const char *base)
{
    char dir[600], path[700];
    use_dir(dir, sizeof dir, base, "evict");
    static unsigned char big[700 * 1024];
    payload(big, sizeof big, 15);
    kc_store("e0", big, sizeof big);   /* makes the folder */
    const char *keep[] = {"notes.txt", "x.y.cubin", ".e9.abcdef", "foreign.cubin"};
    int nkeep = is_root ? 4 : 3;
    for (int i = 0; i < nkeep; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, keep[i]);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            CHECK(write(fd, big, sizeof big) == (ssize_t)sizeof big, "write %s", keep[i]);
            close(fd);
        }
        if (i == 3) CHECK(chown(path, OTHER_UID, OTHER_UID) == 0, "chown %s", keep[i]);
        struct timespec old[2] = {{1000, 0}, {1000, 0}};   /* the oldest in the folder */
        utimensat(AT_FDCWD, path, old, 0);
    }
    if (!is_root) printf("skip: eviction beside another user's entry (chown needs root)\n");
    snprintf(path, sizeof path, "%s/sub.cubin", dir);
    mkdir(path, 0700);
    setenv("REDJIT_CACHE_MAX_MB", "1", 1);
    kc_store("e1", big, sizeof big);
    kc_store("e2", big, sizeof big);   /* over 1 MiB: e0, then e1 go */
    unsetenv("REDJIT_CACHE_MAX_MB");
    int counted;
    CHECK(load_rc("e0", &counted) == KC_MISS, "eviction removed the user's oldest entry");
    CHECK(load_equals("e2", big, sizeof big), "the newest entry is kept");
    int kept = 0;
    for (int i = 0; i < nkeep; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, keep[i]);
        kept += exists(path);
    }
    CHECK(kept == nkeep, "eviction left the files it did not make (%d of %d)", kept, nkeep);
    CHECK(kc_clear() >= 1 && load_rc("e2", &counted) == KC_MISS, "kc_clear removes the user's entries");
    kept = 0;
    for (int i = 0; i < nkeep; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, keep[i]);
        kept += exists(path);
    }
    snprintf(path, sizeof path, "%s/sub.cubin", dir);
    CHECK(kept == nkeep && exists(path), "kc_clear left the files and folder it did not make (%d of %d)", kept,
          nkeep);
}

/* REDJIT_CACHE_TRUSTED_DIR: read on a miss when it and the entry are root's
 * or the user's and not writable by others; never written or cleared. */
static void trusted(const char *base)
{
    char tdir[600], dir[600], path[700];
    unsigned char buf[800];
    payload(buf, sizeof buf, 16);
    use_dir(tdir, sizeof tdir, base, "admin");   /* prepared as the admin would */
    kc_store("t0", buf, sizeof buf);
    chmod(tdir, 0755);
    entry_path(path, sizeof path, tdir, "t0");
    chmod(path, 0644);
    use_dir(dir, sizeof dir, base, "user");
    setenv("REDJIT_CACHE_TRUSTED_DIR", tdir, 1);
    CHECK(load_equals("t0", buf, sizeof buf), "an entry of the trusted folder is read on a miss");
    CHECK(kc_clear() == 0 && exists(path), "kc_clear leaves the trusted folder alone");
    kc_store("t1", buf, sizeof buf);
    entry_path(path, sizeof path, tdir, "t1");
    CHECK(!exists(path), "nothing is stored into the trusted folder");
    int counted;
    chmod(tdir, 0775);
    CHECK(load_rc("t0", &counted) == KC_REFUSED && counted, "a group-writable trusted folder is refused");
    chmod(tdir, 0755);
    if (is_root) {
        CHECK(chown(tdir, OTHER_UID, OTHER_UID) == 0, "chown the trusted folder");
        CHECK(load_rc("t0", &counted) == KC_REFUSED && counted,
              "a trusted folder owned by neither root nor the user is refused");
        CHECK(chown(tdir, 0, 0) == 0, "chown it back");
    }
    unsetenv("REDJIT_CACHE_TRUSTED_DIR");
}

static void trust(const char *base)
{
    is_root = geteuid() == 0;
    modes(base);
    foreign_entry(base);
    writable(base);
    links(base);
    foreign_files(base);
    trusted(base);
}

/* Through the public API, on the stand-in driver: a kernel compiled and
 * stored, read from disk by a new context, refused once the folder is
 * group-writable; red_cache_stats tells which. */
static int gpu_stats(const char *text, red_cache_info *ci)
{
    red_ctx *ctx = NULL;
    if (red_open(&ctx)) return -1;
    red_set_option(ctx, RED_OPT_DEVICE, RED_DEVICE_GPU);
    double v;
    int rc = red_eval_f64(ctx, text, NULL, 0, &v);
    red_cache_stats(ctx, ci);
    red_close(ctx);
    return rc;
}

static void through_api(const char *base)
{
    red_ctx *ctx = NULL;
    int gpu = red_open(&ctx) == RED_OK && red_gpu_available(ctx);
    if (!gpu) printf("skip: red_cache_stats' disk_refused (no GPU or stand-in driver, or no NVRTC: %s)\n",
                     ctx ? red_errmsg(ctx) : "red_open failed");
    red_close(ctx);
    if (!gpu) return;
    char dir[600];
    use_dir(dir, sizeof dir, base, "api");
    const char *text = "count(true) over i in 0..1000";
    red_cache_info a, b, c;
    int rc = gpu_stats(text, &a);
    CHECK(rc == RED_OK && a.compiles >= 1 && a.disk_refused == 0, "a first run compiles (rc %d)", rc);
    rc = gpu_stats(text, &b);
    CHECK(rc == RED_OK && b.disk_hits >= 1 && b.compiles == 0 && b.disk_refused == 0,
          "a new context reads it from disk (rc %d, %lld hits)", rc, b.disk_hits);
    chmod(dir, 0770);
    rc = gpu_stats(text, &c);
    CHECK(rc == RED_OK && c.disk_hits == 0 && c.compiles >= 1 && c.disk_refused >= 1,
          "a group-writable folder: compiled, refused %lld (rc %d)", c.disk_refused, rc);
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
    trust(base);
    through_api(base);
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail != 0;
}
