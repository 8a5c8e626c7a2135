#!/usr/bin/env python3
"""peers.py -- the CuPy, PyTorch, torch.compile and JAX side of the GPU benchmark (bench/run.sh).

Builds the inputs of bench_data.h on the GPU with CuPy's uint32 arithmetic (bit-identical to the C
programs' generator; PyTorch and JAX see the same memory through DLPack), runs each case in the
idiomatic form of each library, times it with CUDA events around the call (JAX: wall clock to
block_until_ready, XLA's streams being its own; median of --reps runs after --warmup, fewer for
slow runs) and prints one JSON object per line, as cub_bench and redjit_bench.  The composition
cases (comp_*) are in peers_comp.py, the sparse ones (spmv_*, gather_all: CuPy's and PyTorch's
cuSPARSE SpMV) in peers_spmv.py, the element-type ones (types_*: u8, i16 and c64 inputs, nansum and
nanargmax; run only when --cases names them) in peers_types.py, the pairwise ones (pair_*: kernel
sums, nearest neighbours and products over normal inputs; run only when --cases names them) in
peers_pairwise.py.  torch.compile (default mode, dynamic=False) and jax.jit run the single
reductions of peers_comp.JIT_SINGLE, the compositions and the pairwise cases; each case's function
is compiled anew after the compiler's caches are reset, and its first call (trace, compile, run,
synchronise) is the record's cold_ms.  A peer that cannot be imported or compiled is left out, with
the reason in a config record and on stderr.

  peers.py [--log2n 28] [--curve 10,20,24,26,28,30] [--log2s 26] [--rows 16384 --cols 16384]
           [--short-rows 33554432 --short-cols 8] [--cube 1024,512,512] [--reps 50] [--warmup 5]
           [--budget-ms 2000] [--calls 20000] [--cases id,id,...] [--spmv-log2nnz 26] [--spmv-grid 4096]
           [--types-log2n 30] [--types-image 16384,16384] [--pair-log2n 16] [--pair-bilinear 16384]
           [--pair-bmm 64,512] [--pair-matmul 4096] [--systems cupy,torch,torch_compile,jax]
           [--jit-budget-s 150]
  peers.py --numpy-check ...   NumPy on the host, wall clock: checks the generator, layouts and
                               checksums against redjit_bench --cpu-check without a GPU; with
                               --systems torch,torch_compile,jax also those on the CPU.
"""
import argparse
import atexit
import functools
import json
import math
import os
import shutil
import sys
import tempfile
import time
import warnings

import numpy as np

from peers_comp import COMP_VARIANTS, JIT_SINGLE, comp_impls, comp_inputs, jit_single_impls
from peers_pairwise import PAIR_XLA_FLAGS, nearest_dist, pair_forms, pair_inputs, wanted_any as pair_wanted
from peers_spmv import spmv_forms, spmv_inputs, wanted_any as spmv_wanted
from peers_types import types_forms, types_inputs, wanted_any as types_wanted

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
    jit = False

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
    jit = False

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
    jit = False

    def __init__(self, torch, cuda=True):
        self.torch = torch
        self.cuda = cuda            # False: tensors on the host (--numpy-check), wall clock
        if cuda:
            self.e0 = torch.cuda.Event(enable_timing=True)
            self.e1 = torch.cuda.Event(enable_timing=True)
        warnings.filterwarnings("ignore", message=r"index_reduce\(\) is in beta")

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def time_once(self, fn, args):
        if not self.cuda:
            t0 = time.perf_counter()
            r = fn(*args)
            return r, (time.perf_counter() - t0) * 1e6
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

    def warm_input(self):
        return self.torch.linspace(-1, 1, 1000, device="cuda" if self.cuda else "cpu")


class JitSkip(Exception):
    """A JIT peer's case left out (its compile budget spent)."""


class JitMixin:
    """A JIT peer: each case's function is compiled anew after the compiler's caches are reset,
    and its first call (trace, compile, run, synchronise) is timed apart, the cold time."""
    jit = True
    compile_s = 0.0             # the cases' first calls so far

    def first_call(self, fn, args, budget_s):
        if self.compile_s > budget_s:
            raise JitSkip(f"skipped: {self.name}'s compile budget ({budget_s:g} s, --jit-budget-s) is spent")
        self.reset()
        cf = self.compile(fn)
        t0 = time.perf_counter()
        r = cf(*args)
        self.block(r)
        dt = time.perf_counter() - t0
        self.compile_s += dt
        return cf, dt * 1e3


class TorchCompileSys(JitMixin, TorchSys):
    name = "torch_compile"

    def __init__(self, torch, cuda=True):
        super().__init__(torch, cuda)
        torch._dynamo.config.suppress_errors = False    # a failed compile must not run eager

    def reset(self):
        self.torch._dynamo.reset()

    def compile(self, fn):
        return self.torch.compile(fn, dynamic=False)

    def block(self, r):
        self.sync()

    def warm_fn(self):
        return lambda w: (w > 0.75).any()


class JaxSys(JitMixin):
    name = "jax"

    def __init__(self, jax):
        self.jax = jax
        self.jnp = jax.numpy

    def sync(self):
        pass

    def time_once(self, fn, args):
        t0 = time.perf_counter()
        r = fn(*args)
        self.jax.block_until_ready(r)
        return r, (time.perf_counter() - t0) * 1e6

    def host(self, a):
        return np.asarray(a)

    def copy(self, a):
        return self.jnp.array(a, copy=True)

    def scalar(self, r):
        return r.item()

    def reset(self):
        self.jax.clear_caches()

    def compile(self, fn):
        return self.jax.jit(fn)

    def block(self, r):
        self.jax.block_until_ready(r)

    def warm_input(self):
        return self.jnp.linspace(-1, 1, 1000, dtype=self.jnp.float32)

    def warm_fn(self):
        jnp = self.jnp
        return lambda w: jnp.any(w > 0.75)


def jit_warm_up(sysobj):
    """The compiler's one-time costs (imports, worker processes, the device's first kernels) paid
    on a function no case uses, so that each case's first call shows its own compile; raises
    when the compiler does not work."""
    w = sysobj.warm_input()
    _, ms = sysobj.first_call(sysobj.warm_fn(), (w,), math.inf)
    sysobj.compile_s = 0.0
    emit({"case": "peer_jit_warmup", "system": sysobj.name, "ms": round(ms, 3)})


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


def values(sysobj, r, kind, args=()):
    """The record's value fields of result r; args: the call's arguments (a nearest neighbour's x, y)."""
    if kind == "scalar" or kind == "index":
        v = sysobj.scalar(r)
        return {"value": int(v) if kind == "index" or isinstance(v, (int, np.integer)) else float(v)}
    if kind == "pair":
        return {"value": float(sysobj.scalar(r[0])), "value2": float(sysobj.scalar(r[1]))}
    if kind == "complex":   # a complex scalar: its parts
        v = complex(sysobj.scalar(r))
        return {"value": v.real, "imag": v.imag}
    if kind == "outs":      # every result's checksums, as redjit_bench's comp_* records
        return {"outs": [checksums(sysobj.host(o)) for o in (r if isinstance(r, tuple) else (r,))]}
    if kind == "nearest":   # indices into y, and the distances at them (redjit_bench's print_nearest)
        idx = sysobj.host(r)
        d = checksums(nearest_dist(np, idx, *(sysobj.host(a) for a in args[:2])))
        return dict(checksums(idx), dist=d["value"], dist_check=d["check"])
    return checksums(sysobj.host(r))


def emit(rec):
    print(json.dumps(rec), flush=True)


def time_case(sysobj, rec, fn, kind, sets, opt):
    """Times fn over the argument sets (a JIT peer's first call, which compiles, timed apart as
    cold_ms) and emits the record.  A failure becomes the record's "error", or for a JIT peer its
    "skipped" (the table shows "-"), with the reason on stderr."""
    try:
        if sysobj.jit:
            fn, cold = sysobj.first_call(fn, sets[0], opt.jit_budget_s)
            rec["cold_ms"] = round(cold, 3)
        r, us, mn, reps = measure(sysobj, fn, sets, opt)
        rec.update({"us": round(us, 3), "min_us": round(mn, 3), "reps": reps})
        rec.update(values(sysobj, r, kind, sets[0]))
    except Exception as ex:  # a peer that cannot run a case: say so, go on
        msg = (str(ex) if isinstance(ex, JitSkip) else f"{type(ex).__name__}: {ex}")[:400]
        rec["skipped" if sysobj.jit else "error"] = msg
        if sysobj.jit:
            print(f"peers.py: {sysobj.name} {rec['case']} n={rec['n']}: {msg}", file=sys.stderr)
        try:
            sysobj.sync()
        except Exception:
            pass
    emit(rec)


def system_impls(sysobj, mods):
    """{impl key: (function, kind)} of the single reductions this system runs."""
    if sysobj.jit:
        return jit_single_impls(sysobj.name, mods)
    return case_impls(sysobj.name, mods[sysobj.name], {"scatter_add": getattr(mods.get("cupyx"), "scatter_add", None)})


def run_system(sysobj, mods, data, opt):
    impls = system_impls(sysobj, mods)
    conv = data["conv"]          # numpy/cupy array -> this system's array

    def wanted(cid):
        return opt.cases is None or cid in opt.cases

    def case(cid, n, impl_key, arrays, extra_args=(), nbytes=None, impl=None, variant=None, prep=None, fields=None):
        """prep: builds each argument set's objects from its arrays outside the timed region (a sparse
        matrix), returning (arguments, fields for the record); fields: more of the record's."""
        if not wanted(cid) or (sysobj.jit and impl is None and cid not in JIT_SINGLE):
            return
        impl = impl or impls.get(impl_key)
        if impl is None:
            return
        fn, kind = impl
        if sysobj.jit and extra_args:   # constants of the compiled function (segment counts)
            fn = (lambda f, e: lambda *a: f(*a, *e))(fn, tuple(extra_args))
            extra_args = ()
        try:
            base = [conv(a) for a in arrays]
        except Exception as ex:  # an array this peer cannot take (a dtype through DLPack): say so, go on
            emit({"case": cid, "n": int(n), "system": sysobj.name, "error": f"{type(ex).__name__}: {ex}"[:400]})
            return
        nbytes = nbytes if nbytes is not None else float(sum(a.nbytes for a in arrays))
        k = rotation(nbytes) if data["gpu"] else 1
        sets = [tuple(base) + tuple(extra_args)]
        for _ in range(1, k):
            sets.append(tuple(sysobj.copy(a) for a in base) + tuple(extra_args))
        rec = {"case": cid, "n": int(n), "system": sysobj.name, "bytes": nbytes, "rot": k}
        rec.update(fields or {})
        if prep is not None:
            try:
                built = [prep(*s) for s in sets]
            except Exception as ex:  # a peer that cannot build the case's objects: say so, go on
                emit(dict(rec, error=f"{type(ex).__name__}: {ex}"[:400]))
                return
            sets = [b[0] for b in built]
            rec.update(built[0][1])
        if kind == "outs":
            rec["shape"] = [int(d) for d in arrays[0].shape]
        v = variant or VARIANTS.get(sysobj.name, {}).get(impl_key) or COMP_VARIANTS.get(sysobj.name, {}).get(impl_key)
        if v:
            rec["variant"] = v
        time_case(sysobj, rec, fn, kind, sets, opt)
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

    comps = comp_impls(sysobj.name, mods)
    for cid, n, arrays, extra_args, nbytes in comp_inputs(data, opt):
        if cid in comps:
            case(cid, n, None, arrays, extra_args, nbytes, impl=(comps[cid], "outs"),
                 variant=getattr(comps[cid], "form", None) or COMP_VARIANTS.get(sysobj.name, {}).get(cid))

    forms = spmv_forms(sysobj.name, mods)
    for cid, n, arrays, nbytes, shape in data.get("spmv", []):
        form = forms.get("gather" if cid == "gather_all" else "spmv")
        if form:
            prep, fn, kind, variant = form
            case(cid, n, None, arrays, (), nbytes, impl=(fn, kind), variant=variant,
                 prep=functools.partial(prep, shape=shape) if prep else None,
                 fields={"nrows": shape[0], "ncols": shape[1]})

    tforms = types_forms(sysobj.name, mods)
    for cid, n, arrays, nbytes in data.get("types", []):
        if cid in tforms:
            fn, kind, variant = tforms[cid]
            case(cid, n, None, arrays, (), nbytes, impl=(fn, kind), variant=variant)

    pforms = pair_forms(sysobj.name, mods)
    for cid, n, arrays, nbytes, fields in data.get("pairs", []):
        if cid in pforms:
            fn, kind, variant = pforms[cid]
            case(cid, n, None, arrays, (), nbytes, impl=(fn, kind), variant=variant, fields=fields)

    if wanted("overhead") and data["gpu"] and not sysobj.jit and sysobj.name != "numpy":
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


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log2n", type=int, default=28)
    ap.add_argument("--curve", default="10,20,24,26,28,30")
    ap.add_argument("--log2s", type=int, default=26)
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", type=int, default=16384)
    ap.add_argument("--short-rows", type=int, default=1 << 25)
    ap.add_argument("--short-cols", type=int, default=8)
    ap.add_argument("--cube", default="1024,512,512", help="D0,D1,D2 of the 3-D composition")
    ap.add_argument("--spmv-log2nnz", type=int, default=26, help="the sparse matrices' scale (redjit_bench.c's header)")
    ap.add_argument("--spmv-grid", type=int, default=4096, help="the 2-D Poisson matrix's grid side")
    ap.add_argument("--types-log2n", type=int, default=30, help="the types cases' scale (redjit_bench.c's header)")
    ap.add_argument("--types-image", default="16384,16384", help="R,C of the u8 image of types_rowsum_u8")
    ap.add_argument("--pair-log2n", type=int, default=16, help="the pairwise cases' points: 2^P and 2^(P-2)")
    ap.add_argument("--pair-bilinear", type=int, default=16384, help="the side of pair_bilinear's K")
    ap.add_argument("--pair-bmm", default="64,512", help="B,M: pair_bmm's B products of M x M matrices")
    ap.add_argument("--pair-matmul", type=int, default=4096, help="the side of pair_matmul_4096's matrices")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--budget-ms", type=float, default=2000)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--cases", default=None)
    ap.add_argument("--systems", default=None, help="default cupy,torch,torch_compile,jax (--numpy-check: none)")
    ap.add_argument("--jit-budget-s", type=float, default=150,
                    help="a JIT peer's first calls past this many seconds in all: its other cases are skipped")
    ap.add_argument("--numpy-check", action="store_true")
    opt = ap.parse_args()
    opt.curve = [int(c) for c in opt.curve.split(",") if c]
    opt.cases = set(opt.cases.split(",")) if opt.cases else None
    opt.cube = [int(c) for c in opt.cube.split(",")]
    if len(opt.cube) != 3 or min(opt.cube) < 1:
        ap.error("--cube takes three positive extents, D0,D1,D2")
    opt.types_image = [int(c) for c in opt.types_image.split(",")]
    if len(opt.types_image) != 2 or min(opt.types_image) < 1 or math.prod(opt.types_image) > 1 << 31:
        ap.error("--types-image takes two positive extents, R,C, of at most 2^31 elements in all")
    if not 8 <= opt.types_log2n <= 31:
        ap.error("--types-log2n takes 8..31")
    opt.pair_bmm = [int(c) for c in opt.pair_bmm.split(",")]
    if not 2 <= opt.pair_log2n <= 24:
        ap.error("--pair-log2n takes 2..24")
    if (not 1 <= opt.pair_bilinear <= 65536 or len(opt.pair_bmm) != 2 or min(opt.pair_bmm) < 1 or
            opt.pair_bmm[0] * opt.pair_bmm[1] ** 2 > 1 << 31 or not 1 <= opt.pair_matmul <= 46340):
        ap.error("--pair-bilinear takes 1..65536, --pair-bmm B,M at most 2^31 elements, --pair-matmul 1..46340")
    return opt


def fresh_jit_caches():
    """Cache folders of our own for Inductor and Triton, empty and removed at exit, and no FX graph
    or AOTAutograd cache: every first call compiles from nothing.  Before torch is imported."""
    d = tempfile.mkdtemp(prefix="peers-jit-")
    atexit.register(shutil.rmtree, d, True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(d, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(d, "triton")
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"


def unavailable(cfg, name, ex):
    cfg[name + "_error"] = f"{type(ex).__name__}: {ex}"[:300]
    print(f"peers.py: {name} left out: {cfg[name + '_error']}", file=sys.stderr)


def import_peers(systems, cfg, cpu, cases=None):
    """{name: module} of the peers asked for that import (and, unless cpu, have a GPU); CuPy is
    imported in any case off the CPU, as it builds the inputs.  What fails is noted in cfg; cases:
    the ids named (the pairwise cases want XLA flags of their own)."""
    mods = {"numpy": np}
    if not cpu:
        try:
            import cupy
            mods["cupy"], cfg["cupy"] = cupy, cupy.__version__
            import cupyx
            mods["cupyx"] = cupyx
        except Exception as ex:
            if "cupy" not in mods:
                unavailable(cfg, "cupy", ex)
    if "torch" in systems or "torch_compile" in systems:
        if "torch_compile" in systems:
            fresh_jit_caches()
        try:
            import torch
            if not cpu and not torch.cuda.is_available():
                raise RuntimeError("torch.cuda.is_available() is False")
            mods["torch"], cfg["torch"] = torch, torch.__version__
        except Exception as ex:
            unavailable(cfg, "torch", ex)
    if "torch_compile" in systems and "torch" in mods:
        try:
            import triton
            cfg["triton"] = triton.__version__
        except Exception as ex:      # torch.compile's warm-up says whether it can do without
            cfg["triton_error"] = f"{type(ex).__name__}: {ex}"[:300]
    if "jax" in systems:
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"    # CuPy shares the device
        if pair_wanted(cases):   # before jax is imported: XLA reads them once
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + PAIR_XLA_FLAGS).strip()
            cfg["xla_flags"] = os.environ["XLA_FLAGS"]
        try:
            import jax
            if not cpu and jax.default_backend() == "cpu":
                raise RuntimeError("JAX has no GPU backend (jax.default_backend() is 'cpu')")
            try:
                jax.config.update("jax_enable_compilation_cache", False)
            except Exception:
                pass
            mods["jax"], cfg["jax"], cfg["jax_backend"] = jax, jax.__version__, jax.default_backend()
        except Exception as ex:
            unavailable(cfg, "jax", ex)
    return mods


def build_inputs(xp, opt, sparse, types=False, pairs=False):
    """The arrays of bench_data.h (every f32 case reads a prefix of x, as in the C programs); with
    sparse, the sparse cases' matrices asked for (peers_spmv.py); with types, the element-type
    cases' arrays named (peers_types.py); with pairs, the pairwise cases' (peers_pairwise.py)."""
    N, NS = 1 << opt.log2n, 1 << opt.log2s
    NX = max([N, NS, opt.rows * opt.cols, opt.short_rows * opt.short_cols, math.prod(opt.cube)] +
             [1 << c for c in opt.curve])
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
    if sparse and spmv_wanted(opt.cases):
        data["spmv"] = spmv_inputs(xp, opt, bd_hash, gen, data["ptr"]["rand"])
    if types and types_wanted(opt.cases):
        data["types"] = types_inputs(xp, opt, bd_hash, gen)
    if pairs and pair_wanted(opt.cases):
        data["pairs"] = pair_inputs(xp, opt, bd_hash)
    return data


def jax_conv(jax):
    """numpy/cupy array -> a JAX array: CuPy's memory through DLPack, else a copy."""
    def conv(a):
        if isinstance(a, np.ndarray):
            return jax.numpy.asarray(a)
        try:
            return jax.dlpack.from_dlpack(a)
        except Exception as ex:
            if not conv.warned:
                print(f"peers.py: jax.dlpack.from_dlpack failed ({ex}); copying through the host", file=sys.stderr)
                conv.warned = True
            return jax.device_put(a.get())
    conv.warned = False
    return conv


def torch_conv(torch, cp, cpu):
    if cp is not None:
        return lambda a: torch.from_dlpack(a)    # the same device memory
    if cpu:
        return lambda a: torch.from_numpy(np.ascontiguousarray(a))
    return lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda()


def peer_systems(systems, mods, cpu):
    """(system object, conv) of each peer to run, in table order; a JIT peer only once its
    warm-up compile works (else its reason is emitted in a config record)."""
    out = []
    if "cupy" in systems and "cupy" in mods and not cpu:
        out.append((CupySys(mods["cupy"]), lambda a: a))
    torch, cp = mods.get("torch"), mods.get("cupy")
    if torch is not None and "torch" in systems:
        out.append((TorchSys(torch, cuda=not cpu), torch_conv(torch, cp, cpu)))
    if torch is not None and "torch_compile" in systems:
        out.append((TorchCompileSys(torch, cuda=not cpu), torch_conv(torch, cp, cpu)))
    if "jax" in mods and "jax" in systems:
        out.append((JaxSys(mods["jax"]), jax_conv(mods["jax"])))
    return out


def main():
    opt = parse_args()
    if opt.numpy_check:     # NumPy, and on the CPU the peers named with --systems
        systems = [s for s in (opt.systems or "").split(",") if s in ("torch", "torch_compile", "jax")]
    else:
        systems = (opt.systems or "cupy,torch,torch_compile,jax").split(",")
    cfg = {"case": "config", "system": "peers", "numpy": np.__version__}
    mods = import_peers(systems, cfg, opt.numpy_check, opt.cases)
    cp = mods.get("cupy")
    peers = peer_systems(systems, mods, opt.numpy_check)
    if not opt.numpy_check and not peers:
        emit(dict(cfg, note=f"none of {','.join(systems)} is usable with CUDA: nothing to measure"))
        print(f"peers.py: none of {','.join(systems)} is usable with CUDA: nothing to measure", file=sys.stderr)
        return 0
    emit(cfg)

    t0 = time.perf_counter()
    xp = cp if cp is not None and not opt.numpy_check else np
    # the sparse matrices where a system that runs them is there (not in JAX's process)
    sparse = opt.numpy_check or any(spmv_forms(s.name, mods) for s, _ in peers)
    types = opt.numpy_check or any(types_forms(s.name, mods) for s, _ in peers)   # likewise
    pairs = opt.numpy_check or any(pair_forms(s.name, mods) for s, _ in peers)
    data = build_inputs(xp, opt, sparse, types, pairs)
    data["gpu"] = not opt.numpy_check
    if xp is not np:
        cp.cuda.Device().synchronize()
    print(f"peers.py: inputs ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    if opt.numpy_check:
        data["conv"] = lambda a: a
        run_system(NumpySys(), mods, data, opt)
    for sysobj, conv in peers:
        if sysobj.jit:
            try:
                jit_warm_up(sysobj)
            except Exception as ex:
                c = {"case": "config", "system": "peers"}
                unavailable(c, sysobj.name, ex)
                emit(c)
                continue
        data["conv"] = conv
        run_system(sysobj, mods, data, opt)
        if cp is not None:
            cp.get_default_memory_pool().free_all_blocks()
        if "torch" in mods and not opt.numpy_check:
            mods["torch"].cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
