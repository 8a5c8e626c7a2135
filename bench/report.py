#!/usr/bin/env python3
"""report.py -- merge the JSON lines of redjit_bench, cub_bench and peers.py into the GPU
benchmark's table: bench/RESULTS.md (with the command, date and device), bench/bandwidth.png
(matplotlib; bandwidth.csv beside it in any case) and the same table on stdout.

  report.py [--cmd "bench/run.sh ..."] [--out bench/RESULTS.md] [--png bench/bandwidth.png]
            [--device-info FILE] [--peak GB/s] FILE.jsonl ...

The composition cases (comp_*) and the JIT compilers' first calls have tables of their own
(report_comp.py), and so do the sparse cases (spmv_*, gather_all: report_spmv.py), the
element-type cases (types_*: report_types.py) and the pairwise cases (pair_*: report_pairwise.py,
their JIT compilers' first calls in report_comp.py's table).

Exits 1 when a redjit result disagrees with the reference peer's (CUB, else CuPy, else
PyTorch, else NumPy), 0 otherwise.
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys

from report_comp import LABELS, cold_section, comp_section
from report_pairwise import PAIR_TITLES, is_pair, pair_section
from report_spmv import is_spmv, spmv_section
from report_types import is_types, types_section

STRATEGIES = ["auto", "tree", "sequential", "persistent", "segmented"]
PEER_ORDER = ["cub", "cub_2calls", "cupy", "torch", "torch_compile", "jax", "numpy"]
REF_ORDER = ["cub", "cupy", "torch", "numpy", "cub_2calls", "torch_compile", "jax"]
EXACT = {"sum_i32", "max_f32", "maxabs_f32", "maxabs2d_f32", "argmax_f32"}
TOL = {"sum_f64": 1e-9}
TOL_F32 = 1e-4

TITLES = {
    "sum_f32": "sum(x) f32", "sum_f64": "sum(x) f64", "sum_i32": "sum(x) i32", "max_f32": "max(x) f32",
    "dot_f32": "sum(a*b) f32", "maxabs_f32": "max(abs(a-b)) f32", "sumsq_f32": "sum(x), sum(x*x) f32",
    "argmax_f32": "argmax(x) f32",
    "csr_one": "ranges: one segment", "csr_rand": "ranges: lengths 10..50", "csr_len3": "ranges: all length 3",
    "csr_rows1024": "ranges: rows of 1024",
    "keys_one": "keys: one segment", "keys_rand": "keys: lengths 10..50", "keys_len3": "keys: all length 3",
    "keys_rows1024": "keys: rows of 1024",
    "rowsum": "row sums", "colsum": "column sums", "rowsum_short": "row sums, short rows",
    "sum2d_f32": "sum(A) f32, a matrix", "maxabs2d_f32": "max(abs(A-B)) f32, matrices",
}


def load(paths):
    recs = []
    for p in paths:
        try:
            f = open(p)
        except OSError as ex:
            print(f"report.py: {p}: {ex}", file=sys.stderr)
            continue
        with f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    print(f"report.py: {p}: not JSON: {line[:100]}", file=sys.stderr)
    return recs


def pow2(n):
    n = int(n)
    if n > 0 and n & (n - 1) == 0:
        return f"2^{n.bit_length() - 1}"
    return str(n)


def fmt_us(us):
    if us is None:
        return "-"
    if us >= 10000:
        return f"{us / 1000:.1f} ms"
    if us >= 100:
        return f"{us:.0f}"
    return f"{us:.1f}"


def gbs(bytes_, us):
    return bytes_ / us / 1e3 if us and bytes_ else None


def rel_err(case, n, r, p):
    """Largest relative difference between redjit record r and peer record p, or None."""
    errs = []
    if "check" in r or "check" in p:
        if r.get("nout") != p.get("nout"):
            return math.inf
        mag = max(abs(p.get("mag", 0.0)), math.sqrt(n), 1.0)
        errs.append(abs(r["value"] - p["value"]) / mag)
        errs.append(abs(r["check"] - p["check"]) / (7.5 * mag))
        return max(errs)
    for key in ("value", "value2"):
        if key in p and key in r:
            a, b = r[key], p[key]
            if case in EXACT:
                errs.append(0.0 if a == b else math.inf)
            else:
                errs.append(abs(a - b) / max(abs(b), math.sqrt(n), 1.0))
        elif key in p or key in r:
            errs.append(math.inf)
    return max(errs) if errs else None


# Datasheet memory bandwidth (GB/s) of the cards the benchmark has run on, by a piece of the
# name nvidia-smi gives; the first match counts.  Others: 4800 (the H200's), or --peak.
PEAKS = [("H200", 4800.0), ("H100 80GB HBM3", 3350.0), ("H100 NVL", 3900.0), ("H100 PCIe", 2000.0)]


def datasheet_peak(device_info):
    try:
        with open(device_info) as f:
            text = f.read()
    except (OSError, TypeError):
        return 4800.0
    return next((gbs for name, gbs in PEAKS if name in text), 4800.0)


def md_table(h, body):
    out = ["| " + " | ".join(h) + " |", "|" + "|".join("---" for _ in h) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in body]
    return "\n".join(out)


def sort_records(recs):
    """The records by kind: g["rows"][(case, n)] = {"redjit": {strategy: rec}, "peers": {system: rec}}
    in g["order"] (the main table), g["held"] likewise by system (--held runs), the configs (the
    peers' merged), jit_* and overhead records, comp_*, sparse, types_* and pair_* records, the JIT
    peers' warm-ups, notes."""
    g = {"rows": {}, "order": [], "configs": [], "jit": [], "overhead": [], "notes": [], "held": {},
         "held_order": [], "comps": [], "spmv": [], "types": [], "pairs": [], "warm": []}
    rows, order, configs, held = g["rows"], g["order"], g["configs"], g["held"]
    for r in recs:
        c = r.get("case")
        if r.get("held") and c and "n" in r:
            key = (c, int(r["n"]))
            if key not in held:
                held[key] = {}
                g["held_order"].append(key)
            held[key][r.get("system")] = r
        elif c == "config":
            same = next((x for x in configs if x.get("system") == r.get("system")), None)
            if same is None:
                configs.append(r)
            elif r.get("system") == "peers":    # the JAX process's, a JIT peer's failed warm-up
                for k, v in r.items():
                    same.setdefault(k, v)
        elif c and c.startswith("comp_"):
            g["comps"].append(r)
        elif is_spmv(c):
            g["spmv"].append(r)
        elif is_types(c):
            g["types"].append(r)
        elif is_pair(c):
            g["pairs"].append(r)
        elif c == "peer_jit_warmup":
            g["warm"].append(r)
        elif c == "none":
            g["notes"].append(f"{r.get('system')}: {r.get('note')}")
        elif c and c.startswith("jit"):
            g["jit"].append(r)
        elif c == "overhead":
            g["overhead"].append(r)
        elif c and "n" in r:
            key = (c, int(r["n"]))
            if key not in rows:
                rows[key] = {"redjit": {}, "peers": {}}
                order.append(key)
            if r.get("system") == "redjit":
                rows[key]["redjit"][r.get("strategy", "auto")] = r
            else:
                rows[key]["peers"][r["system"]] = r
    # table order: the redjit program's order, cases only peers ran at the end
    order.sort(key=lambda k: (0 if rows[k]["redjit"] else 1))
    return g


def check_cell(case, n, R, P, out):
    """The check column of a main-table row: every redjit strategy against the reference peer."""
    ref = next((P[s] for s in REF_ORDER if s in P and "error" not in P[s] and "value" in P[s]), None)
    worst, bad = 0.0, []
    for s, r in R.items():
        if "error" in r:
            out["errors"].append(f"redjit {case} n={pow2(n)} [{s}]: {r['error']}")
            continue
        if ref is None or "value" not in r:
            continue
        e = rel_err(case, n, r, ref)
        if e is None:
            continue
        tol = 0.0 if case in EXACT else TOL.get(case, TOL_F32)
        if e > tol:
            bad.append(f"{s} {e:.1e}")
            out["failures"].append(f"{case} n={pow2(n)} [{s}]: redjit {r.get('value')} / {r.get('value2', r.get('check', ''))} "
                                   f"vs {ref['system']} {ref.get('value')} / {ref.get('value2', ref.get('check', ''))} "
                                   f"(relative difference {e:.2e}, tolerance {tol:g})")
        worst = max(worst, e)
    if ref is None:
        return "no peer"
    if bad:
        return "FAIL " + ", ".join(bad)
    if any("value" in r for r in R.values()):
        return f"ok vs {ref['system']}" + (f" ({worst:.0e})" if worst > 0 else "")
    return "-"


def main_line(key, row, peers, strategies, peak, out):
    """One row of the main table."""
    case, n = key
    R, P = row["redjit"], row["peers"]
    auto = R.get("auto", {})
    bytes_ = auto.get("bytes") or next((p.get("bytes") for p in P.values() if p.get("bytes")), 0)
    us = auto.get("us")
    g = gbs(bytes_, us)
    line = [TITLES.get(case, case), pow2(n), fmt_us(us) if "error" not in auto else "err",
            f"{g:.0f}" if g else "-", f"{100 * g / peak:.0f}%" if g else "-"]
    for s in strategies:
        r = R.get(s)
        line.append("-" if r is None else ("err" if "error" in r else fmt_us(r.get("us"))))
    best, best_name = None, None
    for p in peers:
        r = P.get(p)
        if r is None:
            line.append("-")
        elif "skipped" in r:          # a JIT peer that could not compile the case
            line.append("-")
            out["notes"].append(f"{LABELS.get(p, p)} {case} n={pow2(n)}: {r['skipped']}")
        elif "error" in r or r.get("us") is None:
            line.append("err")
            out["errors"].append(f"{p} {case} n={pow2(n)}: {r.get('error', 'no time')}")
        else:
            line.append(fmt_us(r["us"]))
            if best is None or r["us"] < best:
                best, best_name = r["us"], p
    line.append(LABELS.get(best_name, best_name) if best_name else "-")
    line.append(f"{best / us:.2f}x" if best and us else "-")
    line.append(fmt_us(auto.get("sync_us")))
    line.append(check_cell(case, n, R, P, out))
    return line


def main_section(g, peak, out):
    """The main table (None without rows) and the sum(x) f32 curve's points."""
    rows, order = g["rows"], g["order"]
    peers = [s for s in PEER_ORDER if any(s in rows[k]["peers"] for k in order)]
    peers += sorted({s for k in order for s in rows[k]["peers"]} - set(peers))
    strategies = [s for s in STRATEGIES[1:] if any(s in rows[k]["redjit"] for k in order)]
    head = (["case", "n", "redjit us", "GB/s", f"% of {peak / 1000:g} TB/s"] + [f"{s} us" for s in strategies] +
            [f"{LABELS.get(p, p)} us" for p in peers] + ["best peer", "redjit speed-up", "sync us", "check"])
    table, csv_rows = [], []
    for key in order:
        table.append(main_line(key, rows[key], peers, strategies, peak, out))
        case, n = key
        if case == "sum_f32":
            R, P = rows[key]["redjit"], rows[key]["peers"]
            auto = R.get("auto", {})
            bytes_ = auto.get("bytes") or next((p.get("bytes") for p in P.values() if p.get("bytes")), 0)
            csv_rows.append((n, bytes_, auto.get("us"), P.get("cub", {}).get("us"), P.get("cupy", {}).get("us"),
                             P.get("torch", {}).get("us")))
    return (md_table(head, table) if table else None), csv_rows


def held_section(g, out):
    """The GPU's work alone (--held): redjit's automatic strategy beside CUB, and the spans of the
    main table; None without held records."""
    held_body = []
    rows = g["rows"]
    for key in g["held_order"]:
        case, n = key
        H = g["held"][key]
        r, c = H.get("redjit"), H.get("cub")
        ru = r.get("us") if r and "error" not in r else None
        cu = c.get("us") if c and "error" not in c else None
        span_r = rows.get(key, {}).get("redjit", {}).get("auto", {}).get("us")
        span_c = rows.get(key, {}).get("peers", {}).get("cub", {}).get("us")
        check = "-"
        if r and "error" in r:
            out["errors"].append(f"redjit {case} n={pow2(n)} [held]: {r['error']}")
            check = "err"
        elif r and c and "value" in r and "value" in c:
            e = rel_err(case, n, r, c)
            tol = 0.0 if case in EXACT else TOL.get(case, TOL_F32)
            if e is not None and e > tol:
                check = f"FAIL {e:.1e}"
                out["failures"].append(f"{case} n={pow2(n)} [held]: redjit {r.get('value')} vs cub {c.get('value')} "
                                       f"(relative difference {e:.2e}, tolerance {tol:g})")
            elif e is not None:
                check = "ok vs cub" + (f" ({e:.0e})" if e > 0 else "")
        held_body.append([TITLES.get(case, case), pow2(n), fmt_us(ru), fmt_us(cu),
                          f"{cu / ru:.2f}x" if ru and cu else "-", fmt_us(span_r), fmt_us(span_c),
                          f"{span_r - ru:.1f}" if span_r and ru else "-", f"{span_c - cu:.1f}" if span_c and cu else "-",
                          check])
    return md_table(["case", "n", "redjit GPU us", "cub GPU us", "redjit speed-up (GPU)", "redjit span us",
                     "cub span us", "redjit span - GPU", "cub span - GPU", "check"],
                    held_body) if held_body else None


def median_of(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


def jit_section(jit, overhead, errors):
    """redjit's JIT figures (jit_new, the second process) and the per-call costs."""
    jit_lines = []
    new = [r for r in jit if r["case"] == "jit_new" and "ms" in r]
    if new:
        jit_lines.append(md_table(["new expression (empty cache)", "of case", "compile + first run ms", "NVRTC compiles",
                                   "NVRTC ms"],
                                  [[f"`{r['expr']}`", r.get("of", ""), f"{r['ms']:.1f}", r.get("compiles", ""),
                                    f"{r.get('compile_ms', 0):.1f}"] for r in new]))
        m = median_of([r["ms"] for r in new])
        jit_lines.append(f"\nMedian over {len(new)} benchmark expressions: **{m:.1f} ms** from red_prepare to the "
                         f"result (driver and NVRTC already initialised by another expression).")

    def med_of(name, field):
        v = [r[field] for r in jit if r.get("case") == name and field in r and "error" not in r]
        return median_of(v) if v else None
    proc = []
    for name, what in (("jit_disk", "kernel from the disk cache"), ("jit_cold", "REDJIT_CACHE=0: compiled")):
        ms, ctx, whole = med_of(name, "ms"), med_of(name, "ctx_ms"), med_of(name + "_process", "ms")
        if ms is not None:
            hits = [r for r in jit if r.get("case") == name and "ms" in r]
            proc.append([f"new process, {what}", f"{ctx:.1f}" if ctx is not None else "-", f"{ms:.1f}",
                         f"{whole:.0f}" if whole is not None else "-",
                         f"{hits[0].get('compiles', '-')} / {hits[0].get('disk_hits', '-')}" if hits else "-"])
    if proc:
        jit_lines.append("\n" + md_table(["second process: sum(x), 2^20 f32 on the device",
                                          "context ms (red_open + red_gpu_available)",
                                          "time to first result ms (prepare, bind, run, result)",
                                          "whole process ms", "compiles / disk hits"], proc))
    for r in jit:
        if "error" in r:
            errors.append(f"redjit {r['case']}: {r['error']}")
    if overhead:
        body = [[r["system"], r.get("variant", ""), r.get("calls", ""), f"{r['us']:.2f}" if "us" in r else "err"]
                for r in overhead]
        jit_lines.append("\n" + md_table(["per call, sum over 1024 f32 on the device (result to host unless said)", "call",
                                          "calls", "host us per call"], body))
        for r in overhead:
            if "error" in r:
                errors.append(f"{r['system']} overhead: {r['error']}")
    return jit_lines


def draw_curve(png, csv_rows, peak, notes):
    """bandwidth.csv, and the image where matplotlib is installed; returns the image's path or None."""
    csv_path = os.path.splitext(png)[0] + ".csv"
    with open(csv_path, "w") as f:
        f.write("n,bytes,redjit_us,cub_us,cupy_us,torch_us,redjit_GBps,cub_GBps\n")
        for n, b, ru, cu, pu, tu in sorted(csv_rows):
            f.write(f"{n},{b},{ru or ''},{cu or ''},{pu or ''},{tu or ''},{gbs(b, ru) or ''},{gbs(b, cu) or ''}\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        pts = sorted(csv_rows)
        if pts:
            fig, ax = plt.subplots(figsize=(7, 4.2))
            for idx, label, style in ((2, "redjit", "o-"), (3, "CUB", "s--"), (4, "CuPy", "^:"), (5, "PyTorch", "v:")):
                xs = [math.log2(p[0]) for p in pts if p[idx]]
                ys = [gbs(p[1], p[idx]) for p in pts if p[idx]]
                if xs and (idx <= 3 or len(xs) > 1):
                    ax.plot(xs, ys, style, label=label)
            ax.axhline(peak, color="gray", lw=0.8, ls="--")
            ax.text(min(math.log2(p[0]) for p in pts), peak * 0.97, f"{peak:g} GB/s datasheet",
                    va="top", fontsize=8, color="gray")
            ax.set_xlabel("n (log2), f32 elements")
            ax.set_ylabel("GB/s (bytes read / time)")
            ax.set_title("sum(x) f32: bandwidth against size")
            ax.grid(alpha=0.3)
            ax.legend()
            fig.tight_layout()
            fig.savefig(png, dpi=120)
            return png
    except ImportError:
        notes.append("matplotlib is not installed: no image; the curve's figures are in "
                     + os.path.basename(csv_path))
    except Exception as ex:  # drawing must never lose the table
        notes.append(f"the image failed: {ex}")
    return None


def device_text(device_info):
    dev = None
    if device_info and os.path.exists(device_info):
        dev = open(device_info).read().strip()
    if not dev:
        try:
            dev = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                  "--format=csv"], capture_output=True, text=True, timeout=30).stdout.strip()
        except Exception:
            dev = ""
    return dev or "unknown (nvidia-smi unavailable)"


def software(configs, notes):
    """The versions line's parts; a peer that was left out goes into the notes."""
    versions = []
    for c in configs:
        if c.get("system") == "redjit":
            versions.append(f"redjit {c.get('version')} (reps {c.get('reps')}, warm-up {c.get('warmup')}, "
                            f"budget {c.get('budget_ms')} ms per measurement)")
        elif c.get("system") == "cub":
            v = c.get("cub_version", 0)
            versions.append(f"CUB {v // 100000}.{v // 100 % 1000}.{v % 100}, CUDA runtime {c.get('cuda_runtime')}")
        elif c.get("system") == "peers":
            versions.append(", ".join(f"{k} {c[k]}" for k in ("numpy", "cupy", "torch", "triton", "jax") if k in c))
            for k in ("cupy", "torch", "triton", "torch_compile", "jax"):
                if k + "_error" in c:
                    notes.append(f"{LABELS.get(k, k)} unavailable: {c[k + '_error']}")
    return versions


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--cmd", default=" ".join(sys.argv))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md"))
    ap.add_argument("--png", default=None)
    ap.add_argument("--device-info", default=None)
    ap.add_argument("--peak", type=float, default=None,
                    help="GB/s for the percent column (default: the card's datasheet figure, from --device-info)")
    ap.add_argument("--note", action="append", default=[])
    opt = ap.parse_args()
    if opt.peak is None:
        opt.peak = datasheet_peak(opt.device_info)
    return opt


def main():
    opt = parse_args()
    png = opt.png or os.path.join(os.path.dirname(os.path.abspath(opt.out)), "bandwidth.png")
    os.makedirs(os.path.dirname(os.path.abspath(opt.out)), exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(png)), exist_ok=True)

    g = sort_records(load(opt.files))
    notes = g["notes"]
    out = {"failures": [], "errors": [], "notes": notes}
    failures, errors = out["failures"], out["errors"]
    main_table, csv_rows = main_section(g, opt.peak, out)
    comp_lines = comp_section(g["comps"], out)
    spmv_lines = spmv_section(g["spmv"], out)
    types_lines = types_section(g["types"], out)
    pair_lines = pair_section(g["pairs"], out)
    cold_lines = cold_section(g["comps"] + g["pairs"], g["rows"], g["order"], g["jit"], g["warm"],
                              dict(TITLES, **PAIR_TITLES))
    held_table = held_section(g, out)
    jit_lines = jit_section(g["jit"], g["overhead"], errors)
    image = draw_curve(png, csv_rows, opt.peak, notes)
    dev = device_text(opt.device_info)
    versions = software(g["configs"], notes)

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md = [
        "# GPU benchmark results",
        "",
        "Written by `bench/report.py`; see [README.md](README.md#gpu-redjit-against-cub-cupy-and-pytorch) for the method.",
        "",
        f"- command: `{opt.cmd}`",
        f"- date: {now}",
        "- device:",
        "",
        "```",
        dev,
        "```",
        "",
        "- software: " + ("; ".join(versions) if versions else "-"),
        "",
        "Times are medians of CUDA-event timings of one call each, in microseconds unless marked ms, on inputs "
        "already in device memory. GB/s = bytes that must be read (each input once; ranges: values + offsets; "
        "keys: values + keys) / redjit's time with the automatic strategy. Speed-up = best peer's time / redjit's "
        "(above 1: redjit is faster). `sync us`: host time of a plain synchronous red_run with the result on the "
        "host. Check: every redjit strategy's result against the reference peer (CUB, else CuPy, else PyTorch); "
        "the largest relative difference is shown.",
        "",
    ]
    if main_table:
        md += [main_table, ""]
    if image:
        md += [f"![bandwidth of sum(x) f32 against size]({os.path.basename(image)})", ""]
    if held_table:
        md += ["## The GPU's work alone", "",
               "The same calls timed again (`--held`) with the stream held by a host function until the call "
               "and its closing event are queued behind it: the span is then the GPU's work alone, the kernels "
               "and the gaps between them (CUB's are two), without the host's time to get the first kernel "
               "going, which the spans of the table above include (`span us`, from that table; the last two "
               "columns are the differences). Medians of separate runs: a difference can come out negative.", "",
               held_table, ""]
    md += comp_lines
    md += spmv_lines
    md += types_lines
    md += pair_lines
    if jit_lines:
        md += ["## Compilation and per-call costs", ""] + jit_lines + [""]
    md += cold_lines
    for extra in opt.note:
        notes.append(extra)
    if failures:
        md += ["## Disagreements", ""] + [f"- {f}" for f in failures] + [""]
    if errors:
        md += ["## Errors", ""] + [f"- {e}" for e in errors] + [""]
    if notes:
        md += ["## Notes", ""] + [f"- {x}" for x in notes] + [""]
    with open(opt.out, "w") as f:
        f.write("\n".join(md))

    for part in (main_table, held_table, "\n".join(comp_lines), "\n".join(spmv_lines), "\n".join(types_lines),
                 "\n".join(pair_lines), "\n".join(jit_lines), "\n".join(cold_lines)):
        if part:
            print(part + "\n")
    for title, items in (("DISAGREEMENTS", failures), ("ERRORS", errors), ("NOTES", notes)):
        if items:
            print(f"{title}:")
            for it in items:
                print("  " + it)
            print()
    csv_name = os.path.basename(os.path.splitext(png)[0] + ".csv")
    print(f"wrote {opt.out}" + (f" and {image}" if image else "") + f" ({csv_name})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
