#!/usr/bin/env bash
# ncu_profile.sh -- per-kernel profiler figures for chosen benchmark cases, on the GPU machine:
#
#   bench/ncu_profile.sh CASES [STRATEGIES]      e.g. bench/ncu_profile.sh keys_len3,csr_len3 auto
#
# Builds bench/redjit_bench (build-bench/, as bench/run.sh does), runs it under Nsight Compute
# with the clocks left as they are (--clock-control none) for one measured call of each case
# and strategy, and prints, for every redjit kernel launched: its time, grid, registers, DRAM
# bytes read and written, DRAM throughput and achieved occupancy.  Writes the raw CSV to
# $OUT/ncu.csv (or build-bench/ncu.csv).  Start the device call with `source .devtools/env.sh;`.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
cases=${1:?usage: bench/ncu_profile.sh CASES [STRATEGIES]}
strategies=${2:-auto}
build=build-bench
out=${OUT:-$PWD/$build}
py=${PYTHON:-$(command -v python3)}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DREDJIT_BUILD_TESTS=OFF -DREDJIT_BUILD_TOOLS=OFF \
      -DREDJIT_BUILD_SAMPLES=OFF -DPython3_EXECUTABLE="$py" > "$out/ncu-cmake.log" 2>&1 &&
  cmake --build "$build" --target redjit_bench -j "$(nproc)" > "$out/ncu-build.log" 2>&1 ||
  { echo "build failed"; tail -30 "$out/ncu-build.log"; exit 1; }
metrics=gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread,dram__bytes_read.sum
metrics=$metrics,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics=$metrics,sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum
metrics=$metrics${NCU_EXTRA:+,$NCU_EXTRA}   # NCU_EXTRA: more metrics, printed after the table
ncu --clock-control none --print-summary none --kernel-name regex:'^rj_' --metrics "$metrics" --csv --page raw \
    "$build/bench/redjit_bench" ${BENCH_SIZES:---log2n 28 --log2s 26 --rows 16384 --cols 16384 \
    --short-rows 33554432 --short-cols 8} --reps 1 --warmup 1 --budget-ms 1 --calls 10 --no-jit \
    --cases "$cases" --strategies "$strategies" > "$out/ncu.csv" 2> "$out/ncu.err"
echo "ncu exit $?"
"$py" - "$out/ncu.csv" "${NCU_EXTRA:-}" <<'PY'
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
start = next((i for i, l in enumerate(lines) if l.startswith('"ID",')), None)
rows = list(csv.reader(lines[start:])) if start is not None else []
if not rows:
    print("\n".join(lines[-30:])); sys.exit(1)
head = rows[0]
col = {h: i for i, h in enumerate(head)}
def g(r, k):
    return r[col[k]] if k in col else "?"
print("%-12s %10s %9s %5s %10s %10s %7s %7s" % ("kernel", "us", "grid", "regs", "dram rd MB", "dram wr MB", "dram %", "occ %"))
for r in rows[2:]:
    try:
        t = float(g(r, "gpu__time_duration.sum").replace(",", ""))
    except ValueError:
        continue
    unit = rows[1][col["gpu__time_duration.sum"]]
    us = t / 1000 if unit == "nsecond" else t * 1000 if unit == "msecond" else t
    def mb(k):
        v = float(g(r, k).replace(",", "")); u = rows[1][col[k]]
        return v / {"byte": 1e6, "Kbyte": 1e3, "Mbyte": 1, "Gbyte": 1e-3}.get(u, 1e6)
    print("%-12s %10.1f %9s %5s %10.1f %10.1f %7s %7s" % (g(r, "Kernel Name")[:12], us, g(r, "launch__grid_size"),
          g(r, "launch__registers_per_thread"), mb("dram__bytes_read.sum"), mb("dram__bytes_write.sum"),
          g(r, "dram__throughput.avg.pct_of_peak_sustained_elapsed"), g(r, "sm__warps_active.avg.pct_of_peak_sustained_active")))
    for k in filter(None, sys.argv[2].split(",")):
        print("    %s = %s %s" % (k, g(r, k), rows[1][col[k]] if k in col else ""))
PY
