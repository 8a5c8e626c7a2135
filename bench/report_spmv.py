"""report_spmv.py -- the sparse section of bench/RESULTS.md that report.py takes from here (issue 29):
a CSR matrix times a vector (spmv_*) and the whole-array gather sum (gather_all), redjit under the
automatic strategy and each forced one beside cuSPARSE through CuPy and PyTorch.

Every redjit strategy's result is checked against the reference peer (CuPy, else PyTorch, else
NumPy) as report_comp checks a composition's: an array by its checksums, |difference| / max(sum
|out[k]|, sqrt(nnz), 1) <= 1e-4, a scalar by |difference| / max(|reference|, sqrt(nnz), 1); a
disagreement is a failure, a peer's disagreement with the reference a note.
"""
import math

from report_comp import TOL, _fmt_us as fmt_us, _md as md, group
from report_comp import usable_us as _us

SPMV_TITLES = {
    "spmv_r32": "rows of 32, random columns", "spmv_rand": "rows of 10..50, random columns",
    "spmv_rand_i64": "rows of 10..50, random int64 columns", "spmv_poisson": "2-D Poisson, 5-point stencil",
    "spmv_power": "power-law rows (1..4, a few of 2^17..2^18)", "spmv_len13": "rows of 1..3, random columns",
    "gather_all": "sum(v[k]*x[col[k]]), one sum",
}
FORCED = ["tree", "sequential", "persistent", "segmented"]
PEERS = ["cupy", "torch"]
REF = ["cupy", "torch", "numpy"]
PEER_LABELS = {"cupy": "CuPy (cuSPARSE)", "torch": "torch.mv (cuSPARSE)", "numpy": "NumPy"}
AUTO_TARGET = 1.05    # the automatic strategy's time over the fastest forced one's
CLIFF_TARGET = 10.0   # the slowest forced strategy's time over the fastest's


def is_spmv(case):
    return bool(case) and (case.startswith("spmv_") or case == "gather_all")


def _diff(n, r, p):
    """Relative difference of record r's result from reference record p (inf where they do not
    match up)."""
    if "check" in r or "check" in p:
        if r.get("nout") != p.get("nout") or "check" not in r or "check" not in p:
            return math.inf
        mag = max(abs(p.get("mag", 0.0)), math.sqrt(n), 1.0)
        return max(abs(r["value"] - p["value"]) / mag, abs(r["check"] - p["check"]) / (7.5 * mag))
    if "value" not in r or "value" not in p:
        return math.inf
    return abs(r["value"] - p["value"]) / max(abs(p["value"]), math.sqrt(n), 1.0)


def _check(case, n, R, P, out):
    ref = next((P[s] for s in REF if s in P and "value" in P[s]), None)
    if ref is None:
        return "no peer"
    name = PEER_LABELS.get(ref["system"], ref["system"])
    bad, worst = [], 0.0
    for s, r in R.items():
        if "value" not in r:
            continue
        e = _diff(n, r, ref)
        worst = max(worst, e)
        if e > TOL:
            bad.append(f"{s} {e:.1e}")
            out["failures"].append(f"{case} nnz={n} [{s}]: redjit {r.get('value')} / {r.get('check', '')} vs {name} "
                                   f"{ref.get('value')} / {ref.get('check', '')} (relative difference {e:.2e}, "
                                   f"tolerance {TOL:g})")
    for s, p in P.items():
        if p is not ref and "value" in p and _diff(n, p, ref) > TOL:
            out["notes"].append(f"peer {PEER_LABELS.get(s, s)} disagrees with {name} on {case} (relative difference "
                                f"{_diff(n, p, ref):.2e}, tolerance {TOL:g})")
    if bad:
        return "FAIL " + ", ".join(bad)
    return f"ok vs {name}" + (f" ({worst:.0e})" if worst > 0 else "")


def _row(key, row, peers, missed, out):
    case, n = key
    R, P = row["redjit"], row["peers"]
    auto = R.get("auto", {})
    any_rec = auto or next(iter(P.values()), {})
    for s, r in R.items():
        if "error" in r:
            out["errors"].append(f"redjit {case} nnz={n} [{s}]: {r['error']}")
    au = _us(auto)
    line = [SPMV_TITLES.get(case, case), str(any_rec.get("nrows") or "-"), str(n),
            "err" if "error" in auto else fmt_us(au)]
    forced = {}
    for s in FORCED:
        r = R.get(s)
        line.append("-" if r is None else "err" if "error" in r else fmt_us(_us(r)))
        if _us(r):
            forced[s] = _us(r)
    best = None
    for p in peers:
        r = P.get(p)
        if r is None:
            line.append("-")
        elif _us(r) is None:
            line.append("err")
            out["errors"].append(f"{PEER_LABELS.get(p, p)} {case} nnz={n}: {r.get('error', 'no time')}")
        else:
            line.append(fmt_us(r["us"]))
            if p != "numpy" and (best is None or r["us"] < best):
                best = r["us"]
    line.append(f"{best / au:.2f}x" if best and au else "-")
    if au and forced:
        fastest = min(forced, key=forced.get)
        ratio = au / forced[fastest]
        line.append(f"{ratio:.2f} ({fastest})" + (" missed" if ratio > AUTO_TARGET else ""))
        if ratio > AUTO_TARGET:
            missed.append(f"{case}: auto {ratio:.2f}x the {fastest} strategy's time (target {AUTO_TARGET:g})")
    else:
        line.append("-")
    if len(forced) > 1:
        slow, fast = max(forced, key=forced.get), min(forced, key=forced.get)
        cliff = forced[slow] / forced[fast]
        line.append(f"{cliff:.1f}x ({slow})" + (" missed" if cliff > CLIFF_TARGET else ""))
        if cliff > CLIFF_TARGET:
            missed.append(f"{case}: {slow} {cliff:.0f}x the {fast} strategy's time (target {CLIFF_TARGET:g}x)")
    else:
        line.append("-")
    bytes_ = auto.get("bytes") or any_rec.get("bytes") or 0
    line.append(f"{bytes_ / au / 1e3:.0f}" if au and bytes_ else "-")
    line.append(_check(case, n, R, P, out))
    return line


def _forms(rows):
    forms = {}
    for row in rows.values():
        for s, r in row["redjit"].items():
            if s == "auto" and r.get("expr"):
                forms.setdefault("redjit", set()).add(f"`{r['expr']}`")
        for s, r in row["peers"].items():
            if r.get("variant"):
                forms.setdefault(s, set()).add(f"`{r['variant']}`")
    return [f"- {PEER_LABELS.get(s, s)}: " + "; ".join(sorted(v)) for s, v in forms.items()]


def _canonical(rows):
    """Notes on the matrices CuPy ran on, where its canonical form has fewer nonzeros."""
    notes = []
    for (case, n), row in rows.items():
        c = row["peers"].get("cupy", {})
        if c.get("peer_nnz") is not None and c["peer_nnz"] != n:
            notes.append(f"{case}: CuPy's canonical matrix has {c['peer_nnz']} nonzeros of {n} "
                         f"({n - c['peer_nnz']} repeated columns summed), {c.get('index_dtype', '?')} columns")
        elif c.get("index_dtype") and case == "spmv_rand_i64":
            notes.append(f"{case}: CuPy holds the columns as {c['index_dtype']}")
    return notes


def spmv_section(recs, out):
    """Markdown lines of the sparse table (none without sparse records); out holds the lists
    failures, errors and notes that report.py prints."""
    rows = group(recs)
    if not rows:
        return []
    peers = PEERS + [p for p in ["numpy"] if any(p in row["peers"] for row in rows.values())]
    missed = []
    head = (["case", "nrows", "nnz", "redjit auto us"] + [f"{s} us" for s in FORCED] +
            [f"{PEER_LABELS.get(p, p)} us" for p in peers] +
            ["best cuSPARSE peer / redjit", f"auto / fastest forced (target <= {AUTO_TARGET:g})",
             f"slowest / fastest forced (target <= {CLIFF_TARGET:g}x)", "GB/s", "check"])
    body = [_row(key, row, peers, missed, out) for key, row in rows.items()]
    lines = ["## Sparse: CSR SpMV against cuSPARSE", "",
             "y[r] = `sum(v[k]*x[col[k]]) over k in ptr[r]..ptr[r+1]`, a CSR matrix (int32 offsets, f32 values) "
             "times an f32 vector, the result left on the device, under the automatic strategy and each forced "
             "one; `gather_all` sums all the products into one value. The matrices are in bench/README.md. "
             "Times: medians of CUDA-event timings of one call, in us. Peers: CuPy's `csr_matrix @ x` and "
             "PyTorch's `torch.mv` (both cuSPARSE SpMV; the matrix objects built outside the timed region); for "
             "`gather_all`, `cp.dot(v, x[col])` and `torch.dot(v, x[col])`. torch.compile and jax.jit do not "
             "run these cases. best cuSPARSE peer / redjit: the faster peer's time over redjit's automatic "
             "strategy's (above 1: redjit is faster). auto / fastest forced: the automatic strategy's time over "
             "the fastest forced strategy's (named); slowest / fastest forced: the forced strategies' spread "
             "(the slowest named); `missed` marks a target not met. GB/s: bytes that must be read (values, "
             "columns, offsets and vector once) and the result written, over redjit's automatic time. Check: "
             "every strategy's result against the reference peer (CuPy, else PyTorch, else NumPy).", "",
             md(head, body), ""]
    if missed:
        lines += ["Targets missed:", ""] + [f"- {m}" for m in missed] + [""]
    lines += ["Forms:", ""] + _forms(rows) + [""]
    canon = _canonical(rows)
    if canon:
        lines += ["CuPy's `@` sums repeated columns and sorts each row's columns (`sum_duplicates`) on a matrix's "
                  "first use; that is done before the timing, so cuSPARSE runs on the canonical form of the same "
                  "matrix:", ""] + [f"- {c}" for c in canon] + [""]
    return lines
