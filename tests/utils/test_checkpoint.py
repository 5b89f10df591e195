"""utils.checkpoint beyond plain gradients (tests/func/test_checkpoint.py): the non-reentrant
variant under autograd.grad, double backward, retain_graph, autocast and context_fn; early
stopping and the determinism checks; the reentrant variant's argument rules; the helpers."""

import numpy as np
import pytest

import ember
from ember.utils.checkpoint import (CheckpointError, checkpoint, detach_variable,
                                    get_device_states, noop_context_fn,
                                    set_checkpoint_early_stop)


class _Counted:
    """``x -> (x.sin() * w).exp().sum()``-like chain that counts how often it runs."""

    def __init__(self, w):
        self.w, self.calls, self.finished = w, 0, 0

    def __call__(self, x):
        self.calls += 1
        y = (x.sin() * self.w).exp()
        self.finished += 1
        return y


def _values(t):
    return t.detach().numpy().copy()


def test_autograd_grad_reaches_closed_over_parameters():
    w = ember.tensor([0.5, -1.0, 2.0], dtype=ember.float64, requires_grad=True)
    x = ember.tensor([0.1, 0.2, 0.3], dtype=ember.float64, requires_grad=True)
    fn = _Counted(w)
    out = checkpoint(fn, x, use_reentrant=False).sum()
    gw, gx = ember.autograd.grad(out, (w, x))
    plain = (x.sin() * w).exp().sum()
    ew, ex = ember.autograd.grad(plain, (w, x))
    np.testing.assert_allclose(_values(gw), _values(ew), rtol=1e-12)
    np.testing.assert_allclose(_values(gx), _values(ex), rtol=1e-12)
    assert fn.calls == 2                # the forward and one recomputation


def test_backward_of_backward_through_a_checkpoint():
    x = ember.tensor([0.3, 0.7], dtype=ember.float64, requires_grad=True)
    out = checkpoint(lambda a: (a * a * a).sin(), x, use_reentrant=False).sum()
    (g,) = ember.autograd.grad(out, x, create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), x)
    v = x.detach().numpy()
    u = v ** 3
    np.testing.assert_allclose(g.detach().numpy(), np.cos(u) * 3 * v ** 2, rtol=1e-12)
    np.testing.assert_allclose(gg.numpy(), -np.sin(u) * 9 * v ** 4 + np.cos(u) * 6 * v,
                               rtol=1e-12)


def test_retain_graph_recomputes_for_each_backward():
    w = ember.ones(3, requires_grad=True)
    fn = _Counted(w)
    out = checkpoint(fn, ember.ones(3), use_reentrant=False).sum()
    out.backward(retain_graph=True)
    first = _values(w.grad)
    out.backward()
    np.testing.assert_allclose(_values(w.grad), 2 * first, rtol=1e-6)
    assert fn.calls == 3


def test_early_stop_skips_the_rest_of_the_recomputation():
    w = ember.ones(3, requires_grad=True)
    fn = _Counted(w)
    checkpoint(fn, ember.ones(3), use_reentrant=False).sum().backward()
    assert (fn.calls, fn.finished) == (2, 1)    # exp saved its output: the rerun stops there
    fn = _Counted(w)
    with set_checkpoint_early_stop(False):
        out = checkpoint(fn, ember.ones(3), use_reentrant=False)
    out.sum().backward()
    assert (fn.calls, fn.finished) == (2, 2)


def test_dropout_draws_the_same_mask_in_the_recomputation():
    ember.manual_seed(0)
    w = ember.ones(1000, requires_grad=True)
    x = ember.ones(1000)
    out = checkpoint(lambda a: ember.nn.functional.dropout(a * w, 0.5), x, use_reentrant=False)
    mask = _values(out) != 0
    out.sum().backward()
    np.testing.assert_array_equal(_values(w.grad) != 0, mask)


def test_recomputation_runs_under_the_forwards_autocast():
    lin = ember.nn.Linear(4, 4)
    x = ember.randn(2, 4)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        out = checkpoint(lambda a: lin(a).relu(), x, use_reentrant=False)
    assert out.dtype == ember.bfloat16
    out.float().sum().backward()            # a float32 rerun would fail the metadata check
    assert lin.weight.grad.dtype == ember.float32


def test_context_fn_wraps_forward_and_recomputation():
    log = []

    class Tag:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            log.append(self.name)

        def __exit__(self, *exc):
            pass
    x = ember.ones(2, requires_grad=True)
    out = checkpoint(lambda a: a.exp(), x, use_reentrant=False,
                     context_fn=lambda: (Tag("forward"), Tag("recompute")))
    assert log == ["forward"]
    out.sum().backward()
    assert log == ["forward", "recompute"]


def test_a_recomputation_saving_fewer_tensors_raises():
    flag = [True]

    def fn(a):
        b = a.sin()
        if flag[0]:
            b = b.exp()
        return b.cos()
    x = ember.ones(3, requires_grad=True)
    out = checkpoint(fn, x, use_reentrant=False)
    flag[0] = False
    with pytest.raises(CheckpointError, match="Number of tensors saved during forward: 3\n"
                                              "Number of tensors saved during recomputation: 2"):
        out.sum().backward()


def test_a_recomputation_saving_other_dtypes_raises_unless_unchecked():
    flag = [True]

    def fn(a):
        return (a.double() if flag[0] else a).sin()
    for check in ("default", "none"):
        flag[0] = True
        x = ember.ones(3, requires_grad=True)
        out = checkpoint(fn, x, use_reentrant=False, determinism_check=check)
        flag[0] = False
        if check == "default":
            with pytest.raises(CheckpointError, match="tensor at position 0:\nsaved metadata: "
                                                      ".*float64.*\nrecomputed metadata: "
                                                      ".*float32"):
                out.sum().backward()
        else:
            out.sum().backward()
            assert x.grad is not None


def test_argument_rules():
    x = ember.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: bogus"):
        checkpoint(lambda a: a, x, use_reentrant=True, bogus=1)
    with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
        checkpoint(lambda a: a, x, use_reentrant=True, context_fn=noop_context_fn, debug=True)
    with pytest.raises(ValueError, match="determinism_check should be one of"):
        checkpoint(lambda a: a, x, use_reentrant=False, determinism_check="x")
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed"):
        out = checkpoint(lambda a: a * 3, x)
    out.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    out = checkpoint(lambda a, *, k: a * k, x, use_reentrant=False, k=2.0)
    assert out.tolist() == [2.0, 2.0]


def test_reentrant_without_grad_inputs_warns_and_records_nothing():
    # PyTorch's documented pitfall: the segment's parameters get no gradient
    w = ember.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="^None of the inputs have requires_grad=True. "
                                         "Gradients will be None$"):
        out = checkpoint(lambda a: a * w, ember.full((2,), 3.0), use_reentrant=True)
    assert not out.requires_grad and out.grad_fn is None and out.tolist() == [3.0, 3.0]
    x = ember.full((2,), 3.0, requires_grad=True)
    checkpoint(lambda a: a * w, x, use_reentrant=True).sum().backward()
    assert w.grad.tolist() == [3.0, 3.0] and x.grad.tolist() == [1.0, 1.0]


def test_helpers():
    t = ember.ones(2, requires_grad=True)
    (d,) = detach_variable((t,))
    assert d.requires_grad and d.is_leaf and d is not t
    with pytest.raises(RuntimeError, match="Only tuple of tensors is supported. Got "
                                           "Unsupported input type: Tensor"):
        detach_variable(t)
    assert get_device_states(ember.ones(2), 3) == ([], [])
    forward, recompute = noop_context_fn()
    with forward, recompute:
        pass


def test_checkpoint_sequential_warns_under_its_own_name_and_checks_kwargs():
    seq = ember.nn.Sequential(ember.nn.Linear(2, 2), ember.nn.Tanh(), ember.nn.Linear(2, 1))
    x = ember.ones(3, 2, requires_grad=True)
    with pytest.warns(UserWarning, match="^torch.utils.checkpoint.checkpoint_sequential: the "
                                         "use_reentrant parameter should be passed explicitly. "
                                         "In version 2.9 we will raise"):
        out = ember.utils.checkpoint.checkpoint_sequential(seq, 2, x)
    assert out.shape == (3, 1) and out.grad_fn.name() == "AddmmBackward0"
    with pytest.raises(ValueError, match="^Unexpected keyword arguments: bogus$"):
        ember.utils.checkpoint.checkpoint_sequential(seq, 2, x, use_reentrant=False, bogus=1)
    out = ember.utils.checkpoint.checkpoint_sequential(seq, 2, x, use_reentrant=False,
                                                       preserve_rng_state=False)
    out.sum().backward()
    assert x.grad.shape == (3, 2)


def test_reentrant_checkpoint_refuses_grad_and_backward_inputs():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    message = ("^When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad"
               r"\(\) or passing an `inputs` parameter to .backward\(\).")
    out = checkpoint(lambda a: a * a, x, use_reentrant=True)
    with pytest.raises(RuntimeError, match=message):
        ember.autograd.grad(out.sum(), x, retain_graph=True)
    with pytest.raises(RuntimeError, match=message):
        out.sum().backward(inputs=[x], retain_graph=True)
    assert x.grad is None
    out.sum().backward()                # a plain backward, nested checkpoints included
    assert x.grad.tolist() == [2.0, 4.0]
    inner = lambda a: checkpoint(lambda b: b.exp(), a * 2, use_reentrant=True)  # noqa: E731
    x.grad = None
    checkpoint(inner, x, use_reentrant=True).sum().backward()
    assert [round(v, 3) for v in x.grad.tolist()] == [14.778, 109.196]
