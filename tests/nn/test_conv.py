"""Convolution layers: constructor defaults, repr, parameters, init, forward and errors."""

import math

import numpy as np
import pytest

import ember
from ember import nn
from tests.ops.opdb.conv import _ref_conv, _ref_conv_t


def _np(t):
    return np.asarray(t.detach())


def test_conv2d_defaults_and_repr():
    m = nn.Conv2d(1, 6, 5)
    assert repr(m) == "Conv2d(1, 6, kernel_size=(5, 5), stride=(1, 1))"
    assert (m.kernel_size, m.stride, m.padding, m.dilation, m.groups) == \
        ((5, 5), (1, 1), (0, 0), (1, 1), 1)
    assert m.padding_mode == "zeros" and m.output_padding == (0, 0) and not m.transposed
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    assert m.weight.shape == (6, 1, 5, 5) and m.bias.shape == (6,)


@pytest.mark.parametrize("make,text", [
    (lambda: nn.Conv2d(2, 6, (3, 2), stride=2, padding=1, dilation=2, groups=2, bias=False,
                       padding_mode="reflect"),
     "Conv2d(2, 6, kernel_size=(3, 2), stride=(2, 2), padding=(1, 1), dilation=(2, 2), "
     "groups=2, bias=False, padding_mode=reflect)"),
    (lambda: nn.Conv1d(2, 6, 3, padding="same", padding_mode="circular"),
     "Conv1d(2, 6, kernel_size=(3,), stride=(1,), padding=same, padding_mode=circular)"),
    (lambda: nn.ConvTranspose2d(2, 6, 3, stride=2, output_padding=1),
     "ConvTranspose2d(2, 6, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))"),
    (lambda: nn.ConvTranspose3d(2, 6, 3), "ConvTranspose3d(2, 6, kernel_size=(3, 3, 3), "
     "stride=(1, 1, 1))"),
])
def test_extra_repr(make, text):
    assert repr(make()) == text


def test_parameter_shapes():
    assert nn.Conv3d(4, 8, (1, 2, 3), groups=2).weight.shape == (8, 2, 1, 2, 3)
    t = nn.ConvTranspose1d(4, 6, 3, groups=2, bias=False)
    assert t.weight.shape == (4, 3, 3) and t.bias is None
    assert [n for n, _ in t.named_parameters()] == ["weight"]


def test_init_bounds():
    ember.manual_seed(0)
    m = nn.Conv2d(16, 64, 3)                # fan_in 144: U(-1/12, 1/12)
    w, b = _np(m.weight), _np(m.bias)
    bound = 1 / math.sqrt(16 * 9)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.mean()) < 0.01 and abs(w.std() - bound / math.sqrt(3)) < 0.005
    assert np.abs(b).max() <= bound
    t = nn.ConvTranspose2d(64, 16, 3)       # fan_in = weight.size(1) * k = 144 too
    assert np.abs(_np(t.weight)).max() <= bound


def test_factory_kwargs():
    m = nn.Conv1d(2, 3, 2, dtype=ember.float64)
    assert m.weight.dtype is ember.float64 and m.bias.dtype is ember.float64


def test_forward_matches_reference():
    m = nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=1, dilation=(1, 2), groups=2)
    x = ember.randn(2, 4, 7, 8)
    want = _ref_conv(_np(x), _np(m.weight), _np(m.bias), (2, 1), 1, (1, 2), 2)
    np.testing.assert_allclose(_np(m(x)), want, rtol=1e-5, atol=1e-5)
    unbatched = m(x[0])
    np.testing.assert_allclose(_np(unbatched), want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode,np_mode", [("reflect", "reflect"), ("replicate", "edge"),
                                          ("circular", "wrap")])
def test_padding_modes(mode, np_mode):
    m = nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode=mode)
    x = ember.randn(2, 2, 5, 6)
    padded = np.pad(_np(x), [(0, 0), (0, 0), (1, 1), (2, 2)], mode=np_mode)
    want = _ref_conv(padded, _np(m.weight), _np(m.bias))
    np.testing.assert_allclose(_np(m(x)), want, rtol=1e-5, atol=1e-5)


def test_same_padding_even_kernel_pads_high_side():
    m = nn.Conv1d(1, 1, 4, padding="same", bias=False)
    with ember.no_grad():
        m.weight.fill_(1.0)
    x = ember.arange(8.0).reshape(1, 1, 8)
    np.testing.assert_allclose(_np(m(x))[0, 0], [3, 6, 10, 14, 18, 22, 18, 13])


def test_conv_transpose_forward_and_output_size():
    m = nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2)
    x = ember.randn(1, 4, 5, 5)
    assert m(x).shape == (1, 6, 11, 11)
    y = m(x, output_size=[12, 12])
    want = _ref_conv_t(_np(x), _np(m.weight), _np(m.bias), 2, 0, 1, 2)
    np.testing.assert_allclose(_np(y), want, rtol=1e-5, atol=1e-5)
    assert m(x, output_size=[1, 6, 12, 12]).shape == (1, 6, 12, 12)
    assert m(x[0], output_size=[12, 12]).shape == (6, 12, 12)
    with pytest.raises(ValueError, match=r"requested an output size of \[13, 13\], but valid "
                       r"sizes range from \[11, 11\] to \[12, 12\]"):
        m(x, output_size=[13, 13])


def test_conv_transpose_output_size_error_names_the_size_as_given():
    m = nn.ConvTranspose2d(1, 1, 2, stride=2)
    x = ember.ones(1, 1, 6, 6)
    for size, shown in [((15, 15), r"\(15, 15\)"), (ember.Size([1, 1, 15, 15]),
                                                   r"ember.Size\(\[15, 15\]\)")]:
        with pytest.raises(ValueError, match=f"requested an output size of {shown}, but valid "
                           r"sizes range from \[12, 12\] to \[13, 13\] \(for an input of "
                           r"ember.Size\(\[6, 6\]\)\)"):
            m(x, output_size=size)


def test_backward_through_layers():
    ember.manual_seed(0)
    model = nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect", dtype=ember.float64)
    x = ember.randn(1, 2, 4, 4, dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(lambda x, w, b: nn.functional.conv2d(
        nn.functional.pad(x, [1, 1, 1, 1], mode="reflect"), w, b), (x, model.weight, model.bias))
    model(x).sum().backward()
    assert model.weight.grad.shape == model.weight.shape
    np.testing.assert_allclose(_np(model.bias.grad), [16.0] * 3)


@pytest.mark.parametrize("make,error,match", [
    (lambda: nn.Conv2d(3, 6, 3, groups=2), ValueError, "in_channels must be divisible by groups"),
    (lambda: nn.Conv2d(4, 6, 3, groups=4), ValueError, "out_channels must be divisible by groups"),
    (lambda: nn.Conv2d(4, 6, 3, padding_mode="foo"), ValueError,
     "padding_mode must be one of"),
    (lambda: nn.Conv2d(4, 6, 3, padding="foo"), ValueError, "Invalid padding string 'foo'"),
    (lambda: nn.Conv2d(4, 6, 3, padding="same", stride=2), ValueError,
     "padding='same' is not supported for strided convolutions"),
    (lambda: nn.ConvTranspose2d(4, 6, 3, padding_mode="reflect"), ValueError,
     'Only "zeros" padding mode is supported for ConvTranspose2d'),
])
def test_constructor_errors(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_forward_errors():
    m = nn.Conv2d(3, 6, 5)
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input "
                       r"to conv2d, but got input of size: \[28, 28\]"):
        m(ember.randn(28, 28))
    with pytest.raises(RuntimeError, match=r"Given groups=1, weight of size \[6, 3, 5, 5\], "
                       r"expected input\[1, 1, 28, 28\] to have 3 channels, but got 1 channels "
                       r"instead"):
        m(ember.randn(1, 1, 28, 28))


def test_strides_must_be_ints():
    # int() would truncate 1.5; PyTorch's parser checks a tuple by its first item
    x, w = ember.ones(1, 1, 5, 5), ember.ones(1, 1, 3, 3)
    for stride in (1.5, (1.0, 1)):
        with pytest.raises(TypeError, match=r"^conv2d\(\) received an invalid combination of "
                                            r"arguments - got \(Tensor, Tensor, stride="):
            ember.nn.functional.conv2d(x, w, stride=stride)
    with pytest.raises(TypeError, match="^conv2d\\(\\): argument 'stride' failed to unpack the "
                                        "object at pos 2 with error \"type must be tuple of "
                                        "ints,but got float\"$"):
        ember.nn.functional.conv2d(x, w, stride=(1, 1.0))
    with pytest.raises(TypeError, match="argument 'stride' must be tuple of ints, not float$"):
        ember.nn.functional.conv_transpose2d(x, w, stride=1.5)


def test_conv_int_input_reports_the_bias_first():
    x = ember.ones(2, 3, 8, dtype=ember.int64)
    with pytest.raises(RuntimeError, match=r"^Input type \(long int\) and bias type \(float\) "
                                           r"should be the same(\n|$)"):
        nn.Conv1d(3, 4, 3)(x)
    with pytest.raises(RuntimeError, match=r"^Input type \(double\) and bias type \(float\)"):
        nn.Conv2d(3, 4, 3)(ember.ones(3, 8, 8, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="^expected scalar type Long but found Float(\n|$)"):
        nn.Conv1d(3, 4, 3, bias=False)(x)
    with pytest.raises(RuntimeError, match="^expected scalar type Long but found Float(\n|$)"):
        nn.ConvTranspose1d(3, 4, 3)(x)            # the transposed path checks the weight first


def test_reversed_padding_is_a_tuple_for_numeric_padding():
    m = nn.Conv2d(2, 4, (3, 5), padding=(1, 2), padding_mode="circular")
    assert m._reversed_padding_repeated_twice == (2, 2, 1, 1)
    assert nn.Conv1d(2, 2, 3, padding="same")._reversed_padding_repeated_twice == [1, 1]
    assert m(ember.ones(1, 2, 5, 5)).shape == (1, 4, 5, 5)


def test_same_padding_warning_blames_the_caller(monkeypatch):
    with pytest.warns(UserWarning, match="even kernel lengths and odd dilation") as record:
        ember.nn.functional.conv2d(ember.ones(1, 1, 5, 5), ember.ones(1, 1, 2, 2), padding="same")
    assert [w.filename for w in record] == [__file__]
