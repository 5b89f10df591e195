"""Round 33 against PyTorch: jacrev of grad through grid_sample (its double backward runs
under vmap with batched cotangents), w.r.t. the grid, the input and across them, 2-D and 3-D;
jacfwd and hessian refused as PyTorch refuses them (no forward AD for grid_sampler)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

CASES = [(mode, nd) for mode in ("bilinear", "nearest", "bicubic") for nd in (2, 3)
         if not (mode == "bicubic" and nd == 3)]


def _data(nd, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 2) + (4, 5, 3)[:nd])
    g = rng.uniform(-1.2, 1.2, (1,) + (3, 2, 2)[:nd] + (nd,))
    w = rng.standard_normal((1, 2) + (3, 2, 2)[:nd])
    return x, g, w


def _loss(lib, mode, padding, ac, w):
    def loss(x, g):
        y = lib.nn.functional.grid_sample(x, g, mode, padding, align_corners=ac)
        return (y.pow(2) * w + y * w.cos()).sum()
    return loss


def _jacobians(lib, arrays, mode, padding, ac):
    x, g, w = (lib.tensor(a) for a in arrays)
    loss = _loss(lib, mode, padding, ac, w)
    func = lib.func
    found = [func.jacrev(func.grad(loss, argnums=1), argnums=1)(x, g),
             func.jacrev(func.grad(loss, argnums=0), argnums=0)(x, g),
             func.jacrev(func.grad(loss, argnums=0), argnums=1)(x, g),
             func.jacrev(func.grad(loss, argnums=1), argnums=0)(x, g)]
    return [np.asarray(t.numpy()) for t in found]


@pytest.mark.parametrize("mode,nd", CASES)
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("ac", [False, True])
def test_jacrev_of_grad(mode, nd, padding, ac):
    arrays = _data(nd, seed=nd + len(padding))
    got = _jacobians(ember, arrays, mode, padding, ac)
    want = _jacobians(torch, arrays, mode, padding, ac)
    names = ("grid, grid", "input, input", "input grad by grid", "grid grad by input")
    for name, a, b in zip(names, got, want):
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10, err_msg=name)
    if mode == "bilinear":      # (a test that a zero Jacobian could not pass)
        assert np.abs(got[0]).max() > 0.1 and np.abs(got[2]).max() > 0.1


def test_jacrev_of_grad_batched_points():
    # two images, and the grad of a one-argument function, as the repro has it
    arrays = list(_data(2, seed=5))
    arrays[0] = np.concatenate([arrays[0], -arrays[0]])
    arrays[1] = np.concatenate([arrays[1], arrays[1][:, ::-1]])
    arrays[2] = np.concatenate([arrays[2], arrays[2]])
    found = []
    for lib in (ember, torch):
        x, g, w = (lib.tensor(a) for a in arrays)
        loss = _loss(lib, "bilinear", "zeros", False, w)
        found.append(lib.func.jacrev(lib.func.grad(lambda gr: loss(x, gr)))(g).numpy())
    np.testing.assert_allclose(found[0], found[1], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("how", ["jacfwd", "hessian"])
def test_forward_mode_refused(nd, how):
    messages = []
    for lib in (ember, torch):
        x, g, w = (lib.tensor(a) for a in _data(nd))
        loss = _loss(lib, "bilinear", "zeros", False, w)
        f = lambda gr: loss(x, gr)     # noqa: E731
        run = (lib.func.jacfwd(lib.func.grad(f)) if how == "jacfwd"
               else lib.func.hessian(f))
        with pytest.raises(RuntimeError) as info:
            run(g)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def _third(lib, arrays, mode, padding, ac):
    x0, g0, w0 = arrays
    x, g, w = (lib.tensor(a) for a in arrays)
    G = lib.func.grad

    def loss(xx, gg):
        y = lib.nn.functional.grid_sample(xx, gg, mode, padding, align_corners=ac)
        return (y.pow(3) * w).sum()
    by_grid = G(lambda a: G(lambda b: G(loss, 1)(x, b).sum())(a).sum())(g)
    mixed = G(lambda a: G(lambda b: G(loss, 1)(b, g).sum())(a).sum())(x)
    found = [by_grid, mixed]
    if mode != "nearest":   # (whose grid gradient has no graph to the grid: both refuse)
        # the same through autograd.grad with create_graph (the double-backward node twice)
        xt, gt = lib.tensor(x0, requires_grad=True), lib.tensor(g0, requires_grad=True)
        first, = lib.autograd.grad(loss(xt, gt), gt, create_graph=True)
        second, = lib.autograd.grad(first.sum(), gt, create_graph=True)
        found += lib.autograd.grad(second.sum(), (xt, gt))
    # a transform's results leave no graph behind (the captured input is no closure's leaf;
    # ``mixed`` keeps one in ember for any op: a captured tensor given to an inner grad)
    assert not by_grid.requires_grad
    return [np.asarray(t.detach().numpy()) for t in found]


@pytest.mark.parametrize("mode,nd", CASES)
@pytest.mark.parametrize("padding", ["zeros", "reflection"])
def test_third_order(mode, nd, padding):
    arrays = _data(nd, seed=7 + nd)
    got = _third(ember, arrays, mode, padding, False)
    want = _third(torch, arrays, mode, padding, False)
    for i, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9, err_msg=str(i))
    if mode != "nearest":
        assert np.abs(got[0]).max() > 0.1
