// cub_bench.cu -- the CUB side of the GPU benchmark (bench/run.sh): the cases of redjit_bench.c
// on the same inputs (bench_data.h, generated here by a kernel), through cub::DeviceReduce,
// DeviceSegmentedReduce and ReduceByKey from the toolkit's CCCL, timed with CUDA events around
// each call on the default stream (temporary storage allocated once, outside the timing), median
// of --reps runs after --warmup.  One JSON object per line on stdout.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 bench/cub_bench.cu -o cub_bench
//   cub_bench [--log2n 28] [--curve 10,20,24,26,28,30] [--log2s 26] [--rows 16384 --cols 16384]
//             [--short-rows 33554432 --short-cols 8] [--reps 50] [--warmup 5] [--budget-ms 2000]
//             [--calls 100000] [--cases id,id,...] [--held]
//
// --held: a host function holds the stream for BD_HOLD_US before each timed call, until the call
// and the closing event are queued behind it, so that the span is the GPU's work alone (the
// kernels and the gaps between them), not the host's time to get the first kernel going; the
// records say "held": 1.
#include <cub/cub.cuh>
#include <cuda/std/functional>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/tuple.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_data.h"

#define CK(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            fflush(stdout);                                                                       \
            fprintf(stderr, "cub_bench: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,              \
                    cudaGetErrorString(e_));                                                      \
            exit(2);                                                                              \
        }                                                                                         \
    } while (0)

// ---- options (the same as redjit_bench's) ---------------------------------------------------

static struct {
    int log2n = 28, log2s = 26, reps = 50, warmup = 5;
    long long rows = 16384, cols = 16384, srows = 1LL << 25, scols = 8, calls = 100000;
    double budget_ms = 2000;
    std::vector<int> curve{10, 20, 24, 26, 28, 30};
    const char *cases = nullptr;
    bool held = false;
} opt;

static bool wanted(const char *id)
{
    if (!opt.cases) return true;
    size_t n = strlen(id);
    for (const char *p = opt.cases; (p = strstr(p, id)) != nullptr; p += n)
        if ((p == opt.cases || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return true;
    return false;
}

// ---- inputs ---------------------------------------------------------------------------------

__global__ void gen_f32(float *out, long long n, uint32_t seed)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = bd_f32((uint64_t)i, seed);
}
__global__ void gen_f64(double *out, long long n, uint32_t seed)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = bd_f64((uint64_t)i, seed);
}
__global__ void gen_i32(int32_t *out, long long n, uint32_t seed)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = bd_i32((uint64_t)i, seed);
}

template <class T> static T *dalloc(size_t count)
{
    T *p = nullptr;
    CK(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(T)));
    return p;
}

// Inputs of one case, with rotation copies when the set is small (bench_data.h).
struct Inputs {
    std::vector<const void *> base;
    std::vector<size_t> bytes;
    std::vector<std::vector<void *>> copies;   // copies[i][r - 1]
    int k = 1;
    void add(const void *p, size_t b) { base.push_back(p), bytes.push_back(b); }
    double total() const
    {
        double t = 0;
        for (size_t b : bytes) t += (double)b;
        return t;
    }
    void rotate()
    {
        k = bd_rotation(total());
        copies.assign(base.size(), {});
        for (size_t i = 0; i < base.size(); i++)
            for (int r = 1; r < k; r++) {
                void *p = dalloc<char>(bytes[i]);
                CK(cudaMemcpy(p, base[i], bytes[i], cudaMemcpyDeviceToDevice));
                copies[i].push_back(p);
            }
    }
    template <class T> T *get(size_t i, int rot) const
    {
        rot %= k;
        return (T *)(rot == 0 ? base[i] : copies[i][rot - 1]);
    }
    ~Inputs()
    {
        for (auto &v : copies)
            for (void *p : v) cudaFree(p);
    }
};

// ---- timing ---------------------------------------------------------------------------------

static cudaEvent_t ev0, ev1;

struct Timing {
    double med_us = 0, min_us = 0;
    int reps = 0;
};

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// --held: holds the stream for BD_HOLD_US
static void CUDART_CB hold_stream(void *)
{
    auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() < BD_HOLD_US) {}
}

template <class F> static double time_once(F &launch, int rot)
{
    if (opt.held) CK(cudaLaunchHostFunc(0, hold_stream, nullptr));
    CK(cudaEventRecord(ev0, 0));
    launch(rot);
    CK(cudaGetLastError());
    CK(cudaEventRecord(ev1, 0));
    CK(cudaEventSynchronize(ev1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, ev0, ev1));
    return ms * 1e3;
}

// launch(rot) enqueues one run on the default stream, reading input set `rot`.
template <class F> static Timing time_case(F launch, int k)
{
    time_once(launch, 0);
    double probe = time_once(launch, k > 1 ? 1 : 0);
    int reps = opt.reps, warm = opt.warmup;
    double per = std::max(probe, 1.0) * 1e-3;
    if (per * (opt.reps + opt.warmup) > opt.budget_ms) {
        reps = std::max(3, (int)(opt.budget_ms / per) - 1);
        if (per > opt.budget_ms) reps = 1;
        reps = std::min(reps, opt.reps);
        warm = 0;
    }
    int rot = 2;
    for (int i = 0; i < warm; i++, rot++) time_once(launch, rot % k);
    std::vector<double> v;
    for (int i = 0; i < reps; i++, rot++) v.push_back(time_once(launch, rot % k));
    Timing t;
    t.reps = reps;
    t.med_us = median(v);
    t.min_us = *std::min_element(v.begin(), v.end());
    return t;
}

static void head(const char *id, long long n, const char *system, double bytes, const Timing &t, int k)
{
    printf("{\"case\": \"%s\", \"n\": %lld, \"system\": \"%s\", \"bytes\": %.0f, \"us\": %.3f, \"min_us\": %.3f, "
           "\"reps\": %d, \"rot\": %d",
           id, n, system, bytes, t.med_us, t.min_us, t.reps, k);
    if (opt.held) printf(", \"held\": 1");
}

template <class T> static T fetch(const T *d)
{
    T h;
    CK(cudaMemcpy(&h, d, sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

// value = sum out[k], check = sum ((k % 16) - 7.5) out[k], mag = sum |out[k]| (as redjit_bench)
static void checksums(const float *d, long long m)
{
    std::vector<float> h((size_t)m);
    CK(cudaMemcpy(h.data(), d, (size_t)m * sizeof(float), cudaMemcpyDeviceToHost));
    double s = 0, w = 0, a = 0;
    for (long long k = 0; k < m; k++) {
        s += h[k];
        w += ((double)(k % 16) - 7.5) * h[k];
        a += fabs((double)h[k]);
    }
    printf(", \"value\": %.17g, \"check\": %.17g, \"mag\": %.17g, \"nout\": %lld", s, w, a, m);
}

struct TempStorage {
    void *p = nullptr;
    size_t n = 0;
    void ensure(size_t bytes)
    {
        if (bytes <= n) return;
        if (p) CK(cudaFree(p));
        CK(cudaMalloc(&p, bytes));
        n = bytes;
    }
    ~TempStorage()
    {
        if (p) cudaFree(p);
    }
};

// ---- functors -------------------------------------------------------------------------------

struct Mul {
    template <class T> __host__ __device__ float operator()(const T &t) const
    {
        return thrust::get<0>(t) * thrust::get<1>(t);
    }
};
struct AbsDiff {
    template <class T> __host__ __device__ float operator()(const T &t) const
    {
        return fabsf(thrust::get<0>(t) - thrust::get<1>(t));
    }
};
struct Square {
    __host__ __device__ float operator()(float x) const { return x * x; }
};
struct Pair {
    float s, q;
};
struct ToPair {
    __host__ __device__ Pair operator()(float x) const { return Pair{x, x * x}; }
};
struct PairPlus {
    __host__ __device__ Pair operator()(const Pair &a, const Pair &b) const { return Pair{a.s + b.s, a.q + b.q}; }
};

// ---- main -----------------------------------------------------------------------------------

int main(int argc, char **argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    for (int i = 1; i < argc; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (!strcmp(k, "--held")) {   // the one option without a value
            opt.held = true;
            i--;
            continue;
        }
        if (!v) {
            fprintf(stderr, "cub_bench: option %s needs a value\n", k);
            return 2;
        }
        if (!strcmp(k, "--log2n")) opt.log2n = atoi(v);
        else if (!strcmp(k, "--log2s")) opt.log2s = atoi(v);
        else if (!strcmp(k, "--curve")) {
            opt.curve.clear();
            for (const char *s = v; s; s = strchr(s, ',') ? strchr(s, ',') + 1 : nullptr) opt.curve.push_back(atoi(s));
        } else if (!strcmp(k, "--rows")) opt.rows = atoll(v);
        else if (!strcmp(k, "--cols")) opt.cols = atoll(v);
        else if (!strcmp(k, "--short-rows")) opt.srows = atoll(v);
        else if (!strcmp(k, "--short-cols")) opt.scols = atoll(v);
        else if (!strcmp(k, "--reps")) opt.reps = atoi(v);
        else if (!strcmp(k, "--warmup")) opt.warmup = atoi(v);
        else if (!strcmp(k, "--budget-ms")) opt.budget_ms = atof(v);
        else if (!strcmp(k, "--calls")) opt.calls = atoll(v);
        else if (!strcmp(k, "--cases")) opt.cases = v;
        else {
            fprintf(stderr, "cub_bench: unknown option %s\n", k);
            return 2;
        }
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "cub_bench: no GPU: nothing to measure\n");
        printf("{\"case\": \"none\", \"system\": \"cub\", \"note\": \"no GPU\"}\n");
        return 0;
    }
    CK(cudaSetDevice(0));
    CK(cudaEventCreate(&ev0));
    CK(cudaEventCreate(&ev1));
    printf("{\"case\": \"config\", \"system\": \"cub\", \"cub_version\": %d, \"cuda_runtime\": %d}\n", CUB_VERSION,
           CUDART_VERSION);

    const long long N = 1LL << opt.log2n, NS = 1LL << opt.log2s;
    long long NX = std::max(N, NS);
    for (int c : opt.curve) NX = std::max(NX, 1LL << c);
    NX = std::max({NX, opt.rows * opt.cols, opt.srows * opt.scols});
    float *x = dalloc<float>(NX), *bf = dalloc<float>(N);
    double *xd = dalloc<double>(N);
    int32_t *xi = dalloc<int32_t>(N);
    gen_f32<<<132 * 16, 256>>>(x, NX, BD_SEED_X);
    gen_f32<<<132 * 16, 256>>>(bf, N, BD_SEED_B);
    gen_f64<<<132 * 16, 256>>>(xd, N, BD_SEED_F64);
    gen_i32<<<132 * 16, 256>>>(xi, N, BD_SEED_I32);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());

    float *outf = dalloc<float>(1);
    double *outd = dalloc<double>(1);
    int64_t *outl = dalloc<int64_t>(1);
    TempStorage tmp;
    size_t tb = 0;

    // overhead: one Sum over 1024 values and the copy of its result, per call, host clock
    if (wanted("overhead")) {
        float h = 0;
        tb = 0;
        CK(cub::DeviceReduce::Sum(nullptr, tb, x, outf, 1024));
        tmp.ensure(tb);
        for (int i = 0; i < 100; i++) {
            CK(cub::DeviceReduce::Sum(tmp.p, tb, x, outf, 1024));
            CK(cudaMemcpy(&h, outf, 4, cudaMemcpyDeviceToHost));
        }
        auto t0 = std::chrono::steady_clock::now();
        for (long long i = 0; i < opt.calls; i++) {
            CK(cub::DeviceReduce::Sum(tmp.p, tb, x, outf, 1024));
            CK(cudaMemcpy(&h, outf, 4, cudaMemcpyDeviceToHost));
        }
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        printf("{\"case\": \"overhead\", \"n\": 1024, \"system\": \"cub\", \"variant\": \"Sum+cudaMemcpy\", "
               "\"calls\": %lld, \"us\": %.3f, \"value\": %.17g}\n",
               opt.calls, us / opt.calls, (double)h);
    }

    // Sum over the first n floats of x, and max |x - b| over the first n of each (the 1-D
    // cases and the matrix cases, which CUB sees as one flat range)
    auto sum_f32 = [&](const char *id, long long n) {
        Inputs in;
        in.add(x, n * 4);
        in.rotate();
        tb = 0;
        CK(cub::DeviceReduce::Sum(nullptr, tb, x, outf, n));
        tmp.ensure(tb);
        Timing t = time_case([&](int r) { CK(cub::DeviceReduce::Sum(tmp.p, tb, in.get<float>(0, r), outf, n)); }, in.k);
        head(id, n, "cub", in.total(), t, in.k);
        printf(", \"value\": %.17g}\n", (double)fetch(outf));
    };
    auto maxabs_f32 = [&](const char *id, long long n) {
        Inputs in;
        in.add(x, n * 4);
        in.add(bf, n * 4);
        in.rotate();
        auto zip = [&](int r) { return thrust::make_zip_iterator(thrust::make_tuple(in.get<float>(0, r), in.get<float>(1, r))); };
        const float lo = -INFINITY;
        tb = 0;
        CK(cub::DeviceReduce::TransformReduce(nullptr, tb, zip(0), outf, n, cuda::maximum<float>{}, AbsDiff{}, lo));
        tmp.ensure(tb);
        Timing t = time_case([&](int r) {
            CK(cub::DeviceReduce::TransformReduce(tmp.p, tb, zip(r), outf, n, cuda::maximum<float>{}, AbsDiff{}, lo));
        }, in.k);
        head(id, n, "cub", in.total(), t, in.k);
        printf(", \"variant\": \"TransformReduce(zip)\", \"value\": %.17g}\n", (double)fetch(outf));
    };

    // sum f32 over the curve's sizes (prefixes of x)
    if (wanted("sum_f32"))
        for (int c : opt.curve) sum_f32("sum_f32", 1LL << c);

    if (wanted("sum_f64")) {
        Inputs in;
        in.add(xd, N * 8);
        in.rotate();
        tb = 0;
        CK(cub::DeviceReduce::Sum(nullptr, tb, xd, outd, N));
        tmp.ensure(tb);
        Timing t = time_case([&](int r) { CK(cub::DeviceReduce::Sum(tmp.p, tb, in.get<double>(0, r), outd, N)); }, in.k);
        head("sum_f64", N, "cub", in.total(), t, in.k);
        printf(", \"value\": %.17g}\n", fetch(outd));
    }

    if (wanted("sum_i32")) {
        // int64 output: CUB accumulates in the output type (redjit's sum of i32 is i64)
        Inputs in;
        in.add(xi, N * 4);
        in.rotate();
        tb = 0;
        CK(cub::DeviceReduce::Sum(nullptr, tb, xi, outl, N));
        tmp.ensure(tb);
        Timing t = time_case([&](int r) { CK(cub::DeviceReduce::Sum(tmp.p, tb, in.get<int32_t>(0, r), outl, N)); }, in.k);
        head("sum_i32", N, "cub", in.total(), t, in.k);
        printf(", \"value\": %lld}\n", (long long)fetch(outl));
    }

    if (wanted("max_f32")) {
        Inputs in;
        in.add(x, N * 4);
        in.rotate();
        tb = 0;
        CK(cub::DeviceReduce::Max(nullptr, tb, x, outf, N));
        tmp.ensure(tb);
        Timing t = time_case([&](int r) { CK(cub::DeviceReduce::Max(tmp.p, tb, in.get<float>(0, r), outf, N)); }, in.k);
        head("max_f32", N, "cub", in.total(), t, in.k);
        printf(", \"value\": %.17g}\n", (double)fetch(outf));
    }

    if (wanted("dot_f32")) {
        Inputs in;
        in.add(x, N * 4);
        in.add(bf, N * 4);
        in.rotate();
        auto zip = [&](int r) { return thrust::make_zip_iterator(thrust::make_tuple(in.get<float>(0, r), in.get<float>(1, r))); };
        tb = 0;
        CK(cub::DeviceReduce::TransformReduce(nullptr, tb, zip(0), outf, N, cuda::std::plus<float>{}, Mul{}, 0.0f));
        tmp.ensure(tb);
        Timing t = time_case([&](int r) {
            CK(cub::DeviceReduce::TransformReduce(tmp.p, tb, zip(r), outf, N, cuda::std::plus<float>{}, Mul{}, 0.0f));
        }, in.k);
        head("dot_f32", N, "cub", in.total(), t, in.k);
        printf(", \"variant\": \"TransformReduce(zip)\", \"value\": %.17g}\n", (double)fetch(outf));
    }
    if (wanted("maxabs_f32")) maxabs_f32("maxabs_f32", N);

    // whole-array reductions of a rows x cols matrix (redjit's sum2d_f32, maxabs2d_f32)
    if (wanted("sum2d_f32")) sum_f32("sum2d_f32", opt.rows * opt.cols);
    if (wanted("maxabs2d_f32") && opt.rows * opt.cols <= N) maxabs_f32("maxabs2d_f32", opt.rows * opt.cols);

    if (wanted("sumsq_f32")) {
        Inputs in;
        in.add(x, N * 4);
        in.rotate();
        // one fused pass with a custom pair type
        Pair *outp = dalloc<Pair>(1);
        tb = 0;
        CK(cub::DeviceReduce::TransformReduce(nullptr, tb, x, outp, N, PairPlus{}, ToPair{}, Pair{0.f, 0.f}));
        tmp.ensure(tb);
        Timing t = time_case([&](int r) {
            CK(cub::DeviceReduce::TransformReduce(tmp.p, tb, in.get<float>(0, r), outp, N, PairPlus{}, ToPair{}, Pair{0.f, 0.f}));
        }, in.k);
        Pair p = fetch(outp);
        head("sumsq_f32", N, "cub", in.total(), t, in.k);
        printf(", \"variant\": \"one pass, pair type\", \"value\": %.17g, \"value2\": %.17g}\n", (double)p.s, (double)p.q);
        CK(cudaFree(outp));
        // two calls
        float *out2 = dalloc<float>(1);
        size_t tb1 = 0, tb2 = 0;
        CK(cub::DeviceReduce::Sum(nullptr, tb1, x, outf, N));
        CK(cub::DeviceReduce::TransformReduce(nullptr, tb2, x, out2, N, cuda::std::plus<float>{}, Square{}, 0.0f));
        tmp.ensure(std::max(tb1, tb2));
        t = time_case([&](int r) {
            CK(cub::DeviceReduce::Sum(tmp.p, tb1, in.get<float>(0, r), outf, N));
            CK(cub::DeviceReduce::TransformReduce(tmp.p, tb2, in.get<float>(0, r), out2, N, cuda::std::plus<float>{}, Square{}, 0.0f));
        }, in.k);
        head("sumsq_f32", N, "cub_2calls", in.total(), t, in.k);
        printf(", \"variant\": \"Sum + TransformReduce\", \"value\": %.17g, \"value2\": %.17g}\n", (double)fetch(outf),
               (double)fetch(out2));
        CK(cudaFree(out2));
    }

    if (wanted("argmax_f32")) {
        Inputs in;
        in.add(x, N * 4);
        in.rotate();
        tb = 0;
        CK(cub::DeviceReduce::ArgMax(nullptr, tb, x, outf, outl, N));
        tmp.ensure(tb);
        Timing t = time_case([&](int r) { CK(cub::DeviceReduce::ArgMax(tmp.p, tb, in.get<float>(0, r), outf, outl, N)); }, in.k);
        head("argmax_f32", N, "cub", in.total(), t, in.k);
        printf(", \"value\": %lld, \"max\": %.17g}\n", (long long)fetch(outl), (double)fetch(outf));
    }

    // segments: CSR offsets (DeviceSegmentedReduce) and owner keys (ReduceByKey)
    static const char *const layout_names[BD_NLAYOUTS] = {"one", "rand", "len3", "rows1024"};
    for (int l = 0; l < BD_NLAYOUTS; l++) {
        std::string csr = std::string("csr_") + layout_names[l], keys = std::string("keys_") + layout_names[l];
        if (!wanted(csr.c_str()) && !wanted(keys.c_str())) continue;
        long long nseg = bd_nseg(l, NS);
        std::vector<int32_t> ptr((size_t)nseg + 1), key((size_t)NS);
        bd_offsets(l, NS, ptr.data());
        for (long long s = 0; s < nseg; s++)
            for (long long i = ptr[s]; i < ptr[s + 1]; i++) key[i] = (int32_t)s;
        int32_t *ptr_d = dalloc<int32_t>(nseg + 1), *key_d = dalloc<int32_t>(NS), *uniq = dalloc<int32_t>(nseg);
        int32_t *nruns = dalloc<int32_t>(1);
        float *out = dalloc<float>(nseg);
        CK(cudaMemcpy(ptr_d, ptr.data(), (nseg + 1) * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(key_d, key.data(), NS * 4, cudaMemcpyHostToDevice));
        if (wanted(csr.c_str())) {
            Inputs in;
            in.add(x, NS * 4);
            in.add(ptr_d, (nseg + 1) * 4);
            in.rotate();
            tb = 0;
            CK(cub::DeviceSegmentedReduce::Sum(nullptr, tb, x, out, nseg, ptr_d, ptr_d + 1));
            tmp.ensure(tb);
            Timing t = time_case([&](int r) {
                const int32_t *p = in.get<int32_t>(1, r);
                CK(cub::DeviceSegmentedReduce::Sum(tmp.p, tb, in.get<float>(0, r), out, nseg, p, p + 1));
            }, in.k);
            head(csr.c_str(), NS, "cub", in.total(), t, in.k);
            printf(", \"variant\": \"DeviceSegmentedReduce::Sum\"");
            checksums(out, nseg);
            printf("}\n");
        }
        if (wanted(keys.c_str())) {
            Inputs in;
            in.add(x, NS * 4);
            in.add(key_d, NS * 4);
            in.rotate();
            tb = 0;
            CK(cub::DeviceReduce::ReduceByKey(nullptr, tb, key_d, uniq, x, out, nruns, cuda::std::plus<float>{}, NS));
            tmp.ensure(tb);
            Timing t = time_case([&](int r) {
                CK(cub::DeviceReduce::ReduceByKey(tmp.p, tb, in.get<int32_t>(1, r), uniq, in.get<float>(0, r), out, nruns,
                                                  cuda::std::plus<float>{}, NS));
            }, in.k);
            int runs = fetch(nruns);
            head(keys.c_str(), NS, "cub", in.total(), t, in.k);
            printf(", \"variant\": \"ReduceByKey\", \"runs\": %d", runs);
            checksums(out, runs);
            printf("}\n");
        }
        CK(cudaFree(ptr_d));
        CK(cudaFree(key_d));
        CK(cudaFree(uniq));
        CK(cudaFree(nruns));
        CK(cudaFree(out));
    }

    // row sums as segments of equal length (the table counts only the matrix as read)
    struct Rows {
        const char *id;
        long long r, c;
    } rowcases[] = {{"rowsum", opt.rows, opt.cols}, {"rowsum_short", opt.srows, opt.scols}};
    for (auto &rc : rowcases) {
        if (!wanted(rc.id)) continue;
        std::vector<int64_t> off((size_t)rc.r + 1);
        for (long long i = 0; i <= rc.r; i++) off[i] = i * rc.c;
        int64_t *off_d = dalloc<int64_t>(rc.r + 1);
        float *out = dalloc<float>(rc.r);
        CK(cudaMemcpy(off_d, off.data(), (rc.r + 1) * 8, cudaMemcpyHostToDevice));
        Inputs in;
        in.add(x, rc.r * rc.c * 4);
        in.rotate();
        tb = 0;
        CK(cub::DeviceSegmentedReduce::Sum(nullptr, tb, x, out, rc.r, off_d, off_d + 1));
        tmp.ensure(tb);
        Timing t = time_case([&](int r) {
            CK(cub::DeviceSegmentedReduce::Sum(tmp.p, tb, in.get<float>(0, r), out, rc.r, off_d, off_d + 1));
        }, in.k);
        head(rc.id, rc.r * rc.c, "cub", in.total(), t, in.k);
        printf(", \"variant\": \"DeviceSegmentedReduce::Sum, offsets\"");
        checksums(out, rc.r);
        printf("}\n");
        CK(cudaFree(off_d));
        CK(cudaFree(out));
    }

    CK(cudaFree(x));
    CK(cudaFree(bf));
    CK(cudaFree(xd));
    CK(cudaFree(xi));
    CK(cudaFree(outf));
    CK(cudaFree(outd));
    CK(cudaFree(outl));
    return 0;
}
