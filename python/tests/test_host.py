"""test_host.py -- host arrays (NumPy, buffer protocol, DLPack on the CPU) against NumPy:
every dtype, strided, transposed, negative-stride and broadcast views, scalars, several
results, array results, explain()."""
import array

import numpy as np
import pytest

import redjit

rng = np.random.default_rng(7)

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64,
          np.uint32, np.uint64, np.bool_]


def sample(dtype, shape):
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def close(got, want, dtype=np.float64):
    tol = 1e-2 if dtype == np.float16 else 1e-5
    assert np.allclose(got, want, rtol=tol, atol=tol), (got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_dtypes_sum_min_max(cpu, dtype):
    x = sample(dtype, 1000)
    s, lo, hi = cpu.eval("sum(x), min(x), max(x)", x=x)
    if np.issubdtype(dtype, np.floating):
        wide = x.astype(np.float64)
    else:
        wide = x.astype(np.uint64 if dtype == np.uint64 else np.int64)
    close(s, wide.sum(), dtype)
    assert lo == pytest.approx(float(x.min()), rel=1e-3) and hi == pytest.approx(float(x.max()), rel=1e-3)
    if dtype == np.bool_:
        assert isinstance(s, int) and isinstance(hi, bool)
    elif np.issubdtype(dtype, np.integer):
        assert isinstance(s, int) and isinstance(hi, int)
    else:
        assert isinstance(s, float)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16,
                                   np.int32, np.int64, np.uint32, np.uint64], ids=lambda d: np.dtype(d).name)
def test_dtypes_elementwise_array_result(cpu, dtype):
    x = sample(dtype, (7, 9))
    r = cpu.eval("sum(f64(x[i,j])) over j", x=x)
    assert isinstance(r, np.ndarray) and r.shape == (7,) and r.dtype == np.float64
    close(r, x.astype(np.float64).sum(axis=1), dtype)


def test_max_abs_diff(cpu):
    x, y = sample(np.float32, 10_000), sample(np.float32, 10_000)
    assert cpu.eval("max(abs(x-y))", x=x, y=y) == pytest.approx(float(np.max(np.abs(x - y))))
    assert redjit.eval("max(abs(x-y))", x=x, y=y) == pytest.approx(float(np.max(np.abs(x - y))))


def test_matmul_prepared(cpu):
    a, b = sample(np.float64, (13, 17)), sample(np.float64, (17, 5))
    e = cpu.prepare("sum(A[i,k]*B[k,j]) over k")
    assert isinstance(e, redjit.Expr) and e.text == "sum(A[i,k]*B[k,j]) over k" and e.context is cpu
    for _ in range(3):
        close(e(A=a, B=b), a @ b)
    c = cpu.eval("C[j,i] = sum(A[i,k]*B[k,j]) over k", A=a, B=b)
    close(c, (a @ b).T)


def test_row_and_column_sums_mean_arg(cpu):
    m = sample(np.float64, (6, 11))
    close(cpu.eval("sum(A[i,j]) over j", A=m), m.sum(1))
    close(cpu.eval("sum(A[i,j]) over i", A=m), m.sum(0))
    x = sample(np.float64, 500)
    mean, amin, amax = cpu.eval("mean(x), argmin(x), argmax(x)", x=x)
    assert mean == pytest.approx(x.mean()) and amin == int(np.argmin(x)) and amax == int(np.argmax(x))
    close(cpu.eval("x[i] - mean(x)", x=x), x - x.mean())


def test_keys_and_counts(cpu):
    seg = np.sort(rng.integers(0, 8, 300)).astype(np.int64)
    x = sample(np.float64, 300)
    close(cpu.eval("sum(x[i]) by seg[i]", x=x, seg=seg), np.bincount(seg, weights=x))
    assert cpu.eval("count(x > 0)", x=x) == int((x > 0).sum())
    assert cpu.eval("any(x > 100), all(x < 100)", x=x) == (False, True)


def test_user_operator_tuple(cpu):
    re, im = sample(np.float64, 5) * 0.5, sample(np.float64, 5) * 0.5
    r = cpu.eval("op cmul(a, b) = (a.0*b.0 - a.1*b.1, a.0*b.1 + a.1*b.0) identity (1, 0);\n"
                 "reduce(cmul, (re[i], im[i])) over i", re=re, im=im)
    want = np.prod(re + 1j * im)
    assert isinstance(r, tuple) and len(r) == 2
    assert r[0] == pytest.approx(want.real) and r[1] == pytest.approx(want.imag)


@pytest.mark.parametrize("view", ["step", "reverse", "transpose", "slice2d", "broadcast", "fortran"])
def test_strided_views(cpu, view):
    base = sample(np.float64, (40, 30))
    if view == "step":
        a = base[:, ::3]
    elif view == "reverse":
        a = base[::-1, ::-2]
    elif view == "transpose":
        a = base.T
    elif view == "slice2d":
        a = base[5:31:2, 1::4]
    elif view == "broadcast":
        a = np.broadcast_to(base[0], (12, 30))
    else:
        a = np.asfortranarray(base)
    d = redjit._redjit._describe(a)
    assert d["data"] == a.__array_interface__["data"][0]           # read in place
    assert d["strides"] == tuple(s // a.itemsize for s in a.strides)
    close(cpu.eval("sum(A[i,j]) over j", A=a), a.sum(1))
    close(cpu.eval("max(abs(A))", A=a), np.abs(a).max())
    b = sample(np.float64, a.shape)
    close(cpu.eval("sum(A*B)", A=a, B=b), (a * b).sum())


BIG_ENDIAN = [">f2", ">f4", ">f8", ">i2", ">u2", ">i4", ">i8", ">u4", ">u8"]


@pytest.mark.parametrize("dtype", BIG_ENDIAN)
@pytest.mark.parametrize("view", ["plain", "reverse", "transpose", "step", "broadcast", "row", "0-d", "empty"])
def test_big_endian_arrays(cpu, dtype, view):
    # NumPy arrays of another byte order ('>f8', as np.load gives for a file written so,
    # and as the CLI reads): bound through a byte-swapped copy, never read as if native
    native = sample(np.dtype(dtype).newbyteorder("<").type, (6, 10))
    base = native.astype(dtype)
    a = {"plain": base, "reverse": base[::-1, ::-3], "transpose": base.T, "step": base[1:5:2, ::4],
         "broadcast": np.broadcast_to(base[2], (3, 10)), "row": base[3], "0-d": base[1, 1, ...],
         "empty": base[:, :0]}[view]
    assert a.dtype.byteorder == ">"
    keep = a.copy()
    want = a.astype(a.dtype.newbyteorder("<"))
    d = redjit._redjit._describe(a)
    if a.size:
        assert d["data"] != a.__array_interface__["data"][0]       # a copy, not the array
    assert d["dtype"] == {"f": "f", "i": "i", "u": "u"}[a.dtype.kind] + str(8 * a.itemsize)
    assert d["shape"] == a.shape
    if a.ndim == 0:
        assert cpu.eval("x + 0", x=a) == want[()]
    else:
        close(cpu.eval("sum(x)", x=a), want.astype(np.float64).sum(), a.dtype)
        got = cpu.eval("x[i,j] + 0" if a.ndim == 2 else "x[i] + 0", x=a)
        assert np.array_equal(got, want)          # f16 comes back as f32, exactly
    assert np.array_equal(a, keep) and a.dtype == keep.dtype       # the input is left as it was


def test_big_endian_with_native_operands(cpu):
    x = sample(np.float64, 1000)
    y = sample(np.float64, 1000)
    e = cpu.prepare("max(abs(x-y))")
    want = np.abs(x - y).max()
    assert e(x=x.astype(">f8"), y=y) == want
    assert e(x=x, y=y.astype(">f8")) == want                      # the same Expr, each way
    assert e(x=x, y=y) == want
    assert "f64" in e.explain(x=x.astype(">f8"), y=y)


def test_scalars_weak_and_typed(cpu):
    x = np.arange(10, dtype=np.float32)
    assert cpu.eval("sum(x*t)", x=x, t=2) == 90.0
    assert cpu.eval("sum(x*t)", x=x, t=0.5) == 22.5
    assert redjit._redjit._describe(3)["kind"] == "weak i64"
    assert redjit._redjit._describe(2.5)["kind"] == "weak f64"
    d = redjit._redjit._describe(np.float32(2))
    assert d["kind"] == "array" and d["dtype"] == "f32" and d["shape"] == ()
    assert cpu.eval("sum(x*t)", x=x, t=np.float32(2)) == 90.0
    assert cpu.eval("count(x > 4) + (b ? 100 : 0)", x=x, b=True) == 105
    assert cpu.eval("count(x > 4) + (b ? 100 : 0)", x=x, b=False) == 5
    big = 2**63 + 5
    assert cpu.eval("n + 0", n=big) == big
    with pytest.raises(redjit.BindingError):
        cpu.eval("n + 0", n=2**70)
    assert cpu.eval("a * b", a=6, b=7) == 42


def test_several_results_and_names(cpu):
    x = sample(np.float64, 100)
    r = cpu.eval("sum(x), max(x), sum(x[i]*2) over i", x=x)
    assert isinstance(r, tuple) and len(r) == 3
    assert r[0] == pytest.approx(x.sum()) and r[2] == pytest.approx(2 * x.sum())


def test_array_result_owns_memory(cpu):
    e = cpu.prepare("x[i] * 2")
    x = np.arange(5, dtype=np.float64)
    r1 = e(x=x)
    r2 = e(x=x + 1)                     # the next run does not touch r1
    assert r1.tolist() == [0, 2, 4, 6, 8] and r2.tolist() == [2, 4, 6, 8, 10]
    assert r1.flags.writeable and r1.base is not None
    r1[0] = 42.0
    assert r1[0] == 42.0


def test_buffer_protocol_inputs(cpu):
    assert cpu.eval("sum(x)", x=array.array("d", [1.0, 2.0, 3.5])) == 6.5
    assert cpu.eval("sum(x)", x=memoryview(array.array("i", [1, 2, 3]))) == 6
    assert cpu.eval("max(x)", x=array.array("Q", [1, 2**63])) == 2**63
    assert cpu.eval("sum(x), min(x)", x=array.array("b", [-128, 127, -1])) == (-2, -128)
    assert cpu.eval("sum(x)", x=array.array("H", [65535, 1])) == 65536


def test_small_integers(cpu):
    # int8..uint16 are read narrow and computed in int32: sums in int64, no wrap at 8 bits,
    # casts to them wrap integers and saturate floats (docs/language.md, Types)
    a = rng.integers(0, 256, 10_000).astype(np.uint8)
    b = rng.integers(0, 256, 10_000).astype(np.uint8)
    s, m = cpu.eval("sum(abs(a - b)), max(a)", a=a, b=b)
    assert s == np.abs(a.astype(np.int64) - b).sum() and m == a.max() and isinstance(m, int)
    r = cpu.eval("u8(a[i] + b[i])", a=a, b=b)
    assert r.dtype == np.int32 and np.array_equal(r, (a + b).astype(np.int32))   # NumPy's uint8 wrap
    f = np.array([-1e9, -129.5, -0.5, 3.7, 300.0, np.nan], np.float32)
    assert cpu.eval("i8(f[i])", f=f).tolist() == [-128, -128, 0, 3, 127, 0]
    seg = np.sort(rng.integers(0, 40, 5000)).astype(np.int16)
    v = rng.integers(-128, 128, 5000).astype(np.int8)
    got = cpu.eval("sum(v[i]) by seg[i]", v=v, seg=seg)
    assert np.array_equal(got, np.bincount(seg, weights=v, minlength=40).astype(np.int64))
    cols = rng.integers(0, 100, 3000).astype(np.uint16)
    x = rng.standard_normal(100)
    close(cpu.eval("sum(x[c[k]]) over k", x=x, c=cols), x[cols].sum())


class OnlyDLPack:
    """An object that offers its data through DLPack only (NumPy's host tensors)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


@pytest.mark.skipif(not hasattr(np.ndarray, "__dlpack__"), reason="NumPy without DLPack")
def test_dlpack_host(cpu):
    a = sample(np.float32, (20, 8))[::2, ::-1]
    w = OnlyDLPack(a)
    d = redjit._redjit._describe(w)
    assert d["memory"] == "host" and d["data"] == a.__array_interface__["data"][0]
    assert d["strides"] == (16, -1)
    close(cpu.eval("sum(A[i,j]) over j", A=w), a.sum(1))


def test_explain(cpu):
    e = cpu.prepare("sum(A[i,k]*B[k,j]) over k")
    a = np.ones((3, 4))
    text = e.explain(A=a, B=a.T.copy())
    assert "backend: cpu" in text and "reduce(sum" in text
    assert e.explain() == text           # the last bindings' plan
    e(A=a, B=a.T.copy())
    assert "backend: cpu" in e.explain()


def test_expr_rebinding_forgets_old_names(cpu):
    e = cpu.prepare("sum(x) + t")
    x = np.ones(4)
    assert e(x=x, t=1) == 5.0
    with pytest.raises(redjit.BindingError, match="t"):
        e(x=x)                            # t is not silently kept from the last call
    assert e(t=2, x=x) == 6.0


def test_context_options():
    c = redjit.Context(device="cpu", strategy="tree", threads=1)
    assert (c.device, c.strategy, c.threads) == ("cpu", "tree", 1)
    c.threads = 2
    c.device = "auto"
    assert "threads=2" in repr(c)
    with pytest.raises(ValueError):
        redjit.Context(device="tpu")
    with pytest.raises(ValueError):
        c.strategy = "fast"
    assert isinstance(redjit.gpu_available(), bool)
    assert redjit.default_context().device in ("auto", "cpu", "gpu")
    assert c.cache_mb == 64
    c.cache_mb = 1
    assert c.cache_mb == 1
    with pytest.raises(ValueError):
        c.cache_mb = -1
    assert c.eval("sum(x)", x=np.ones(3)) == 3
    stats = c.cache_stats()
    assert set(stats) >= {"compiles", "memory_hits", "programs", "plans", "program_bytes"}
    assert stats["programs"] >= 1 and stats["program_bytes"] > 0


def test_empty_and_docs(cpu):
    assert cpu.eval("sum(x)", x=np.zeros(0, np.float32)) == 0.0
    assert "max(abs(x-y))" in redjit.eval.__doc__
    assert redjit.eval.__text_signature__ == "(text, /, **bindings)"
    assert redjit.library_version


def test_complex(cpu):
    # complex64 / complex128 arrays in, complex results out (docs/language.md, Complex numbers)
    z = (rng.standard_normal(5000) + 1j * rng.standard_normal(5000)).astype(np.complex64)
    w = rng.standard_normal(5000) + 1j * rng.standard_normal(5000)
    s, m, a = cpu.eval("sum(z * w), mean(z), sum(abs(z))", z=z, w=w)
    assert isinstance(s, complex) and isinstance(m, complex) and isinstance(a, float)
    assert s == pytest.approx(np.sum(z.astype(np.complex128) * w), rel=1e-5)
    assert m == pytest.approx(np.mean(z.astype(np.complex128)), rel=1e-5)
    A = (rng.standard_normal((6, 40)) + 1j * rng.standard_normal((6, 40)))[:, ::-2]
    r = cpu.eval("sum(A[i,j] * conj(A[i,j])) over j", A=A)
    assert r.dtype == np.complex128 and r.shape == (6,)
    assert np.allclose(r, (A * A.conj()).sum(1)) and np.allclose(r.imag, 0)
    q = cpu.eval("z[i] / w[i]", z=z, w=w)
    assert q.dtype == np.complex128 and np.allclose(q, z / w)
    e = cpu.eval("exp(z[i])", z=z)
    assert e.dtype == np.complex64 and np.allclose(e, np.exp(z), rtol=1e-5, atol=1e-6)
    big = z.astype(">c8")
    assert cpu.eval("sum(z)", z=big) == pytest.approx(np.sum(z.astype(np.complex128)), rel=1e-5)
    with pytest.raises(redjit.TypeError, match="no order"):
        cpu.eval("max(z)", z=z)
    # complex scalars: Python's complex (c128) and NumPy's 0-d complex arrays and scalars
    assert cpu.eval("sum(x) * s", x=np.ones(3), s=1 + 2j) == 3 + 6j
    assert cpu.eval("z[0] + s", z=z, s=np.complex64(1 + 2j)) == pytest.approx(complex(z[0]) + (1 + 2j), rel=1e-6)


def test_scans_against_numpy(cpu):
    x = rng.standard_normal(100_003).astype(np.float32)
    A = rng.standard_normal((30, 500))
    k = np.sort(rng.integers(0, 50, 100_003))
    c, m, e = cpu.eval("cumsum(x), cummax(x), exscan(+, x[i]) over i", x=x)
    assert c.dtype == np.float32 and c.shape == x.shape
    mag = np.cumsum(np.abs(x.astype(np.float64)))
    assert np.all(np.abs(c - np.cumsum(x.astype(np.float64))) <= 1e-5 * mag)
    assert np.array_equal(m, np.maximum.accumulate(x))
    assert e[0] == 0 and np.all(np.abs(e[1:] - np.cumsum(x.astype(np.float64))[:-1]) <= 1e-5 * mag[:-1])
    rows = cpu.eval("cumsum(A[i,j]) over j", A=A)
    assert np.allclose(rows, np.cumsum(A, axis=1), rtol=1e-12, atol=1e-9)
    seg = cpu.eval("cumcount(x[i] == x[i]) by k[i]", x=x, k=k)
    starts = np.r_[0, np.flatnonzero(np.diff(k)) + 1]
    want = np.arange(len(k)) - np.repeat(starts, np.diff(np.r_[starts, len(k)])) + 1
    assert np.array_equal(seg, want)
    # within CSR rows: shaped as the values, each row's running sum at its range; a bad offset
    # is a shape error that points at the scanned index
    ptr = np.r_[0, np.cumsum(rng.integers(0, 40, 300))].astype(np.int32)
    v = rng.standard_normal(int(ptr[-1]))
    got = cpu.eval("cumsum(v[k]) over k in ptr[r]..ptr[r+1]", v=v, ptr=ptr)
    want = np.concatenate([np.cumsum(v[a:b]) for a, b in zip(ptr[:-1], ptr[1:])])
    assert got.shape == v.shape and np.allclose(got, want, rtol=1e-12, atol=1e-9)
    assert cpu.eval("sum(cumsum(v[k]) over k in ptr[r]..ptr[r+1])", v=v, ptr=ptr) == pytest.approx(np.sum(want))
    bad = ptr.copy()
    bad[-1] -= 1
    with pytest.raises(redjit.BindingError, match="the last range ends at"):
        cpu.eval("cumsum(v[k]) over k in ptr[r]..ptr[r+1]", v=v, ptr=bad)
