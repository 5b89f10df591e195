"""Argument parsing PyTorch's overloads imply, fixed in round 36 (found by
tests/parity/test_parity_arg_parsing_fuzz_round36.py): a reduction's keepdim or out= without
a dim, a dim of None where no overload takes one, a value of the wrong type refused by the
parser before the op runs, keywords a method does not take."""

import inspect

import pytest

import ember


def _x():
    return ember.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.5]])


def _refused(fn, *words):
    with pytest.raises(TypeError) as info:
        fn()
    for word in words:
        assert word in str(info.value), str(info.value)


@pytest.mark.parametrize("call", [
    lambda x: ember.sum(x, keepdim=True), lambda x: x.sum(keepdim=False),
    lambda x: ember.sum(x, keepdims=True), lambda x: x.mean(keepdim=True),
    lambda x: x.prod(None), lambda x: ember.prod(x, dim=None),
    lambda x: ember.max(x, None), lambda x: x.min(dim=None), lambda x: x.max(keepdim=False),
    lambda x: ember.max(x, x, keepdim=False), lambda x: ember.min(x, x, other=x),
    lambda x: ember.max(x, x, 0), lambda x: x.squeeze(None), lambda x: ember.squeeze(x, None),
])
def test_calls_no_overload_takes_raise(call):
    x = _x()
    name = None
    with pytest.raises(TypeError, match="invalid combination of arguments") as info:
        call(x)
    name = str(info.value).split("(")[0]
    assert name in ("sum", "mean", "prod", "max", "min", "squeeze")


def test_the_overloads_that_exist_still_bind():
    x = _x()
    assert ember.sum(x, None, True).shape == (1, 1)
    assert x.sum(dim=None, keepdim=True).tolist() == [[5.0]]
    assert x.sum(axis=None, keepdims=True).shape == (1, 1)
    assert x.sum().item() == 5.0 and x.sum(1).tolist() == [2.0, 3.0]
    assert x.prod(0, keepdim=True).tolist() == [[0.5, -8.0, -4.5]]
    assert x.mean(dim=0).tolist() == [0.75, 1.0, 0.75]
    out = ember.empty(0)
    assert ember.sum(x, 0, out=out) is out and out.tolist() == [1.5, 2.0, 1.5]
    assert ember.max(x, out=ember.empty(0)).item() == 4.0
    assert x.max(1).indices.tolist() == [2, 1]
    assert ember.max(x, x * 2).tolist()[0] == [2.0, -2.0, 6.0]
    assert x.max(other=x).shape == (2, 3)
    assert ember.max(x, ember.tensor(1), True).values.tolist() == [[3.0], [4.0]]
    assert x.max(axis=1, keepdims=True).values.shape == (2, 1)
    assert x.squeeze().shape == (2, 3) and x.squeeze(0, 1).shape == (2, 3)


def test_signatures_show_pytorchs_defaults():
    assert str(inspect.signature(ember.sum)) == \
        "(input, dim=None, keepdim=False, *, dtype=None, out=None)"
    assert str(inspect.signature(ember.Tensor.prod)) == \
        "(self, dim=None, keepdim=False, *, dtype=None)"
    assert str(inspect.signature(ember.squeeze)) == "(input, dim=None)"
    assert str(inspect.signature(ember.max)) == \
        "(input, dim=None, keepdim=False, *, other=None, out=None)"


def test_median_without_dim_refuses_keepdim_and_out():
    x = _x()
    _refused(lambda: ember.median(x, out=None), 'median() missing 1 required positional '
             'arguments: "dim"')
    _refused(lambda: x.nanmedian(keepdim=True), "nanmedian()", '"dim"')
    _refused(lambda: ember.median(x, None), "median(): argument 'dim'", "not NoneType")
    assert ember.median(x).item() == 0.5


def test_max_of_a_method_takes_no_out_and_a_dim_needs_a_tuple_out():
    x = _x()
    _refused(lambda: x.max(1, out=None), "max() got an unexpected keyword argument 'out'")
    _refused(lambda: ember.max(x, 0, True, out=ember.empty(0)),
             "max(): argument 'out' must be tuple of Tensors, not Tensor")
    _refused(lambda: ember.median(x, 0, out=ember.empty(0)), "median(): argument 'out'")
    values, indices = ember.empty(0), ember.empty(0, dtype=ember.int64)
    ember.max(x, 1, out=(values, indices))
    assert values.tolist() == [3.0, 4.0] and indices.tolist() == [2, 1]


def test_logsumexp_needs_its_dim():
    x = _x()
    _refused(lambda: x.logsumexp(None), "logsumexp(): argument 'dim'", "tuple of ints",
             "NoneType")
    assert x.logsumexp(1).shape == (2,)


def test_a_0_d_integer_tensor_is_a_dim_of_amax():
    x = _x()
    assert ember.amax(x, ember.tensor(1), True).tolist() == [[3.0], [4.0]]
    assert x.amin(ember.tensor(0)).tolist() == [0.5, -2.0, -1.5]


def test_aminmax_takes_numpys_keepdims():
    out = ember.aminmax(_x(), dim=0, keepdims=True)
    assert out.min.shape == (1, 3) and out.max.tolist() == [[1.0, 4.0, 3.0]]


def test_type_errors_of_the_parser():
    x = _x()
    _refused(lambda: x.quantile(0.5, interpolation=1), "quantile()", "interpolation=int")
    _refused(lambda: ember.div(x, x, rounding_mode=1), "div()", "rounding_mode=int")
    _refused(lambda: x.view(3, 2, x), "view(): argument 'size'", "pos 3")
    _refused(lambda: x.reshape(3, ember.tensor([1, 2])), "reshape(): argument 'shape'")
    _refused(lambda: ember.arange(5, None), "arange()", "NoneType")
    _refused(lambda: ember.arange(1, None, 2), "arange()")
    _refused(lambda: ember.logspace(0, 1, steps=None), "logspace(): argument 'steps'")
    _refused(lambda: ember.logspace(0, 1, 3, base=None), "logspace(): argument 'base'")
    assert ember.arange(5).tolist() == [0, 1, 2, 3, 4] and ember.arange(end=2).tolist() == [0, 1]
    assert x.view(3, ember.tensor(2)).shape == (3, 2)
    assert ember.logspace(0, 1, 2, base=ember.tensor(2.0)).tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="rounding_mode"):
        ember.div(x, x, rounding_mode="bad")


def test_conversions_refuse_keywords_they_do_not_take():
    x = _x()
    _refused(lambda: x.type(ember.float64, foo=1), "type() got an unexpected keyword "
             "argument 'foo'")
    _refused(lambda: x.type(ember.float64, 0), "type(): argument 'non_blocking'")
    _refused(lambda: x.new_ones(2, out=None), "new_ones() got an unexpected keyword "
             "argument 'out'")
    _refused(lambda: x.new_empty(2, dtype="float64"), "new_empty(): argument 'dtype'")
    _refused(lambda: ember.zeros_like(x, dtype=1), "zeros_like(): argument 'dtype'")
    for call in (lambda: x.to(ember.float64, device="cpu"),
                 lambda: x.to(ember.float64, dtype=ember.float64),
                 lambda: x.to(x, dtype=ember.float64),
                 lambda: x.to("cpu", ember.float64, dtype=ember.float64),
                 lambda: x.to(ember.float64, True, non_blocking=True)):
        _refused(call, "to() received an invalid combination")
    assert x.to("cpu", dtype=ember.float64).dtype is ember.float64
    assert x.to(tensor=x.double()).dtype is ember.float64
    assert x.type(ember.float64, memory_format=ember.preserve_format).dtype is ember.float64
    assert x.new_zeros(2, dtype=int).dtype is ember.int64
