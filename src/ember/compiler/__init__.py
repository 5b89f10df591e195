"""``torch.compile`` and ``torch.compiler``, run eagerly.

ember has no graph compiler yet. ``ember.compile`` checks its arguments as PyTorch does and
returns a callable that runs the original eagerly: a module comes back wrapped in
``OptimizedModule`` (so checkpoints keep PyTorch's ``_orig_mod.`` key prefix), a function
comes back as itself. Programs written for ``torch.compile`` therefore run unchanged, at
eager speed. ``is_compiling()`` is always False.
"""

import functools

from ember.compiler import config  # noqa: F401  (torch.compiler.config)

__all__ = ["compile", "assume_constant_result", "reset", "allow_in_graph", "list_backends",
           "disable", "set_stance", "cudagraph_mark_step_begin", "is_compiling",
           "is_dynamo_compiling", "is_exporting", "nested_compile_region",
           "set_default_backend", "get_default_backend"]

MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
# the backends torch.compile names; "eager" and the aot_* debugging ones are accepted too
BACKENDS = ("cudagraphs", "inductor", "openxla", "tvm")
_DEBUG_BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition")
_default_backend = ["inductor"]


class InvalidBackend(RuntimeError):
    """A backend name ``compile`` does not know."""

    def __init__(self, name):
        super().__init__(f"Invalid backend: {name!r}, see `torch._dynamo.list_backends()` for "
                         "available backends.")


def _check(model, backend, mode, options):
    if model is not None and not callable(model):
        raise AssertionError(f"A callable function is expected, but {type(model)} is provided.")
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time.")
    if mode is not None and mode not in MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(MODES)}")
    if isinstance(backend, str) and backend not in BACKENDS + _DEBUG_BACKENDS:
        raise InvalidBackend(backend)


def compile(model=None, *, fullgraph=False, dynamic=None, backend=None, mode=None,
            options=None, name=None, disable=False, **kwargs):
    """``model`` made ready to run: eagerly, since ember has no compiler yet (see the module
    docstring). Without ``model``, a decorator."""
    backend = _default_backend[0] if backend is None else backend
    _check(model, backend, mode, options)
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic,
                                 backend=backend, mode=mode, options=options, name=name,
                                 disable=disable, **kwargs)
    from ember.nn import Module
    if isinstance(model, Module):
        from ember._dynamo.eval_frame import OptimizedModule
        return OptimizedModule(model)
    return getattr(model, "_ember_compiled", model)    # (flex_attention's: no eager warning)


def disable(fn=None, recursive=True, *, reason=None):
    """Exclude ``fn`` from compilation: everything runs eagerly already, so ``fn`` itself."""
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    return fn


def _returns_fn(fn=None, *args, **kwargs):
    return fn


assume_constant_result = allow_in_graph = nested_compile_region = _returns_fn


def reset():
    """Forget compiled code: there is none."""


def list_backends(exclude_tags=("debug", "experimental")):
    """The names ``compile`` accepts as ``backend`` (without the debugging ones)."""
    return sorted(BACKENDS)


def set_default_backend(backend):
    """The backend ``compile`` uses when given none."""
    _check(None, backend, None, None)
    _default_backend[0] = backend


def get_default_backend():
    """The backend ``compile`` uses when given none."""
    return _default_backend[0]


def set_stance(stance="default", *, skip_guard_eval_unsafe=False, force_backend=None):
    """Accepted for compatibility: with no compiler, every stance runs eagerly."""
    stances = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile",
               "eager_then_compile", "aot_eager_then_compile")
    if stance not in stances:
        raise RuntimeError(f"invalid torch.compile stance '{stance}'")


def cudagraph_mark_step_begin():
    """Mark the start of a training step for CUDA graphs: none are recorded."""


def is_compiling():
    """Whether the caller runs inside compiled code: never in ember."""
    return False


is_dynamo_compiling = is_exporting = is_compiling
