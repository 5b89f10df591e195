"""cosine_similarity, pairwise_distance, pdist and their modules."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from ember.autograd import gradcheck

D = ember.float64


def test_cosine_similarity():
    a, b = ember.randn(3, 4, dtype=D, requires_grad=True), ember.randn(4, dtype=D)
    an, bn = a.detach().numpy(), b.numpy()
    want = (an * bn).sum(1) / np.linalg.norm(an, axis=1) / np.linalg.norm(bn)
    np.testing.assert_allclose(F.cosine_similarity(a, b.expand(3, 4)).detach().numpy(), want)
    np.testing.assert_allclose(ember.cosine_similarity(a, b, dim=-1).detach().numpy(), want)
    assert F.cosine_similarity(a, ember.zeros(3, 4, dtype=D)).tolist() == [0, 0, 0]
    assert gradcheck(lambda a, b: F.cosine_similarity(a, b, 0),
                     (a, ember.randn(3, 4, dtype=D, requires_grad=True)))
    m = nn.CosineSimilarity(dim=0, eps=1e-6)
    assert repr(m) == "CosineSimilarity()" and m.dim == 0
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of "
                                           r"tensor b \(4\) at non-singleton dimension 1"):
        F.cosine_similarity(ember.randn(2, 3), ember.randn(2, 4))


def test_pairwise_distance():
    a, b = ember.randn(3, 4, dtype=D, requires_grad=True), ember.randn(3, 4, dtype=D)
    an, bn = a.detach().numpy(), b.numpy()
    for p in (2.0, 1.0, 3.0):
        want = (np.abs(an - bn + 1e-6) ** p).sum(-1) ** (1 / p)
        np.testing.assert_allclose(F.pairwise_distance(a, b, p).detach().numpy(), want)
    assert F.pairwise_distance(a, b, keepdim=True).shape == (3, 1)
    assert F.pairwise_distance(ember.randn(3), ember.randn(3)).shape == ()
    assert gradcheck(lambda a: F.pairwise_distance(a, b, 1.5), (a,))
    m = nn.PairwiseDistance(p=1.0, keepdim=True)
    assert m.norm == 1.0 and m(a, b).shape == (3, 1)
    assert ember.pairwise_distance is F.pairwise_distance


def test_pdist_functional():
    x = ember.randn(4, 3, dtype=D)
    xn = x.numpy()
    i, j = np.triu_indices(4, 1)
    np.testing.assert_allclose(F.pdist(x).numpy(), np.linalg.norm(xn[i] - xn[j], axis=1))


def test_cosine_similarity_promotes_integer_and_bool_operands():
    a = ember.tensor([[1, 0, 2], [3, 1, 1]])
    b = ember.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]], dtype=ember.float16)
    got = F.cosine_similarity(a, b)
    assert got.dtype is ember.float16
    np.testing.assert_allclose(got.float().tolist(), [0.3162, 0.8528], atol=1e-3)
    got = F.cosine_similarity(b.bool(), b.bfloat16())
    assert got.dtype is ember.bfloat16 and got.float().tolist() == [1.0, 1.0]
    assert F.cosine_similarity(b, b.bfloat16()).dtype is ember.float32


@pytest.mark.parametrize("x1, x2, common", [
    (ember.ones(2, 2, dtype=ember.int64), ember.ones(2, 2, dtype=ember.bool), "Long"),
    (ember.ones(2, 2, dtype=ember.uint8), ember.ones(2, 2, dtype=ember.uint8), "Byte"),
    (ember.ones(2, 2), ember.ones(2, 2, dtype=ember.complex64), "ComplexFloat"),
])
def test_cosine_similarity_refuses_a_non_floating_common_dtype(x1, x2, common):
    with pytest.raises(RuntimeError) as info:
        F.cosine_similarity(x1, x2)
    assert str(info.value) == ("expected common dtype to be floating point, yet common dtype "
                               f"is {common}")


def test_cosine_similarity_gradient_of_a_norm_under_eps():
    # PyTorch clamps the norms under no_grad: a norm below eps still passes on the gradient of
    # the true norm, x / |x|, besides the direct term
    x = np.array([[3e-5, -4e-5, 1e-5], [0.3, 0.4, -0.2]])
    y = np.array([[1.0, 2.0, -0.5], [0.2, -0.1, 0.3]])
    eps, w = 1e-3, np.array([1.0, 2.0])
    a, b = ember.tensor(x, requires_grad=True), ember.tensor(y)
    (F.cosine_similarity(a, b, dim=1, eps=eps) * ember.tensor(w)).sum().backward()
    nx, ny = np.linalg.norm(x, axis=1, keepdims=True), np.linalg.norm(y, axis=1, keepdims=True)
    cx, cy = np.maximum(nx, eps), np.maximum(ny, eps)
    dot = (x * y).sum(1, keepdims=True)
    want = w[:, None] * (y / (cx * cy) - dot / (cx ** 2 * cy) * x / nx)
    np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-10)
