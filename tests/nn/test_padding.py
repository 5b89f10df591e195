"""Padding layers and Fold/Unfold: repr, values against np.pad, gradients."""

import numpy as np
import pytest

import ember
from ember import nn

_NP = {"Reflection": "reflect", "Replication": "edge", "Circular": "wrap"}


def _np(t):
    return np.asarray(t.detach())


@pytest.mark.parametrize("kind", ["Zero", "Constant", "Reflection", "Replication", "Circular"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_pad_layers_match_numpy(kind, nd):
    padding = (1, 2, 0, 1, 2, 0)[:2 * nd]
    layer = getattr(nn, f"{kind}Pad{nd}d")
    m = layer(padding, 1.5) if kind == "Constant" else layer(padding)
    x = ember.randn(*(2, 3, 4, 5, 3)[:nd + 2])
    widths = [(0, 0), (0, 0)] + [(padding[2 * i], padding[2 * i + 1])
                                 for i in reversed(range(nd))]
    if kind in _NP:
        want = np.pad(_np(x), widths, mode=_NP[kind])
    else:
        want = np.pad(_np(x), widths, constant_values=1.5 if kind == "Constant" else 0)
    np.testing.assert_array_equal(_np(m(x)), want)
    assert m.padding == padding


def test_pad_reprs():
    assert repr(nn.ZeroPad2d(2)) == "ZeroPad2d((2, 2, 2, 2))"
    assert repr(nn.ConstantPad1d((1, 2), 3.5)) == "ConstantPad1d(padding=(1, 2), value=3.5)"
    assert repr(nn.ReflectionPad2d(1)) == "ReflectionPad2d((1, 1, 1, 1))"
    assert repr(nn.ReplicationPad3d((1, 2, 3, 4, 5, 6))) == \
        "ReplicationPad3d((1, 2, 3, 4, 5, 6))"
    assert repr(nn.CircularPad1d(2)) == "CircularPad1d((2, 2))"
    assert nn.ZeroPad2d(1).value == 0.0


def test_reflection_backward_sums_onto_sources():
    x = ember.arange(4.0).reshape(1, 1, 4).requires_grad_()
    nn.ReflectionPad1d(2)(x).sum().backward()
    # output [2, 1, 0, 1, 2, 3, 2, 1]: 1 and 2 appear three times, 0 and 3 once
    np.testing.assert_array_equal(_np(x.grad)[0, 0], [1, 3, 3, 1])


def test_pad_errors():
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding "
                       "input dimension"):
        nn.ReflectionPad1d(5)(ember.randn(1, 2, 5))
    with pytest.raises(NotImplementedError, match="Padding size 2 is not supported for 1D"):
        nn.ReflectionPad1d(1)(ember.randn(5))
    with pytest.raises(NotImplementedError) as info:
        nn.functional.pad(ember.ones(1, 2, 3, 4), (1, 1), mode="replicate")
    assert str(info.value) == (                     # PyTorch lists what is supported
        "Padding size 2 is not supported for 4D input tensor.\n"
        "Supported combinations for non-constant padding:\n"
        "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
        "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
        "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def test_fold_unfold_repr_and_roundtrip():
    unfold = nn.Unfold(2, padding=1)
    fold = nn.Fold((4, 5), 2, padding=1)
    assert repr(unfold) == "Unfold(kernel_size=2, dilation=1, padding=1, stride=1)"
    assert repr(nn.Fold((4, 5), 2)) == \
        "Fold(output_size=(4, 5), kernel_size=2, dilation=1, padding=0, stride=1)"
    x = ember.randn(2, 3, 4, 5)
    cols = unfold(x)
    assert cols.shape == (2, 12, 30)
    # every pixel lies in 4 windows of a 2x2 kernel with padding 1
    np.testing.assert_allclose(_np(fold(cols)), 4 * _np(x), rtol=1e-6)
    np.testing.assert_allclose(_np(cols)[0, :, 0], [0, 0, 0, _np(x)[0, 0, 0, 0]] +
                               [0, 0, 0, _np(x)[0, 1, 0, 0]] + [0, 0, 0, _np(x)[0, 2, 0, 0]])


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_circular_pad_checks_input_dims(nd):
    layer = getattr(nn, f"CircularPad{nd}d")(1)
    with pytest.raises(ValueError, match=rf"expected {nd + 1}D or {nd + 2}D input "
                                         rf"\(got {nd + 3}D input\)"):
        layer(ember.ones((3,) * (nd + 3)))


def test_reflection_pad_error_numbers_the_padded_dim():
    x = ember.ones(1, 2, 3, 8, 8)
    for pad, arg, dim in (((0, 0, 0, 0, 9, 9), 8, 2), ((0, 0, 9, 9, 0, 0), 6, 3),
                          ((9, 9, 0, 0, 0, 0), 4, 4)):
        with pytest.raises(RuntimeError, match=rf"Argument #{arg}: Padding size should be less "
                                               rf"than the corresponding input dimension, but "
                                               rf"got: padding \(9, 9\) at dimension {dim} "):
            nn.ReflectionPad3d(pad)(x)


def test_fold_rank_error_wording():
    with pytest.raises(RuntimeError, match=r"^Expected 2D or 3D \(batch mode\) tensor for input "
                                           r"with possibly 0 batch size and non-zero dimensions "
                                           r"for input, but got: \[4\](\n|$)"):
        nn.Fold((4, 4), 2)(ember.ones(4))
