"""cpu_matmul.py -- the CPU executor's matrix product `sum(A[i,k]*B[k,j]) over k` against NumPy's
`A @ B` (whatever BLAS that NumPy has; the figures in bench/RESULTS-cpu.md are with OpenBLAS), in
one process on the same arrays, every result checked against a float64 product.

    PYTHONPATH=build/python/pkg python3 bench/cpu_matmul.py [--reps N] [--out FILE.md]

Times are medians over N calls after one warm-up, in ms; GFLOP/s counts 2 n^3 operations.
"""
import argparse
import os
import sys
import time

import numpy as np

import redjit
from cpu_timing import finish, median_ms


def blas_name():
    try:
        cfg = np.show_config(mode="dicts")
        return cfg["Build Dependencies"]["blas"]["name"]
    except Exception:  # noqa: BLE001 -- older NumPy: no dict form
        return "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out")
    opt = ap.parse_args()
    rng = np.random.default_rng(1)
    ctx = redjit.Context(device="cpu")
    e = ctx.prepare("sum(A[i,k]*B[k,j]) over k")
    lines = ["| n, type | redjit ms | NumPy ms | NumPy/redjit | redjit GFLOP/s | max error (redjit, NumPy) |",
             "|---|---|---|---|---|---|"]
    ok = True
    for n, dt in ((256, np.float32), (512, np.float32), (1024, np.float32), (2048, np.float32),
                  (512, np.float64), (1024, np.float64)):
        A = rng.uniform(-1, 1, (n, n)).astype(dt)
        B = rng.uniform(-1, 1, (n, n)).astype(dt)
        reps = opt.reps if n <= 1024 else max(1, opt.reps // 2)
        # each timed with the other's threads idle: OpenBLAS's spin a while after a call, and
        # on two cores took half the machine from redjit's (6.5 ms against 2.6 for 512^3 f64)
        time.sleep(0.5)
        tr = median_ms(lambda: e(A=A, B=B), reps)
        time.sleep(0.5)
        tn = median_ms(lambda: A @ B, reps)
        ref = A.astype(np.float64) @ B.astype(np.float64)
        mag = np.abs(A).astype(np.float64) @ np.abs(B).astype(np.float64)
        err = float(np.max(np.abs(e(A=A, B=B) - ref) / mag))
        errn = float(np.max(np.abs(A @ B - ref) / mag))
        ok &= err <= 1e-4
        lines.append(f"| {n}^3, {np.dtype(dt).name} | {tr:.2f} | {tn:.2f} | {tn / tr:.2f} | "
                     f"{2 * n ** 3 / tr / 1e6:.1f} | {err:.1e}, {errn:.1e} |")
        print(lines[-1], flush=True)
    head = [f"## Matrix product ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, NumPy {np.__version__} "
            f"with {blas_name()})", "",
            "`PYTHONPATH=build/python/pkg python3 bench/cpu_matmul.py`: the CPU executor's blocked product "
            "(src/cpu/gemm.c) against `A @ B`, medians in ms; error = |result - f64 product| / (|A| @ |B|).", ""]
    finish(head, lines, opt.out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
