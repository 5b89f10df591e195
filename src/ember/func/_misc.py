"""functionalize, replace_all_batch_norm_modules_ and debug_unwrap (``torch.func``)."""

import functools

from ember._tensor import Tensor
from ember.func._batched import BatchedTensor

__all__ = ["functionalize", "replace_all_batch_norm_modules_", "debug_unwrap"]

_REMOVE = (
    "functionalize(f, remove='mutations'): received invalid argument for remove={}. Valid "
    "options are:\n"
    "     remove='mutations': all inplace and out= operators will be removed from the "
    "program, and replaced with their out-of-place equivalents.\n"
    "     remove='mutations_and_views': In addition to the above, all aliasing operators "
    "{{view}} will be replaced with their non-aliasing counterparts, {{view}}_copy.\n")


def functionalize(func, *, remove="mutations"):
    """``func`` with its intermediate mutations (and views) removed: ember runs eagerly with
    no graph to rewrite, so this is ``func`` itself, mutating its inputs as torch's does."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(_REMOVE.format(remove))

    @functools.wraps(func)
    def functionalized(*args, **kwargs):
        return func(*args, **kwargs)
    return functionalized


def replace_all_batch_norm_modules_(root):
    """Stop every batch norm in ``root`` tracking running statistics (running_mean,
    running_var and num_batches_tracked become None), in place; returns ``root``."""
    from ember.nn.modules.batchnorm import _BatchNorm
    for module in root.modules():
        if isinstance(module, _BatchNorm):
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root


def debug_unwrap(tensor, *, recurse=True):
    """The plain tensor under a vmap BatchedTensor, the whole batch at dim 0 (one level when
    ``recurse`` is False); any other tensor as it is. For debugging only."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"debug_unwrap(): expected a Tensor, got {type(tensor).__name__}")
    while type(tensor) is BatchedTensor:
        tensor = tensor._value
        if not recurse:
            break
    return tensor
