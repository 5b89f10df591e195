"""What ops save for backward, last items, against PyTorch 2.13.

A tensor written in place after an op and before backward makes backward raise ("one of the
variables needed for gradient computation has been modified by an inplace operation") only
where PyTorch's node saved it: the spectral matrix norms (linalg.matrix_norm / linalg.norm /
torch.norm with ord 2, -2, 'nuc') and linalg.cond keep the singular value decomposition's
outputs, not A; logdet keeps A but not its result (slogdet then where); householder_product
keeps its result; F.embedding_bag keeps the weight only for a per_sample_weights gradient.
Where backward runs, the gradients and the result's node name are PyTorch's.
"""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_INPLACE = "modified by an inplace operation"


def _outcome(lib, build, shape, written, dtype="float64"):
    """``build(lib, x)`` on a non-leaf copy ``x`` of a leaf of ``shape``, then a write into
    ``x`` ("input") or the result ("output"), then backward: (the result's node name,
    "ok" and the leaf's gradient, or "inplace", or another error's type name)."""
    values = np.random.default_rng(0).standard_normal(shape)
    if dtype == "complex128":
        values = values + 1j * np.random.default_rng(1).standard_normal(shape)
    leaf = lib.tensor(values, requires_grad=True)
    x = leaf.clone()
    out = build(lib, x)
    name = out.grad_fn.name()
    (x if written == "input" else out).mul_(2)
    try:
        (grad,) = lib.autograd.grad(out.abs().sum(), [leaf])
    except RuntimeError as e:
        return name, ("inplace" if _INPLACE in str(e) else type(e).__name__), None
    return name, "ok", grad.detach().numpy()


def _compare(build, shape, written, dtype="float64"):
    ours, theirs = (_outcome(lib, build, shape, written, dtype) for lib in (ember, torch))
    assert ours[:2] == theirs[:2]
    if theirs[2] is not None:
        np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-7, atol=1e-9)


_SPECTRAL_BUILDS = {
    "matrix_norm": lambda lib, x, o, kw: lib.linalg.matrix_norm(x, o, **kw),
    "linalg.norm": lambda lib, x, o, kw: lib.linalg.norm(x, o, **{"dim": (-2, -1), **kw}),
}


@pytest.mark.parametrize("written", ["input", "output"])
@pytest.mark.parametrize("kw", [{}, {"dim": (0, 2), "keepdim": True}, {"dim": (2, 0)},
                                {"keepdim": True}])
@pytest.mark.parametrize("ord", [2, -2, "nuc"])
@pytest.mark.parametrize("fn", sorted(_SPECTRAL_BUILDS))
def test_spectral_matrix_norms_keep_the_decomposition(fn, ord, kw, written):
    build = _SPECTRAL_BUILDS[fn]
    _compare(lambda lib, x: build(lib, x, ord, kw), (3, 4, 5), written)


@pytest.mark.parametrize("written", ["input", "output"])
@pytest.mark.parametrize("ord", [2, -2, "nuc"])
def test_spectral_norms_with_a_dtype_and_complex_input(ord, written):
    _compare(lambda lib, x: lib.linalg.matrix_norm(x, ord, dtype=lib.complex128), (4, 3),
             written, "complex128")
    _compare(lambda lib, x: lib.linalg.matrix_norm(x.float(), ord, dtype=lib.float64),
             (2, 4, 3), written)


@pytest.mark.parametrize("written", ["input", "output"])
@pytest.mark.parametrize("kw", [{"dim": (2, 1)}, {"dim": (0, 1), "keepdim": True}])
def test_torch_norm_nuc_keeps_the_decomposition(kw, written):
    _compare(lambda lib, x: lib.norm(x, "nuc", **kw), (4, 3, 2), written)


@pytest.mark.parametrize("written", ["input", "output"])
@pytest.mark.parametrize("p", [None, 2, -2, "nuc"])
def test_cond(p, written):
    # (not 'fro', 1, inf: PyTorch's backward refuses them always, as it writes the inverse
    # that inv_ex saved; ember differentiates them)
    _compare(lambda lib, x: lib.linalg.cond(x, p), (2, 3, 3), written)


@pytest.mark.parametrize("written", ["input", "output"])
@pytest.mark.parametrize("shift", [0.0, 5.0])        # a negative determinant, a positive one
def test_logdet_keeps_the_input_not_the_result(shift, written):
    _compare(lambda lib, x: lib.logdet(x + shift * lib.eye(3, dtype=x.dtype)), (2, 3, 3),
             written)


@pytest.mark.parametrize("written", ["input", "output"])
def test_logdet_complex(written):
    _compare(lambda lib, x: lib.logdet(x), (3, 3), written, "complex128")


@pytest.mark.parametrize("written", ["input", "output"])
@pytest.mark.parametrize("fn", ["householder_product", "orgqr"])
def test_householder_product_keeps_its_result(fn, written):
    def build(lib, x):
        f = lib.linalg.householder_product if fn == "householder_product" else lib.orgqr
        return f(x, x[..., 0, :2].detach().clone())
    _compare(build, (2, 4, 3), written)


def _bag(lib, mode, written, psw_grad, leaf_weight):
    """F.embedding_bag over a float64 weight, its weight (or per_sample_weights, or the
    result) written afterwards, then backward: "ok" and the gradients, or the error."""
    rng = np.random.default_rng(0)
    w_leaf = lib.tensor(rng.standard_normal((10, 3)), requires_grad=True)
    weight = w_leaf if leaf_weight else w_leaf * 1.0
    psw_leaf = None
    psw = None
    if psw_grad is not None:
        psw_leaf = lib.tensor(rng.standard_normal(8), requires_grad=psw_grad)
        psw = psw_leaf * 1.0 if psw_grad else psw_leaf
    out = lib.nn.functional.embedding_bag(
        lib.tensor([1, 2, 4, 5, 4, 3, 2, 9]), weight, lib.tensor([0, 3, 3]), mode=mode,
        per_sample_weights=psw)
    target = {"weight": weight, "psw": psw, "output": out}[written]
    with lib.no_grad():
        target.mul_(2)
    wanted = [w_leaf] + ([psw_leaf] if psw_grad else [])
    try:
        grads = lib.autograd.grad((out * out).sum(), wanted)
    except RuntimeError as e:
        return out.grad_fn.name(), ("inplace" if _INPLACE in str(e) else str(e)), None
    return out.grad_fn.name(), "ok", [g.numpy() for g in grads]


@pytest.mark.parametrize("leaf_weight", [False, True])
@pytest.mark.parametrize("written", ["weight", "output"])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_keeps_no_weight_without_per_sample_weights(mode, written, leaf_weight):
    ours, theirs = (_bag(lib, mode, written, None, leaf_weight) for lib in (ember, torch))
    assert ours[:2] == theirs[:2]
    for a, b in zip(ours[2], theirs[2]):
        np.testing.assert_allclose(a, b, rtol=1e-10)


@pytest.mark.parametrize("psw_grad", [False, True])
@pytest.mark.parametrize("written", ["weight", "psw", "output"])
def test_embedding_bag_per_sample_weights(written, psw_grad):
    ours, theirs = (_bag(lib, "sum", written, psw_grad, False) for lib in (ember, torch))
    assert ours[:2] == theirs[:2]
    for a, b in zip(ours[2] or (), theirs[2] or ()):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_embedding_bag_double_backward_still_refused_after_a_weight_write():
    messages = []
    for lib in (ember, torch):
        w = lib.tensor(np.random.default_rng(0).standard_normal((6, 2)), requires_grad=True)
        weight = w * 1.0
        out = lib.nn.functional.embedding_bag(lib.tensor([[0, 2], [5, 5]]), weight, mode="mean")
        with lib.no_grad():
            weight.mul_(2)
        (g,) = lib.autograd.grad((out * out).sum(), [w], create_graph=True)
        with pytest.raises(NotImplementedError) as info:
            lib.autograd.grad(g.sum(), [w])
        messages.append(str(info.value))
    assert messages[0] == messages[1]
