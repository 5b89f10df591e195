"""nn.attention.bias against PyTorch: materialized masks, the placeholder tensor, attention
outputs and gradients with CausalBias masks, and the errors and warning of wrong usage."""

import warnings

import numpy as np
import pytest

import ember
from tests.parity._compare import ember_names, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

import torch.nn.attention.bias as torch_bias  # noqa: E402

import ember.nn.attention.bias as ember_bias  # noqa: E402

SIZES = [(4, 4), (3, 6), (6, 3), (1, 5), (5, 1)]
FACTORIES = ["causal_upper_left", "causal_lower_right"]


def _both(name, *size):
    """The same bias made by ember and by PyTorch."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(ember_bias, name)(*size), getattr(torch_bias, name)(*size)


def _outcome(fn):
    """What ``fn()`` gives: its value, or its error's type name and message."""
    return outcome(fn, message=ember_names)


def test_names_match():
    assert ember_bias.__all__ == torch_bias.__all__
    assert {v.name: v.value for v in ember_bias.CausalVariant} == \
        {v.name: v.value for v in torch_bias.CausalVariant}


@pytest.mark.parametrize("name", FACTORIES)
@pytest.mark.parametrize("L, S", SIZES + [(0, 3), (2, 0)])
def test_materialized_masks_match(name, L, S):
    ours, theirs = _both(name, L, S)
    np.testing.assert_array_equal(ours._materialize().numpy(), theirs._materialize().numpy())
    assert repr(ours) == repr(theirs).replace("torch.", "ember.")


@pytest.mark.parametrize("name", FACTORIES)
def test_placeholder_matches(name):
    ours, theirs = _both(name, 3, 5)
    assert tuple(ours.shape) == tuple(theirs.shape) and len(ours) == len(theirs)
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    assert type(ours + 1).__name__ == type(theirs + 1).__name__ == "CausalBias"
    assert tuple((ours + 1).shape) == tuple((theirs + 1).shape)
    assert _outcome(lambda: ember.where(ours, 1, 0)) == \
        _outcome(lambda: torch.where(theirs, 1, 0))


def _run(lib, mask, L, S, seed, heads=(2, 2), kv_heads=2, **kwargs):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(heads + (L, 8)),
              rng.standard_normal(heads[:-1] + (kv_heads, S, 8)),
              rng.standard_normal(heads[:-1] + (kv_heads, S, 8))]
    q, k, v = (lib.tensor(a.astype(np.float32), requires_grad=True) for a in arrays)
    out = lib.nn.functional.scaled_dot_product_attention(q, k, v, mask, **kwargs)
    (out * lib.arange(out.numel()).reshape(out.shape).sin()).sum().backward()
    return [t.detach().numpy() for t in (out, q.grad, k.grad, v.grad)]


@pytest.mark.parametrize("name", FACTORIES)
@pytest.mark.parametrize("L, S", SIZES)
@pytest.mark.parametrize("kwargs", [{}, {"scale": 0.25}, {"enable_gqa": True, "kv_heads": 1}])
def test_attention_matches(name, L, S, kwargs):
    ours, theirs = _both(name, L, S)
    for got, want in zip(_run(ember, ours, L, S, L * S, **kwargs),
                         _run(torch, theirs, L, S, L * S, **kwargs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", [
    lambda lib, b: b.causal_upper_left(3),
    lambda lib, b: b.causal_lower_right(1, 2, 3),
    lambda lib, b: b.causal_upper_left((3, 4)),
    lambda lib, b: b.CausalBias(1, 3, 4),
    lambda lib, b: b.causal_upper_left(3.0, 4),
    lambda lib, b: b.causal_lower_right(-1, 4),
    lambda lib, b: lib.nn.functional.scaled_dot_product_attention(
        lib.ones(2, 3), lib.ones(3, 3), lib.ones(3, 3), b.causal_upper_left(2, 3),
        is_causal=True),
    lambda lib, b: lib.nn.functional.scaled_dot_product_attention(
        lib.ones(2, 3), lib.ones(3, 3, dtype=lib.float64), lib.ones(3, 3),
        b.causal_lower_right(2, 3)),
    lambda lib, b: lib.nn.functional.scaled_dot_product_attention(
        lib.ones(3), lib.ones(3), lib.ones(3), b.causal_lower_right(2, 3)),
    lambda lib, b: lib.nn.functional.scaled_dot_product_attention(
        lib.ones(3), lib.ones(3), lib.ones(3), b.causal_lower_right(3, 3)),
    lambda lib, b: lib.nn.functional.scaled_dot_product_attention(
        lib.ones(4, 3), lib.ones(3, 3), lib.ones(3, 3), b.causal_lower_right(2, 3)),
    lambda lib, b: lib.nn.functional.scaled_dot_product_attention(
        lib.ones(1, 4, 2, 3), lib.ones(1, 2, 3, 3), lib.ones(1, 2, 3, 3),
        b.causal_lower_right(2, 3)),
    lambda lib, b: repr(b.causal_lower_right(2, 3) + 1),
])
def test_errors_match(case):
    assert _outcome(lambda: case(ember, ember_bias)) == _outcome(lambda: case(torch, torch_bias))


def test_warning_matches():
    for size in [(5, 3), (3, 5), (3, 3)]:
        with warnings.catch_warnings(record=True) as ours:
            warnings.simplefilter("always")
            ember_bias.causal_lower_right(*size)
        with warnings.catch_warnings(record=True) as theirs:
            warnings.simplefilter("always")
            torch_bias.causal_lower_right(*size)
        assert [(w.category, str(w.message)) for w in ours] == \
            [(w.category, str(w.message)) for w in theirs]
        assert len(ours) == (size[0] > size[1])


@pytest.mark.parametrize("name", FACTORIES)
def test_multihead_attention_matches(name):
    """Neither library's MultiheadAttention takes a CausalBias, except with the is_causal
    hint and no weights, where both drop the mask."""
    theirs_mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    ours_mha = ember.nn.MultiheadAttention(8, 2, batch_first=True)
    ours_mha.load_state_dict({k: ember.tensor(v.detach().numpy())
                              for k, v in theirs_mha.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 4, 8)).astype(np.float32)
    ours, theirs = _both(name, 4, 4)
    message = _outcome(lambda: ours_mha(*[ember.tensor(x)] * 3, attn_mask=ours))
    assert message[0] == "RuntimeError"
    assert message[1].startswith(_outcome(
        lambda: theirs_mha(*[torch.tensor(x)] * 3, attn_mask=theirs))[1])
    got = ours_mha(*[ember.tensor(x)] * 3, attn_mask=ours, is_causal=True, need_weights=False)
    want = theirs_mha(*[torch.tensor(x)] * 3, attn_mask=theirs, is_causal=True,
                      need_weights=False)
    np.testing.assert_allclose(got[0].detach().numpy(), want[0].detach().numpy(), rtol=1e-4,
                               atol=1e-5)
