"""Review of round 37's random-op changes: regressions found in review (torch-free)."""

import warnings

import numpy as np
import pytest

import ember
import ember._random_inplace as R


def test_randint_high_and_size_by_keyword():
    """randint(high=, size=) draws from [0, high) (the _NOT_GIVEN default had refused it)."""
    ember.manual_seed(0)
    r = ember.randint(high=3, size=(50,))
    assert r.shape == (50,) and r.dtype == ember.int64
    assert int(r.min()) >= 0 and int(r.max()) <= 2
    ember.manual_seed(0)
    assert ember.equal(r, ember.randint(0, 3, (50,)))


def test_randint_bounds_not_plain_ints_still_checked():
    """The fast path for plain int bounds leaves the other bounds' checks in place."""
    with pytest.raises(TypeError, match="must be int, not float"):
        ember.randint(3.0, (2,))
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        ember.randint(2 ** 63, (2,))
    assert ember.randint(np.int64(3), (4,)).shape == (4,)
    assert ember.randint(ember.tensor(3), (4,)).shape == (4,)


def test_normal_broadcast_without_out_is_silent():
    """normal(mean, std) broadcasting beyond the mean's shape warns of no resize (no out=)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = ember.normal(ember.zeros(3, 1), ember.ones(3))
    assert r.shape == (3, 3) and r.stride() == (3, 1)


def test_normal_broadcast_out_resize_still_warns():
    """An out= of another shape with elements still gets the resize warning."""
    with pytest.warns(UserWarning, match="was resized"):
        ember.normal(ember.zeros(3), ember.ones(3), out=ember.empty(2))


def test_normal_huge_int_mean_is_read_as_float():
    """A Python int mean beyond 64 bits is a float mean, as PyTorch's parser reads it."""
    r = ember.normal(2 ** 70, ember.zeros(3, dtype=ember.float64))
    assert r.tolist() == [float(2 ** 70)] * 3


def test_normal_refuses_complex_std_tensor():
    """A complex std tensor is refused (its values compared lexicographically had passed)."""
    with pytest.raises(RuntimeError, match="standard deviation to be non-complex"):
        ember.normal(ember.zeros(3, dtype=ember.complex64), ember.ones(3, dtype=ember.complex64))


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_normal_one_pass_matches_steps(dtype, monkeypatch):
    """normal's one-pass route draws the very samples of the step-by-step route."""
    mean = ember.linspace(-2, 2, 12, dtype=dtype).reshape(3, 4)
    std = ember.linspace(0, 3, 12, dtype=dtype).reshape(3, 4)
    forms = [(mean, std), (mean, 2.5), (1.5, std), (mean, std[:, :1].expand(3, 4))]
    ember.manual_seed(11)
    fast = [ember.normal(m, s) for m, s in forms]
    monkeypatch.setattr(R, "_PLAIN_FLOATS", ())
    ember.manual_seed(11)
    slow = [ember.normal(m, s) for m, s in forms]
    for a, b in zip(fast, slow):
        assert a.dtype == dtype and np.array_equal(a.numpy(), b.numpy())


def test_uniform_bounds_checks_after_caching_the_range():
    """uniform_'s range checks (now with the dtype's max cached) still refuse per dtype."""
    with pytest.raises(RuntimeError, match="to is out of bounds for float"):
        ember.empty(2).uniform_(0, 3.5e38)
    with pytest.raises(RuntimeError, match="from is out of bounds for c10::Half"):
        ember.empty(2, dtype=ember.float16).uniform_(-7e4, 0)
    assert ember.empty(2, dtype=ember.float64).uniform_(0, 3.5e38).dtype == ember.float64


def test_complex_uniform_fills_both_parts_in_range():
    """Complex uniform_ draws each part on [from, to) (no overflow path needed)."""
    c = ember.empty(2000, dtype=ember.complex128).uniform_(2, 3)
    for part in (c.real, c.imag):
        assert 2 <= float(part.min()) and float(part.max()) < 3
    assert not ember.equal(c.real, c.imag)
