"""peers_pairwise.py -- the pairwise cases of peers.py (pair_*): Gaussian kernel sums and nearest neighbours
over 1-D and 3-D points, and the contractions (a bilinear form, batched and plain matrix products), on the
normal values of bench_data.h built with NumPy's or CuPy's uint32 arithmetic
(bit-identical to redjit_bench's), in each library's idiomatic form: PyTorch (sharing CuPy's memory through
DLPack), torch.compile and jax.jit given the same forms, NumPy for --numpy-check.  The products run in FP32:
PyTorch with TF32 off (cuBLAS's FP32 GEMM), JAX with precision HIGHEST; JAX without XLA's fusion autotuner
(PAIR_XLA_FLAGS).  These cases run only when --cases names them (bench/run.sh pairwise), never in a run
without --cases; CuPy does not run them.
"""
import math

SEED_PX, SEED_PY, SEED_PA, SEED_PB = 19, 23, 27, 31    # bench_data.h; each normal array takes four seeds

# XLA's fusion autotuner took 2.7 s to compile the kernel sum over 2^13 points and over 45 s over 2^14
# (the GPU plugin of JAX 0.11.2, H200: a run past its time limit); without it 0.1 s, at 2^16 too.  The
# products' GEMM autotuning stays on.  peers.py adds this to XLA_FLAGS when a pairwise case is named.
PAIR_XLA_FLAGS = "--xla_gpu_experimental_enable_fusion_autotuner=false"

# the pairwise cases, in table order (redjit_bench.c's add_pairwise)
PAIR_CASES = ["pair_gauss_14", "pair_gauss_16", "pair_nn_14", "pair_nn_16", "pair_gauss3d_14", "pair_gauss3d_16",
              "pair_nn3d_14", "pair_nn3d_16", "pair_bilinear", "pair_bmm", "pair_matmul_4096"]


def wanted_any(cases):
    """Whether any pairwise case is named (cases: a set of ids; None, every case but these, is no)."""
    return cases is not None and any(c in cases for c in PAIR_CASES)


def _chunks(n, step=1 << 26):
    for c0 in range(0, n, step):
        yield c0, min(n, c0 + step)


def gen_normal(xp, bd_hash, n, seed):
    """n normal values of bench_data.h (bd_normal): the sum of hash(i, seed + k) >> 10 over k = 0..3,
    less 8388606, exact as int32 and as f32, times f32(sqrt(3)) * 2^-22 (one f32 multiply)."""
    out = xp.empty(n, dtype=xp.float32)
    scale = xp.float32(math.sqrt(3.0) / 2**22)   # rounds as f32(sqrt(3)) does, then exact: 0x1.bb67aep-22
    for c0, c1 in _chunks(n):
        idx = xp.arange(c0, c1, dtype=xp.uint32)
        s = xp.full(c1 - c0, -8388606, dtype=xp.int32)
        for k in range(4):
            s += (bd_hash(xp, idx, seed + k) >> xp.uint32(10)).astype(xp.int32)
        out[c0:c1] = s.astype(xp.float32) * scale
    return out


def pair_inputs(xp, opt, bd_hash):
    """[(case id, n, arrays, bytes, fields)] of the pairwise cases named, in table order; fields: the
    record's "shape" (the extents of the expression's indices, whose product n is: the terms
    evaluated) and "indices".  Each array is built once at the largest size a named case reads, as in
    redjit_bench: the points x and y (the 3-D points, n x 3 of their first 3 n values, and the bilinear
    form's vectors prefixes of them),
    a and b (K, and the products' factors, prefixes of them).  Bytes: each input once."""
    if not wanted_any(opt.cases):
        return []
    want = opt.cases.__contains__
    n16 = 1 << opt.pair_log2n
    n14, nk, (nb, nm), mm = n16 >> 2, opt.pair_bilinear, opt.pair_bmm, opt.pair_matmul
    pn = max(n16 if want("pair_gauss_16") or want("pair_nn_16") else 0,
             n14 if want("pair_gauss_14") or want("pair_nn_14") else 0,
             3 * n16 if want("pair_gauss3d_16") or want("pair_nn3d_16") else 0,
             3 * n14 if want("pair_gauss3d_14") or want("pair_nn3d_14") else 0, nk if want("pair_bilinear") else 0)
    an = max(nk * nk if want("pair_bilinear") else 0, nb * nm * nm if want("pair_bmm") else 0,
             mm * mm if want("pair_matmul_4096") else 0)
    bn = max(nb * nm * nm if want("pair_bmm") else 0, mm * mm if want("pair_matmul_4096") else 0)
    x = gen_normal(xp, bd_hash, pn, SEED_PX) if pn else None
    y = gen_normal(xp, bd_hash, pn, SEED_PY) if pn else None
    a = gen_normal(xp, bd_hash, an, SEED_PA) if an else None
    b = gen_normal(xp, bd_hash, bn, SEED_PB) if bn else None
    out = []

    def add(cid, indices, shape, arrays):   # arrays: a function, called only for a case named
        if want(cid):
            arr = arrays()
            out.append((cid, math.prod(shape), arr, float(sum(v.nbytes for v in arr)),
                        {"shape": list(shape), "indices": indices}))
    add("pair_gauss_14", "i,j", (n14, n14), lambda: [x[:n14], y[:n14]])
    add("pair_gauss_16", "i,j", (n16, n16), lambda: [x[:n16], y[:n16]])
    add("pair_nn_14", "i,j", (n14, n14), lambda: [x[:n14], y[:n14]])
    add("pair_nn_16", "i,j", (n16, n16), lambda: [x[:n16], y[:n16]])
    for cid, m in (("pair_gauss3d_14", n14), ("pair_gauss3d_16", n16), ("pair_nn3d_14", n14), ("pair_nn3d_16", n16)):
        add(cid, "i,j,d", (m, m, 3), lambda m=m: [x[:3 * m].reshape(m, 3), y[:3 * m].reshape(m, 3)])
    add("pair_bilinear", "i,j", (nk, nk), lambda: [x[:nk], a[:nk * nk].reshape(nk, nk), y[:nk]])
    add("pair_bmm", "b,i,j,k", (nb, nm, nm, nm),
        lambda: [a[:nb * nm * nm].reshape(nb, nm, nm), b[:nb * nm * nm].reshape(nb, nm, nm)])
    add("pair_matmul_4096", "i,j,k", (mm, mm, mm), lambda: [a[:mm * mm].reshape(mm, mm), b[:mm * mm].reshape(mm, mm)])
    return out


def nearest_dist(np, idx, x, y):
    """The distances from x[i] to y[idx[i]] in f64 (host arrays) of a nearest-neighbour result, as
    redjit_bench's print_nearest computes them: |x[i] - y[idx[i]]| for 1-D points (x, y of shape n),
    the Euclidean distance sqrt(sum over d of (x[i,d] - y[idx[i],d])^2) for points of shape n x D
    (the squares summed in the order of d, then the root).  Where distances tie, the indices may
    differ, these do not; NaN where idx is not an index of y."""
    idx = np.asarray(idx).astype(np.int64).ravel()
    ok = (idx >= 0) & (idx < y.shape[0])
    if x.ndim == 1:
        d = np.abs(x.astype(np.float64) - y.astype(np.float64)[np.where(ok, idx, 0)])
    else:
        t = x.astype(np.float64) - y.astype(np.float64)[np.where(ok, idx, 0)]
        s = t[:, 0] * t[:, 0]
        for k in range(1, t.shape[1]):
            s = s + t[:, k] * t[:, k]
        d = np.sqrt(s)
    return np.where(ok, d, np.nan)


# ---- each system's forms: {case id: (function, kind, form)} ------------------------------------
# kind as peers.py's: scalar, array, or nearest (an array of indices into y, with the distances at
# them: peers.py's values)

def _forms(ex, nn, nn3d, dots, text):
    """The forms every library shares, written with its exp (ex); nn(x, y) its nearest-neighbour form
    over 1-D points, nn3d(x, y) over 3-D ones, dots its (bilinear, bmm, matmul) contractions, text each
    form as the report lists it."""
    bilinear, bmm, matmul = dots
    gauss = (lambda x, y: ex(-(x[:, None] - y[None, :]) ** 2).sum(1), "array", text["gauss"])
    near = (nn, "nearest", text["nn"])
    gauss3d = (lambda x, y: ex(-((x[:, None, :] - y[None, :, :]) ** 2).sum(2)).sum(1), "array", text["gauss3d"])
    near3d = (nn3d, "nearest", text["nn3d"])
    return {
        "pair_gauss_14": gauss, "pair_gauss_16": gauss, "pair_nn_14": near, "pair_nn_16": near,
        "pair_gauss3d_14": gauss3d, "pair_gauss3d_16": gauss3d, "pair_nn3d_14": near3d, "pair_nn3d_16": near3d,
        "pair_bilinear": (bilinear, "scalar", text["bilinear"]),
        "pair_bmm": (bmm, "array", text["bmm"]),
        "pair_matmul_4096": (matmul, "array", text["matmul"]),
    }


def _text(lib, nn, nn3d, bilinear, bmm, matmul):
    return {"gauss": f"{lib}.exp(-(x[:,None]-y[None,:])**2).sum(1)", "nn": nn,
            "gauss3d": f"{lib}.exp(-((x[:,None,:]-y[None,:,:])**2).sum(2)).sum(1)", "nn3d": nn3d,
            "bilinear": bilinear, "bmm": bmm, "matmul": matmul}


def _numpy_forms(np):
    return _forms(np.exp, lambda x, y: np.abs(x[:, None] - y[None, :]).argmin(1),
                  lambda x, y: ((x[:, None, :] - y[None, :, :]) ** 2).sum(2).argmin(1),
                  (lambda x, K, y: x @ K @ y, np.matmul, np.matmul),
                  _text("np", "np.abs(x[:,None]-y[None,:]).argmin(1)",
                        "((x[:,None,:]-y[None,:,:])**2).sum(2).argmin(1)", "x @ K @ y", "np.matmul(A, B)", "A @ B"))


def _torch_forms(torch):
    # cuBLAS's FP32 GEMM, not TF32 (PyTorch's default since 1.12, set here all the same)
    torch.backends.cuda.matmul.allow_tf32 = False
    return _forms(torch.exp, lambda x, y: (x[:, None] - y[None, :]).abs().argmin(1),
                  lambda x, y: ((x[:, None, :] - y[None, :, :]) ** 2).sum(2).argmin(1),
                  (lambda x, K, y: x @ K @ y, torch.bmm, lambda A, B: A @ B),
                  _text("torch", "(x[:,None]-y[None,:]).abs().argmin(1)",
                        "((x[:,None,:]-y[None,:,:])**2).sum(2).argmin(1)", "x @ K @ y (TF32 off)",
                        "torch.bmm(A, B) (TF32 off)", "A @ B (TF32 off)"))


def _jax_forms(jax):
    jnp = jax.numpy
    hi = jax.lax.Precision.HIGHEST   # FP32 products: XLA's DEFAULT may take TF32 on the GPU

    def mm(A, B):
        return jnp.matmul(A, B, precision=hi)
    return _forms(jnp.exp, lambda x, y: jnp.argmin(jnp.abs(x[:, None] - y[None, :]), axis=1),
                  lambda x, y: jnp.argmin(((x[:, None, :] - y[None, :, :]) ** 2).sum(2), axis=1),
                  (lambda x, K, y: mm(mm(x, K), y), mm, mm),
                  _text("jnp", "jnp.argmin(jnp.abs(x[:,None]-y[None,:]), axis=1)",
                        "jnp.argmin(((x[:,None,:]-y[None,:,:])**2).sum(2), axis=1)",
                        "x @ K @ y (precision HIGHEST)", "jnp.matmul(A, B, precision=HIGHEST)",
                        "jnp.matmul(A, B, precision=HIGHEST)"))


def pair_forms(sysname, mods):
    """{case id: (function, kind, form)} of a system, {} for those that do not run the pairwise cases."""
    if sysname == "numpy":
        return _numpy_forms(mods["numpy"])
    if sysname in ("torch", "torch_compile") and "torch" in mods:
        return _torch_forms(mods["torch"])
    if sysname == "jax" and "jax" in mods:
        return _jax_forms(mods["jax"])
    return {}
