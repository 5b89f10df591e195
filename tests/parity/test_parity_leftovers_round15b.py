"""Leftovers of round 15 against PyTorch: dim arguments' TypeErrors naming the op and the
position, adaptive pools' output_size TypeErrors, a tuple hidden state given to RNN/GRU
cells, set_'s argument forms (a tensor with offset, size and stride; invalid mixes), and
ember and PyTorch tensors meeting in one process."""

import pytest

import ember
from tests.parity._compare import assert_same, first_line, ok, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _same(fn):
    """("ok", value) or (error type, first message line), asserted equal in both libraries."""
    return assert_same(fn, describe=ok, message=first_line)


DIM_CALLS = [
    lambda L: L.ones(2, 6).unflatten("a", (2, 3)),
    lambda L: L.unflatten(L.ones(2, 6), 1.5, (2, 3)),
    lambda L: L.ones(2, 6).unflatten(True, (2, 3)),
    lambda L: L.ones(2, 6).unsqueeze("a"),
    lambda L: L.unsqueeze(L.ones(2, 6), "a"),
    lambda L: L.ones(2, 6).unsqueeze_(1.5),
    lambda L: L.ones(2, 6).transpose(0, "a"),
    lambda L: L.transpose(L.ones(2, 6), "a", 0),
    lambda L: L.ones(2, 6).select("a", 0),
    lambda L: L.ones(2, 6).unbind("a"),
    lambda L: L.unbind(L.ones(2, 6), "a"),
    lambda L: L.ones(2, 6).flatten(0, "a"),
    lambda L: L.flatten(L.ones(2, 6), "a"),
]


@pytest.mark.parametrize("call", DIM_CALLS)
def test_dim_argument_type_errors_name_op_and_position(call):
    kind, message = _same(call)
    assert kind == "TypeError" and "(position " in message


POOL_CALLS = [
    ("adaptive_avg_pool1d", 2, None), ("adaptive_max_pool1d", 2, "a"),
    ("adaptive_avg_pool1d", 2, 1.5), ("adaptive_max_pool1d", 2, [None]),
    ("adaptive_avg_pool1d", 2, True), ("adaptive_avg_pool2d", 3, None),
    ("adaptive_max_pool2d", 3, 1.5), ("adaptive_avg_pool2d", 3, "a"),
    ("adaptive_max_pool3d", 4, (1, "a", 1)), ("adaptive_avg_pool3d", 4, (1.0, 1, 1)),
    ("adaptive_avg_pool2d", 3, True), ("adaptive_max_pool2d", 3, (1, 1, 1)),
    ("adaptive_avg_pool2d", 3, (None, 1)), ("adaptive_avg_pool1d", 2, (1, "a")),
]


@pytest.mark.parametrize("name,ndim,size", POOL_CALLS)
def test_adaptive_pool_output_size_checks(name, ndim, size):
    kind, _ = _same(lambda L: tuple(getattr(L.nn.functional, name)(L.ones(*[2] * ndim),
                                                                    size).shape))
    assert kind != "ok" or size == (None, 1)


@pytest.mark.parametrize("cell", ["GRUCell", "RNNCell"])
def test_cell_refuses_tuple_hidden_state(cell):
    def call(L):
        L.manual_seed(0)
        return getattr(L.nn, cell)(2, 3)(L.ones(4, 2), (L.zeros(4, 3),))
    assert _same(call)[0] == "AttributeError"


SET_CALLS = [
    lambda L: L.ones(2).set_(None, True, None, None),
    lambda L: L.ones(2).set_(L.ones(3), True, None, None),
    lambda L: L.ones(2).set_(None),
    lambda L: L.ones(2).set_(L.ones(3), 0),
    lambda L: L.ones(2).set_(L.ones(3), size=(2,)),
    lambda L: L.ones(2).set_(L.ones(3).untyped_storage(), 0, None, None),
    lambda L: L.ones(2).set_(L.ones(3).untyped_storage(), 1.0, (2,)),
    lambda L: L.ones(2).set_(L.ones(3), 0, (3,), (1,), 5),
    lambda L: L.ones(2).set_(L.ones(3), foo=1),
    lambda L: L.ones(2).set_(L.ones(6), 0, (2, 3), (3,)),
]


@pytest.mark.parametrize("call", SET_CALLS)
def test_set_refuses_invalid_argument_mixes(call):
    answers = [outcome(call, lib, describe=ok, message=first_line) for lib in (torch, ember)]
    expected, (kind, message) = answers
    assert (kind, message.replace("ember.storage.", "torch.storage.")) == expected
    assert kind in ("TypeError", "RuntimeError")


def test_set_with_a_tensor_offset_size_and_stride():
    def program(L):
        base = L.arange(6.)
        view = base[2:]
        a = L.empty(0).set_(view, 0, (2,))
        b = L.empty(0).set_(view, 1, [2], [2])
        c = L.empty(0).set_(view, storage_offset=1, size=(2,), stride=None)
        d = L.empty(0).set_(base.untyped_storage(), 1, (2,), ())
        c[0] = 9
        return [(t.tolist(), t.storage_offset(), t.stride()) for t in (a, b, c, d)] + [
            base.tolist()]
    assert _same(program)[0] == "ok"


def test_ember_and_torch_tensors_compare_without_recursion():
    assert (ember.ones(2) == torch.ones(2)) is False
    assert (torch.ones(2) == ember.ones(2)) is False
    assert (ember.ones(2) != torch.ones(2)) is True


def test_ember_refuses_torch_tensors_with_a_type_error():
    with pytest.raises(TypeError, match=r"^add\(\): argument 'other' \(position 2\) must be "
                                        r"Tensor, not torch.Tensor$"):
        ember.add(ember.ones(2), torch.ones(2))
    with pytest.raises(TypeError, match="unsupported operand"):
        ember.ones(2) + torch.ones(2)
    with pytest.raises(TypeError, match="unsupported operand"):
        torch.ones(2) * ember.ones(2)
    with pytest.raises(TypeError):
        torch.add(torch.ones(2), ember.ones(2))
    with pytest.raises(TypeError, match="must be Tensor, not torch.nn.parameter.Parameter"):
        ember.ones(2).copy_(torch.nn.Parameter(torch.ones(2)))
