"""What the domain-adaptation, continual-learning, distillation and event-sequence programs
of round 32 (test_parity_programs_round32_adapt*.py) found, each pinned against PyTorch.
multi_margin_loss's and multilabel_margin_loss's gradients took a zero second derivative
under create_graph, where PyTorch's backward kernels have none: a NotImplemented node refuses
the next backward ("derivative for aten::multi_margin_loss_backward is not implemented");
and its p=1 gradient of a float64 input was rounded to float32 (0.10000000149 for 0.1).
embedding_bag's weight gradient required grad under create_graph whenever the weight did
(and per_sample_weights' whenever they did), where PyTorch's requires grad only where a
tensor its backward kernel takes does: the incoming gradient, or the per-sample weights
(the weight for theirs). And the input gradients of average pools and reflect/replicate
pads, whose PyTorch backward kernels take the input, did not require grad under create_graph
unless the incoming gradient did: a penalty on them raised "element 0 of tensors does not
require grad" where PyTorch backpropagates zeros."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(fn):
    """``fn()``'s value, or its exception's type and message."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 (the outcome is what is compared)
        return type(e).__name__, str(e).replace("torch", "ember")


def _margin_losses(lib):
    F = lib.nn.functional
    y = lib.tensor([0, 3])
    labels = lib.tensor([[0, 3, -1, 0, 0], [1, -1, 0, 0, 0]])
    return {"multi": lambda x: F.multi_margin_loss(x, y),
            "multi_p2_weight": lambda x: F.multi_margin_loss(
                x, y, p=2, margin=0.5, weight=lib.tensor([1., 2, 1, 1, 1], dtype=x.dtype)),
            "multi_sum": lambda x: F.multi_margin_loss(x, y, reduction="sum"),
            "multi_1d": lambda x: F.multi_margin_loss(x[0], y[0]),
            "multilabel": lambda x: F.multilabel_margin_loss(x, labels),
            "multilabel_none": lambda x: F.multilabel_margin_loss(x, labels, reduction="none")}


_X = np.random.default_rng(0).standard_normal((2, 5))


@pytest.mark.parametrize("name", list(_margin_losses(ember)))
def test_margin_loss_gradient_refuses_double_backward(name):
    def run(lib):
        x = lib.from_numpy(_X.copy()).requires_grad_()
        out = _margin_losses(lib)[name](x)
        g, = lib.autograd.grad(out, x, lib.ones_like(out), create_graph=True)
        first = g.detach().numpy().copy()
        flags = (g.requires_grad, type(g.grad_fn).__name__)
        return first, flags, _outcome(lambda: lib.autograd.grad((g * g).sum(), x))
    (ours, our_flags, our_err), (theirs, their_flags, their_err) = run(ember), run(torch)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    assert our_flags == their_flags and our_flags[0]     # (an unbatched loss: via select)
    assert our_err == their_err
    assert our_err[0] == "RuntimeError" and "_margin_loss_backward is not implemented" in our_err[1]


@pytest.mark.parametrize("name", ["multi", "multilabel"])
def test_margin_loss_second_order_transforms(name):
    def run(lib):
        f = _margin_losses(lib)[name]
        x = lib.from_numpy(_X.copy())
        return (_outcome(lambda: lib.func.jacrev(lib.func.jacrev(f))(x)),
                lib.vmap(lib.func.grad(f))(x[None]).numpy())
    (our_err, ours), (their_err, theirs) = run(ember), run(torch)
    assert our_err == their_err
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def _bag_case(lib, mode, psw_grad, weight_grad, v_grad, sparse):
    F = lib.nn.functional
    rng = np.random.default_rng(1)
    w = lib.from_numpy(rng.standard_normal((4, 3))).requires_grad_(weight_grad)
    psw = None if psw_grad is None else \
        lib.from_numpy(rng.uniform(size=4)).requires_grad_(psw_grad)
    out = F.embedding_bag(lib.tensor([0, 2, 1, 2]), w, lib.tensor([0, 2]), mode=mode,
                          per_sample_weights=psw, sparse=sparse)
    v = lib.from_numpy(rng.standard_normal((2, 3))).requires_grad_(v_grad)
    wrt = [t for t in (w, psw) if t is not None and t.requires_grad]
    grads = lib.autograd.grad(out, wrt, v * 1, create_graph=True)
    res = []
    for g in grads:
        dense = g.to_dense() if g.is_sparse else g
        values = g.coalesce().values() if g.is_sparse else g
        res.append((g.requires_grad, type(g.grad_fn).__name__, dense.detach().numpy().copy(),
                    _outcome(lambda: values.sum().backward())))
    return res


@pytest.mark.parametrize("v_grad", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("mode,psw_grad,weight_grad", [
    ("sum", None, True), ("mean", None, True), ("max", None, True), ("sum", False, True),
    ("sum", True, True), ("sum", True, False)])
def test_embedding_bag_create_graph_requires_grad(mode, psw_grad, weight_grad, v_grad, sparse):
    if mode == "max" and sparse:
        pytest.skip("max mode does not support sparse weights")
    ours = _bag_case(ember, mode, psw_grad, weight_grad, v_grad, sparse)
    theirs = _bag_case(torch, mode, psw_grad, weight_grad, v_grad, sparse)
    assert len(ours) == len(theirs)
    for (rg, node, value, err), (trg, tnode, tvalue, terr) in zip(ours, theirs):
        assert (rg, node) == (trg, tnode)
        np.testing.assert_allclose(value, tvalue, rtol=1e-12, atol=1e-12)
        assert err == terr


@pytest.mark.parametrize("sparse", [False, True])
def test_embedding_bag_joint_second_backward_refusal(sparse):
    """Both gradients in one second backward: PyTorch computes per_sample_weights' after the
    weight's, so its refusal (a RuntimeError) comes first, not EmbeddingBagBackwardBackward0's
    NotImplementedError."""
    def run(lib):
        w, psw, gw, gp = _bag_grads(lib, sparse)
        gw = gw.coalesce().values() if gw.is_sparse else gw
        return _outcome(lambda: lib.autograd.grad((gw * gw).sum() + (gp * gp).sum(), [w, psw]))
    ours, theirs = run(ember), run(torch)
    assert ours == theirs and ours[0] == "RuntimeError"


@pytest.mark.parametrize("sparse", [False, True])
def test_embedding_bag_second_backward_reaches_what_the_kernels_take(sparse):
    """The weight's gradient hangs from the per-sample weights (which its backward kernel
    takes), not from the weight; theirs from the weight: a second grad of either for the
    tensor it differentiates for is None (allow_unused), for the other one it refuses."""
    def run(lib):
        w, psw, gw, gp = _bag_grads(lib, sparse)
        gw = gw.coalesce().values() if gw.is_sparse else gw
        return [_outcome(lambda: lib.autograd.grad(g.sum(), t, retain_graph=True,
                                                   allow_unused=True)[0])
                for g in (gw, gp) for t in (w, psw)]
    ours, theirs = run(ember), run(torch)
    assert ours == theirs and ours[0] is None and ours[3] is None


def _bag_grads(lib, sparse):
    """embedding_bag's weight and per-sample weights, and their gradients taken with
    create_graph."""
    w = lib.from_numpy(np.random.default_rng(1).standard_normal((4, 3))).requires_grad_()
    psw = lib.from_numpy(np.random.default_rng(2).uniform(size=4)).requires_grad_()
    out = lib.nn.functional.embedding_bag(lib.tensor([0, 2, 1, 2]), w, lib.tensor([0, 2]),
                                          mode="sum", per_sample_weights=psw, sparse=sparse)
    return (w, psw, *lib.autograd.grad(out, [w, psw], lib.ones_like(out), create_graph=True))


def test_embedding_bag_per_sample_weights_stay_saved():
    """per_sample_weights written in place before backward: PyTorch saves them whether or
    not the weight requires grad, so backward refuses either way."""
    def run(lib, weight_grad):
        w = lib.ones(4, 3, requires_grad=weight_grad)
        psw = lib.rand(4, requires_grad=True)
        p2 = psw * 1
        out = lib.nn.functional.embedding_bag(lib.tensor([0, 2, 1, 2]), w, lib.tensor([0, 2]),
                                              mode="sum", per_sample_weights=p2)
        p2.mul_(2)
        return _outcome(lambda: out.sum().backward())[0]
    for weight_grad in (False, True):
        assert run(ember, weight_grad) == run(torch, weight_grad) == "RuntimeError"


_THROUGH_INPUT = {
    "avg_pool1d": lambda F, x: F.avg_pool1d(x.flatten(2), 2),
    "avg_pool2d": lambda F, x: F.avg_pool2d(x, 2),
    "avg_pool3d": lambda F, x: F.avg_pool3d(x[None], (1, 2, 2)),
    "adaptive_avg_pool1d": lambda F, x: F.adaptive_avg_pool1d(x.flatten(2), 5),
    "adaptive_avg_pool2d": lambda F, x: F.adaptive_avg_pool2d(x, 3),
    "adaptive_avg_pool3d": lambda F, x: F.adaptive_avg_pool3d(x[None], 2),
    "adaptive_avg_pool2d_global": lambda F, x: F.adaptive_avg_pool2d(x, 1),
    "reflect": lambda F, x: F.pad(x, (1, 2, 1, 1), mode="reflect"),
    "replicate1d": lambda F, x: F.pad(x.flatten(2), (2, 1), mode="replicate"),
    "replicate3d": lambda F, x: F.pad(x[None], (1, 1, 1, 1, 1, 1), mode="replicate"),
    "circular": lambda F, x: F.pad(x, (1, 1, 1, 1), mode="circular"),
}


@pytest.mark.parametrize("name", list(_THROUGH_INPUT))
def test_linear_kernel_gradient_requires_grad_under_create_graph(name):
    """A penalty on the input gradient of an average pool or a reflect/replicate pad (whose
    PyTorch backward kernels take the input) backpropagates zeros under create_graph, where
    ember raised "element 0 of tensors does not require grad"."""
    def run(lib):
        x = lib.from_numpy(np.random.default_rng(2).standard_normal((2, 3, 5, 5)))
        x.requires_grad_()
        out = _THROUGH_INPUT[name](lib.nn.functional, x)
        v = lib.from_numpy(np.random.default_rng(3).standard_normal(tuple(out.shape)))
        g, = lib.autograd.grad(out, x, v, create_graph=True)
        flags = (g.requires_grad, type(g.grad_fn).__name__)
        second = _outcome(lambda: lib.autograd.grad((g * g).sum(), x)[0].numpy())
        return g.detach().numpy(), flags, second
    (ours, our_flags, our_second), (theirs, their_flags, their_second) = run(ember), run(torch)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    assert our_flags == their_flags
    if isinstance(their_second, tuple):
        assert our_second == their_second
    else:
        np.testing.assert_array_equal(our_second, their_second)
