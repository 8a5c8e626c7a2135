// rj_prelude.cuh -- device code every generated kernel starts with: the
// parameter block, fault reporting, element loads and conversions, and the
// operators with the semantics docs/language.md gives (wrapping integers,
// division by zero is 0, saturating float-to-int casts, NaN-propagating
// min/max).  Embedded at build time; needs no headers, so NVRTC stays fast.

#ifndef RJ_BLOCK
#define RJ_BLOCK 256
#endif

// The reserved parameter slots (RJ_N ... RJ_SEQ) are in rj_abi.h, embedded ahead of this file.

struct Params { long long v[RJ_NPARAMS]; };

__device__ __forceinline__ void rj_fault(const Params &P, unsigned long long code,
                                         unsigned long long node, unsigned long long dim,
                                         long long value)
{
    unsigned long long *e = (unsigned long long *)P.v[RJ_ERR];
    if (atomicCAS(e, 0ull, code) == 0ull) {
        e[1] = node;
        e[2] = dim;
        e[3] = (unsigned long long)value;
    }
}

// The end of a run whose results come to the host, called by every thread
// of the block whose thread 0 wrote the last result, once every other
// block's writes are visible to it: the workspace (fault record, then the
// results staged beside it) copied into pinned host memory by the first
// warp, a word a lane (one copy by thread 0 paid a round trip to L2 a
// word), and after a system-wide fence the run's sequence number into the
// word before it, which the host watches.  No copy engine and no stream
// synchronisation between the kernel and the host, which cost a third more
// (bench/TUNING.md).  The fence makes every word the run wrote visible
// before the host takes the sequence number and gives the run's buffers
// back; no cheaper fence or release store did.
__device__ __forceinline__ void rj_publish(const Params &P)
{
    volatile unsigned long long *dst = (volatile unsigned long long *)P.v[RJ_PUB];
    if (!dst) return;
    __syncthreads();   // thread 0's results and every thread's faults are written
    if (threadIdx.x >= 32) return;
    const volatile unsigned long long *ws = (const volatile unsigned long long *)P.v[RJ_ERR];
    // a loop, not unrolled: NVVM's unrolling of this copy of a few words
    // was a ninth of NVRTC's time over sum(x)'s kernel
#pragma unroll 1
    for (long long i = threadIdx.x; i < P.v[RJ_PUBN]; i += 32) dst[i + 1] = ws[i];
    __threadfence_system();
    __syncwarp();
    if (threadIdx.x == 0) dst[0] = (unsigned long long)P.v[RJ_SEQ];
}

// A thread's first out-of-range subscript, kept in registers while it folds
// elements and reported by rj_flush when it is done.  Checking with selects
// instead of a branch to rj_fault keeps the element loop free of stores, so
// the compiler can issue the loads of several elements before using any:
// with the branch (an atomic and stores that may alias the data), each load
// waited for the one before, and a ranged sum ran at 1 TB/s instead of 4.
struct rj_flt {
    long long value;
    int node, dim;
    bool bad;
};
__device__ __forceinline__ void rj_flt_init(rj_flt &F) { F.value = 0; F.node = 0; F.dim = 0; F.bad = false; }
// subscript s of a dimension of n elements: s when in range, else 0, noted
__device__ __forceinline__ long long rj_check(rj_flt &F, long long s, long long n, int node, int dim)
{
    bool out = (unsigned long long)s >= (unsigned long long)n;
    bool first = out && !F.bad;
    F.value = first ? s : F.value;
    F.node = first ? node : F.node;
    F.dim = first ? dim : F.dim;
    F.bad = F.bad || out;
    return out ? 0 : s;
}
// n % d, n /= d for 0 <= n and 0 < d: in 32 bits when both fit (the usual case;
// a 64-bit division is emulated in some 70 instructions)
__device__ __forceinline__ long long rj_divmod(long long &n, long long d)
{
    if (((unsigned long long)(n | d) >> 32) == 0) {
        unsigned q = (unsigned)n / (unsigned)d, r = (unsigned)n - q * (unsigned)d;
        n = q;
        return r;
    }
    long long q = n / d, r = n - q * d;
    n = q;
    return r;
}
__device__ __forceinline__ void rj_flush(const Params &P, const rj_flt &F)
{
    if (F.bad) rj_fault(P, RJ_ERR_INDEX, (unsigned long long)F.node, (unsigned long long)F.dim, F.value);
}


// ---- types and conversions ----------------------------------------------------
typedef unsigned char rj_u8;
typedef unsigned short rj_u16;

// The groups below under RJ_HALF, RJ_SAT and RJ_MATH are compiled only when
// the generated code calls them (cuda.c defines the macros): parsing them
// all took 5 to 7 ms of every NVRTC compile.
#if RJ_HALF
__device__ __forceinline__ float rj_f16_to_f32(rj_u16 h)
{
    unsigned sign = (unsigned)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (ex == 0) {
        if (man == 0) bits = sign;
        else {
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400u));
            bits = sign | ((unsigned)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (ex == 31) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((ex + 127 - 15) << 23) | (man << 13);
    return __uint_as_float(bits);
}
__device__ __forceinline__ float rj_bf16_to_f32(rj_u16 h) { return __uint_as_float((unsigned)h << 16); }
__device__ __forceinline__ float rj_round_f16(float x)
{
    unsigned x32 = __float_as_uint(x), sign = (x32 >> 16) & 0x8000u, ax = x32 & 0x7fffffffu, v;
    if (ax >= 0x7f800000u) return x;
    if (ax >= 0x477ff000u) return __uint_as_float((sign << 16) | 0x7f800000u);
    if (ax < 0x38800000u) {
        if (ax < 0x33000000u) return __uint_as_float(sign << 16);
        unsigned e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
        v = m >> shift;
        unsigned rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (v & 1))) v++;
    } else {
        v = (ax - 0x38000000u) >> 13;
        unsigned rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (v & 1))) v++;
    }
    return rj_f16_to_f32((rj_u16)(sign | v));
}
__device__ __forceinline__ float rj_round_bf16(float x)
{
    unsigned b = __float_as_uint(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) return x;
    b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
    return __uint_as_float(b);
}
#endif // RJ_HALF

#if RJ_SAT
// float -> integer: truncate, saturate, NaN -> 0
template <class T> __device__ __forceinline__ T rj_sat(double f, double lo, double hi)
{
    return f != f ? (T)0 : f <= lo ? (T)lo : f >= hi ? (T)hi : (T)f;
}
__device__ __forceinline__ int rj_to_i32(double f) { return rj_sat<int>(f, -2147483648.0, 2147483647.0); }
__device__ __forceinline__ long long rj_to_i64(double f)
{
    return f != f ? 0ll : f <= -9223372036854775808.0 ? (long long)0x8000000000000000ull
           : f >= 9223372036854775807.0 ? 0x7fffffffffffffffll : (long long)f;
}
__device__ __forceinline__ unsigned rj_to_u32(double f) { return rj_sat<unsigned>(f, 0.0, 4294967295.0); }
__device__ __forceinline__ unsigned long long rj_to_u64(double f)
{
    return f != f || f <= 0.0 ? 0ull : f >= 18446744073709551615.0 ? 0xffffffffffffffffull
           : (unsigned long long)f;
}
#endif // RJ_SAT

// ---- operators ------------------------------------------------------------------
#define RJ_INT_OPS(T, U)                                                                      \
    __device__ __forceinline__ T rj_neg(T a) { return (T)(0 - (U)a); }                         \
    __device__ __forceinline__ T rj_add(T a, T b) { return (T)((U)a + (U)b); }                 \
    __device__ __forceinline__ T rj_sub(T a, T b) { return (T)((U)a - (U)b); }                 \
    __device__ __forceinline__ T rj_mul(T a, T b) { return (T)((U)a * (U)b); }                 \
    __device__ __forceinline__ T rj_bnot(T a) { return (T) ~(U)a; }                            \
    __device__ __forceinline__ T rj_shl(T a, T b) { return (T)((U)a << ((U)b & (sizeof(T) * 8 - 1))); } \
    __device__ __forceinline__ T rj_min(T a, T b) { return b < a ? b : a; }                    \
    __device__ __forceinline__ T rj_max(T a, T b) { return b > a ? b : a; }
RJ_INT_OPS(int, unsigned)
RJ_INT_OPS(long long, unsigned long long)
RJ_INT_OPS(unsigned, unsigned)
RJ_INT_OPS(unsigned long long, unsigned long long)
__device__ __forceinline__ int rj_abs(int a) { return a < 0 ? rj_neg(a) : a; }
__device__ __forceinline__ long long rj_abs(long long a) { return a < 0 ? rj_neg(a) : a; }
__device__ __forceinline__ unsigned rj_abs(unsigned a) { return a; }
__device__ __forceinline__ unsigned long long rj_abs(unsigned long long a) { return a; }
__device__ __forceinline__ int rj_shr(int a, int b) { return a >> (b & 31); }
__device__ __forceinline__ long long rj_shr(long long a, long long b) { return a >> (b & 63); }
__device__ __forceinline__ unsigned rj_shr(unsigned a, unsigned b) { return a >> (b & 31); }
__device__ __forceinline__ unsigned long long rj_shr(unsigned long long a, unsigned long long b) { return a >> (b & 63); }
__device__ __forceinline__ int rj_div(int a, int b) { return b == 0 ? 0 : b == -1 ? rj_neg(a) : a / b; }
__device__ __forceinline__ long long rj_div(long long a, long long b) { return b == 0 ? 0 : b == -1 ? rj_neg(a) : a / b; }
__device__ __forceinline__ unsigned rj_div(unsigned a, unsigned b) { return b == 0 ? 0 : a / b; }
__device__ __forceinline__ unsigned long long rj_div(unsigned long long a, unsigned long long b) { return b == 0 ? 0 : a / b; }
__device__ __forceinline__ int rj_mod(int a, int b) { return b == 0 || b == -1 ? 0 : a % b; }
__device__ __forceinline__ long long rj_mod(long long a, long long b) { return b == 0 || b == -1 ? 0 : a % b; }
__device__ __forceinline__ unsigned rj_mod(unsigned a, unsigned b) { return b == 0 ? 0 : a % b; }
__device__ __forceinline__ unsigned long long rj_mod(unsigned long long a, unsigned long long b) { return b == 0 ? 0 : a % b; }
__device__ __forceinline__ bool rj_min(bool a, bool b) { return a && b; }
__device__ __forceinline__ bool rj_max(bool a, bool b) { return a || b; }

// RJ_NOCONTRACT: adds, subtractions and products rounded each on its own (no
// multiply-add contracted), so that a function of them gives the same bits at
// every call (a scan's combine: cuda.c).
#if RJ_NOCONTRACT
__device__ __forceinline__ float rj_fadd(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double rj_fadd(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float rj_fsub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double rj_fsub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float rj_fmul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double rj_fmul(double a, double b) { return __dmul_rn(a, b); }
#define RJ_FADD(a, b) rj_fadd(a, b)
#define RJ_FSUB(a, b) rj_fsub(a, b)
#define RJ_FMUL(a, b) rj_fmul(a, b)
#else
#define RJ_FADD(a, b) ((a) + (b))
#define RJ_FSUB(a, b) ((a) - (b))
#define RJ_FMUL(a, b) ((a) * (b))
#endif

#define RJ_FLT_OPS(T, S)                                                                     \
    __device__ __forceinline__ T rj_neg(T a) { return -a; }                                   \
    __device__ __forceinline__ T rj_add(T a, T b) { return RJ_FADD(a, b); }                   \
    __device__ __forceinline__ T rj_sub(T a, T b) { return RJ_FSUB(a, b); }                   \
    __device__ __forceinline__ T rj_mul(T a, T b) { return RJ_FMUL(a, b); }                   \
    __device__ __forceinline__ T rj_div(T a, T b) { return a / b; }                           \
    __device__ __forceinline__ T rj_abs(T a) { return fabs##S(a); }                           \
    __device__ __forceinline__ T rj_min(T a, T b) { return (a != a || a < b) ? a : b; }        \
    __device__ __forceinline__ T rj_max(T a, T b) { return (a != a || a > b) ? a : b; }        \
    __device__ __forceinline__ bool rj_isnan(T a) { return a != a; }                          \
    __device__ __forceinline__ bool rj_isfinite(T a) { return a - a == 0; }
RJ_FLT_OPS(float, f)
RJ_FLT_OPS(double, )

#if RJ_MATH
// fmod is a loop of CUDA's libdevice that NVVM unrolls wherever it is inlined: left out of
// line, a keyed kernel with two float %s compiles in a quarter of the time (bench/TUNING.md);
// the call costs little beside fmod itself.
#define RJ_MATH_OPS(T, S)                                                                    \
    __device__ __noinline__ T rj_mod(T a, T b) { return fmod##S(a, b); }                      \
    __device__ __forceinline__ T rj_sqrt(T a) { return sqrt##S(a); }                          \
    __device__ __forceinline__ T rj_exp(T a) { return exp##S(a); }                            \
    __device__ __forceinline__ T rj_log(T a) { return log##S(a); }                            \
    __device__ __forceinline__ T rj_log2(T a) { return log2##S(a); }                          \
    __device__ __forceinline__ T rj_log10(T a) { return log10##S(a); }                        \
    __device__ __forceinline__ T rj_sin(T a) { return sin##S(a); }                            \
    __device__ __forceinline__ T rj_cos(T a) { return cos##S(a); }                            \
    __device__ __forceinline__ T rj_tan(T a) { return tan##S(a); }                            \
    __device__ __forceinline__ T rj_tanh(T a) { return tanh##S(a); }                          \
    __device__ __forceinline__ T rj_floor(T a) { return floor##S(a); }                        \
    __device__ __forceinline__ T rj_ceil(T a) { return ceil##S(a); }                          \
    __device__ __forceinline__ T rj_round(T a) { return round##S(a); }                        \
    __device__ __forceinline__ T rj_pow(T a, T b) { return pow##S(a, b); }                    \
    __device__ __forceinline__ T rj_hypot(T a, T b) { return hypot##S(a, b); }                \
    __device__ __forceinline__ T rj_atan2(T a, T b) { return atan2##S(a, b); }                \
    __device__ __forceinline__ T rj_fma(T a, T b, T c) { return fma##S(a, b, c); }
RJ_MATH_OPS(float, f)
RJ_MATH_OPS(double, )
#endif // RJ_MATH

// argmin / argmax: is `c` better than `b`?  NaN is the extreme value.  Written
// without a branch on c's NaN: three predicate instructions, where the
// conditional form took six (rj_tile's argmin(abs(x[i]-y[j])): 54
// instructions for four elements, 40 now).
template <class T> __device__ __forceinline__ bool rj_argmax_better(T c, T b) { return c > b || (c != c && b == b); }
template <class T> __device__ __forceinline__ bool rj_argmin_better(T c, T b) { return c < b || (c != c && b == b); }

__device__ __forceinline__ bool rj_shfl(bool v, int s) { return __shfl_down_sync(0xffffffffu, (int)v, s) != 0; }
template <class T> __device__ __forceinline__ T rj_shfl(T v, int s) { return __shfl_down_sync(0xffffffffu, v, s); }
__device__ __forceinline__ bool rj_shfl_idx(bool v, int l) { return __shfl_sync(0xffffffffu, (int)v, l) != 0; }
template <class T> __device__ __forceinline__ T rj_shfl_idx(T v, int l) { return __shfl_sync(0xffffffffu, v, l); }

// V elements of T read as one 16-byte load (acc_elem_v).
template <class T, int V> struct __align__(16) rj_vec {
    T c[V];
};

// rj_vec through the read-only path (the epilogue's loads, which may then
// pass the stores before them): one 16-byte __ldg of the matching vector type.
// And stored with the streaming hint (__stcs, evict first): the epilogue's
// result, which nothing reads back, leaves L2 to the rows it reads twice.
#define RJ_LDG_V(T, V, W)                                                            \
    __device__ __forceinline__ rj_vec<T, V> rj_ldg_v(const rj_vec<T, V> *p)         \
    {                                                                                \
        union {                                                                      \
            W w;                                                                     \
            rj_vec<T, V> r;                                                          \
        } u;                                                                         \
        u.w = __ldg((const W *)p);                                                   \
        return u.r;                                                                  \
    }                                                                                \
    __device__ __forceinline__ void rj_stcs_v(rj_vec<T, V> *p, const rj_vec<T, V> &v) \
    {                                                                                \
        union {                                                                      \
            W w;                                                                     \
            rj_vec<T, V> r;                                                          \
        } u;                                                                         \
        u.r = v;                                                                     \
        __stcs((W *)p, u.w);                                                         \
    }
RJ_LDG_V(float, 4, float4)
RJ_LDG_V(int, 4, int4)
RJ_LDG_V(unsigned, 4, uint4)
RJ_LDG_V(double, 2, double2)
RJ_LDG_V(long long, 2, longlong2)
RJ_LDG_V(unsigned long long, 2, ulonglong2)
#undef RJ_LDG_V

// 16 bytes from global memory into shared memory without passing through
// registers (cp.async, sm_80 and later; .cg: cached in L2 only), and the wait
// for all of this thread's copies, after which this thread sees them (others:
// after a __syncthreads).  rj_segbs stages a whole row this way.  Below sm_80
// (the runtime does not choose those kernels there) a plain copy.
template <class T, int V> __device__ __forceinline__ void rj_cp_async16(rj_vec<T, V> *s, const rj_vec<T, V> *g)
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(s)),
                 "l"(__cvta_generic_to_global(g))
                 : "memory");
#else
    *s = *g;
#endif
}
__device__ __forceinline__ void rj_cp_async_wait_all()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}
// One element of 4 or 8 bytes the same way (.ca: also in L1), for rj_tile2.
template <class T> __device__ __forceinline__ void rj_cp_async(T *s, const T *g)
{
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "4 or 8 bytes");
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"((unsigned)__cvta_generic_to_shared(s)),
                 "l"(__cvta_generic_to_global(g)), "n"((int)sizeof(T))
                 : "memory");
#else
    *s = *g;
#endif
}
__device__ __forceinline__ long long rj_min_ll(long long a, long long b) { return a < b ? a : b; }
