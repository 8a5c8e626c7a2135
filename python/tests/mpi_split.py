"""mpi_split.py -- the Python binding over arrays split across MPI ranks (mpi4py), run by CTest
as `mpiexec -n 3 python3 mpi_split.py` (test python_mpi): every rank checks its own results
against NumPy over the whole arrays, which every rank draws from the same seed.  Not a pytest
module: every rank must make the same calls in the same order.  Exits non-zero on a failure."""
import sys

import numpy as np
from mpi4py import MPI

import redjit

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("rank %d: FAIL %s" % (rank, what), file=sys.stderr, flush=True)


def block(a, axis, sizes):
    """This rank's block of `a` along `axis`, the ranks' blocks of `sizes` elements."""
    cuts = np.concatenate([[0], np.cumsum(sizes)])
    return np.take(a, np.arange(cuts[rank], cuts[rank + 1]), axis=axis), cuts[rank], cuts[rank + 1]


rng = np.random.default_rng(32)
A = rng.standard_normal((11, 7))
x = rng.standard_normal(1000).astype(np.float32)
sizes_rows = [4, 0, 7][:size] if size == 3 else [11 - 11 // size * (size - 1)] + [11 // size] * (size - 1)
sizes_x = [1000 // size] * (size - 1) + [1000 - 1000 // size * (size - 1)]

ctx = redjit.Context(device="cpu", comm=comm)
check(ctx.ranks == (rank, size), "ranks %r" % (ctx.ranks,))

# rows split: row sums stay split (no communication), column sums and the total are whole
blk, r0, r1 = block(A, 0, sizes_rows)
e = ctx.prepare("sum(A[i,j]) over j, sum(A[i,j]) over i, sum(A)")
rows, cols, tot = e(A=redjit.Split(blk, axis=0))
check(e.splits == ((0, r0, 11), (-1, 0, 0), (-1, 0, 0)), "splits %r" % (e.splits,))
check(np.allclose(rows, A.sum(axis=1)[r0:r1]), "row sums of my rows")
check(np.allclose(cols, A.sum(axis=0)), "column sums")
check(np.isclose(tot, A.sum()), "total")

# columns split (axis -1 counts from the end): the row sums combine across ranks
cblk, c0, c1 = block(A, 1, [7 - 7 // size * (size - 1)] + [7 // size] * (size - 1))
rows2 = ctx.eval("sum(A[i,j]) over j", A=redjit.Split(cblk, axis=-1))
check(np.allclose(rows2, A.sum(axis=1)), "row sums over split columns")

# argmax over a split vector gives the global index; an ordered user operator stays exact
xb, x0, x1 = block(x, 0, sizes_x)
i = ctx.eval("argmax(x)", x=redjit.Split(xb))
check(i == int(np.argmax(x)), "argmax %r against %d" % (i, int(np.argmax(x))))
xi = (np.arange(1000) % 97).astype(np.int64)
xib, _, _ = block(xi, 0, sizes_x)
h = ctx.eval("ordered op aff(p, q) = ((p.0 * q.0) % 1000003, (p.1 * q.0 + q.1) % 1000003) identity (1, 0)\n"
             "(reduce(aff, (a[i] + 2, a[i])) over i).1", a=redjit.Split(xib))
want = 0
for v in xi.tolist():
    want = (want * (v + 2) + v) % 1000003
check(h == want, "ordered operator %r against %d" % (h, want))

# gather=True: a result still indexed by the split axis comes back whole on every rank
g = redjit.Context(device="cpu", comm=comm, gather=True)
rows3 = g.eval("sum(A[i,j]) over j", A=redjit.Split(blk, axis=0))
check(np.allclose(rows3, A.sum(axis=1)), "gathered row sums")

# an error on one rank reaches every rank, with that rank's number, and nobody hangs
bad = blk if rank != size - 1 else np.zeros((blk.shape[0], 3))
try:
    e(A=redjit.Split(bad, axis=0))
    check(False, "a shape error on rank %d raised nothing" % (size - 1))
except redjit.Error as err:
    check(("rank %d" % (size - 1)) in str(err), "the error names the failing rank: %s" % err)
rows, cols, tot = e(A=redjit.Split(blk, axis=0))   # the expression works afterwards
check(np.isclose(tot, A.sum()), "total after an error")

# a sub-communicator: the even ranks alone
sub = comm.Split(rank % 2, rank)
sctx = redjit.Context(device="cpu", comm=sub)
check(sctx.ranks == (sub.Get_rank(), sub.Get_size()), "sub-communicator ranks")
s = sctx.eval("sum(x)", x=redjit.Split(np.full(3, float(rank))))
check(np.isclose(s, 3.0 * sum(r for r in range(size) if r % 2 == rank % 2)), "sum over the sub-communicator")

# what is not a communicator, and a scalar block
for wrong in (5, "comm", object()):
    try:
        redjit.Context(device="cpu", comm=wrong)
        check(False, "comm=%r accepted" % (wrong,))
    except TypeError:
        pass
try:
    ctx.eval("sum(x)", x=redjit.Split(2.0))
    check(False, "a scalar block accepted")
except redjit.BindingError as err:
    check("scalar" in str(err), "scalar block message: %s" % err)

ok = comm.allreduce(0 if failures else 1, op=MPI.MIN)
if rank == 0:
    print("mpi_split: %d ranks, %s" % (size, "passed" if ok else "FAILED"))
sys.exit(0 if ok else 1)
