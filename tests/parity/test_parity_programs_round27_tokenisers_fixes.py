"""What the tokeniser programs of round 27 (test_parity_programs_round27_tokenisers.py and its
_audio sibling) found, each pinned against PyTorch: ``torch.legacy_contiguous_format`` (which
F.gumbel_softmax's reference code passes to zeros_like) is contiguous_format under another
name; F.gumbel_softmax draws its noise through ``empty_like(...).exponential_()`` as PyTorch's
does, so that integer and complex logits raise PyTorch's error, 0-dim logits work, and vmap's
randomness modes and the generator stream are those of exponential_."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def test_legacy_contiguous_format_is_contiguous_format():
    for lib in (ember, torch):
        assert lib.legacy_contiguous_format is lib.contiguous_format
        x = lib.zeros(2, 3).t()
        assert lib.zeros_like(x, memory_format=lib.legacy_contiguous_format).stride() == (2, 1)
    assert repr(ember.legacy_contiguous_format) == "ember.contiguous_format"
    assert "legacy_contiguous_format" in dir(ember)


@pytest.mark.parametrize("dtype", ["long", "int32", "complex64", "bool"])
def test_gumbel_softmax_rejects_non_floating_logits(dtype):
    errors = []
    for lib in (ember, torch):
        with pytest.raises(RuntimeError) as info:
            lib.nn.functional.gumbel_softmax(lib.zeros(2, 3, dtype=getattr(lib, dtype)))
        errors.append(str(info.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax_zero_dim(hard):
    for lib in (ember, torch):
        y = lib.nn.functional.gumbel_softmax(lib.tensor(0.3, requires_grad=True), hard=hard)
        assert y.shape == () and y.item() == pytest.approx(1.0)
        y.backward()


@pytest.mark.parametrize("randomness", ["same", "different"])
def test_gumbel_softmax_under_vmap(randomness):
    got = []
    for lib in (ember, torch):
        f = lib.func.vmap(lambda x: lib.nn.functional.gumbel_softmax(x, hard=True),
                          randomness=randomness)
        y = f(lib.zeros(64, 5))
        got.append((tuple(y.shape), bool((y.sum(-1) == 1).all()),
                    bool((y == y[0]).all())))
    assert got[0] == got[1]
    with pytest.raises(RuntimeError, match="randomness error mode"):
        ember.func.vmap(ember.nn.functional.gumbel_softmax)(ember.zeros(2, 3))


def test_gumbel_softmax_noise_is_exponential_draws():
    """The same generator draws as ``empty_like(logits).exponential_()``, in both libraries."""
    rng = np.random.default_rng(0)
    value = rng.standard_normal((4, 6)).astype(np.float32)
    for lib in (ember, torch):
        logits = lib.from_numpy(value)
        lib.manual_seed(7)
        y = lib.nn.functional.gumbel_softmax(logits, tau=0.5, dim=0)
        after = lib.rand(3)
        lib.manual_seed(7)
        g = -lib.empty_like(logits).exponential_().log()
        expected = lib.softmax((logits + g) / 0.5, dim=0)
        np.testing.assert_allclose(y.numpy(), expected.numpy(), rtol=1e-6)
        assert lib.equal(after, lib.rand(3))
