"""Normalization with fused kernels, gathered for ``ember.ops``: native_batch_norm and its
functional forms (ops/norm_batch.py); native_layer_norm, native_group_norm and _fused_rms_norm
and theirs (ops/norm_rows.py); the input gradient they share, with NOTE [Fused normalization
backward] (ops/_norm_shared.py). rms_norm, instance_norm, local_response_norm and normalize,
compositions of these, are in ops/norm_functions.py.

The names other modules import from here (the CUDA kernels, batch_norm_stats, the tests)
are re-exported.
"""

from ember.ops._norm_shared import (  # noqa: F401  (re-exported)
    _check_mixed,
    _float_input,
    _norm_input_grad,
)
from ember.ops.norm_batch import (  # noqa: F401  (re-exported)
    _channel_rows,
    _stats_dtype,
    batch_norm,
    channel_stats,
    functional_batch_norm,
    native_batch_norm,
    update_running_stats,
)
from ember.ops.norm_rows import (  # noqa: F401  (re-exported)
    _check_group_norm,
    _fused_rms_norm,
    _spread,
    check_normalized_shape,
    functional_group_norm,
    functional_layer_norm,
    group_norm,
    layer_norm,
    native_group_norm,
    native_layer_norm,
)
from ember.ops import norm_batch_backward, norm_functions  # noqa: F401  (registers its op)

ALIASES = {}
PUBLIC = {"batch_norm": batch_norm, "layer_norm": layer_norm, "group_norm": group_norm,
          "_fused_rms_norm": _fused_rms_norm.function,  # PyTorch exposes torch._fused_rms_norm
          **norm_functions.PUBLIC}
FUNCTIONAL = {"batch_norm": functional_batch_norm, "layer_norm": functional_layer_norm,
              "group_norm": functional_group_norm, **norm_functions.FUNCTIONAL}
