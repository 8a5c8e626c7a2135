# Type hints for the redjit package (the extension module redjit._redjit).
import builtins
from typing import Any, Literal, Optional, Union

__version__: str
library_version: str

Device = Literal["auto", "cpu", "gpu"]
Strategy = Literal["auto", "tree", "sequential", "persistent", "segmented"]

# What a result can be: a Python number, a NumPy array (a memoryview without NumPy),
# or a tuple of them for several results.
Result = Union[int, float, bool, Any, tuple[Any, ...]]
# What a binding can be: int, float, bool, a NumPy array or scalar, any object with the
# buffer protocol, __dlpack__ or __cuda_array_interface__.
Binding = Any

class Error(Exception):
    """Base class of every redjit error; str(err) is the caret message."""
    status: int
    reason: str

class SyntaxError(Error, builtins.ValueError):
    """The expression does not parse."""

class LimitError(Error, builtins.ValueError):
    """An implementation limit: nesting or size of the text, or a domain or result too large."""

class TypeError(Error, builtins.TypeError):
    """A type error in the expression."""

class BindingError(Error, builtins.ValueError):
    """Unknown or unbound name, unsupported dtype or layout, shape conflict."""

class IndexError(Error, builtins.IndexError):
    """Subscript out of range, argmin/argmax of nothing, bad keys for `by`."""

class DeviceError(Error, builtins.RuntimeError):
    """No usable GPU, a CUDA driver error, or NVRTC rejected the generated code."""

class UnsupportedError(Error, builtins.NotImplementedError):
    """Valid, but not supported by this backend yet (a 0-d array in device memory, ...)."""

class Expr:
    """A prepared expression; call it with the bindings as keyword arguments."""
    @property
    def text(self) -> str: ...
    @property
    def context(self) -> Context: ...
    @property
    def splits(self) -> Optional[tuple[tuple[int, int, int], ...]]: ...
    def __call__(self, **bindings: Binding) -> Result: ...
    def explain(self, **bindings: Binding) -> str: ...

class Split:
    """This rank's block of an array split across ranks (MPI or NCCL) along `axis`."""
    block: Any
    axis: int
    def __init__(self, block: Any, axis: int = 0) -> None: ...

class Context:
    """Options and caches; usable from several threads at once."""
    device: Device
    strategy: Strategy
    threads: int
    cache_mb: int
    @property
    def ranks(self) -> tuple[int, int]: ...
    def __init__(self, device: Device = "auto", strategy: Strategy = "auto", threads: int = 0,
                 comm: Any = None, gather: bool = False, *, nccl_id: Optional[bytes] = None,
                 rank: int = -1, nranks: int = 0, nccl_comm: Optional[int] = None) -> None: ...
    def prepare(self, text: str, /) -> Expr: ...
    def eval(self, text: str, /, **bindings: Binding) -> Result: ...
    def gpu_available(self) -> bool: ...
    def gpu_error(self) -> Optional[str]: ...
    def cache_stats(self) -> dict[str, Union[int, float]]: ...
    def cache_clear(self) -> int: ...

def eval(text: str, /, **bindings: Binding) -> Result: ...
def prepare(text: str, /) -> Expr: ...
def gpu_available() -> bool: ...
def nccl_unique_id() -> bytes: ...
def default_context() -> Context: ...
