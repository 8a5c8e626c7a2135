#!/bin/sh
# run_short.sh LOG FUZZER ARGS... -- a CTest fuzz run whose output stays short enough to be read
# whole in a CI log.  libFuzzer prints a line for every new input (thousands); they go to LOG.
# On success this prints libFuzzer's final statistics; on failure the seed, the report (the
# log's tail without the progress lines) and the input that failed, as text and as base64, so
# that a failure in CI can be reproduced without the build tree:
#     printf '%s' BASE64 | base64 -d > input && build/tests/fuzz/fuzz_cpu input
log=$1
shift
"$@" >"$log" 2>&1
rc=$?
# LeakSanitizer's own thread-suspending tracer can crash under load ("Tracer caught signal",
# then "LeakSanitizer has encountered a fatal error"; seen once in CI, not reproduced alone):
# a failure of the tool, not a finding, so the run is made once more, and the first log kept
if [ "$rc" -ne 0 ] && grep -q 'Tracer caught signal' "$log" &&
   grep -q 'LeakSanitizer has encountered a fatal error' "$log"; then
    echo "LeakSanitizer's tracer crashed (log kept in $log.tracer); running again"
    mv "$log" "$log.tracer"
    "$@" >"$log" 2>&1
    rc=$?
fi
seed=$(grep -m1 'INFO: Seed:' "$log")
if [ "$rc" -eq 0 ]; then
    echo "$seed"
    grep -E '^(stat::|Done |nvrtc: |fuzz_(cpu|frontend):)' "$log"
    tail -n 1 "$log"
    exit 0
fi
echo "fuzzer exited with status $rc; $seed; whole log: $log"
echo "---- the report (progress lines left out) ----"
grep -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|RELOAD|INITED)|NEW_FUNC|^INFO: ' "$log" | tail -n 80
echo "---- the input ----"
for f in $(grep -oE "Test unit written to [^ ]+" "$log" | sed 's/Test unit written to //'); do
    echo "$f ($(wc -c <"$f") bytes):"
    od -c "$f" | head -n 20
    echo "base64: $(base64 -w0 "$f")"
done
exit "$rc"
