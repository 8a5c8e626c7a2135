#!/usr/bin/env python3
"""peers.py -- the CuPy and PyTorch side of the GPU benchmark (bench/run.sh).

Builds the inputs of bench_data.h on the GPU with CuPy's uint32 arithmetic (bit-identical to the C
programs' generator; PyTorch sees the same memory through DLPack), runs each case in the idiomatic
form of each library, times it with CUDA events around the call (median of --reps runs after
--warmup, fewer for slow runs) and prints one JSON object per line, as cub_bench and redjit_bench.

  peers.py [--log2n 28] [--curve 10,20,24,26,28,30] [--log2s 26] [--rows 16384 --cols 16384]
           [--short-rows 33554432 --short-cols 8] [--reps 50] [--warmup 5] [--budget-ms 2000]
           [--calls 20000] [--cases id,id,...] [--systems cupy,torch]
  peers.py --numpy-check ...   NumPy on the host, wall clock: checks the generator, layouts and
                               checksums against redjit_bench --cpu-check without a GPU.
"""
import argparse
import json
import math
import sys
import time

import numpy as np

SEED_X, SEED_B, SEED_F64, SEED_I32, SEED_LEN = 1, 2, 3, 4, 5
LAYOUTS = ["one", "rand", "len3", "rows1024"]
ROT_BYTES = 256.0 * 1024 * 1024
ROT_MAX = 64


# ---- the generator of bench_data.h, for numpy or cupy ----------------------------------------

def _mix(xp, x):
    u = xp.uint32
    x = x ^ (x >> u(16))
    x = x * u(0x7FEB352D)
    x = x ^ (x >> u(15))
    x = x * u(0x846CA68B)
    x = x ^ (x >> u(16))
    return x


def bd_hash(xp, idx, seed):
    """idx: uint32 array of indices."""
    return _mix(xp, _mix(xp, idx) + xp.uint32((seed * 0x9E3779B9) & 0xFFFFFFFF))


def _chunks(n, step=1 << 26):
    for c0 in range(0, n, step):
        yield c0, min(n, c0 + step)


def gen(xp, kind, n, seed):
    """Element i: f32 (hash >> 8) * 2^-23 - 1, f64 hash * 2^-31 - 1, i32 (hash >> 28) - 8."""
    dt = {"f32": xp.float32, "f64": xp.float64, "i32": xp.int32}[kind]
    out = xp.empty(n, dtype=dt)
    for c0, c1 in _chunks(n):
        h = bd_hash(xp, xp.arange(c0, c1, dtype=xp.uint32), seed)
        if kind == "f32":
            out[c0:c1] = (h >> xp.uint32(8)).astype(xp.float32) * xp.float32(2.0 ** -23) - xp.float32(1.0)
        elif kind == "f64":
            out[c0:c1] = h.astype(xp.float64) * (2.0 ** -31) - 1.0
        else:
            out[c0:c1] = (h >> xp.uint32(28)).astype(xp.int32) - xp.int32(8)
    return out


def offsets(layout, ns):
    """CSR offsets (int32 numpy, nseg + 1) of a layout over ns values (bd_offsets)."""
    if layout == "one":
        return np.array([0, ns], dtype=np.int32)
    if layout in ("len3", "rows1024"):
        step = 3 if layout == "len3" else 1024
        nseg = (ns + step - 1) // step
        return np.minimum(np.arange(nseg + 1, dtype=np.int64) * step, ns).astype(np.int32)
    k = ns // 10 + 2
    lens = 10 + (bd_hash(np, np.arange(k, dtype=np.uint32), SEED_LEN) % np.uint32(41)).astype(np.int64)
    cs = np.cumsum(lens)
    nseg = int(np.searchsorted(cs, ns, side="left")) + 1   # first segment reaching ns
    return np.concatenate([[0], np.minimum(cs[:nseg], ns)]).astype(np.int32)


def rotation(nbytes):
    if nbytes <= 0:
        return 1
    return max(1, min(ROT_MAX, math.ceil(ROT_BYTES / nbytes)))


def checksums(h):
    h = np.asarray(h, dtype=np.float64).ravel()
    w = (np.arange(h.size) % 16).astype(np.float64) - 7.5
    return {"value": float(h.sum()), "check": float((w * h).sum()), "mag": float(np.abs(h).sum()),
            "nout": int(h.size)}


# ---- systems ----------------------------------------------------------------------------------

class NumpySys:
    name = "numpy"

    def __init__(self):
        self.xp = np

    def sync(self):
        pass

    def time_once(self, fn, args):
        t0 = time.perf_counter()
        r = fn(*args)
        return r, (time.perf_counter() - t0) * 1e6

    def host(self, a):
        return np.asarray(a)

    def copy(self, a):
        return a.copy()

    def scalar(self, r):
        return r.item() if hasattr(r, "item") else r


class CupySys:
    name = "cupy"

    def __init__(self, cp):
        self.cp = cp
        self.xp = cp
        self.e0, self.e1 = cp.cuda.Event(), cp.cuda.Event()

    def sync(self):
        self.cp.cuda.Device().synchronize()

    def time_once(self, fn, args):
        self.e0.record()
        r = fn(*args)
        self.e1.record()
        self.e1.synchronize()
        return r, self.cp.cuda.get_elapsed_time(self.e0, self.e1) * 1e3

    def host(self, a):
        return self.cp.asnumpy(a)

    def copy(self, a):
        return a.copy()

    def scalar(self, r):
        return r.item()


class TorchSys:
    name = "torch"

    def __init__(self, torch):
        self.torch = torch
        self.e0 = torch.cuda.Event(enable_timing=True)
        self.e1 = torch.cuda.Event(enable_timing=True)

    def sync(self):
        self.torch.cuda.synchronize()

    def time_once(self, fn, args):
        self.e0.record()
        r = fn(*args)
        self.e1.record()
        self.e1.synchronize()
        return r, self.e0.elapsed_time(self.e1) * 1e3

    def host(self, a):
        return a.detach().cpu().numpy()

    def copy(self, a):
        return a.clone()

    def scalar(self, r):
        return r.item()


# ---- the cases --------------------------------------------------------------------------------

def case_impls(sysname, mod, extra):
    """{case id: (function of the inputs, kind)}; kind: scalar, pair, index, array."""
    if sysname == "numpy":
        np_ = mod
        return {
            "sum": (lambda x: x.sum(dtype=np.int64) if x.dtype == np.int32 else x.sum(), "scalar"),
            "max_f32": (lambda x: x.max(), "scalar"),
            "dot_f32": (lambda a, b: np_.dot(a, b), "scalar"),
            "maxabs_f32": (lambda a, b: np_.abs(a - b).max(), "scalar"),
            "sumsq_f32": (lambda x: (x.sum(), np_.dot(x, x)), "pair"),
            "argmax_f32": (lambda x: x.argmax(), "index"),
            "csr": (lambda v, p, nseg: np_.add.reduceat(v, p[:-1].astype(np.int64)), "array"),
            "keys": (lambda v, s, nseg: np_.bincount(s, weights=v, minlength=nseg), "array"),
            "rowsum": (lambda A: A.sum(axis=1), "array"),
            "colsum": (lambda A: A.sum(axis=0), "array"),
        }
    if sysname == "cupy":
        cp = mod
        scatter_add = extra.get("scatter_add")

        def keys(v, s, nseg):
            out = cp.zeros(nseg, dtype=cp.float32)
            scatter_add(out, s, v)
            return out
        return {
            "sum": (lambda x: x.sum(dtype=cp.int64) if x.dtype == cp.int32 else x.sum(), "scalar"),
            "max_f32": (lambda x: x.max(), "scalar"),
            "dot_f32": (lambda a, b: cp.dot(a, b), "scalar"),
            "maxabs_f32": (lambda a, b: cp.abs(a - b).max(), "scalar"),
            "sumsq_f32": (lambda x: (x.sum(), cp.dot(x, x)), "pair"),
            "argmax_f32": (lambda x: x.argmax(), "index"),
            "keys": (keys, "array") if scatter_add else None,
            "rowsum": (lambda A: A.sum(axis=1), "array"),
            "colsum": (lambda A: A.sum(axis=0), "array"),
        }
    torch = mod

    def keys_t(v, s, nseg):
        return torch.zeros(nseg, dtype=v.dtype, device=v.device).index_add_(0, s, v)
    return {
        "sum": (lambda x: x.sum(), "scalar"),    # int32 sums to int64 in torch
        "max_f32": (lambda x: x.max(), "scalar"),
        "dot_f32": (lambda a, b: torch.dot(a, b), "scalar"),
        "maxabs_f32": (lambda a, b: (a - b).abs().max(), "scalar"),
        "sumsq_f32": (lambda x: (x.sum(), torch.dot(x, x)), "pair"),
        "argmax_f32": (lambda x: torch.argmax(x), "index"),
        "csr": (lambda v, lens, nseg: torch.segment_reduce(v, "sum", lengths=lens, unsafe=True), "array"),
        "keys": (keys_t, "array"),
        "rowsum": (lambda A: A.sum(dim=1), "array"),
        "colsum": (lambda A: A.sum(dim=0), "array"),
    }


VARIANTS = {
    "numpy": {"dot_f32": "np.dot", "maxabs_f32": "np.abs(a-b).max()", "sumsq_f32": "x.sum(), np.dot(x,x)",
              "csr": "np.add.reduceat", "keys": "np.bincount(weights)"},
    "cupy": {"dot_f32": "cp.dot (cuBLAS)", "maxabs_f32": "cp.abs(a-b).max()",
             "sumsq_f32": "x.sum(), cp.dot(x,x)", "keys": "cupyx.scatter_add"},
    "torch": {"dot_f32": "torch.dot (cuBLAS)", "maxabs_f32": "(a-b).abs().max()",
              "sumsq_f32": "x.sum(), torch.dot(x,x)", "csr": "torch.segment_reduce(lengths)",
              "keys": "zeros().index_add_"},
}


def measure(sysobj, fn, arg_sets, opt):
    """Median event time (us) over the rotated argument sets; returns (result, us, min_us, reps)."""
    k = len(arg_sets)
    r, _ = sysobj.time_once(fn, arg_sets[0])
    r, probe = sysobj.time_once(fn, arg_sets[1 % k])
    reps, warm = opt.reps, opt.warmup
    per = max(probe, 1.0) * 1e-3
    if per * (opt.reps + opt.warmup) > opt.budget_ms:
        reps = max(3, int(opt.budget_ms / per) - 1)
        if per > opt.budget_ms:
            reps = 1
        reps = min(reps, opt.reps)
        warm = 0
    rot = 2
    for _ in range(warm):
        sysobj.time_once(fn, arg_sets[rot % k])
        rot += 1
    ts = []
    for _ in range(reps):
        r, t = sysobj.time_once(fn, arg_sets[rot % k])
        ts.append(t)
        rot += 1
    return r, float(np.median(ts)), float(min(ts)), reps


def values(sysobj, r, kind):
    if kind == "scalar" or kind == "index":
        v = sysobj.scalar(r)
        return {"value": int(v) if kind == "index" or isinstance(v, (int, np.integer)) else float(v)}
    if kind == "pair":
        return {"value": float(sysobj.scalar(r[0])), "value2": float(sysobj.scalar(r[1]))}
    return checksums(sysobj.host(r))


def emit(rec):
    print(json.dumps(rec), flush=True)


def run_system(sysobj, mod, extra, data, opt):
    impls = case_impls(sysobj.name, mod, extra)
    conv = data["conv"]          # numpy/cupy array -> this system's array

    def wanted(cid):
        return opt.cases is None or cid in opt.cases

    def case(cid, n, impl_key, arrays, extra_args=(), nbytes=None):
        if not wanted(cid):
            return
        impl = impls.get(impl_key)
        if impl is None:
            return
        fn, kind = impl
        base = [conv(a) for a in arrays]
        nbytes = nbytes if nbytes is not None else float(sum(a.nbytes for a in arrays))
        k = rotation(nbytes) if sysobj.name != "numpy" else 1
        sets = [tuple(base) + tuple(extra_args)]
        for _ in range(1, k):
            sets.append(tuple(sysobj.copy(a) for a in base) + tuple(extra_args))
        rec = {"case": cid, "n": int(n), "system": sysobj.name, "bytes": nbytes, "rot": k}
        v = VARIANTS.get(sysobj.name, {}).get(impl_key)
        if v:
            rec["variant"] = v
        try:
            r, us, mn, reps = measure(sysobj, fn, sets, opt)
            rec.update({"us": round(us, 3), "min_us": round(mn, 3), "reps": reps})
            rec.update(values(sysobj, r, kind))
        except Exception as ex:  # a peer that cannot run a case: say so, go on
            rec["error"] = f"{type(ex).__name__}: {ex}"[:400]
            sysobj.sync() if sysobj.name != "numpy" else None
        emit(rec)
        del sets, base

    x = data["x"]
    for c in opt.curve:
        n = 1 << c
        case("sum_f32", n, "sum", [x[:n]])
    N = 1 << opt.log2n
    case("sum_f64", N, "sum", [data["xd"]])
    case("sum_i32", N, "sum", [data["xi"]])
    case("max_f32", N, "max_f32", [x[:N]])
    case("dot_f32", N, "dot_f32", [x[:N], data["b"]])
    case("maxabs_f32", N, "maxabs_f32", [x[:N], data["b"]])
    case("sumsq_f32", N, "sumsq_f32", [x[:N]])
    case("argmax_f32", N, "argmax_f32", [x[:N]])
    NS = 1 << opt.log2s
    for lay in LAYOUTS:
        ptr, seg, lens = data["ptr"][lay], data["seg"][lay], data["lens"][lay]
        nseg = int(ptr.size) - 1
        csr_bytes = float(NS * 4 + ptr.size * 4)
        if sysobj.name == "torch":
            case("csr_" + lay, NS, "csr", [x[:NS]], (conv(lens), nseg), nbytes=csr_bytes)
        else:
            case("csr_" + lay, NS, "csr", [x[:NS]], (conv(ptr), nseg), nbytes=csr_bytes)
        case("keys_" + lay, NS, "keys", [x[:NS], seg], (nseg,))
    R, C = opt.rows, opt.cols
    case("rowsum", R * C, "rowsum", [x[:R * C].reshape(R, C)])
    case("colsum", R * C, "colsum", [x[:R * C].reshape(R, C)])
    R, C = opt.short_rows, opt.short_cols
    case("rowsum_short", R * C, "rowsum", [x[:R * C].reshape(R, C)])
    R, C = opt.rows, opt.cols
    case("sum2d_f32", R * C, "sum", [x[:R * C].reshape(R, C)])
    if R * C <= N:
        case("maxabs2d_f32", R * C, "maxabs_f32", [x[:R * C].reshape(R, C), data["b"][:R * C].reshape(R, C)])

    if wanted("overhead") and sysobj.name != "numpy":
        xs = conv(x[:1024])
        calls = opt.calls
        for _ in range(100):
            float(xs.sum().item())
        t0 = time.perf_counter()
        for _ in range(calls):
            v = xs.sum().item()
        us = (time.perf_counter() - t0) * 1e6 / calls
        emit({"case": "overhead", "n": 1024, "system": sysobj.name, "variant": "x.sum().item()",
              "calls": calls, "us": round(us, 3), "value": float(v)})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log2n", type=int, default=28)
    ap.add_argument("--curve", default="10,20,24,26,28,30")
    ap.add_argument("--log2s", type=int, default=26)
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", type=int, default=16384)
    ap.add_argument("--short-rows", type=int, default=1 << 25)
    ap.add_argument("--short-cols", type=int, default=8)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--budget-ms", type=float, default=2000)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--cases", default=None)
    ap.add_argument("--systems", default="cupy,torch")
    ap.add_argument("--numpy-check", action="store_true")
    opt = ap.parse_args()
    opt.curve = [int(c) for c in opt.curve.split(",") if c]
    opt.cases = set(opt.cases.split(",")) if opt.cases else None
    systems = opt.systems.split(",")

    cp = torch = None
    cfg = {"case": "config", "system": "peers", "numpy": np.__version__}
    if opt.numpy_check:
        xp = np
    else:
        try:                                # CuPy also builds the inputs when it is there
            import cupy as cp
            cfg["cupy"] = cp.__version__
        except Exception as ex:
            cfg["cupy_error"] = str(ex)[:200]
            cp = None
        if "torch" in systems:
            try:
                import torch
                if not torch.cuda.is_available():
                    raise RuntimeError("torch.cuda.is_available() is False")
                cfg["torch"] = torch.__version__
            except Exception as ex:
                cfg["torch_error"] = str(ex)[:200]
                torch = None
        if cp is None and torch is None:
            emit(dict(cfg, note="neither CuPy nor PyTorch with CUDA: nothing to measure"))
            print("peers.py: neither CuPy nor PyTorch with CUDA is usable", file=sys.stderr)
            return 0
        xp = cp if cp is not None else np
    emit(cfg)

    # inputs: every f32 case reads a prefix of x (as in the C programs)
    t0 = time.perf_counter()
    N, NS = 1 << opt.log2n, 1 << opt.log2s
    NX = max([N, NS, opt.rows * opt.cols, opt.short_rows * opt.short_cols] + [1 << c for c in opt.curve])
    data = {"x": gen(xp, "f32", NX, SEED_X), "b": gen(xp, "f32", N, SEED_B),
            "xd": gen(xp, "f64", N, SEED_F64), "xi": gen(xp, "i32", N, SEED_I32),
            "ptr": {}, "seg": {}, "lens": {}}
    for lay in LAYOUTS:
        p = offsets(lay, NS)
        lens = np.diff(p.astype(np.int64))
        seg = np.repeat(np.arange(p.size - 1, dtype=np.int32), lens)
        data["ptr"][lay] = xp.asarray(p)
        data["seg"][lay] = xp.asarray(seg)
        data["lens"][lay] = xp.asarray(lens)
    if xp is not np:
        cp.cuda.Device().synchronize()
    print(f"peers.py: inputs ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    if opt.numpy_check:
        data["conv"] = lambda a: a
        run_system(NumpySys(), np, {}, data, opt)
        return 0
    if cp is not None and "cupy" in systems:
        extra = {}
        try:
            import cupyx
            extra["scatter_add"] = cupyx.scatter_add
        except Exception:
            pass
        data["conv"] = lambda a: a
        run_system(CupySys(cp), cp, extra, data, opt)
        cp.get_default_memory_pool().free_all_blocks()
    if torch is not None:
        if cp is not None:
            conv = lambda a: torch.from_dlpack(a)    # the same device memory
        else:
            conv = lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda()
        data["conv"] = conv
        run_system(TorchSys(torch), torch, {}, data, opt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
