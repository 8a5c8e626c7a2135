#!/usr/bin/env bash
# unroll_sweep.sh -- redjit alone under each REDJIT_UNROLL (elements each thread loads
# before using any; cuda.c's default is the figure this justified), on the GPU machine after
# bench/run.sh has built build-bench/:
#
#   bench/unroll_sweep.sh [UNROLLS] [CASES]      default "2 4 8" and a case of each kind
#
# Prints one line per case and unroll: the median microseconds of the auto strategy.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
unrolls=${1:-2 4 8}
cases=${2:-sum_f32,max_f32,dot_f32,argmax_f32,csr_one,csr_rand,csr_rows1024,keys_one,keys_rand,rowsum,colsum,rowsum_short}
bin=build-bench/bench/redjit_bench
[ -x "$bin" ] || { echo "unroll_sweep: build $bin first (bench/run.sh)" >&2; exit 2; }
for u in $unrolls; do
  REDJIT_UNROLL=$u REDJIT_CACHE=0 "$bin" --log2n 28 --curve 20,24,28 --log2s 26 --rows 16384 --cols 16384 \
      --short-rows 33554432 --short-cols 8 --reps 20 --warmup 3 --budget-ms 1000 --no-jit \
      --strategies auto --cases "$cases" 2>/dev/null |
    python3 -c '
import json, sys
u = sys.argv[1]
for line in sys.stdin:
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if r.get("system") == "redjit" and "us" in r:
        print("unroll %s  %-14s n=%-10s %10.1f us" % (u, r["case"], r["n"], r["us"]))
' "$u"
done
