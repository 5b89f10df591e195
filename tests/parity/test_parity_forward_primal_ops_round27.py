"""Parity (round 27): ops handed a forward-mode transform's input directly (it reports
``requires_grad=False``, NOTE [Forward-mode primals]) still record what its tangent and the
derivatives of that tangent need: saved copies of inputs, nn.grad's convolutions, attention's
mask, bce_with_logits' weights, in-place sampling, ``out=``; and what leaves the function as
a value (repr, deepcopy, pickle, save) is a plain tensor."""

import copy
import io
import pickle

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _np(x):
    return x.detach().cpu().numpy()


def _arrays(seed, shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def _call(lib, name, *a):
    f = lib.nn.functional
    return {
        "cross_entropy": lambda x: f.cross_entropy(x, lib.tensor([0, 1, 3]), label_smoothing=0.2),
        "kron": lambda a, b: lib.kron(a, b) ** 2,
        "trapezoid": lambda y, x: lib.trapezoid(y, x),
        "ndtr": lambda x: lib.special.ndtr(x),
        "sdpa": lambda q, k, v: f.scaled_dot_product_attention(q, k, v, is_causal=True),
        "conv2d_input": lambda w, g: lib.nn.grad.conv2d_input((1, 1, 5, 5), w, g),
        "conv2d_weight": lambda x, g: lib.nn.grad.conv2d_weight(x, (2, 1, 3, 3), g),
    }[name](*a)


_SHAPES = {"cross_entropy": [(3, 4)], "kron": [(2, 2), (2, 3)], "trapezoid": [(5,), (5,)],
           "ndtr": [(5,)], "sdpa": [(1, 3, 4)] * 3,
           "conv2d_input": [(2, 1, 3, 3), (1, 2, 3, 3)],
           "conv2d_weight": [(1, 1, 5, 5), (1, 2, 3, 3)]}


def _grad_of_jvp(lib, name):
    xs = _arrays(0, _SHAPES[name])
    ts = tuple(lib.tensor(t) for t in _arrays(1, _SHAPES[name]))

    def tangent_sum(*a):
        return lib.func.jvp(lambda *b: _call(lib, name, *b), a, ts)[1].sum()
    argnums = tuple(range(len(xs)))
    return [_np(g) for g in lib.func.grad(tangent_sum, argnums)(*[lib.tensor(x) for x in xs])]


@pytest.mark.parametrize("name", sorted(_SHAPES))
def test_grad_of_jvp_through_ops_reading_requires_grad(name):
    # (the ops save copies of their inputs, or choose to keep a graph, by whether the input
    # records: the input's own dependence must reach the outer gradient)
    for e, t in zip(_grad_of_jvp(ember, name), _grad_of_jvp(torch, name)):
        np.testing.assert_allclose(e, t, rtol=1e-6, atol=1e-8)


def _attention_mask_jvp(lib):
    q, k, v, m, tm = (lib.tensor(a) for a in _arrays(2, [(1, 3, 4)] * 3 + [(1, 3, 3)] * 2))
    f = lib.nn.functional.scaled_dot_product_attention
    return _np(lib.func.jvp(lambda mask: f(q, k, v, attn_mask=mask), (m,), (tm,))[1])


def test_jvp_in_the_attention_mask():
    np.testing.assert_allclose(_attention_mask_jvp(ember), _attention_mask_jvp(torch),
                               rtol=1e-6, atol=1e-8)


def _bce_weights_jvp(lib, reduction, dtype):
    x, w, pw, tw, tpw = _arrays(3, [(3, 4), (4,), (4,), (4,), (4,)])
    t = np.random.default_rng(4).uniform(size=(3, 4))
    x, t, w, pw, tw, tpw = (lib.tensor(a, dtype=getattr(lib, dtype)) for a in (x, t, w, pw,
                                                                             tw, tpw))
    f = lib.nn.functional.binary_cross_entropy_with_logits
    out = lib.func.jvp(lambda a, b: f(x, t, weight=a, pos_weight=b.abs(), reduction=reduction),
                       (w, pw), (tw, tpw))
    jw = lib.func.jacfwd(lambda b: f(x, t, weight=w, pos_weight=b, reduction=reduction))(pw)
    return [_np(o) for o in out] + [_np(jw)]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_jvp_in_bce_with_logits_weights(reduction, dtype):
    # (PyTorch's forward formula carries both tangents; its reverse mode refuses them)
    tol = 1e-5 if dtype == "float32" else 1e-10
    for e, t in zip(_bce_weights_jvp(ember, reduction, dtype),
                    _bce_weights_jvp(torch, reduction, dtype)):
        np.testing.assert_allclose(e, t, rtol=tol, atol=tol)


def _written(lib, how):
    x, t = lib.tensor([1.0, 2.0, 3.0]), lib.tensor([1.0, 0.5, 0.25])

    def f(a):
        {"normal_": lambda: a.normal_(), "uniform_": lambda: a.uniform_(),
         "bernoulli_": lambda: a.bernoulli_(0.5)}[how]()
        return a * 0 + 1
    return _np(lib.func.jvp(f, (x,), (t,))[1])


@pytest.mark.parametrize("how", ["normal_", "uniform_", "bernoulli_"])
def test_sampling_into_the_input_cuts_its_tangent(how):
    np.testing.assert_array_equal(_written(ember, how), _written(torch, how))


def _refuses(lib, which):
    x, t = lib.tensor([1.0, 2.0, 3.0]), lib.tensor([1.0, 0.5, 0.25])
    f = {"out": lambda a: lib.add(lib.ones(3), lib.ones(3), out=a),
         "narrow_copy": lambda a: lib.narrow_copy(a, 0, 0, 2, out=lib.empty(2)),
         "resize_": lambda a: a.resize_(3)}[which]
    try:
        lib.func.jvp(f, (x,), (t,))
    except (RuntimeError, NotImplementedError) as e:
        return str(e)
    return None


@pytest.mark.parametrize("which", ["out", "narrow_copy", "resize_"])
def test_writes_refused_on_the_input(which):
    # (PyTorch's out= refusal is its forward AD's NotImplementedError, ember's the reverse
    # mode's RuntimeError; both refuse rather than drop the tangent)
    got, want = _refuses(ember, which), _refuses(torch, which)
    assert got is not None and want is not None
    if which == "resize_":
        assert got == want == "cannot resize variables that has a forward grad"


def _flag_cleared(lib):
    def f(a):
        a.requires_grad = False
        return a * a
    out = lib.func.jvp(f, (lib.tensor([1.0, 2.0]),), (lib.tensor([1.0, 0.5]),))
    return [_np(o) for o in out]


def test_clearing_requires_grad_on_the_input_keeps_its_tangent():
    for e, t in zip(_flag_cleared(ember), _flag_cleared(torch)):
        np.testing.assert_array_equal(e, t)


def test_the_input_leaves_as_a_plain_tensor():
    seen = {}

    def f(a):
        seen["repr"], seen["plain"] = repr(a), repr(a.detach())
        seen["deepcopy"] = copy.deepcopy(a)
        seen["pickle"] = pickle.loads(pickle.dumps(a))
        buffer = io.BytesIO()
        ember.save([a, a[1:]], buffer)
        buffer.seek(0)
        seen["load"] = ember.load(buffer)
        return a.sin()
    ember.func.jvp(f, (ember.tensor([1.0, 2.0]),), (ember.tensor([1.0, 1.0]),))
    assert seen["repr"] == seen["plain"] == "tensor([1., 2.])"
    loaded = seen["load"]
    for t in (seen["deepcopy"], seen["pickle"], loaded[0]):
        assert type(t) is ember.Tensor and not t.requires_grad
        np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])
    loaded[0].add_(1)       # (saved as one storage, as the view was of it)
    np.testing.assert_array_equal(loaded[1].detach().numpy(), [3.0])


def _argument_tangent(lib, which):
    x, a = lib.tensor([[0.2, 0.7], [0.4, 0.9]]), lib.tensor([0.5, 1.5])
    f = lib.nn.functional
    call = {"bce_weight": lambda w: f.binary_cross_entropy(x, x * 0 + 0.5, weight=w),
            "soft_margin_target": lambda t: f.soft_margin_loss(x, t.expand(2, 2)),
            "batch_norm_running_mean": lambda m: f.batch_norm(x, m, a, training=False),
            "fake_quantize_scale": lambda s: lib.fake_quantize_per_tensor_affine(
                x, s[:1], lib.tensor([0], dtype=lib.int32), 0, 255)}[which]
    try:
        return _np(lib.func.jvp(call, (a,), (lib.ones(2),))[1])
    except (RuntimeError, NotImplementedError):
        return "refused"


@pytest.mark.parametrize("which", ["bce_weight", "soft_margin_target", "batch_norm_running_mean",
                                   "fake_quantize_scale"])
def test_arguments_reverse_mode_refuses_given_the_input(which):
    # (PyTorch's forward formula takes the first three as constants, a zero tangent, and has
    # none for fake_quantize: ember's derivative has no term for them either)
    got, want = _argument_tangent(ember, which), _argument_tangent(torch, which)
    if isinstance(want, str):
        assert got == want
    else:
        np.testing.assert_array_equal(got, want)



def _class_weight_jvp(lib, loss):
    x, w, tx, tw = (lib.tensor(a) for a in _arrays(5, [(3, 4), (4,), (3, 4), (4,)]))
    target = lib.tensor([0, 1, 3])
    f = getattr(lib.nn.functional, loss)
    out = lib.func.jvp(lambda a, b: f(a, target, weight=b.exp() * 2), (x, w), (tx, tw))
    return [_np(o) for o in out]


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_a_class_weight_computed_from_the_inputs_as_torch(loss):
    # (PyTorch's forward formula takes the weight as a constant; its reverse mode refuses it)
    for e, t in zip(_class_weight_jvp(ember, loss), _class_weight_jvp(torch, loss)):
        np.testing.assert_allclose(e, t, rtol=1e-6, atol=1e-8)
