"""The strides of elementwise results with operands in different layouts, as PyTorch's
TensorIterator gives them (the values were read from torch 2.13): the first operand whose
strides tell two dims apart orders them, where NumPy would fall back to row-major."""

import numpy as np
import pytest

import ember

CL = ember.channels_last
CL_STRIDES = (60, 1, 15, 3)             # (2, 3, 4, 5) channels-last
ROW_MAJOR = (60, 20, 5, 1)


def _operands():
    data = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5) / 7
    return ember.from_numpy(data).contiguous(memory_format=CL), ember.from_numpy(data.copy())


@pytest.mark.parametrize("fn, expected", [
    (lambda cl, rm: cl + rm, CL_STRIDES),
    (lambda cl, rm: rm + cl, ROW_MAJOR),
    (lambda cl, rm: cl * rm[..., :1], CL_STRIDES),           # (2, 3, 4, 1) broadcast
    (lambda cl, rm: rm[0, :, :1, :1] * cl, CL_STRIDES),      # a (C, 1, 1) bias first
    (lambda cl, rm: ember.where(rm > 0, cl, rm), ROW_MAJOR),  # the condition is first
    (lambda cl, rm: ember.where(cl > 0, cl, rm), CL_STRIDES),
    (lambda cl, rm: ember.addcmul(cl, rm, rm), CL_STRIDES),
    (lambda cl, rm: ember.lerp(cl, rm, 0.5), CL_STRIDES),
    (lambda cl, rm: cl.int() + rm.double(), CL_STRIDES),    # type promotion
    (lambda cl, rm: cl.half() * rm.half(), CL_STRIDES),     # computed in float32
    (lambda cl, rm: ember.relu(cl) + rm, CL_STRIDES),
    (lambda cl, rm: 2 ** cl, ROW_MAJOR),                    # pow(number, tensor): its own
    (lambda cl, rm: cl ** 2, CL_STRIDES),
])
def test_result_strides(fn, expected):
    cl, rm = _operands()
    out = fn(cl, rm)
    assert out.stride() == expected
    np.testing.assert_allclose(out.double().numpy(), fn(rm.clone(), rm).double().numpy(),
                               rtol=1e-3)


def test_channels_last_sum_then_view_fails_as_in_pytorch():
    cl, rm = _operands()
    out = cl + rm
    assert out.is_contiguous(memory_format=CL) and not out.is_contiguous()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        out.view(2, -1)


def test_in_place_and_out_keep_their_layout():
    cl, rm = _operands()
    assert rm.clone().add_(cl).stride() == ROW_MAJOR
    assert cl.clone().add_(rm).stride() == CL_STRIDES
    out = ember.empty(0)
    ember.add(cl, rm, out=out)                  # resized: the result's layout
    assert out.stride() == CL_STRIDES
    out = ember.empty(2, 3, 4, 5)
    ember.add(cl, rm, out=out)                  # the right shape: kept
    assert out.stride() == ROW_MAJOR


def test_retained_grad_is_row_major():
    """PyTorch keeps a row-major copy of a retained gradient, whatever its layout."""
    cl, rm = _operands()
    x = cl.clone().requires_grad_()
    y = x * 2
    y.retain_grad()
    (y * cl).sum().backward()
    assert x.grad.stride() == CL_STRIDES
    assert y.grad.stride() == ROW_MAJOR


def test_an_expanded_number_with_a_number_is_row_major():
    """sum's gradient, a number expanded (all strides 0), times a number: row-major, as
    PyTorch allocates it (the dispatcher returns early for it, without the layout lookup)."""
    for f in (lambda g: g * 1.01, lambda g: g + 2, lambda g: g.clamp(0, 1), lambda g: 2 ** g):
        r = f(ember.ones(()).expand(2, 3, 4, 5))
        assert r.stride() == (60, 20, 5, 1)
        assert r.eq(f(ember.ones(2, 3, 4, 5))).all()
