"""redjit: reduction expressions evaluated on a GPU or a multithreaded CPU.

    >>> import numpy as np, redjit
    >>> x = np.arange(5, dtype=np.float32); y = np.ones(5, np.float32)
    >>> redjit.eval("max(abs(x-y))", x=x, y=y)
    3.0
    >>> ctx = redjit.Context(device="auto", strategy="auto")
    >>> e = ctx.prepare("sum(A[i,k]*B[k,j]) over k")     # parsed once
    >>> C = e(A=a, B=b)                                   # a NumPy array
    >>> print(e.explain())

Arrays bind by keyword: NumPy arrays and buffer-protocol objects (host), CuPy,
PyTorch, JAX or Numba arrays through __dlpack__ / __cuda_array_interface__ (read
in place on the GPU); Python int and float bind as scalars that adapt like
literals.  Scalar results come back as Python numbers, several results as a
tuple, array results as NumPy arrays.  Errors raise redjit.Error subclasses
(SyntaxError, LimitError, TypeError, BindingError, IndexError, DeviceError,
UnsupportedError) whose message points at the text with a caret where a place in
it is to blame.  The language is described in
docs/language.md of the repository.
"""
from . import _redjit
from ._redjit import (
    BindingError,
    Context,
    DeviceArray,
    DeviceError,
    Error,
    Expr,
    IndexError,
    LimitError,
    SyntaxError,
    TypeError,
    UnsupportedError,
    default_context,
    eval,
    gpu_available,
    library_version,
    nccl_unique_id,
    prepare,
)

__version__ = "0.1.0"


class Split:
    """This rank's block of an array split across ranks: bind it as
    `e(A=redjit.Split(block, axis=0))` on a Context made with comm= (an mpi4py communicator:
    host arrays, on the CPU) or nccl_id= (NCCL: device arrays, on this rank's GPU).  The blocks of the
    ranks, in rank order, make the whole array along `axis` (any sizes, empty ones too); the
    expression is written for the whole arrays.  Results still indexed by the split axis come
    back as this rank's block (Expr.splits says which), or whole on every rank with
    Context(gather=True).  On a Context without a communicator the block is the whole array."""

    __slots__ = ("block", "axis")

    def __init__(self, block, axis=0):
        if not isinstance(axis, int) or isinstance(axis, bool):
            raise TypeError("Split: axis must be an int, not %s" % type(axis).__name__)
        ndim = getattr(block, "ndim", None)
        if axis < 0 and isinstance(ndim, int):
            axis += ndim
        if axis < 0:
            raise ValueError("Split: axis %d is outside the block's dimensions" % axis)
        self.block = block
        self.axis = axis

    def __repr__(self):
        return "redjit.Split(<%s>, axis=%d)" % (type(self.block).__name__, self.axis)


_redjit._set_split_type(Split)

# The public names, which help(redjit), documentation tools and IDEs list: the exception
# classes are among them.  So `from redjit import *` rebinds SyntaxError, TypeError and
# IndexError to redjit's, after which `except TypeError:` no longer catches Python's own;
# `import redjit` and redjit.TypeError keep the two apart.
__all__ = [
    "BindingError", "Context", "DeviceArray", "DeviceError", "Error", "Expr", "IndexError",
    "LimitError", "SyntaxError", "TypeError", "UnsupportedError", "default_context", "eval",
    "gpu_available", "library_version", "nccl_unique_id", "prepare", "Split",
]
