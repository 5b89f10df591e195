"""``torch.jit``, run eagerly.

ember has no TorchScript. Programs and libraries still call ``torch.jit.script`` on small
functions, decorate methods with ``@torch.jit.ignore`` and branch on
``torch.jit.is_scripting()``: here ``script`` and ``trace`` return what they are given (a
traced module still runs its example inputs once, as tracing does, so shape errors surface
at the same place), the decorators leave functions as they are, and ``is_scripting`` and
``is_tracing`` are False, as in eager PyTorch. Saving and loading TorchScript archives is
not possible and says so.
"""

import builtins
import contextlib
import types
import typing
import warnings
from concurrent.futures import Future as _Future

from ember.nn.modules.module import Module as _Module

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "interface",
           "is_scripting", "is_tracing", "annotate", "Attribute", "Final", "fork", "wait",
           "Future", "isinstance", "freeze", "optimize_for_inference", "save", "load",
           "ScriptModule", "ScriptFunction", "TracerWarning", "Error", "script_if_tracing",
           "optimized_execution", "fuser", "set_fusion_strategy", "onednn_fusion_enabled",
           "enable_onednn_fusion", "script_method", "RecursiveScriptModule", "TracedModule",
           "TopLevelTracedModule", "ScriptWarning", "strict_fusion"]

Final = typing.Final


class TracerWarning(Warning):
    """What tracing warns about (ember traces nothing, so it never warns)."""


class Error(RuntimeError):
    """TorchScript's error type (``torch.jit.Error``)."""


class ScriptModule(_Module):
    """TorchScript's module type. Classes deriving from it (with ``@script_method`` methods,
    as RWKV's and older code do) are ordinary eager modules here; ``script`` returns other
    modules as they are, so those are not ScriptModules, as eager PyTorch modules are not."""


class RecursiveScriptModule(ScriptModule):
    """What ``script`` makes of a module in PyTorch; ember never makes one."""


class TracedModule(ScriptModule):
    """What ``trace`` makes of a module's submodules in PyTorch; ember never makes one."""


class TopLevelTracedModule(TracedModule):
    """What ``trace`` makes of a module in PyTorch; ember never makes one."""


class ScriptWarning(Warning):
    """TorchScript's warning type."""


class strict_fusion:                        # noqa: N801  (PyTorch's name)
    """Demand that TorchScript fuse this block: only meaningful in script mode, which ember
    never is, so it warns and does nothing."""

    def __init__(self):
        warnings.warn("Only works in script mode", UserWarning, stacklevel=2)

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return None


class ScriptFunction:
    """TorchScript's function type; see ``ScriptModule``."""


class Attribute(typing.NamedTuple):
    """A module attribute's value with its TorchScript type (the value is what is used)."""

    value: typing.Any
    type: typing.Any


_COMPILE = "Please use `torch.compile` instead."


def _deprecated(name, advice="Please switch to `torch.compile` or `torch.export`."):
    # PyTorch 2.13 deprecates TorchScript: each entry point warns on every call, from
    # inside the library (so Python's default filters hide it, as they hide PyTorch's)
    warnings.warn(f"`torch.jit.{name}` is deprecated. {advice}", DeprecationWarning,
                  stacklevel=2)


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """``obj`` itself: ember runs functions and modules eagerly."""
    _deprecated("script")
    return obj


def script_method(fn):
    """Mark a ScriptModule's method for compilation: ``fn`` as it is, run eagerly."""
    _deprecated("script_method")
    return fn


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None,
          check_tolerance=1e-5, strict=True, _force_outplace=False, _module_class=None,
          _compilation_unit=None, example_kwarg_inputs=None, _store_inputs=True):
    """``func`` itself, after one call on the example inputs (which is what tracing runs)."""
    from ember.nn import Module
    _deprecated("trace")
    if example_inputs is None and example_kwarg_inputs is None:
        raise RuntimeError("example_kwarg_inputs and example_inputs cannot both be None")
    if builtins.isinstance(func, Module):   # PyTorch traces a module's forward by trace_module
        _deprecated("trace_method")
    if check_trace:                         # and checks a trace by tracing again
        _deprecated("trace_method" if builtins.isinstance(func, Module) else "trace")
    args = example_inputs if builtins.isinstance(example_inputs, tuple) else \
        () if example_inputs is None else (example_inputs,)
    func(*args, **(example_kwarg_inputs or {}))
    return func


def trace_module(mod, inputs, optimize=None, check_trace=True, *args, **kwargs):
    """``mod`` itself, after calling each named method on its example inputs."""
    _deprecated("trace_method")
    if check_trace:                         # (PyTorch checks a trace by tracing again)
        _deprecated("trace_method")
    for name, example in inputs.items():
        getattr(mod, name)(*(example if builtins.isinstance(example, tuple) else (example,)))
    return mod


def ignore(drop=False, **kwargs):
    """Leave a function out of scripting: here, the function as it is (also as
    ``@ignore(drop=True)``)."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    """Mark a method as never called from scripted code: the method as it is."""
    return fn


def export(fn):
    """Mark a method as compiled with its module: the method as it is."""
    return fn


def interface(obj):
    """Declare a TorchScript interface: the class as it is."""
    _deprecated("interface", _COMPILE)
    return obj


def script_if_tracing(fn):
    """Compile ``fn`` when tracing: ``fn`` as it is (ember never traces)."""
    return fn


@contextlib.contextmanager
def optimized_execution(should_optimize):
    """Switch TorchScript's graph optimizations in this block: nothing to switch here."""
    yield


_FUSERS = ("fuser0", "fuser1", "fuser2", "fuser3", "none")


@contextlib.contextmanager
def fuser(name):
    """Choose TorchScript's fusion backend in this block (checked, then ignored)."""
    if name not in _FUSERS:
        raise Exception(f"unrecognized fuser option (name: {name})")   # PyTorch's type
    yield


_FUSION_STRATEGY = [[("STATIC", 2), ("DYNAMIC", 10)]]


def set_fusion_strategy(strategy):
    """Set TorchScript's fusion specializations; returns the previous strategy."""
    _deprecated("set_fusion_strategy", _COMPILE)
    for kind, _ in strategy:
        if kind not in ("STATIC", "DYNAMIC"):
            raise ValueError(f"FusionBehavior only supported 'STATIC' or 'DYNAMIC', got: {kind}")
    previous, _FUSION_STRATEGY[0] = _FUSION_STRATEGY[0], [tuple(s) for s in strategy]
    return previous


def enable_onednn_fusion(enabled):
    """Switch TorchScript's oneDNN fusion (ember has none to switch)."""


def onednn_fusion_enabled():
    """Whether TorchScript's oneDNN fusion is on: never in ember."""
    return False


def is_scripting():
    """Whether the code runs as TorchScript: never in ember."""
    return False


def is_tracing():
    """Whether the code runs under ``torch.jit.trace``: never in ember."""
    return False


def annotate(the_type, the_value):
    """``the_value`` (the type is for TorchScript's compiler)."""
    return the_value


class Future(_Future):
    """The result of ``fork``: ``wait()`` returns it."""

    def wait(self):
        """The forked call's result (raises what it raised)."""
        return self.result()


def fork(func, *args, **kwargs):
    """Call ``func`` now and wrap its result in a ``Future`` (TorchScript would run it
    asynchronously; eagerly, PyTorch also runs it at once)."""
    _deprecated("fork", _COMPILE)
    future = Future()
    try:
        future.set_result(func(*args, **kwargs))
    except Exception as e:             # noqa: BLE001  (handed to whoever waits)
        future.set_exception(e)
    return future


def wait(future):
    """The result of a ``fork``."""
    _deprecated("wait", _COMPILE)
    return future.wait()


_BARE = {list: "list", tuple: "tuple", typing.List: "List", typing.Tuple: "Tuple",
         typing.Optional: "Optional"}
_BARE_MAPS = {dict: "dict", typing.Dict: "Dict"}


def _check_contained(target_type):
    # PyTorch refuses a container type without its element types
    try:
        name, pair = _BARE.get(target_type), _BARE_MAPS.get(target_type)
    except TypeError:                   # an unhashable target: not a bare container
        return
    if name is not None:
        raise RuntimeError(f"Attempted to use {name} without a contained type. Please add a "
                           f"contained type, e.g. {name}[int]")
    if pair is not None:
        raise RuntimeError(f"Attempted to use {pair} without contained types. Please add "
                           f"contained type, e.g. {pair}[int, int]")


def isinstance(obj, target_type):       # noqa: A001  (PyTorch's name)
    """Whether ``obj`` is of ``target_type``, which may be a parametrized container type
    (``List[int]``, ``Dict[str, Tensor]``, ``Optional[int]``, ``Tuple[int, str]``)."""
    _check_contained(target_type)
    origin = typing.get_origin(target_type)
    if origin is None:
        return target_type is typing.Any or builtins.isinstance(obj, target_type)
    params = typing.get_args(target_type)
    if origin in (typing.Union, types.UnionType):
        return any(isinstance(obj, p) for p in params)
    if not builtins.isinstance(obj, origin):
        return False
    if origin in (list, set, frozenset):
        return all(isinstance(x, params[0]) for x in obj) if params else True
    if origin is dict:
        return all(isinstance(k, params[0]) and isinstance(v, params[1])
                   for k, v in obj.items()) if params else True
    if origin is tuple:
        if len(params) == 2 and params[1] is Ellipsis:
            return all(isinstance(x, params[0]) for x in obj)
        return len(obj) == len(params) and all(isinstance(x, p) for x, p in zip(obj, params))
    return True


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """``mod`` itself (freezing inlines a ScriptModule's attributes; ember has none)."""
    _deprecated("freeze", _COMPILE)
    return mod


def optimize_for_inference(mod, other_methods=None):
    """``mod`` itself, in eval mode."""
    _deprecated("optimize_for_inference", _COMPILE)
    mod = freeze(mod)               # (as PyTorch's, which freezes first: its warning too)
    return mod.eval() if hasattr(mod, "eval") else mod


def _no_torchscript(what):
    return RuntimeError(f"{what}: ember has no TorchScript, so it cannot write or read "
                        f"TorchScript archives; save the state_dict with ember.save instead")


def save(m, f, _extra_files=None):
    """Not possible: ember has no TorchScript."""
    _deprecated("save", "Please switch to `torch.export`.")
    raise _no_torchscript("jit.save")


def load(f, map_location=None, _extra_files=None, _restore_shapes=False):
    """Not possible: ember has no TorchScript."""
    _deprecated("load", "Please switch to `torch.export`.")
    raise _no_torchscript("jit.load")
