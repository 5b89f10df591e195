"""Edge cases of the spatial functions, checked against values PyTorch gives: interpolate
with a scale factor that leaves a size unchanged, argument-check order of grid_sample,
affine_grid and fold, shuffles that must not alias their input, pad's integer check, and
the padding row of embedding's gradient."""

import math

import pytest

import ember
import ember.nn.functional as F
from ember.testing import assert_close


def _squares(*shape):
    return (ember.arange(math.prod(shape), dtype=ember.float64) ** 2).reshape(*shape)


@pytest.mark.parametrize("mode,antialias,expected", [
    ("bilinear", False, [0.5, 6.5, 20.5, 42.5, 72.5, 110.5]),
    ("bilinear", True, [1.0, 5.7142857142857135, 22.71428571428571, 40.0, 76.42857142857142,
                        106.28571428571428]),
    ("bicubic", True, [0.603305785123967, 6.082644628099174, 21.297520661157026,
                       41.388429752066116, 73.99173553719008, 108.69421487603307]),
])
def test_linear_and_antialiased_modes_copy_an_unchanged_dim(mode, antialias, expected):
    # H: 3 * 1.2 -> 3 rows, copied whatever the scale; W: 4 * 0.5 -> 2
    y = F.interpolate(_squares(1, 1, 3, 4), scale_factor=(1.2, 0.5), mode=mode,
                      antialias=antialias)
    assert_close(y.flatten(), ember.tensor(expected, dtype=ember.float64))


def test_linear_unchanged_size_is_the_identity_with_identity_gradient():
    x = _squares(1, 1, 5).requires_grad_()
    y = F.interpolate(x, scale_factor=1.1, mode="linear")
    assert y.tolist() == [[[0.0, 1.0, 4.0, 9.0, 16.0]]]
    y.backward(ember.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]], dtype=ember.float64))
    assert x.grad.tolist() == [[[1.0, 2.0, 3.0, 4.0, 5.0]]]
    x5 = ember.arange(8, dtype=ember.float64).reshape(1, 1, 2, 2, 2)
    y5 = F.interpolate(x5, scale_factor=(1.2, 1.0, 2.0), mode="trilinear")
    assert y5.flatten().tolist() == [0.0, 0.25, 0.75, 1.0, 2.0, 2.25, 2.75, 3.0,
                                     4.0, 4.25, 4.75, 5.0, 6.0, 6.25, 6.75, 7.0]


def test_nearest_applies_the_scale_to_an_unchanged_size():
    x = ember.arange(4, dtype=ember.float64).reshape(1, 1, 4).requires_grad_()
    y = F.interpolate(x, scale_factor=1.2, mode="nearest")
    assert y.tolist() == [[[0.0, 0.0, 1.0, 2.0]]]
    y.backward(ember.tensor([[[1.0, 2.0, 3.0, 4.0]]], dtype=ember.float64))
    assert x.grad.tolist() == [[[3.0, 3.0, 4.0, 0.0]]]     # the adjoint of that gather
    exact = F.interpolate(x.detach(), scale_factor=1.2, mode="nearest-exact")
    assert exact.tolist() == [[[0.0, 1.0, 2.0, 2.0]]]
    x5 = ember.arange(4, dtype=ember.float64).reshape(1, 1, 1, 1, 4)
    y5 = F.interpolate(x5, scale_factor=(1.0, 1.0, 1.2), mode="nearest")
    assert y5.flatten().tolist() == [0.0, 0.0, 1.0, 2.0]


def test_nearest_2d_copies_an_unchanged_size_and_halves_a_doubled_one():
    x = ember.arange(16, dtype=ember.float64).reshape(1, 1, 4, 4)
    assert F.interpolate(x, scale_factor=(1.2, 1.1), mode="nearest").equal(x)
    y = F.interpolate(x, scale_factor=(2.2, 2.1), mode="nearest")
    assert y[0, 0, :, 0].tolist() == [0.0, 0.0, 4.0, 4.0, 8.0, 8.0, 12.0, 12.0]
    assert y[0, 0, 0].tolist() == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    exact = F.interpolate(x, scale_factor=(1.2, 1.1), mode="nearest-exact")
    assert exact[0, 0, :, 0].tolist() == [0.0, 4.0, 8.0, 8.0]


@pytest.mark.parametrize("input_shape,grid_shape,message", [
    ((2, 1, 3, 3), (1, 2, 2, 3), "expected grid and input to have same batch size"),
    ((2, 1, 3, 3), (2, 2, 2, 2, 2), "expected 4D input and grid with same number of dim"),
    ((2, 1, 3), (2, 2, 1), "expected 5D input and grid with same number of dimensions"),
    ((2, 1, 0, 3), (2, 2, 2, 2, 2), "expected input to have non-empty spatial dimensions"),
    ((2, 1, 3, 3), (2, 2, 2, 2, 3), "expected grid to have size 2 in last dimension"),
])
def test_grid_sample_checks_in_pytorch_order(input_shape, grid_shape, message):
    with pytest.raises(RuntimeError, match=message):
        F.grid_sample(ember.zeros(input_shape), ember.zeros(grid_shape), align_corners=False)


def test_affine_grid_rejects_empty_sizes_and_shows_size_as_given():
    theta = ember.zeros(2, 2, 3)
    with pytest.raises(ValueError, match=r"positive output size. Got \[2, 1, 0, 3\]$"):
        F.affine_grid(theta, [2, 1, 0, 3], align_corners=False)
    with pytest.raises(ValueError, match=r"Nx2x3 for size \[2, 1, 3, 3\]\. Got"):
        F.affine_grid(ember.zeros(2, 3, 3), [2, 1, 3, 3], align_corners=False)
    # a unit-size dim with align_corners=True only warns (PyTorch skips the size check then)
    with pytest.warns(UserWarning, match="unit-size"):
        F.affine_grid(theta, (2, 0, 1, 3), align_corners=True)


def test_fold_checks_the_block_count_before_its_sign():
    with pytest.raises(RuntimeError, match=r"sliding blocks 0 \* 0 = 0, but got input.size"):
        F.fold(ember.zeros(1, 4, 4), (1, 1), 2)
    with pytest.raises(RuntimeError, match=r"stride=\(1, 1\), calculated shape of the array of "
                                           r"sliding blocks as \(-1, -1\), which is too small"):
        F.fold(ember.zeros(1, 9, 1), (1, 1), 3)


@pytest.mark.parametrize("fn", [
    lambda x: F.pixel_shuffle(x, 1), lambda x: F.pixel_unshuffle(x, 1),
    lambda x: F.channel_shuffle(x, 1), lambda x: F.channel_shuffle(x, 4),
])
def test_shuffles_by_one_return_a_copy(fn):
    x = ember.arange(16.0).reshape(1, 4, 2, 2)
    y = fn(x)
    y.add_(1)
    assert x[0, 0, 0].tolist() == [0.0, 1.0]


def test_channel_shuffle_keeps_channels_last():
    x = ember.arange(16.0).reshape(1, 4, 2, 2).contiguous(memory_format=ember.channels_last)
    y = F.channel_shuffle(x, 2)
    assert y.stride() == (16, 1, 8, 4)
    assert y[0, :, 0, 0].tolist() == [0.0, 8.0, 4.0, 12.0]


def test_pad_entries_must_be_ints():
    x = ember.zeros(1, 2, 3)
    with pytest.raises(TypeError, match="must be tuple of ints, but found element of type "
                                        "float at pos 0"):
        F.pad(x, (1.0, 1))
    with pytest.raises(TypeError, match="failed to unpack the object at pos 2"):
        ember.constant_pad_nd(x, (1, 1.5))
    assert F.pad(x, (ember.tensor(1), 1)).shape == (1, 2, 5)


def test_embedding_padding_row_gradient_is_positive_zero():
    w = ember.ones(3, 2, requires_grad=True)
    F.embedding(ember.tensor([1, 2]), w, padding_idx=1).backward(-ember.ones(2, 2))
    assert [math.copysign(1.0, v) for v in w.grad[1].tolist()] == [1.0, 1.0]
    assert w.grad.tolist() == [[0.0, 0.0], [0.0, 0.0], [-1.0, -1.0]]


def test_unchanged_dim_reads_of_an_infinity():
    # linear kernels read the copied row twice (weights 1 and 0): inf gives NaN in its row only;
    # the antialiased kernels skip the dim, so the infinity stays
    x = ember.tensor([[[[0.0, math.inf, 2.0], [1.0, 2.0, 3.0]]]])
    linear = F.interpolate(x, size=(2, 2), mode="bilinear")
    assert_close(linear, ember.tensor([[[[math.nan, math.nan], [1.25, 2.75]]]]), equal_nan=True)
    smooth = F.interpolate(x, size=(2, 2), mode="bilinear", antialias=True)
    assert_close(smooth, ember.tensor([[[[math.inf, math.inf], [1.375, 2.625]]]]))


def test_circular_pad_of_channels_last_is_contiguous():
    x = ember.arange(24.0).reshape(1, 2, 3, 4).contiguous(memory_format=ember.channels_last)
    assert F.pad(x, (1, 1, 1, 1), mode="circular").stride() == (60, 30, 6, 1)
    assert F.pad(x, (1, 1, 1, 1), mode="reflect").stride() == (60, 1, 12, 2)


def test_local_response_norm_of_integers_averages_with_integer_division():
    # window sums of squares [0, 1, 4] and [9, 17, 29] average (truncated) to [0, 0, 2] and
    # [4, 8, 14], as PyTorch's integer average pooling gives
    y = F.local_response_norm(ember.arange(6).reshape(1, 2, 3), 2)
    assert y.dtype is ember.float32
    expected = [0.0, 1.0, 2.0 / (1 + 2e-4) ** 0.75, 3.0 / (1 + 4e-4) ** 0.75,
                4.0 / (1 + 8e-4) ** 0.75, 5.0 / (1 + 14e-4) ** 0.75]
    assert_close(y.flatten(), ember.tensor(expected))


def test_global_average_pooling_is_a_mean():
    x = ember.arange(18).reshape(2, 1, 3, 3)
    with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype. Input "
                                           "dtype must be either a floating point or complex "
                                           "dtype. Got: Long"):
        F.adaptive_avg_pool2d(x, 1)
    with pytest.raises(RuntimeError, match="Got: Long"):
        F.interpolate(x, size=1, mode="area")
    with pytest.raises(NotImplementedError, match="\"adaptive_avg_pool2d\" not implemented for "
                                                  "'ComplexFloat'"):
        F.adaptive_avg_pool2d(x.to(ember.complex64), 2)
    for y in (F.adaptive_avg_pool2d(x.to(ember.complex64), 1),
              F.adaptive_avg_pool3d(x[None].to(ember.complex64), 1),
              F.interpolate(x.to(ember.complex64), size=(1, 1), mode="area")):
        assert y.dtype is ember.complex64
        assert_close(y.flatten(), ember.tensor([4.0, 13.0], dtype=ember.complex64))
    grad_fn = F.interpolate(x.double().requires_grad_(), size=1, mode="area").grad_fn
    assert type(grad_fn).__name__ == "MeanBackward1"
