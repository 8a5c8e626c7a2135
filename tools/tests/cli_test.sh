#!/bin/sh
# cli_test.sh -- end-to-end tests of the redjit command-line tool: .npy input
# of every dtype and layout, text and JSON output, --out round trips, and the
# exit status and message of each kind of error.
#
# usage: cli_test.sh REDJIT MKNPY [WORKDIR]
#   REDJIT  the built redjit binary;  MKNPY  the tests/mknpy.c helper
#   (which writes .npy files, so neither Python nor NumPy is needed;
#   python3, when present, also checks that the JSON output parses).
#   CLI_TEST_WRAPPER in the environment prefixes every redjit command.

REDJIT=$1
MKNPY=$2
if [ -z redjit ] || [ -z "$MKNPY" ]; then
    echo "usage: cli_test.sh REDJIT MKNPY [WORKDIR]" >&2
    exit 2
fi
if [ -n "$3" ]; then
    mkdir -p "$3" || exit 2
    T=$(mktemp -d "$3/cli.XXXXXX") || exit 2
else
    T=$(mktemp -d "${TMPDIR:-/tmp}/redjit_cli.XXXXXX") || exit 2
fi
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 2

# CLI_TEST_WRAPPER runs every redjit under a checker, e.g.
# CLI_TEST_WRAPPER="valgrind -q --leak-check=full --error-exitcode=99".
redjit() {
    $CLI_TEST_WRAPPER "$REDJIT" "$@"
}

pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    printf 'FAIL: %s\n' "$*" >&2
    printf '  stdout: %s\n  stderr: %s\n' "$(cat out 2>/dev/null)" "$(cat err 2>/dev/null)" >&2
}

# run CMD...: stdout in file `out`, stderr in `err`, status in $rc.
run() {
    "$@" >out 2>err
    rc=$?
}

# expect DESCRIPTION EXPECTED-STDOUT: the last run succeeded and printed it.
expect() {
    if [ "$rc" -eq 0 ] && [ "$(cat out)" = "$2" ]; then ok; else bad "$1 (rc=$rc, expected '$2')"; fi
}

# expect_fail DESCRIPTION STATUS NEEDLE...: the last run exited with STATUS
# and every NEEDLE occurs in stderr.
expect_fail() {
    d=$1
    want=$2
    shift 2
    good=1
    [ "$rc" -eq "$want" ] || good=0
    for needle in "$@"; do
        grep -F -q -e "$needle" err || good=0
    done
    if [ $good -eq 1 ]; then ok; else bad "$d (rc=$rc, expected $want and '$*' on stderr)"; fi
}

# expect_usage DESCRIPTION: exit status 2 and one line pointing at --help.
expect_usage() {
    if [ "$rc" -eq 2 ] && [ "$(wc -l <err)" -eq 1 ] && grep -q -e '--help' err; then
        ok
    else
        bad "$1 (rc=$rc, expected a one-line usage error)"
    fi
}

have_python=0
if command -v python3 >/dev/null 2>&1 && python3 -c 'import json' >/dev/null 2>&1; then
    have_python=1
fi
# json_check PYTHON-EXPR: stdout parses as JSON and EXPR (over `d`) holds.
json_check() {
    if [ $have_python -eq 0 ]; then
        if grep -q '^{"results": \[' out; then ok; else bad "$1 (JSON shape)"; fi
        return
    fi
    if python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($2) else 1)" <out 2>>err; then
        ok
    else
        bad "$1 (JSON check: $2)"
    fi
}

"$MKNPY" x.npy f64 4 1 2 3 4 || exit 2

# ---- basic evaluation ----
run redjit -e 'sum(x)' --load x=x.npy
expect "sum(x)" "10"
run redjit -e 'sum(x) * t' --load x=x.npy --set t=3
expect "--set integer" "30"
run redjit -e 'sum(x) * t' --load x=x.npy --set t=0.5
expect "--set float" "5"
run redjit --expr='sum(x)' --load=x=x.npy
expect "--opt=value forms" "10"
run redjit -e 'sum(x), max(x)' --load x=x.npy
expect "two results, one per line" "10
4"
"$MKNPY" xf.npy f32 2 0.1 0.2
run redjit -e 'sum(x)' --load x=xf.npy
expect "f32 result printed exactly and shortest" "0.3"
"$MKNPY" xn.npy f64 3 1 nan 2
run redjit -e 'sum(x)' --load x=xn.npy
expect "NaN in text" "nan"
"$MKNPY" xu.npy u64 2 18446744073709551615 0
run redjit -e 'sum(x)' --load x=xu.npy
expect "u64 printed exactly" "18446744073709551615"
"$MKNPY" xb.npy bool 3 false true false
run redjit -e 'any(x)' --load x=xb.npy
expect "bool result" "true"
run redjit -e 'sum(x)' --load x=x.npy --device cpu --threads 2 --strategy auto
expect "--device cpu --threads 2 --strategy auto" "10"
run redjit -e 'sum(x)' --load x=x.npy --explain
if [ $rc -eq 0 ] && [ "$(tail -n 1 out)" = "10" ] && [ "$(wc -l <out)" -gt 1 ]; then ok; else bad "--explain prints a plan, then the result"; fi
# On the CPU the plan comes without the CUDA a GPU would run, and names the threads that run it.
run redjit -e 'sum(x)' --load x=x.npy --explain --device cpu
if [ $rc -eq 0 ] && [ "$(tail -n 1 out)" = "10" ] && ! grep -q 'generated CUDA' out &&
   grep -Eq '^backend: cpu \(up to [1-9][0-9]* threads?,' out && [ "$(wc -l <out)" -lt 20 ]; then
    ok
else
    bad "--explain on the CPU: the plan and its threads, no CUDA"
fi
run redjit -e 'sum(x)' --load x=x.npy --explain --device cpu --threads 3
if [ $rc -eq 0 ] && grep -q '^backend: cpu (up to 3 threads,' out; then ok; else bad "--explain names --threads 3"; fi
run redjit -e 'sum(x)' --load x=x.npy --explain=cuda --device cpu
if [ $rc -eq 0 ] && [ "$(tail -n 1 out)" = "10" ] && grep -q '^generated CUDA' out && grep -q '__global__' out; then
    ok
else
    bad "--explain=cuda shows the generated CUDA on the CPU too"
fi
run redjit -e 'sum(x)' --load x=x.npy --explain=plan
if [ $rc -eq 0 ] && [ "$(tail -n 1 out)" = "10" ] && ! grep -q 'generated CUDA' out; then ok; else bad "--explain=plan"; fi
run redjit -e 'sum(x)' --load x=x.npy --explain=asm
expect_usage "--explain with an unknown value"
# --verbose on the CPU: the backend, its threads and the times, on stderr only.
run redjit -e 'sum(x)' --load x=x.npy --verbose --device cpu
if [ $rc -eq 0 ] && [ "$(cat out)" = "10" ] && grep -Eq '^redjit: backend: cpu \(up to [1-9][0-9]* threads?,' err &&
   grep -q '^redjit: time: plan .* ms, cpu executor .* ms' err; then
    ok
else
    bad "--verbose on the CPU names the backend, its threads and the times"
fi

# ---- every dtype, byte order and format version loads ----
for dt in i8 u8 i16 u16 i32 i64 u32 u64 f16 f32 f64; do
    "$MKNPY" d.npy $dt 3 1 2 3
    run redjit -e 'sum(x)' --load x=d.npy
    expect "dtype $dt loads" "6"
done
"$MKNPY" d.npy i8 3 -128 127 -1
run redjit -e 'min(x), max(x), sum(x), u8(x[i])' --load x=d.npy
expect "i8 limits load and cast" "-128
127
-2
[128 127 255]"
"$MKNPY" d.npy u16 2 --big 65535 258
run redjit -e 'sum(x), i16(x[i])' --load x=d.npy
expect "big-endian u16 loads" "65793
[ -1 258]"
"$MKNPY" d.npy bool 3 1 0 1
run redjit -e 'sum(x)' --load x=d.npy
expect "dtype bool loads" "2"
"$MKNPY" d.npy i32 3 --big 1 2 3
run redjit -e 'sum(x)' --load x=d.npy
expect "big-endian i32 loads" "6"
"$MKNPY" d.npy f64 3 --big 1.5 2 3
run redjit -e 'sum(x)' --load x=d.npy
expect "big-endian f64 loads" "6.5"
for v in 2 3; do
    "$MKNPY" d.npy f64 3 --version $v 1 2 3
    run redjit -e 'sum(x)' --load x=d.npy
    expect ".npy version $v.0 loads" "6"
done

# ---- arrays, names, --out round trips, Fortran order ----
"$MKNPY" A.npy i32 2,3 1 2 3 4 5 6
run redjit -e 'C[i] = sum(A[i,j]) over j' --load A=A.npy --out C=c.npy
expect "named array result" "C = [ 6 15]"
run "$MKNPY" --dump c.npy
expect "--out NAME writes the result" "i64 (2,): 6 15"
run redjit -e 'sum(x)' --load x=c.npy
expect "--out file reads back" "21"
run redjit -e 'sum(A[i,j]) over j' --load A=A.npy --out 0=c0.npy
expect "unnamed array result" "[ 6 15]"
run "$MKNPY" --dump c0.npy
expect "--out POSITION writes the result" "i64 (2,): 6 15"
"$MKNPY" AF.npy i32 2,3 --fortran 1 4 2 5 3 6
run redjit -e 'C[i] = sum(A[i,j]) over j' --load A=AF.npy
expect "Fortran-order input" "C = [ 6 15]"
"$MKNPY" AF3.npy f64 2,3,2 --fortran iota
run redjit -e 'sum(A[i,j,k]) over j, k' --load A=AF3.npy
# "iota" in Fortran order makes A[i,j,k] = i + 2j + 6k; summed over j < 3, k < 2: 6i + 30.
expect "3-d Fortran-order input" "[30 36]"
"$MKNPY" big.npy i64 2000 iota
run redjit -e 'sum(x)' --load x=big.npy --out 0=s.npy
expect "scalar --out" "1999000"
run "$MKNPY" --dump s.npy
expect "scalar written as a 0-d array" "i64 (): 1999000"

# ---- JSON ----
run redjit -e 'sum(x), max(x)' --load x=x.npy --format json
json_check "JSON scalars" "len(d['results']) == 2 and d['results'][0]['value'] == 10 and d['results'][1]['value'] == 4 and d['results'][0]['shape'] == [] and d['results'][0]['dtype'] == 'f64' and d['results'][0]['name'] == ''"
run redjit -e 'sum(x)' --load x=x.npy --format json --explain
json_check "JSON with --explain stays one object" "len(d['explain']) > 0 and d['results'][0]['value'] == 10"
run redjit -e 'C[i] = sum(A[i,j]) over j' --load A=A.npy --format json
json_check "JSON named array" "d['results'][0]['name'] == 'C' and d['results'][0]['shape'] == [2] and d['results'][0]['value'] == [6, 15]"
run redjit -e 'sum(x)' --load x=xn.npy --format json
json_check "JSON NaN as a string" "d['results'][0]['value'] == 'nan'"
"$MKNPY" M.npy i64 1500,2 iota
run redjit -e 'R[i] = sum(A[i,j]) over j' --load A=M.npy --format json
json_check "JSON arrays are never elided" "len(d['results'][0]['value']) == 1500 and d['results'][0]['value'][1499] == 5997"
run redjit -e 'R[i] = sum(A[i,j]) over j' --load A=M.npy
if [ $rc -eq 0 ] && [ "$(cat out)" = "R = [   1    5    9 ... 5989 5993 5997]" ]; then ok; else bad "text elides large arrays like NumPy"; fi

# ---- scripts and the interactive loop ----
printf '# a script\nsum(x)\n' >prog.red
run redjit prog.red --load x=x.npy
expect "script file" "10"
printf 'sum(x)\nmax(abs(x - yy))\n' >bad.red
run redjit bad.red --load x=x.npy
expect_fail "script error names the file and line" 1 "bad.red:2:" "yy" "^"
printf 'sum(x)\nsum(x\n\nsum(x) * t\n:quit\nsum(x)\n' >lines.txt
redjit --load x=x.npy --set t=2 <lines.txt >out 2>err
rc=$?
if [ $rc -eq 1 ] && [ "$(cat out)" = "10
20" ] && grep -q '\^' err; then ok; else bad "line loop: keeps going after an error, stops at :quit"; fi
printf 'sum(x)\n' | redjit --load x=x.npy >out 2>err
rc=$?
expect "line loop from a pipe, no prompt" "10"

# ---- errors ----
run redjit -e 'max(abs(x - yy))' --load x=x.npy
expect_fail "unknown name: caret message" 1 "yy" "^"
run redjit -e 'sum(x' --load x=x.npy
expect_fail "syntax error: caret message" 1 "^"
printf 'garbage, not numpy' >g.npy
run redjit -e 'sum(x)' --load x=g.npy
expect_fail "garbage .npy" 1 "g.npy" "not a .npy file"
head -c 164 big.npy >t.npy
run redjit -e 'sum(x)' --load x=t.npy
expect_fail "truncated .npy" 1 "t.npy" "truncated data: expected 16000 bytes, got 36"
head -c 50 big.npy >t.npy
run redjit -e 'sum(x)' --load x=t.npy
expect_fail "truncated .npy header" 1 "truncated header"
run redjit -e 'sum(x)' --load x=missing.npy
expect_fail "missing .npy" 1 "missing.npy"
run redjit -e 'sum(x)' --load x=x.npy --out nosuch=o.npy
expect_fail "--out names a missing result" 1 "nosuch"
run redjit -e 'sum(x)' --load x=x.npy --out 3=o.npy
expect_fail "--out position out of range" 1 "only 1 result"
run redjit -e 'sum(x)' --load x=x.npy --out 0=/nonexistent-dir/o.npy
expect_fail "--out to an unwritable path" 1 "/nonexistent-dir/o.npy"

# ---- usage errors: exit 2, one line, a pointer to --help ----
run redjit --bogus
expect_usage "unknown option"
run redjit -e
expect_usage "missing value"
run redjit -e 'sum(x)' --load x
expect_usage "--load without ="
run redjit -e 'sum(x)' --load 1x=x.npy
expect_usage "--load with a bad name"
run redjit -e 'sum(x)' --set t=abc
expect_usage "--set with a non-number"
run redjit -e 'sum(x)' --device tpu
expect_usage "--device with an unknown value"
run redjit -e 'sum(x)' --threads -1
expect_usage "--threads negative"
run redjit -e 'sum(x)' --format xml
expect_usage "--format with an unknown value"
run redjit -e 'sum(x)' prog.red
expect_usage "-e and a script"
run redjit --out C=c.npy
expect_usage "--out without a program"
run redjit --load x=x.npy 'sum(x)'
expect_usage "an expression without -e"
if grep -q "redjit -e 'sum(x)'" err; then ok; else bad "... says to give it with -e"; fi
run redjit --load x=x.npy missing.red
expect_fail "a missing script file" 1 "missing.red" "cannot open"

run redjit --help
if [ $rc -eq 0 ] && grep -q 'usage: redjit' out && grep -q '"nan"' out; then ok; else bad "--help"; fi
REDJIT_HISTORY=$T/hist.txt redjit --help >out 2>err
rc=$?
if [ $rc -eq 0 ] && grep -q "keeps its history in $T/hist.txt" out; then ok; else bad "--help says where the history is kept"; fi
run redjit --version
if [ $rc -eq 0 ] && grep -q '^redjit [0-9]' out; then ok; else bad "--version"; fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
