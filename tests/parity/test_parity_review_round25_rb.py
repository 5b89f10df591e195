"""Review of round 25's engine work against PyTorch: a profiled backward through F.linear
records the same backward events (TBackward0 included), and a saved-tensor hook that reads
the graph while linear's derivative runs leaves the gradients PyTorch's."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((2, 4)), rng.standard_normal((4, 4)), rng.standard_normal(4)


@pytest.mark.parametrize("route_first", [False, True])
def test_profiled_linear_backward_events(route_first):
    xa, wa, ba = _data()

    def run(lib):
        x, w, b = (lib.tensor(a, requires_grad=True) for a in (xa, wa, ba))
        with lib.profiler.profile() as prof:
            y = lib.nn.functional.linear(x, w, b)
            if route_first:
                y.grad_fn.next_functions
            y.tanh().sum().backward()
        names = [e.name for e in prof.events()
                 if "Backward" in e.name or "Accumulate" in e.name]
        return names, w.grad.numpy()
    (want, want_w), (got, got_w) = run(torch), run(ember)
    assert "TBackward0" in want
    assert got == want
    np.testing.assert_allclose(got_w, want_w, rtol=1e-12)


def test_saved_tensor_hook_reading_the_graph_during_backward():
    xa, wa, ba = _data(1)

    def run(lib):
        x, w, b = (lib.tensor(a, requires_grad=True) for a in (xa, wa, ba))
        box, seen = [], []

        def unpack(t):
            if box:
                seen.append([n.name() for n, _ in box[0].grad_fn.next_functions if n])
            return t
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
            y = lib.nn.functional.linear(x, w, b)
        box.append(y)
        (y * lib.arange(4.0, dtype=lib.float64)).pow(2).sum().backward()
        return sorted(seen[0]), [t.grad.numpy() for t in (x, w, b)]
    (want_seen, want), (got_seen, got) = run(torch), run(ember)
    assert got_seen == want_seen
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-12)
