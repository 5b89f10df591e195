"""The Python calls one recorded op makes: views, basic indexing and matmul under autograd
run these per call, so a helper call that comes back costs every training step."""

import sys

import ember


def _python_calls(fn):
    """The names of the Python functions ``fn()`` calls, in order (C functions left out)."""
    names = []

    def spy(frame, event, arg):
        if event == "call":
            names.append(frame.f_code.co_name)

    sys.setprofile(spy)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return names


def test_a_leaf_inputs_edge_skips_the_view_checks_of_history():
    x = ember.ones(4, 4, requires_grad=True)
    x.reshape(16)                       # first use: the leaf's accumulator is made
    calls = _python_calls(lambda: (x.reshape(16), x[1:3], x @ x))
    assert "history" not in calls
    # (the made accumulator is looked up inline: no call per leaf operand)
    assert "grad_accumulator" not in calls and "_edge" not in calls
    y = x[1:3]
    assert y.grad_fn.next_functions[0][0] is x.reshape(16).grad_fn.next_functions[0][0]


def test_a_views_edge_still_goes_through_history():
    x = ember.ones(4, 4, requires_grad=True)
    view = x[1:3]
    calls = _python_calls(lambda: view * 2)
    assert calls.count("history") == 1              # (it refreshes a stale view's history)
    with ember.no_grad():
        x.mul_(2)
    (view * 2).sum().backward()
    assert x.grad[1:3].tolist() == [[2.0] * 4] * 2 and x.grad[0].tolist() == [0.0] * 4


def test_matmul_names_its_node_without_reading_tensor_properties():
    a = ember.ones(3, 4, requires_grad=True)
    b = ember.ones(4)
    assert "ndim" not in _python_calls(lambda: a @ b)
    assert (a @ b).grad_fn.name() == "MvBackward0"
    assert (b @ a.t()).grad_fn.name() == "SqueezeBackward4"
    assert (b @ b.requires_grad_()).grad_fn.name() == "DotBackward0"
    assert (a @ a.t()).grad_fn.name() == "MmBackward0"


def test_a_recorded_node_stores_nothing_in_its_dict_until_released():
    x = ember.ones(3, requires_grad=True)
    y = x * x
    node = y.grad_fn
    assert vars(node) == {}             # _released is the class's False until backward
    assert node._released is False
    y.sum().backward()
    assert vars(node) == {"_released": True}        # (a rare value: no slot stored per op)
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
