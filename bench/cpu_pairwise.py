#!/usr/bin/python3
"""cpu_pairwise.py -- redjit's CPU executor on the pairwise reductions of issue 34 (kernel sums,
nearest neighbours, a bilinear form) against NumPy, same inputs, one run.

    PYTHONPATH=build/python/pkg python3 bench/cpu_pairwise.py [--n 4096] [--reps 5] [--out FILE.md]

Run it with a NumPy on OpenBLAS (pip's wheels), as RESULTS-cpu.md does.  redjit runs through the
Python package on NumPy arrays in place (a Context(device="cpu"), all cores); NumPy in its
idiomatic forms, which hold the n x n (x 3) intermediate arrays.  Times: medians of wall-clock
runs after one warm-up, in ms.  Every result is checked against a float64 evaluation, to 1e-4 of
the sum of the terms' magnitudes (nearest neighbours by their distances)."""
import argparse
import datetime
import os
import platform

import numpy as np

import redjit

from cpu_bench import median_ms   # the same timing as the CPU benchmark's


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out")
    a = ap.parse_args()
    n = a.n
    rng = np.random.default_rng(34)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    X = rng.standard_normal((n, 3)).astype(np.float32)
    Y = rng.standard_normal((n, 3)).astype(np.float32)
    K = rng.standard_normal((n, n)).astype(np.float32)
    x64, y64, X64, Y64, K64 = (v.astype(np.float64) for v in (x, y, X, Y, K))
    ctx = redjit.Context(device="cpu")

    def d3(P, Q):
        return ((P[:, None, :] - Q[None, :, :]) ** 2).sum(2)

    g1 = np.exp(-(x64[:, None] - y64[None, :]) ** 2)
    g3 = np.exp(-d3(X64, Y64))
    near = np.abs(x64[:, None] - y64[None, :]).min(1)
    bil = x64[:, None] * K64 * y64[None, :]
    cases = [
        ("Gaussian kernel sums", f"{n} x {n}", "sum(exp(-(x[i]-y[j])*(x[i]-y[j]))) over j", dict(x=x, y=y),
         lambda: np.exp(-(x[:, None] - y[None, :]) ** 2).sum(1), "np.exp(-(x[:,None]-y[None,:])**2).sum(1)",
         ("array", g1.sum(1), g1.sum(1))),
        ("Gaussian kernel sums, 3-D points", f"{n} x {n} x 3",
         "sum(exp(-sum((x[i,d]-y[j,d])*(x[i,d]-y[j,d])) over d)) over j", dict(x=X, y=Y),
         lambda: np.exp(-((X[:, None, :] - Y[None, :, :]) ** 2).sum(2)).sum(1),
         "np.exp(-((x[:,None,:]-y[None,:,:])**2).sum(2)).sum(1)", ("array", g3.sum(1), g3.sum(1))),
        ("nearest neighbour", f"{n} x {n}", "argmin(abs(x[i]-y[j])) over j", dict(x=x, y=y),
         lambda: np.abs(x[:, None] - y[None, :]).argmin(1), "np.abs(x[:,None]-y[None,:]).argmin(1)",
         ("nearest", near, None)),
        ("bilinear form x K y", f"{n} x {n}", "sum(x[i]*K[i,j]*y[j]) over i, j", dict(x=x, K=K, y=y),
         lambda: x @ K @ y, "x @ K @ y (OpenBLAS)", ("scalar", bil.sum(), np.abs(bil).sum())),
    ]
    rows, ok_all = [], True
    for title, shape, text, binds, np_fn, np_text, (kind, ref, mag) in cases:
        e = ctx.prepare(text)
        t_red, got = median_ms(lambda: e(**binds), a.reps)
        t_np, got_np = median_ms(np_fn, a.reps)
        oks = []
        for v in (got, got_np):
            v = np.asarray(v)
            if kind == "nearest":
                dist = np.abs(x64 - y64[v.astype(np.int64)])
                oks.append(bool(np.all(np.abs(dist - ref) <= 1e-6 * (1 + np.abs(ref)))))
            elif kind == "scalar":
                oks.append(abs(float(v) - ref) <= 1e-4 * mag)
            else:
                oks.append(bool(np.all(np.abs(v.astype(np.float64) - ref) <= 1e-4 * mag)))
        ok_all &= all(oks)
        rows.append((title, shape, text, np_text, t_red, t_np, all(oks)))
        print(f"{title} ({shape}): redjit {t_red:.1f} ms, NumPy {t_np:.1f} ms, {t_np / t_red:.2f}x"
              f"{'' if all(oks) else '  ** CHECK FAILED **'}", flush=True)
    if a.out:
        cpu = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo") as f:
                cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
        except OSError:
            pass
        lines = ["# Pairwise reductions on the CPU (issue 34)", "",
                 f"Command: `PYTHONPATH=build/python/pkg python3 bench/cpu_pairwise.py --n {n} --reps {a.reps} "
                 f"--out bench/RESULTS-cpu-pairwise.md`, {datetime.date.today()}, {cpu}, "
                 f"{len(os.sched_getaffinity(0))} cores, NumPy {np.__version__}.", "",
                 "redjit's CPU executor (all cores, through the Python package on the NumPy arrays) against "
                 "NumPy's idiomatic forms, which hold the n x n intermediates (the bilinear form: two "
                 "OpenBLAS calls). Medians of wall-clock runs after a warm-up, in ms; every result checked "
                 "against float64 (to 1e-4 of the terms' magnitudes; nearest neighbours by their distances).",
                 "", "| case | shape | redjit ms | NumPy ms | redjit vs NumPy | check |", "|---|---|---|---|---|---|"]
        for title, shape, text, np_text, t_red, t_np, ok in rows:
            lines.append(f"| {title} | {shape} | {t_red:.1f} | {t_np:.1f} | {t_np / t_red:.2f}x | "
                         f"{'ok' if ok else 'FAILED'} |")
        lines += ["", "Forms:", ""]
        for title, shape, text, np_text, *_ in rows:
            lines.append(f"- {title}: redjit `{text}`; NumPy `{np_text}`")
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    raise SystemExit(0 if ok_all else 1)


if __name__ == "__main__":
    main()
