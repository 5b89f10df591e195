"""``torch._C``, as far as programs written against PyTorch reach into it for the
``__torch_function__`` protocol (the extending notes' ``torch._C._disabled_torch_function_impl``)
and for the two calls torchvision-style code makes before its ops (``_log_api_usage_once``,
``_get_tracing_state``).

ember has no C extension: everything else of PyTorch's ``torch._C`` is absent.
"""

from ember.overrides import (DisableTorchFunction, DisableTorchFunctionSubclass,  # noqa: F401
                             _disabled_torch_function_impl, _get_function_stack_at,
                             _is_torch_function_mode_enabled, _len_torch_function_stack)
from ember.overrides._modes import _pop_mode as _pop_torch_function_stack  # noqa: F401
from ember.overrides._modes import _push_mode as _push_on_torch_function_stack  # noqa: F401

__all__ = []


def _log_api_usage_once(event):
    """Record one use of an API (PyTorch logs it for its telemetry; ember records nothing)."""
    return None


def _get_tracing_state():
    """The JIT tracer's state while ``torch.jit.trace`` traces: None, as ember never traces."""
    return None
