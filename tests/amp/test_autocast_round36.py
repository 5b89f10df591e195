"""Round 36's CPU autocast fixes (found by tests/parity/test_parity_autocast_fuzz_round36.py).

autocast's switches must be bools and its dtype a dtype, checked as the region is entered
(the state left as it was); a batch_first MultiheadAttention (and F.linear of a transposed
batch) of mixed dtypes names mm's error, as PyTorch's linear runs matmul for such inputs.
"""

import warnings

import pytest

import ember

F = ember.nn.functional


def _state():
    return (ember.is_autocast_enabled("cpu"), ember.get_autocast_dtype("cpu"),
            ember.is_autocast_cache_enabled())


_START = (False, ember.bfloat16, True)


@pytest.mark.parametrize("value, name", [(0, "int"), (1, "int"), (None, "NoneType"),
                                         ("yes", "str")])
def test_enabled_must_be_a_bool(value, name):
    region = ember.autocast("cpu", enabled=value)      # (made; refused as it is entered)
    with pytest.raises(TypeError, match=rf"set_autocast_enabled\(\): argument 'enabled' "
                                        rf"\(position 2\) must be bool, not {name}$"):
        with region:
            pass
    assert _state() == _START


@pytest.mark.parametrize("value", [0, 1])
def test_cache_enabled_must_be_a_bool(value):
    with pytest.raises(TypeError, match=r"^enabled must be a bool \(got int\)$"):
        with ember.autocast("cpu", cache_enabled=value):
            pass
    assert _state() == _START      # (PyTorch's is left enabled, with its nesting raised)
    with pytest.raises(TypeError, match=r"^enabled must be a bool \(got int\)$"):
        ember.set_autocast_cache_enabled(value)
    assert ember.is_autocast_cache_enabled() is True


def test_dtype_must_be_a_dtype():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError, match=r"argument 'dtype' \(position 2\) must be "
                                            r"ember.dtype, not str"):
            with ember.autocast("cpu", dtype="float16"):
                pass
    assert ["target dtype is not supported" in str(w.message) for w in caught] == [True]
    with pytest.raises(TypeError, match="must be ember.dtype, not str"):
        ember.set_autocast_dtype("cpu", "float16")
    assert _state() == _START


def test_decorator_checks_enabled_when_called():
    fn = ember.autocast("cpu", enabled=0)(lambda: 1)
    with pytest.raises(TypeError, match="must be bool, not int"):
        fn()
    assert ember.autocast("cpu", enabled=False)(lambda: ember.is_autocast_enabled("cpu"))() \
        is False


def test_bool_switches_still_work():
    with ember.autocast("cpu", dtype=ember.float16, enabled=True, cache_enabled=False):
        assert _state() == (True, ember.float16, False)
        y = ember.ones(2, 3) @ ember.ones(3, 2)
    assert y.dtype is ember.float16
    assert _state() == _START


@pytest.mark.parametrize("batch_first, message", [
    (True, "expected m1 and m2 to have the same dtype, but got: float != double"),
    (False, "mat1 and mat2 must have the same dtype, but got Float and Double")])
def test_attention_of_mixed_dtypes_message(batch_first, message):
    m = ember.nn.MultiheadAttention(4, 2, batch_first=batch_first).double()
    x = ember.ones(2, 5, 4)
    with pytest.raises(RuntimeError, match=message):
        m(x, x, x)


@pytest.mark.parametrize("x_dtype", [ember.float16, ember.float32, ember.bfloat16])
def test_attention_batch_first_gradients_under_autocast(x_dtype):
    """Every parameter gets its gradient, the input of another dtype than the weights'."""
    m = ember.nn.MultiheadAttention(4, 2, batch_first=True)
    x = ember.randn(2, 5, 4).to(x_dtype).requires_grad_()
    with ember.autocast("cpu", dtype=ember.bfloat16):
        out = m(x, x, x)[0]
    out.float().sum().backward()
    assert out.dtype is ember.bfloat16
    assert [(n, p.grad.dtype) for n, p in m.named_parameters()] == [
        ("in_proj_weight", ember.float32), ("in_proj_bias", ember.float32),
        ("out_proj.weight", ember.float32), ("out_proj.bias", ember.float32)]
    assert x.grad.dtype is x_dtype


def test_linear_of_a_transposed_batch_with_bias_message():
    w = ember.ones(3, 4, dtype=ember.float64, requires_grad=True)
    b = ember.ones(3, dtype=ember.float64)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but "
                                           "got: float != double"):
        F.linear(ember.ones(5, 2, 4).transpose(0, 1), w, b)
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype, but got "
                                           "Float and Double"):
        F.linear(ember.ones(5, 2, 4), w, b)
    y = F.linear(ember.ones(5, 2, 4, dtype=ember.float64).transpose(0, 1), w, b)
    assert y.shape == (2, 5, 3) and float(y[0, 0, 0]) == 5.0


def test_linear_of_a_transposed_batch_takes_a_bias_of_another_dtype():
    """PyTorch adds the bias of a non-dense batch in place to matmul's result: one of another
    floating dtype is cast (its gradient comes back in its own dtype); a complex one cannot."""
    x = ember.arange(40.).reshape(5, 2, 4).transpose(0, 1).requires_grad_()
    w = ember.ones(3, 4, requires_grad=True)
    b = ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64, requires_grad=True)
    y = F.linear(x, w, b)
    assert y.dtype is ember.float32 and type(y.grad_fn).__name__ == "AddBackward0"
    y.sum().backward()
    assert b.grad.dtype is ember.float64 and b.grad.tolist() == [10.0, 10.0, 10.0]
    assert float(y.sum()) == 2400.0
    with ember.no_grad():
        assert F.linear(x, w, b.half()).dtype is ember.float32
    with pytest.raises(RuntimeError, match="result type ComplexFloat can't be cast to the "
                                           "desired output type Float"):
        F.linear(x.detach(), w, ember.ones(3, dtype=ember.complex64))
