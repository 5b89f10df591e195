"""utils.checkpoint: same gradients as without, RNG state preserved, less memory held."""

import tracemalloc

import ember
import ember.nn as nn
from ember.utils.checkpoint import checkpoint, checkpoint_sequential


def _mlp(depth=6, width=256):
    ember.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Dropout(0.1))
                           for _ in range(depth)])


def _run(model, x, mode):
    for p in model.parameters():
        p.grad = None
    x.grad = None
    ember.manual_seed(7)
    tracemalloc.start()
    if mode == "plain":
        h = model(x)
    elif mode == "each":
        h = x
        for block in model:
            h = checkpoint(block, h, use_reentrant=False)
    else:
        h = checkpoint_sequential(model, 3, x, use_reentrant=False)
    held = tracemalloc.get_traced_memory()[0]
    h.square().sum().backward()
    tracemalloc.stop()
    return [p.grad for p in model.parameters()] + [x.grad], held


def test_checkpoint_gradients_equal_plain_gradients_with_dropout():
    model = _mlp()
    x = ember.randn(64, 256, requires_grad=True)
    plain, held_plain = _run(model, x, "plain")
    each, held_each = _run(model, x, "each")
    seq, _ = _run(model, x, "sequential")
    for a, b, c in zip(plain, each, seq):
        assert ember.allclose(a, b, atol=1e-6) and ember.allclose(a, c, atol=1e-6)
    assert held_each < held_plain / 2


def test_checkpoint_without_grad_inputs_still_reaches_parameters():
    lin = nn.Linear(3, 2)
    out = checkpoint(lin, ember.ones(4, 3), use_reentrant=False)
    out.sum().backward()
    assert ember.allclose(lin.weight.grad, ember.full((2, 3), 4.0))


def test_checkpoint_under_no_grad_just_runs():
    with ember.no_grad():
        out = checkpoint(lambda a: a * 2, ember.ones(2), use_reentrant=False)
    assert out.tolist() == [2.0, 2.0]


def test_reentrant_checkpoint_node_is_named_as_torch_names_it():
    x = ember.ones(2, requires_grad=True)
    y = checkpoint(lambda a: a * 2, x, use_reentrant=True)
    assert type(y.grad_fn).__name__ == "CheckpointFunctionBackward"
    assert y.grad_fn.name() == "CheckpointFunctionBackward"


def test_reentrant_checkpoint_under_vmap_and_grad():
    x = ember.linspace(-1, 1, 6).reshape(2, 3)

    def seg(b):
        return b.sin() * b
    g = ember.func.vmap(ember.func.grad(
        lambda a: checkpoint(seg, a, use_reentrant=True).sum()))(x)
    assert ember.allclose(g, x.sin() + x * x.cos())
    xr = x.clone().requires_grad_()
    ember.func.vmap(lambda a: checkpoint(seg, a, use_reentrant=True))(xr).sum().backward()
    assert ember.allclose(xr.grad, x.sin() + x * x.cos())
