"""nn.utils.parametrizations.orthogonal: every map keeps the weight orthogonal (unitary),
through assignment, gradients, training and state_dict round trips."""

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.nn.utils import parametrize
from ember.nn.utils.parametrizations import orthogonal

MAPS = ("matrix_exp", "cayley", "householder")
SHAPES = ((4, 4), (5, 3), (3, 5))           # (out_features, in_features): square, tall, wide


def _gram_error(w):
    """How far a weight is from orthonormal columns (tall) or rows (wide)."""
    w = np.asarray(w.detach())
    gram = w.conj().swapaxes(-1, -2) @ w if w.shape[-2] >= w.shape[-1] else \
        w @ w.conj().swapaxes(-1, -2)
    return np.abs(gram - np.eye(gram.shape[-1])).max()


def _orthonormal_part(w):
    """The Q of w = QR (of w^T when wide) with R's diagonal positive."""
    wide = w.shape[-2] < w.shape[-1]
    a = w.swapaxes(-1, -2) if wide else w
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diagonal(r, 0, -2, -1).real)[..., None, :]
    return q.swapaxes(-1, -2) if wide else q


def _linear(shape, dtype=ember.float32):
    ember.manual_seed(0)
    return nn.Linear(shape[1], shape[0], dtype=dtype)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("orthogonal_map", MAPS)
@pytest.mark.parametrize("use_trivialization", [True, False])
def test_weight_is_orthogonal(shape, orthogonal_map, use_trivialization):
    m = _linear(shape)
    w0 = m.weight.detach().clone()
    orthogonal(m, orthogonal_map=orthogonal_map, use_trivialization=use_trivialization)
    assert m.weight.shape == shape and m.weight.dtype is ember.float32
    assert _gram_error(m.weight) < 1e-5
    if use_trivialization or orthogonal_map == "householder":
        # registering keeps the weight's orthogonal part (the maps without trivialization
        # have no inverse and transform the weight instead)
        np.testing.assert_allclose(m.weight.detach().numpy(), _orthonormal_part(w0.numpy()),
                                   atol=1e-5)


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", None])
@pytest.mark.parametrize("shape", SHAPES)
def test_complex_weight_is_unitary(orthogonal_map, shape):
    m = _linear(shape, ember.complex64)
    w0 = m.weight.detach().clone()
    orthogonal(m, orthogonal_map=orthogonal_map)
    assert m.weight.dtype is ember.complex64
    assert _gram_error(m.weight) < 1e-5
    np.testing.assert_allclose(m.weight.detach().numpy(), _orthonormal_part(w0.numpy()),
                               atol=1e-5)


def test_batch_of_matrices():
    m = nn.Module()
    m.weight = nn.Parameter(ember.randn(2, 3, 5, 4, dtype=ember.float64))
    w0 = m.weight.detach().numpy()
    for orthogonal_map in MAPS:     # each starts from the last one's (orthogonal) weight
        orthogonal(m, orthogonal_map=orthogonal_map)
        assert _gram_error(m.weight) < 1e-12
        np.testing.assert_allclose(m.weight.detach().numpy(), _orthonormal_part(w0),
                                   atol=1e-12)
        parametrize.remove_parametrizations(m, "weight")


def test_default_map_and_layout():
    square, tall, cplx = _linear((3, 3)), _linear((4, 2)), _linear((4, 2), ember.complex64)
    for m, want in ((square, "matrix_exp"), (tall, "householder"), (cplx, "matrix_exp")):
        orthogonal(m)
        assert m.parametrizations.weight[0].orthogonal_map == want
    assert "(0): _Orthogonal()" in repr(tall)
    assert type(tall).__name__ == "ParametrizedLinear"
    assert list(tall.state_dict()) == ["bias", "parametrizations.weight.original",
                                       "parametrizations.weight.0.base"]
    # the trivialization stores the weight's orthogonal part and sets X to minus the identity
    np.testing.assert_array_equal(tall.parametrizations.weight.original.detach().numpy(),
                                  -np.eye(4, 2))
    assert tall.parametrizations.weight[0].base.shape == (4, 4)
    plain = orthogonal(_linear((4, 2)), use_trivialization=False)
    assert list(plain.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert not hasattr(plain.parametrizations.weight[0], "base")


@pytest.mark.parametrize("orthogonal_map", MAPS)
@pytest.mark.parametrize("use_trivialization", [True, False])
def test_gradients_reach_the_original(orthogonal_map, use_trivialization):
    m = orthogonal(_linear((4, 3), ember.float64), orthogonal_map=orthogonal_map,
                   use_trivialization=use_trivialization)
    m(ember.randn(6, 3, dtype=ember.float64)).pow(2).sum().backward()
    original = m.parametrizations.weight.original
    assert original.grad is not None and original.grad.abs().sum().item() > 1e-3
    if use_trivialization:
        assert not m.parametrizations.weight[0].base.requires_grad
    x = original.detach().clone()
    if orthogonal_map == "householder":
        # the diagonal is read as integer signs, flat between integers: away from -1, where
        # a small step changes the sign, the finite differences see that flat gradient too
        x.diagonal().fill_(-1.5)
    assert ember.autograd.gradcheck(m.parametrizations.weight[0], (x.requires_grad_(),))


@pytest.mark.parametrize("orthogonal_map", MAPS)
def test_training_keeps_the_weight_orthogonal(orthogonal_map):
    ember.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 6), nn.Tanh(),
                          nn.Linear(6, 1))
    orthogonal(model[2], orthogonal_map=orthogonal_map)
    opt = ember.optim.Adam(model.parameters(), lr=0.05)
    x = ember.randn(32, 4)
    y = x[:, :1] * x[:, 1:2] + x[:, 2:3].sin()
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        assert _gram_error(model[2].weight) < 1e-5
    assert losses[-1] < 0.5 * losses[0]
    assert not np.allclose(model[2].parametrizations.weight.original.detach().numpy(),
                           -np.eye(6), atol=1e-3)       # the original itself was trained


@pytest.mark.parametrize("orthogonal_map", MAPS)
def test_state_dict_round_trip(orthogonal_map):
    a = orthogonal(_linear((5, 3)), orthogonal_map=orthogonal_map)
    with ember.no_grad():
        a.parametrizations.weight.original.add_(0.1 * ember.randn(5, 3))
    ember.manual_seed(7)
    b = orthogonal(nn.Linear(3, 5), orthogonal_map=orthogonal_map)
    assert not np.allclose(a.weight.detach().numpy(), b.weight.detach().numpy())
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.weight.detach().numpy(), b.weight.detach().numpy())
    x = ember.randn(2, 3)
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())


def test_assignment_stores_the_orthogonal_part():
    m = orthogonal(_linear((5, 3)))
    new = ember.randn(5, 3)
    m.weight = new
    np.testing.assert_allclose(m.weight.detach().numpy(), _orthonormal_part(new.numpy()),
                               atol=1e-5)
    q = ember.tensor(_orthonormal_part(np.random.default_rng(0).standard_normal((4, 4))),
                     dtype=ember.float32)
    m = orthogonal(_linear((4, 4)))
    m.weight = q                            # already orthogonal: kept as it is
    np.testing.assert_array_equal(m.parametrizations.weight[0].base.numpy(), q.numpy())
    m = orthogonal(_linear((5, 3)), use_trivialization=False)
    m.weight = new
    np.testing.assert_allclose(m.weight.detach().numpy(), _orthonormal_part(new.numpy()),
                               atol=1e-5)


def test_errors():
    with pytest.raises(ValueError, match='orthogonal_map has to be one of "matrix_exp", '
                                         '"cayley", "householder". Got: foo'):
        orthogonal(_linear((3, 3)), orthogonal_map="foo")
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices. Got a tensor "
                                         "of 1 dimensions."):
        orthogonal(_linear((3, 3)), name="bias")
    with pytest.raises(ValueError, match=r"Module 'Linear\(in_features=3, out_features=3, "
                                         r"bias=True\)' has no parameter or buffer with name "
                                         r"'nope'"):
        orthogonal(_linear((3, 3)), name="nope")
    with pytest.raises(ValueError, match="The householder parametrization does not support "
                                         "complex tensors."):
        orthogonal(_linear((4, 3), ember.complex64), orthogonal_map="householder")
    m = orthogonal(_linear((4, 3)))
    with pytest.raises(ValueError, match=r"Expected a matrix or batch of matrices of shape "
                                         r"ember.Size\(\[4, 3\]\). Got a tensor of shape "
                                         r"ember.Size\(\[4, 4\]\)."):
        m.weight = ember.randn(4, 4)
    m = orthogonal(_linear((4, 3)), orthogonal_map="cayley", use_trivialization=False)
    with pytest.raises(NotImplementedError, match="It is not possible to assign to the matrix "
                                                  "exponential or the Cayley parametrizations "
                                                  "when use_trivialization=False."):
        m.weight = ember.randn(4, 3)
