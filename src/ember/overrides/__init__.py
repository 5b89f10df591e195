"""``torch.overrides``: the ``__torch_function__`` protocol and torch function modes.

Tensor subclasses and tensor-likes override ember functions with a ``__torch_function__``
(_protocol.py); a ``TorchFunctionMode`` sees every call made in its ``with`` block (_modes.py,
routed by _switch.py); _catalog.py says which functions take part.
"""

from ember.overrides._catalog import (get_default_nowrap_functions,  # noqa: F401
                                      get_ignored_functions, get_overridable_functions,
                                      get_testing_overrides, is_tensor_method_or_property,
                                      resolve_name)
from ember.overrides._modes import (BaseTorchFunctionMode, TorchFunctionMode,  # noqa: F401
                                    _get_current_function_mode,
                                    _get_current_function_mode_stack, _get_function_stack_at,
                                    _is_torch_function_mode_enabled, _len_torch_function_stack,
                                    _pop_mode, _pop_mode_temporarily, _push_mode)
from ember.overrides._protocol import (DisableTorchFunction,  # noqa: F401
                                       DisableTorchFunctionSubclass,
                                       _disabled_torch_function_impl, default_torch_function,
                                       enable_reentrant_dispatch, handle_op,
                                       handle_torch_function, has_torch_function,
                                       has_torch_function_unary, has_torch_function_variadic,
                                       is_plain, is_tensor_like, wrap_torch_function)

__all__ = ["get_ignored_functions", "get_overridable_functions", "get_testing_overrides",
           "handle_torch_function", "has_torch_function", "resolve_name", "is_tensor_like",
           "is_tensor_method_or_property", "wrap_torch_function", "enable_reentrant_dispatch",
           "TorchFunctionMode", "BaseTorchFunctionMode", "has_torch_function_unary",
           "has_torch_function_variadic", "DisableTorchFunctionSubclass"]
