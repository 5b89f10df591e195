"""Values a forward keeps for its node (NOTE [Kept values] in ops/_registry.py): asked for only
when the call is recorded, stored on the node (never as outputs), handed to the derivative,
packed by saved-tensor hooks, freed by backward. cross_entropy keeps ``exp(input - shift)``
(its input is not saved, so a write into it before backward is allowed, as in PyTorch, whose
node saves the log-softmax); scaled_dot_product_attention keeps the CPU kernel its arrays
take. References are NumPy's."""

import gc
import weakref

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd import gradcheck, gradgradcheck
from ember.ops._registry import REGISTRY

CE = REGISTRY["nn.functional.cross_entropy"]
SDPA = REGISTRY["nn.functional.scaled_dot_product_attention"]


def _softmax(a):
    e = np.exp(a - a.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _ce_grad(a, target):
    """d mean cross_entropy / d logits for (N, C) logits ``a`` and class indices."""
    hot = np.zeros_like(a)
    hot[np.arange(len(target)), target] = 1
    return (_softmax(a) - hot) / len(target)


@pytest.fixture
def logits():
    rng = np.random.default_rng(0)
    return rng.standard_normal((4, 5)) * 3, np.array([0, 1, 4, 2])


def test_the_forward_is_asked_to_keep_only_when_the_call_is_recorded(monkeypatch, logits):
    asked = []
    forward = CE.forward

    def spy(xp, *args, keep=None):
        asked.append(keep)
        return forward(xp, *args, keep=keep)
    monkeypatch.setattr(CE, "forward", spy)
    a, target = logits
    t = ember.tensor(target)
    F.cross_entropy(ember.tensor(a), t)                     # nothing requires grad
    x = ember.tensor(a, requires_grad=True)
    with ember.no_grad():
        F.cross_entropy(x, t)
    with ember.inference_mode():
        F.cross_entropy(x, t)
    assert asked == [None, None, None]
    loss = F.cross_entropy(x, t)
    # (e, then the total weight PyTorch's nll_loss saves: round 29)
    assert type(asked[-1]) is list and len(asked[-1]) == 2
    # the node keeps e = exp(x - shift): its rows normalized are the softmax
    e = loss.grad_fn._kept[0].detach()
    np.testing.assert_allclose((e / e.sum(1, keepdim=True)).numpy(), _softmax(a), rtol=1e-12)
    assert loss.shape == () and type(loss) is ember.Tensor     # no extra output


def test_a_write_into_the_input_before_backward_is_allowed(logits):
    a, target = logits
    leaf = ember.tensor(a, requires_grad=True)
    x = leaf * 1
    loss = F.cross_entropy(x, ember.tensor(target))
    x.mul_(7)                       # the node saved no input: backward reads what it kept
    loss.backward()
    np.testing.assert_allclose(leaf.grad.numpy(), _ce_grad(a, target), rtol=1e-10, atol=1e-14)


def test_kept_values_are_freed_by_backward_and_kept_under_retain_graph(logits):
    a, target = logits
    x = ember.tensor(a, requires_grad=True)
    loss = F.cross_entropy(x, ember.tensor(target))
    node = loss.grad_fn
    loss.backward(retain_graph=True)
    assert node._kept is not None
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * _ce_grad(a, target), rtol=1e-10,
                               atol=1e-14)
    assert node._kept is None
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_saved_tensor_hooks_pack_and_unpack_the_kept_tensor(logits):
    a, target = logits
    packed, unpacked = [], []

    def pack(t):
        packed.append(t.numpy().copy())
        return t.detach().clone()

    def unpack(t):
        unpacked.append(tuple(t.shape))
        return t

    def grads(hooks):
        x = ember.tensor(a, requires_grad=True)
        if hooks:
            with ember.autograd.graph.saved_tensors_hooks(pack, unpack):
                loss = F.cross_entropy(x, ember.tensor(target), label_smoothing=0.1)
        else:
            loss = F.cross_entropy(x, ember.tensor(target), label_smoothing=0.1)
        g, = ember.autograd.grad(loss, x, create_graph=True)
        gg, = ember.autograd.grad((g * g).sum(), x)
        return g.detach().numpy(), gg.numpy()

    want = grads(False)
    got = grads(True)
    # exp's node keeps its result e, cross_entropy's node keeps e too, then the target, then
    # the total weight (packed after the inputs, as PyTorch's nll_loss saves it), then what
    # PyTorch's smoothing composite saves: the mask of ignored targets and the mean's count
    assert [p.shape for p in packed] == [(4, 5), (4, 5), (4,), (), (4,), ()]
    kept = packed[1]
    np.testing.assert_allclose(kept / kept.sum(1, keepdims=True), _softmax(a), rtol=1e-12)
    assert (4, 5) in unpacked
    for w, g in zip(want, got):     # double backward reaches the input through the unpacked e
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("kwargs", [{}, {"reduction": "none"}, {"label_smoothing": 0.2},
                                    {"weight": True}, {"spatial": True}])
def test_gradients_through_the_kept_exp(kwargs):
    rng = np.random.default_rng(1)
    kwargs = dict(kwargs)
    shape, tshape = ((2, 4, 3), (2, 3)) if kwargs.pop("spatial", False) else ((3, 4), (3,))
    x = ember.tensor(rng.standard_normal(shape), requires_grad=True)
    t = ember.tensor(rng.integers(0, 4, tshape))
    if kwargs.pop("weight", False):
        kwargs["weight"] = ember.tensor(rng.random(4) + 0.5)
    assert F.cross_entropy(x, t, **kwargs).grad_fn._kept is not None
    assert gradcheck(lambda x: F.cross_entropy(x, t, **kwargs), (x,))
    assert gradgradcheck(lambda x: F.cross_entropy(x, t, **kwargs), (x,))


def test_calls_that_keep_nothing_copy_the_input(logits):
    # float16 logits and probability targets keep no e: the node saves a copy of the input
    a, target = logits
    probabilities = ember.tensor(_softmax(a[::-1].copy()))
    leaf = ember.tensor(a, requires_grad=True)
    x = leaf * 1
    loss = F.cross_entropy(x, probabilities)
    assert loss.grad_fn._kept is None
    x.mul_(7)
    loss.backward()
    np.testing.assert_allclose(leaf.grad.numpy(), (_softmax(a) - probabilities.numpy()) / 4,
                               rtol=1e-10, atol=1e-14)


def _qkv(*shape):
    rng = np.random.default_rng(2)
    return [ember.tensor(rng.standard_normal(shape), requires_grad=True) for _ in range(3)]


@pytest.mark.parametrize("shape,mask_grad,kernel,node", [
    ((2, 3, 5, 4), False, "flash", "ScaledDotProductFlashAttentionForCpuBackward0"),
    ((2, 3, 5, 4), True, "flash", "UnsafeViewBackward0"),   # a mask requiring grad: math
    ((3, 5, 4), False, "math", "UnsafeViewBackward0")])
def test_sdpa_keeps_its_kernel_choice(shape, mask_grad, kernel, node):
    q, k, v = _qkv(*shape)
    mask = ember.zeros(5, 5, dtype=ember.float64, requires_grad=mask_grad)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert out.grad_fn._kept == (kernel,)
    assert out.grad_fn.name() == node
    w = np.exp(q.detach().numpy() @ k.detach().numpy().swapaxes(-1, -2) / 2)
    w /= w.sum(-1, keepdims=True)
    np.testing.assert_allclose(out.detach().numpy(), w @ v.detach().numpy(), rtol=1e-10)
    out.sum().backward()
    # d sum(out) / dv = column sums of the weights, for every value dim
    np.testing.assert_allclose(v.grad.numpy(), np.repeat(w.sum(-2)[..., None], 4, -1),
                               rtol=1e-10)


def test_a_recording_that_raises_holds_none_of_its_inputs():
    # a mask requiring grad with is_causal is refused while the call records (PyTorch's math
    # kernel); nothing of the call outlives the error
    q, k, v = _qkv(2, 3, 5, 4)
    mask = ember.zeros(5, 5, dtype=ember.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True)
    alive = weakref.ref(q)
    del q
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("shape,tshape,dtype,saved_shape", [
    ((4, 5), (4,), ember.float64, (4, 5)), ((5,), (), ember.float32, (5,)),
    ((2, 5, 3), (2, 3), ember.float64, (2, 5, 1, 3)),
    ((2, 5, 3, 2), (2, 3, 2), ember.float16, (2, 5, 3, 2))])
def test_the_nll_node_gives_the_log_softmax_as_its_saved_self(shape, tshape, dtype,
                                                              saved_shape):
    # PyTorch's node saves log_softmax(input) (3-d input as nll_loss2d reads it, (N, C, 1, d));
    # ember's computes it from the kept e (from the saved input for float16, which keeps none)
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape) * 3
    x = ember.tensor(a, dtype=dtype, requires_grad=True)
    loss = F.cross_entropy(x, ember.tensor(rng.integers(0, 5, tshape)))
    node = loss.grad_fn
    assert "_saved_self" in dir(node)
    a = x.detach().double().numpy()
    want = np.log(_softmax(a)) if a.ndim > 1 else np.log(_softmax(a[None]))[0]
    got = node._saved_self
    assert got.dtype is dtype and got.shape == saved_shape
    assert got.requires_grad             # (its history reaches the input, as in PyTorch)
    np.testing.assert_allclose(got.detach().double().numpy(), want.reshape(got.shape),
                               rtol=1e-3 if dtype is ember.float16 else 1e-6, atol=1e-6)
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        node._saved_self


def test_per_sample_gradients_of_cross_entropy_under_vmap_of_grad():
    # the first-order shortcut reads raw arrays, which a batched gradient has not: a
    # transform's backward takes the composed path
    rng = np.random.default_rng(4)
    a, target = rng.standard_normal((3, 4, 5)), rng.integers(0, 5, (3, 4))
    per_sample = ember.func.vmap(ember.func.grad(lambda x, t: F.cross_entropy(x, t)))
    got = per_sample(ember.tensor(a), ember.tensor(target))
    for i in range(3):
        np.testing.assert_allclose(got[i].numpy(), _ce_grad(a[i], target[i]), rtol=1e-10,
                                   atol=1e-14)
