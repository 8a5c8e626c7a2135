/*
 * fakenccl.c -- a stand-in for libnccl.so.2, for testing redjit's NCCL engine without GPUs
 * (REDJIT_NCCL_LIB names it).  The ranks are processes of one machine; they meet in POSIX
 * shared memory named by the unique id, and every collective is a copy into the rank's
 * slot, a barrier, the work in rank order, a barrier.  "Device" pointers are host pointers,
 * as tests/fakecuda makes them.  Streams are ignored: each call is done when it returns,
 * in a group too.
 *
 * FAKENCCL_FAIL_AT=N makes the N-th collective of every rank (counted from 1) fail with
 * ncclSystemError, so that the engine's error path can be seen.  FAKENCCL_HANG_AT=N makes the
 * N-th one never end, as when another rank never comes: it does nothing, and the stand-in
 * driver's streams look busy (fakecuda_busy) until one is synchronised, which ncclCommAbort's
 * caller may then do.  fakenccl_calls() says how many were made.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct nccl_id {
    char internal[128];
} nccl_id;

enum { OK = 0, SYSTEM_ERROR = 2, INVALID_ARGUMENT = 4 };
enum { T_I8, T_U8, T_I32, T_U32, T_I64, T_U64, T_F16, T_F32, T_F64, T_BF16 };
enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN };

#define SLOT ((size_t)8 << 20)   /* bytes a rank may send in one collective */
#define MAX_RANKS 16

typedef struct area {
    atomic_int state;        /* 0 fresh, 1 being set up, 2 ready */
    int nranks;
    pthread_barrier_t bar;
} area;

typedef struct comm {
    area *a;
    unsigned char *slots;
    size_t bytes;
    int rank, nranks;
} comm;

static const char prefix[] = "fakenccl:";
static long ncalls;

EXPORT const char *ncclGetErrorString(int r)
{
    switch (r) {
    case OK: return "no error (fakenccl)";
    case SYSTEM_ERROR: return "system error (fakenccl)";
    case INVALID_ARGUMENT: return "invalid argument (fakenccl)";
    }
    return "unknown error (fakenccl)";
}

EXPORT int ncclGetUniqueId(nccl_id *id)
{
    static atomic_long seq;
    memset(id, 0, sizeof *id);
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    snprintf(id->internal, sizeof id->internal, "%s/fakenccl.%ld.%ld.%ld", prefix, (long)getpid(),
             (long)t.tv_nsec, atomic_fetch_add(&seq, 1));
    return OK;
}

EXPORT int ncclCommInitRank(comm **out, int nranks, nccl_id id, int rank)
{
    *out = NULL;
    if (strncmp(id.internal, prefix, sizeof prefix - 1) != 0 || nranks < 1 || nranks > MAX_RANKS || rank < 0 ||
        rank >= nranks)
        return INVALID_ARGUMENT;
    const char *name = id.internal + sizeof prefix - 1;
    size_t head = (sizeof(area) + 4095) & ~(size_t)4095, bytes = head + SLOT * (size_t)nranks;
    int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
    if (fd < 0) return SYSTEM_ERROR;
    if (ftruncate(fd, (off_t)bytes) != 0) {
        close(fd);
        return SYSTEM_ERROR;
    }
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return SYSTEM_ERROR;
    area *a = m;
    int fresh = 0;
    if (atomic_compare_exchange_strong(&a->state, &fresh, 1)) {
        pthread_barrierattr_t ba;
        pthread_barrierattr_init(&ba);
        pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
        pthread_barrier_init(&a->bar, &ba, (unsigned)nranks);
        a->nranks = nranks;
        atomic_store(&a->state, 2);
    }
    for (int waited = 0; atomic_load(&a->state) != 2; waited++) {
        if (waited > 30000) {   /* 30 s */
            munmap(m, bytes);
            return SYSTEM_ERROR;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (a->nranks != nranks) {
        munmap(m, bytes);
        return INVALID_ARGUMENT;
    }
    pthread_barrier_wait(&a->bar);   /* all have it mapped: the name can go */
    if (rank == 0) shm_unlink(name);
    comm *c = calloc(1, sizeof *c);
    if (!c) {
        munmap(m, bytes);
        return SYSTEM_ERROR;
    }
    *c = (comm){a, (unsigned char *)m + head, bytes, rank, nranks};
    *out = c;
    return OK;
}

static int drop(comm *c)
{
    if (!c) return INVALID_ARGUMENT;
    munmap(c->a, c->bytes);
    free(c);
    return OK;
}

EXPORT int ncclCommDestroy(comm *c) { return drop(c); }
EXPORT int ncclCommAbort(comm *c) { return drop(c); }

EXPORT int ncclCommCount(const comm *c, int *n)
{
    *n = c->nranks;
    return OK;
}

EXPORT int ncclCommUserRank(const comm *c, int *r)
{
    *r = c->rank;
    return OK;
}

EXPORT int ncclCommCuDevice(const comm *c, int *d)
{
    *d = 0;   /* tests/fakecuda's one device */
    return OK;
}

/* Groups: each collective is done when called, so that a group only has to be well formed. */
static int group_depth;

EXPORT int ncclGroupStart(void)
{
    group_depth++;
    return OK;
}

EXPORT int ncclGroupEnd(void)
{
    if (group_depth == 0) return INVALID_ARGUMENT;
    group_depth--;
    return OK;
}

EXPORT int ncclCommGetAsyncError(comm *c, int *e)
{
    *e = OK;
    return OK;
}

static size_t type_size(int t)
{
    switch (t) {
    case T_I8: case T_U8: return 1;
    case T_F16: case T_BF16: return 2;
    case T_I32: case T_U32: case T_F32: return 4;
    }
    return 8;
}

EXPORT long fakenccl_calls(void)
{
    return ncalls;
}

enum { HANG = -1 };

/* The injected failure or hang, and the checks every collective makes. */
static int start(comm *c, size_t bytes)
{
    (void)c;
    const char *at = getenv("FAKENCCL_FAIL_AT"), *hang = getenv("FAKENCCL_HANG_AT");
    ++ncalls;
    if (at && ncalls == atol(at)) return SYSTEM_ERROR;
    if (hang && ncalls == atol(hang)) {
        void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        void (*busy)(int) = NULL;
        if (cuda) *(void **)&busy = dlsym(cuda, "fakecuda_busy");
        if (!busy) return SYSTEM_ERROR;   /* (not under the stand-in driver: no hang to fake) */
        busy(INT_MAX);
        return HANG;
    }
    return bytes > SLOT ? INVALID_ARGUMENT : OK;
}

EXPORT int ncclAllGather(const void *send, void *recv, size_t count, int type, comm *c, void *stream)
{
    size_t bytes = count * type_size(type);
    int rc = start(c, bytes);
    if (rc) return rc == HANG ? OK : rc;
    memcpy(c->slots + SLOT * (size_t)c->rank, send, bytes);
    pthread_barrier_wait(&c->a->bar);
    for (int r = 0; r < c->nranks; r++) memcpy((char *)recv + bytes * (size_t)r, c->slots + SLOT * (size_t)r, bytes);
    pthread_barrier_wait(&c->a->bar);
    return OK;
}

#define FOLD(T)                                                                                        \
    do {                                                                                               \
        T *o = out;                                                                                    \
        const T *x = in;                                                                               \
        for (size_t i = 0; i < n; i++)                                                                 \
            o[i] = op == OP_SUM ? (T)(o[i] + x[i]) : op == OP_PROD ? (T)(o[i] * x[i])                  \
                 : op == OP_MAX ? (x[i] > o[i] ? x[i] : o[i]) : (x[i] < o[i] ? x[i] : o[i]);          \
    } while (0)

static int fold(void *out, const void *in, size_t n, int type, int op)
{
    switch (type) {
    case T_I8: FOLD(int8_t); break;
    case T_U8: FOLD(uint8_t); break;
    case T_I32: FOLD(int32_t); break;
    case T_U32: FOLD(uint32_t); break;
    case T_I64: FOLD(int64_t); break;
    case T_U64: FOLD(uint64_t); break;
    case T_F32: FOLD(float); break;
    case T_F64: FOLD(double); break;
    default: return INVALID_ARGUMENT;
    }
    return OK;
}

EXPORT int ncclAllReduce(const void *send, void *recv, size_t count, int type, int op, comm *c, void *stream)
{
    size_t bytes = count * type_size(type);
    int rc = start(c, bytes);
    if (rc) return rc == HANG ? OK : rc;
    if (op < OP_SUM || op > OP_MIN) return INVALID_ARGUMENT;
    memcpy(c->slots + SLOT * (size_t)c->rank, send, bytes);
    pthread_barrier_wait(&c->a->bar);
    memcpy(recv, c->slots, bytes);
    for (int r = 1; r < c->nranks && !rc; r++) rc = fold(recv, c->slots + SLOT * (size_t)r, count, type, op);
    pthread_barrier_wait(&c->a->bar);
    return rc;
}
