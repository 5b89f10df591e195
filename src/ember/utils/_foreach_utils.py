"""What optimizer code copied from PyTorch imports from ``torch.utils._foreach_utils``: the
device types with multi-tensor (foreach) and fused kernels, and the grouping of parallel
tensor lists by (device, dtype) that a multi-tensor update runs over one group at a time."""

from ember._dtype import bfloat16, float32, float64
from ember._tensor import Tensor
from ember.autograd.grad_mode import no_grad

_foreach_supported_types = [Tensor]


def _get_foreach_kernels_supported_devices():
    """Device types with foreach kernels (the CPU runs them too, one tensor at a time)."""
    return ["cuda", "xpu", "mtia", "privateuseone"]


def _get_fused_kernels_supported_devices():
    """Device types with fused optimizer kernels."""
    return ["mps", "cuda", "xpu", "hpu", "cpu", "mtia", "privateuseone"]


def _device_has_foreach_support(device):
    """Whether ``device`` runs foreach ops."""
    return device.type in _get_foreach_kernels_supported_devices() + ["cpu"]


def _has_foreach_support(tensors, device):
    """Whether foreach ops take ``tensors`` (plain tensors or None) on ``device``."""
    return _device_has_foreach_support(device) and all(
        t is None or type(t) in _foreach_supported_types for t in tensors)


def _may_differ(t):
    # a step count (a one-element float CPU tensor) and a bfloat16 state may sit beside
    # parameters of another device or dtype
    return t.dtype is bfloat16 or (t.device.type == "cpu" and t.numel() == 1
                                   and t.dtype in (float32, float64))


@no_grad()
def _group_tensors_by_device_and_dtype(tensorlistlist, with_indices=False):
    """``{(device, dtype): (lists, indices)}``: the parallel lists cut into groups by the
    device and dtype of the first list's tensors, with those tensors' positions when
    ``with_indices``; an empty list stays empty in every group."""
    if not tensorlistlist:
        raise RuntimeError("Expected !nested_tensorlist.empty() to be true, but got false.")
    first = tensorlistlist[0]
    if not first:
        raise RuntimeError("Expected !nested_tensorlist[0].empty() to be true, but got false.")
    if any(len(tensors) not in (len(first), 0) for tensors in tensorlistlist):
        raise RuntimeError(f"Expected every tensor list to hold {len(first)} tensors (or "
                           f"none), but got lists of {[len(t) for t in tensorlistlist]}.")
    groups = {}
    for i, t in enumerate(first):
        if t is None:
            raise RuntimeError(f"Tensors of the first list of nested Tensor lists are supposed "
                               f"to be defined but the {i}-th Tensor is not.")
        key = (t.device, t.dtype)
        lists, indices = groups.setdefault(key, ([[] for _ in tensorlistlist], []))
        for out, tensors in zip(lists, tensorlistlist):
            if not tensors:
                continue
            other = tensors[i]
            if other is not None and (other.device, other.dtype) != key \
                    and not _may_differ(other):
                raise RuntimeError(
                    "Tensors of the same index must be on the same device and the same dtype "
                    "except `step` tensors that can be CPU and float32/64, and optimizer "
                    "states that can be bfloat16 for mixed-precision training")
            out.append(other)
        if with_indices:
            indices.append(i)
    return groups
