"""Tensor conversions: the forms of ``Tensor.to``, the dtype shorthands, and PyTorch's CPU
results for float-to-integer casts of out-of-range values."""

import pytest

import ember


def test_to_accepts_the_tensor_keyword():
    a = ember.zeros(2)
    assert a.to(tensor=ember.zeros(1, dtype=ember.int16)).dtype is ember.int16
    assert a.to(tensor=a) is a


def test_to_rejects_a_dtype_keyword_that_is_not_a_dtype():
    with pytest.raises(TypeError, match=r"to\(\) received an invalid combination of arguments"):
        ember.zeros(2).to(dtype="float")
    with pytest.raises(TypeError, match=r"got \(dtype=int, \)"):
        ember.zeros(2).to(dtype=5)
    assert ember.zeros(2).to(dtype=float).dtype is ember.float64


def test_dtype_shorthands_take_only_a_memory_format_keyword():
    with pytest.raises(TypeError, match=r"^int\(\) takes 0 positional arguments but 2 were given"):
        ember.zeros(2).int(1, 2)
    with pytest.raises(TypeError, match=r"^float\(\) takes 0 positional arguments but 1 was given"):
        ember.zeros(2).float(ember.contiguous_format)


def test_dtype_shorthands_honour_memory_format():
    b = ember.arange(24.).reshape(1, 2, 3, 4).to(memory_format=ember.channels_last)
    assert b.float().stride() == (24, 1, 8, 2) and b.float() is b
    assert b.double().stride() == (24, 1, 8, 2)
    c = b.float(memory_format=ember.contiguous_format)
    assert c.stride() == (24, 12, 4, 1) and c is not b
    assert b.double(memory_format=ember.contiguous_format).stride() == (24, 12, 4, 1)
    assert b.contiguous().float(memory_format=ember.channels_last).stride() == (24, 1, 8, 2)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        ember.zeros(2).double(memory_format=ember.channels_last)


def test_float64_to_uint8_goes_through_int64():
    v = [-1.5, 300.7, 5e9 + 7, -2.0 ** 31 - 1000, 2.0 ** 40 + 3, -2.0 ** 40 - 3]
    assert ember.tensor(v, dtype=ember.float64).to(ember.uint8).tolist() == \
        [255, 44, 7, 24, 3, 253]
    # the signed small types go through int32 (INT_MIN -> 0)
    assert ember.tensor(v, dtype=ember.float64).to(ember.int8).tolist() == [-1, 44, 0, 0, 0, 0]


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e5m2"])
def test_low_precision_floats_cast_to_small_ints_as_float32_does(dtype):
    t = ember.tensor([300.0, -1.5, 256.0, -129.0, 448.0, 0.0]).to(getattr(ember, dtype))
    wide = t.float()
    for target in (ember.int8, ember.uint8, ember.int16, ember.int64):
        assert t.to(target).tolist() == wide.to(target).tolist()
    if dtype == "bfloat16":
        assert t.to(ember.int8).tolist() == [44, -1, 0, 127, -64, 0]
        assert t.to(ember.uint8).tolist() == [44, 255, 0, 127, 192, 0]


def test_nan_and_inf_of_low_precision_floats_cast_like_float32():
    s = ember.tensor([float("nan"), float("inf"), -float("inf")]).to(ember.bfloat16)
    assert s.to(ember.int64).tolist() == [-2 ** 63] * 3
    assert s.to(ember.int32).tolist() == [-2 ** 31] * 3
    assert s.to(ember.uint8).tolist() == [0, 0, 0]
    assert s.to(ember.bool).tolist() == [True, True, True]
    e4 = ember.tensor([float("nan")]).to(ember.float8_e4m3fn)
    assert e4.to(ember.int64).tolist() == [-2 ** 63]


def test_zero_under_no_grad_keeps_the_node_name():
    x = ember.ones(3, 4, requires_grad=True)
    y = x * 2
    with ember.no_grad():
        y.zero_()
    assert type(y.grad_fn).__name__ == "MulBackward0"
    y.fill_(1)
    with ember.no_grad():
        y.zero_()
    assert type(y.grad_fn).__name__ == "FillBackward2"
    z = x * 2
    z.zero_()
    assert type(z.grad_fn).__name__ == "ZeroBackward0"


def test_a_cast_of_an_expanded_tensor_is_row_major_as_its_clone():
    m = ember.tensor([1.0, 2.0]).expand(3, 2)
    assert m.double().stride() == (2, 1) and m.int().is_contiguous()
    mask = ember.tensor([[1], [0], [1]]).expand(3, 4).t()
    assert mask.float().view(-1).tolist() == [1.0, 0.0, 1.0] * 4
    x = ember.ones(4, 6)[:, ::2].t()            # not overlapping: its dim order is kept
    assert x.double().stride() == (1, 3)


def test_to_an_indexed_cpu_device_or_none_stays_on_the_cpu():
    a = ember.ones(2, 3)
    assert a.to("cpu:0").device.type == "cpu"
    assert a.to(ember.device("cpu", 0), ember.float64).dtype is ember.float64
    assert a.to(None) is a and a.to("cpu", None) is a
    assert a.to(None, ember.float64).dtype is ember.float64


@pytest.mark.parametrize("name", ["new_zeros", "new_ones", "new_empty"])
def test_new_factories_need_a_size(name):
    with pytest.raises(TypeError, match=rf'^{name}\(\) missing 1 required positional arguments: '
                                        r'"size"'):
        getattr(ember.ones(2), name)(dtype=ember.int32)
    assert getattr(ember.ones(2), name)(()).shape == ()


def test_view_with_a_dtype_and_more_arguments_is_an_invalid_combination():
    with pytest.raises(TypeError, match=r"view\(\) received an invalid combination of arguments "
                                        r"- got \(ember.dtype, int\)"):
        ember.ones(2, 3).view(ember.float32, 2)
    with pytest.raises(TypeError, match=r"got \(size=tuple, dtype=ember.dtype, \)"):
        ember.ones(2, 3).view(dtype=ember.int32, size=(3, 2))
    assert ember.ones(2, 3).view(dtype=ember.int32)[0, 0].item() == 1065353216


def test_is_pinned_warns_that_its_device_argument_is_deprecated():
    with pytest.warns(DeprecationWarning, match="The argument 'device' of Tensor.is_pinned"
                                                r"\(\) is deprecated") as record:
        assert ember.ones(2).is_pinned("cpu") is False
    assert record[0].filename == __file__
