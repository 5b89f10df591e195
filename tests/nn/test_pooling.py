"""Pooling layers and the pooling functions that are not registry ops (lp_pool, the
return_indices wrappers); the ops themselves are tested from tests/ops/opdb/pooling.py."""

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.testing import assert_close as _assert_close


def assert_close(actual, expected, **kwargs):
    """Values only: NumPy references compute in their own dtypes."""
    _assert_close(actual, expected, check_dtype=False, **kwargs)


@pytest.mark.parametrize("module,text", [
    (nn.MaxPool2d(2), "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"),
    (nn.MaxPool2d((2, 3), 1, 1, 2, True, True),
     "MaxPool2d(kernel_size=(2, 3), stride=1, padding=1, dilation=2, ceil_mode=True)"),
    (nn.MaxPool1d(3), "MaxPool1d(kernel_size=3, stride=3, padding=0, dilation=1, ceil_mode=False)"),
    (nn.MaxPool3d(2, 1), "MaxPool3d(kernel_size=2, stride=1, padding=0, dilation=1, "
                         "ceil_mode=False)"),
    (nn.AvgPool1d(2), "AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))"),
    (nn.AvgPool2d(2), "AvgPool2d(kernel_size=2, stride=2, padding=0)"),
    (nn.AvgPool2d((2, 2), (1, 1), (1, 0), True, False, 2),
     "AvgPool2d(kernel_size=(2, 2), stride=(1, 1), padding=(1, 0))"),
    (nn.AvgPool3d(2, divisor_override=3), "AvgPool3d(kernel_size=2, stride=2, padding=0)"),
    (nn.AdaptiveAvgPool1d(2), "AdaptiveAvgPool1d(output_size=2)"),
    (nn.AdaptiveAvgPool2d((2, None)), "AdaptiveAvgPool2d(output_size=(2, None))"),
    (nn.AdaptiveAvgPool3d(1), "AdaptiveAvgPool3d(output_size=1)"),
    (nn.AdaptiveMaxPool1d(3, True), "AdaptiveMaxPool1d(output_size=3)"),
    (nn.AdaptiveMaxPool2d(3), "AdaptiveMaxPool2d(output_size=3)"),
    (nn.AdaptiveMaxPool3d((1, 2, 3)), "AdaptiveMaxPool3d(output_size=(1, 2, 3))"),
    (nn.LPPool1d(1.5, 2, 1, True), "LPPool1d(norm_type=1.5, kernel_size=2, stride=1, "
                                   "ceil_mode=True)"),
    (nn.LPPool2d(2, 3), "LPPool2d(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)"),
    (nn.MaxUnpool1d(3, 2, 1), "MaxUnpool1d(kernel_size=(3,), stride=(2,), padding=(1,))"),
    (nn.MaxUnpool2d(2), "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))"),
    (nn.MaxUnpool3d(2, 1), "MaxUnpool3d(kernel_size=(2, 2, 2), stride=(1, 1, 1), "
                           "padding=(0, 0, 0))"),
])
def test_repr(module, text):
    assert repr(module) == text
    assert list(module.parameters()) == [] and list(module.buffers()) == []


def test_constructor_defaults():
    m = nn.MaxPool2d(3)
    assert (m.kernel_size, m.stride, m.padding, m.dilation) == (3, 3, 0, 1)
    assert m.return_indices is False and m.ceil_mode is False
    a = nn.AvgPool2d(3, 1)
    assert (a.stride, a.count_include_pad, a.divisor_override) == (1, True, None)
    assert nn.AvgPool1d(4).stride == (4,)
    assert nn.LPPool2d(2, 3).stride is None
    assert nn.AdaptiveMaxPool2d(2).return_indices is False


def _windows_max(x, k):
    n, c, h, w = x.shape
    return x[:, :, :h // k * k, :w // k * k].reshape(n, c, h // k, k, w // k, k).max(axis=(3, 5))


def test_max_pool2d_module_matches_reference_and_functional():
    x = ember.randn(4, 3, 9, 8)
    out = nn.MaxPool2d(2)(x)
    assert_close(out, _windows_max(np.asarray(x), 2))
    assert_close(out, F.max_pool2d(x, 2))
    assert_close(out, ember.max_pool2d(x, 2))


def test_max_pool_return_indices_and_unpool_round_trip():
    x = ember.randn(2, 3, 6, 4)
    values, indices = nn.MaxPool2d(2, return_indices=True)(x)
    assert indices.dtype is ember.int64
    flat = np.asarray(x).reshape(2, 3, -1)
    assert_close(values, np.take_along_axis(flat, np.asarray(indices).reshape(2, 3, -1),
                                            -1).reshape(values.shape))
    restored = nn.MaxUnpool2d(2)(values, indices)
    expected = np.where(np.asarray(x) == np.repeat(np.repeat(np.asarray(values), 2, 2), 2, 3),
                        np.asarray(x), 0)
    assert_close(restored, expected)
    assert tuple(nn.MaxUnpool2d(2)(values, indices, output_size=(7, 5)).shape) == (2, 3, 7, 5)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_every_pool_module_calls_its_functional(nd):
    shape = (2, 3) + (6, 5, 4)[:nd]
    x = ember.randn(shape)
    pairs = [(getattr(nn, f"MaxPool{nd}d")(2, 1, 1), getattr(F, f"max_pool{nd}d")(x, 2, 1, 1)),
             (getattr(nn, f"AvgPool{nd}d")(2, 1, 1), getattr(F, f"avg_pool{nd}d")(x, 2, 1, 1)),
             (getattr(nn, f"AdaptiveAvgPool{nd}d")(3),
              getattr(F, f"adaptive_avg_pool{nd}d")(x, 3)),
             (getattr(nn, f"AdaptiveMaxPool{nd}d")(3),
              getattr(F, f"adaptive_max_pool{nd}d")(x, 3)),
             (getattr(nn, f"LPPool{nd}d")(2, 2), getattr(F, f"lp_pool{nd}d")(x, 2, 2))]
    for module, expected in pairs:
        assert_close(module(x), expected)


def test_adaptive_max_return_indices():
    x = ember.randn(2, 7)
    values, indices = nn.AdaptiveMaxPool1d(3, return_indices=True)(x)
    windows = [(0, 3), (2, 5), (4, 7)]
    a = np.asarray(x)
    assert_close(values, np.stack([a[:, lo:hi].max(1) for lo, hi in windows], 1))
    assert_close(indices, np.stack([a[:, lo:hi].argmax(1) + lo for lo, hi in windows], 1))


def _lp_ref(x, p, k, s):
    n = x.shape[-1]
    out = (n - k) // s + 1
    return np.stack([(np.abs(x[..., i * s:i * s + k]) ** p).sum(-1) ** (1 / p)
                     if p != 1 else x[..., i * s:i * s + k].sum(-1) for i in range(out)], -1)


@pytest.mark.parametrize("p,k,s", [(2.0, 3, 2), (3.0, 2, 1), (1.0, 2, 2)])
def test_lp_pool1d_matches_reference(p, k, s):
    x = ember.rand(2, 3, 9) + 0.1           # positive: the p-norm of each window
    assert_close(F.lp_pool1d(x, p, k, s), _lp_ref(np.asarray(x), p, k, s), rtol=1e-5,
                 atol=1e-5)


def test_lp_pool2d_matches_reference_and_gradcheck():
    x = ember.rand(1, 2, 4, 6, dtype=ember.float64) + 0.1
    a = np.asarray(x)
    windows = a.reshape(1, 2, 2, 2, 3, 2).transpose(0, 1, 2, 4, 3, 5).reshape(1, 2, 2, 3, 4)
    assert_close(F.lp_pool2d(x, 2, 2), np.sqrt((windows ** 2).sum(-1)))
    x.requires_grad_(True)
    assert ember.autograd.gradcheck(lambda t: F.lp_pool2d(t, 3, (2, 3), 1), [x])


def test_grad_fn_names_follow_pytorch():
    x = ember.randn(1, 1, 4, 4, requires_grad=True)
    assert type(F.max_pool2d(x, 2).grad_fn).__name__ == "MaxPool2DWithIndicesBackward0"
    assert type(F.avg_pool2d(x, 2).grad_fn).__name__ == "AvgPool2DBackward0"
    assert type(F.adaptive_avg_pool2d(x, 2).grad_fn).__name__ == "AdaptiveAvgPool2DBackward0"


def test_max_pool_gradient_goes_to_the_maximum_once_per_window():
    x = ember.tensor([[[1.0, 5.0, 2.0, 0.0, 3.0]]], requires_grad=True)
    F.max_pool1d(x, 3, 1).sum().backward()       # windows [1,5,2] [5,2,0] [2,0,3]
    assert x.grad.tolist() == [[[0.0, 2.0, 0.0, 0.0, 1.0]]]


def test_errors_name_pytorch_messages():
    with pytest.raises(RuntimeError, match=r"Given input size: \(1x2x2\). Calculated output "
                                           r"size: \(1x0x0\). Output size is too small"):
        nn.MaxPool2d(3)(ember.randn(1, 2, 2))
    with pytest.raises(RuntimeError, match="non-empty 3D or 4D"):
        nn.MaxPool2d(2)(ember.randn(4, 4))
    with pytest.raises(RuntimeError, match="max_pool2d: kernel_size must either be a single "
                                           "int, or a tuple of two ints"):
        F.max_pool2d(ember.randn(1, 4, 4), (2, 2, 2))
    with pytest.raises(RuntimeError, match="adaptive_avg_pool2d: output_size must be 2"):
        F.adaptive_avg_pool2d(ember.randn(1, 4, 4), (2,))


def test_window_matrices_are_built_once_per_geometry_and_shared_read_only():
    from ember.ops._pool_args import window_mats
    first = window_mats((8, 8), [2, 2], (2, 2), (0, 0), (4, 4), True, None)
    again = window_mats((8, 8), (2, 2), (2, 2), (0, 0), (4, 4), True, None)
    assert again is first                           # lists and tuples name one geometry
    mats, counts = first
    assert not mats[0].flags.writeable and mats[0][1].tolist() == [0, 0, 0.5, 0.5, 0, 0, 0, 0]
    x = ember.arange(64.0).reshape(1, 1, 8, 8)
    for _ in range(2):                              # the shared tables stay intact
        assert F.avg_pool2d(x, 2)[0, 0, :2, :2].tolist() == [[4.5, 6.5], [20.5, 22.5]]


def test_fractional_max_pool_modules():
    x = ember.randn(2, 3, 10, 11)
    with pytest.raises(ValueError, match="FractionalMaxPool2d requires specifying either an "
                                         "output size, or a pooling ratio"):
        nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError, match="only one of output_size and output_ratio"):
        nn.FractionalMaxPool2d(2, output_size=3, output_ratio=0.5)
    with pytest.raises(ValueError, match=r"output_ratio must be between 0 and 1 \(got 1.5\)"):
        nn.FractionalMaxPool3d(2, output_ratio=1.5)
    halved = nn.FractionalMaxPool2d(2, output_ratio=0.5)
    assert halved(x).shape == (2, 3, 5, 5) and repr(halved) == "FractionalMaxPool2d()"
    ember.manual_seed(3)
    first = halved(x)
    ember.manual_seed(3)
    assert ember.equal(halved(x), first)            # the samples follow the seed
    samples = ember.rand(2, 3, 2)
    fixed = nn.FractionalMaxPool2d((2, 3), output_size=(4, 5), return_indices=True,
                                   _random_samples=samples)
    values, indices = fixed(x)
    assert values.shape == indices.shape == (2, 3, 4, 5)
    assert ember.equal(values, x.flatten(2).gather(2, indices.flatten(2)).reshape(values.shape))
    assert ember.equal(fixed(x)[0], values) and list(fixed.state_dict()) == ["_random_samples"]
    cube = nn.FractionalMaxPool3d(2, output_size=2)(ember.randn(3, 5, 6, 7))   # unbatched
    assert cube.shape == (3, 2, 2, 2)


@pytest.mark.parametrize("call, name", [
    (lambda x: F.max_pool2d(x, 2.5), "max_pool2d"),
    (lambda x: F.max_pool2d(x, (2, 2.0)), "max_pool2d"),
    (lambda x: ember.nn.AvgPool2d(2.0)(x), "avg_pool2d")])
def test_window_sizes_must_be_ints(call, name):
    with pytest.raises(TypeError, match=f"{name}\\(\\): argument 'kernel_size' must be tuple of "
                                        f"ints, not float"):
        call(ember.ones(1, 1, 4, 4))


def test_max_pool1d_rank_error_depends_on_indices():
    x = ember.ones(2, 3, 4, 5)
    with pytest.raises(RuntimeError, match=r"^max_pool1d: Expected 2D or 3D \(batch mode\) "
                                           r"tensor with optional 0 dim batch size for input, "
                                           r"but got:\[2, 3, 4, 5\](\n|$)"):
        nn.MaxPool1d(2)(x)
    with pytest.raises(RuntimeError, match=r"^Expected 2 to 3 dimensions, but got "
                                           r"4-dimensional tensor"):
        nn.MaxPool1d(2, return_indices=True)(x)


@pytest.mark.parametrize("kwargs, message", [
    ({"kernel_size": 6}, r"max_pool1d\(\) Invalid computed output size: 0"),
    ({"kernel_size": 0}, r"max_pool1d\(\) kernel_size must be greater than zero, but got 0"),
    ({"kernel_size": 2, "stride": 0}, r"max_pool1d\(\) stride must be greater than zero"),
    ({"kernel_size": 2, "padding": -1}, r"max_pool1d\(\) padding must be non-negative, but "
                                        r"got -1"),
    ({"kernel_size": 3, "padding": 2, "dilation": 2},
     r"max_pool1d\(\) padding should be at most half of kernel size, but got padding=2 and "
     r"kernel_size=3"),
    ({"kernel_size": 2, "dilation": 0}, r"max_pool1d\(\) dilation must be greater than zero"),
    ({"kernel_size": (2, 2)}, r"max_pool1d\(\) kernel_size must be an int, list of ints or "
                              r"tuple of ints of size 1 but got size 2"),
    ({"kernel_size": 2, "stride": (1, 1)}, r"max_pool1d\(\) stride must be None, an int"),
])
def test_max_pool1d_without_indices_words_errors_as_pytorch(kwargs, message):
    x = ember.ones(1, 1, 5)
    with pytest.raises(RuntimeError, match=message):
        F.max_pool1d(x, **kwargs)
    with pytest.raises(RuntimeError, match=message):
        nn.MaxPool1d(**kwargs)(x)


def test_max_pool1d_with_indices_keeps_the_2d_wording():
    with pytest.raises(RuntimeError, match=r"Given input size: \(1x1x5\). Calculated output "
                                           r"size: \(1x1x0\). Output size is too small"):
        F.max_pool1d(ember.ones(1, 1, 5), 6, return_indices=True)


@pytest.mark.parametrize("fn", [F.max_pool2d, F.avg_pool2d])
def test_pool_padding_is_checked_first_and_must_be_non_negative(fn):
    x = ember.ones(1, 1, 5, 5)
    with pytest.raises(RuntimeError, match="pad must be non-negative, but got pad: -1"):
        fn(x, 2, padding=(-1, 5))
    with pytest.raises(RuntimeError, match="pad must be non-negative, but got pad: -1"):
        fn(x, 0, stride=1, padding=-1)          # before the kernel size check
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel "
                                           "size, but got pad=5, kernel_size=3"):
        fn(x, (3, 2), padding=(5, -1))


def test_max_pool1d_names_the_kernel_pytorch_picks_for_a_bad_dtype():
    z = ember.ones(1, 1, 4, dtype=ember.complex128)
    with pytest.raises(NotImplementedError, match="\"max_pool1d_impl\" not implemented for "
                                                  "'ComplexDouble'"):
        ember.nn.functional.max_pool1d(z, 2)
    with pytest.raises(NotImplementedError, match="\"max_pool2d\" not implemented for "
                                                  "'ComplexDouble'"):
        ember.nn.functional.max_pool1d(z, 2, return_indices=True)
    with pytest.raises(NotImplementedError, match="\"max_pool2d\" not implemented"):
        ember.nn.functional.max_pool1d(z.requires_grad_(), 2)
