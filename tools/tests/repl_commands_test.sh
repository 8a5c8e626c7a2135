#!/bin/sh
# repl_commands_test.sh -- every ':' command of the session, taken from the
# command table in tools/commands.c, given no argument, one, two and garbage:
# the process must survive each (no signal, status 0 or 1), and a statement
# after it must still run over the values made before it.
#
# usage: repl_commands_test.sh REDJIT COMMANDS.C [WORKDIR]
#   REPL_TEST_WRAPPER in the environment prefixes every redjit command
#   (e.g. "valgrind -q --error-exitcode=99").

REDJIT=$1
COMMANDS_C=$2
if [ -z "$REDJIT" ] || [ ! -r "$COMMANDS_C" ]; then
    echo "usage: repl_commands_test.sh REDJIT COMMANDS.C [WORKDIR]" >&2
    exit 2
fi
# The names between "command_names[] = {" and the "};" that ends it.
commands=$(sed -n '/command_names\[\] *= *{/,/};/p' "$COMMANDS_C" | grep -o '":[a-z]*"' | tr -d '"')
n=$(echo "$commands" | wc -w)
if [ "$n" -lt 10 ]; then
    echo "FAIL: found only $n commands in $COMMANDS_C: $commands" >&2
    exit 1
fi
case $REDJIT in /*) ;; *) REDJIT=$PWD/$REDJIT ;; esac

if [ -n "$3" ]; then
    mkdir -p "$3" || exit 2
    T=$(mktemp -d "$3/commands.XXXXXX") || exit 2
else
    T=$(mktemp -d "${TMPDIR:-/tmp}/redjit_commands.XXXXXX") || exit 2
fi
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 2
# :cache clear must not empty the disk cache of the person running the tests.
export REDJIT_CACHE_DIR="$T/kcache"


long=$(printf '%0700d' 0 | tr 0 q)
garbage="%s%n%x ((]] \"' ;; == 1e999 -1 \\ \$x *** $long $long$long$long$long$long$long"

pass=0
fail=0

# session NAME: run redjit on file `in`; status in $rc.
session() {
    $REPL_TEST_WRAPPER "$REDJIT" <in >out 2>err
    rc=$?
}

# survived DESCRIPTION: status 0 or 1 (1 reports the command's error), and
# the last line of stdout is the sum the final statement prints.
survived() {
    if [ "$rc" -le 1 ] && [ "$(tail -n 1 out)" = "10" ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        printf 'FAIL: %s (rc=%s)\n  stdout: %s\n  stderr: %s\n' "$1" "$rc" \
            "$(tail -n 3 out)" "$(head -c 600 err)" >&2
    fi
}

for cmd in $commands; do
    for args in "" "zz" "zz 1" "$garbage"; do
        if [ "$cmd" = ":quit" ] && [ -z "$args" ]; then
            continue   # leaves, as it should: checked below
        fi
        printf 'x = iota(5)\n%s %s\nsum(x)\n' "$cmd" "$args" >in
        session
        survived "$cmd with '$(printf '%.40s' "$args")'"
    done
done

# All of them in one session, one after the other.
: >in
echo 'x = iota(5)' >>in
for cmd in $commands; do
    for args in "" "zz" "zz 1" "$garbage"; do
        if [ "$cmd" != ":quit" ] || [ -n "$args" ]; then
            printf '%s %s\n' "$cmd" "$args" >>in
        fi
    done
done
echo 'sum(x)' >>in
session
survived "every command with every argument list in one session"

printf 'x = iota(5)\n:quit\nsum(x)\n' >in
session
if [ "$rc" -eq 0 ] && [ ! -s out ]; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    printf 'FAIL: :quit leaves at once with status 0 (rc=%s)\n' "$rc" >&2
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
