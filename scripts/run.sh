#!/usr/bin/env bash
# run.sh -- builds the command-line tool (Release, in build/) and runs it.
#
#   scripts/run.sh              evaluate a few example expressions over two generated arrays,
#                               then, on a terminal, open the prompt with those arrays loaded
#   scripts/run.sh ARGS...      run build/tools/redjit ARGS... (see redjit --help)
#
# The GPU is used when one is present, the CPU executor otherwise (--device auto).
set -euo pipefail
cd "$(dirname "$0")/.."

# The configure line of scripts/test.sh, option for option: build/ is shared, and a different
# option (-DREDJIT_WERROR) would make the other script rebuild every target.  Only the tool and
# what it links are built here; scripts/test.sh builds the rest.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DREDJIT_WERROR=ON \
      -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build build --target redjit_cli
redjit=build/tools/redjit

if [ $# -gt 0 ]; then
  exec "$redjit" "$@"
fi

# Example inputs: x and y, 2^20 float32 values each; A, a 2048 x 256 float32 matrix.
demo=build/demo
mkdir -p "$demo"
/usr/bin/python3 - "$demo" <<'PY'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(0)
np.save(d + "/x.npy", rng.standard_normal(1 << 20, dtype=np.float32))
np.save(d + "/y.npy", rng.standard_normal(1 << 20, dtype=np.float32))
np.save(d + "/A.npy", rng.random((2048, 256), dtype=np.float32))
PY
load=(--load "x=$demo/x.npy" --load "y=$demo/y.npy" --load "A=$demo/A.npy")

show() {
  echo "\$ redjit -e '$1' ${load[*]}${2:+ $2}"
  # shellcheck disable=SC2086  # $2 holds extra options, split on purpose
  "$redjit" -e "$1" "${load[@]}" ${2:-}
  echo
}
show 'max(abs(x - y))' --explain
show 'sum(x), sum(x*x), mean(x)'
show 'argmax(x), max(x)'
show 'sum(A[i,j]) over j'
show 'count(x > 2.0)'

if [ -t 0 ]; then
  echo "redjit prompt with x, y (2^20 f32) and A (2048 x 256 f32) loaded; :quit to leave"
  exec "$redjit" "${load[@]}"
fi
