"""setup.py -- builds libredjit.a with CMake from the repository root (the folder above
this one, or $REDJIT_SOURCE_DIR), then the CPython extension redjit._redjit linked
statically against it.  Needs what scripts/deps.sh installs: cmake, a C compiler with
OpenMP, re2c and lemon, plus the Python headers (Debian: python3-dev)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent


def source_root():
    root = Path(os.environ.get("REDJIT_SOURCE_DIR", HERE.parent)).resolve()
    if not (root / "include" / "redjit.h").is_file() or not (root / "CMakeLists.txt").is_file():
        sys.exit(f"redjit: the C sources are not in {root}; build from a checkout of the repository "
                 "(pip install ./python) or set REDJIT_SOURCE_DIR to it")
    return root


class BuildWithLibrary(build_ext):
    """Build the static C library with CMake first, then the extension against it."""

    def run(self):
        root = source_root()
        cmake = shutil.which("cmake")
        if not cmake:
            sys.exit("redjit: cmake not found (Debian: apt-get install cmake; or run scripts/deps.sh)")
        build = Path(self.build_temp).resolve() / "libredjit"
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.check_call([cmake, "-S", str(root), "-B", str(build), *gen,
                               "-DCMAKE_BUILD_TYPE=Release", "-DREDJIT_BUILD_TESTS=OFF",
                               "-DREDJIT_BUILD_SAMPLES=OFF", "-DREDJIT_BUILD_PYTHON=OFF",
                               "-DCMAKE_POSITION_INDEPENDENT_CODE=ON"])
        subprocess.check_call([cmake, "--build", str(build), "--target", "redjit_static"])
        lib = build / "libredjit.a"
        if not lib.is_file():
            sys.exit(f"redjit: the CMake build did not produce {lib}")
        # the libraries the C library itself needs (MPI, where its engine is built in)
        extra = build / "redjit-link-libs.txt"
        libs = [x for x in extra.read_text().strip().split(";") if x] if extra.is_file() else []
        for ext in self.extensions:
            ext.include_dirs.append(str(root / "include"))
            # the library's symbols stay inside the extension (no clash with a libredjit.so)
            ext.extra_link_args = [str(lib), "-Wl,--exclude-libs,ALL", "-fopenmp", "-lm", "-ldl",
                                   "-lpthread"] + libs + ext.extra_link_args
        super().run()


setup(
    ext_modules=[Extension(
        "redjit._redjit",
        sources=["src/module.c", "src/bind.c", "src/result.c", "src/devarray.c"],
        extra_compile_args=["-std=c11", "-O2", "-fvisibility=hidden", "-Wall"],
    )],
    cmdclass={"build_ext": BuildWithLibrary},
)
