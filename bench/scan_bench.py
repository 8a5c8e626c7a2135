"""scan_bench.py -- scans (issue 32) on the GPU: redjit against CUB's DeviceScan (through
CuPy with CUPY_ACCELERATORS=cub), torch.cumsum, torch.compile and jax.lax.associative_scan
(jax.jit, on the same device memory through DLPack), in one process on the same device arrays,
every redjit result checked against a peer's (or a float64 reference).

    PYTHONPATH=BUILD/python/pkg CUPY_ACCELERATORS=cub python3 bench/scan_bench.py [--quick] [--out FILE.md]

Times are medians over batches of calls (each batch ended by a device synchronisation), in us;
GB/s counts the bytes a scan must move: its inputs read once and its outputs written once.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

import redjit

try:
    import cupy as cp
except Exception:  # noqa: BLE001 -- CuPy is optional
    cp = None

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # PyTorch shares the device
try:
    import jax
    import jax.numpy as jnp
except Exception:  # noqa: BLE001 -- JAX is optional
    jax = None


def timeit(fn, reps, batch=5):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) / batch * 1e6)
    return statistics.median(ts)


def time_compiled(t, fn, arg, reps, what):
    """torch.compile of fn, timed into t["torch.compile"] on arg; a compile that fails is
    reported and left out of the row."""
    try:
        f = torch.compile(fn)
        f(arg)
        t["torch.compile"] = timeit(lambda: f(arg), reps)
    except Exception as ex:  # noqa: BLE001 -- a peer that cannot compile is left out, not fatal
        print(f"torch.compile {what}:", ex, file=sys.stderr)


def time_jax(t, make, args, reps, what):
    """jax.jit(make()) on args (PyTorch tensors, handed over through DLPack), timed into
    t["jax.lax.associative_scan"]; a peer that fails (out of memory, say) is reported and left
    out of the row."""
    if jax is None:
        return
    try:
        f = jax.jit(make())
        xs = [jax.dlpack.from_dlpack(a) for a in args]
        jax.block_until_ready(f(*xs))
        t["jax.lax.associative_scan"] = timeit(lambda: jax.block_until_ready(f(*xs)), reps)
    except Exception as ex:  # noqa: BLE001 -- a peer that cannot run is left out, not fatal
        print(f"jax {what}:", ex, file=sys.stderr)


def affine(p, q):
    """(a1, b1) then (a2, b2): h -> a2 * (a1 * h + b1) + b2."""
    return p[0] * q[0], p[1] * q[0] + q[1]


def close(got, ref, mag, rtol):
    got = torch.as_tensor(got, device="cuda").double()
    ref = torch.as_tensor(ref, device="cuda").double()
    err = (got - ref).abs() - rtol * mag.double()
    return bool((err <= 0).all().item()), float(((got - ref).abs() / mag.double().clamp_min(1e-30)).max().item())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    opt = ap.parse_args()
    lg = 20 if opt.quick else 28
    reps = 3 if opt.quick else 15
    dev = "cuda"
    g = torch.Generator(device=dev)
    g.manual_seed(32)
    ctx = redjit.Context(device="gpu")
    rows = []   # (case, bytes, {system: us}, check)
    failed = 0

    def row(case, nbytes, times, check):
        nonlocal failed
        rows.append((case, nbytes, times, check))
        if not check.startswith("ok"):
            failed += 1
        best = min((v for k, v in times.items() if k != "redjit"), default=None)
        print(f"{case}: " + ", ".join(f"{k} {v:.0f} us" for k, v in times.items()) +
              (f"; redjit vs best {best / times['redjit']:.2f}x" if best else "") + f"; {check}", flush=True)

    # 1. cumsum of 2^28 f32
    n = 1 << lg
    x = torch.randn(n, device=dev, generator=g)
    e = ctx.prepare("cumsum(x)")
    r = torch.from_dlpack(e(x=x))
    ref = torch.cumsum(x.double(), 0)
    ok, worst = close(r, ref, torch.cumsum(x.abs().double(), 0), 1e-5)
    t = {"redjit": timeit(lambda: e(x=x), reps), "torch.cumsum": timeit(lambda: torch.cumsum(x, 0), reps)}
    if cp is not None:
        xc = cp.from_dlpack(x)
        t["cupy.cumsum (accelerators=cub)"] = timeit(lambda: cp.cumsum(xc), reps)
    time_compiled(t, lambda v: torch.cumsum(v, 0), x, reps, "cumsum")
    time_jax(t, lambda: lambda v: jax.lax.associative_scan(jnp.add, v), [x], reps, "cumsum")
    row(f"cumsum(x), f32, 2^{lg}", 8 * n, t, f"ok (max error {worst:.1e} of the running sum of |x|)" if ok else f"FAIL {worst:.1e}")
    del r, ref

    # 2. cumsum of 2^28 i32 (redjit and torch widen to i64; CUB keeps i32)
    xi = torch.randint(-1000, 1000, (n,), device=dev, dtype=torch.int32, generator=g)
    ei = ctx.prepare("cumsum(x)")
    r = torch.from_dlpack(ei(x=xi))
    ok = bool(torch.equal(r, torch.cumsum(xi, 0)))
    t = {"redjit": timeit(lambda: ei(x=xi), reps), "torch.cumsum": timeit(lambda: torch.cumsum(xi, 0), reps)}
    if cp is not None:
        xic = cp.from_dlpack(xi)
        t["cupy.cumsum (accelerators=cub, i32 out)"] = timeit(lambda: cp.cumsum(xic), reps)
    row(f"cumsum(x), i32 -> i64, 2^{lg}", 12 * n, t, "ok (exact)" if ok else "FAIL")
    del r, xi

    # 3. linear recurrence h[t] = a[t] h[t-1] + b[t] over 2^26 steps, an ordered affine operator
    m = 1 << (lg - 2)
    a = torch.rand(m, device=dev, generator=g) * 0.5 + 0.49
    b = torch.randn(m, device=dev, generator=g)
    el = ctx.prepare("ordered op aff(p, q) = (p.0 * q.0, p.1 * q.0 + q.1) identity (1.0, 0.0)\n"
                     "(scan(aff, (a[i], b[i])) over i).1")
    h = torch.from_dlpack(el(a=a, b=b))
    k = min(m, 1 << 20)
    an, bn = a[:k].double().cpu().numpy(), b[:k].double().cpu().numpy()
    href = np.empty(k)
    acc = 0.0
    for s in range(k):
        acc = an[s] * acc + bn[s]
        href[s] = acc
    hmag = np.empty(k)
    acc = 0.0
    bab = np.abs(bn)
    for s in range(k):
        acc = an[s] * acc + bab[s]
        hmag[s] = acc
    ok, worst = close(h[:k], torch.from_numpy(href), torch.from_numpy(hmag).cuda(), 1e-5)
    t = {"redjit": timeit(lambda: el(a=a, b=b), reps)}
    time_jax(t, lambda: lambda u, v: jax.lax.associative_scan(affine, (u, v))[1], [a, b], reps, "recurrence")
    row(f"linear recurrence (ordered affine scan), f32, 2^{lg - 2}", 12 * m, t,
        f"ok against a sequential f64 loop over the first 2^20 steps (max error {worst:.1e})" if ok else f"FAIL {worst:.1e}")
    del h, a, b

    # 4. row-wise cumsum of a 16384^2 f32 matrix, then of short rows (2^20 of 256)
    R = 1 << (lg // 2)
    for nr, nc in ((R, R), (1 << (lg - 8), 256)):
        A = x[:nr * nc].reshape(nr, nc)
        er = ctx.prepare("cumsum(A[i,j]) over j")
        r = torch.from_dlpack(er(A=A))
        ok, worst = close(r, torch.cumsum(A.double(), 1), torch.cumsum(A.abs().double(), 1), 1e-5)
        t = {"redjit": timeit(lambda: er(A=A), reps), "torch.cumsum": timeit(lambda: torch.cumsum(A, 1), reps)}
        if cp is not None:
            Ac = cp.from_dlpack(A)
            t["cupy.cumsum"] = timeit(lambda: cp.cumsum(Ac, axis=1), reps)
        time_compiled(t, lambda v: torch.cumsum(v, 1), A, reps, "rows")
        time_jax(t, lambda: lambda v: jax.lax.associative_scan(jnp.add, v, axis=1), [A], reps, "rows")
        shape = f"{R}^2" if nr == nc else f"2^{lg - 8} x {nc}"
        row(f"row-wise cumsum, {shape} f32", 8 * nr * nc, t, f"ok (max error {worst:.1e})" if ok else f"FAIL {worst:.1e}")
        del r

    # 5. cumsum by sorted keys, segments of 10..50
    ns = 1 << (lg - 2)
    lens = torch.randint(10, 51, (ns // 10 + 1,), device=dev, generator=g)
    ends = torch.cumsum(lens, 0)
    nseg = int((ends < ns).sum().item()) + 1
    seg = torch.repeat_interleave(torch.arange(nseg, device=dev), lens[:nseg])[:ns].to(torch.int32)
    v = x[:ns]
    ek = ctx.prepare("cumsum(v[i]) by seg[i]")
    r = torch.from_dlpack(ek(v=v, seg=seg))
    starts = torch.cat([torch.zeros(1, device=dev, dtype=torch.long), torch.cumsum(lens[:nseg], 0)[:-1]])

    def torch_seg(v=v, seg=seg, starts=starts):
        c = torch.cumsum(v, 0)
        base = torch.where(starts > 0, c[(starts - 1).clamp_min(0)], torch.zeros((), device=dev))
        return c - base[seg.long()]

    vd = v.double()
    cd = torch.cumsum(vd, 0)
    refk = cd - torch.where(starts > 0, cd[(starts - 1).clamp_min(0)], torch.zeros((), device=dev, dtype=torch.float64))[seg.long()]
    ca = torch.cumsum(vd.abs(), 0)
    magk = ca - torch.where(starts > 0, ca[(starts - 1).clamp_min(0)], torch.zeros((), device=dev, dtype=torch.float64))[seg.long()]
    ok, worst = close(r, refk, magk, 1e-5)
    t = {"redjit": timeit(lambda: ek(v=v, seg=seg), reps), "torch (cumsum - segment bases)": timeit(torch_seg, reps)}
    row(f"cumsum by sorted keys (10..50), f32, 2^{lg - 2}", 12 * ns, t, f"ok (max error {worst:.1e})" if ok else f"FAIL {worst:.1e}")

    # 6. the same segments as CSR rows: cumsum within each row's range
    ptr = torch.cat([starts, torch.full((1,), ns, device=dev, dtype=torch.long)]).to(torch.int32)
    er = ctx.prepare("cumsum(v[k]) over k in ptr[r]..ptr[r+1]")
    r = torch.from_dlpack(er(v=v, ptr=ptr))
    ok, worst = close(r, refk, magk, 1e-5)
    t = {"redjit": timeit(lambda: er(v=v, ptr=ptr), reps), "torch (cumsum - segment bases)": timeit(torch_seg, reps)}
    row(f"cumsum within CSR rows (10..50), f32, 2^{lg - 2}", 8 * ns + 4 * nseg, t,
        f"ok (max error {worst:.1e})" if ok else f"FAIL {worst:.1e}")

    dev_name = torch.cuda.get_device_name()
    lines = [f"# Scans on the GPU ({dev_name}, {time.strftime('%Y-%m-%d')})", "",
             "`CUPY_ACCELERATORS=cub python3 bench/scan_bench.py` (medians, us; GB/s of inputs read once and "
             "outputs written once)", "",
             "| case | redjit | GB/s | peers | redjit vs best peer | check |", "|---|---|---|---|---|---|"]
    for case, nbytes, times, check in rows:
        peers = {k: v for k, v in times.items() if k != "redjit"}
        best = min(peers.values()) if peers else None
        lines.append(f"| {case} | {times['redjit']:.0f} | {nbytes / times['redjit'] / 1e3:.0f} | " +
                     "; ".join(f"{k} {v:.0f}" for k, v in peers.items()) + " | " +
                     (f"{best / times['redjit']:.2f}x" if best else "-") + " | " + check.replace("|", "\\|") + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if opt.out:
        with open(opt.out, "w") as fh:
            fh.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
