#!/usr/bin/env bash
# check-layout.sh -- keeps the house in the shape STYLE.md describes; run by CTest as `layout`.
# Fails, naming each offence, when
#   (a) a module includes a header of a stage it must not see: nothing in src/gpu, src/codegen
#       or src/core from src/cpu; nothing in src/cpu from src/gpu or src/codegen; nothing in
#       src/core from src/cpu, src/gpu, src/codegen or src/api; nothing in src/ranks (runs over
#       split arrays, on the CPU executor) from src/gpu, src/codegen or src/api, and nothing in
#       a backend or src/core from it; nothing below src/api from it (src/api/, the public API
#       above both backends, may include any stage);
#   (b) a source file in src/ (*.c *.h *.cuh *.re *.y) is over 1200 lines;
#   (c) a C function in src/ is over 150 lines (from its opening line at column 0 to its
#       closing brace at column 0);
#   (d) a comment in src/ holds a date (YYYY-MM-DD): history belongs to git and bench/TUNING.md.
# Generated files live in the build tree, never in src/, so every file here counts.
set -uo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import glob, re, sys

MAX_FILE, MAX_FN = 1200, 150
bad = []
files = sorted(f for ext in ("c", "h", "cuh", "re", "y") for f in glob.glob(f"src/**/*.{ext}", recursive=True))

# (a) includes across stages
forbid = {
    "src/gpu/": ("cpu/", "api/", "ranks/"),
    "src/codegen/": ("cpu/", "api/", "ranks/"),
    "src/core/": ("cpu/", "gpu/", "codegen/", "api/", "ranks/"),
    "src/cpu/": ("gpu/", "codegen/", "api/", "ranks/"),
    "src/ranks/": ("gpu/", "codegen/", "api/"),
}
inc = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
for f in files:
    for prefix, banned in forbid.items():
        if not f.startswith(prefix):
            continue
        for h in inc.findall(open(f, encoding="utf-8", errors="replace").read()):
            if h.startswith(banned) or any(h.startswith("../" + b) for b in banned):
                bad.append(f"{f}: includes {h} ({prefix} must not see it)")

for f in files:
    lines = open(f, encoding="utf-8", errors="replace").read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    # (b) file length
    if len(lines) > MAX_FILE:
        bad.append(f"{f}: {len(lines)} lines (at most {MAX_FILE})")
    # (c) function length: a line at column 0 opening a definition, to the next "}" at column 0
    if f.endswith((".c", ".h", ".cuh")):
        start = name = None
        for i, ln in enumerate(lines):
            if start is None:
                if re.match(r"[A-Za-z_][\w \t\*]*\b(\w+)\s*\(", ln) and not ln.rstrip().endswith(";") \
                        and not ln.startswith(("typedef", "struct ", "enum ", "union ", "#", "static const", "const")):
                    # the body's "{" at column 0 follows within a few lines
                    for j in range(i, min(i + 8, len(lines))):
                        if lines[j].startswith("{"):
                            start, name = i, re.match(r"[A-Za-z_][\w \t\*]*?\b(\w+)\s*\(", ln).group(1)
                            break
                        if lines[j].rstrip().endswith(";"):
                            break
            elif lines[i].startswith("}"):
                n = i - start + 1
                if n > MAX_FN:
                    bad.append(f"{f}:{start + 1}: function {name} is {n} lines (at most {MAX_FN})")
                start = None
    # (d) dates in comments (// and /* */, also in .cuh, .re, .y)
    text = "\n".join(lines)
    for m in re.finditer(r"/\*.*?\*/|//[^\n]*", text, re.S):
        d = re.search(r"20[0-9][0-9]-[01][0-9]-[0-3][0-9]", m.group(0))
        if d:
            line = text.count("\n", 0, m.start() + d.start()) + 1
            bad.append(f"{f}:{line}: a date in a comment ({d.group(0)})")

for b in bad:
    print(b)
print(f"check-layout: {len(bad)} problem(s) in {len(files)} files" if bad else f"check-layout: {len(files)} files clean")
sys.exit(1 if bad else 0)
PY
