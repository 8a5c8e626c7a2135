"""peers_spmv.py -- the sparse cases of peers.py (issue 29): the CSR matrices of bench_data.h built
with NumPy's or CuPy's uint32 arithmetic (bit-identical to redjit_bench's), and each library's
matrix times vector: CuPy's `csr_matrix @ x` and PyTorch's `torch.mv` (both cuSPARSE SpMV), NumPy's
`np.add.reduceat` over the products (the --numpy-check reference), and for gather_all the dot product
of the values with the gathered vector.  The matrix objects are built outside the timed region, by
a case's `prep`; torch.compile and JAX do not run these cases.
"""
import importlib
import sys
import warnings

import numpy as np

SEED_COL, SEED_SPV, SEED_SPX, SEED_PLEN, SEED_L13 = 6, 7, 8, 9, 10
POWER_MAX_LOG2 = 18

# the sparse cases, in table order (redjit_bench.c's add_sparse)
SPMV_CASES = ["spmv_r32", "spmv_rand", "spmv_rand_i64", "spmv_poisson", "spmv_power", "spmv_len13", "gather_all"]

# rows of the row-length rules: 2^(--spmv-log2nnz - shift)
_RULED = {"spmv_r32": ("r32", 5), "spmv_power": ("power", 5), "spmv_len13": ("len13", 1)}


def wanted_any(cases):
    """Whether any sparse case is asked for (cases: a set of ids, or None for all)."""
    return cases is None or any(c in cases for c in SPMV_CASES)


def row_lengths(xp, bd_hash, rule, nrows):
    """int64 lengths of rows 0..nrows-1 under a row-length rule (bd_row_len)."""
    if rule == "r32":
        return xp.full(nrows, 32, dtype=xp.int64)
    r = xp.arange(nrows, dtype=xp.uint32)
    if rule == "len13":
        return 1 + (bd_hash(xp, r, SEED_L13) % xp.uint32(3)).astype(xp.int64)
    h = bd_hash(xp, r, SEED_PLEN)
    m = h | xp.uint32(1 << 31)
    low = m & (~m + xp.uint32(1))                               # the lowest set bit, a power of two
    t = xp.frexp(low.astype(xp.float64))[1].astype(xp.int64) - 1   # its exponent, exact
    long_ = xp.left_shift(xp.int64(1), xp.minimum(t + 1, POWER_MAX_LOG2))
    return xp.where(t < 4, 1 + ((h >> xp.uint32(28)) % xp.uint32(4)).astype(xp.int64), long_)


def offsets_of(xp, lens):
    """int32 CSR offsets of the row lengths (bd_row_offsets)."""
    ptr = xp.zeros(lens.size + 1, dtype=xp.int64)
    xp.cumsum(lens, out=ptr[1:])
    if int(ptr[-1]) > 2**31 - 1:
        raise ValueError("more than 2^31 - 1 nonzeros (--spmv-log2nnz)")
    return ptr.astype(xp.int32)


def random_cols(xp, bd_hash, n, ncols, dtype, step=1 << 26):
    """col[k] = hash(k, SEED_COL) % ncols for k < n (bd_col)."""
    out = xp.empty(n, dtype=dtype)
    for c0 in range(0, n, step):
        c1 = min(n, c0 + step)
        out[c0:c1] = (bd_hash(xp, xp.arange(c0, c1, dtype=xp.uint32), SEED_COL) % xp.uint32(ncols)).astype(dtype)
    return out


def poisson(xp, g):
    """(ptr, col) of the G x G 5-point stencil, int32 (bd_poisson_row): row r = i G + j holds
    r - G, r - 1, r, r + 1, r + G where they lie in the grid, in that order."""
    n = g * g
    r = xp.arange(n, dtype=xp.int64)
    i, j = r // g, r % g
    inside = xp.stack([i > 0, j > 0, xp.ones(n, dtype=bool), j < g - 1, i < g - 1], axis=1)
    col = (r[:, None] + xp.asarray([-g, -1, 0, 1, g], dtype=xp.int64)[None, :])[inside].astype(xp.int32)
    return offsets_of(xp, inside.sum(axis=1).astype(xp.int64)), col


def spmv_inputs(xp, opt, bd_hash, gen, rand_ptr):
    """[(case id, nnz, arrays, bytes, (nrows, ncols))] of the sparse cases asked for, in table order;
    arrays are (ptr, col, v, x) for a matrix, (v, col, x) for gather_all.  Values, vector and random
    columns are prefixes of one array each, as in redjit_bench; rand_ptr: layout rand's offsets."""
    want = (lambda c: True) if opt.cases is None else (lambda c: c in opt.cases)
    L = opt.spmv_log2nnz
    ncols, g, ns = 1 << (L - 4), opt.spmv_grid, 1 << opt.log2s
    ptrs = {c: offsets_of(xp, row_lengths(xp, bd_hash, rule, 1 << (L - shift)))
            for c, (rule, shift) in _RULED.items() if want(c)}
    nnz = {c: int(p[-1]) for c, p in ptrs.items()}
    if want("spmv_rand") or want("gather_all"):
        nnz["spmv_rand"] = ns
    ncol = max(nnz.values(), default=0)
    if want("spmv_rand_i64"):
        nnz["spmv_rand_i64"] = ns
    if want("spmv_poisson"):
        ptrs["spmv_poisson"], pcol = poisson(xp, g)
        nnz["spmv_poisson"] = int(pcol.size)
    if not nnz:
        return []
    v = gen(xp, "f32", max(nnz.values()), SEED_SPV)
    x = gen(xp, "f32", max(ncols, g * g if want("spmv_poisson") else 0), SEED_SPX)
    col = random_cols(xp, bd_hash, ncol, ncols, xp.int32) if ncol else None

    def matrix(cid, ptr, c, nc):
        # bytes as redjit_bench counts them: each input once (the offsets int32) and the result
        m, nrows = nnz[cid], int(ptr.size) - 1
        nbytes = 4 * m + c.itemsize * m + 4 * (nrows + 1) + 4 * nc + 4 * nrows
        return (cid, m, [ptr, c[:m], v[:m], x[:nc]], float(nbytes), (nrows, nc))
    out = []
    if want("spmv_r32"):
        out.append(matrix("spmv_r32", ptrs["spmv_r32"], col, ncols))
    if want("spmv_rand"):
        out.append(matrix("spmv_rand", rand_ptr, col, ncols))
    if want("spmv_rand_i64"):   # PyTorch's offsets and columns share a dtype: both int64
        out.append(matrix("spmv_rand_i64", rand_ptr.astype(xp.int64), random_cols(xp, bd_hash, ns, ncols, xp.int64),
                          ncols))
    if want("spmv_poisson"):
        out.append(matrix("spmv_poisson", ptrs["spmv_poisson"], pcol, g * g))
    for cid in ("spmv_power", "spmv_len13"):
        if want(cid):
            out.append(matrix(cid, ptrs[cid], col, ncols))
    if want("gather_all"):
        arrays = [v[:ns], col[:ns], x[:ncols]]
        out.append(("gather_all", ns, arrays, float(sum(a.nbytes for a in arrays)), (0, ncols)))
    return out


# ---- each system's forms: (prep, function, kind, form) ---------------------------------------
# prep(*arrays, shape=) -> (arguments of the function, fields for the record), outside the timed
# region; None: the arrays are the arguments.

def _numpy_spmv(ptr, col, v, x):
    """Row sums of the products in f64, empty rows 0 (np.add.reduceat alone would give them the
    next row's first product)."""
    t = v.astype(np.float64) * x[col]
    out = np.zeros(ptr.size - 1)
    full = ptr[1:] > ptr[:-1]
    if full.any():
        out[full] = np.add.reduceat(t, ptr[:-1][full].astype(np.int64))
    return out


def _cupy_forms(cp, sparse):
    def prep(ptr, col, v, x, shape):
        # copies, so that nothing CuPy does to its matrix reaches the shared arrays; CuPy's `@`
        # puts the matrix in canonical form (columns sorted within a row, repeats summed) on its
        # first use, done here, outside the timed region
        A = sparse.csr_matrix((v, col, ptr), shape=shape, copy=True)
        A.sum_duplicates()
        return (A, x), {"peer_nnz": int(A.nnz), "index_dtype": str(A.indices.dtype)}
    return {"spmv": (prep, lambda A, x: A @ x, "array", "csr_matrix((v, col, ptr)) @ x (cuSPARSE SpMV)"),
            "gather": (None, lambda v, col, x: cp.dot(v, x[col]), "scalar", "cp.dot(v, x[col])")}


def _torch_forms(torch):
    def prep(ptr, col, v, x, shape):
        return (torch.sparse_csr_tensor(ptr, col, v, size=shape), x), {"index_dtype": str(col.dtype)}
    return {"spmv": (prep, lambda A, x: torch.mv(A, x), "array", "torch.mv(sparse_csr_tensor(ptr, col, v), x)"),
            "gather": (None, lambda v, col, x: torch.dot(v, x[col]), "scalar", "torch.dot(v, x[col])")}


_said = {}   # the systems whose import failure has been reported


def spmv_forms(sysname, mods):
    """{"spmv": form, "gather": form} of a system, {} for those that do not run the sparse cases."""
    if sysname == "numpy":
        return {"spmv": (None, _numpy_spmv, "array", "np.add.reduceat(v*x[col], ptr[:-1]) in f64"),
                "gather": (None, lambda v, col, x: np.dot(v.astype(np.float64), x[col].astype(np.float64)), "scalar",
                           "np.dot(v, x[col]) in f64")}
    if sysname == "cupy" and "cupyx" in mods:
        try:   # a submodule that `import cupyx` need not load
            sparse = importlib.import_module("cupyx.scipy.sparse")
        except Exception as ex:
            if not _said.get("cupy"):
                print(f"peers.py: cupy left out of the sparse cases: {type(ex).__name__}: {ex}", file=sys.stderr)
                _said["cupy"] = True
            return {}
        return _cupy_forms(mods["cupy"], sparse)
    if sysname == "torch":
        warnings.filterwarnings("ignore", message=r".*[Ss]parse CSR tensor support is in beta")
        return _torch_forms(mods["torch"])
    return {}
