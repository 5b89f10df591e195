"""out= tensors of another dtype: cast into where PyTorch casts, refused with PyTorch's
words where its kernel demands the result's dtype (ops/_out_dtypes.py)."""

import pytest

import ember


def test_pointwise_ops_cast_into_a_wider_out():
    out = ember.empty(2, dtype=ember.float64)
    ember.add(ember.ones(2), ember.ones(2), out=out)
    assert out.dtype is ember.float64 and out.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("call, message", [
    (lambda o: ember.mm(ember.ones(2, 2), ember.ones(2, 2), out=o),
     "Expected out tensor to have dtype float, but got double instead"),
    (lambda o: ember.neg(ember.ones(2, 2), out=o), "Found dtype Double but expected Float"),
    (lambda o: ember.linalg.norm(ember.ones(2, 2), out=o),
     "linalg.norm expected out tensor dtype Float but got: Double"),
    (lambda o: ember.amax(ember.ones(2, 2), out=o),
     "Expected the dtype for input and out to match, but got Float for input's dtype and "
     "Double for out's dtype."),
])
def test_exact_dtype_ops_refuse_a_wider_out(call, message):
    with pytest.raises(RuntimeError) as info:
        call(ember.empty(0, dtype=ember.float64))
    assert str(info.value) == message


def test_indices_out_must_be_long():
    values, indices = ember.empty(0), ember.empty(0, dtype=ember.int32)
    with pytest.raises(RuntimeError, match="dtype long int, but got int instead"):
        ember.sort(ember.ones(3), out=(values, indices))
    ember.sort(ember.tensor([2., 1.]), out=(values, indices.long()))
    assert values.tolist() == [1.0, 2.0]


def test_out_tensors_requiring_grad_are_refused_and_tuples_come_back_named():
    with pytest.raises(RuntimeError, match=r"^mul\(\): functions with out=... arguments don't "
                                           r"support automatic differentiation, but one of the "
                                           r"arguments requires grad.$"):
        ember.mul(ember.ones(1), 2, out=ember.empty(1, requires_grad=True))
    w = ember.ones(1, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"^max\(\): functions with out="):
        ember.max(w, 1, out=(ember.empty(1), ember.empty(1, dtype=ember.long)))
    with ember.no_grad():
        o = ember.empty(1, requires_grad=True)
        assert ember.add(ember.ones(1), 1, out=o) is o
    got = ember.max(ember.tensor([[1.0, 3.0]]), 1, out=(ember.empty(1),
                                                        ember.empty(1, dtype=ember.long)))
    assert got.values.tolist() == [3.0] and got.indices.tolist() == [1]
    got = ember.sort(ember.tensor([2.0, 1.0]), out=(ember.empty(2),
                                                    ember.empty(2, dtype=ember.long)))
    assert got.indices.tolist() == [1, 0]


@pytest.mark.parametrize("call", [
    lambda o: ember.add(ember.ones(3), 1, out=o),
    lambda o: ember.exp(ember.ones(3), out=o),
    lambda o: ember.linalg.inv(ember.eye(3), out=o),
    lambda o: ember.fft.fft(ember.ones(3), out=o.to(ember.complex64)),
])
def test_resizing_a_nonempty_out_warns_at_the_callers_line(call):
    # the warning blames the caller, not ember's generated op function (whose shared line
    # numbers would also let one op's warning hide another's)
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(ember.empty(2))
    assert [w.filename for w in caught] == [__file__]
    assert "was resized since it had shape [2]" in str(caught[0].message)


_X = ember.tensor([[1., 0.], [2., 3.]])


@pytest.mark.parametrize("call, out, message", [
    (lambda o: ember.all(_X, 1, out=o), ember.int8,
     "all only supports bool tensor for result, got: Char"),
    (lambda o: ember.any(_X, out=o), ember.float32,
     "any only supports bool tensor for result, got: Float"),
    (lambda o: ember.nonzero(_X, out=o), ember.int32,
     "nonzero: Expected out tensor to have scalar type Long but got scalar typeInt"),
    (lambda o: ember.isposinf(_X, out=o), ember.uint8,
     "isposinf does not support non-boolean outputs."),
    (lambda o: ember.isneginf(_X, out=o), ember.int64,
     "isneginf does not support non-boolean outputs."),
    (lambda o: ember.signbit(_X, out=o), ember.float64,
     "signbit does not support non-boolean outputs."),
    (lambda o: ember.round(_X.long(), out=o), ember.uint8, "Found dtype Byte but expected Long"),
    (lambda o: ember.round(_X, decimals=1, out=o), ember.float64,
     "Found dtype Double but expected Float"),
    (lambda o: ember.logsumexp(_X, 1, out=o), ember.int64,
     "logsumexp(): Expected floating point type for result tensor, but got: Long"),
    (lambda o: ember.abs(_X.to(ember.complex64), out=o), ember.int64,
     "result type Float can't be cast to the desired output type Long"),
    (lambda o: ember.abs(_X, out=o), ember.float64, "Found dtype Double but expected Float"),
    (lambda o: ember.complex(_X, _X, out=o), ember.complex128,
     "Expected object of scalar type ComplexFloat but got scalar type ComplexDouble for "
     "argument 'out'"),
    (lambda o: ember.polar(_X, _X, out=o), ember.float32,
     "Expected object of scalar type ComplexFloat but got scalar type Float for argument "
     "'out'"),
])
def test_out_of_a_refused_dtype_raises_pytorchs_error(call, out, message):
    with pytest.raises(RuntimeError) as info:
        call(ember.empty(0, dtype=out))
    assert str(info.value) == message


def test_out_of_an_accepted_dtype_takes_the_result():
    assert ember.all(_X.to(ember.uint8), 1, out=ember.empty(2, dtype=ember.bool)).tolist() == [
        False, True]
    assert ember.any(_X, 1, out=ember.empty(2, dtype=ember.uint8)).tolist() == [1, 1]
    got = ember.logsumexp(_X.new_zeros(2, 2), 1, out=ember.empty(2, dtype=ember.complex64))
    assert got.dtype is ember.complex64 and abs(got[0].item() - 0.6931472) < 1e-6
    got = ember.abs(_X.to(ember.complex64) * -1j, out=ember.empty(2, 2, dtype=ember.float64))
    assert got.dtype is ember.float64 and got.tolist() == [[1.0, 0.0], [2.0, 3.0]]
