"""cpu_scan.py -- the CPU executor's scans against NumPy's (np.cumsum, np.maximum.accumulate, and
a cumsum minus each segment's base for the keyed and CSR-row scans), in one process on the same arrays,
every result checked against a float64 reference.

    PYTHONPATH=build/python/pkg python3 bench/cpu_scan.py [--reps N] [--out FILE.md]

Times are medians over N calls after one warm-up, in ms, each library timed with the other idle.
"""
import argparse
import os
import sys
import time

import numpy as np

import redjit
from cpu_timing import finish, median_ms


def segmented_cumsum(x, starts):
    c = np.cumsum(x)
    base = np.where(starts > 0, c[np.maximum(starts - 1, 0)], 0)
    lens = np.diff(np.append(starts, len(x)))
    return c - np.repeat(base, lens)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out")
    opt = ap.parse_args()
    rng = np.random.default_rng(1)
    n = 1 << 24
    x = rng.uniform(-1, 1, n).astype(np.float32)
    A = x.reshape(4096, 4096)
    lens = rng.integers(10, 51, n // 10)
    starts = np.concatenate([[0], np.cumsum(lens)])
    starts = starts[starts < n]
    seg = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n))).astype(np.int32)
    ptr = np.append(starts, n).astype(np.int32)   # the same segments as CSR rows
    x64 = x.astype(np.float64)
    ctx = redjit.Context(device="cpu")
    cases = [
        ("cumsum(x)", "2^24 f32", dict(x=x), lambda: np.cumsum(x), np.cumsum(x64), np.cumsum(np.abs(x64))),
        ("cummax(x)", "2^24 f32", dict(x=x), lambda: np.maximum.accumulate(x), np.maximum.accumulate(x64), None),
        ("cumsum(A[i,j]) over j", "4096 x 4096 f32", dict(A=A), lambda: np.cumsum(A, axis=1),
         np.cumsum(A.astype(np.float64), axis=1), np.cumsum(np.abs(A.astype(np.float64)), axis=1)),
        ("cumsum(x[i]) by seg[i]", "2^24 f32, segments of 10..50", dict(x=x, seg=seg),
         lambda: segmented_cumsum(x, starts), segmented_cumsum(x64, starts), segmented_cumsum(np.abs(x64), starts)),
        ("cumsum(x[k]) over k in ptr[r]..ptr[r+1]", "2^24 f32, CSR rows of 10..50", dict(x=x, ptr=ptr),
         lambda: segmented_cumsum(x, starts), segmented_cumsum(x64, starts), segmented_cumsum(np.abs(x64), starts)),
    ]
    lines = ["| expression | size | redjit ms | NumPy ms | NumPy/redjit | max error (redjit, NumPy) |",
             "|---|---|---|---|---|---|"]
    ok = True
    for text, size, binds, np_fn, ref, mag in cases:
        e = ctx.prepare(text)
        time.sleep(0.5)
        tr = median_ms(lambda: e(**binds), opt.reps)
        time.sleep(0.5)
        tn = median_ms(np_fn, opt.reps)
        r, rn = e(**binds), np_fn()
        scale = mag if mag is not None else np.maximum(np.abs(ref), 1.0)
        err, errn = float(np.max(np.abs(r - ref) / scale)), float(np.max(np.abs(rn - ref) / scale))
        ok &= err <= 1e-4
        lines.append(f"| `{text}` | {size} | {tr:.1f} | {tn:.1f} | {tn / tr:.2f} | {err:.1e}, {errn:.1e} |")
        print(lines[-1], flush=True)
    head = [f"## Scans ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, NumPy {np.__version__})", "",
            "`PYTHONPATH=build/python/pkg python3 bench/cpu_scan.py`: the CPU executor's scans "
            "(src/cpu/scan.c, all threads) against NumPy's, medians in ms; the keyed and CSR-row scans' "
            "NumPy form is a cumsum minus each segment's base; error = |result - f64 reference| / (the running "
            "sum of magnitudes, or max(|reference|, 1) for cummax).", ""]
    finish(head, lines, opt.out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
