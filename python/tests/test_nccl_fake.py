"""Context(nccl_id=...) on the stand-in NCCL (tests/fakenccl) and driver (tests/fakecuda), in CI
without GPUs: the unique id, two ranks forked here over host arrays (run on the CPU, the ranks'
messages through the NCCL engine), and the binding's argument errors.  CTest's python_nccl_fake
sets REDJIT_NCCL_FAKE=1 with the libraries on the paths; without it these skip."""
import os

import numpy as np
import pytest

import redjit

pytestmark = pytest.mark.skipif(os.environ.get("REDJIT_NCCL_FAKE") != "1",
                                reason="needs the stand-in NCCL and driver (CTest python_nccl_fake)")


def test_unique_id_is_128_bytes_and_new_each_time():
    a, b = redjit.nccl_unique_id(), redjit.nccl_unique_id()
    assert isinstance(a, bytes) and len(a) == 128 and a != b


def test_bad_arguments_are_errors_before_any_collective():
    uid = redjit.nccl_unique_id()
    with pytest.raises(ValueError, match="128 bytes"):
        redjit.Context(nccl_id=b"short", rank=0, nranks=1)
    with pytest.raises(ValueError, match="rank= and nranks="):
        redjit.Context(nccl_id=uid)
    with pytest.raises(redjit.Error, match="rank 3 of 2"):
        redjit.Context(nccl_id=uid, rank=3, nranks=2)


def rank_main(uid, uid2, rank, n, x, A):
    """One rank's part: its blocks, the whole results compared with NumPy's."""
    ctx = redjit.Context(threads=1, nccl_id=uid, rank=rank, nranks=n)
    assert ctx.ranks == (rank, n)
    lo, hi = len(x) * rank // n, len(x) * (rank + 1) // n
    s, m, am = ctx.eval("sum(x), max(abs(x)), argmax(x)", x=redjit.Split(x[lo:hi], 0))
    assert abs(s - x.sum()) <= 1e-4 * np.abs(x).sum()
    assert m == np.abs(x).max() and am == int(np.argmax(x))
    r0, r1 = A.shape[0] * rank // n, A.shape[0] * (rank + 1) // n
    cols = ctx.eval("sum(A[i,j]) over i", A=redjit.Split(A[r0:r1], 0))
    np.testing.assert_allclose(cols, A.sum(0), rtol=1e-5)
    e = ctx.prepare("sum(A[i,j]) over j")
    rows = e(A=redjit.Split(A[r0:r1], 0))          # stays split: this rank's rows
    assert e.splits == ((0, r0, A.shape[0]),)
    np.testing.assert_allclose(rows, A[r0:r1].sum(1), rtol=1e-5)
    whole = redjit.Context(threads=1, gather=True, nccl_id=uid2, rank=rank, nranks=n)
    np.testing.assert_allclose(whole.eval("sum(A[i,j]) over j", A=redjit.Split(A[r0:r1], 0)), A.sum(1), rtol=1e-5)
    # an error on one rank is every rank's, and the context goes on
    bad = x[lo:hi].astype(np.float64) if rank == 1 else x[lo:hi]
    with pytest.raises(redjit.Error) as err:
        ctx.eval("sum(x)", x=redjit.Split(bad, 0))
    assert "rank" in str(err.value) or rank == 1
    assert abs(ctx.eval("sum(x)", x=redjit.Split(x[lo:hi], 0)) - x.sum()) <= 1e-4 * np.abs(x).sum()


def test_two_forked_ranks_agree_with_numpy():
    rng = np.random.default_rng(30)
    x = rng.standard_normal(10001).astype(np.float32)
    A = rng.standard_normal((37, 29)).astype(np.float32)
    uid, uid2 = redjit.nccl_unique_id(), redjit.nccl_unique_id()   # one per communicator
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            rank_main(uid, uid2, 1, 2, x, A)
            code = 0
        except BaseException as exc:  # noqa: BLE001 -- the child reports through its status
            print("rank 1:", repr(exc), flush=True)
        os._exit(code)
    try:
        rank_main(uid, uid2, 0, 2, x, A)
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "rank 1 failed"


def caller_comm_rank(lib, uid, rank, n, x):
    """A rank that makes its own communicator (through the library's ncclCommInitRank) and
    hands it over with Context(nccl_comm=...); it stays the caller's, destroyed after."""
    import ctypes

    class UniqueId(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_char * 128)]

    comm = ctypes.c_void_p()
    u = UniqueId()
    ctypes.memmove(ctypes.addressof(u), uid, 128)
    assert lib.ncclCommInitRank(ctypes.byref(comm), n, u, rank) == 0
    ctx = redjit.Context(threads=1, nccl_comm=comm.value)
    assert ctx.ranks == (rank, n)
    lo, hi = len(x) * rank // n, len(x) * (rank + 1) // n
    assert ctx.eval("argmax(x)", x=redjit.Split(x[lo:hi], 0)) == int(np.argmax(x))
    del ctx
    assert lib.ncclCommDestroy(comm) == 0


def test_the_callers_own_communicator():
    import ctypes
    lib = ctypes.CDLL(os.environ["REDJIT_NCCL_LIB"])
    x = np.random.default_rng(31).standard_normal(777).astype(np.float32)
    uid = redjit.nccl_unique_id()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            caller_comm_rank(lib, uid, 1, 2, x)
            code = 0
        except BaseException as exc:  # noqa: BLE001 -- the child reports through its status
            print("rank 1:", repr(exc), flush=True)
        os._exit(code)
    try:
        caller_comm_rank(lib, uid, 0, 2, x)
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "rank 1 failed"
