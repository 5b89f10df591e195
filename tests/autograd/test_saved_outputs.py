"""What an op keeps of its outputs for backward, and so which outputs may change in place
before backward: only those its derivative reads (PyTorch's rule). ``relu_`` after max
pooling, or ``add_`` on the values of ``sort``, must not spoil backward; changing the indices
those derivatives read must still be caught."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _x(*shape):
    rng = np.random.default_rng(0)
    return ember.tensor(rng.standard_normal(shape), requires_grad=True)


CASES = {   # name -> (values output of an op on x, the gradient of sum(values) w.r.t. x)
    "max_pool2d": lambda x: F.max_pool2d(x, 2),
    "adaptive_max_pool2d": lambda x: F.adaptive_max_pool2d(x, 2),
    "max(dim)": lambda x: x.max(1)[0],
    "median(dim)": lambda x: x.median(1)[0],
    "sort": lambda x: x.sort(1)[0],
    "topk": lambda x: x.flatten(1).topk(3)[0],
    "kthvalue": lambda x: x.flatten(1).kthvalue(2)[0],
    "cummax": lambda x: x.cummax(1)[0],
    "frexp": lambda x: ember.frexp(x)[0],
    "pow scalar": lambda x: x ** 2,
    "erfinv": lambda x: ember.erfinv(x.tanh() * 0.5),
}


@pytest.mark.parametrize("name", list(CASES))
def test_values_may_change_in_place_before_backward(name):
    x = _x(2, 3, 4, 4)
    CASES[name](x).sum().backward()
    expected = x.grad.clone()
    x.grad = None
    values = CASES[name](x)
    values.mul_(3)                      # scaling after the op leaves d(values)/dx alone
    values.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * expected.numpy(), rtol=1e-12)


def test_changing_what_backward_reads_is_still_caught():
    values, indices = _x(5).sort()
    indices.add_(0)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: "
                                           r"\[ember.LongTensor \[5\]\] is at version 1; "
                                           r"expected version 0"):     # no op made indices
        values.sum().backward()
    y = _x(3).exp()
    y.add_(1)
    with pytest.raises(RuntimeError, match=r"\[ember.DoubleTensor \[3\]\], which is output 0 "
                                           r"of Exp, is at version 1; expected version 0 "
                                           r"instead. Hint: enable anomaly detection to find the "
                                           r"operation that failed to compute its gradient, with "
                                           r"ember.autograd.set_detect_anomaly\(True, "
                                           r"check_nan=False\).$"):
        y.sum().backward()
    z = _x(3) * 2
    w = z * z
    z.add_(1)                                   # z's node is now the in-place add's
    with ember.autograd.set_detect_anomaly(True), \
            pytest.raises(RuntimeError, match=r"which is output 0 of Add, is at version 1; "
                                              r"expected version 0 instead. Hint: the backtrace "
                                              r"further above shows the operation that failed "
                                              r"to compute its gradient. The variable in "
                                              r"question was changed in there or anywhere later. "
                                              r"Good luck!$"):
        w.sum().backward()


def test_in_place_on_a_later_output_differentiates_through_it():
    x = ember.arange(6.).view(2, 3).requires_grad_()
    var, mean = ember.var_mean(x, 1)
    mean.add_(1)                        # output 1; its node is now AddBackward0's
    mean.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3), 1 / 3))


def test_pow_has_pytorchs_slopes_at_zero():
    a = ember.tensor([0.0, 0.0], requires_grad=True)
    b = ember.tensor([0.0, 1.0], requires_grad=True)
    ember.pow(a, b).sum().backward()
    assert a.grad.tolist() == [0.0, 1.0] and b.grad.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("layer", [ember.nn.RNN, ember.nn.GRU, ember.nn.LSTM])
def test_recurrent_outputs_may_change_in_place(layer):
    ember.manual_seed(0)
    rnn = layer(3, 4).double()
    x = ember.randn(5, 2, 3, dtype=ember.float64)
    rnn(x)[0].sum().backward()
    expected = [p.grad.clone() for p in rnn.parameters()]
    rnn.zero_grad()
    out = rnn(x)[0]
    out.mul_(2)
    out.sum().backward()
    for p, g in zip(rnn.parameters(), expected):
        np.testing.assert_allclose(p.grad.numpy(), 2 * g.numpy(), rtol=1e-10)


NORMS = {
    "batch_norm": lambda x: F.batch_norm(x, None, None, training=True),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-2:]),
    "group_norm": lambda x: F.group_norm(x, 1),
    "instance_norm": lambda x: F.instance_norm(x),
    "rms_norm": lambda x: F.rms_norm(x, x.shape[-1:]),
}


@pytest.mark.parametrize("name", list(NORMS))
def test_normalized_outputs_may_change_in_place(name):
    x = _x(2, 3, 4, 4)
    NORMS[name](x).relu().sum().backward()
    expected = x.grad.clone()
    x.grad = None
    NORMS[name](x).relu_().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), expected.numpy(), rtol=1e-12)


def test_layer_norm_backward_under_autocast_with_a_float32_weight():
    lin, norm = ember.nn.Linear(4, 4), ember.nn.LayerNorm(4)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        y = norm(lin(ember.randn(2, 4)))
    assert y.dtype == ember.bfloat16
    y.float().sum().backward()
    assert lin.weight.grad.dtype == norm.weight.grad.dtype == ember.float32
    assert ember.isfinite(lin.weight.grad).all()


def test_saved_attributes_of_a_node_as_in_the_autograd_mechanics_note():
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.pow(2)
    assert y.grad_fn._saved_self is x and y.grad_fn._saved_exponent == 2
    y = x.exp()
    saved = y.grad_fn._saved_result
    assert saved is not y and saved.equal(y)
    with pytest.raises(AttributeError, match="'ExpBackward0' object has no attribute "
                                             "'_saved_other'"):
        y.grad_fn._saved_other
    y.sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second"):
        y.grad_fn._saved_result


def test_saved_attributes_are_none_for_inputs_no_needed_gradient_reads():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    c = ember.tensor([3.0, 4.0])
    y = x * c                           # x's gradient reads c; c's gradient is not needed
    assert y.grad_fn._saved_other is c and y.grad_fn._saved_self is None
    y = x * x
    assert y.grad_fn._saved_self is x and y.grad_fn._saved_other is x
    y = ember.mm(c.view(1, 2), x.view(2, 1))
    assert y.grad_fn._saved_mat2 is None and y.grad_fn._saved_self.equal(c.view(1, 2))
    assert (x * 2).grad_fn._saved_other == 2


@pytest.mark.parametrize("make", [lambda h, c: c * h, lambda h, c: c / h.detach() * 1 + h,
                                  lambda h, c: ember.nn.functional.linear(c, h),
                                  lambda h, c: ember.addmm(ember.zeros(2, 2), c, h)],
                         ids=["mul", "div", "linear", "addmm"])
def test_an_input_no_needed_gradient_reads_is_not_kept_alive(make):
    import gc
    import weakref
    leaf = ember.ones(2, 2, requires_grad=True)
    h, c = leaf * 3, ember.full((2, 2), 2.0)
    y = make(h, c)
    ref = weakref.ref(h)
    del h
    gc.collect()
    assert ref() is None                # only its shape and dtype were kept
    y.sum().backward()
    assert leaf.grad is not None and leaf.grad.abs().sum().item() > 0
