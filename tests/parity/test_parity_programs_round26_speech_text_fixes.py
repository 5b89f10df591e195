"""What the speech / text / diffusion programs of round 26
(test_parity_programs_round26_speech_text*.py) found in bfloat16, each pinned bit for bit against
PyTorch: batch normalization with bfloat16 statistics (no weight, or bfloat16 weight) takes the
variance from a bfloat16-rounded sum of squared deviations divided in bfloat16, and bfloat16
``pow`` with a number exponent of 3 or -2 multiplies, rounding the square first; bfloat16
running statistics are blended in bfloat16 arithmetic (momentum, products and sum rounded);
float16/bfloat16 linear and trilinear interpolation keep lambda in the input's dtype."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

SHAPES = [(3, 4, 8), (2, 3, 7), (1, 3, 25), (4, 2, 5, 3), (2, 5)]


def _bits(t):
    return t.detach().float().numpy()


def _batch_norm(lib, a, weight, running):
    x = lib.from_numpy(a).to(lib.bfloat16).requires_grad_()
    c = a.shape[1]
    w = None
    if weight:
        w = lib.from_numpy(np.linspace(0.5, 1.5, c).astype(np.float32)).to(
            getattr(lib, weight)).requires_grad_()
    rm = rv = None
    if running:
        rm, rv = lib.zeros(c, dtype=lib.bfloat16), lib.ones(c, dtype=lib.bfloat16)
    y, mean, invstd = lib.native_batch_norm(x, w, None, rm, rv, True, 0.1, 1e-5)
    g = lib.from_numpy(np.cos(np.arange(y.numel())).reshape(a.shape).astype(np.float32))
    (y.float() * g).sum().backward()
    return [_bits(y), _bits(mean), _bits(invstd), _bits(x.grad), str(invstd.dtype)[-8:]]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("weight,running", [(None, False), ("bfloat16", False), (None, True)])
def test_bfloat16_batch_norm_statistics_match_torch(shape, weight, running):
    a = (np.random.default_rng(len(shape) * 7 + shape[-1]).standard_normal(shape) * 4 + 1.5)
    a = a.astype(np.float32)
    ours, theirs = _batch_norm(ember, a, weight, running), _batch_norm(torch, a, weight, running)
    assert ours[4] == theirs[4] == "bfloat16"
    for k in range(3):                       # output, saved mean, saved invstd: bit for bit
        np.testing.assert_array_equal(ours[k], theirs[k])
    np.testing.assert_allclose(ours[3], theirs[3], rtol=2 ** -7, atol=1e-3)


def test_bfloat16_batch_norm_module_in_a_conformer_conv():
    """BatchNorm1d of a bfloat16 model (its weight bfloat16 too) after a depthwise conv."""
    rng = np.random.default_rng(26)
    a = rng.standard_normal((2, 6, 9)).astype(np.float32) * 3
    outs = []
    for lib in (ember, torch):
        conv = lib.nn.Conv1d(6, 6, 3, padding=1, groups=6, bias=False)
        bn = lib.nn.BatchNorm1d(6)
        with lib.no_grad():
            conv.weight.copy_(lib.from_numpy(rng.standard_normal((6, 1, 3)).astype(np.float32)))
        model = lib.nn.Sequential(conv, bn, lib.nn.SiLU()).to(lib.bfloat16)
        outs.append(_bits(model(lib.from_numpy(a).to(lib.bfloat16))))
        rng = np.random.default_rng(26)
        rng.standard_normal((2, 6, 9))
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("exponent", [3, -2, 3.0, -2.0, 2, -1, -3, 0.5, 1.5])
def test_bfloat16_pow_number_exponent_matches_torch(exponent):
    a = (np.random.default_rng(5).standard_normal(500) * 3).astype(np.float32)
    a[:4] = [0.0, -0.0, np.inf, -np.inf]
    results = []
    for lib in (ember, torch):
        x = lib.from_numpy(a).to(lib.bfloat16)
        y = x.clone()
        y.pow_(exponent)
        results.append([_bits(x.pow(exponent)), _bits(x ** exponent), _bits(y)])
    for ours, theirs in zip(*results):
        np.testing.assert_array_equal(ours, theirs)


def test_bfloat16_pow_three_gradient_matches_torch():
    a = (np.random.default_rng(6).standard_normal(64) * 2).astype(np.float32)
    grads = []
    for lib in (ember, torch):
        x = lib.from_numpy(a).to(lib.bfloat16).requires_grad_()
        (x.pow(3) - x.pow(-2)).float().sum().backward()
        grads.append(_bits(x.grad))
    np.testing.assert_array_equal(grads[0], grads[1])


def _running(lib, seed):
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 5)), 3, int(rng.integers(2, 30)))
    a = (rng.standard_normal(shape) * rng.uniform(0.1, 10) + rng.uniform(-3, 3)).astype(np.float32)
    rm = lib.from_numpy(rng.standard_normal(3).astype(np.float32)).to(lib.bfloat16)
    rv = lib.from_numpy(rng.uniform(0.5, 2, 3).astype(np.float32)).to(lib.bfloat16)
    lib.nn.functional.batch_norm(lib.from_numpy(a).to(lib.bfloat16), rm, rv, training=True,
                                 momentum=0.1)
    return _bits(rm), _bits(rv)


@pytest.mark.parametrize("seed", range(12))
def test_bfloat16_running_mean_blends_in_bfloat16(seed):
    np.testing.assert_array_equal(_running(ember, seed)[0], _running(torch, seed)[0])


@pytest.mark.xfail(strict=True, reason="bfloat16 running_var: PyTorch's rounding of the "
                   "unbiased variance is matched in about 3 of 5 batches only")
def test_bfloat16_running_var_blends_like_torch():
    for seed in range(40):
        np.testing.assert_array_equal(_running(ember, seed)[1], _running(torch, seed)[1])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("mode,shape,kwargs", [
    ("linear", (2, 3, 11), dict(scale_factor=1.5)),
    ("linear", (2, 3, 11), dict(size=21, align_corners=True)),
    ("linear", (2, 3, 11), dict(scale_factor=0.7)),
    ("trilinear", (1, 2, 5, 4, 6), dict(scale_factor=1.5)),
    ("trilinear", (1, 2, 5, 4, 6), dict(size=(9, 7, 11), align_corners=True)),
], ids=str)
def test_16_bit_linear_interpolation_keeps_lambda_in_its_dtype(dtype, mode, shape, kwargs):
    """A vocoder's upsampling in half precision: PyTorch's CPU kernel rounds lambda1 to the
    input's dtype and takes lambda0 = 1 - lambda1 there too."""
    a = (np.random.default_rng(len(shape)).standard_normal(shape) * 3).astype(np.float32)
    outs = []
    for lib in (ember, torch):
        x = lib.from_numpy(a).to(getattr(lib, dtype)).requires_grad_()
        y = lib.nn.functional.interpolate(x, mode=mode, **kwargs)
        y.float().pow(2).sum().backward()
        outs.append((_bits(y), _bits(x.grad)))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    # the backward sums several products per input: an ulp apart now and then
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=2 ** -7, atol=0.07)
