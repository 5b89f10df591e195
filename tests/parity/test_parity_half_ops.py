"""float16/bfloat16 values, errors and gradients against PyTorch's CPU kernels, where ember once
differed by more than rounding: intermediates PyTorch rounds (ndtr), sums NumPy would add in
bfloat16, kernels PyTorch lacks for 16-bit floats, and fused backward kernels."""


import numpy as np
import pytest

import ember
from tests.parity._compare import dtype_name, ember_names, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

HALVES = ["float16", "bfloat16"]


def _values(lib, values, dtype, requires_grad=False):
    return lib.tensor(values).to(getattr(lib, dtype)).requires_grad_(requires_grad)


def _floats(t):
    return np.asarray(t.detach().float().numpy(), dtype=np.float64)


def _outcome(lib, fn):
    """(result dtype name, values) or (exception type name, message)."""
    return outcome(fn, lib, quiet=True, message=ember_names,
                   describe=lambda r: (dtype_name(r.dtype), _floats(r).tolist()))


@pytest.mark.parametrize("dtype", HALVES)
def test_ndtr_rounds_each_step_as_torch(dtype):
    # (1 + erf(x / sqrt 2)) / 2 with every step rounded: 0 and 1 exactly far from 0
    xs = np.concatenate([np.linspace(-8, 8, 1601), [np.inf, -np.inf, -0.0]])
    ours = _floats(ember.special.ndtr(_values(ember, xs, dtype)))
    theirs = _floats(torch.special.ndtr(_values(torch, xs, dtype)))
    np.testing.assert_array_equal(ours, theirs)


def test_ndtr_follows_torch_in_the_float32_tail():
    # PyTorch's ndtr is 0 below about -5.6 in float32 (1 + erf rounds to 0), not 1e-8
    xs = np.array([-7.0, -6.0, -5.8, 0.5, 9.0])
    ours = _floats(ember.special.ndtr(ember.tensor(xs, dtype=ember.float32)))
    theirs = _floats(torch.special.ndtr(torch.tensor(xs, dtype=torch.float32)))
    np.testing.assert_array_equal(ours[:3], theirs[:3])
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


MARGIN_LOSSES = {
    "multi_margin": lambda L, x: L.nn.functional.multi_margin_loss(x, L.tensor([0, 1, 2])),
    "multilabel_margin": lambda L, x: L.nn.functional.multilabel_margin_loss(
        x, L.zeros(3, 4, dtype=L.int64)),
}


@pytest.mark.parametrize("dtype", HALVES + ["int64"])
@pytest.mark.parametrize("name", sorted(MARGIN_LOSSES))
def test_margin_losses_have_no_16_bit_or_integer_kernel(name, dtype):
    def call(L):
        return MARGIN_LOSSES[name](L, L.ones(3, 4, dtype=getattr(L, dtype)))
    ours, theirs = _outcome(ember, call), _outcome(torch, call)
    assert ours == theirs
    assert ours[0] == "NotImplementedError"


LINALG_ERRORS = {
    "rank_rtol": lambda L, x: L.linalg.matrix_rank(x, rtol=0.1),
    "rank_tol": lambda L, x: L.linalg.matrix_rank(x, 0.01),
    "rank_tol_hermitian": lambda L, x: L.linalg.matrix_rank(x, 0.01, True),
    "rank_tol_empty": lambda L, x: L.linalg.matrix_rank(x[:0], 0.01),
    "rank_default": lambda L, x: L.linalg.matrix_rank(x),
    "cond_nuc": lambda L, x: L.linalg.cond(x, "nuc"),
    "cond_fro": lambda L, x: L.linalg.cond(x, "fro"),
    "lstsq": lambda L, x: L.linalg.lstsq(x, x),
    "lstsq_rcond": lambda L, x: L.linalg.lstsq(x, x, 0.01, driver="gelsd"),
    "lstsq_rcond_empty": lambda L, x: L.linalg.lstsq(x[:0], x[:0], 0.01),
}


@pytest.mark.parametrize("dtype", HALVES + ["int64"])
@pytest.mark.parametrize("name", sorted(LINALG_ERRORS))
def test_linalg_16_bit_errors_come_from_the_kernel_torch_reaches_first(name, dtype):
    def call(L):
        return LINALG_ERRORS[name](L, L.eye(3, dtype=getattr(L, dtype)))
    assert _outcome(ember, call) == _outcome(torch, call)


BF16_LOSSES = {
    "bce_with_logits": lambda L, x, r: L.nn.functional.binary_cross_entropy_with_logits(
        x, L.zeros_like(x), reduction=r),
    "soft_margin": lambda L, x, r: L.nn.functional.soft_margin_loss(x, L.ones_like(x),
                                                                     reduction=r),
}


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("name", sorted(BF16_LOSSES))
def test_16_bit_loss_reductions_accumulate_in_float32(name, reduction):
    # NumPy adds bfloat16 arrays in bfloat16: their sum stopped growing at 256 or 512
    values = np.full(1000, 1.001)

    def call(L):
        return BF16_LOSSES[name](L, _values(L, values, "bfloat16"), reduction)
    assert _outcome(ember, call) == _outcome(torch, call)


@pytest.mark.parametrize("dtype", HALVES)
def test_embedding_bag_mean_counts_large_bags(dtype):
    # the bag size was counted in the weight's dtype: bfloat16 stops at 256
    weight = np.array([[1.0, 1.5], [2.0, 0.25]])
    index = np.zeros((1, 300), dtype=np.int64)

    def call(L):
        return L.nn.functional.embedding_bag(L.tensor(index), _values(L, weight, dtype),
                                             mode="mean")
    assert _outcome(ember, call) == _outcome(torch, call)


def _grads(lib, fn, xs, gs, dtype):
    x = _values(lib, xs, dtype, requires_grad=True)
    g, = lib.autograd.grad(fn(lib, x), x, _values(lib, gs, dtype))
    return _floats(g)


FUSED_BACKWARDS = {
    "tanh": lambda L, x: L.tanh(x), "sigmoid": lambda L, x: L.sigmoid(x),
    "silu": lambda L, x: L.nn.functional.silu(x), "mish": lambda L, x: L.nn.functional.mish(x),
    "hardswish": lambda L, x: L.nn.functional.hardswish(x),
    "softplus": lambda L, x: L.nn.functional.softplus(x),
    "elu": lambda L, x: L.nn.functional.elu(x), "selu": lambda L, x: L.nn.functional.selu(x),
    "celu": lambda L, x: L.nn.functional.celu(x, 0.7),
}


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("name", sorted(FUSED_BACKWARDS))
def test_fused_16_bit_backward_rounds_like_torch(name, dtype):
    # PyTorch's backward kernels compute in float32 and round once (float16 sigmoid rounds
    # each product); ember's formula in 16-bit ops rounded every step, off by several ulps
    rng = np.random.default_rng(0)
    xs, gs = rng.standard_normal(4000) * 3, rng.standard_normal(4000)
    ours = _grads(ember, FUSED_BACKWARDS[name], xs, gs, dtype)
    theirs = _grads(torch, FUSED_BACKWARDS[name], xs, gs, dtype)
    ulp = 2.0 ** (-10 if dtype == "float16" else -7)
    # (at most 2 of 4000 float16 values differ, by one ulp, from float32 math libraries)
    close = np.abs(ours - theirs) <= ulp * np.abs(theirs)
    assert close.all() and np.count_nonzero(ours != theirs) <= 2


@pytest.mark.parametrize("dtype", HALVES)
def test_silu_16_bit_gradient_with_create_graph_rounds_each_step_like_torch(dtype):
    # with grad mode on PyTorch composes silu's backward of rounding ops (so that it can be
    # differentiated again); only a plain backward takes the fused kernel
    xs = np.random.default_rng(0).standard_normal(512) * 3

    def grad(lib):
        x = _values(lib, xs, dtype, requires_grad=True)
        g, = lib.autograd.grad(lib.nn.functional.silu(x).sum(), x, create_graph=True)
        return np.array(g.float().tolist())
    assert np.array_equal(grad(ember), grad(torch))


@pytest.mark.parametrize("dtype", HALVES)
def test_sdpa_16_bit_backward_forms_row_sums_in_float32(dtype):
    # PyTorch's CPU math kernel (3-D inputs) differentiates in float32; ember's row sums
    # read the rounded output and lost up to 50x the precision near cancellation
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(s) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 4)))
    gout = rng.standard_normal((2, 3, 4))

    def grads(lib):
        ts = [_values(lib, a, dtype, requires_grad=True) for a in (q, k, v)]
        out = lib.nn.functional.scaled_dot_product_attention(*ts)
        return [_floats(g) for g in lib.autograd.grad(out, ts, _values(lib, gout, dtype))]
    ulp = 2.0 ** (-10 if dtype == "float16" else -7)
    for ours, theirs in zip(grads(ember), grads(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=2 * ulp, atol=2 * ulp * 1e-2)
