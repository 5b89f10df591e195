"""Review of round 24's ``Op.returns_input_when``: PyTorch returns the input itself for a
Parameter and for a subclass under its default ``__torch_function__`` too (not only for a
plain tensor), while a vmap BatchedTensor's call still takes its batching rule."""

import numpy as np
import pytest

import ember

CALLS = {
    "flatten(1)": lambda x: x.flatten(1),
    "flatten(0, 0)": lambda x: ember.flatten(x, 0, 0),
    "conj": lambda x: x.conj(),
    "conj_physical": lambda x: ember.conj_physical(x),
    "positive": lambda x: +x,
}


@pytest.mark.parametrize("name", list(CALLS))
def test_parameter_is_returned_itself(name):
    p = ember.nn.Parameter(ember.ones(2, 3))
    y = CALLS[name](p)
    assert y is p and y.is_leaf and y.grad_fn is None      # PyTorch: the Parameter itself


class _Plain(ember.Tensor):
    pass


class _Logged(ember.Tensor):
    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func.__name__)
        return super().__torch_function__(func, types, args, kwargs or {})


@pytest.mark.parametrize("cls", [_Plain, _Logged])
@pytest.mark.parametrize("name", list(CALLS))
def test_subclass_is_returned_itself(cls, name):
    _Logged.seen.clear()
    s = ember.ones(2, 3).as_subclass(cls)
    y = CALLS[name](s)
    assert y is s and type(y) is cls
    if cls is _Logged:
        assert len(_Logged.seen) == 1           # offered once, as PyTorch's


def test_parameter_flatten_keeps_the_gradient_on_the_leaf():
    p = ember.nn.Parameter(ember.tensor([[1.0, 2.0], [3.0, 4.0]]))
    (p.flatten(1) * ember.tensor([2.0, 5.0])).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), [[2.0, 5.0], [2.0, 5.0]])


def test_batched_tensor_takes_its_batching_rule():
    x = ember.arange(40.0).reshape(5, 2, 4)
    # logically 2-D: flatten(-2, 1) merges both dims (physically it could look like one)
    y = ember.vmap(lambda v: v.flatten(-2, 1))(x)
    assert y.shape == (5, 8)
    np.testing.assert_array_equal(y.numpy(), x.numpy().reshape(5, 8))
    assert ember.vmap(lambda v: v.flatten(0, -2), in_dims=2)(x).shape == (4, 5, 2)


# --- RoutedOpNode: the TBackward0 node made when linear's graph is first walked -------------

def _t_node(y):
    return next(n for n, _ in y.grad_fn.next_functions if n is not None
                and n.name() == "TBackward0")


@pytest.mark.parametrize("walked_under_anomaly", [False, True])
def test_t_node_carries_the_forward_trace_of_linear(walked_under_anomaly):
    w = ember.ones(3, 4, requires_grad=True)
    with ember.autograd.detect_anomaly():
        y = ember.nn.functional.linear(ember.ones(2, 4), w)    # the forward's line
    with ember.autograd.detect_anomaly(check_nan=False):
        t = _t_node(y) if walked_under_anomaly else None
    t = t or _t_node(y)                 # (PyTorch made it with the forward)
    t.register_prehook(lambda grads: (grads[0] * float("nan"),))
    with ember.autograd.detect_anomaly():
        with pytest.warns(UserWarning) as caught, pytest.raises(RuntimeError, match="TBackward0"):
            y.sum().backward()
    traces = [str(w.message) for w in caught if "Error detected in TBackward0" in str(w.message)]
    assert len(traces) == 1 and "the forward's line" in traces[0]
    assert "_t_node(y)" not in traces[0]


@pytest.mark.parametrize("dims", [(np.int64(1), np.int64(1)), (np.int32(-1), -1),
                                  (ember.tensor(1), ember.tensor(1))])
def test_flatten_of_one_dim_named_by_integers_of_other_types(dims):
    x = ember.ones(2, 3)
    assert x.flatten(*dims) is x        # PyTorch: the input itself


def test_flatten_with_bool_or_float_dims_still_raises():
    x = ember.ones(2, 3)
    with pytest.raises(TypeError, match="must be int, not bool"):
        x.flatten(True, True)
    with pytest.raises(TypeError, match="must be int, not float"):
        x.flatten(1.0, 1)
