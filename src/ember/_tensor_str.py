"""(being written) Printing tensors in PyTorch's format."""


def tensor_repr(t):
    import numpy as np
    return f"tensor({np.asarray(t.detach()).tolist()})"
