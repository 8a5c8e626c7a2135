"""peers_types.py -- the element-type cases of peers.py (types_*): 8- and 16-bit integer sums, complex
c64 reductions and the NaN-skipping reductions, on the arrays of bench_data.h built with NumPy's or
CuPy's uint32 arithmetic (bit-identical to redjit_bench's), in each library's idiomatic form: CuPy and
PyTorch (sharing CuPy's memory through DLPack, complex included), NumPy for --numpy-check (its complex
sums in complex128 and its float sums in f64, as a reference).  These cases run only when --cases
names them (bench/run.sh types), never in a run without --cases; torch.compile and JAX do not run them.
"""
import math

SEED_U8, SEED_I16, SEED_Z, SEED_W, SEED_NAN, SEED_XNAN = 11, 12, 13, 15, 17, 18   # bench_data.h

# the element-type cases, in table order (redjit_bench.c's add_types)
TYPES_CASES = ["types_sum_u8", "types_rowsum_u8", "types_sum_i16", "types_sum_c64", "types_absmax_c64",
               "types_dot_c64", "types_nanargmax_f32", "types_nansum_f32"]


def wanted_any(cases):
    """Whether any types case is named (cases: a set of ids; None, every case but these, is no)."""
    return cases is not None and any(c in cases for c in TYPES_CASES)


def _chunks(n, step=1 << 26):
    for c0 in range(0, n, step):
        yield c0, min(n, c0 + step)


def gen_types(xp, bd_hash, gen, kind, n, seed):
    """n elements of bench_data.h's u8, i16, c64 (parts f32(i, seed), f32(i, seed + 1)) or f32 with
    NaN (f32(i, seed), NaN where hash(i, SEED_NAN) % 100 == 0)."""
    if kind == "c64":
        parts = xp.empty((n, 2), dtype=xp.float32)
        parts[:, 0] = gen(xp, "f32", n, seed)
        parts[:, 1] = gen(xp, "f32", n, seed + 1)
        return parts.view(xp.complex64).reshape(n)
    if kind == "f32nan":
        out = gen(xp, "f32", n, seed)
        for c0, c1 in _chunks(n):
            h = bd_hash(xp, xp.arange(c0, c1, dtype=xp.uint32), SEED_NAN)
            out[c0:c1][h % xp.uint32(100) == 0] = xp.float32(math.nan)
        return out
    out = xp.empty(n, dtype=xp.uint8 if kind == "u8" else xp.int16)
    for c0, c1 in _chunks(n):
        h = bd_hash(xp, xp.arange(c0, c1, dtype=xp.uint32), seed)
        if kind == "u8":
            out[c0:c1] = (h >> xp.uint32(24)).astype(xp.uint8)
        else:
            out[c0:c1] = ((h >> xp.uint32(16)).astype(xp.int32) - xp.int32(32768)).astype(xp.int16)
    return out


def types_inputs(xp, opt, bd_hash, gen):
    """[(case id, n, arrays, bytes)] of the types cases named, in table order; each array is built once
    at the largest size a named case reads, as in redjit_bench (the image a prefix of the u8 array, the
    dot product's z a prefix of z).  Bytes: each input once."""
    if not wanted_any(opt.cases):
        return []
    want = opt.cases.__contains__
    L = opt.types_log2n
    R, C = opt.types_image
    n8 = 1 << L
    n16, nz, nw, nnan = n8 >> 1, n8 >> 3, n8 >> 4, n8 >> 2
    u8n = max(n8 if want("types_sum_u8") else 0, R * C if want("types_rowsum_u8") else 0)
    zn = max(nz if want("types_sum_c64") or want("types_absmax_c64") else 0, nw if want("types_dot_c64") else 0)
    u8 = gen_types(xp, bd_hash, gen, "u8", u8n, SEED_U8) if u8n else None
    z = gen_types(xp, bd_hash, gen, "c64", zn, SEED_Z) if zn else None
    xn = (gen_types(xp, bd_hash, gen, "f32nan", nnan, SEED_XNAN)
          if want("types_nanargmax_f32") or want("types_nansum_f32") else None)
    out = []

    def add(cid, n, arrays):   # arrays: a function, called only for a case named
        if want(cid):
            a = arrays()
            out.append((cid, n, a, float(sum(x.nbytes for x in a))))
    add("types_sum_u8", n8, lambda: [u8[:n8]])
    add("types_rowsum_u8", R * C, lambda: [u8[:R * C].reshape(R, C)])
    add("types_sum_i16", n16, lambda: [gen_types(xp, bd_hash, gen, "i16", n16, SEED_I16)])
    add("types_sum_c64", nz, lambda: [z[:nz]])
    add("types_absmax_c64", nz, lambda: [z[:nz]])
    add("types_dot_c64", nw, lambda: [gen_types(xp, bd_hash, gen, "c64", nw, SEED_W), z[:nw]])
    add("types_nanargmax_f32", nnan, lambda: [xn])
    add("types_nansum_f32", nnan, lambda: [xn])
    return out


# ---- each system's forms: {case id: (function, kind, form)} ------------------------------------
# kind as peers.py's: scalar, index, array, or complex (a complex scalar: "value" and "imag")

def _numpy_forms(np):
    c128 = np.complex128
    return {
        "types_sum_u8": (lambda x: x.sum(dtype=np.int64), "scalar", "x.sum(dtype=np.int64)"),
        "types_rowsum_u8": (lambda A: A.sum(axis=1, dtype=np.int64), "array", "A.sum(axis=1, dtype=np.int64)"),
        "types_sum_i16": (lambda x: x.sum(dtype=np.int64), "scalar", "x.sum(dtype=np.int64)"),
        "types_sum_c64": (lambda z: z.astype(c128).sum(), "complex", "z.astype(complex128).sum()"),
        "types_absmax_c64": (lambda z: np.abs(z).max(), "scalar", "np.abs(z).max()"),
        "types_dot_c64": (lambda w, z: np.vdot(w.astype(c128), z.astype(c128)), "complex",
                          "np.vdot(w, z) in complex128"),
        "types_nanargmax_f32": (lambda x: np.nanargmax(x), "index", "np.nanargmax(x)"),
        "types_nansum_f32": (lambda x: np.nansum(x.astype(np.float64)), "scalar", "np.nansum(x) in f64"),
    }


def _cupy_forms(cp):
    return {
        "types_sum_u8": (lambda x: x.sum(dtype=cp.int64), "scalar", "x.sum(dtype=cupy.int64)"),
        "types_rowsum_u8": (lambda A: A.sum(axis=1, dtype=cp.int64), "array", "A.sum(axis=1, dtype=cupy.int64)"),
        "types_sum_i16": (lambda x: x.sum(dtype=cp.int64), "scalar", "x.sum(dtype=cupy.int64)"),
        "types_sum_c64": (lambda z: z.sum(), "complex", "z.sum()"),
        "types_absmax_c64": (lambda z: cp.abs(z).max(), "scalar", "cupy.abs(z).max()"),
        "types_dot_c64": (lambda w, z: cp.vdot(w, z), "complex", "cupy.vdot(w, z)"),
        "types_nanargmax_f32": (lambda x: cp.nanargmax(x), "index", "cupy.nanargmax(x)"),
        "types_nansum_f32": (lambda x: cp.nansum(x), "scalar", "cupy.nansum(x)"),
    }


def _torch_forms(torch):
    ninf = float("-inf")
    return {
        "types_sum_u8": (lambda x: x.sum(dtype=torch.int64), "scalar", "x.sum(dtype=torch.int64)"),
        "types_rowsum_u8": (lambda A: A.sum(1, dtype=torch.int64), "array", "A.sum(1, dtype=torch.int64)"),
        "types_sum_i16": (lambda x: x.sum(dtype=torch.int64), "scalar", "x.sum(dtype=torch.int64)"),
        "types_sum_c64": (lambda z: z.sum(), "complex", "z.sum()"),
        "types_absmax_c64": (lambda z: z.abs().max(), "scalar", "z.abs().max()"),
        "types_dot_c64": (lambda w, z: torch.vdot(w, z), "complex", "torch.vdot(w, z)"),
        # PyTorch has no nanargmax: NaN replaced by -inf, then argmax (differs where every element is
        # NaN, which none of these inputs is)
        "types_nanargmax_f32": (lambda x: torch.where(torch.isnan(x), ninf, x).argmax(), "index",
                                "torch.where(torch.isnan(x), -inf, x).argmax() (no torch.nanargmax)"),
        "types_nansum_f32": (lambda x: torch.nansum(x), "scalar", "torch.nansum(x)"),
    }


def types_forms(sysname, mods):
    """{case id: (function, kind, form)} of a system, {} for those that do not run the types cases."""
    if sysname == "numpy":
        return _numpy_forms(mods["numpy"])
    if sysname == "cupy" and "cupy" in mods:
        return _cupy_forms(mods["cupy"])
    if sysname == "torch" and "torch" in mods:
        return _torch_forms(mods["torch"])
    return {}
