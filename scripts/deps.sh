#!/usr/bin/env bash
# deps.sh -- installs the Debian/Ubuntu packages redjit needs to build, test and benchmark.
# Does nothing when they are all present; otherwise runs apt-get as root (through sudo when
# not root).  Used by .ci/run and named in README.md.
set -euo pipefail

packages=(
  cmake ninja-build gcc libc6-dev pkg-config   # build
  re2c lemon                                   # lexer and parser generators
  libdlpack-dev                                # dlpack.h, for red_array_from_dlpack
  libedit-dev                                  # line editing in the CLI's prompt
  python3 python3-numpy python3-numexpr        # tests and bench/cpu_bench.py
  python3-dev python3-pytest python3-setuptools python3-wheel python3-pip   # the Python package
  clang libclang-rt-14-dev libomp-14-dev       # libFuzzer targets (tests/fuzz)
  time                                         # /usr/bin/time -v in bench/cpu_bench.py
  valgrind                                     # the valgrind-labelled tests
  libopenmpi-dev openmpi-bin                   # the MPI engine and its tests (mpirun)
  python3-mpi4py                               # the Python binding over MPI ranks (test python_mpi)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps.sh: all ${#packages[@]} packages present"
  exit 0
fi

echo "deps.sh: installing ${missing[*]}"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "deps.sh: not root and no sudo; as root run: apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${packages[@]}"
