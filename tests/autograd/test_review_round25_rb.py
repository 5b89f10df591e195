"""Review of round 25's engine work (RoutedOpNode walked raw): a node routed while its own
derivative runs (a saved-tensor hook reading next_functions) hands the engine gradients for
the edges it has then, and a profiled backward runs the TBackward0 nodes PyTorch's does."""

import numpy as np
import pytest

import ember
from ember.autograd.graph import Node, grad_accumulator
from ember.ops._recording import RoutedOpNode

F = ember.nn.functional


@pytest.mark.parametrize("w_shape", [(4, 4), (3, 4)])
def test_routed_by_a_saved_tensor_hook_while_its_derivative_runs(w_shape):
    xa = np.arange(8.0).reshape(2, 4)
    wa = np.arange(float(np.prod(w_shape))).reshape(w_shape) / 5
    x = ember.tensor(xa, requires_grad=True)
    w = ember.tensor(wa, requires_grad=True)
    box = []

    def unpack(t):
        if box:                                     # inspects the graph: routes the node
            assert "TBackward0" in [n.name() for n, _ in box[0].grad_fn.next_functions if n]
        return t
    with ember.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        y = F.linear(x, w)
    box.append(y)
    gy = (np.arange(float(y.numel())) ** 2).reshape(y.shape)     # (gy.T @ x not symmetric)
    y.backward(ember.tensor(gy))
    np.testing.assert_allclose(w.grad.numpy(), gy.T @ xa)
    np.testing.assert_allclose(x.grad.numpy(), gy @ wa)


def _backward_event_names(prof):
    return [e.name for e in prof.events() if "Backward" in e.name or "Accumulate" in e.name]


def test_a_profiled_backward_runs_the_t_node():
    x = ember.ones(2, 4, requires_grad=True)
    w = ember.ones(3, 4, requires_grad=True)
    with ember.profiler.profile() as prof:
        F.linear(x, w).sum().backward()
    names = _backward_event_names(prof)
    t_at = names.index("autograd::engine::evaluate_function: TBackward0")
    assert names[t_at + 1] == "TBackward0"
    assert names.count("torch::autograd::AccumulateGrad") == 2
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 4), 2.0))
    # profiling over, a backward walks the raw edge again
    assert "_edges" not in RoutedOpNode.__dict__ or RoutedOpNode._edges is Node._edges
    y = F.linear(x, w)
    y.sum().backward()
    assert Node._edges.__get__(y.grad_fn)[1][0] is grad_accumulator(w)
