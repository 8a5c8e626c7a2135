#!/usr/bin/python3
"""cpu_bench.py -- redjit's CPU executor against NumPy and numexpr, same inputs, one run.

Writes random f32 inputs to a scratch directory, times redjit through the C driver
bench/cpu_bench.c (built as build/bench/cpu_bench), times NumPy and numexpr in this process,
checks that all three agree with an f64 reference, measures peak memory for max(abs(x-y)),
prints a table and writes bench/RESULTS-cpu.md.  See bench/README.md.

    /usr/bin/python3 bench/cpu_bench.py [--build build] [--quick]
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import numexpr as ne

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Results must agree with the f64 reference to this fraction of sum(|terms|): f32 accumulation
# in any reasonable order (pairwise, blocked) stays well inside it; a stagnating running sum does not.
TOLERANCE = 1e-4
KEY_RUN = 30        # keysum: sorted keys, each over this many consecutive elements


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory")
    p.add_argument("--driver", help="path of cpu_bench (default BUILD/bench/cpu_bench)")
    p.add_argument("--log2n", type=int, default=26, help="vector length 2^N (default 26)")
    p.add_argument("--rows", type=int, default=8192)
    p.add_argument("--cols", type=int, default=8192)
    p.add_argument("--reps", type=int, default=7, help="timed runs per case, after a warm-up")
    p.add_argument("--threads", type=int, default=0, help="threads for redjit and numexpr (0: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", help="scratch directory for the inputs (default: a temporary one)")
    p.add_argument("--out", default=os.path.join(HERE, "RESULTS-cpu.md"), help="markdown report")
    p.add_argument("--quick", action="store_true", help="2^22 elements, 2048 x 2048, 3 runs")
    a = p.parse_args()
    if a.quick:
        a.log2n, a.rows, a.cols, a.reps = 22, 2048, 2048, 3
    a.driver = a.driver or os.path.join(a.build, "bench", "cpu_bench")
    return a


def median_ms(fn, reps):
    """Median wall time of fn() in ms over `reps` runs after one warm-up; and its result."""
    result = fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), result


def peak_rss_mib(cmd):
    """Run cmd under /usr/bin/time -v; return its maximum resident set size in MiB."""
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (" ".join(cmd), r.stderr[-2000:]))
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    return int(m.group(1)) / 1024.0


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = "%.0f GiB" % (kb / 2**20)
    except (OSError, ValueError, IndexError):
        pass
    return {"nproc": len(os.sched_getaffinity(0)), "cpu": model, "memory": mem,
            "kernel": platform.release(), "python": platform.python_version(),
            "numpy": np.__version__, "numexpr": ne.__version__}


def scaled_error(got, ref, mag):
    """max |got - ref| / sum|terms|, elementwise for arrays."""
    got, ref, mag = (np.asarray(v, dtype=np.float64) for v in (got, ref, mag))
    mag = np.where(mag > 0, mag, 1.0)
    return float(np.max(np.abs(got - ref) / mag))


def references(x, y, chunk=1 << 22):
    """(f64 reference, sum of |terms|) per vector case, computed in chunks to bound memory."""
    acc = {"sum": [0.0, 0.0], "dot": [0.0, 0.0], "maxabs": [0.0, 0.0]}
    for lo in range(0, len(x), chunk):
        xc = x[lo:lo + chunk].astype(np.float64)
        yc = y[lo:lo + chunk].astype(np.float64)
        acc["sum"][0] += np.sum(xc)
        acc["sum"][1] += np.sum(np.abs(xc))
        p = xc * yc
        acc["dot"][0] += np.sum(p)
        acc["dot"][1] += np.sum(np.abs(p))
        m = float(np.max(np.abs(xc - yc))) if len(xc) else 0.0
        acc["maxabs"][0] = max(acc["maxabs"][0], m)
    acc["maxabs"][1] = acc["maxabs"][0]     # max is exact: compare relative to the value
    return acc


def lse_rows(A):
    m = A.max(axis=1)
    return np.log(np.exp(A - m[:, None]).sum(axis=1)) + m


def lse_ref(A, chunk=1024):
    """Row log-sum-exp in f64, and its magnitude for the error (|value| + 1)."""
    out = np.empty(A.shape[0])
    for r in range(0, A.shape[0], chunk):
        out[r:r + chunk] = lse_rows(A[r:r + chunk].astype(np.float64))
    return out, np.abs(out) + 1


def cssq_ref(x, chunk=1 << 22):
    """The centred sum of squares in f64 (two passes), and itself as the magnitude."""
    mean = float(np.sum(x, dtype=np.float64)) / len(x)
    q = 0.0
    for s in range(0, len(x), chunk):
        d = x[s:s + chunk].astype(np.float64) - mean
        q += float(np.dot(d, d))
    return q, q


def main():
    a = parse_args()
    if not os.access(a.driver, os.X_OK):
        sys.exit("cpu_bench.py: %s not found; build it first: cmake --build %s --target cpu_bench"
                 % (a.driver, a.build))
    threads = a.threads or len(os.sched_getaffinity(0))
    load_before = os.getloadavg()
    ne.set_num_threads(threads)
    n = 1 << a.log2n

    tmp = None
    if a.data:
        os.makedirs(a.data, exist_ok=True)
        data = a.data
    else:
        tmp = tempfile.TemporaryDirectory(prefix="redjit-bench-")
        data = tmp.name

    # ---- inputs: uniform in [-1, 1), so sums wander around zero and magnitudes are known ----
    rng = np.random.default_rng(a.seed)
    x = (rng.random(n, dtype=np.float32) * 2 - 1).astype(np.float32)
    y = (rng.random(n, dtype=np.float32) * 2 - 1).astype(np.float32)
    A = (rng.random((a.rows, a.cols), dtype=np.float32) * 2 - 1).astype(np.float32)
    k = (np.arange(n, dtype=np.int64) // KEY_RUN).astype(np.int32)   # sorted keys, runs of KEY_RUN
    k.tofile(os.path.join(data, "k.i32"))
    ptr = np.append(np.arange(0, n, 3), n).astype(np.int32)   # CSR ranges of 3, the last what is left
    ptr.tofile(os.path.join(data, "ptr.i32"))
    X = x.reshape(-1, 8)                                       # short rows: x as rows of 8
    x.tofile(os.path.join(data, "x.f32"))
    y.tofile(os.path.join(data, "y.f32"))
    A.tofile(os.path.join(data, "A.f32"))

    driver_base = [a.driver, "--dir", data, "--n", str(n), "--rows", str(a.rows),
                   "--cols", str(a.cols), "--threads", str(a.threads)]
    driver_cmd = driver_base + ["--reps", str(a.reps)]
    print("running", " ".join(shlex.quote(c) for c in driver_cmd), file=sys.stderr)
    r = subprocess.run(driver_cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("cpu_bench.py: the driver failed:\n" + r.stderr)
    red = {c["case"]: c for c in json.loads(r.stdout)["cases"]}
    redjit_version = json.loads(r.stdout)["redjit"]

    # ---- the same cases in NumPy and numexpr, and an f64 reference for each ----
    ref = references(x, y)
    cases = [
        # name, expression, size label, bytes read, numpy, numexpr, reference, magnitude
        ("sum", "sum(x)", "2^%d" % a.log2n, 4 * n,
         lambda: np.sum(x), lambda: ne.evaluate("sum(x)", local_dict={"x": x}),
         *ref["sum"]),
        ("dot", "sum(x*y)", "2^%d" % a.log2n, 8 * n,
         lambda: np.sum(x * y), lambda: ne.evaluate("sum(x*y)", local_dict={"x": x, "y": y}),
         *ref["dot"]),
        ("maxabs", "max(abs(x-y))", "2^%d" % a.log2n, 8 * n,
         lambda: np.max(np.abs(x - y)),
         lambda: ne.evaluate("max(abs(x-y))", local_dict={"x": x, "y": y}),
         *ref["maxabs"]),
        ("rowsum", "sum(A[i,j]) over j", "%d x %d" % (a.rows, a.cols), 4 * a.rows * a.cols,
         lambda: A.sum(axis=1), lambda: ne.evaluate("sum(A, axis=1)", local_dict={"A": A}),
         A.sum(axis=1, dtype=np.float64), np.abs(A).sum(axis=1, dtype=np.float64)),
        ("colsum", "sum(A[i,j]) over i", "%d x %d" % (a.rows, a.cols), 4 * a.rows * a.cols,
         lambda: A.sum(axis=0), lambda: ne.evaluate("sum(A, axis=0)", local_dict={"A": A}),
         A.sum(axis=0, dtype=np.float64), np.abs(A).sum(axis=0, dtype=np.float64)),
        # an index: exact, so the magnitude only keeps the error relative to it
        ("argmax", "argmax(x)", "2^%d" % a.log2n, 4 * n,
         lambda: np.argmax(x), None, float(np.argmax(x)), float(max(np.argmax(x), 1))),
        ("keysum", "sum(x[i]) by k[i]", "2^%d, runs of %d" % (a.log2n, KEY_RUN), 8 * n,
         lambda: np.bincount(k, weights=x), None,
         np.bincount(k, weights=x.astype(np.float64)), np.bincount(k, weights=np.abs(x).astype(np.float64))),
        ("shortrows", "sum(X[i,j]) over j", "%d x 8 (x)" % (n // 8), 4 * n,
         lambda: X.sum(axis=1), lambda: ne.evaluate("sum(X, axis=1)", local_dict={"X": X}),
         X.sum(axis=1, dtype=np.float64), np.abs(X).sum(axis=1, dtype=np.float64)),
        ("csr", "sum(x[k]) over k in ptr[r]..ptr[r+1]", "2^%d, ranges of 3" % a.log2n, 4 * n + 4 * len(ptr),
         lambda: np.add.reduceat(x, ptr[:-1]), None,
         np.add.reduceat(x.astype(np.float64), ptr[:-1]), np.add.reduceat(np.abs(x).astype(np.float64), ptr[:-1])),
        # compositions, fused into one pass over the input by redjit's planner; NumPy's
        # idiomatic forms take two or three
        ("lse", "m = max(A[i,j]) over j; log(sum(exp(A[i,j] - m)) over j) + m",
         "%d x %d" % (a.rows, a.cols), 4 * a.rows * a.cols,
         lambda: lse_rows(A), None, *lse_ref(A)),
        ("cssq", "sum((x - mean(x)) * (x - mean(x)))", "2^%d" % a.log2n, 4 * n,
         lambda: np.sum((x - x.mean()) ** 2), None, *cssq_ref(x)),
    ]

    rows = []
    ok = True
    for name, expr, size, nbytes, np_fn, ne_fn, ref, mag in cases:
        rc = red[name]
        if "result_file" in rc:
            red_val = np.fromfile(rc["result_file"], dtype=np.float64)
        else:
            red_val = float(rc["result"])
        np_ms, np_val = median_ms(np_fn, a.reps)
        try:
            if ne_fn is None:
                raise ValueError("no such reduction in numexpr")
            ne_ms, ne_val = median_ms(ne_fn, a.reps)
        except Exception as exc:  # numexpr lacks some reductions (axis=) in some versions
            print("numexpr: %s: %s" % (name, exc), file=sys.stderr)
            ne_ms, ne_val = None, None
        errs = {"redjit": scaled_error(red_val, ref, mag), "NumPy": scaled_error(np_val, ref, mag)}
        if ne_val is not None:
            errs["numexpr"] = scaled_error(ne_val, ref, mag)
        agree = all(e <= TOLERANCE for e in errs.values())
        ok &= agree
        rows.append({"case": name, "expr": expr, "size": size, "bytes": nbytes,
                     "redjit_ms": rc["median_ms"], "redjit_first_ms": rc["first_ms"],
                     "numpy_ms": np_ms, "numexpr_ms": ne_ms, "errors": errs, "agree": agree})
    # np.dot is how NumPy users write a dot product; it goes to BLAS.  Reported apart.
    dot_blas_ms, _ = median_ms(lambda: np.dot(x, y), a.reps)

    # ---- peak memory for max(abs(x-y)) over the two inputs ----
    in_mib = 2 * 4 * n / 2**20
    rss = {"redjit cpu_bench (CPU executor)":
           peak_rss_mib(driver_base + ["--reps", "1", "--cases", "maxabs"])}
    load = ("import numpy as np, numexpr as ne; ne.set_num_threads(%d); "
            "x = np.fromfile(%r, dtype=np.float32); y = np.fromfile(%r, dtype=np.float32); "
            % (threads, os.path.join(data, "x.f32"), os.path.join(data, "y.f32")))
    rss["Python + NumPy, loading only"] = peak_rss_mib([sys.executable, "-c", load + "pass"])
    rss["NumPy np.max(np.abs(x - y))"] = peak_rss_mib([sys.executable, "-c", load + "np.max(np.abs(x - y))"])
    rss["numexpr max(abs(x-y))"] = peak_rss_mib([sys.executable, "-c", load + "ne.evaluate('max(abs(x-y))')"])
    if tmp:
        tmp.cleanup()

    # ---- report ----
    def f(v, fmt="%.2f"):
        return "-" if v is None else fmt % v

    head = ["case", "size", "redjit ms", "NumPy ms", "numexpr ms", "redjit GB/s",
            "NumPy/redjit", "numexpr/redjit", "max error (redjit, NumPy, numexpr)"]
    table = []
    for r_ in rows:
        gbs = r_["bytes"] / (r_["redjit_ms"] * 1e-3) / 1e9
        e = r_["errors"]
        table.append(["%s `%s`" % (r_["case"], r_["expr"]), r_["size"], f(r_["redjit_ms"]),
                      f(r_["numpy_ms"]), f(r_["numexpr_ms"]), "%.1f" % gbs,
                      "%.2f" % (r_["numpy_ms"] / r_["redjit_ms"]),
                      f(r_["numexpr_ms"] and r_["numexpr_ms"] / r_["redjit_ms"]),
                      ", ".join("%.1e" % e[k] if k in e else "-" for k in ("redjit", "NumPy", "numexpr"))
                      + ("" if r_["agree"] else "  DISAGREE")])
    md_table = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md_table += ["| " + " | ".join(row) + " |" for row in table]
    rss_table = ["| program | inputs MiB | peak RSS MiB | peak - inputs MiB |", "|---|---|---|---|"]
    for k, v in rss.items():
        inputs = in_mib
        rss_table.append("| %s | %.0f | %.0f | %.0f |" % (k, inputs, v, v - inputs))

    m = machine()
    cmd = "/usr/bin/python3 bench/cpu_bench.py " + " ".join(shlex.quote(s) for s in sys.argv[1:])
    notes = [
        "- Times are medians of %d runs after one warm-up, in one process per tool, on the same "
        "inputs (f32, uniform in [-1, 1), seed %d). redjit: `red_run` only, timed in C "
        "(`bench/cpu_bench.c`), CPU executor, %s threads. NumPy: `np.sum(x)`, `np.sum(x*y)`, "
        "`np.max(np.abs(x-y))`, `A.sum(axis=1)`, `A.sum(axis=0)`, `np.argmax(x)`, `np.bincount(k, weights=x)` "
        "(k: int32 keys, sorted), `X.sum(axis=1)` (X: x reshaped to rows of 8), `np.add.reduceat(x, ptr[:-1])`, `m = A.max(axis=1); np.log(np.exp(A - m[:, None]).sum(axis=1)) + m`, "
        "`np.sum((x - x.mean()) ** 2)`. numexpr (where it has the reduction): `ne.evaluate(...)` with %d threads. "
        "The last two cases are compositions that redjit's planner runs in one pass over the input "
        "(docs/language.md, \"Fusion\"); their error's magnitude is |value| + 1 (lse) and the value (cssq)."
        % (a.reps, a.seed, a.threads or "all (%d)" % threads, threads),
        "- GB/s = bytes that must be read / redjit time. Ratios are time / redjit time: above 1, "
        "redjit is faster.",
        "- Error = |result - f64 reference| / sum of |terms| (for row sums the worst row); results "
        "agree when it is at most %g." % TOLERANCE,
        "- NumPy `np.dot(x, y)` (BLAS) for the dot case: %.2f ms." % dot_blas_ms,
        "- redjit's first call (prepare + bind + first run): "
        + ", ".join("%s %.1f ms" % (r_["case"], r_["redjit_first_ms"]) for r_ in rows) + ".",
    ]
    report = "\n".join([
        "# redjit CPU benchmark",
        "",
        "Command: `%s` (from the repository root)  " % cmd.strip(),
        "Date: %s  " % datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "Machine: %d CPUs (nproc), %s, %s memory, Linux %s  " % (m["nproc"], m["cpu"], m["memory"], m["kernel"]),
        "Load average at the start (1, 5, 15 min): %.2f %.2f %.2f; other work on the machine "
        "during the run makes the figures noisier  " % load_before,
        "Software: redjit %s, Python %s, NumPy %s, numexpr %s" % (redjit_version, m["python"], m["numpy"], m["numexpr"]),
        "",
        *md_table,
        "",
        *notes,
        "",
        "## Peak memory, `max(abs(x-y))` over two 2^%d-element f32 arrays" % a.log2n,
        "",
        "Maximum resident set size from `/usr/bin/time -v`, each program run on its own; "
        "the inputs are loaded into memory by each program.",
        "",
        *rss_table,
        "",
    ])
    with open(a.out, "w") as fh:
        fh.write(report)

    widths = [max(len(str(row[i])) for row in [head] + table) for i in range(len(head))]
    for row in [head] + table:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    print()
    for k, v in rss.items():
        print("peak RSS %-32s %7.0f MiB (inputs %.0f MiB)" % (k, v, in_mib))
    print("\nwrote", a.out)
    if not ok:
        print("cpu_bench.py: results DISAGREE (see the error column)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
