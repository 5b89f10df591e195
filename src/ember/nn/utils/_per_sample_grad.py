"""``ember.nn.utils._per_sample_grad``: ``call_for_per_sample_grads``, a module's forward whose
backward fills ``grad_sample`` on each trainable parameter (through ``ExpandedWeight``)."""

import functools

from ember._tensor import Tensor
from ember.nn.utils._expanded_weights import ExpandedWeight
from ember.utils._pytree import tree_leaves

__all__ = ["call_for_per_sample_grads"]


def call_for_per_sample_grads(module, *, batch_size=None, loss_reduction="sum",
                              batch_first=True):
    """Return a forward function for a module, populating grad_sample with per sample
    gradients on backward invocation."""
    if loss_reduction not in ("sum", "mean"):
        raise RuntimeError(f"Expected loss_reduction argument to be sum or mean, got "
                           f"{loss_reduction}")
    if not isinstance(module, _module_type()):
        raise RuntimeError(f"Module passed must be nn.Module, got {type(module).__name__}")
    if not (batch_size is None or isinstance(batch_size, int)):
        raise RuntimeError(f"Batch size passed must be None or an integer, got "
                           f"{type(batch_size).__name__}")
    if batch_size is not None and batch_size < 1:
        raise RuntimeError(f"Batch size must be positive, got {batch_size}")
    # (checked here, as PyTorch does: calls of one wrapper accumulate into grad_sample)
    for weight in module.parameters():
        if getattr(weight, "grad_sample", None) is not None:
            raise RuntimeError(
                "Current Expanded Weights accumulates the gradients, which will be "
                "incorrect for multiple calls without clearing gradients. Please clear out "
                f"the grad_sample parameter of {weight} or post an issue to pytorch/pytorch "
                "to prioritize correct behavior")

    @functools.wraps(module.forward)
    def wrapper(*args, **kwargs):
        size = batch_size if batch_size is not None else _batch_size(args, kwargs, batch_first)
        params = {name: ExpandedWeight(p, size, loss_reduction) if p.requires_grad else p
                  for name, p in module.named_parameters()}
        from ember.func import functional_call
        return functional_call(module, params, args, kwargs)
    return wrapper


def _module_type():
    from ember.nn.modules.module import Module
    return Module


def _batch_size(args, kwargs, batch_first):
    """The common size of dim 0 (dim 1 when not ``batch_first``) of every tensor argument."""
    dim = 0 if batch_first else 1
    size = None
    for leaf in tree_leaves((args, kwargs)):
        if not isinstance(leaf, Tensor):
            continue
        this = leaf.shape[dim]
        if size is not None and this != size:
            raise RuntimeError(f"When computing batch size, found at least one input with batch "
                               f"size {size} and one with batch size {this}. Please specify it "
                               "explicitly using the batch size kwarg in call_for_per_sample_grads")
        size = this
    if size is None:
        raise RuntimeError("Unable to find a tensor in the passed args and kwargs. They may not be "
                           "pytree-able and so ExpandedWeights cannot compute the batch size from "
                           "the inputs. Please specify it explicitly")
    return size
