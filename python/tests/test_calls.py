"""test_calls.py -- the calling conventions: Expr calls, eval and explain take their keywords
in the vectorcall convention (a tuple of names beside the values, no dict).  An Expr keeps the
last call's names and skips clearing its bindings when a call binds the same names; these
tests bind the same names from one call site, from dicts made anew in another order, from
names built at run time (not interned), and fewer or other names, and check every result
against NumPy.  Argument errors of eval and explain are checked as well."""
import sys

import numpy as np
import pytest

import redjit


@pytest.fixture()
def data():
    rng = np.random.default_rng(20261125)
    return rng.uniform(-1.0, 1.0, 257), rng.uniform(-1.0, 1.0, 257)


def test_same_names_from_one_call_site(cpu, data):
    x, y = data
    e = cpu.prepare("sum(x*y) + t")
    for i in range(50):
        got = e(x=x, y=y, t=i)            # one call site: one tuple of names every time
        assert got == pytest.approx(float(np.dot(x, y)) + i, rel=1e-12, abs=1e-12)
        x, y = y, x[::-1].copy()          # new arrays under the same names


def test_same_names_from_new_dicts_in_other_orders(cpu, data):
    x, y = data
    e = cpu.prepare("sum(x - 2*y) * t")
    want = float(np.sum(x - 2 * y))
    orders = [("x", "y", "t"), ("t", "y", "x"), ("y", "t", "x")]
    for i in range(30):
        vals = {"x": x, "y": y, "t": float(i + 1)}
        kw = {k: vals[k] for k in orders[i % 3]}   # a new dict, so a new tuple of names
        assert e(**kw) == pytest.approx(want * (i + 1), rel=1e-12, abs=1e-12)


def test_names_made_at_run_time(cpu, data):
    # names joined at run time are equal strings but other objects than the interned
    # names of an earlier call: both must be seen as the same names
    x, y = data
    e = cpu.prepare("max(x) - min(y)")
    want = float(x.max() - y.min())
    assert e(x=x, y=y) == want
    for _ in range(5):
        kw = {"".join(["x"]): y, "".join(["y"]): x}   # swapped on purpose
        assert e(**kw) == float(y.max() - x.min())
        assert e(x=x, y=y) == want


def test_fewer_or_other_names_forget_the_old_bindings(cpu, data):
    x, y = data
    e = cpu.prepare("sum(x) + t")
    assert e(x=x, t=1.0) == pytest.approx(float(x.sum()) + 1.0)
    with pytest.raises(redjit.BindingError, match="t"):
        e(x=x)                            # t is not kept from the call before
    with pytest.raises(redjit.BindingError):
        e(x=x, u=1.0)                     # as many names, one of them other
    with pytest.raises(redjit.BindingError, match="t"):
        e(**{"x": x, "".join(["u"]): 1.0})
    assert e(t=2.0, x=y) == pytest.approx(float(y.sum()) + 2.0)
    with pytest.raises(redjit.BindingError):
        e()                               # no names at all
    assert e(x=x, t=3.0) == pytest.approx(float(x.sum()) + 3.0)


def test_a_failed_binding_leaves_no_half_binding(cpu, data):
    x, y = data
    e = cpu.prepare("sum(x*y)")
    assert e(x=x, y=y) == pytest.approx(float(np.dot(x, y)))
    with pytest.raises(redjit.BindingError):
        e(x=x, y="not an array")          # x is bound again, y fails
    with pytest.raises(redjit.BindingError):
        e(x=y)                            # y must not survive from before the failure
    assert e(x=y, y=x) == pytest.approx(float(np.dot(x, y)))


def test_references_are_kept_straight(cpu, data):
    x, y = data
    e = cpu.prepare("sum(x*y) + t")
    t = 2.5
    before = (sys.getrefcount(x), sys.getrefcount(y), sys.getrefcount(t), sys.getrefcount(e))
    for i in range(2000):
        e(x=x, y=y, t=t)
        if i % 2:
            e(**{"t": t, "y": y, "x": x})
    with pytest.raises(redjit.BindingError):
        e(x=x, y=y)
    assert (sys.getrefcount(x), sys.getrefcount(y), sys.getrefcount(t), sys.getrefcount(e)) == before


@pytest.mark.parametrize("evaluate", ["module", "context"])
def test_eval_argument_errors(cpu, evaluate):
    ev = redjit.eval if evaluate == "module" else cpu.eval
    x = np.ones(3)
    with pytest.raises(TypeError, match="positional"):
        ev()
    with pytest.raises(TypeError, match="positional"):
        ev("sum(x)", x)
    with pytest.raises(TypeError, match="str, not bytes"):
        ev(b"sum(x)", x=x)
    with pytest.raises(ValueError, match="NUL"):
        ev("sum(x)\0junk", x=x)
    assert ev("sum(x)", x=x) == 3.0       # and the context goes on
    assert ev("sum(x) + text", x=x, text=1.0) == 4.0   # a binding may be called text


def test_explain_argument_errors(cpu):
    e = cpu.prepare("sum(x)")
    with pytest.raises(TypeError, match="by name"):
        e.explain(np.ones(3))
    with pytest.raises(TypeError, match="by name"):
        e(np.ones(3))
    assert "backend: cpu" in e.explain(x=np.ones(3))
    assert e(x=np.ones(3)) == 3.0
