#!/usr/bin/env bash
# test.sh -- configures, builds and runs the test suite.  README.md's test command and .ci/run
# both call this script, so they cannot drift apart.
#
#   scripts/test.sh             Release build in build/, warnings as errors, every test
#                               (tests that need a GPU skip themselves when there is none)
#   scripts/test.sh sanitize    Debug build with ASan and UBSan in build-asan/, every test
#                               but those labelled gpu
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-release}
case "$mode" in
  release)
    # scripts/run.sh configures build/ with this same line, so each reuses the other's build.
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DREDJIT_WERROR=ON \
          -DPython3_EXECUTABLE=/usr/bin/python3
    cmake --build build
    ctest --test-dir build --output-on-failure
    ;;
  sanitize)
    # Warnings are errors in the Release build only: with the sanitizers GCC's flow-based
    # warnings (-Wformat-truncation, -Wmaybe-uninitialized) report paths that cannot happen.
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DREDJIT_SANITIZE=ON \
          -DREDJIT_WERROR=OFF -DPython3_EXECUTABLE=/usr/bin/python3
    cmake --build build-asan
    ctest --test-dir build-asan --output-on-failure -LE 'gpu|nvrtc'
    ;;
  *)
    echo "usage: scripts/test.sh [release|sanitize]" >&2
    exit 2
    ;;
esac
