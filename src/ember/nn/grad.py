"""Gradients of convolutions with respect to their input or weight (``torch.nn.grad``).

Each runs the convolution on a stand-in for the missing operand and differentiates it: the
convolution is linear in each operand, so the stand-in's values do not matter, and the
forward's checks word bad shapes as PyTorch does. The results are differentiable with
respect to the given operands when grad mode is on. Inside inference mode (where nothing
records) the differentiation runs with it off, and the result is an inference tensor, as
PyTorch's backward kernels give it.
"""

import ember
from ember._inference import is_inference
from ember.autograd.grad_mode import (inference_mode, is_grad_enabled,
                                      is_inference_mode_enabled)
from ember.nn import functional as F

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input",
           "conv3d_weight"]


def _check_batched(input_size, weight_size):
    # the functional convolutions also take unbatched inputs; these do not, as in PyTorch
    if len(input_size) != len(weight_size):
        n = len(weight_size)
        raise RuntimeError(f"Expected {n}-dimensional input for {n}-dimensional weight "
                           f"{list(weight_size)}, but got {len(input_size)}-dimensional input "
                           f"of size {list(input_size)} instead")


def _input_grad(conv, input_size, weight, grad_output, options):
    _check_batched(input_size, weight.shape)
    return _differentiate(lambda stand_in, w: conv(stand_in, w, None, *options),
                          tuple(input_size), grad_output, weight)


def _weight_grad(conv, input, weight_size, grad_output, options):
    _check_batched(input.shape, weight_size)
    return _differentiate(lambda stand_in, x: conv(x, stand_in, None, *options),
                          tuple(weight_size), grad_output, input)


def _differentiate(conv, size, grad_output, other):
    """The gradient for ``grad_output`` of ``conv(stand_in, other)`` with respect to the
    stand-in (of ``size``) for the missing operand."""
    keep_graph = is_grad_enabled() and any(    # (the recorded truth: NOTE [Forward-mode primals])
        t._requires_grad or t._grad_fn is not None for t in (grad_output, other))
    from ember.func._forward_primal import own_pass, show
    # (grad mode on, and recording even in inference mode; under a forward-mode transform,
    # the result is its function's, as a native kernel's: NOTE [Forward-mode primals])
    with inference_mode(False), own_pass():
        if is_inference(other):         # (which cannot be saved for backward)
            other = other.clone()
        stand_in = ember.zeros(size, dtype=grad_output.dtype, device=grad_output.device,
                               requires_grad=True)
        (grad,) = ember.autograd.grad(conv(stand_in, other), stand_in, grad_output,
                                      create_graph=keep_graph)
    return grad.clone() if is_inference_mode_enabled() else show(grad)


def _pair(conv, name):
    def input_grad(input_size, weight, grad_output, stride=1, padding=0, dilation=1,
                   groups=1):
        return _input_grad(conv, input_size, weight, grad_output,
                           (stride, padding, dilation, groups))

    def weight_grad(input, weight_size, grad_output, stride=1, padding=0, dilation=1,
                    groups=1):
        return _weight_grad(conv, input, weight_size, grad_output,
                            (stride, padding, dilation, groups))
    input_grad.__name__, weight_grad.__name__ = f"{name}_input", f"{name}_weight"
    input_grad.__doc__ = (f"The gradient of {name} with respect to its input, of size "
                          f"input_size.")
    weight_grad.__doc__ = (f"The gradient of {name} with respect to its weight, of size "
                           f"weight_size.")
    return input_grad, weight_grad


conv1d_input, conv1d_weight = _pair(F.conv1d, "conv1d")
conv2d_input, conv2d_weight = _pair(F.conv2d, "conv2d")
conv3d_input, conv3d_weight = _pair(F.conv3d, "conv3d")
