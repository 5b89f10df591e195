"""Double-backward graphs against PyTorch: gradients taken with ``create_graph`` hang from the
node of PyTorch's backward kernel (MaxPool2DWithIndicesBackwardBackward0,
NativeBatchNormBackwardBackward0, EmbeddingDenseBackwardBackward0, PdistBackwardBackward0, ...)
with its edges, node by node, and the second-order gradients through them are torch's."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _graph(fn, depth=0):
    """A node and everything under it, as nested names (None for an edge to nothing)."""
    if fn is None:
        return None
    if depth > 12:
        return fn.name()
    return (fn.name(),) + tuple(_graph(f, depth + 1) for f, _ in fn.next_functions)


def _values(t):
    return None if t is None else np.asarray(t.detach().tolist(), dtype=float)


def _stats(lib, c):
    return (lib.tensor(np.linspace(-0.5, 0.5, c)), lib.tensor(np.linspace(0.5, 2.0, c)))


CASES = {
    "max_pool1d": (lambda F, L, x: F.max_pool1d(x, 2), [(2, 3, 6)]),
    "max_pool1d_overlapping": (lambda F, L, x: F.max_pool1d(x, 3, 1, return_indices=True),
                               [(2, 3, 7)]),
    "max_pool1d_unbatched": (lambda F, L, x: F.max_pool1d(x, 2), [(3, 6)]),
    "max_pool2d": (lambda F, L, x: F.max_pool2d(x, 2), [(2, 3, 4, 4)]),
    "max_pool2d_padded": (lambda F, L, x: F.max_pool2d(x, 3, 1, 1, return_indices=True),
                          [(2, 3, 4, 5)]),
    "max_pool2d_unbatched": (lambda F, L, x: F.max_pool2d(x, 2), [(3, 4, 4)]),
    "max_pool3d": (lambda F, L, x: F.max_pool3d(x, 2), [(2, 3, 4, 4, 4)]),
    "max_pool3d_overlapping": (lambda F, L, x: F.max_pool3d(x, 2, 1, return_indices=True),
                               [(1, 2, 3, 4, 4)]),
    "adaptive_max_pool1d": (lambda F, L, x: F.adaptive_max_pool1d(x, 3), [(2, 3, 7)]),
    "adaptive_max_pool2d": (lambda F, L, x: F.adaptive_max_pool2d(x, 2), [(2, 3, 5, 5)]),
    "adaptive_max_pool2d_indices": (
        lambda F, L, x: F.adaptive_max_pool2d(x, (2, 3), return_indices=True), [(2, 3, 4, 6)]),
    "adaptive_max_pool3d": (lambda F, L, x: F.adaptive_max_pool3d(x, 2), [(2, 3, 5, 4, 5)]),
    "fractional_max_pool2d": (
        lambda F, L, x: F.fractional_max_pool2d(
            x, 2, output_size=3,
            _random_samples=L.tensor([[[0.3, 0.7], [0.1, 0.9]]], dtype=L.float64)),
        [(1, 2, 6, 6)]),
    "batch_norm_train": (lambda F, L, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                         [(4, 3, 5), (3,), (3,)]),
    "batch_norm_train_no_affine": (lambda F, L, x: F.batch_norm(x, None, None, training=True),
                                   [(4, 3, 5)]),
    "batch_norm_train_weight_only": (
        lambda F, L, x, w: F.batch_norm(x, None, None, w, training=True), [(4, 3, 5), (3,)]),
    "batch_norm_train_running_stats": (
        lambda F, L, x, w, b: F.batch_norm(x, *_stats(L, 3), w, b, training=True),
        [(4, 3, 5), (3,), (3,)]),
    "batch_norm_train_4d": (lambda F, L, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                            [(4, 3, 2, 2), (3,), (3,)]),
    "batch_norm_eval": (lambda F, L, x, w, b: F.batch_norm(x, *_stats(L, 3), w, b),
                        [(4, 3, 5), (3,), (3,)]),
    "batch_norm_eval_no_affine": (lambda F, L, x: F.batch_norm(x, *_stats(L, 3)), [(4, 3, 5)]),
    "instance_norm": (lambda F, L, x, w, b: F.instance_norm(x, weight=w, bias=b),
                      [(4, 3, 5), (3,), (3,)]),
    "instance_norm_no_affine": (lambda F, L, x: F.instance_norm(x), [(4, 3, 5)]),
    "embedding": (lambda F, L, w: F.embedding(L.tensor([[0, 2, 1], [3, 3, 0]]), w), [(4, 3)]),
    "embedding_padding_idx": (
        lambda F, L, w: F.embedding(L.tensor([[0, 2, 1], [3, 3, 0]]), w, padding_idx=0),
        [(4, 3)]),
    "pdist": (lambda F, L, x: F.pdist(x), [(5, 3)]),
    "pdist_p1": (lambda F, L, x: F.pdist(x, 1), [(5, 3)]),
    "repeat": (lambda F, L, x: x.repeat(2, 3, 2), [(3, 2)]),
}


def _run(lib, name):
    """(the forward's graph, the create_graph gradients' graphs, their values and the
    second-order gradients of a function of them, or PyTorch's error for the latter)."""
    fn, shapes = CASES[name]
    rng = np.random.default_rng(0)
    xs = [lib.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]
    y = fn(lib.nn.functional, lib, *xs)
    y = y[0] if isinstance(y, tuple) else y
    v = lib.tensor(rng.standard_normal(tuple(y.shape)), requires_grad=True)
    grads = lib.autograd.grad(y, xs, v, create_graph=True)
    z = sum((g * lib.tensor(np.sin(np.arange(g.numel())).reshape(tuple(g.shape)))).sum()
            + (g * g).sum() for g in grads)
    try:
        second = [_values(t) for t in lib.autograd.grad(z, xs + [v], allow_unused=True)]
    except NotImplementedError as e:
        second = str(e)
    return (_graph(y.grad_fn), [_graph(g.grad_fn) for g in grads], [_values(g) for g in grads],
            second)


@pytest.mark.parametrize("name", list(CASES))
def test_double_backward_graph_and_values_match_torch(name):
    first, chains, grads, second = _run(ember, name)
    t_first, t_chains, t_grads, t_second = _run(torch, name)
    if not name.startswith(("max_pool1d", "adaptive_max_pool1d")):
        # (ember records 1-D max pooling's forward as one node: torch's unsqueeze, 2-D
        # pooling and squeeze in one)
        assert first == t_first
    assert chains == t_chains
    for ours, theirs in zip(grads, t_grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-13)
    if isinstance(t_second, str):       # PdistBackwardBackward0 refuses, in torch's words
        assert second == t_second
        return
    assert [t is None for t in second] == [t is None for t in t_second]
    for ours, theirs in zip(second, t_second):
        if theirs is not None:
            np.testing.assert_allclose(ours, theirs, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("name", ["max_pool2d", "max_pool3d", "adaptive_max_pool2d"])
def test_max_pool_saves_its_input_as_torch(name):
    # PyTorch's backward kernel reads the input (its double backward's zeros): an in-place
    # change after the pooling refuses the backward
    def run(lib):
        h = lib.ones(1, 2, 4, 4, dtype=lib.float64, requires_grad=True) * 1
        if name.endswith("3d"):
            h = h.unsqueeze(2).expand(1, 2, 2, 4, 4).clone()
        y = getattr(lib.nn.functional, name)(h, 2)
        h.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
    run(ember)
    run(torch)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_first_order_values_keep_with_create_graph(training):
    # the fused backward op gives the gradients the graph-free backward gives, bit for bit
    rng = np.random.default_rng(3)
    x = ember.tensor(rng.standard_normal((6, 4, 7)), dtype=ember.float32, requires_grad=True)
    w = ember.tensor(rng.standard_normal(4), dtype=ember.float32, requires_grad=True)
    b = ember.tensor(rng.standard_normal(4), dtype=ember.float32, requires_grad=True)
    stats = [ember.zeros(4) + 0.2, ember.ones(4) * 1.5]
    y = ember.nn.functional.batch_norm(x, *stats, w, b, training=training)
    g = ember.tensor(rng.standard_normal((6, 4, 7)), dtype=ember.float32)
    plain = ember.autograd.grad(y, (x, w, b), g, retain_graph=True)
    graph = ember.autograd.grad(y, (x, w, b), g, create_graph=True)
    assert graph[0].grad_fn.name() == "NativeBatchNormBackwardBackward0"
    for p, q in zip(plain, graph):
        np.testing.assert_array_equal(p.numpy(), q.detach().numpy())


def test_repeat_zero_times_has_a_zero_gradient_without_graph():
    for lib in (ember, torch):
        x = lib.ones(3, dtype=lib.float64, requires_grad=True)
        (g,) = lib.autograd.grad(x.repeat(2, 0), x, lib.ones(2, 0, dtype=lib.float64,
                                                             requires_grad=True),
                                 create_graph=True)
        assert g.grad_fn is None and g.tolist() == [0.0, 0.0, 0.0]
