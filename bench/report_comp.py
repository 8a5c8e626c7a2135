"""report_comp.py -- the parts of bench/RESULTS.md that report.py takes from here: the composition
cases (comp_*: several reductions of one input, or a map over reductions' results, issue 28)
against every peer, and the JIT compilers' first calls beside their steady times.

Each composition record carries the checksums of every result ("outs"); redjit's automatic
strategy is checked against the reference peer (eager PyTorch, else CuPy, else NumPy, else a JIT
peer) result by result, and every other peer against it too (a peer's disagreement is a note,
not a failure).
"""
import math

COMP_TITLES = {
    "comp_rowstats": "row sum and sum of squares", "comp_lse": "row log-sum-exp", "comp_softmax": "row softmax",
    "comp_cssq": "centred sum of squares", "comp_segstats": "segment sum, max, count (sorted keys, 10..50)",
    "comp_3d": "sum and sum of squares over j,k (3-D)",
}
COMP_PEERS = ["cupy", "torch", "torch_compile", "jax"]
COMP_REF = ["torch", "cupy", "numpy", "torch_compile", "jax"]
LABELS = {"torch_compile": "torch.compile", "jax": "jax.jit"}
TOL = 1e-4
COMP_TOL = {"comp_segstats": [1e-4, 1e-9, 1e-9]}    # the maxima and the counts are exact
JIT_PEERS = ["torch_compile", "jax"]


def label(system):
    return LABELS.get(system, system)


def _fmt_us(us):
    if us is None:
        return "-"
    if us >= 10000:
        return f"{us / 1000:.1f} ms"
    return f"{us:.0f}" if us >= 100 else f"{us:.1f}"


def usable_us(r):
    """A record's time; None where it did not run, failed or was skipped."""
    return r.get("us") if r and "error" not in r and "skipped" not in r else None


def time_text(us):
    """A time with its unit: '12.0 us', '20.0 ms'."""
    t = _fmt_us(us)
    return t if t.endswith("ms") else t + " us"


def form_parts(row, label_of, redjit_extra="", timed=False):
    """What one case ran, for a Forms list: redjit's expression (then redjit_extra), and each
    peer's variant under label_of(peer), with its time where `timed` and it ran."""
    auto = row["redjit"].get("auto", {})
    parts = [f"redjit `{auto['expr']}`{redjit_extra}"] if auto.get("expr") else []
    for s, r in row["peers"].items():
        if r.get("variant"):
            us = usable_us(r) if timed else None
            parts.append(f"{label_of(s)} `{r['variant']}`" + (f" {time_text(us)}" if us else ""))
    return parts


def _fmt_ms(ms):
    if ms is None:
        return "-"
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}"


def _fmt_mib(bytes_):
    if not bytes_:
        return "-"
    mib = bytes_ / 2**20
    return f"{mib:.0f}" if mib >= 10 else f"{mib:.2g}"


def _md(head, body):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(out + ["| " + " | ".join(str(c) for c in row) + " |" for row in body])


def _shape(r, n):
    s = r.get("shape")
    if isinstance(s, list) and len(s) > 1:
        return " x ".join(str(d) for d in s)
    n = int(n)
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)


def outs_errors(n, r, p):
    """Relative difference of each result's checksums between records r and p (as report.py's
    rel_err: |difference| / max(sum |out|, sqrt(n), 1)); inf where they do not match up."""
    ro, po = r.get("outs"), p.get("outs")
    if not ro or not po or len(ro) != len(po):
        return [math.inf]
    errs = []
    for a, b in zip(ro, po):
        if a.get("nout") != b.get("nout"):
            errs.append(math.inf)
            continue
        mag = max(abs(b.get("mag", 0.0)), math.sqrt(n), 1.0)
        errs.append(max(abs(a["value"] - b["value"]) / mag, abs(a["check"] - b["check"]) / (7.5 * mag)))
    return errs


def out_bad(case, errs):
    """[(result index, difference, tolerance)] of the results past their tolerance."""
    tols = COMP_TOL.get(case, [])
    return [(i, e, tols[i] if i < len(tols) else TOL) for i, e in enumerate(errs)
            if e > (tols[i] if i < len(tols) else TOL)]


def group(recs):
    """{(case, n): {"redjit": {strategy: rec}, "peers": {system: rec}}} in first-seen order."""
    rows = {}
    for r in recs:
        key = (r["case"], int(r.get("n", 0)))
        row = rows.setdefault(key, {"redjit": {}, "peers": {}})
        if r.get("system") == "redjit":
            row["redjit"][r.get("strategy", "auto")] = r
        else:
            row["peers"][r.get("system")] = r
    return rows


def _check(case, n, R, P, out):
    """The check column; disagreements and errors go into out's lists."""
    ref = next((P[s] for s in COMP_REF if s in P and "outs" in P[s]), None)
    if ref is None:
        return "no peer"
    bad, worst = [], 0.0
    for s, r in R.items():
        if "outs" not in r:
            continue
        errs = outs_errors(n, r, ref)
        worst = max([worst] + errs)
        for i, e, tol in out_bad(case, errs):
            bad.append(f"{s} result {i} {e:.1e}")
            got = r["outs"][i].get("value") if i < len(r["outs"]) else "-"
            want = ref["outs"][i].get("value") if i < len(ref.get("outs", [])) else "-"
            out["failures"].append(f"{case} n={n} [{s}] result {i}: redjit sum {got} vs {label(ref['system'])} {want} "
                                   f"(relative difference {e:.2e}, tolerance {tol:g})")
    for s, p in P.items():
        if p is not ref and "outs" in p:
            for i, e, tol in out_bad(case, outs_errors(n, p, ref)):
                out["notes"].append(f"peer {label(s)} disagrees with {label(ref['system'])} on {case} result {i} "
                                    f"(relative difference {e:.2e}, tolerance {tol:g})")
    if bad:
        return "FAIL " + ", ".join(bad)
    return f"ok vs {label(ref['system'])}" + (f" ({worst:.0e})" if worst > 0 else "")


def _comp_row(key, row, out):
    case, n = key
    R, P = row["redjit"], row["peers"]
    auto = R.get("auto", {})
    us = auto.get("us") if "error" not in auto else None
    for s, r in R.items():
        if "error" in r:
            out["errors"].append(f"redjit {case} n={n} [{s}]: {r['error']}")
    line = [COMP_TITLES.get(case, case), _shape(auto or next(iter(P.values()), {}), n), auto.get("passes", "-"),
            "err" if "error" in auto else _fmt_us(us)]
    best, best_name = None, None
    for p in COMP_PEERS:
        r = P.get(p)
        if r is None or "skipped" in r:
            line.append("-")
            if r is not None:
                out["notes"].append(f"{label(p)} {case}: {r['skipped']}")
        elif "error" in r or r.get("us") is None:
            line.append("err")
            out["errors"].append(f"{label(p)} {case} n={n}: {r.get('error', 'no time')}")
        else:
            line.append(_fmt_us(r["us"]))
            if best is None or r["us"] < best:
                best, best_name = r["us"], p
    bytes_ = auto.get("bytes") or next((p.get("bytes") for p in P.values() if p.get("bytes")), 0)
    forced = ", ".join(f"{s} {_fmt_us(r.get('us'))}" for s, r in R.items() if s != "auto" and "us" in r)
    line += [label(best_name) if best_name else "-", f"{best / us:.2f}x" if best and us else "-",
             _fmt_mib(bytes_), f"{bytes_ / us / 1e3:.0f}" if us and bytes_ else "-"]
    return line + ([forced or "-"] if out["forced"] else []) + [_check(case, n, R, P, out)]


def _forms(rows):
    lines = []
    for (case, n), row in rows.items():
        parts = form_parts(row, label)
        if parts:
            lines.append(f"- {COMP_TITLES.get(case, case)}: " + "; ".join(parts))
    return lines


def comp_section(recs, out):
    """Markdown lines of the compositions table (none without composition records); out holds
    the lists failures, errors and notes that report.py prints."""
    rows = group(recs)
    if not rows:
        return []
    out["forced"] = any(s != "auto" for row in rows.values() for s in row["redjit"])
    head = (["case", "shape", "redjit passes", "redjit us"] + [f"{label(p)} us" for p in COMP_PEERS] +
            ["best peer", "redjit vs best", "MiB read", "GB/s"] + (["forced strategies us"] if out["forced"] else []) +
            ["check"])
    body = [_comp_row(key, row, out) for key, row in rows.items()]
    return (["## Compositions", "",
             "Several reductions of one input, or a map over reductions' results, each one redjit expression "
             "(automatic strategy; `redjit passes`: the passes of its plan, a map over reductions' results "
             "counting as one, one run as a reduction's epilogue, inside its kernel, not at all) beside each "
             "peer's idiomatic form, on "
             "the same data in the same run. Times: medians of CUDA-event timings of one call, in us (jax.jit: "
             "wall clock from the call to `block_until_ready`, which adds the host's synchronisation, some 10-30 "
             "us). MiB read: each input "
             "once (keys: values + keys); GB/s: that over redjit's time (softmax also writes as much). redjit vs "
             "best: the best peer's time over redjit's (above 1: redjit is faster). Check: every result's "
             "checksums against the reference peer.", "", _md(head, body), "", "Forms:", ""] + _forms(rows) + [""])


def _cold_row(title, n, redjit_cold, redjit_us, peers):
    line = [title, n, _fmt_ms(redjit_cold)]
    line += [_fmt_ms(peers[p].get("cold_ms")) if p in peers else "-" for p in JIT_PEERS]
    line += [_fmt_us(redjit_us)] + [_fmt_us(peers[p].get("us")) if p in peers else "-" for p in JIT_PEERS]
    return line


def cold_section(comp_recs, rows, order, jit, warm, titles):
    """Markdown lines of the JIT table: each case a JIT peer ran, its first call (trace, compile,
    run, synchronise; caches reset) and steady time, beside redjit's first run and time; comp_recs
    the records that carry redjit's own first run (compositions, pairwise cases), rows, order and
    titles (the pairwise cases' too) are report.py's single reductions, jit redjit_bench's jit_*
    records."""
    body = []
    for key, row in group(comp_recs).items():
        auto = row["redjit"].get("auto", {})
        peers = {p: r for p, r in row["peers"].items() if p in JIT_PEERS and "cold_ms" in r}
        if peers or "cold_ms" in auto:
            body.append(_cold_row(COMP_TITLES.get(key[0]) or titles.get(key[0], key[0]), _shape(auto, key[1]),
                                  auto.get("cold_ms"), auto.get("us"), peers))
    new = [r for r in jit if r.get("case") == "jit_new" and "ms" in r]
    for key in order:
        peers = {p: r for p, r in rows[key]["peers"].items() if p in JIT_PEERS and "cold_ms" in r}
        if peers:
            n, auto = int(key[1]), rows[key]["redjit"].get("auto", {})
            # jit_new compiled each expression once, for the first case that has it
            first = next((r["ms"] for r in new if r.get("of") == key[0]), None)
            if first is None:
                first = next((r["ms"] for r in new if auto.get("expr") and r.get("expr") == auto.get("expr")), None)
            body.append(_cold_row(titles.get(key[0], key[0]), f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else str(n),
                                  first, auto.get("us"), peers))
    if not body:
        return []
    head = (["case", "n / shape", "redjit first run ms"] + [f"{label(p)} first call ms" for p in JIT_PEERS] +
            ["redjit us"] + [f"{label(p)} us" for p in JIT_PEERS])
    warm_line = "; ".join(f"{label(r['system'])} {r['ms']:.0f} ms" for r in warm if "ms" in r)
    return ["## JIT compilers: first call and steady state", "",
            "First call of a new expression: for torch.compile (default mode, `dynamic=False`) and jax.jit a new "
            "compiled function after `torch._dynamo.reset()` / `jax.clear_caches()`, with empty Inductor and "
            "Triton cache folders and no FX graph or XLA persistent cache, timed from the call to the synchronised "
            "result; for redjit the first run of the expression (prepare, bind, run, result on the host) in a "
            "fresh context with the disk cache emptied (compositions, pairwise cases), or `jit_new` above (single reductions: "
            "one compile per expression, whatever n). Each compiler's one-time costs were paid first on a "
            "function no case uses" + (f" ({warm_line})" if warm_line else "") + ". Steady state: the medians "
            "of the tables above.", "", _md(head, body), ""]
