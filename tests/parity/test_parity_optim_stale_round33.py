"""Optimizer steps on state kept from before a parameter changed shape (``p.data = ...``)
against PyTorch's (round 33): the error's type and text, and every parameter, gradient and
state tensor after it (what the step wrote before failing). Skipped without PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

SHAPES = [((3,), (5,)), ((3,), (2, 3)), ((3,), (1,)), ((1,), (3,)), ((2, 3), (3,))]


def _after_stale_step(lib, name, options, old, new, stale=(1,), count=3, first_step=True):
    """(error type and text or None, every array the optimizer holds afterwards): ``count``
    parameters of shape ``old`` step once; those in ``stale`` then take shape ``new``."""
    rng = np.random.default_rng(0)
    params = [lib.nn.Parameter(lib.tensor(rng.standard_normal(old))) for _ in range(count)]
    opt = getattr(lib.optim, name)(params, **options)
    if first_step:
        for p in params:
            p.grad = lib.tensor(rng.standard_normal(old))
        opt.step()
    for i in stale:
        params[i].data = lib.tensor(rng.standard_normal(new))
    for p in params:
        p.grad = lib.tensor(rng.standard_normal(tuple(p.shape)))
    given = [p.grad.numpy().copy() for p in params]
    try:
        opt.step()
        error = None
    except Exception as e:  # noqa: BLE001
        error = (type(e).__name__, str(e))
    arrays = [("given grad", g) for g in given]
    for p in params:
        arrays += [("param", p.detach().numpy().copy()), ("grad", p.grad.numpy().copy())]
        for key, value in sorted(opt.state[p].items()):
            arrays.append((key, np.asarray(value.detach().numpy() if hasattr(value, "detach")
                                           else value, dtype=np.float64)))
    return error, arrays


def _same(name, options, old, new, **kwargs):
    """Ember's step as PyTorch's; gradients left as given (PyTorch's multi-tensor Nesterov
    SGD writes into them, a bug of its not copied: see test_sgd_foreach_nesterov_...)."""
    ours = _after_stale_step(ember, name, options, old, new, **kwargs)
    theirs = _after_stale_step(torch, name, options, old, new, **kwargs)
    assert ours[0] == theirs[0]
    assert [k for k, _ in ours[1]] == [k for k, _ in theirs[1]]
    given = [a for key, a in theirs[1] if key == "given grad"]
    for (key, a), (_, b) in zip(ours[1], theirs[1]):
        if key == "grad":
            b = given.pop(0)
        assert a.shape == b.shape, key
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14, err_msg=key)
    return ours[0]


@pytest.mark.parametrize("old, new", SHAPES)
@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("name, options", [
    ("ASGD", {}), ("ASGD", {"t0": 0, "weight_decay": 0.1}), ("Rprop", {}),
    ("Rprop", {"maximize": True})])
@pytest.mark.parametrize("count, stale", [(1, (0,)), (3, (1,)), (3, (0, 2))])
def test_asgd_and_rprop(name, options, foreach, old, new, count, stale):
    """Several parameters: the multi-tensor step runs each list op over all of them."""
    error = _same(name, dict(options, foreach=foreach), old, new, stale=stale, count=count)
    assert error is None or error[0] in ("RuntimeError", "IndexError")


@pytest.mark.parametrize("old, new", SHAPES)
@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("options", [
    {}, {"nesterov": True}, {"weight_decay": 0.1}, {"nesterov": True, "maximize": True},
    {"dampening": 0.5}])
@pytest.mark.parametrize("stale", [(0,), (1,), (2,), (0, 2)])
def test_sgd_momentum(options, foreach, old, new, stale):
    error = _same("SGD", dict(options, lr=0.1, momentum=0.9, foreach=foreach), old, new,
                  stale=stale)
    assert error is not None and error[0] == "RuntimeError"


@pytest.mark.parametrize("foreach", [False, True])
def test_sgd_some_buffers_new(foreach):
    """A parameter without a buffer yet among them: PyTorch's multi-tensor step updates the
    buffers one by one then."""
    def build(lib, old=(3,)):
        rng = np.random.default_rng(1)
        params = [lib.nn.Parameter(lib.tensor(rng.standard_normal(old))) for _ in range(3)]
        opt = lib.optim.SGD(params, lr=0.1, momentum=0.9, foreach=foreach)
        params[0].grad = lib.tensor(rng.standard_normal(old))
        params[2].grad = lib.tensor(rng.standard_normal(old))
        opt.step()                          # params 0 and 2 get a buffer
        params[2].data = lib.tensor(rng.standard_normal((5,)))
        for p in params:
            p.grad = lib.tensor(rng.standard_normal(tuple(p.shape)))
        with pytest.raises(RuntimeError) as info:
            opt.step()
        return (str(info.value), [p.detach().numpy() for p in params],
                [opt.state[p]["momentum_buffer"].numpy() for p in (params[0], params[2])],
                len(opt.state[params[1]]))

    ours, theirs = build(ember), build(torch)
    assert ours[0] == theirs[0] and ours[3] == theirs[3] == 0
    for a, b in zip(ours[1] + ours[2], theirs[1] + theirs[2]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_sgd_foreach_nesterov_leaves_the_gradient_alone():
    """PyTorch's multi-tensor Nesterov step adds the momentum into ``p.grad`` itself, which its
    single-tensor step and other optimizers never do (optimizers leave gradients alone): a
    PyTorch bug ember does not copy. The parameters step alike."""
    def run(lib, foreach, **options):
        p = lib.nn.Parameter(lib.ones(3))
        opt = lib.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True, foreach=foreach,
                            **options)
        seen = []
        for _ in range(2):
            g = lib.ones(3)
            p.grad = g
            opt.step()
            seen.append((p.grad is g, p.grad.tolist(), p.detach().tolist()))
        return seen

    for options in ({}, {"weight_decay": 0.1}):
        ours = run(ember, True, **options)
        assert ours == run(ember, False, **options)
        assert [s[:2] for s in ours] == [(True, [1.0] * 3)] * 2
        for (_, _, a), (_, _, b) in zip(ours, run(torch, True, **options)):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    assert run(torch, True)[0][1] == pytest.approx([1.9] * 3)   # what PyTorch does


@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
                                  "NAdam", "RAdam"])
@pytest.mark.parametrize("old, new", [((3,), (2, 3)), ((3,), (1,)), ((3,), (5,))])
def test_other_optimizers_single_tensor_message(name, old, new):
    ours = _after_stale_step(ember, name, {"foreach": False}, old, new, stale=(0,), count=1)
    theirs = _after_stale_step(torch, name, {"foreach": False}, old, new, stale=(0,), count=1)
    assert ours[0] == theirs[0]


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_foreach_expanded_gradient(nesterov):
    """(Nesterov: as PyTorch's single-tensor step; its multi-tensor one writes into the
    gradient and refuses one that repeats memory.)"""
    def run(lib, foreach=True):
        p = lib.nn.Parameter(lib.ones(3, 4))
        opt = lib.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=nesterov, foreach=foreach)
        p.grad = lib.ones(4).expand(3, 4)
        try:
            opt.step()
            error = None
        except RuntimeError as e:
            error = str(e)
        return error, p.detach().tolist(), p.grad.tolist(), len(opt.state[p])

    ours, theirs = run(ember), run(torch, foreach=not nesterov)
    assert ours[0] == theirs[0] and ours[3] == theirs[3]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6)
