"""bench_overhead.py -- host time per call of a cached expression, median over N calls.

    /usr/bin/python3 python/bench_overhead.py [--calls 100000]

Host arrays (NumPy) always; on a GPU machine also CuPy and PyTorch device arrays, beside
cupy.ReductionKernel and torch.sum on the same data (all synchronised the same way: a
redjit call returns a Python number, so each baseline is converted with float()).
Each figure is the median of per-call times, in microseconds, of a tiny input, so the
figure is overhead rather than work."""
import argparse
import os
import statistics
import sys
import time

import numpy as np

# this folder holds the package's sources, not the built extension: import the installed
# (or PYTHONPATH) redjit instead
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]
import redjit  # noqa: E402


def median_us(fn, calls):
    for _ in range(min(1000, calls)):
        fn()
    times = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times) / 1000.0


class FixedCAI:
    """A device array described once, by an instance attribute (Numba's way)."""

    def __init__(self, cai):
        self.__cuda_array_interface__ = dict(cai, stream=None)


def row(name, us):
    print(f"| {name:<52} | {us:9.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024, help="elements of the input")
    args = ap.parse_args()
    n, calls = args.size, args.calls

    print(f"redjit {redjit.__version__} (library {redjit.library_version}), Python {sys.version.split()[0]}, "
          f"{calls} calls, {n} elements, median host time per call")
    print("| call | us/call |")
    print("|---|---|")
    cpu = redjit.Context(device="cpu", threads=1)
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    e = cpu.prepare("sum(x)")
    row("redjit e(x=numpy) cpu, cached Expr", median_us(lambda: e(x=x), calls))
    row("redjit.Context.eval('sum(x)', x=numpy) cpu", median_us(lambda: cpu.eval("sum(x)", x=x), calls))
    row("numpy x.sum() (float)", median_us(lambda: float(x.sum()), calls))

    if not redjit.gpu_available():
        print(f"\nno GPU ({redjit.default_context().gpu_error()}): device rows skipped")
        return
    gpu = redjit.Context(device="gpu")
    eg = gpu.prepare("sum(x)")
    try:
        import cupy as cp
        d = cp.asarray(x)
        row("redjit e(x=cupy) gpu, cached Expr", median_us(lambda: eg(x=d), calls))
        # where the time of e(x=cupy) goes: the interface CuPy builds for each call
        # (redjit reads it before __dlpack__, which is timed beside it), and redjit's
        # binding and run without it (an object carrying a fixed
        # __cuda_array_interface__, as Numba's arrays do)
        row("  cupy d.__cuda_array_interface__ alone (read)", median_us(lambda: d.__cuda_array_interface__, calls))
        row("  cupy d.__dlpack__(stream=1) alone (not read)", median_us(lambda: d.__dlpack__(stream=1), calls))
        fixed = FixedCAI(d.__cuda_array_interface__)
        row("  redjit e(x=fixed __cuda_array_interface__)", median_us(lambda: eg(x=fixed), calls))
        rk = cp.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "rj_sum")
        row("cupy.ReductionKernel(d) + float()", median_us(lambda: float(rk(d)), calls))
        row("cupy.ReductionKernel(d) (no sync)", median_us(lambda: rk(d), calls))
        row("cupy d.sum() + float()", median_us(lambda: float(d.sum()), calls))
    except ImportError:
        print("(no CuPy)")
    try:
        import torch
        t = torch.from_numpy(x).cuda()
        row("redjit e(x=torch) gpu, cached Expr", median_us(lambda: eg(x=t), calls))
        row("  torch t.__cuda_array_interface__ alone (read)", median_us(lambda: t.__cuda_array_interface__, calls))
        row("torch.sum(t).item()", median_us(lambda: torch.sum(t).item(), calls))
        row("torch.sum(t) (no sync)", median_us(lambda: torch.sum(t), calls))
    except ImportError:
        print("(no PyTorch)")


if __name__ == "__main__":
    main()
