"""Parameters PyTorch types as Number (Scalar) or float, given tensors and other numbers: a
0-dim tensor that does not require grad is read as its value; one that requires grad, or has
a dim, is refused with a TypeError (so no gradient is silently dropped); NumPy scalars are
numbers (and do not widen the result), NumPy arrays are not. The same program runs on both
libraries and must give the same values, or the same exception and message."""

import numpy as np
import pytest

import ember
from tests.parity._compare import dtype_name, first_line, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_KINDS = {
    "tensor0": lambda L: L.tensor(0.5),
    "tensor0_grad": lambda L: L.tensor(0.5, requires_grad=True),
    "tensor1": lambda L: L.tensor([0.5]),
    "tensor2": lambda L: L.tensor([0.5, 0.25]),
    "int_tensor0": lambda L: L.tensor(2),
    "bool": lambda L: True,
    "complex": lambda L: 2 + 0j,
    "np_float64": lambda L: np.float64(0.5),
    "np_int64": lambda L: np.int64(2),
    "np_array0": lambda L: np.array(0.5),
}


def _x(L):
    return L.tensor([[1.5, -2.0, 3.0], [0.25, 4.0, -1.0]])


def _pos(L):
    return L.tensor([[1.5, 2.0, 3.0], [0.25, 4.0, 1.0]])


def _f(L):
    return L.nn.functional


_CASES = {
    "add_alpha": lambda L, t: _x(L).add(_x(L), alpha=t),
    "add_inplace_alpha": lambda L, t: _x(L).add_(_x(L), alpha=t),
    "sub_alpha": lambda L, t: L.sub(_x(L), _x(L), alpha=t),
    "add_number_alpha": lambda L, t: _x(L).add(1.0, alpha=t),
    "addcdiv_value": lambda L, t: _x(L).addcdiv(_x(L), _pos(L), value=t),
    "addcmul_value": lambda L, t: L.addcmul(_x(L), _x(L), _pos(L), value=t),
    "addmv_alpha": lambda L, t: L.addmv(_x(L)[0, :2], _x(L)[:, :2], _x(L)[0, :2], alpha=t),
    "addr_beta": lambda L, t: L.addr(_x(L)[:, :2], _x(L)[0, :2], _x(L)[1, :2], beta=t),
    "addbmm_beta": lambda L, t: L.addbmm(_x(L)[:, :2], _x(L)[None, :, :2],
                                         _x(L)[None, :2, :2], beta=t),
    "leaky_relu": lambda L, t: _f(L).leaky_relu(_x(L), negative_slope=t),
    "hardtanh_min": lambda L, t: _f(L).hardtanh(_x(L), min_val=t),
    "hardtanh_max": lambda L, t: _f(L).hardtanh(_x(L), max_val=t),
    "elu": lambda L, t: _f(L).elu(_x(L), alpha=t),
    "celu": lambda L, t: _f(L).celu(_x(L), alpha=t),
    "softplus_beta": lambda L, t: _f(L).softplus(_x(L), beta=t),
    "softplus_threshold": lambda L, t: _f(L).softplus(_x(L), threshold=t),
    "threshold": lambda L, t: L.threshold(_x(L), t, 0.0),
    "threshold_value": lambda L, t: _f(L).threshold(_x(L), 0.0, t),
    "rrelu_lower": lambda L, t: _f(L).rrelu(_x(L), lower=t, upper=0.6),
    "rrelu_upper": lambda L, t: _f(L).rrelu(_x(L), lower=0.1, upper=t),
    "hardshrink": lambda L, t: _f(L).hardshrink(_x(L), t),
    "softshrink": lambda L, t: _f(L).softshrink(_x(L), t),
    "norm_p": lambda L, t: L.norm(_x(L), p=t),
    "normalize_p": lambda L, t: _f(L).normalize(_x(L), p=t),
    "renorm_p": lambda L, t: _x(L).renorm(t, 0, 1.0),
    "renorm_maxnorm": lambda L, t: _x(L).renorm(2, 0, t),
    "histc_min": lambda L, t: L.histc(_x(L), bins=4, min=t, max=5),
    "nan_to_num": lambda L, t: L.nan_to_num(_x(L), nan=t),
    "logit_eps": lambda L, t: L.logit(_pos(L) / 5, eps=t),
    "pad_value": lambda L, t: _f(L).pad(_x(L), (1, 1), value=t),
    "dropout_p": lambda L, t: _f(L).dropout(_x(L), p=t, training=False),
    "full_like": lambda L, t: L.full_like(_x(L), t),
    "huber_delta": lambda L, t: _f(L).huber_loss(_x(L), _pos(L), delta=t),
    "margin_ranking": lambda L, t: _f(L).margin_ranking_loss(_x(L), _pos(L), _pos(L), margin=t),
    "hinge_embedding": lambda L, t: _f(L).hinge_embedding_loss(_x(L), _pos(L), margin=t),
    "cosine_embedding": lambda L, t: _f(L).cosine_embedding_loss(
        _x(L), _pos(L), L.tensor([1.0, -1.0]), margin=t),
    "triplet_margin": lambda L, t: _f(L).triplet_margin_loss(_x(L), _pos(L), _pos(L), margin=t),
}


def _outcome(L, case, kind):
    """(dtype name, shape, requires_grad, values), or (error type, first message line)."""
    return outcome(_CASES[case], L, _KINDS[kind](L), message=first_line, describe=lambda out: (
        dtype_name(out.dtype), tuple(out.shape), out.requires_grad,
        np.asarray(out.detach().numpy(), dtype=np.float64)))


@pytest.mark.parametrize("kind", list(_KINDS))
@pytest.mark.parametrize("case", list(_CASES))
def test_number_param_matches_torch(case, kind):
    ours, theirs = _outcome(ember, case, kind), _outcome(torch, case, kind)
    assert ours[:-1] == theirs[:-1]
    if len(theirs) == 4:
        np.testing.assert_allclose(ours[-1], theirs[-1], rtol=1e-5, equal_nan=True)
    else:
        assert ours[-1] == theirs[-1]


@pytest.mark.parametrize("lib", [ember, torch], ids=["ember", "torch"])
def test_learnable_alpha_is_refused_not_silently_detached(lib):
    # an optimizer step written with a learnable lr: PyTorch refuses, so lr.grad is never None
    p, g = lib.ones(3), lib.full((3,), 0.5)
    lr = lib.tensor(0.1, requires_grad=True)
    with pytest.raises(TypeError, match=r"add_\(\): argument 'alpha' must be Number, not Tensor"):
        p.add_(g, alpha=-lr)
    assert p.add(g, alpha=-lr.detach()).tolist() == pytest.approx([0.95] * 3)
