"""test_errors.py -- every failure raises a redjit.Error subclass (also the matching
builtin) whose message is the library's caret message."""
import sys

import numpy as np
import pytest

import redjit


def caret(msg):
    lines = str(msg).splitlines()
    return len(lines) >= 3 and lines[-1].strip().startswith("^")


def test_syntax_error(cpu):
    with pytest.raises(redjit.SyntaxError) as ei:
        cpu.prepare("max(abs(x - ")
    err = ei.value
    assert isinstance(err, redjit.Error) and isinstance(err, ValueError)
    assert err.status == 3 and err.reason == "syntax error"
    assert str(err).startswith("1:") and caret(err)
    with pytest.raises(redjit.SyntaxError):
        redjit.eval("sum(x))", x=np.ones(3))


def test_unknown_name(cpu):
    with pytest.raises(redjit.BindingError) as ei:
        cpu.eval("max(abs(x - yy))", x=np.ones(3))
    assert "unknown name 'yy'" in str(ei.value) and caret(ei.value)
    assert str(ei.value).splitlines()[-1].strip() == "^~"


def test_type_error(cpu):
    with pytest.raises(redjit.TypeError) as ei:
        cpu.eval("sum(x & 1)", x=np.ones(3))
    assert isinstance(ei.value, TypeError) and caret(ei.value)


def test_shape_error(cpu):
    with pytest.raises(redjit.BindingError) as ei:
        cpu.eval("sum(x*y)", x=np.ones(10), y=np.ones(12))
    assert "10" in str(ei.value) and "12" in str(ei.value)


def test_index_errors(cpu):
    with pytest.raises(redjit.IndexError) as ei:
        cpu.eval("sum(x[idx[i]])", x=np.ones(4), idx=np.array([0, 1, 9], np.int64))
    assert isinstance(ei.value, IndexError) and "x" in str(ei.value)
    with pytest.raises(redjit.IndexError):
        cpu.eval("argmin(x)", x=np.zeros(0))


def test_binding_errors(cpu):
    with pytest.raises(redjit.BindingError, match="format 'Zg'"):   # complex256
        cpu.eval("sum(x)", x=np.ones(3, np.clongdouble))
    with pytest.raises(redjit.BindingError, match="not a multiple"):
        x = np.lib.stride_tricks.as_strided(np.zeros(16, np.float32), shape=(3,), strides=(6,))
        cpu.eval("sum(x)", x=x)
    with pytest.raises(redjit.BindingError, match="neither a number"):
        cpu.eval("sum(x)", x=[1.0, 2.0])
    with pytest.raises(TypeError, match="by name"):
        cpu.prepare("sum(x)")(np.ones(3))


def test_limit_errors(cpu):
    # a limit of the implementation is a LimitError (a ValueError, as SyntaxError is),
    # with a caret where a place in the text is to blame
    with pytest.raises(redjit.LimitError) as ei:
        cpu.prepare("(" * 600 + "x" + ")" * 600)
    err = ei.value
    assert not isinstance(err, redjit.SyntaxError) and isinstance(err, ValueError)
    assert err.status == 11 and err.reason == "implementation limit exceeded"
    assert str(err).startswith("1:257: ") and "nested too deeply" in str(err) and caret(err)
    assert cpu.prepare("+".join(["x"] * 2000))(x=1.0) == 2000.0   # a long chain is not nesting
    with pytest.raises(redjit.LimitError) as ei:
        cpu.prepare("+".join(["x"] * 3000))(x=1.0)
    assert "the limit is 2048 operations in a chain" in str(ei.value) and caret(ei.value)
    # at run time, the bound sizes are to blame, not the text: no position, no caret
    e = cpu.prepare("sum(x[i] * y[j] * z[k])")
    x = np.broadcast_to(np.float64(1), (1 << 20,))
    with pytest.raises(redjit.LimitError) as ei:
        e(x=x, y=x, z=x)
    assert str(ei.value).startswith("reduction domain too large") and not caret(ei.value)
    assert e(x=x[:4], y=x[:5], z=x[:6]) == 120.0                  # the same Expr goes on


def test_exception_classes_are_public():
    errors = {n for n, v in vars(redjit).items() if isinstance(v, type) and issubclass(v, redjit.Error)}
    assert errors == {"Error", "SyntaxError", "LimitError", "TypeError", "BindingError", "IndexError",
                      "DeviceError", "UnsupportedError"}
    assert errors <= set(redjit.__all__)
    assert all(hasattr(redjit, n) for n in redjit.__all__)
    import pydoc
    text = pydoc.render_doc(redjit, renderer=pydoc.plaintext)
    for n in errors:
        assert f"class {n}(" in text, n                          # help(redjit) lists it


def test_device_errors():
    if redjit.gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(redjit.DeviceError) as ei:
        redjit.Context(device="gpu").eval("sum(x)", x=np.ones(3))
    assert isinstance(ei.value, RuntimeError) and str(ei.value)

    class FakeDevice:
        __cuda_array_interface__ = {"shape": (3,), "typestr": "<f4", "data": (1 << 20, True),
                                    "version": 3, "strides": None, "stream": None}

    d = redjit._redjit._describe(FakeDevice())
    assert d["memory"] == "cuda" and d["data"] == 1 << 20
    # the interface dict is released after each binding (no reference per call)
    cai = FakeDevice.__cuda_array_interface__
    for _ in range(10):
        redjit._redjit._describe(FakeDevice())
    refs = sys.getrefcount(cai)
    for _ in range(1000):
        redjit._redjit._describe(FakeDevice())
    assert sys.getrefcount(cai) == refs
    with pytest.raises(redjit.DeviceError):
        redjit.eval("sum(x)", x=FakeDevice())


def test_errors_leave_expr_usable(cpu):
    e = cpu.prepare("sum(x[idx[i]])")
    with pytest.raises(redjit.IndexError):
        e(x=np.ones(4), idx=np.array([7], np.int64))
    assert e(x=np.ones(4), idx=np.array([1, 2], np.int64)) == 2.0
