"""print_test.py -- redjit's text output of integer arrays against NumPy's str():
the same wrapping to the line width ($COLUMNS, else 80 off a terminal), the same
'...' summaries above 1000 elements.  Integers are printed alike by both, so the
layout is all that can differ.

usage: python3 print_test.py REDJIT WORKDIR
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

redjit, workdir = sys.argv[1], sys.argv[2]
os.makedirs(workdir, exist_ok=True)
tmp = tempfile.mkdtemp(dir=workdir, prefix="print.")
passed = failed = 0

rng = np.random.default_rng(5)
arrays = {
    "iota 1000 (not summarised)": np.arange(1000),
    "iota 1001 (summarised)": np.arange(1001),
    "short": np.arange(7),
    "negative and wide": rng.integers(-10**12, 10**12, 200),
    "2-D 20 x 30": np.arange(600).reshape(20, 30) - 100,
    "2-D 40 x 40 (summarised)": np.arange(1600).reshape(40, 40),
    "3-D 3 x 4 x 25": rng.integers(-999, 999, (3, 4, 25)),
    "3-D 12 x 10 x 10 (summarised)": np.arange(1200).reshape(12, 10, 10),
}
exprs = {1: "x[i] + 0", 2: "x[i,j] + 0", 3: "x[i,j,k] + 0"}
named = {1: "C[i] = x[i]", 2: "C[i,j] = x[i,j]", 3: "C[i,j,k] = x[i,j,k]"}


def check(what, got, want):
    global passed, failed
    if got == want:
        passed += 1
        return
    failed += 1
    print(f"FAIL: {what}\n--- redjit\n{got}--- numpy\n{want}", file=sys.stderr)


for label, a in arrays.items():
    path = os.path.join(tmp, "x.npy")
    np.save(path, a.astype(np.int64))
    for columns in (None, "40", "120"):
        env = dict(os.environ)
        env.pop("COLUMNS", None)
        if columns:
            env["COLUMNS"] = columns
        width = int(columns) if columns else 80
        for name, expr in ((None, exprs[a.ndim]), ("C", named[a.ndim])):
            out = subprocess.run([redjit, "-e", expr, "--load", "x=" + path], env=env,
                                 capture_output=True, text=True)
            prefix = name + " = " if name else ""
            want = prefix + np.array2string(a, max_line_width=width, prefix=prefix, separator=" ") + "\n"
            check(f"{label}, width {width}{', named' if name else ''}", out.stdout, want)

# The case of the report: 1000 floats were one line of 14,001 characters.
path = os.path.join(tmp, "x.npy")
np.save(path, rng.standard_normal(1000).astype(np.float32))
out = subprocess.run([redjit, "-e", "C[i] = x[i]", "--load", "x=" + path], capture_output=True, text=True,
                     env={k: v for k, v in os.environ.items() if k != "COLUMNS"}).stdout
lines = out.splitlines()
check("1000 f32: every line within 80 columns, over several lines",
      (max(len(line) for line in lines) <= 80, len(lines) > 100), (True, True))

for f in os.listdir(tmp):
    os.remove(os.path.join(tmp, f))
os.rmdir(tmp)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
