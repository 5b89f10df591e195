"""Reductions and scans given ``out=`` of another dtype compute in out's dtype, as PyTorch's
do (ops/_out_compute.py): ``sum(x, out=o)`` is ``sum(x, dtype=o.dtype)``; std, var and
logsumexp reduce the input cast to out's floating dtype."""

import math

import pytest

import ember

X = [[0.5, 1.7, 2.6, -0.4], [3.3, 4.9, 1.25, 0.75]]
BIG = [1e8, 1.0, -1e8]          # sums to 0 in float32, to 1 in float64


def _out(dtype):
    return ember.empty(0, dtype=dtype)


def test_sum_into_an_integral_out_sums_the_truncated_elements():
    x = ember.tensor(X)
    assert ember.sum(x, 1, out=_out(ember.int64)).tolist() == [3, 8]
    assert ember.sum(x, 1, out=_out(ember.bool)).tolist() == [True, True]
    assert ember.prod(x, 1, out=_out(ember.int64)).tolist() == [0, 0]
    assert ember.cumsum(x, 1, out=_out(ember.int32)).tolist() == [[0, 1, 3, 3], [3, 7, 8, 8]]
    ints = ember.tensor([[1, 2], [0, 0]])
    assert ember.sum(ints, 1, out=_out(ember.bool)).tolist() == [True, False]


def test_float32_input_is_reduced_in_a_float64_out():
    big = ember.tensor(BIG)
    assert ember.sum(big, 0, out=_out(ember.float64)).item() == 1.0
    assert ember.cumsum(big, 0, out=_out(ember.float64)).tolist() == [1e8, 100000001.0, 1.0]
    assert ember.mean(big, 0, out=_out(ember.float64)).item() == 1 / 3
    with_nan = ember.tensor([1e8, math.nan, 1.0, -1e8])
    assert ember.nansum(with_nan, 0, out=_out(ember.float64)).item() == 1.0
    assert ember.nanmean(with_nan, 0, out=_out(ember.float64)).item() == 1 / 3
    x = ember.tensor([4097.0, 4097.0])
    assert ember.prod(x, 0, out=_out(ember.float64)).item() == 16785409.0
    assert ember.cumprod(x, 0, out=_out(ember.float64)).tolist() == [4097.0, 16785409.0]
    lse = ember.logsumexp(ember.tensor([0.0, -20.0]), 0, out=_out(ember.float64)).item()
    assert lse == pytest.approx(2.0611536900435727e-09, rel=1e-12)


def test_std_and_var_reduce_the_input_cast_to_out():
    x = ember.tensor([0.1, 0.2, 0.4])
    assert ember.var(x, 0, out=_out(ember.float16)).item() == 0.0233154296875
    assert ember.std(x, 0, out=_out(ember.float16)).item() == 0.1527099609375
    rows = ember.tensor([[10000.0, 10001.0, 10003.0]])
    assert ember.var(rows, 1, out=_out(ember.float64)).item() == pytest.approx(7 / 3, rel=1e-15)


@pytest.mark.parametrize("call, error, message", [
    (lambda: ember.sum(ember.ones(2), 0, dtype=ember.float64, out=_out(ember.int64)),
     RuntimeError, "Expected out tensor to have dtype double, but got long int instead"),
    (lambda: ember.cumprod(ember.ones(2), 0, dtype=ember.float64, out=_out(ember.float16)),
     RuntimeError, "Expected out tensor to have dtype double, but got c10::Half instead"),
    (lambda: ember.nansum(ember.ones(2), 0, dtype=ember.float64, out=_out(ember.int64)),
     RuntimeError, "nansum: provided dtype must match dtype of result. Got Long and Double."),
    (lambda: ember.nansum(ember.ones(2), 0, out=_out(ember.int64)),
     NotImplementedError, "\"nansum_cpu\" not implemented for 'Long'"),
    (lambda: ember.nanmean(ember.ones(2), 0, out=_out(ember.complex64)),
     NotImplementedError, "\"nansum_cpu\" not implemented for 'ComplexFloat'"),
    (lambda: ember.nanmean(ember.ones(2, dtype=ember.int64), 0, out=_out(ember.float32)),
     RuntimeError, "nanmean(): integral types and 'Bool' are not supported for nanmean, even "
                   "for empty tensors."),
    (lambda: ember.mean(ember.ones(2), 0, out=_out(ember.int64)),
     RuntimeError, "result type Float can't be cast to the desired output type Long"),
    (lambda: ember.mean(ember.ones(2, dtype=ember.complex64), 0, out=_out(ember.int64)),
     RuntimeError, "result type Float can't be cast to the desired output type Long"),
    (lambda: ember.cumsum(ember.ones(2), 0, out=_out(ember.bool)),
     NotImplementedError, "\"cumsum_out_cpu\" not implemented for 'Bool'"),
    (lambda: ember.var(ember.ones(2), 0, out=_out(ember.complex64)),
     NotImplementedError, "\"std_cpu\" not implemented for 'ComplexFloat'"),
    (lambda: ember.softmax(ember.ones(2, dtype=ember.int64), 0, out=_out(ember.float32)),
     RuntimeError, "Expected out tensor to have dtype long int, but got float instead"),
])
def test_out_dtype_errors(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


def test_dtype_argument_errors_without_out():
    x = ember.ones(2)
    with pytest.raises(NotImplementedError, match="\"cumprod_out_cpu\" not implemented for "
                                                  "'Bool'"):
        ember.cumprod(x, 0, dtype=ember.bool)
    with pytest.raises(NotImplementedError, match="\"nansum_cpu\" not implemented for "
                                                  "'ComplexFloat'"):
        ember.nansum(x, dtype=ember.complex64)
    ints = ember.tensor([1, 2])
    assert ember.nansum(ints, dtype=ember.complex64).item() == 3 + 0j


def test_nanmean_rounds_its_sum_to_the_dtype_before_dividing():
    x = ember.full((2,), 60000.0, dtype=ember.float16)
    assert math.isinf(ember.nanmean(x).item())


def test_calls_without_out_are_unchanged():
    x = ember.tensor(BIG)
    assert ember.sum(x).item() == 0.0
    assert ember.sum(x, 0, dtype=ember.float64).item() == 1.0


def test_a_torch_function_mode_sees_the_call_as_made():
    seen = []

    class Log(ember.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append((func.__name__, sorted(kwargs or {})))
            return func(*args, **(kwargs or {}))

    x, out = ember.tensor([[0.5, 1.7], [2.6, -0.4]]), _out(ember.int64)
    with Log():
        ember.sum(x, 1, out=out)
    assert seen == [("sum", ["out"])]
    assert out.tolist() == [1, 2]
