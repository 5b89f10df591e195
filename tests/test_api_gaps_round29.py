"""Small API gaps of round 29, checked against NumPy: ``ember._fused_rms_norm`` at top level
(output and inverse root mean square), ``argsort(..., stable=True, out=...)``, whose ``out=``
only the signature with ``stable`` takes, and the ``out=`` of floor_divide, heaviside and
histogram with an input requiring grad: written, with a NotImplemented node refusing backward."""

import numpy as np
import pytest

import ember


def _rms_ref(x, k, w, eps):
    rows = x.reshape(-1, k).astype(np.float64)
    rstd = 1 / np.sqrt((rows * rows).mean(1) + eps)
    out = rows * rstd[:, None]
    return (out * w.reshape(k) if w is not None else out), rstd


@pytest.mark.parametrize("shape, ns", [((2, 3, 4), [4]), ((2, 3, 4), (3, 4))])
def test_fused_rms_norm_is_public(shape, ns):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(ns).astype(np.float32)
    k = int(np.prod(ns))
    out, rstd = ember._fused_rms_norm(ember.tensor(x), ns, ember.tensor(w), 1e-5)
    want, want_rstd = _rms_ref(x, k, w, 1e-5)
    lead = shape[:len(shape) - len(ns)]
    assert out.shape == shape and out.dtype == ember.float32
    assert tuple(rstd.shape) == lead + (1,) * len(ns)
    np.testing.assert_allclose(out.numpy(), want.reshape(shape), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd.numpy().reshape(-1), want_rstd, rtol=1e-5)


def test_fused_rms_norm_keywords_and_no_weight():
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    out, rstd = ember._fused_rms_norm(input=ember.tensor(x), normalized_shape=[3], weight=None,
                                      eps=None)
    want, want_rstd = _rms_ref(x, 3, None, float(np.finfo(np.float32).eps))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(rstd.numpy().reshape(-1), want_rstd, rtol=1e-6)


def test_argsort_stable_out():
    x = np.array([3.0, 1.0, 2.0, 1.0, 0.5], dtype=np.float32)
    o = ember.empty(0, dtype=ember.int64)
    r = ember.argsort(ember.tensor(x), stable=True, out=o)
    assert r is o
    np.testing.assert_array_equal(o.numpy(), np.argsort(x, kind="stable"))
    o2 = ember.empty(0, dtype=ember.int64)
    ember.argsort(ember.tensor(x), dim=0, descending=True, stable=False, out=o2)
    np.testing.assert_array_equal(o2.numpy(), np.argsort(-x, kind="stable"))


def test_argsort_out_refusals():
    x = ember.tensor([3.0, 1.0, 2.0])
    with pytest.raises(TypeError, match=r"argsort\(\) received an invalid combination"):
        ember.argsort(x, out=ember.empty(0, dtype=ember.int64))
    with pytest.raises(TypeError, match=r"argsort\(\) received an invalid combination"):
        ember.argsort(x, 0, out=ember.empty(0, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype long int, but "
                                           "got float instead"):
        ember.argsort(x, stable=True, out=ember.empty(0))
    with pytest.raises(RuntimeError, match=r"^sort\(\): functions with out=\.\.\. arguments"):
        ember.argsort(x.clone().requires_grad_(), stable=True,
                      out=ember.empty(0, dtype=ember.int64))


def _outs():
    x = np.array([3.0, -1.0, 0.0, 2.0], dtype=np.float32)
    y = np.array([2.0, 2.0, 1.0, 1.0], dtype=np.float32)
    hist, edges = np.histogram(x, 3)
    return x, [
        ("floor_divide", lambda t, o: ember.floor_divide(t, ember.tensor(y), out=o),
         ember.empty(4), [np.floor_divide(x, y)]),
        ("heaviside", lambda t, o: ember.heaviside(t, ember.tensor(y), out=o), ember.empty(4),
         [np.heaviside(x, y)]),
        ("histogram", lambda t, o: ember.histogram(t, 3, out=o), (ember.empty(3), ember.empty(4)),
         [hist, edges]),
    ]


@pytest.mark.parametrize("i", range(3))
def test_out_of_underivable_op_records_not_implemented(i):
    x, cases = _outs()
    kernel, call, out, want = cases[i]
    t = ember.tensor(x, requires_grad=True)
    r = call(t, out)
    outs = out if isinstance(out, tuple) else (out,)
    assert all(a is b for a, b in zip(r if isinstance(r, tuple) else (r,), outs))
    for o, w in zip(outs, want):
        np.testing.assert_allclose(o.detach().numpy(), w, rtol=1e-6)
        assert o.requires_grad and not o.is_leaf
        assert type(o.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError, match=f"^derivative for aten::{kernel} is not implemented"):
        outs[0].sum().backward()


def test_out_of_underivable_op_untracked_without_grad():
    x, cases = _outs()
    for _, call, out, _ in cases:
        call(ember.tensor(x), out)
        assert all(o.grad_fn is None and not o.requires_grad
                   for o in (out if isinstance(out, tuple) else (out,)))
    with ember.no_grad():
        o = ember.empty(4)
        cases[0][1](ember.tensor(x, requires_grad=True), o)
        assert o.grad_fn is None
