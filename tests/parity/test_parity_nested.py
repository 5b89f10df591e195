"""``torch.nested`` for dense components: building, padding and unbinding nested tensors give
PyTorch's values, sizes, errors and gradients."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _nested(lib, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # PyTorch's prototype warning
        return lib.nested.nested_tensor([lib.arange(6.0).reshape(2, 3),
                                         lib.arange(3.0).reshape(1, 3)], **kwargs)


def _facts(lib):
    nt = _nested(lib)
    return [nt.is_nested, nt.dim(), nt.size(0), nt.size(2), nt.size(-1), nt.is_leaf,
            nt.requires_grad, repr(nt).replace("torch", "ember"),
            lib.nested.to_padded_tensor(nt, -1.0).tolist(),
            nt.to_padded_tensor(0.0, output_size=(2, 3, 4)).tolist(),
            [t.tolist() for t in nt.unbind()],
            str(_nested(lib, dtype=lib.float64).dtype).split(".")[-1],
            lib.nested.as_nested_tensor(lib.ones(2, 3, 4)).to_padded_tensor(0).shape[1:]]


def test_nested_tensor_matches_torch():
    assert _facts(ember) == _facts(torch)


def test_irregular_sizes_and_mixed_dims_raise_alike():
    for lib in (ember, torch):
        nt = _nested(lib)
        with pytest.raises(RuntimeError, match="dimension 1 is irregular"):
            nt.size(1)
        with pytest.raises(RuntimeError, match="doesn't support sizes"):
            nt.size()
        with pytest.raises(RuntimeError, match="must have the same dimension. Found dimension 2"):
            lib.nested.nested_tensor([lib.ones(2), lib.ones(2, 2)])


def test_as_nested_tensor_keeps_gradients():
    grads = []
    for lib in (ember, torch):
        x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        y = lib.tensor([[5.0, 6.0]], requires_grad=True)
        padded = lib.nested.as_nested_tensor([x * 2, y]).to_padded_tensor(0.0)
        (padded * lib.arange(1.0, 9.0).reshape(2, 2, 2)).sum().backward()
        grads.append((x.grad.numpy(), y.grad.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b)


def _graph_facts(lib):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        b = lib.tensor([[5.0, 6.0]])
        packed = lib.nested.as_nested_tensor([a, b])
        plain = lib.nested.as_nested_tensor([a.detach(), b])
        leaf = lib.nested.nested_tensor([a, b], requires_grad=True)
        facts = [(nt.is_leaf, nt.requires_grad) for nt in (packed, plain, leaf)]
        facts.append(leaf.grad is None)
        sum(t.sum() * 2 for t in leaf.unbind()).backward()
        return facts + [[g.tolist() for g in leaf.grad.unbind()]]


def test_as_nested_tensor_of_grad_requiring_leaves_is_not_a_leaf():
    assert _graph_facts(ember) == _graph_facts(torch)


def _refusal(call):
    try:
        call()
    except (RuntimeError, IndexError, TypeError) as error:
        return type(error).__name__, str(error)
    return None


def _method_facts(lib):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nt = _nested(lib)
        pad = lib.nested.to_padded_tensor
        refusals = [_refusal(c) for c in (
            lambda: nt.unbind(1), lambda: nt.size(3), lambda: nt[2], lambda: len(nt),
            lambda: nt.stride(), lambda: pad(nt, 0.0, (2, 1, 3)), lambda: pad(nt, 0.0, (2, 3)),
            lambda: lib.nested.as_nested_tensor(5), lambda: lib.nested.as_nested_tensor([1]))]
        converted = nt.to(lib.float64)
        return refusals + [nt[-1].tolist(), nt.is_contiguous(), str(converted.dtype)[-7:],
                           [t.tolist() for t in nt.clone().unbind()], nt.detach().is_leaf,
                           nt.size(-3)]


def test_nested_methods_and_refusals_match_torch():
    assert _method_facts(ember) == _method_facts(torch)


def _reprs(lib):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ones = lib.ones
        return [repr(lib.nested.nested_tensor([ones(2), ones(3)], requires_grad=True)),
                repr(lib.nested.as_nested_tensor([ones(2, requires_grad=True), ones(3)])),
                repr(lib.nested.nested_tensor([ones(2), ones(3)])),
                repr(lib.nested.nested_tensor([ones(2, 2), ones(3, 2)], dtype=lib.float64,
                                              requires_grad=True))]


def test_nested_reprs_match_torch():
    assert _reprs(ember) == [r.replace("torch.", "ember.") for r in _reprs(torch)]


def test_requires_grad_of_a_non_leaf_nested_tensor_is_refused():
    def attempt(lib):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = lib.ones(2, 3, requires_grad=True)
            nt = lib.nested.as_nested_tensor([a, lib.ones(1, 3)])
        try:
            nt.requires_grad_(False)
        except RuntimeError as e:
            return str(e)[:50], a.requires_grad
        return None, a.requires_grad
    assert attempt(ember) == attempt(torch)
