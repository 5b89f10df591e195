"""ember.nn.functional: the functional form of every layer (``torch.nn.functional``).

The ops live in ember/ops/. This module gathers those registered with
``namespace="nn.functional"``, plus each op module's ``FUNCTIONAL`` table: functions built
from ops, and the names of top-level ops PyTorch also exposes here (``relu``, ``conv2d``).
"""

from ember import ops as _ops
from ember.ops._registry import REGISTRY as _REGISTRY
from ember.overrides import (handle_torch_function, has_torch_function,  # noqa: F401
                             has_torch_function_unary, has_torch_function_variadic)

globals().update(_ops.namespace_functions("nn.functional"))
globals().update({name: _REGISTRY[f].function if isinstance(f, str) else f
                  for name, f in _ops.FUNCTIONAL.items()})

