"""test_fakegpu.py -- the package's device path on the stand-in CUDA driver (tests/fakecuda),
so that it runs in CI, which has no GPU: CTest's `python_fakegpu` puts the stand-in first on
LD_LIBRARY_PATH and sets REDJIT_FAKECUDA=1; anywhere else these tests skip.

No kernel runs on the stand-in, so values are not checked (test_device.py does that on a GPU).
What is checked: device inputs are read in place (no copy, counted by the stand-in), array
results stay in device memory the driver gave out and export both protocols, strided inputs
bind, no device memory leaks over many calls, from several threads, or when a Context goes."""
import ctypes
import gc
import os
import threading

import pytest

import redjit
from conftest import LEAK_CALLS

pytestmark = pytest.mark.skipif(os.environ.get("REDJIT_FAKECUDA") != "1",
                                reason="runs on the stand-in driver (ctest -R python_fakegpu)")


@pytest.fixture(scope="module")
def cu():
    lib = ctypes.CDLL("libcuda.so.1")
    if not hasattr(lib, "fakecuda_count"):
        pytest.skip("libcuda.so.1 is not the stand-in driver")
    lib.fakecuda_count.restype = ctypes.c_longlong
    lib.fakecuda_count.argtypes = [ctypes.c_char_p]
    lib.fakecuda_drop_publish.restype = ctypes.c_longlong
    lib.fakecuda_drop_publish.argtypes = [ctypes.c_int]
    lib.fakecuda_live.restype = ctypes.c_longlong
    lib.fakecuda_live.argtypes = [ctypes.c_int]
    lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t]
    lib.cuMemFree_v2.argtypes = [ctypes.c_ulonglong]
    lib.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_ulonglong]
    assert lib.cuInit(0) == 0
    return lib


@pytest.fixture(scope="module")
def gpu(cu):
    ctx = redjit.Context(device="gpu")
    assert redjit.gpu_available()
    return ctx


def count(cu, name):
    return cu.fakecuda_count(name.encode())


class DevArray:
    """Device memory from the stand-in, described by __cuda_array_interface__ (version 3)."""

    def __init__(self, cu, shape, typestr="<f4", strides=None, nbytes=None):
        self.cu = cu
        self.shape, self.typestr, self.strides = tuple(shape), typestr, strides
        self.stream = None
        n = 1
        for s in shape:
            n *= s
        self.nbytes = nbytes or max(n * int(typestr[2:]), 1)
        p = ctypes.c_ulonglong()
        assert cu.cuMemAlloc_v2(ctypes.byref(p), self.nbytes) == 0
        self.ptr = p.value

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.typestr, "data": (self.ptr, False), "version": 3,
                "strides": self.strides, "stream": self.stream}

    def __del__(self):
        self.cu.cuMemFree_v2(self.ptr)


def is_device_memory(cu, ptr):
    t = ctypes.c_uint(0)
    return cu.cuPointerGetAttribute(ctypes.byref(t), 2, ptr) == 0 and t.value == 2


def test_device_input_is_read_in_place(cu, gpu):
    d = DevArray(cu, (4096,))
    e = gpu.prepare("sum(x)")
    e(x=d)   # compile, warm
    cu.fakecuda_reset()
    r = e(x=d)
    assert isinstance(r, float)
    for copy in ("cuMemcpyHtoD", "cuMemcpyHtoDAsync", "cuMemcpyDtoD"):
        assert count(cu, copy) == 0, copy
    assert count(cu, "cuLaunchKernel") == 1
    assert count(cu, "cuMemAlloc") == 0


def test_scalar_result_comes_back_with_the_run(cu, gpu):
    # a scalar of a device run reaches the host with the fault record, which the run's
    # kernel writes into pinned host memory (rj_publish): no copy and no synchronisation
    d = DevArray(cu, (4096,))
    e = gpu.prepare("sum(x), max(x)")
    e(x=d)
    cu.fakecuda_reset()
    pub0 = cu.fakecuda_drop_publish(0)
    for _ in range(10):
        s, m = e(x=d)
        assert isinstance(s, float) and isinstance(m, float)
    assert cu.fakecuda_drop_publish(0) - pub0 == 10
    assert count(cu, "cuMemcpyDtoH") == 0
    assert count(cu, "cuMemcpyDtoHAsync") == 0
    assert count(cu, "cuStreamSynchronize") == 0
    assert count(cu, "cuCtxSetCurrent") == 10


def test_producer_stream_is_waited_for(cu, gpu):
    d = DevArray(cu, (4096,))
    e = gpu.prepare("sum(x)")
    e(x=d)
    # a producer's own stream (any handle but 1): waited for before the data is read
    d.stream = 0x5000
    cu.fakecuda_reset()
    e(x=d)
    assert count(cu, "cuStreamSynchronize") == 1   # the producer's stream (the run publishes)
    # the legacy default stream (1) is ordered with redjit's launches: no extra wait
    d.stream = 1
    cu.fakecuda_reset()
    e(x=d)
    assert count(cu, "cuStreamSynchronize") == 0


def test_array_result_stays_on_device(cu, gpu):
    d = DevArray(cu, (64, 32))
    r = gpu.eval("sum(A[i,j]) over j", A=d)
    cai = r.__cuda_array_interface__
    assert cai["shape"] == (64,)
    assert cai["typestr"] == "<f4"
    assert is_device_memory(cu, cai["data"][0])
    assert r.__dlpack_device__() == (2, 0)   # kDLCUDA, device 0
    assert type(r.__dlpack__()).__name__ == "PyCapsule"


def test_several_results_and_scalars(cu, gpu):
    d = DevArray(cu, (64, 32))
    s, rows = gpu.eval("sum(A), sum(A[i,j]) over j", A=d)
    assert isinstance(s, float)
    assert rows.__cuda_array_interface__["shape"] == (64,)


def test_strided_device_input(cu, gpu):
    # every other float of a block of 128
    d = DevArray(cu, (64,), strides=(8,), nbytes=128 * 4)
    assert isinstance(gpu.eval("sum(x)", x=d), float)
    with pytest.raises(redjit.BindingError):
        gpu.eval("sum(x)", x=DevArray(cu, (64,), strides=(6,), nbytes=128 * 4))   # not a whole element


def test_no_device_memory_leak(cu, gpu):
    d = DevArray(cu, (64, 32))
    e = gpu.prepare("sum(A[i,j]) over j")
    for _ in range(200):
        e(A=d)
    gc.collect()
    before = cu.fakecuda_live(0)
    for _ in range(LEAK_CALLS // 4):
        r = e(A=d)
        del r
    gc.collect()
    assert cu.fakecuda_live(0) == before


def test_threads(cu, gpu):
    d = DevArray(cu, (4096,))
    e = gpu.prepare("sum(x), max(x)")
    errors = []

    def work():
        try:
            for _ in range(300):
                a, b = e(x=d)
                assert isinstance(a, float) and isinstance(b, float)
        except Exception as exc:   # reported below
            errors.append(exc)

    def round_of_threads():
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        gc.collect()
        return cu.fakecuda_live(0)

    # the first round grows the buffer pool (runs at once need buffers at once); later rounds
    # reuse it: at most 4 runs' buffers more (a workspace and a result each) if they happen
    # to overlap more, where a leak of one buffer a call would add 1,200 a round
    first = round_of_threads()
    later = [round_of_threads() for _ in range(3)]
    assert max(later) <= first + 8, (first, later)
    assert not errors


def test_context_gives_everything_back(cu):
    gc.collect()
    held = [cu.fakecuda_live(k) for k in range(4)]
    ctx = redjit.Context(device="gpu")
    d = DevArray(cu, (64, 32))
    r = ctx.eval("sum(A[i,j]) over i", A=d)
    assert r.__cuda_array_interface__["shape"] == (32,)
    del r, ctx, d
    gc.collect()
    assert [cu.fakecuda_live(k) for k in range(4)] == held


def test_matrix_product_goes_to_cublaslt_unless_blas_false(cu):
    # the stand-in cuBLASLt beside the stand-in driver (tests/fakecuda/fakeblas.c) computes the
    # product on the host from what it is handed, so its values are checked here
    import numpy as np
    lt = ctypes.CDLL("libcublasLt.so.13")
    if not hasattr(lt, "fakeblas_calls"):
        pytest.skip("libcublasLt.so.13 is not the stand-in")
    rng = np.random.default_rng(7)
    a = rng.standard_normal((9, 5)).astype(np.float32)
    b = rng.standard_normal((5, 4)).astype(np.float32)
    A, B = DevArray(cu, a.shape), DevArray(cu, b.shape)
    cu.cuMemcpyHtoD_v2.argtypes = [ctypes.c_ulonglong, ctypes.c_void_p, ctypes.c_size_t]
    cu.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_size_t]
    for d, h in ((A, a), (B, b)):
        assert cu.cuMemcpyHtoD_v2(d.ptr, h.ctypes.data, h.nbytes) == 0
    for blas, handed in ((True, 1), (False, 0)):
        ctx = redjit.Context(device="gpu", blas=blas)
        before = lt.fakeblas_calls()
        C = ctx.eval("C[i,j] = sum(A[i,k]*B[k,j]) over k", A=A, B=B)
        assert lt.fakeblas_calls() - before == handed
        if handed:
            c = np.empty((9, 4), np.float32)
            assert cu.cuMemcpyDtoH_v2(c.ctypes.data, C.__cuda_array_interface__["data"][0], c.nbytes) == 0
            np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
        del C, ctx
