#!/bin/sh
# repl_script_test.sh -- the session without a terminal: script files
# (`redjit FILE.red`) and statements read from a pipe, with the values,
# generators, operators and commands of the prompt.
#
# usage: repl_script_test.sh REDJIT [WORKDIR]

REDJIT=$1
if [ -z "$REDJIT" ]; then
    echo "usage: repl_script_test.sh REDJIT [WORKDIR]" >&2
    exit 2
fi
if [ -n "$2" ]; then
    mkdir -p "$2" || exit 2
    T=$(mktemp -d "$2/script.XXXXXX") || exit 2
else
    T=$(mktemp -d "${TMPDIR:-/tmp}/redjit_script.XXXXXX") || exit 2
fi
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 2

pass=0
fail=0
bad() {
    fail=$((fail + 1))
    printf 'FAIL: %s\n  stdout: %s\n  stderr: %s\n' "$1" "$(cat out)" "$(cat err)" >&2
}
# expect DESCRIPTION STATUS EXPECTED-STDOUT [STDERR-NEEDLE...]
expect() {
    d=$1 want=$2 text=$3
    shift 3
    good=1
    [ "$rc" -eq "$want" ] || good=0
    [ "$(cat out)" = "$text" ] || good=0
    for needle in "$@"; do
        grep -F -q -e "$needle" err || good=0
    done
    if [ $good -eq 1 ]; then pass=$((pass + 1)); else bad "$d (rc=$rc, expected $want)"; fi
}

# ---- script files ----
cat >prog.red <<'EOF'
# values persist from one statement to the next
:seed 42
x = iota(10)
n = 3
y = x * n + zeros(10, dtype=i64)
sum(y)
op mx(a, b) = a > b ? a : b identity -inf
reduce(mx, y)
r = randn(1000) * 0.5
abs(mean(r)) < 0.2, count(abs(r) < 5)
sum(
  x
)
d = y - x; max(d)
s = iota(2)
u = iota(3)
C[i,j] = s[i] * u[j]
C
EOF
"$REDJIT" prog.red >out 2>err
rc=$?
expect "script: values, generators, operators, continuation" 0 "135
27
true
1000
45
18
[[0 0 0]
 [0 1 2]]"

printf ':seed 5\na = rand(4)\n:seed 5\nb = rand(4)\nall(a == b)\n' >seed.red
"$REDJIT" seed.red >out 2>err
rc=$?
expect ":seed makes generators reproducible" 0 "true"

# rand() in f32 is in [0, 1): with 53 random bits rounded to float, one value
# in 2^25 came out as 1.0 (seed 6 gave four of them in 2^25 values).
printf ':seed 6\nr = rand(33554432)\ncount(r >= 1 || r < 0)\nd = rand(1000, dtype=f64)\nall(d >= 0 && d < 1)\n' >unit.red
"$REDJIT" unit.red >out 2>err
rc=$?
expect "rand() stays below 1 in f32 and f64" 0 "0
true"

printf 'x = iota(4)\nsum(x)\nmax(abs(x - yy))\nsum(x) * 100\n' >bad.red
"$REDJIT" bad.red >out 2>err
rc=$?
expect "a script stops at its first error, named by file and line" 1 "6" "bad.red:3:" "yy" "^"

printf 'sum(x) * t\n' | "$REDJIT" - --set t=2 --load x=missing.npy >out 2>err
rc=$?
expect "--load errors are reported before the script runs" 1 "" "missing.npy"

printf 'v = iota(5) * 2\n:save v %s/v.npy\n:save v %s/v.csv\nm = ones(2, 3) * 1.5\n:save m %s/m.csv\n' "$T" "$T" "$T" >save.red
"$REDJIT" save.red >out 2>err
rc=$?
expect ":save .npy and .csv" 0 ""
printf ':load a %s/v.npy\n:load b %s/v.csv\n:load m %s/m.csv\nsum(a), sum(b), sum(m)\n:vars\n' "$T" "$T" "$T" >load.red
"$REDJIT" load.red >out 2>err
rc=$?
if [ $rc -eq 0 ] && [ "$(sed -n 1,3p out)" = "20
20
9" ] && grep -Eq '^m +f64 +\(2, 3\) +(host|gpu) ' out && grep -q '^a  *i64  *(5,)' out; then
    pass=$((pass + 1))
else
    bad ":load .npy and .csv; :vars"
fi

printf 'w = x * t\n' >out.red
"$REDJIT" out.red --load x=v.npy --set t=3 --out w=w.npy >out 2>err
rc=$?
expect "--load, --set and --out NAME with a script" 0 ""
"$REDJIT" -e 'sum(w)' --load w=w.npy >out 2>err
rc=$?
expect "... the saved value" 0 "60"

# Values live on the GPU when there is one; :device cpu brings them to the
# host (without a GPU they are there already), and the session goes on.
printf 'x = iota(4) * 1.5\ns = sum(x)\n:device cpu\n:vars\nsum(x), s\n:device auto\ny = x * 2\nsum(y)\n:device cpu\nsum(y) - sum(x)\n' >dev.red
"$REDJIT" dev.red >out 2>err
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -v '^name\|^x \|^s ' out)" = "9
9
18
9" ] && grep -Eq '^x +f64 +\(4,\) +host ' out && grep -Eq '^s +f64 += 9 +host ' out; then
    pass=$((pass + 1))
else
    bad ":device cpu: every value on the host, evaluations go on"
fi

# :explain shows the plan; the CUDA only on the GPU or with --cuda.
printf 'x = iota(4)\n:explain sum(x)\n' | "$REDJIT" --device cpu >out 2>err
rc=$?
if [ $rc -eq 0 ] && grep -q '^backend: cpu (up to' out && ! grep -q 'generated CUDA' out; then
    pass=$((pass + 1))
else
    bad ":explain on the CPU: the plan without CUDA"
fi
printf 'x = iota(4)\n:explain --cuda sum(x)\n' | "$REDJIT" --device cpu >out 2>err
rc=$?
if [ $rc -eq 0 ] && grep -q '^backend: cpu (up to' out && grep -q '^generated CUDA' out; then
    pass=$((pass + 1))
else
    bad ":explain --cuda shows the CUDA on the CPU too"
fi
printf 'x = iota(4)\nsum(x)\n' | "$REDJIT" --device cpu --explain >out 2>err
rc=$?
if [ $rc -eq 0 ] && [ "$(tail -n 1 out)" = "6" ] && grep -q '^backend: cpu' out && ! grep -q 'generated CUDA' out; then
    pass=$((pass + 1))
else
    bad "--explain in a session on the CPU: the plan without CUDA"
fi
printf 'x = iota(4)\nsum(x)\n' | "$REDJIT" --device cpu --verbose >out 2>err
rc=$?
expect "--verbose in a session: the note on stderr" 0 "6" "redjit: backend: cpu (up to" "redjit: time: plan"

# Assignments only: each is kept, and a later one reads an earlier one.  An
# entry that ends with an expression keeps none of its names.
printf 'x = iota(3)\np = x + 1; q = p * 2\nsum(p), sum(q)\nd = x - 1; max(d)\nd\n' | "$REDJIT" >out 2>err
rc=$?
expect "p = ...; q = ... keeps both; d = ...; max(d) keeps no d" 1 "6
12
1" "unknown name 'd'"
printf 'a = iota(2)\n\nb = a + 1; c = b * yy\n' >seq.red
"$REDJIT" seq.red >out 2>err
rc=$?
expect "an error in the second of two assignments points at its line and column" 1 "" "seq.red:3:20: unknown name 'yy'"

# ---- statements from a pipe ----
printf 'x = iota(6)\nsum(x\n)\n\nsum(x) +\n 1\nsum(x), max(x)\n' | "$REDJIT" >out 2>err
rc=$?
expect "a pipe: no prompt, continuation lines, one result per line" 0 "15
16
15
5"

printf 'x = iota(3)\nsum(yy)\nsum(x)\n:nosuch\nsum(x) * 2\n' | "$REDJIT" >out 2>err
rc=$?
expect "a pipe keeps going after errors and reports them in its status" 1 "3
6" "unknown name 'yy'" "unknown command ':nosuch'"

printf 'x = iota(3)\nsum(x), max(x)\n' | "$REDJIT" --format json >out 2>err
rc=$?
if [ $rc -eq 0 ] && grep -q '"results"' out && grep -q '"value": 3' out && grep -q '"value": 2' out; then
    pass=$((pass + 1))
else
    bad "--format json from a pipe"
fi

printf 'randn(-1)\nrandint(5, 2, 3)\nfull(2)\nrandn(2, dtype=c256)\nq = (1, 2)\n' | "$REDJIT" >out 2>err
rc=$?
expect "generator and assignment errors are messages" 1 "" "not a non-negative integer" "lo < hi" \
    "full(n..., value)" "unknown dtype 'c256'" "2 parts"

printf 'z = ones(3, dtype=c64)\nsum(z * 2 - 1), z[i] / 2\nw = randn(5, dtype=c128)\ncount(imag(w[i]) != 0) > 0\n' | "$REDJIT" >out 2>err
rc=$?
expect "complex arrays from the generators, complex results printed" 0 "3+0j
[0.5+0j 0.5+0j 0.5+0j]
true"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
