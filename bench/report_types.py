"""report_types.py -- the element-type section of the benchmark's results that report.py takes from here
(types_*: sums of u8 and i16 inputs, complex c64 sums, max(abs(z)) and the conjugated dot product,
nanargmax and nansum over f32 with NaN), redjit's automatic strategy beside CuPy and PyTorch.

Every redjit strategy's result is checked against the reference peer (CuPy, else PyTorch, else NumPy):
the integer sums (scalars, and the row sums by their checksums, which are exact in f64 here) and
nanargmax exactly; max(abs(z)) by |difference| / |reference| <= 1e-6 (each library rounds its own
hypot); the float and complex sums by |difference| / max(|reference|, sqrt(n), 1) <= 1e-4 (complex:
the modulus of the difference), as report.py checks a float sum.  A disagreement is a failure (the
run exits 1), a peer's disagreement with the reference a note.
"""
import math

from report_comp import _fmt_mib as fmt_mib, _fmt_us as fmt_us, _md as md, form_parts, group
from report_comp import usable_us as _us

TYPES_TITLES = {
    "types_sum_u8": "sum(x) u8 (to i64)", "types_rowsum_u8": "row sums, u8 image (to i64)",
    "types_sum_i16": "sum(x) i16 (to i64)", "types_sum_c64": "sum(z) c64", "types_absmax_c64": "max(abs(z)) c64",
    "types_dot_c64": "sum(conj(w)*z) c64", "types_nanargmax_f32": "nanargmax(x) f32, 1% NaN",
    "types_nansum_f32": "nansum(x) f32, 1% NaN",
}
PEERS = ["cupy", "torch"]
REF = ["cupy", "torch", "numpy"]
PEER_LABELS = {"cupy": "CuPy", "torch": "PyTorch", "numpy": "NumPy"}
EXACT = {"types_sum_u8", "types_rowsum_u8", "types_sum_i16", "types_nanargmax_f32"}
RELATIVE = {"types_absmax_c64": 1e-6}   # tolerance relative to |reference| (a max, not a sum)
TOL = 1e-4


def is_types(case):
    return bool(case) and case.startswith("types_")


def _label(s):
    return PEER_LABELS.get(s, s)


def _diff(case, n, r, p):
    """Relative difference of record r's result from reference record p: 0 or inf for the exact
    cases; inf where they do not match up or one is not a number."""
    if "check" in r or "check" in p:
        if r.get("nout") != p.get("nout") or "check" not in r or "check" not in p:
            return math.inf
        if case in EXACT:
            return 0.0 if (r["value"], r["check"]) == (p["value"], p["check"]) else math.inf
        mag = max(abs(p.get("mag", 0.0)), math.sqrt(n), 1.0)
        return max(abs(r["value"] - p["value"]) / mag, abs(r["check"] - p["check"]) / (7.5 * mag))
    if "value" not in r or "value" not in p or ("imag" in r) != ("imag" in p):
        return math.inf
    if case in EXACT:
        return 0.0 if r["value"] == p["value"] else math.inf
    a = complex(r["value"], r.get("imag", 0.0))
    b = complex(p["value"], p.get("imag", 0.0))
    scale = abs(b) if case in RELATIVE else max(abs(b), math.sqrt(n), 1.0)
    e = abs(a - b) / scale if scale > 0 else (0.0 if a == b else math.inf)
    return e if math.isfinite(e) else math.inf     # a NaN result is a disagreement


def _tol(case):
    return 0.0 if case in EXACT else RELATIVE.get(case, TOL)


def _tol_text(case):
    return "exact" if case in EXACT else f"tolerance {_tol(case):g}"


def _show(r):
    if "check" in r:
        return f"{r.get('value')} / {r.get('check')}"
    return f"{r.get('value')}" + (f" {'+' if r['imag'] >= 0 else '-'} {abs(r['imag'])}j" if "imag" in r else "")


def _check(case, n, R, P, out):
    ref = next((P[s] for s in REF if s in P and "value" in P[s]), None)
    if ref is None:
        return "no peer"
    name, tol = _label(ref["system"]), _tol(case)
    bad, worst = [], 0.0
    for s, r in R.items():
        if "value" not in r:
            continue
        e = _diff(case, n, r, ref)
        worst = max(worst, e)
        if not e <= tol:
            bad.append(f"{s} {e:.1e}")
            out["failures"].append(f"{case} n={n} [{s}]: redjit {_show(r)} vs {name} {_show(ref)} (relative "
                                   f"difference {e:.2e}, {_tol_text(case)})")
    for s, p in P.items():
        if p is not ref and "value" in p and not _diff(case, n, p, ref) <= tol:
            out["notes"].append(f"peer {_label(s)} disagrees with {name} on {case}: {_show(p)} vs {_show(ref)} "
                                f"(relative difference {_diff(case, n, p, ref):.2e}, {_tol_text(case)})")
    if bad:
        return "FAIL " + ", ".join(bad)
    if not any("value" in r for r in R.values()):
        return "-"
    return f"ok vs {name}" + (f" ({worst:.0e})" if worst > 0 else "")


def _row(key, row, slow, out):
    case, n = key
    R, P = row["redjit"], row["peers"]
    auto = R.get("auto", {})
    for s, r in R.items():
        if "error" in r:
            out["errors"].append(f"redjit {case} n={n} [{s}]: {r['error']}")
    au = _us(auto)
    best, best_name = None, None
    for p in PEERS + ["numpy"]:
        r = P.get(p)
        if r is None:
            continue
        if _us(r) is None:
            out["errors"].append(f"{_label(p)} {case} n={n}: {r.get('error', 'no time')}")
        elif p != "numpy" and (best is None or r["us"] < best):
            best, best_name = r["us"], p
    ratio = best / au if best and au else None
    if ratio is not None and ratio < 1.0:
        slow.append(f"{TYPES_TITLES.get(case, case)} (`{case}`): {ratio:.2f}x, {_label(best_name)} "
                    f"{fmt_us(best)} us against redjit's {fmt_us(au)}")
    bytes_ = auto.get("bytes") or next((p.get("bytes") for p in P.values() if p.get("bytes")), 0)
    n_txt = f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)
    forced = ", ".join(f"{s} {fmt_us(_us(r))}" for s, r in R.items() if s != "auto" and _us(r))
    return [TYPES_TITLES.get(case, case), n_txt, fmt_mib(bytes_), "err" if "error" in auto else fmt_us(au),
            _label(best_name) if best_name else "-", fmt_us(best), f"{ratio:.2f}x" if ratio else "-",
            f"{bytes_ / au / 1e3:.0f}" if au and bytes_ else "-"] + \
        ([forced or "-"] if out["forced"] else []) + [_check(case, n, R, P, out)]


def _forms(rows):
    lines = []
    for (case, n), row in rows.items():
        parts = form_parts(row, _label, timed=True)
        if parts:
            lines.append(f"- `{case}`: " + "; ".join(parts))
    return lines


def types_section(recs, out):
    """Markdown lines of the element-type table (none without types records); out holds the lists
    failures, errors and notes that report.py prints."""
    rows = group(recs)
    if not rows:
        return []
    out["forced"] = any(s != "auto" for row in rows.values() for s in row["redjit"])
    slow = []
    head = (["case", "n", "MiB read", "redjit us", "best peer", "best peer us", "best peer / redjit", "GB/s"] +
            (["forced strategies us"] if out["forced"] else []) + ["check"])
    body = [_row(key, row, slow, out) for key, row in rows.items()]
    lines = ["## Element types: 8- and 16-bit integers, complex, NaN-skipping", "",
             "Reductions over the newer element types (u8, i16 and c64 inputs) and forms (nansum, nanargmax), "
             "each one redjit expression (automatic strategy, the result left on the device) beside CuPy and "
             "PyTorch on the same device memory. Times: medians of CUDA-event timings of one call, in us. MiB "
             "read: each input once; GB/s: that over redjit's time. best peer / redjit: the faster peer's time "
             "over redjit's (above 1: redjit is faster). Check: every strategy's result against the reference "
             "peer (CuPy, else PyTorch): integer sums and nanargmax exactly, max(abs(z)) to 1e-6 of its value, "
             "float and complex sums to 1e-4 of max(|sum|, sqrt(n)).", "", md(head, body), ""]
    if slow:
        lines += ["Below 1.0x (a peer faster than redjit):", ""] + [f"- {s}" for s in slow] + [""]
    lines += ["Forms (each peer's time in us):", ""] + _forms(rows) + [""]
    return lines
