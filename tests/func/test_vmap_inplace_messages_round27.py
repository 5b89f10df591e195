"""In-place ops on an unbatched ``self`` inside vmap name themselves as PyTorch's batching
rules do: scatter_reduce_ by its bare name ("in a vmap"), masked_fill_ with a number as
"inplace arithmetic", masked_fill_ with a tensor value as aten::masked_fill_ ("at level 1")."""

import pytest

import ember


def _error(fn):
    def f(p):
        out = ember.zeros(5)
        fn(out, p)
        return out
    with pytest.raises(RuntimeError) as info:
        ember.func.vmap(f)(ember.ones(3, 5) - 0.5)
    return str(info.value)


def test_scatter_reduce_named_bare():
    msg = _error(lambda o, p: o.scatter_reduce_(0, ember.tensor([0, 0, 1, 2, 4]), p, "sum"))
    assert msg.startswith("vmap: scatter_reduce_(self, *extra_args) is not possible")
    assert "not being vmapped over in a vmap." in msg


def test_masked_fill_number_is_inplace_arithmetic():
    msg = _error(lambda o, p: o.masked_fill_(p > 0, 1.0))
    assert msg.startswith("vmap: inplace arithmetic(self, *extra_args) is not possible")


def test_masked_fill_tensor_value_is_aten():
    msg = _error(lambda o, p: o.masked_fill_(p > 0, ember.tensor(2.0)))
    assert msg.startswith("vmap: aten::masked_fill_(self, *extra_args) is not possible")
    assert "not being vmapped over at level 1." in msg
