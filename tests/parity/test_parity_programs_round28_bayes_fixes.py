"""What the round-28 Bayesian and knowledge-graph programs (test_parity_programs_round28_bayes.py
and _kg.py) found, each pinned against PyTorch: an embedding lookup of a complex weight that
requires grad raises PyTorch's "does not support automatic differentiation for outputs with
complex dtype" (a forward-mode tangent, no_grad or a weight not requiring grad pass), and
torch.func.jacfwd / hessian results carry PyTorch's grad_fn (ViewBackward0 from its unflatten,
SqueezeBackward1 for a 0-d input) when their inputs require grad; the functions removed in 1.9
(torch.symeig, solve, lstsq, eig, matrix_rank) raise with PyTorch's whole text."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(fn, lib):
    try:
        out = fn(lib)
    except Exception as e:          # noqa: BLE001  (the error is the result compared)
        return type(e).__name__, str(e).split("\n")[0]
    return [lib.view_as_real(o.detach()).tolist() if o.is_complex() else o.detach().tolist()
            for o in out]


def _weight(lib, requires_grad=True):
    w = lib.complex(lib.arange(6.).view(3, 2), lib.ones(3, 2))
    return w.requires_grad_(requires_grad)


def _functional(lib):
    return [lib.nn.functional.embedding(lib.tensor([2, 0]), _weight(lib))]


def _aten(lib):
    return [lib.embedding(_weight(lib) * 1, lib.tensor([[1]]))]


def _no_grad(lib):
    with lib.no_grad():
        return [lib.nn.functional.embedding(lib.tensor([2, 0]), _weight(lib))]


def _not_requiring(lib):
    return [lib.nn.functional.embedding(lib.tensor([2, 0]), _weight(lib, False))]


def _real_weight(lib):
    w = lib.arange(6.).view(3, 2).requires_grad_()
    out = lib.nn.functional.embedding(lib.tensor([2, 2]), w)
    out.sum().backward()
    return [out, w.grad]


def _forward_ad(lib):
    fw = lib.autograd.forward_ad
    with fw.dual_level():
        w = fw.make_dual(_weight(lib, False), _weight(lib, False) * 2)
        out = lib.nn.functional.embedding(lib.tensor([1]), w)
        return [fw.unpack_dual(out).primal, fw.unpack_dual(out).tangent]


def _embedding_bag(lib):
    return [lib.nn.functional.embedding_bag(lib.tensor([[0, 2]]), _weight(lib))]


@pytest.mark.parametrize("fn", [_functional, _aten, _no_grad, _not_requiring, _real_weight,
                                _forward_ad, _embedding_bag], ids=lambda f: f.__name__)
def test_complex_embedding_grad_like_torch(fn):
    ours, theirs = _outcome(fn, ember), _outcome(fn, torch)
    assert ours == theirs
    if fn in (_functional, _aten):
        assert theirs[0] == "RuntimeError" and "complex dtype" in theirs[1]


def _grad_fn_names(lib):
    x = lib.tensor([0.1, 0.2, 0.3], requires_grad=True)
    s = lib.tensor(0.3, requires_grad=True)
    f = lambda v: (v.sin() * v.exp()).sum()       # noqa: E731
    outs = [lib.func.hessian(f)(x), lib.func.jacfwd(lambda v: v.sin())(x),
            lib.func.jacfwd(lambda v: v.sin())(s), lib.func.jacfwd(lambda v: v.sum())(x),
            lib.func.jacfwd(lambda a, b: a * b, argnums=(0, 1))(s, x)[0],
            lib.func.hessian(lambda d: (d["w"] ** 3).sum())({"w": x.view(3, 1)})["w"]["w"]]
    return [type(o.grad_fn).__name__ for o in outs], [o.detach().tolist() for o in outs]


def test_jacfwd_and_hessian_grad_fn_like_torch():
    ours, theirs = _grad_fn_names(ember), _grad_fn_names(torch)
    assert ours[0] == theirs[0]
    assert theirs[0][:3] == ["ViewBackward0", "ViewBackward0", "SqueezeBackward1"]
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def _removed_error(lib, name, method):
    a = lib.eye(2)
    target = a if method else lib
    args = (a,) if name in ("solve", "lstsq") else ()
    args = args if method else (a,) + args
    try:
        getattr(target, name)(*args)
    except RuntimeError as e:
        return str(e).replace(lib.__name__ + ".", "LIB.")
    return None


@pytest.mark.parametrize("name", ["solve", "lstsq", "eig", "symeig", "matrix_rank"])
@pytest.mark.parametrize("method", [False, True])
def test_removed_linalg_functions_raise_torch_text(name, method):
    # GPyTorch-era code calls torch.symeig / torch.solve: PyTorch's whole text, not a paraphrase
    if method and name == "matrix_rank":
        pytest.skip("not a Tensor method")
    theirs = _removed_error(torch, name, method)
    assert theirs is not None and _removed_error(ember, name, method) == theirs
