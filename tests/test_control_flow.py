"""ember.cond and ember.while_loop (ember/_control_flow.py), run eagerly as PyTorch runs them
outside compilation. Expected values and messages were checked against PyTorch 2.13."""

import pytest

import ember
from ember._control_flow import UncapturedHigherOrderOpError, cond, while_loop


def _plus(x):
    return x + 1


def _minus(x):
    return x - 1


# --- cond ------------------------------------------------------------------------------------

@pytest.mark.parametrize("pred, taken", [
    (True, 1), (False, -1), (1, 1), (0, -1), (1.5, 1), (0.0, -1),
    (ember.tensor(True), 1), (ember.tensor([False]), -1), (ember.tensor([[2]]), 1),
    (ember.tensor(0.0), -1),
])
def test_cond_takes_the_branch_pred_names(pred, taken):
    x = ember.arange(3.0)
    assert cond(pred, _plus, _minus, (x,)).tolist() == (x + taken).tolist()


def test_cond_operands_and_outputs():
    x = ember.arange(3.0)
    assert cond(True, _plus, _minus, [x]).tolist() == [1.0, 2.0, 3.0]
    assert cond(pred=False, true_fn=_plus, false_fn=_minus, operands=(x,)).tolist() == \
        [-1.0, 0.0, 1.0]
    assert cond(True, lambda: ember.ones(2), lambda: ember.zeros(2)).tolist() == [1.0, 1.0]
    assert cond(True, lambda d: d["a"] * 2, _minus, ({"a": x},)).tolist() == [0.0, 2.0, 4.0]
    a, b = cond(x.shape[0] > 2, lambda x: (x, x + 1), lambda x: (x, x), (x,))
    assert a is x and b.tolist() == [1.0, 2.0, 3.0]
    assert cond(True, _plus, None, (3,)) == 4                  # only the taken branch runs


def test_cond_is_differentiable():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    cond(x.sum() > 0, lambda t: (t * t).sum(), lambda t: t.sum(), (x,)).backward()
    assert x.grad.tolist() == [2.0, 4.0]


@pytest.mark.parametrize("pred, message", [
    ("a", "Expected pred to be bool or tensor, but got a."),
    (None, "Expected pred to be bool or tensor, but got None."),
    (1j, "Expected pred to be bool or tensor, but got 1j."),
    (ember.tensor([True, False]),
     "Expected pred to be bool or single-element tensor, but got tensor([ True, False])."),
    (ember.tensor([], dtype=ember.bool),
     "Expected pred to be bool or single-element tensor, but got tensor([], dtype=ember.bool)."),
])
def test_cond_pred_errors(pred, message):
    with pytest.raises(RuntimeError) as info:
        cond(pred, _plus, _minus, (ember.zeros(1),))
    assert str(info.value) == message


# --- while_loop ------------------------------------------------------------------------------

def test_while_loop_counts():
    x = ember.arange(4.0)
    i, y = while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2), (ember.tensor(0), x))
    assert i.item() == 3 and i.dtype == ember.int64 and y.tolist() == [0.0, 8.0, 16.0, 24.0]
    n, y = while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2), [0, x])
    assert n == 3 and type(n) is int


def test_while_loop_results_keep_the_bodys_form():
    x = ember.arange(3.0)
    assert while_loop(lambda t: t.sum() < 10, lambda t: t + 1, [x]).tolist() == [3.0, 4.0, 5.0]
    out = while_loop(lambda t: t.sum() < 10, lambda t: [t + 1], [x])
    assert type(out) is list and out[0].tolist() == [3.0, 4.0, 5.0]
    out = while_loop(lambda t: False, lambda t: (t + 1,), [x])          # never ran: a tuple
    assert type(out) is tuple and out[0] is x
    assert while_loop(lambda: False, lambda: (), ()) == ()
    d, = while_loop(lambda d: d["i"] < 3, lambda d: ({"i": d["i"] + 1},),
                    ({"i": ember.tensor(0)},))
    assert d["i"].item() == 3


def test_while_loop_is_differentiable():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    _, y = while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, t * 2), (0, x))
    y.sum().backward()
    assert x.grad.tolist() == [8.0, 8.0]


def test_while_loop_needs_callables_and_carriable_leaves():
    x = ember.zeros(2)
    for fns in ((5, _plus), (lambda x: False, 5)):
        with pytest.raises(RuntimeError, match="^Expect cond_fn and body_fn to be callable.$"):
            while_loop(*fns, (x,))
    with pytest.raises(AssertionError) as info:
        while_loop(lambda *a: False, lambda *a: a, (0, [x, 0.5]))
    assert str(info.value).startswith("[0, tensor([0., 0.]), 0.5] can only be of (")
    assert str(info.value).endswith("but got (<class 'int'>, <class 'ember.Tensor'>, "
                                    "<class 'float'>)")
    with pytest.raises(UncapturedHigherOrderOpError, match="Expected carried_inputs to be a "
                                                           "tuple or a list but got Tensor"):
        while_loop(lambda *a: False, lambda *a: a, x)


@pytest.mark.parametrize("cond_fn, shown", [
    (lambda t: t.sum(), "ember.Size([])"),
    (lambda t: t < 3, "ember.Size([2])"),
    (lambda t: None, "NoneType"),
])
def test_while_loop_cond_must_give_a_bool(cond_fn, shown):
    with pytest.raises(UncapturedHigherOrderOpError) as info:
        while_loop(cond_fn, lambda t: (t + 1,), (ember.zeros(2),))
    assert "unsupported cond_fn return type" in str(info.value)
    assert f"Expected cond_fn to return a scalar tensor or a bool but got {shown}." in \
        str(info.value)
    assert isinstance(info.value, RuntimeError)


@pytest.mark.parametrize("body_fn, found", [
    (lambda i, t: (i + 1,), "same number of outputs but got lhs:[1] and rhs:[0, tensor([0.])]"),
    (lambda i, t: (i + 1, ember.cat([t, t])),
     "pair[1] differ in 'shape: ember.Size([2]) vs ember.Size([1])'"),
    (lambda i, t: (i + 1, t.double()),
     "pair[1] differ in 'dtype: ember.float64 vs ember.float32'"),
    (lambda i, t: (ember.tensor(i + 1), t + 1), "pair[0] differ in type: tensor(1) vs 0"),
    (lambda i, t: (None, t + 1), "pair[0] differ in type: None vs 0"),
    (lambda i, t: (i + 1, t), "Encountered aliasing during higher order op tracing"),
    (lambda i, t: (i + 1, t[:]), "Encountered aliasing during higher order op tracing"),
])
def test_while_loop_body_must_match_its_inputs(body_fn, found):
    with pytest.raises(UncapturedHigherOrderOpError) as info:
        while_loop(lambda i, t: i < 3, body_fn, (0, ember.zeros(1)))
    assert found in str(info.value)
