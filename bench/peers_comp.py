"""peers_comp.py -- what peers.py runs besides its single reductions: the composition cases
(issue 28: several reductions of one input, or a map over reductions' results) in the idiomatic
form of each library, and the forms the JIT compilers (torch.compile, jax.jit) are given for the
single reductions they also run.  Each function returns a result or a tuple of results; peers.py
reports every result's checksums ("outs"), as redjit_bench does for its comp_* cases.
"""
import math

import numpy as np

# the composition cases, in table order (redjit_bench.c's add_compositions)
COMP_CASES = ["comp_rowstats", "comp_lse", "comp_softmax", "comp_cssq", "comp_segstats", "comp_3d"]

# the single reductions that the JIT peers run too (their other cases are theirs alone)
JIT_SINGLE = {"sum_f32", "maxabs_f32", "sumsq_f32", "rowsum", "colsum", "rowsum_short"}


def comp_inputs(data, opt):
    """(case id, n, arrays, extra arguments, bytes read) of each composition, on data's arrays;
    the matrices and the 3-D array are prefixes of x, as in redjit_bench."""
    x, R, C = data["x"], opt.rows, opt.cols
    N, NS = 1 << opt.log2n, 1 << opt.log2s
    d0, d1, d2 = opt.cube
    A = x[:R * C].reshape(R, C)
    seg = data["seg"]["rand"]
    nseg = int(data["ptr"]["rand"].size) - 1
    return [
        ("comp_rowstats", R * C, [A], (), None),
        ("comp_lse", R * C, [A], (), None),
        ("comp_softmax", R * C, [A], (), None),
        ("comp_cssq", N, [x[:N]], (), None),
        ("comp_segstats", NS, [x[:NS], seg], (nseg,), float(NS * 4 + NS * 4)),
        ("comp_3d", d0 * d1 * d2, [x[:d0 * d1 * d2].reshape(d0, d1, d2)], (), None),
    ]


def _numpy_like(xp, scatter=None):
    """NumPy's and CuPy's forms (the same calls); scatter(v, seg, nseg) -> (sums, maxima)."""
    def lse(A):
        m = A.max(axis=1, keepdims=True)
        return xp.log(xp.exp(A - m).sum(axis=1)) + m[:, 0]

    def softmax(A):
        e = xp.exp(A - A.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    impls = {
        "comp_rowstats": lambda A: (A.sum(axis=1), (A * A).sum(axis=1)),
        "comp_lse": lse,
        "comp_softmax": softmax,
        "comp_cssq": lambda x: ((x - x.mean()) ** 2).sum(),
        "comp_3d": lambda A: (A.sum(axis=(1, 2)), (A * A).sum(axis=(1, 2))),
    }
    if scatter is not None:
        def segstats(v, seg, nseg):
            return scatter(v, seg, nseg) + (xp.bincount(seg, minlength=nseg),)
        segstats.form = getattr(scatter, "form", None)
        impls["comp_segstats"] = segstats
    return impls


def _numpy_scatter(v, seg, nseg):
    mx = np.full(nseg, -np.inf, dtype=v.dtype)
    np.maximum.at(mx, seg, v)
    return np.bincount(seg, weights=v, minlength=nseg), mx


def _cupy_scatter(cp, cupyx):
    """CuPy's scatters: ufunc.at (add.at, maximum.at, as NumPy's) where this CuPy has them, else
    cupyx.scatter_add and scatter_max; None without either.  The choice is the function's form."""
    def with_at(v, seg, nseg):
        s = cp.zeros(nseg, dtype=v.dtype)
        cp.add.at(s, seg, v)
        mx = cp.full(nseg, -cp.inf, dtype=v.dtype)
        cp.maximum.at(mx, seg, v)
        return s, mx

    def with_cupyx(v, seg, nseg):
        s = cp.zeros(nseg, dtype=v.dtype)
        cupyx.scatter_add(s, seg, v)
        mx = cp.full(nseg, -cp.inf, dtype=v.dtype)
        cupyx.scatter_max(mx, seg, v)
        return s, mx
    with_at.form = "cp.add.at, cp.maximum.at, cp.bincount"
    with_cupyx.form = "cupyx.scatter_add, cupyx.scatter_max, cp.bincount"
    v, seg = cp.arange(4, dtype=cp.float32), cp.array([0, 0, 1, 1], dtype=cp.int32)
    for f in (with_at, with_cupyx):
        try:
            s, mx = f(v, seg, 2)
            if s.tolist() == [1.0, 5.0] and mx.tolist() == [1.0, 3.0]:
                return f
        except Exception:
            pass
    return None


def _torch_comps(torch, eager):
    """torch's forms; the segment statistics by scatters over the int32 keys (index_add_,
    index_reduce_), the counts by bincount when eager and by index_add_ of ones when compiled
    (bincount's size depends on the data, which breaks the compiled graph)."""
    def segstats(v, seg, nseg):
        s = torch.zeros(nseg, dtype=v.dtype, device=v.device).index_add_(0, seg, v)
        mx = torch.full((nseg,), -math.inf, dtype=v.dtype, device=v.device).index_reduce_(0, seg, v, "amax")
        if eager:
            c = torch.bincount(seg, minlength=nseg)
        else:
            c = torch.zeros(nseg, dtype=torch.int64, device=v.device).index_add_(
                0, seg, torch.ones(seg.shape, dtype=torch.int64, device=v.device))
        return s, mx, c
    return {
        "comp_rowstats": lambda A: (A.sum(dim=1), (A * A).sum(dim=1)),
        "comp_lse": lambda A: torch.logsumexp(A, 1),
        "comp_softmax": lambda A: torch.softmax(A, 1),
        "comp_cssq": lambda x: ((x - x.mean()) ** 2).sum(),
        "comp_segstats": segstats,
        "comp_3d": lambda A: (A.sum(dim=(1, 2)), (A * A).sum(dim=(1, 2))),
    }


def _jax_comps(jax, jnp):
    def segstats(v, seg, nseg):
        ops = jax.ops
        return (ops.segment_sum(v, seg, nseg, indices_are_sorted=True),
                ops.segment_max(v, seg, nseg, indices_are_sorted=True),
                ops.segment_sum(jnp.ones_like(seg), seg, nseg, indices_are_sorted=True))
    return {
        "comp_rowstats": lambda A: (A.sum(axis=1), (A * A).sum(axis=1)),
        "comp_lse": lambda A: jax.nn.logsumexp(A, axis=1),
        "comp_softmax": lambda A: jax.nn.softmax(A, axis=1),
        "comp_cssq": lambda x: jnp.sum((x - jnp.mean(x)) ** 2),
        "comp_segstats": segstats,
        "comp_3d": lambda A: (A.sum(axis=(1, 2)), (A * A).sum(axis=(1, 2))),
    }


def comp_impls(sysname, mods):
    """{composition id: function} of a system; mods holds the modules it needs."""
    if sysname == "numpy":
        return _numpy_like(np, _numpy_scatter)
    if sysname == "cupy":
        cp = mods["cupy"]
        return _numpy_like(cp, _cupy_scatter(cp, mods.get("cupyx")))
    if sysname in ("torch", "torch_compile"):
        return _torch_comps(mods["torch"], eager=sysname == "torch")
    if sysname == "jax":
        return _jax_comps(mods["jax"], mods["jax"].numpy)
    return {}


def jit_single_impls(sysname, mods):
    """{peers.py impl key: (function, kind)} for the single reductions a JIT peer runs: the
    elementwise forms a compiler can fuse (sum(x*x), not a BLAS dot)."""
    if sysname == "torch_compile":
        return {
            "sum": (lambda x: x.sum(), "scalar"),
            "maxabs_f32": (lambda a, b: (a - b).abs().max(), "scalar"),
            "sumsq_f32": (lambda x: (x.sum(), (x * x).sum()), "pair"),
            "rowsum": (lambda A: A.sum(dim=1), "array"),
            "colsum": (lambda A: A.sum(dim=0), "array"),
        }
    if sysname == "jax":
        jnp = mods["jax"].numpy
        return {
            "sum": (lambda x: jnp.sum(x), "scalar"),
            "maxabs_f32": (lambda a, b: jnp.max(jnp.abs(a - b)), "scalar"),
            "sumsq_f32": (lambda x: (jnp.sum(x), jnp.sum(x * x)), "pair"),
            "rowsum": (lambda A: jnp.sum(A, axis=1), "array"),
            "colsum": (lambda A: jnp.sum(A, axis=0), "array"),
        }
    return {}


# what each system's call is, for the report's list of forms
COMP_VARIANTS = {
    "numpy": {"comp_segstats": "np.bincount(weights), np.maximum.at, np.bincount"},
    "cupy": {"comp_rowstats": "A.sum(1), (A*A).sum(1)", "comp_lse": "m = A.max(1); log(exp(A-m).sum(1)) + m",
             "comp_softmax": "e = exp(A - A.max(1)); e / e.sum(1)", "comp_cssq": "((x - x.mean())**2).sum()",
             "comp_3d": "A.sum((1,2)), (A*A).sum((1,2))"},
    "torch": {"comp_rowstats": "A.sum(1), (A*A).sum(1)", "comp_lse": "torch.logsumexp(A, 1)",
              "comp_softmax": "torch.softmax(A, 1)", "comp_cssq": "((x - x.mean())**2).sum()",
              "comp_segstats": "index_add_, index_reduce_(amax), torch.bincount",
              "comp_3d": "A.sum((1,2)), (A*A).sum((1,2))"},
    "torch_compile": {"comp_segstats": "index_add_, index_reduce_(amax), index_add_(ones)",
                      "sumsq_f32": "x.sum(), (x*x).sum()"},
    "jax": {"comp_rowstats": "A.sum(1), (A*A).sum(1)", "comp_lse": "jax.nn.logsumexp(A, axis=1)",
            "comp_softmax": "jax.nn.softmax(A, axis=1)", "comp_cssq": "jnp.sum((x - jnp.mean(x))**2)",
            "comp_segstats": "jax.ops.segment_sum, segment_max, segment_sum(ones) (indices_are_sorted)",
            "comp_3d": "A.sum((1,2)), (A*A).sum((1,2))", "sumsq_f32": "jnp.sum(x), jnp.sum(x*x)"},
}
for _k in COMP_CASES:   # torch.compile is given torch's eager forms, segment statistics aside
    COMP_VARIANTS["torch_compile"].setdefault(_k, COMP_VARIANTS["torch"][_k])
