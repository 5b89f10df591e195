"""Review of the round-24 double-backward graphs: repeat's gradient sums each new leading dim
away with its own node, as PyTorch's does; batch norm refuses running statistics that require
grad, as PyTorch's native_batch_norm does."""

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same_error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _graph(fn):
    """A node and everything under it, as nested names."""
    return None if fn is None else (fn.name(),) + tuple(_graph(f) for f, _ in fn.next_functions)


def _repeat_gradient(lib, shape, repeats):
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal(shape), requires_grad=True)
    y = x.repeat(*repeats)
    v = lib.tensor(rng.standard_normal(tuple(y.shape)), requires_grad=True)
    (g,) = lib.autograd.grad(y, x, v, create_graph=True)
    (second,) = lib.autograd.grad((g * g).sum(), v)
    return _graph(g.grad_fn), np.asarray(g.tolist()), np.asarray(second.tolist())


@pytest.mark.parametrize("shape, repeats", [((3, 2), (4, 1, 3, 2)), ((), (2, 3)),
                                            ((3,), (2, 5, 1)), ((3, 2), (2, 1, 1))])
def test_repeat_with_new_leading_dims_sums_them_one_by_one_as_torch(shape, repeats):
    graph, grad, second = _repeat_gradient(ember, shape, repeats)
    t_graph, t_grad, t_second = _repeat_gradient(torch, shape, repeats)
    assert graph == t_graph
    np.testing.assert_allclose(grad, t_grad, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(second, t_second, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("grad_of", ["running_mean", "running_var", "both"])
def test_batch_norm_refuses_running_stats_that_require_grad_as_torch(training, grad_of):
    def stats(lib):
        return (lib.zeros(3, requires_grad=grad_of != "running_var"),
                lib.ones(3, requires_grad=grad_of != "running_mean"))

    def run(lib, stats):
        with lib.no_grad():         # (nothing is recorded: no refusal)
            lib.nn.functional.batch_norm(lib.ones(4, 3), *stats, training=training)
        return lib.nn.functional.batch_norm(lib.ones(4, 3), *stats, training=training)
    assert_same_error(run, stats)


def test_instance_norm_refuses_running_stats_that_require_grad_as_torch():
    def run(lib, mean):
        return lib.nn.functional.instance_norm(lib.ones(2, 3, 4), mean, lib.ones(3))
    assert_same_error(run, lambda lib: lib.zeros(3, requires_grad=True))
