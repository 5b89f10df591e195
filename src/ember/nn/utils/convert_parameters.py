"""Flatten parameters into one vector and back."""

from ember._tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_device(param, old):
    device = param.get_device() if param.device.type == "cuda" else -1
    if old is not None and device != old:
        raise TypeError("Found two parameters on different devices, this is currently not "
                        "supported.")
    return device


def parameters_to_vector(parameters):
    """One 1-D tensor holding every parameter's values, in order."""
    from ember import cat
    device = None
    flat = []
    for param in parameters:
        device = _check_device(param, device)
        flat.append(param.view(-1))
    return cat(flat)


def vector_to_parameters(vec, parameters):
    """Make each parameter's data a view of its slice of ``vec`` (the inverse of
    ``parameters_to_vector``)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    device = None
    pointer = 0
    for param in parameters:
        device = _check_device(param, device)
        n = param.numel()
        param.data = vec[pointer:pointer + n].view_as(param).data
        pointer += n
