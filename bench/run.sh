#!/usr/bin/env bash
# run.sh -- the GPU benchmark in one command, on the GPU machine, from anywhere in the checkout:
#
#   bench/run.sh [--quick] [--cases id,id,...] [compositions | sparse | types | pairwise]
#
# Builds redjit and bench/redjit_bench (CMake, Release, build-bench/) and bench/cub_bench.cu (nvcc,
# in parallel), runs cub_bench, redjit_bench and peers.py (CuPy, PyTorch and torch.compile in one
# process, JAX in another) one after the other on the same inputs (bench_data.h), then
# bench/report.py: the table on stdout, bench/RESULTS.md and bench/bandwidth.png.
# `compositions` (or BENCH_ONLY=compositions): only the composition cases (comp_*), redjit against
# the Python peers, without CUB, the held runs and the per-call figures; the table goes to
# $OUT/bench/RESULTS-compositions.md unless BENCH_RESULTS names a file.  `sparse` (or
# BENCH_ONLY=sparse) likewise: only the sparse cases (spmv_*, gather_all), redjit under every
# strategy against cuSPARSE through CuPy and PyTorch; $OUT/bench/RESULTS-sparse.md.  `types` (or
# BENCH_ONLY=types) likewise: only the element-type cases (types_*: u8, i16 and c64 inputs, nansum,
# nanargmax), redjit under every strategy against CuPy and PyTorch; $OUT/bench/RESULTS-types.md.
# The types cases are not part of the full run (some 5 GiB of inputs, and by estimate up to a
# minute, that its 560-s budget cannot spare): they run only by name, `types` or --cases types_....
# `pairwise` (or BENCH_ONLY=pairwise) likewise: only the pairwise cases (pair_*: Gaussian kernel
# sums and nearest neighbours over 2^14 and 2^16 points, 1-D and 3-D, a bilinear form, batched and
# plain matrix products), redjit under every strategy against PyTorch, torch.compile and JAX;
# $OUT/bench/RESULTS-pairwise.md.  Never in the full run either (the three programs took 86 s over
# the 1-D ones and the 3-D kernel sums at 2^14 on the H200, eager PyTorch's temporaries 16 GiB each;
# at 2^16 3-D points, by estimate 48 GiB each, two at once, more than an H100 has: there eager
# PyTorch's record would be an out-of-memory error, and torch.compile's result the check's
# reference): by name only,
# `pairwise` or --cases pair_....
# The JSON lines, logs and copies of RESULTS.md and the image go to $OUT/bench (or build-bench/out).
# --quick: small sizes and few runs, a smoke test (under two minutes with the build), not a
# measurement.  BENCH_RESULTS (default bench/RESULTS.md) and BENCH_PNG (bench/bandwidth.png) name
# where the table and the image go, for a run on another card kept beside the H200's.  Needs re2c
# and lemon on PATH (source .devtools/env.sh first), nvcc, python3 with CuPy and/or PyTorch;
# matplotlib is optional.  Exits non-zero when a program fails or a redjit result disagrees with
# the peers'.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
start=$SECONDS
budget=${BENCH_BUDGET_S:-560}     # the whole run, build included: stay inside a 10-minute call
quick=0
cases=()
only=${BENCH_ONLY:-}
args=("$@")
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --cases) cases=(--cases "$2"); shift ;;
    compositions|sparse|types|pairwise) only=$1 ;;
    *) echo "usage: bench/run.sh [--quick] [--cases id,id,...] [compositions | sparse | types | pairwise]" >&2; exit 2 ;;
  esac
  shift
done
case "$only" in
  ''|compositions|sparse|types|pairwise) ;;
  *) echo "bench/run.sh: BENCH_ONLY may be 'compositions', 'sparse', 'types', 'pairwise' or empty, not '$only'" >&2
     exit 2 ;;
esac
comp_ids=comp_rowstats,comp_lse,comp_softmax,comp_cssq,comp_segstats,comp_3d
spmv_ids=spmv_r32,spmv_rand,spmv_rand_i64,spmv_poisson,spmv_power,spmv_len13,gather_all
types_ids=types_sum_u8,types_rowsum_u8,types_sum_i16,types_sum_c64,types_absmax_c64,types_dot_c64
types_ids=$types_ids,types_nanargmax_f32,types_nansum_f32
pair_ids=pair_gauss_14,pair_gauss_16,pair_nn_14,pair_nn_16,pair_gauss3d_14,pair_gauss3d_16,pair_nn3d_14,pair_nn3d_16
pair_ids=$pair_ids,pair_bilinear,pair_bmm,pair_matmul_4096

build="build-bench"
out=${OUT:-$PWD/$build/out}/bench
if [ -n "$only" ]; then   # never over the full run's table and image
  results=${BENCH_RESULTS:-$out/RESULTS-$only.md}
  png=${BENCH_PNG:-$out/bandwidth-$only.png}
  if [ ${#cases[@]} -eq 0 ]; then
    case "$only" in
      compositions) cases=(--cases "$comp_ids") ;;
      sparse) cases=(--cases "$spmv_ids") ;;
      types) cases=(--cases "$types_ids") ;;
      pairwise) cases=(--cases "$pair_ids") ;;
    esac
  fi
else
  results=${BENCH_RESULTS:-bench/RESULTS.md}
  png=${BENCH_PNG:-bench/bandwidth.png}
fi
mkdir -p "$out" "$build"
py=${PYTHON:-$(command -v python3)}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
arch=${CUB_ARCH:-sm_90}

# shellcheck disable=SC2054  # the commas are inside option values
if [ $quick = 1 ]; then
  sizes=(--log2n 24 --curve 10,16,20,24 --log2s 22 --rows 4096 --cols 4096 --short-rows 2097152 --short-cols 8
         --reps 10 --warmup 2 --budget-ms 300)
  cube=(--cube 256,256,256)
  spmv=(--spmv-log2nnz 22 --spmv-grid 1024)     # some 2^22 nonzeros a matrix
  types=(--types-log2n 24 --types-image 2048,2048)   # 16 MiB an input, a 4 MiB u8 image
  pairs=(--pair-log2n 12 --pair-bilinear 2048 --pair-bmm 8,256 --pair-matmul 1024)
  calls_c=10000; calls_py=5000
  t_cub=90; t_redjit=120; t_peers=200; t_jax=120; jit_budget=60
else
  sizes=(--log2n 28 --curve 10,16,20,22,24,26,28,30 --log2s 26 --rows 16384 --cols 16384
         --short-rows 33554432 --short-cols 8 --reps 50 --warmup 5 --budget-ms 2000)
  cube=(--cube 1024,512,512)
  spmv=(--spmv-log2nnz 26 --spmv-grid 4096)     # 2^21 rows of 32, 2^24 Poisson rows, 2^25 rows of 1..3
  # 2^30 u8, 2^29 i16, 2^27 c64 (2^26 each for the dot product), 2^28 f32: 1 GiB an input; a u8 image
  types=(--types-log2n 30 --types-image 16384,16384)
  # 2^16 and 2^14 points (eager PyTorch: 16 GiB temporaries, 48 GiB in 3-D), K of 16384^2 (1 GiB),
  # 64 products of 512^3, one of 4096^3
  pairs=(--pair-log2n 16 --pair-bilinear 16384 --pair-bmm 64,512 --pair-matmul 4096)
  calls_c=100000; calls_py=20000
  t_cub=150; t_redjit=330; t_peers=330; t_jax=150; jit_budget=120
fi
if [ -n "$only" ]; then   # the curve serves sum(x) alone: no 2^30 input to build
  for i in "${!sizes[@]}"; do
    [ "${sizes[i]}" = --curve ] && sizes[i+1]=${sizes[1]}    # sizes[1]: --log2n's value
  done
fi
if [ "$only" = sparse ]; then   # of the dense inputs the sparse cases read only layout rand's offsets
  sizes+=(--log2n 20 --curve 20 --rows 1024 --cols 1024 --short-rows 1024)
  # shellcheck disable=SC2054  # the commas are inside an option value
  cube=(--cube 64,64,64)
fi
if [ "$only" = types ] || [ "$only" = pairwise ]; then   # these cases read none of the dense inputs
  sizes+=(--log2n 20 --curve 20 --log2s 20 --rows 1024 --cols 1024 --short-rows 1024)
  # shellcheck disable=SC2054  # the commas are inside an option value
  cube=(--cube 64,64,64)
fi

# a step's time limit: its own, or what is left of the budget (keeping 20 s for the report)
limit() {
  local left=$((budget - (SECONDS - start) - 20))
  [ "$left" -lt 10 ] && left=10
  [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv \
  > "$out/gpu.txt" 2>&1 || echo "nvidia-smi failed" > "$out/gpu.txt"
cat "$out/gpu.txt"

# ---- build: nvcc in the background, CMake meanwhile ----
cub=$build/cub_bench
nvcc_pid=
if [ -n "$only" ]; then
  echo "$only only: no cub_bench (CUB has no form of them)"
elif [ -x "$cub" ] && [ "$cub" -nt bench/cub_bench.cu ] && [ "$cub" -nt bench/bench_data.h ]; then
  echo "cub_bench is up to date"
else
  ( "$nvcc" -O3 -arch="$arch" -std=c++17 -o "$cub" bench/cub_bench.cu > "$out/nvcc.log" 2>&1 ) &
  nvcc_pid=$!
fi
rc=0
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DREDJIT_BUILD_TESTS=OFF -DREDJIT_BUILD_TOOLS=OFF -DREDJIT_BUILD_SAMPLES=OFF \
       -DPython3_EXECUTABLE="$py" > "$out/cmake.log" 2>&1; then
  echo "cmake configure failed:"; tail -30 "$out/cmake.log"; rc=1
elif ! cmake --build "$build" --target redjit_bench driver_costs -j "$(nproc)" > "$out/build.log" 2>&1; then
  echo "build failed:"; grep -E "error|Error" "$out/build.log" | head -30; rc=1
fi
if [ -n "$nvcc_pid" ] && ! wait "$nvcc_pid"; then
  echo "nvcc failed:"; head -40 "$out/nvcc.log"; rm -f "$cub"
  rc=1
fi
# the Python package, for its per-call rows; without Python's headers there is none, and no rows
pyok=0
if [ -n "$only" ]; then
  :
elif cmake --build "$build" --target redjit_python redjit_python_files -j "$(nproc)" >> "$out/build.log" 2>&1; then
  pyok=1
else
  echo "no Python package built (see $out/build.log): its per-call rows are left out"
fi
echo "build done in $((SECONDS - start)) s"

# ---- the three programs, one after the other ----
run_step() {   # name, limit, command...
  local name=$1 lim=$2; shift 2
  local t0=$SECONDS
  timeout --kill-after=10 "$lim" "$@" > "$out/$name.jsonl" 2> "$out/$name.err"
  local st=$?
  echo "$name: exit $st, $((SECONDS - t0)) s, $(grep -c '^{' "$out/$name.jsonl") records"
  if [ $st -ne 0 ]; then
    [ $st -eq 124 ] && echo "  $name ran past its limit of $lim s: its table rows are incomplete"
    tail -15 "$out/$name.err" | sed 's/^/  /'
    rc=1
  fi
}
: > "$out/cub.jsonl"; : > "$out/redjit.jsonl"; : > "$out/peers.jsonl"; : > "$out/peers_jax.jsonl"
if [ -z "$only" ] && [ -x "$cub" ]; then
  run_step cub "$(limit $t_cub)" "$cub" "${sizes[@]}" --calls $calls_c "${cases[@]}"
fi
if [ -x "$build/bench/redjit_bench" ]; then
  run_step redjit "$(limit $t_redjit)" "$build/bench/redjit_bench" "${sizes[@]}" "${cube[@]}" "${spmv[@]}" \
    "${types[@]}" "${pairs[@]}" --calls $calls_c "${cases[@]}"
fi
# the Python peers: CuPy, PyTorch and torch.compile in one process, JAX in a second one (its CUDA
# libraries apart from PyTorch's); a peer that does not import or compile is left out, with the
# reason on stderr, which is shown here
# (the sparse or the types cases alone: neither JIT compiler runs them, so no torch.compile and no
# JAX process; the pairwise cases alone: CuPy does not run them, but builds their inputs)
systems=cupy,torch,torch_compile
[ "$only" = sparse ] || [ "$only" = types ] && systems=cupy,torch
[ "$only" = pairwise ] && systems=torch,torch_compile
run_step peers "$(limit $t_peers)" "$py" bench/peers.py "${sizes[@]}" "${cube[@]}" "${spmv[@]}" "${types[@]}" \
  "${pairs[@]}" --calls $calls_py "${cases[@]}" --systems $systems --jit-budget-s $jit_budget
if [ "$only" != sparse ] && [ "$only" != types ]; then
  XLA_PYTHON_CLIENT_PREALLOCATE=false run_step peers_jax "$(limit $t_jax)" "$py" bench/peers.py "${sizes[@]}" \
    "${cube[@]}" "${spmv[@]}" "${types[@]}" "${pairs[@]}" --calls $calls_py "${cases[@]}" --systems jax \
    --jit-budget-s $jit_budget
fi
grep -h -e "left out" -e "skipped" -e "from_dlpack failed" "$out/peers.err" "$out/peers_jax.err" 2>/dev/null |
  sed 's/^/  /'
# sum(x) f32 over the curve and two cases short of their targets again, CUB and redjit each with
# the stream held until the call is queued: the GPU's work alone (report.py's second table;
# about 30 s).  Not the keys: a sorted keyed run reads its key check back before red_run
# returns, so its closing event goes in after the kernel has finished, held or not.
: > "$out/cub_held.jsonl"; : > "$out/redjit_held.jsonl"
held_cases=sum_f32,csr_len3,rowsum_short
if [ ${#cases[@]} -gt 0 ]; then   # those of them asked for
  held_cases=$(echo "$held_cases" | tr , '\n' | grep -xF -f <(echo "${cases[1]}" | tr , '\n') | paste -sd,)
fi
if [ -n "$held_cases" ] && [ -z "$only" ]; then
  held_sizes=("${sizes[@]}")
  held_sizes+=(--log2n 20 --rows 1024 --cols 1024 --cases "$held_cases" --held)
  [ -x "$cub" ] && run_step cub_held "$(limit 90)" "$cub" "${held_sizes[@]}"
  [ -x "$build/bench/redjit_bench" ] &&
    run_step redjit_held "$(limit 120)" "$build/bench/redjit_bench" "${held_sizes[@]}" --no-jit --strategies auto
fi
# each driver call of the hot path, beside redjit's per-call time (a few seconds)
if [ -z "$only" ] && [ -x "$build/bench/driver_costs" ]; then
  timeout 60 "$build/bench/driver_costs" --reps $((quick ? 2000 : 20000)) > "$out/driver_costs.md" 2>&1 || rc=1
  cat "$out/driver_costs.md"
fi

# the Python package's host time per call (issue 6's measure), beside CuPy and PyTorch in the
# same script (python/bench_overhead.py; about 15 s)
if [ $pyok = 1 ]; then
  PYTHONPATH="$build/python/pkg" timeout 120 "$py" python/bench_overhead.py --calls $((quick ? 5000 : 50000)) \
    > "$out/py_overhead.md" 2>&1 || rc=1
  cat "$out/py_overhead.md"
fi

# ---- the table ----
"$py" bench/report.py --cmd "bench/run.sh ${args[*]}" --device-info "$out/gpu.txt" \
  --out "$results" --png "$png" \
  "$out/redjit.jsonl" "$out/cub.jsonl" "$out/peers.jsonl" "$out/peers_jax.jsonl" "$out/redjit_held.jsonl" \
  "$out/cub_held.jsonl" |
  tee "$out/report.txt"
[ "${PIPESTATUS[0]}" -ne 0 ] && rc=1
if [ -z "$only" ] && grep -q '^| cu' "$out/driver_costs.md" 2>/dev/null; then
  { echo; echo "## Host time of each driver call on the hot path (bench/driver_costs)"; echo
    cat "$out/driver_costs.md"; } >> "$results"
fi
if [ $pyok = 1 ] && grep -q '^| redjit e(' "$out/py_overhead.md" 2>/dev/null; then
  { echo; echo "## Python: host time per call of a cached expression (python/bench_overhead.py)"; echo
    cat "$out/py_overhead.md"; } >> "$results"
fi
cp "$results" "$out/" 2>/dev/null
cp "$png" "${png%.png}.csv" "$out/" 2>/dev/null
echo "total $((SECONDS - start)) s; JSON and logs in $out"
exit $rc
