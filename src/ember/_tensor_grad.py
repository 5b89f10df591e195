"""Tensor's gradient slot: ``.grad`` (PyTorch's checks on assignment, its warning on a
non-leaf's read) and ``.grad_dtype``, installed on Tensor by ``ember._tensor``."""

import warnings

from ember import _dtype
from ember._tensor import Tensor


def _get_grad(self):
    if self._grad_fn is not None and not self.retains_grad and self._grad is None:
        warnings.warn(
            "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
            "Its .grad attribute won't be populated during autograd.backward(). If you "
            "indeed want the .grad field to be populated for a non-leaf Tensor, use "
            ".retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by "
            "mistake, make sure you access the leaf Tensor instead. See "
            "github.com/pytorch/pytorch/pull/30531 for more information.", UserWarning,
            stacklevel=2)
    return self._grad


def _set_grad(self, value):
    if value is not None:
        if not isinstance(value, Tensor):
            raise TypeError(f"assigned grad expected to be a Tensor or None but got "
                            f"grad of type {type(value).__name__}")
        if value is self:
            raise RuntimeError("can't assign Variable as its own grad")
        expected = self.dtype if not self._meta else self._meta.get("grad_dtype", self.dtype)
        if value.dtype is not expected and expected is not None:
            from ember._storage import _c_type
            raise RuntimeError(
                f"attempting to assign a gradient with dtype '{_c_type(value.dtype)}' to a "
                f"tensor with grad_dtype '{expected._torch_name}'. The gradient must "
                f"match the tensor's grad_dtype (defaults to the tensor's dtype). You can "
                f"set the tensor's grad_dtype attribute with a specific dtype, or None to "
                f"allow any dtype. Set grad_dtype with caution. Diverging the dtypes of a "
                f"tensor and its gradient may break downstream systems that assume they "
                f"match.")
        if value.shape != self.shape:
            raise RuntimeError(f"attempting to assign a gradient of size "
                               f"'{list(value.shape)}' to a tensor of size "
                               f"'{list(self.shape)}'. Please ensure that the gradient and "
                               f"the tensor are the same size")
    self._grad = value


def _del_grad(self):
    self._grad = None


def _get_grad_dtype(self):
    """The dtype a leaf's gradients are cast to (its own dtype unless set; None: any)."""
    _check_grad_dtype_leaf(self, "accessed")
    return self.dtype if not self._meta else self._meta.get("grad_dtype", self.dtype)


def _set_grad_dtype(self, value):
    _check_grad_dtype_leaf(self, "set")
    if value is not None and not isinstance(value, _dtype.dtype):
        raise RuntimeError(f"grad_dtype must be a torch.dtype or None, but got "
                           f"{type(value).__name__}")
    if self._meta is None:
        self._meta = {}
    self._meta["grad_dtype"] = value


def _check_grad_dtype_leaf(t, verb):
    if t.grad_fn is not None:
        raise RuntimeError(f"grad_dtype can only be {verb} on leaf tensors.")


Tensor.grad = property(_get_grad, _set_grad, _del_grad,
                       doc="The gradient backward accumulated into this leaf (None if none).")
Tensor.grad_dtype = property(_get_grad_dtype, _set_grad_dtype, doc=_get_grad_dtype.__doc__)
