"""conftest.py -- shared fixtures: the CPU context every host test runs on, and how long
the leak and thread tests run (REDJIT_PY_QUICK=1 in sanitizer builds, REDJIT_PY_LONG=1
for the issue's 100,000 calls)."""
import os

import pytest

import redjit

QUICK = os.environ.get("REDJIT_PY_QUICK") == "1"
LONG = os.environ.get("REDJIT_PY_LONG") == "1"
LEAK_CALLS = 2_000 if QUICK else 100_000 if LONG else 20_000


@pytest.fixture(scope="session")
def cpu():
    """A context pinned to the CPU executor with two threads (CI has no GPU)."""
    return redjit.Context(device="cpu", threads=2)
