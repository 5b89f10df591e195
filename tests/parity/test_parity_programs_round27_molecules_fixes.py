"""What the molecular programs of round 27 (test_parity_programs_round27_molecules.py) found, each
pinned against PyTorch: the gradient a @once_differentiable backward returns under
create_graph carries PyTorch's C++ ``Error`` node (class ``Error``, ``name()``
``torch::autograd::Error``, a bare repr), and differentiating it again raises PyTorch's
error; and a double backward through layer_norm that reaches only its statistics (forces
trained through a LayerNorm) gives its weight and bias no gradient, as group norm's does,
rather than zeros: autograd.grad calls the bias unused, and AdamW leaves it alone; and under
vmap, an in-place scatter_reduce_ / masked_fill_ into an unbatched tensor (a segment sum into
fresh zeros) fails with PyTorch's message for that op."""

import re

import numpy as np

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _once_grad(lib):
    """The create_graph gradient through a @once_differentiable Function."""

    class Once(lib.autograd.Function):
        @staticmethod
        def forward(ctx, r):
            ctx.save_for_backward(r)
            return lib.cos(r)

        @staticmethod
        @lib.autograd.function.once_differentiable
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            return -g * lib.sin(r)

    r = lib.tensor([0.3, 1.2], requires_grad=True)
    return lib.autograd.grad((Once.apply(r) ** 2).sum(), r, create_graph=True)[0]


def _node_facts(lib):
    node = _once_grad(lib).grad_fn
    return [type(node).__name__, type(node).__qualname__, type(node).__module__, node.name(),
            re.sub(r"0x[0-9a-f]+", "ADDR", repr(node)),
            [type(f).__name__ for f, _ in node.next_functions]]


def test_once_differentiable_error_node_like_torch():
    assert _node_facts(ember) == _node_facts(torch)


def test_once_differentiable_double_backward_raises_like_torch():
    messages = []
    for lib in (ember, torch):
        g = _once_grad(lib)
        assert g.requires_grad
        with pytest.raises(RuntimeError) as info:
            g.sum().backward()
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "differentiate twice" in messages[1]


_NORMS = {
    "layer_norm": ((6, 3), lambda F, x, w, b: F.layer_norm(x, (3,), w, b)),
    "group_norm": ((3, 4, 2), lambda F, x, w, b: F.group_norm(x, 2, w, b)),
    "instance_norm": ((2, 3, 4), lambda F, x, w, b: F.instance_norm(x, weight=w, bias=b)),
    "rms_norm": ((6, 3), lambda F, x, w, b: F.rms_norm(x, (3,), w) + 0 * b.sum()),
}


def _norm_force_grads(lib, name, allow_unused):
    """Gradients of a loss on forces (d y / d pos, create_graph) through a norm layer, as a
    force-trained potential with a LayerNorm takes them: the forces' graph reaches the
    norm's statistics but not its bias."""
    shape, norm = _NORMS[name]
    rng = np.random.default_rng(7)
    pos = lib.from_numpy(rng.standard_normal(shape).astype(np.float32)).requires_grad_()
    w = lib.from_numpy(rng.standard_normal(shape[-1] if name in ("layer_norm", "rms_norm")
                                           else shape[1]).astype(np.float32)).requires_grad_()
    b = lib.zeros_like(w).requires_grad_()
    y = norm(lib.nn.functional, pos * pos, w, b)
    forces = lib.autograd.grad(y.flatten()[::3].sum(), pos, create_graph=True)[0]
    try:
        grads = lib.autograd.grad(forces.pow(2).sum(), [pos, w, b], allow_unused=allow_unused)
    except RuntimeError as err:
        return str(err)
    return [None if g is None else g.detach().numpy() for g in grads]


@pytest.mark.parametrize("name", sorted(_NORMS))
def test_norm_double_backward_leaves_bias_unused_like_torch(name):
    assert _norm_force_grads(ember, name, False) == _norm_force_grads(torch, name, False)
    ours, theirs = (_norm_force_grads(lib, name, True) for lib in (ember, torch))
    assert ours[2] is None and theirs[2] is None
    for got, expected in zip(ours[:2], theirs[:2]):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_force_trained_layer_norm_bias_skipped_by_adamw_like_torch():
    """A force-only loss through a LayerNorm whose output the energy reads linearly: the
    bias gets no .grad (None), so AdamW leaves it undecayed, as in PyTorch."""
    results = []
    for lib in (ember, torch):
        rng = np.random.default_rng(3)
        norm = lib.nn.LayerNorm(4)
        head = lib.nn.Linear(4, 1)
        with lib.no_grad():
            for p in (*norm.parameters(), *head.parameters()):
                p.copy_(lib.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
        feats = lib.from_numpy(rng.standard_normal((5, 3, 4)).astype(np.float32))
        opt = lib.optim.AdamW([*norm.parameters(), *head.parameters()], lr=0.1,
                              weight_decay=0.5)
        pos = lib.from_numpy(rng.standard_normal((5, 3)).astype(np.float32)).requires_grad_()
        energy = head(norm(lib.einsum("ac,acf->af", pos * pos, feats))).sum()
        forces = -lib.autograd.grad(energy, pos, create_graph=True)[0]
        opt.zero_grad()
        forces.pow(2).sum().backward()
        opt.step()
        results.append([norm.bias.grad is None, norm.bias.detach().numpy().tolist(),
                        norm.weight.detach().numpy()])
    assert results[0][:2] == results[1][:2]
    assert results[1][0]
    np.testing.assert_allclose(results[0][2], results[1][2], rtol=1e-5, atol=1e-6)


_UNBATCHED_SELF_OPS = {
    "scatter_reduce_sum": lambda lib, o, p: o.scatter_reduce_(0, lib.tensor([0, 0, 1, 2, 4]),
                                                              p, "sum"),
    "scatter_reduce_amax_index": lambda lib, o, p: o.scatter_reduce_(
        0, (p[:2] > 0).long(), lib.ones(2), "amax", include_self=False),
    "masked_fill_number": lambda lib, o, p: o.masked_fill_(p > 0, 1.0),
    "masked_fill_tensor": lambda lib, o, p: o.masked_fill_(p > 0, lib.tensor(2.0)),
    "masked_fill_batched_value": lambda lib, o, p: o.masked_fill_(
        lib.tensor([True, False, True, False, True]), p[0]),
    "index_reduce": lambda lib, o, p: o.index_reduce_(0, lib.tensor([0, 0, 1, 2, 4]), p,
                                                      "prod"),
}


def _vmap_inplace_error(lib, name):
    def f(p):
        out = lib.zeros(5)
        _UNBATCHED_SELF_OPS[name](lib, out, p)
        return out
    with pytest.raises(RuntimeError) as info:
        lib.func.vmap(f)(lib.ones(3, 5) - 0.5)
    return str(info.value)


@pytest.mark.parametrize("name", sorted(_UNBATCHED_SELF_OPS))
def test_vmap_inplace_on_unbatched_self_message_like_torch(name):
    """A segment sum written in place into a fresh zeros tensor inside vmap (scatter_reduce_,
    masked_fill_) fails with PyTorch's message, which names the op as PyTorch's batching
    rule for it does."""
    assert _vmap_inplace_error(ember, name) == _vmap_inplace_error(torch, name)
