"""ember.testing: assert_close's tolerances and messages, make_tensor's guarantees."""

import numpy as np
import pytest

import ember
from ember.testing import assert_close, make_tensor


def test_default_tolerances_follow_the_dtype():
    a = ember.tensor([1.0])
    assert_close(a, ember.tensor([1.0 + 1e-6]))               # within float32's rtol 1.3e-6
    with pytest.raises(AssertionError, match="Tensor-likes are not close"):
        assert_close(a, ember.tensor([1.0001]))
    h = ember.tensor([1.0], dtype=ember.float16)
    assert_close(h, ember.tensor([1.0009765625], dtype=ember.float16))  # one float16 ulp
    d = ember.tensor([1.0], dtype=ember.float64)
    with pytest.raises(AssertionError):
        assert_close(d, ember.tensor([1.0 + 1e-6], dtype=ember.float64))


def test_integers_compare_exactly():
    assert_close(ember.tensor([1, 2]), ember.tensor([1, 2]))
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 2"):
        assert_close(ember.tensor([1, 2]), ember.tensor([1, 3]))


def test_message_names_the_worst_element():
    with pytest.raises(AssertionError) as info:
        assert_close(ember.tensor([[1.0, 2.0], [3.0, 4.0]]),
                     ember.tensor([[1.0, 2.5], [3.0, 4.0]]))
    text = str(info.value)
    assert "Mismatched elements: 1 / 4 (25.0%)" in text
    assert "Greatest absolute difference: 0.5 at index (0, 1)" in text
    assert "Greatest relative difference: 0.20000000298023224 at index (0, 1)" in text


def test_dtype_shape_and_nan_checks():
    with pytest.raises(AssertionError, match="attribute 'dtype' do not match"):
        assert_close(ember.ones(2), ember.ones(2, dtype=ember.float64))
    assert_close(ember.ones(2), ember.ones(2, dtype=ember.float64), check_dtype=False)
    with pytest.raises(AssertionError, match="attribute 'shape' do not match"):
        assert_close(ember.ones(2), ember.ones(3))
    nan = ember.tensor([float("nan")])
    with pytest.raises(AssertionError):
        assert_close(nan, nan)
    assert_close(nan, nan, equal_nan=True)
    inf = ember.tensor([float("inf")])
    assert_close(inf, inf)


def test_explicit_tolerances_and_containers():
    assert_close(ember.tensor([1.0]), ember.tensor([1.1]), rtol=0.2, atol=0)
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol'"):
        assert_close(ember.tensor([1.0]), ember.tensor([1.0]), rtol=0.1)
    assert_close({"a": [ember.ones(1), 2.0]}, {"a": [ember.ones(1), 2.0]})
    with pytest.raises(AssertionError):
        assert_close([ember.ones(1)], [ember.zeros(1)])
    assert_close(1.0, 1.0 + 1e-9)
    assert_close(ember.ones(2), np.ones(2, dtype=np.float32), check_dtype=False)


def test_custom_message():
    with pytest.raises(AssertionError, match="^custom$"):
        assert_close(ember.ones(1), ember.zeros(1), msg="custom")


def test_make_tensor_ranges_and_layout():
    ember.manual_seed(0)
    t = make_tensor(100, dtype=ember.float32, low=-2, high=3)
    arr = t.numpy()
    assert t.dtype is ember.float32 and arr.min() >= -2 and arr.max() < 3
    i = make_tensor(200, dtype=ember.int8)
    assert -9 <= i.numpy().min() and i.numpy().max() <= 9
    assert make_tensor(50, dtype=ember.uint8).numpy().min() >= 0
    assert (make_tensor(100, dtype=ember.int64, exclude_zero=True).numpy() != 0).all()
    nc = make_tensor(3, 4, dtype=ember.float64, noncontiguous=True)
    assert nc.shape == (3, 4) and not nc.is_contiguous()
    assert make_tensor((2,), dtype=ember.float32, requires_grad=True).requires_grad
    assert make_tensor((), dtype=ember.complex64).dtype is ember.complex64
    ember.manual_seed(5)
    a = make_tensor(4, dtype=ember.float32).tolist()
    ember.manual_seed(5)
    assert make_tensor(4, dtype=ember.float32).tolist() == a


def test_deprecated_assert_allclose_uses_the_older_tolerances():
    with pytest.warns(FutureWarning, match=r"assert_allclose\(\)` is deprecated since 1.12"):
        ember.testing.assert_allclose(ember.ones(2), [1.0, 1.00005])      # rtol 1e-4
    with pytest.warns(FutureWarning):
        ember.testing.assert_allclose(ember.tensor([float("nan")]), [float("nan")])
    with pytest.warns(FutureWarning), pytest.raises(AssertionError,
                                                    match=r"up to 0.0001 allowed"):
        ember.testing.assert_allclose(ember.ones(2), ember.zeros(2))
    with pytest.warns(FutureWarning), pytest.raises(AssertionError):
        ember.testing.assert_allclose(ember.ones(2), [1.0, 1.00005], rtol=0.0, atol=0.0)


def test_messages_follow_pytorchs_format():
    def message(*args, **kwargs):
        with pytest.raises(AssertionError) as info:
            assert_close(*args, **kwargs)
        return str(info.value)

    # differences in the inputs' dtype; integers exactly, as "equal" with no tolerances
    assert message(ember.tensor([1, 2]), ember.tensor([1, 3])) == (
        "Tensor-likes are not equal!\n\nMismatched elements: 1 / 2 (50.0%)\n"
        "Greatest absolute difference: 1 at index (1,)\n"
        "Greatest relative difference: 0.3333333432674408 at index (1,)")
    assert "relative difference: 0.333251953125 at index (0,) (up to 0.001 allowed)" in \
        message(ember.tensor([1.0, 2.0], dtype=ember.float16),
                ember.tensor([1.5, 2.0], dtype=ember.float16))
    assert message(ember.tensor(5), ember.tensor(6)) == (
        "Scalars are not equal!\n\nExpected 6 but got 5.\nAbsolute difference: 1\n"
        "Relative difference: 0.16666666666666666")
    # infinities are close only to themselves
    text = message(ember.tensor([1.0, float("inf")]), ember.tensor([1.0, -float("inf")]))
    assert "Greatest absolute difference: inf at index (1,)" in text
    assert "Greatest relative difference: nan at index (1,)" in text
    # nested inputs name the failing item; mappings list their keys
    assert message([ember.ones(1), {"a": ember.ones(2)}], [ember.ones(1), {"a": ember.ones(1)}]) \
        == ("The values for attribute 'shape' do not match: ember.Size([2]) != "
            "ember.Size([1]).\n\nThe failure occurred for item [1]['a']")
    assert message({"a": 1, "c": 2}, {"b": 1, "c": 2}) == (
        "The keys of the mappings do not match:\nMissing keys in the actual mapping: ['b']\n"
        "Additional keys in the actual mapping: ['a']")
    assert message([ember.ones(1)], [ember.zeros(1)], msg="boom") == "boom"
    with pytest.raises(TypeError, match="^No comparison pair was able to handle inputs of "
                                        "type .*Tensor'> and <class 'float'>.$"):
        assert_close(ember.ones(1), 1.0)
