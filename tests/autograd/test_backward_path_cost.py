"""The cost of the graph machinery's hot paths. They run no import statement (a
function-level ``from x import y`` costs about 0.9 us, more than a small node's bookkeeping)."""

import builtins
import sys

import ember
from ember.nn.functional import layer_norm

_GRAPH_FILES = ("autograd/graph.py", "autograd/engine.py", "ops/_recording.py")


def _imports_from_graph_files(fn):
    """The imports ``fn()`` makes from the graph machinery's modules, as (module, function)."""
    seen = []
    real_import = builtins.__import__

    def spy(name, *args, **kwargs):
        code = sys._getframe(1).f_code
        if code.co_filename.replace("\\", "/").endswith(_GRAPH_FILES):
            seen.append((name, code.co_name))
        return real_import(name, *args, **kwargs)

    builtins.__import__ = spy
    try:
        fn()
    finally:
        builtins.__import__ = real_import
    return seen


def test_record_and_backward_import_nothing():
    x = ember.ones(4, 4, requires_grad=True)

    def step():
        # metadata, a saved output, a view, several outputs (layer_norm's), a leaf
        y = x.reshape(16).sum() + (x * 1.5).tanh().sum() + (layer_norm(x, (4,)) * x).sum()
        y.backward()
        x.grad = None
    step()                              # first use: accumulators and caches made
    assert _imports_from_graph_files(step) == []
    y = x.reshape(16).sum() + (x * 1.5).tanh().sum()
    y.backward()
    expected = 1 + 1.5 * (1 - ember.tanh(ember.full((4, 4), 1.5)) ** 2)
    assert ember.allclose(x.grad, expected)


def test_bias_gradient_is_one_reduction_without_a_graph():
    from ember.autograd.graph import sum_to
    grad = ember.arange(24.0).reshape(2, 3, 4)
    with ember.no_grad():
        summed = sum_to(grad, (4,))
    assert summed._view is None                     # a sum's own array, not a reshaped view
    assert summed.tolist() == [60.0, 66.0, 72.0, 78.0]


def test_bias_gradient_in_a_graph_keeps_pytorchs_view():
    x = ember.ones(4, 16, requires_grad=True)
    b = ember.zeros(16, requires_grad=True)
    (gb,) = ember.autograd.grad((x * 2 + b).pow(2).sum(), b, create_graph=True)
    assert gb.grad_fn.name() == "ViewBackward0"     # PyTorch: sum(keepdim=True), then view
    assert gb.tolist() == [16.0] * 16
