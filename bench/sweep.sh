#!/usr/bin/env bash
# sweep.sh -- redjit alone under each value of a tuning variable, on the GPU machine after
# bench/run.sh has built build-bench/:
#
#   bench/sweep.sh VAR "VALUES" [CASES] [CURVE]
#       e.g. bench/sweep.sh REDJIT_UNROLL "2 4 8"      (elements each thread loads before using any)
#            bench/sweep.sh REDJIT_WAVES "1 2 4" sum_f32,argmax_f32 24,26,28
#
# The defaults in the library are the figures such sweeps justified (cuda.c's unroll(),
# gpu_tuning's waves, src/gpu/tuning.h).  Prints one line per case, size and value: the median microseconds of the
# auto strategy.  Default cases: one of each kind; default curve 20,24,28.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
var=${1:?usage: bench/sweep.sh VAR \"VALUES\" [CASES] [CURVE]}
values=${2:?usage: bench/sweep.sh VAR \"VALUES\" [CASES] [CURVE]}
cases=${3:-sum_f32,max_f32,dot_f32,argmax_f32,csr_one,csr_rand,csr_rows1024,keys_one,keys_rand,rowsum,colsum,rowsum_short}
curve=${4:-20,24,28}
bin=build-bench/bench/redjit_bench
[ -x "$bin" ] || { echo "sweep: build $bin first (bench/run.sh)" >&2; exit 2; }
for v in $values; do
  env "$var=$v" REDJIT_CACHE=0 "$bin" --log2n 28 --curve "$curve" --log2s 26 --rows 16384 --cols 16384 \
      --short-rows 33554432 --short-cols 8 --reps 20 --warmup 3 --budget-ms 1000 --no-jit \
      --strategies auto --cases "$cases" 2>/dev/null |
    python3 -c '
import json, sys
var, v = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if r.get("system") == "redjit" and "us" in r:
        print("%s=%-3s %-14s n=%-10s %10.1f us" % (var, v, r["case"], r["n"], r["us"]))
' "$var" "$v"
done
