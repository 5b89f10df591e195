"""Regression tests for the promotion and dtype-check order fixes of round 37: the checks
PyTorch makes on the operands' own dtypes before it promotes them, the out= cast check before a
kernel's refusal, and the kernels named by float8 refusals."""

import pytest

import ember


def _t(dtype, zero_dim=False):
    values = 2.0 if zero_dim else [2.0, 3.0]
    return ember.tensor(values, dtype=ember.float64).to(dtype)


@pytest.mark.parametrize("end, name", [(ember.uint16, "short unsigned int"),
                                       (ember.uint64, "long unsigned int"),
                                       (ember.float8_e5m2, "c10::Float8_e5m2")])
def test_lerp_names_mismatched_dtypes_before_promoting(end, name):
    with pytest.raises(RuntimeError, match=f"expected dtype float for `end` but got dtype {name}"):
        ember.lerp(_t(ember.float32), _t(end), 0.5)
    with pytest.raises(RuntimeError, match="expected dtype unsigned int for `end` but got "
                                           "dtype long int"):
        ember.lerp(_t(ember.uint32), _t(ember.int64), 0.5)
    assert ember.lerp(_t(ember.float32), _t(ember.float32) * 3, 0.5).tolist() == [4.0, 6.0]


def test_lerp_number_end_is_still_a_type_error():
    with pytest.raises(TypeError, match="lerp\\(\\) received an invalid combination"):
        ember.lerp(_t(ember.float32), 2.0, 0.5)
    with pytest.raises(RuntimeError, match="expected dtype float for `weight` but got dtype "
                                           "long int"):
        ember.lerp(_t(ember.float32), _t(ember.float32), _t(ember.int64))


@pytest.mark.parametrize("wide", [ember.uint16, ember.float8_e4m3fn])
def test_sub_refuses_a_bool_before_promoting(wide):
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool tensor"):
        ember.sub(ember.tensor([True, True]), _t(wide))
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool tensor"):
        _t(wide) - ember.tensor([True, True])


@pytest.mark.parametrize("fn", [ember.maximum, ember.minimum])
def test_maximum_refuses_complex_before_promoting(fn):
    with pytest.raises(RuntimeError, match=f"{fn.__name__} not implemented for complex tensors"):
        fn(_t(ember.complex64), _t(ember.uint16))
    with pytest.raises(RuntimeError, match=f"{fn.__name__} not implemented for complex tensors"):
        fn(_t(ember.float8_e5m2), _t(ember.complex128))


def test_logical_and_promotes_a_zero_dim_complex_over_uint16():
    got = ember.logical_and(_t(ember.uint16), ember.tensor(1j))
    assert got.dtype is ember.bool and got.tolist() == [True, True]
    with pytest.raises(NotImplementedError, match="\"logical_and_cpu\" not implemented for "
                                                  "'UInt16'"):
        ember.logical_and(_t(ember.uint16), ember.tensor(1))


def test_cat_refuses_a_zero_dim_tensor_before_promoting():
    with pytest.raises(RuntimeError, match=r"zero-dimensional tensor \(at position 0\) cannot"):
        ember.cat([_t(ember.complex64, True), _t(ember.uint16, True)])
    with pytest.raises(RuntimeError, match=r"zero-dimensional tensor \(at position 1\) cannot"):
        ember.cat([_t(ember.float8_e5m2), _t(ember.int32, True)])
    assert ember.cat([_t(ember.int32), _t(ember.float32)]).dtype is ember.float32


@pytest.mark.parametrize("result", [ember.uint16, ember.float8_e5m2])
def test_add_out_checks_the_cast_before_the_kernel_refusal(result):
    out = ember.empty(2, dtype=ember.bool)
    with pytest.raises(RuntimeError, match=f"result type {result._torch_name} can't be cast "
                                           f"to the desired output type Bool"):
        ember.add(_t(result), _t(result), out=out)


def test_add_out_resizes_a_float8_out():
    out = ember.empty((), dtype=ember.float8_e5m2)
    with pytest.warns(UserWarning, match="was resized"):
        got = ember.add(ember.tensor([True, True]), ember.tensor(True), out=out)
    assert got is out and out.shape == (2,) and out.float().tolist() == [1.0, 1.0]


def test_clamp_checks_a_complex_self_first_and_names_the_bound_kernel():
    with pytest.raises(NotImplementedError, match="clamp is not supported for complex types"):
        ember.clamp(_t(ember.complex64), min=_t(ember.uint16))
    with pytest.raises(NotImplementedError, match="\"maximum_cpu\" not implemented for "
                                                  "'ComplexFloat'"):
        ember.clamp(ember.tensor([True, False]), min=_t(ember.complex64))
    with pytest.raises(NotImplementedError, match="\"minimum_cpu\" not implemented for "
                                                  "'ComplexDouble'"):
        ember.clamp(_t(ember.int32), max=_t(ember.complex128))
    with pytest.raises(NotImplementedError, match="\"clamp_min_scalar_cpu\" not implemented "
                                                  "for 'Float8_e5m2'"):
        ember.clamp(_t(ember.float8_e5m2), min=1.0)
    with pytest.raises(NotImplementedError, match="\"maximum_cpu\" not implemented for "
                                                  "'Float8_e4m3fn'"):
        ember.clamp(_t(ember.float8_e4m3fn), min=_t(ember.float8_e4m3fn))
    with pytest.raises(NotImplementedError, match="\"clamp_min_scalar_cpu\" not implemented "
                                                  "for 'Bool'"):
        ember.clamp(ember.tensor([True, False]), min=True)
    assert ember.clamp(_t(ember.int32), min=2.5).tolist() == [2.5, 3.0]


def test_float8_division_names_the_reduced_float_kernels():
    x = _t(ember.float8_e5m2)
    with pytest.raises(NotImplementedError, match="\"div_cpu_reduced_float\" not implemented"):
        x / 2.0
    with pytest.raises(NotImplementedError, match="\"div_cpu\" not implemented"):
        x / x
    with pytest.raises(NotImplementedError, match="\"div_floor_cpu_reduced_float\" not "):
        x // _t(ember.float8_e5m2, True)
    with pytest.raises(NotImplementedError, match="\"div_floor_cpu\" not implemented"):
        ember.floor_divide(x, x)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_float8_division_names_the_rounding_mode_kernel(mode):
    x = _t(ember.float8_e4m3fn)
    with pytest.raises(NotImplementedError, match=f"\"div_{mode}_cpu_reduced_float\" not "):
        ember.div(x, 2, rounding_mode=mode)
    with pytest.raises(NotImplementedError, match=f"\"div_{mode}_cpu\" not implemented"):
        ember.div(x, x, rounding_mode=mode)
    with pytest.raises(NotImplementedError, match=f"\"div_{mode}_cpu\" not implemented"):
        x.div_(x, rounding_mode=mode)
    with pytest.raises(RuntimeError, match="result type Float8_e4m3fn can't be cast to the "
                                           "desired output type Int"):
        ember.div(x, x, rounding_mode=mode, out=ember.empty(2, dtype=ember.int32))


def test_inplace_rounding_division_checks_shape_and_cast_before_the_kernel():
    with pytest.raises(RuntimeError, match=r"output with shape \[\] doesn't match the "
                                           r"broadcast shape \[2\]"):
        ember.tensor(True).div_(_t(ember.complex64), rounding_mode="trunc")
    with pytest.raises(RuntimeError, match="result type ComplexFloat can't be cast to the "
                                           "desired output type Float"):
        _t(ember.float32).div_(_t(ember.complex64), rounding_mode="floor")
    with pytest.raises(NotImplementedError, match="\"div_trunc_cpu\" not implemented for "
                                                  "'ComplexFloat'"):
        _t(ember.complex64).div_(_t(ember.complex64), rounding_mode="trunc")
    x = _t(ember.float32)
    assert x.div_(_t(ember.int32, True), rounding_mode="floor").tolist() == [1.0, 1.0]


def test_inplace_checks_its_shape_before_promoting_float8_with_complex():
    for method in ("add_", "mul_", "div_"):
        with pytest.raises(RuntimeError, match=r"output with shape \[\] doesn't match"):
            getattr(_t(ember.complex64, True), method)(_t(ember.float8_e5m2))
    with pytest.raises(RuntimeError, match="Unknown Complex ScalarType for Float8_e5m2"):
        _t(ember.float8_e5m2) * ember.tensor(1j)
