"""test_device.py -- device arrays from CuPy and PyTorch, read in place on the GPU:
zero copy checked by pointer, strides and non-contiguous views, float16 and bfloat16,
producer streams, device-resident results taken back without a copy, threads.  Skips
where CuPy / PyTorch or a GPU is missing."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import redjit

describe = redjit._redjit._describe


def have_gpu():
    try:
        return redjit.gpu_available()
    except Exception:
        return False


pytestmark = pytest.mark.skipif(not have_gpu(), reason="no usable GPU")


@pytest.fixture(scope="module")
def cp():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:
        pytest.skip("CuPy sees no GPU")
    return cupy


@pytest.fixture(scope="module")
def torch():
    t = pytest.importorskip("torch")
    if not t.cuda.is_available():
        pytest.skip("PyTorch sees no GPU")
    return t


@pytest.fixture(scope="module")
def gpu():
    return redjit.Context(device="gpu")


CUPY_DTYPES = ["float16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "int64", "uint32",
               "uint64", "bool"]


@pytest.mark.parametrize("dtype", CUPY_DTYPES)
def test_cupy_dtypes(cp, gpu, dtype):
    h = (np.random.default_rng(1).random(4097) * 50).astype(dtype)
    d = cp.asarray(h)
    info = describe(d)
    assert info["memory"] == "cuda" and info["data"] == d.data.ptr      # zero copy
    s, hi = gpu.eval("sum(f64(x)), max(x)", x=d)
    assert s == pytest.approx(h.astype(np.float64).sum(), rel=1e-6)
    assert hi == pytest.approx(float(h.max()))


@pytest.mark.parametrize("view", ["step", "reverse", "transpose", "slice2d"])
def test_cupy_views(cp, gpu, view):
    base = cp.asarray(np.random.default_rng(2).standard_normal((64, 48)))
    a = {"step": base[:, ::3], "reverse": base[::-1, ::-2], "transpose": base.T,
         "slice2d": base[3:50:2, 1::5]}[view]
    info = describe(a)
    assert info["data"] == a.data.ptr
    assert info["strides"] == tuple(s // a.itemsize for s in a.strides)
    want = cp.asnumpy(a).sum(1)
    r = gpu.eval("sum(A[i,j]) over j", A=a)
    got = cp.from_dlpack(r) if isinstance(r, redjit.DeviceArray) else cp.asarray(r)
    assert np.allclose(cp.asnumpy(got), want)


def test_cupy_cai_only(cp, gpu):
    a = cp.arange(1000, dtype=cp.float32)

    class CAIOnly:
        __cuda_array_interface__ = a.__cuda_array_interface__

    info = describe(CAIOnly())
    assert info["memory"] == "cuda" and info["data"] == a.data.ptr
    assert gpu.eval("sum(x)", x=CAIOnly()) == pytest.approx(499500.0)


def test_cupy_stream(cp, gpu):
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.ones(1 << 24, cp.float32)
        x *= 3                                     # queued on s
        r = gpu.eval("sum(f64(x))", x=x)           # __dlpack__(stream=1) orders it
    assert r == 3.0 * (1 << 24)


def test_device_results_zero_copy(cp, torch, gpu):
    a = cp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    r = gpu.eval("sum(A[i,j]) over j", A=a)
    assert isinstance(r, redjit.DeviceArray), type(r)
    c = cp.from_dlpack(r)
    assert c.data.ptr == r.ptr and cp.asnumpy(c).tolist() == [6.0, 22.0, 38.0]
    t = torch.from_dlpack(r)
    assert t.data_ptr() == r.ptr and t.device.type == "cuda"
    assert r.__cuda_array_interface__["data"][0] == r.ptr
    assert np.asarray(r).tolist() == [6.0, 22.0, 38.0]
    del c, t, r


def test_torch_dtypes_and_views(torch, gpu):
    for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32, torch.int64, torch.bool):
        t = (torch.rand(3000, device="cuda") * 10).to(dt)
        assert describe(t)["data"] == t.data_ptr()
        got = gpu.eval("sum(f64(x))", x=t)
        assert got == pytest.approx(t.double().sum().item(), rel=1e-5), dt
    m = torch.randn(40, 30, device="cuda")
    for v in (m.t(), m[::2, 1::3], m[5:, :7]):
        info = describe(v)
        assert info["data"] == v.data_ptr() and info["strides"] == tuple(v.stride())
        r = gpu.eval("sum(A[i,j]) over j", A=v)
        got = torch.from_dlpack(r) if isinstance(r, redjit.DeviceArray) else torch.as_tensor(r)
        assert torch.allclose(got.cpu(), v.sum(1).cpu(), atol=1e-4)


def test_device_complex(cp, torch, gpu):
    # complex device arrays in place, complex results left on the device
    rng = np.random.default_rng(4)
    for dt in (np.complex64, np.complex128):
        h = (rng.standard_normal((50, 301)) + 1j * rng.standard_normal((50, 301))).astype(dt)
        d = cp.asarray(h)
        assert describe(d)["data"] == d.data.ptr
        s = gpu.eval("sum(z)", z=d)
        assert isinstance(s, complex) and s == pytest.approx(h.astype(np.complex128).sum(), rel=1e-4)
        r = gpu.eval("sum(A[i,j] * conj(A[i,j])) over j", A=d[:, ::2])
        got = cp.asnumpy(cp.from_dlpack(r)) if isinstance(r, redjit.DeviceArray) else np.asarray(r)
        assert got.dtype == dt and np.allclose(got, (np.abs(h[:, ::2]) ** 2).sum(1), rtol=1e-4)
    t = torch.randn(4000, dtype=torch.complex64, device="cuda")
    assert gpu.eval("sum(abs(z))", z=t) == pytest.approx(t.abs().double().sum().item(), rel=1e-4)
    for dt in (torch.int8, torch.uint8, torch.int16):
        t = torch.randint(0, 100, (3000,), device="cuda").to(dt)
        assert gpu.eval("sum(x)", x=t) == t.long().sum().item(), dt


def test_device_threads(cp, gpu):
    xs = [cp.random.standard_normal(100_000, dtype=cp.float32) for _ in range(8)]
    e = gpu.prepare("max(abs(x))")
    want = [float(cp.abs(x).max()) for x in xs]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda k: e(x=xs[k % 8]), range(400)))
    assert got == pytest.approx([want[k % 8] for k in range(400)])


def test_device_errors(cp, gpu):
    with pytest.raises(redjit.IndexError):
        gpu.eval("sum(x[idx[i]])", x=cp.ones(4), idx=cp.asarray([0, 9], dtype=cp.int64))
    with pytest.raises(redjit.BindingError):
        redjit.Context(device="cpu").eval("sum(x)", x=cp.ones(4))


def test_device_no_leak(cp, gpu):
    import sys
    x = cp.ones(1024, cp.float32)
    e = gpu.prepare("sum(x)")
    for _ in range(200):
        e(x=x)
    refs = sys.getrefcount(x)
    pool = gpu.cache_stats()["pool_in_use"]
    for _ in range(5000):
        e(x=x)
        gpu.eval("x[i] * 2", x=x)
    assert sys.getrefcount(x) == refs
    assert gpu.cache_stats()["pool_in_use"] <= pool + (1 << 20)
