"""Copying and summing tensors across GPUs (``torch.nn.parallel.comm``, also
``torch.cuda.comm``): broadcast, scatter, gather and reduce_add, and the coalesced forms for
lists of tensors. ember copies tensor by tensor (CuPy's peer copies) rather than packing
small tensors into buffers, so the coalesced forms' ``buffer_size`` changes nothing."""

import ember
from ember._tensor import Tensor

__all__ = ["broadcast", "broadcast_coalesced", "reduce_add", "reduce_add_coalesced",
           "scatter", "gather"]


def _gpu(device):
    """A GPU given by index, name or device, as a device with its index."""
    if isinstance(device, int) and not isinstance(device, bool):
        return ember.device("cuda", device)
    device = ember.device(device)
    if device.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {device}")
    return device if device.index is not None else ember.device("cuda",
                                                                ember.cuda.current_device())


def _destination(destination):
    """The device of a reduce or gather: the current GPU by default, -1 or "cpu" the host."""
    if destination is None:
        return ember.device("cuda", ember.cuda.current_device())
    if destination == -1 or destination == "cpu" or destination == ember.device("cpu"):
        return ember.device("cpu")
    return _gpu(destination)


def _exactly_one(devices, out):
    if (devices is None) == (out is None):
        raise RuntimeError(f"Exactly one of 'devices' and 'out' must be specified, but got "
                           f"devices={devices} and out={out}")


def _copy_into(parts, out):
    """Copy each of ``parts`` into the tensor of ``out`` at its place; returns ``out``."""
    if len(parts) != len(out):
        raise RuntimeError(f"Expected {len(parts)} output tensors, but got {len(out)}")
    for i, (part, target) in enumerate(zip(parts, out)):
        if not target.is_cuda:
            raise RuntimeError(f"Expected all output tensors to be CUDA tensors, but output "
                               f"tensor at index {i} has device '{target.device}'")
        if target.shape != part.shape:
            raise RuntimeError(f"Expected all output tensors to have the same shape as the "
                               f"source {tuple(part.shape)}, but output tensor at index {i} "
                               f"has shape {tuple(target.shape)}")
        target.copy_(part)
    return tuple(out)


def broadcast(tensor, devices=None, *, out=None):
    """Copies of ``tensor`` (on the CPU or a GPU) on each of ``devices``, or into the GPU
    tensors of ``out``: exactly one of the two is given."""
    _exactly_one(devices, out)
    if out is not None:
        return _copy_into([tensor] * len(out), list(out))
    return tuple(tensor.to(_gpu(d), copy=True) for d in devices)


def broadcast_coalesced(tensors, devices, buffer_size=10485760):
    """``broadcast`` of each of ``tensors``: one tuple of copies per device."""
    devices = [_gpu(d) for d in devices]
    return tuple(tuple(t.to(d, copy=True) for t in tensors) for d in devices)


def reduce_add(inputs, destination=None):
    """The sum of ``inputs`` (tensors of one shape, on different GPUs) on ``destination``
    (the current GPU by default; -1 for the CPU)."""
    device = _destination(destination)
    inputs = list(inputs)
    first = inputs[0]
    for i, t in enumerate(inputs):
        if not t.is_cuda:
            raise RuntimeError(f"reduce_add expects all inputs to be on GPUs, but input {i} is "
                               f"on {t.device}")
        if t.shape != first.shape:
            raise ValueError(f"input {i} has invalid size: got {list(t.shape)}, but expected "
                             f"{list(first.shape)}")
    total = inputs[0].to(device, copy=True)
    for t in inputs[1:]:
        total += t.to(device)
    return total


def reduce_add_coalesced(inputs, destination=None, buffer_size=10485760):
    """``reduce_add`` of the tensors at each place: ``inputs`` holds one list of tensors per
    GPU, all alike; returns the sums, one per place."""
    lists = [list(ts) for ts in inputs]
    return tuple(reduce_add(same, destination) for same in zip(*lists))


def scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
    """``tensor`` cut along ``dim`` into one piece per device (as ``chunk`` does, or of
    ``chunk_sizes``), each copied to its device or into the tensor of ``out``. ``streams``
    is accepted: ember's copies run on each GPU's current stream."""
    _exactly_one(devices, out)
    if out is not None:
        if chunk_sizes is not None:
            raise RuntimeError(f"'devices' must not be specified when 'out' is specified, but "
                               f"got chunk_sizes={chunk_sizes}")
        sizes = [t.shape[dim] for t in out]
        return _copy_into(tensor.split(sizes, dim), list(out))
    devices = [_gpu(d) for d in devices]
    if chunk_sizes is None:
        pieces = tensor.chunk(len(devices), dim)
    else:
        if len(chunk_sizes) != len(devices):
            raise RuntimeError(f"Expected devices and chunk_sizes to be of same length, but "
                               f"got len(chunk_sizes) == {len(chunk_sizes)} and len(devices) "
                               f"== {len(devices)}")
        pieces = tensor.split(list(chunk_sizes), dim)
    return tuple(piece.to(d, copy=True).contiguous() for piece, d in zip(pieces, devices))


def gather(tensors, dim=0, destination=None, *, out=None):
    """``tensors`` (on GPUs) joined along ``dim`` on ``destination`` (the current GPU by
    default; -1 or "cpu" for the host), or into ``out``."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("Expected at least one tensor to gather from")
    if out is not None:
        if destination is not None:
            raise RuntimeError(f"'destination' must not be specified when 'out' is specified, "
                               f"but got destination={destination}")
        device = out.device
    else:
        device = _destination(destination)
    joined = ember.cat([t.to(device) for t in tensors], dim)
    if out is None:
        return joined
    if not isinstance(out, Tensor) or out.shape != joined.shape:
        raise RuntimeError(f"Expected out tensor to have shape {tuple(joined.shape)}, but got "
                           f"{tuple(out.shape)}")
    return out.copy_(joined)
