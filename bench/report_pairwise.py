"""report_pairwise.py -- the pairwise section of the benchmark's results that report.py takes from here
(pair_*: Gaussian kernel sums and nearest neighbours over 1-D and 3-D points, a bilinear form, batched and
plain matrix products), redjit under every strategy beside PyTorch,
torch.compile and jax.jit; the JIT compilers' first calls go into report_comp.py's table with the
compositions'.

Every redjit strategy's result is checked against the reference peer (eager PyTorch, else NumPy, else
torch.compile, else jax.jit: the first of them with a result for the case, so that a peer out of memory
on one case, eager PyTorch's n x n x 3 temporaries at 2^16 3-D points, leaves the check to the next; the
check column names the reference, and says which peer it stands in for): an array by its checksums and
a scalar by its value, as the compositions are (|difference| / max(sum |out[k]|, sqrt(n), 1) <= 1e-4, n
the terms evaluated); a nearest-neighbour result by the distances at its indices ("dist", "dist_check":
|x[i] - y[idx[i]]| in 1-D, the Euclidean distance in 3-D, in f64), to 1e-6 of their sum: where two
distances tie the indices may differ, the distances not, and a wrong index only adds to the sum.  A
disagreement is a failure (the run exits 1), a peer's disagreement with the reference a note; a product's
forced strategy too slow to time ("skipped") is neither, nor is a peer's error (its cell "err", or "OOM"
where it ran out of memory; listed under the errors).
"""
import math

from report_comp import _fmt_us as fmt_us, _md as md, _shape as shape, form_parts, group, label, time_text
from report_comp import usable_us as _us

PAIR_TITLES = {
    "pair_gauss_14": "Gaussian kernel sums", "pair_gauss_16": "Gaussian kernel sums",
    "pair_nn_14": "nearest neighbour", "pair_nn_16": "nearest neighbour",
    "pair_gauss3d_14": "Gaussian kernel sums, 3-D points", "pair_gauss3d_16": "Gaussian kernel sums, 3-D points",
    "pair_nn3d_14": "nearest neighbour, 3-D points", "pair_nn3d_16": "nearest neighbour, 3-D points",
    "pair_bilinear": "bilinear form x K y",
    "pair_bmm": "batched matrix product", "pair_matmul_4096": "matrix product",
}
STRATEGIES = ["generated", "tree", "sequential", "persistent", "segmented"]
PEERS = ["torch", "torch_compile", "jax"]
REF = ["torch", "numpy", "torch_compile", "jax"]
TOL = 1e-4
NEAREST_TOL = 1e-6   # of the sum of distances: a tie moves it by an f32 rounding of one distance at most


def is_pair(case):
    return bool(case) and case.startswith("pair_")


def _label(s):
    return {"torch": "PyTorch", "numpy": "NumPy"}.get(s, label(s))


def _n(n):
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)


def _diff(n, r, p):
    """Relative difference of record r's result from reference record p; inf where they do not match up
    or one is not a number."""
    if "dist" in r or "dist" in p:
        if r.get("nout") != p.get("nout") or "dist" not in r or "dist" not in p:
            return math.inf
        scale = abs(p["dist"])
        e = (max(abs(r["dist"] - p["dist"]), abs(r["dist_check"] - p["dist_check"]) / 7.5) / scale if scale > 0
             else (0.0 if r["dist"] == p["dist"] else math.inf))
    elif "check" in r or "check" in p:
        if r.get("nout") != p.get("nout") or "check" not in r or "check" not in p:
            return math.inf
        mag = max(abs(p.get("mag", 0.0)), math.sqrt(n), 1.0)
        e = max(abs(r["value"] - p["value"]) / mag, abs(r["check"] - p["check"]) / (7.5 * mag))
    elif "value" in r and "value" in p:
        e = abs(r["value"] - p["value"]) / max(abs(p["value"]), math.sqrt(n), 1.0)
    else:
        return math.inf
    return e if math.isfinite(e) else math.inf     # a NaN result is a disagreement


def _tol(r):
    return NEAREST_TOL if "dist" in r else TOL


def _show(r):
    if "dist" in r:
        return f"distances {r.get('dist')} / {r.get('dist_check')}"
    return f"{r.get('value')}" + (f" / {r['check']}" if "check" in r else "")


def _oom(r):
    """Whether a record's error or skip reason is an out-of-memory one (PyTorch's OutOfMemoryError,
    XLA's RESOURCE_EXHAUSTED)."""
    msg = str(r.get("error", r.get("skipped", ""))).lower()
    return "out of memory" in msg or "outofmemory" in msg or "resource_exhausted" in msg


def _check(case, n, R, P, out):
    ref = next((P[s] for s in REF if s in P and "value" in P[s]), None)
    if ref is None:
        return "no peer"
    name = _label(ref["system"])
    # the peers ahead of the reference in REF that ran the case but have no result (an error: eager
    # PyTorch out of memory): the check stands in for theirs, and says so
    passed = [s for s in REF[:REF.index(ref["system"])] if s in P and "value" not in P[s]]
    why = ", ".join(f"{_label(s)} {'out of memory' if _oom(P[s]) else 'failed'}" for s in passed)
    if passed:
        out["notes"].append(f"{case} n={_n(n)}: checked against {name}, the first peer with a result ({why})")
    name_ref = name + (f" ({why})" if passed else "")
    bad, worst, ties = [], 0.0, False
    for s, r in R.items():
        if "value" not in r:
            continue
        e, tol = _diff(n, r, ref), _tol(ref)
        worst = max(worst, e)
        if not e <= tol:
            bad.append(f"{s} {e:.1e}")
            out["failures"].append(f"{case} n={_n(n)} [{s}]: redjit {_show(r)} vs {name_ref} {_show(ref)} (relative "
                                   f"difference {e:.2e}, tolerance {tol:g})")
        elif "dist" in r and (r["value"], r["check"]) != (ref["value"], ref["check"]):
            ties = True
    for s, p in P.items():
        if p is not ref and "value" in p and not _diff(n, p, ref) <= _tol(ref):
            out["notes"].append(f"peer {_label(s)} disagrees with {name} on {case}: {_show(p)} vs {_show(ref)} "
                                f"(relative difference {_diff(n, p, ref):.2e}, tolerance {_tol(ref):g})")
    if bad:
        return "FAIL " + ", ".join(bad)
    if not any("value" in r for r in R.values()):
        return "-"
    return (f"ok vs {name}" + (f" ({worst:.0e})" if worst > 0 else "") + (f"; {why}" if passed else "") +
            ("; other indices at tied distances" if ties else ""))


def _cell(who, case, n, r, out):
    """A time cell: the time, '-' where it did not run, 'skipped' (a note), 'err' (an error), 'OOM' (a
    skip or an error for want of memory, a note or an error as those)."""
    if r is None:
        return "-"
    if "skipped" in r:
        out["notes"].append(f"{who} {case} n={_n(n)}: {r['skipped']}")
        return "OOM" if _oom(r) else "skipped"
    if _us(r) is None:
        out["errors"].append(f"{who} {case} n={_n(n)}: {r.get('error', 'no time')}")
        return "OOM" if _oom(r) else "err"
    return fmt_us(r["us"])


def _row(key, row, strategies, peers, slow, out):
    case, n = key
    R, P = row["redjit"], row["peers"]
    auto = R.get("auto", {})
    au = _us(auto)
    line = [PAIR_TITLES.get(case, case), shape(auto or next(iter(P.values()), {}), n),
            _cell("redjit", case, n, auto, out) if auto else "-"]
    line += [_cell(f"redjit [{s}]", case, n, R.get(s), out) for s in strategies]
    best, best_name = None, None
    for p in peers:
        line.append(_cell(_label(p), case, n, P.get(p), out))
        if p != "numpy" and _us(P.get(p)) is not None and (best is None or P[p]["us"] < best):
            best, best_name = P[p]["us"], p
    ratio = best / au if best and au else None
    if ratio is not None and ratio < 1.0:
        slow.append(f"{PAIR_TITLES.get(case, case)} (`{case}`): {ratio:.2f}x, {_label(best_name)} "
                    f"{time_text(best)} against redjit's {time_text(au)}")
    return line + [_label(best_name) if best_name else "-", f"{ratio:.2f}x" if ratio else "-",
                   _check(case, n, R, P, out)]


def _forms(rows):
    lines = []
    for (case, n), row in rows.items():
        passes = row["redjit"].get("auto", {}).get("passes")
        extra = f" ({passes} pass{'es' if passes != 1 else ''})" if isinstance(passes, int) and passes > 0 else ""
        parts = form_parts(row, _label, extra, timed=True)
        if parts:
            lines.append(f"- `{case}` ({row['dims']}): " + "; ".join(parts))
    return lines


def pair_section(recs, out):
    """Markdown lines of the pairwise table (none without pairwise records); out holds the lists
    failures, errors and notes that report.py prints."""
    rows = group(recs)
    if not rows:
        return []
    strategies = [s for s in STRATEGIES if any(s in row["redjit"] for row in rows.values())]
    peers = [p for p in PEERS + ["numpy"] if any(p in row["peers"] for row in rows.values())]
    for (case, n), row in rows.items():
        r = row["redjit"].get("auto") or next(iter(row["peers"].values()), {})
        row["dims"] = ", ".join(f"{i} {d}" for i, d in zip(r.get("indices", "").split(","), r.get("shape", [])))
    slow = []
    head = (["case", "shape", "redjit us"] + [f"{s} us" for s in strategies] + [f"{_label(p)} us" for p in peers] +
            ["best peer", "redjit vs best", "check"])
    body = [_row(key, row, strategies, peers, slow, out) for key, row in rows.items()]
    lines = ["## Pairwise: kernel sums, nearest neighbours, products", "",
             "Reductions over pairs, x[i] against y[j] (sums of a Gaussian kernel, the nearest neighbour), and "
             "contractions (a bilinear form, batched and plain matrix products), each one redjit expression "
             "(the automatic strategy, then each forced one; an array result left on the device; for the "
             "products `generated` too, the automatic strategy with RED_OPT_BLAS 0: the generated kernels, "
             "where auto hands an exact matrix product to cuBLASLt) beside "
             "PyTorch, torch.compile and jax.jit on the same data, normal f32 values. Shape: the extents of the "
             "expression's indices, their product the terms evaluated (the forms below name them). Times: medians "
             "of CUDA-event timings of one call, in us unless marked ms (jax.jit: wall clock from the call to "
             "`block_until_ready`); the products' forced strategies over 3 runs, and `skipped` where one run "
             "took over 2 s. The products in FP32: PyTorch with TF32 off (cuBLAS's FP32 GEMM), JAX with "
             "precision HIGHEST (and without XLA's fusion autotuner, whose compiles took over 45 s here). redjit vs best: the best peer's time over redjit's automatic one (above 1: "
             "redjit is faster). Check: every strategy's result against the reference peer (eager PyTorch, else "
             "the first of torch.compile and jax.jit with a result, named in the column with the peer it "
             "stands in for; `OOM`: a peer out of memory): arrays by their checksums, scalars by their value, "
             "to 1e-4 of max(sum |out|, sqrt(n)); nearest neighbours by the sum of the distances at their "
             "indices (|x[i] - y[idx[i]]|, in 3-D the Euclidean distance, in f64), to 1e-6 (indices may "
             "differ where distances tie).", "", md(head, body), ""]
    if slow:
        lines += ["Below 1.0x (a peer faster than redjit):", ""] + [f"- {s}" for s in slow] + [""]
    lines += ["Forms (each peer's time):", ""] + _forms(rows) + [""]
    return lines
