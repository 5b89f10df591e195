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


# the integer codes of grid_sample's modes (``torch.grid_sampler`` takes these)
GRID_SAMPLE_INTERPOLATION_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
GRID_SAMPLE_PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}

from ember.nn import grad  # noqa: E402,F401  (F.grad is torch.nn.grad; it needs F's ops first)
