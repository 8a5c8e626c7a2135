#!/bin/sh
# repl_fakegpu_test.sh -- a REPL session on the "GPU" of the stand-in driver
# (tests/fakecuda: no kernel runs, so values are not checked): arrays made by
# the generators and by assignments live in device memory, are replaced,
# dropped and used in failing statements, and when the session ends the
# driver holds nothing of it: no device or pinned memory, module, event or
# context reference (the stand-in writes what is left at exit to
# $FAKECUDA_REPORT).
#
# usage: repl_fakegpu_test.sh REDJIT FAKECUDA_DIR WORKDIR

REDJIT=$1 FAKE=$2
if [ -z "$REDJIT" ] || [ -z "$FAKE" ] || [ -z "$3" ]; then
    echo "usage: repl_fakegpu_test.sh REDJIT FAKECUDA_DIR WORKDIR" >&2
    exit 2
fi
mkdir -p "$3" || exit 2
T=$(mktemp -d "$3/fakegpu.XXXXXX") || exit 2
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 2

cat >session.red <<'RED'
:seed 3
x = rand(1000)
y = x * 2 + 1
s = sum(y)
m = max(abs(x - y))
argmin(x), count(x > 0.5)
C[i,j] = x[i] * y[j] + 0 * i
x = iota(1000)
r = sum(x[k]) over k in 0..10
w = sum(nosuch)
C = zeros(3)
RED
LD_LIBRARY_PATH=$FAKE FAKECUDA_REPORT=$T/report REDJIT_CACHE_DIR=$T/cache \
    "$REDJIT" <session.red >out 2>err
rc=$?
fail=0
# from a pipe the session goes on after the failing statement, and exits 1
if [ $rc -ne 1 ]; then
    echo "FAIL: the session exited with $rc, not 1 (one statement failed)"; fail=1
fi
if [ "$(grep -c . err)" -ne 3 ]; then
    echo "FAIL: stderr has more than the one error (3 lines: message, source, caret)"; fail=1
fi
grep -q "unknown name 'nosuch'" err || { echo "FAIL: no message for the unknown name"; fail=1; }
if ! [ -s report ]; then
    echo "FAIL: the stand-in driver was not used (no report)"; fail=1
else
    held=$(cat report)
    case "$held" in
    "device 0 pinned 0 modules 0 events 0 contexts 0 registered 0 launches "[1-9]*) ;;
    *) echo "FAIL: at exit the driver still holds: $held"; fail=1 ;;
    esac
fi
if [ $fail -ne 0 ]; then
    printf '  stdout: %s\n  stderr: %s\n' "$(cat out)" "$(cat err)"
    exit 1
fi
echo "passed: $(cat report)"
