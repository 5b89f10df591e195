"""Round 27 fidelity against PyTorch: float32 linear/bilinear/trilinear interpolation takes
its source indices and weights in float32 arithmetic (bit-exact weights, forward and
backward), and nll_loss/cross_entropy raise PyTorch's errors for a 1-D input's wrong-dtype
target, a smoothed (1,) target of a 1-D input and a smoothed Byte target with a class weight."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_GEOMETRY = [dict(scale_factor=s, recompute_scale_factor=r) for s in (0.3, 0.6, 1.3, 1.7, 2.5,
                                                                       3.1) for r in (None, True)]
_GEOMETRY += [dict(size=o) for o in (5, 19, 23)]


def _eye_resampled(lib, n, mode, kw, dim, nd):
    """The weights of one dim, exactly: interpolate one-hot rows (the other dims unchanged,
    which PyTorch copies) and the gradient of each output position."""
    shape = [n if i == dim else 3 for i in range(nd)]
    eye = np.eye(n, dtype=np.float32).reshape([n, 1] + [n if i == dim else 1 for i in range(nd)])
    x = lib.tensor(np.broadcast_to(eye, [n, 1] + shape).copy(), requires_grad=True)
    size, scale = kw.get("size"), kw.get("scale_factor")
    args = dict(mode=mode, align_corners=kw["align_corners"])
    if size is not None:
        args["size"] = [size if i == dim else 3 for i in range(nd)]
    else:
        args["scale_factor"] = [scale if i == dim else 1.0 for i in range(nd)]
        args["recompute_scale_factor"] = kw["recompute_scale_factor"]
    y = lib.nn.functional.interpolate(x, **args)
    g = np.random.default_rng(dim).standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(lib.tensor(g))
    return y.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode,nd", [("linear", 1), ("bilinear", 2), ("trilinear", 3)])
def test_float32_linear_weights_bit_exact(mode, nd, align_corners):
    for kw in _GEOMETRY:
        kw = dict(kw, align_corners=align_corners)
        for n in (7, 12):
            for dim in range(nd):
                ty, tg = _eye_resampled(torch, n, mode, kw, dim, nd)
                ey, eg = _eye_resampled(ember, n, mode, kw, dim, nd)
                np.testing.assert_array_equal(ey, ty, err_msg=f"{n} {dim} {kw}")
                np.testing.assert_allclose(eg, tg, rtol=1e-6, atol=1e-6, err_msg=f"{n} {kw}")


def test_float32_linear_issue_value():
    x = np.random.default_rng(0).standard_normal((1, 1, 12)).astype(np.float32)
    for ac in (False, True):
        t = torch.nn.functional.interpolate(torch.tensor(x), scale_factor=1.7, mode="linear",
                                            align_corners=ac).numpy()
        e = ember.nn.functional.interpolate(ember.tensor(x), scale_factor=1.7, mode="linear",
                                            align_corners=ac).numpy()
        scale = np.spacing(np.abs(t).max())
        assert np.abs(e - t).max() <= 1 * scale     # the sums may round once differently


@pytest.mark.parametrize("mode,shape", [("bilinear", (2, 3, 9, 11)),
                                        ("trilinear", (1, 2, 5, 6, 7))])
def test_float32_values_within_an_ulp_or_two(mode, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    for sf in (0.6, 1.7, 2.5):
        for ac in (False, True):
            kw = dict(scale_factor=sf, mode=mode, align_corners=ac)
            t = torch.nn.functional.interpolate(torch.tensor(x), **kw).numpy()
            e = ember.nn.functional.interpolate(ember.tensor(x), **kw).numpy()
            assert np.abs(e - t).max() <= 4 * np.spacing(np.abs(t).max()), (sf, ac)


def test_float64_and_half_unchanged():
    x = np.random.default_rng(2).standard_normal((2, 3, 10)).astype(np.float64)
    for dtype in ("float64", "float16", "bfloat16"):
        t = torch.nn.functional.interpolate(torch.tensor(x).to(getattr(torch, dtype)),
                                            scale_factor=1.7, mode="linear")
        e = ember.nn.functional.interpolate(ember.tensor(x).to(getattr(ember, dtype)),
                                            scale_factor=1.7, mode="linear")
        tol = 1e-12 if dtype == "float64" else 0
        np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), rtol=tol, atol=tol)


def _error(lib, fn):
    with pytest.raises(Exception) as info:
        fn(lib)
    return type(info.value).__name__, str(info.value).splitlines()[0]


_LOSS_CASES = {
    "1d_int32_target_of_2": lambda lib: lib.nn.functional.nll_loss(
        lib.ones(3), lib.tensor([0, 1], dtype=lib.int32)),
    "1d_int32_target_of_2_ce": lambda lib: lib.nn.functional.cross_entropy(
        lib.ones(3), lib.tensor([0, 1], dtype=lib.int32), label_smoothing=0.1),
    "1d_smoothed_target_of_1": lambda lib: lib.nn.functional.cross_entropy(
        lib.ones(3), lib.tensor([0]), label_smoothing=0.1),
    "1d_smoothed_target_of_1_none": lambda lib: lib.nn.functional.cross_entropy(
        lib.ones(3), lib.tensor([0]), label_smoothing=0.1, reduction="none"),
    "1d_smoothed_half": lambda lib: lib.nn.functional.cross_entropy(
        lib.ones(3, dtype=lib.float16), lib.tensor([0]), label_smoothing=0.1),
    "1d_smoothed_byte_weighted": lambda lib: lib.nn.functional.cross_entropy(
        lib.ones(3), lib.tensor([0], dtype=lib.uint8), weight=lib.ones(3), label_smoothing=0.1),
    "2d_byte_weighted_smoothed_mean": lambda lib: lib.nn.functional.cross_entropy(
        lib.ones(2, 3), lib.tensor([0, 1], dtype=lib.uint8), weight=lib.ones(3),
        label_smoothing=0.1),
    "0d_byte_weighted_smoothed_mean": lambda lib: lib.nn.functional.cross_entropy(
        lib.ones(3, dtype=lib.float64), lib.tensor(1, dtype=lib.uint8),
        weight=lib.ones(3, dtype=lib.float64), label_smoothing=0.1),
    "2d_byte_weighted_smoothed_ignored": lambda lib: lib.nn.functional.cross_entropy(
        lib.ones(2, 3, requires_grad=True), lib.tensor([0, 1], dtype=lib.uint8),
        weight=lib.ones(3), label_smoothing=1.0, ignore_index=0),
    "range_before_smoothing": lambda lib: lib.nn.functional.cross_entropy(
        lib.ones(3), lib.tensor([5]), label_smoothing=0.1),
}


@pytest.mark.parametrize("case", sorted(_LOSS_CASES))
def test_class_target_errors(case):
    assert _error(ember, _LOSS_CASES[case]) == _error(torch, _LOSS_CASES[case])


@pytest.mark.parametrize("reduction", ["sum", "none"])
def test_byte_weighted_smoothing_still_computes(reduction):
    def run(lib):
        x = lib.tensor(np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32))
        return lib.nn.functional.cross_entropy(
            x, lib.tensor([0, 2], dtype=lib.uint8), weight=lib.tensor([1.0, 2.0, 3.0]),
            label_smoothing=0.2, reduction=reduction).numpy()
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-6)
