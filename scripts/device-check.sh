#!/usr/bin/env bash
# device-check.sh -- run on the GPU machine (the `device` tool) from the repository root:
# builds redjit, runs the GPU test label, optionally compute-sanitizer and the benchmark,
# and leaves logs under $OUT.  Start the call with `source .devtools/env.sh;` and carry .devtools
# (see ../shared/device/README.md).
# Usage: scripts/device-check.sh [tests] [sanitize] [python] [scans] [bench] [split]
# `scans`: the scan cases under every strategy, then bench/scan_bench.py (RESULTS-scans.md in $OUT).
# `split` wants two GPUs: the data-driven cases split over 2 ranks on device arrays through NCCL
# (PyTorch's libnccl unless REDJIT_NCCL_LIB names one; SPLIT_SHARD K/N runs part of them), then
# python/tests/nccl_interrupt.py and bench/nccl_bench.py under torchrun; NVLink multicast stays off
# (NCCL_NVLS_ENABLE=0).
# BUILD_DIR (default build-gpu) may be outside the carried tree, so that a warm machine keeps the
# build between calls; GPU_TESTS (a ctest -R regex) runs part of the gpu label, to fit the suite
# into calls of at most 10 minutes; GPU_JOBS (default 8) is ctest's -j (the case shards compile
# their kernels with NVRTC in parallel).
set -uo pipefail
OUT=${OUT:-/tmp/redjit-out}
mkdir -p "$OUT"
what=${*:-tests}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
py=$(command -v python3)
B=$(realpath -m "${BUILD_DIR:-build-gpu}")
if ! cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$py" \
      -DREDJIT_BUILD_SAMPLES=ON ${DEVICE_CMAKE_ARGS:-} > "$OUT/cmake.log" 2>&1; then
  tail -40 "$OUT/cmake.log"; exit 1
fi
if ! cmake --build "$B" -j "$(nproc)" > "$OUT/build.log" 2>&1; then
  grep -E "error|Error" "$OUT/build.log" | head -40; exit 1
fi
echo "build ok"
rc=0
export REDJIT_CACHE_DIR="$B/kcache"
if [[ " $what " == *" tests "* ]]; then
  (cd "$B" && ctest -L gpu -j "${GPU_JOBS:-8}" ${GPU_TESTS:+-R "$GPU_TESTS"} --output-on-failure --timeout 900 \
     > "$OUT/ctest-gpu.log" 2>&1) || rc=1
  grep -E "passed|failed|skipped|FAIL|Test +#" "$OUT/ctest-gpu.log" | tail -40
fi
if [[ " $what " == *" sanitize "* ]]; then
  # every kernel kind and strategy at small sizes (the tools slow kernels 10-100x);
  # memcheck also over the data-driven cases (one strategy: they share kernels)
  for tool in memcheck racecheck synccheck; do
    (cd "$B" && compute-sanitizer --tool "$tool" --error-exitcode 9 ./tests/test_gpu --max-log2 17 \
       > "$OUT/sanitize-$tool.log" 2>&1) || rc=1
    echo "== $tool (test_gpu)"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/sanitize-$tool.log" | tail -3
  done
  (cd "$B" && compute-sanitizer --tool memcheck --error-exitcode 9 ./tests/run_cases --device gpu \
     --strategy tree --threads 4 ${SANITIZE_FILTER:+--filter $SANITIZE_FILTER} tests/data/cases.manifest \
     > "$OUT/sanitize-memcheck-cases.log" 2>&1) || rc=1
  echo "== memcheck (cases)"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/sanitize-memcheck-cases.log" | tail -3
fi
if [[ " $what " == *" python "* ]]; then
  (PYTHONPATH="$B/python/pkg" python3 -m pytest -q python/tests > "$OUT/pytest-gpu.log" 2>&1) || rc=1
  tail -3 "$OUT/pytest-gpu.log"
  (PYTHONPATH="$B/python/pkg" python3 python/bench_overhead.py > "$OUT/py-overhead.log" 2>&1) || rc=1
  tail -12 "$OUT/py-overhead.log"
fi
if [[ " $what " == *" split "* ]]; then
  export NCCL_NVLS_ENABLE=0
  if [ -z "${REDJIT_NCCL_LIB:-}" ]; then
    REDJIT_NCCL_LIB=$(python3 -c 'import glob, os, torch; d = os.path.dirname(os.path.dirname(torch.__file__)); print((sorted(glob.glob(d + "/nvidia/**/libnccl.so*", recursive=True)) or [""])[0])')
    export REDJIT_NCCL_LIB
  fi
  echo "NCCL: ${REDJIT_NCCL_LIB:-not found}"
  (cd "$B" && ctest -R "^(cases|errors)_gen$" > "$OUT/split-gen.log" 2>&1) || rc=1
  for m in cases errors; do
    (cd "$B/tests" && timeout "${SPLIT_TIMEOUT:-300}" ./run_cases --split-nccl 2 --device gpu --threads 4 \
       ${SPLIT_SHARD:+--shard $SPLIT_SHARD} ${SPLIT_FILTER:+--filter $SPLIT_FILTER} ${SPLIT_VERBOSE:+--verbose} \
       data/$m.manifest \
       > "$OUT/split-$m.log" 2>&1) || rc=1
    grep -E "^FAIL|passed|rank|died" "$OUT/split-$m.log" | head -20; tail -2 "$OUT/split-$m.log"
  done
  # Ctrl-C while a rank waits for one that never comes: the communicator aborted, not a hang
  (PYTHONPATH="$B/python/pkg" timeout 60 torchrun --nproc_per_node 2 python/tests/nccl_interrupt.py \
     > "$OUT/nccl-interrupt.log" 2>&1) || rc=1
  grep "^nccl_interrupt" "$OUT/nccl-interrupt.log"
  (PYTHONPATH="$B/python/pkg" timeout 400 torchrun --nproc_per_node 2 bench/nccl_bench.py ${SPLIT_BENCH_ARGS:-} \
     --out "$OUT/RESULTS-nccl.md" > "$OUT/nccl-bench.log" 2>&1) || rc=1
  tail -25 "$OUT/nccl-bench.log"
fi
if [[ " $what " == *" scans "* ]]; then
  # the scan cases under every strategy (tree: the look-back; sequential: whole rows), then the
  # scan benchmark with its peers
  (cd "$B" && ctest -R cases_gen > "$OUT/cases-gen.log" 2>&1 &&
     ./tests/run_cases --device gpu --strategy all --threads 4 --filter scan tests/data/cases.manifest \
       > "$OUT/cases-scan.log" 2>&1) || rc=1
  tail -1 "$OUT/cases-scan.log"; grep -h "^FAIL" "$OUT/cases-scan.log" | head -10
  (PYTHONPATH="$B/python/pkg" CUPY_ACCELERATORS=cub timeout 400 python3 bench/scan_bench.py \
     --out "$OUT/RESULTS-scans.md" > "$OUT/scan-bench.log" 2>&1) || rc=1
  grep -v "^|" "$OUT/scan-bench.log" | tail -12
fi
if [[ " $what " == *" bench "* ]] && [ -x bench/run.sh ]; then
  bench/run.sh > "$OUT/bench.log" 2>&1 || rc=1
  tail -60 "$OUT/bench.log"
fi
exit $rc
