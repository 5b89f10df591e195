"""ember._foreach_* (src/ember/_tensor_lists.py): ops on lists of tensors, as torch's."""

import pytest

import ember


def _pair():
    return [ember.tensor([1., -2.]), ember.tensor([3., 4., -5.])]


def test_unary_out_of_place_and_in_place():
    xs = _pair()
    out = ember._foreach_abs(xs)
    assert isinstance(out, tuple) and [t.tolist() for t in out] == [[1, 2], [3, 4, 5]]
    assert xs[0].tolist() == [1, -2]
    assert ember._foreach_neg_(xs) is xs and xs[1].tolist() == [-3, -4, 5]


@pytest.mark.parametrize("other, expected", [
    (2.0, [[3, 0], [5, 6, -3]]),
    ([2.0, -1.0], [[3, 0], [2, 3, -6]]),
    (ember.tensor(3.0), [[4, 1], [6, 7, -2]]),
    ([ember.tensor([1., .5]), ember.tensor(2.)], [[2, -1.5], [5, 6, -3]]),
])
def test_add_takes_numbers_lists_and_tensors(other, expected):
    xs = _pair()
    assert [t.tolist() for t in ember._foreach_add(xs, other)] == expected
    ember._foreach_add_(xs, other)
    assert [t.tolist() for t in xs] == expected


def test_alpha_pointwise_lerp_and_reductions():
    xs = _pair()
    assert ember._foreach_add(xs, _pair(), alpha=2)[1].tolist() == [9, 12, -15]
    assert ember._foreach_maximum(xs, 0.0)[1].tolist() == [3, 4, 0]
    assert ember._foreach_pow(2.0, xs)[0].tolist() == [2, .25]
    assert ember._foreach_addcmul(xs, xs, xs, ember.tensor([1., 3.]))[0].tolist() == [2, 2]
    assert ember._foreach_addcdiv(xs, xs, xs, [1., 2.])[1].tolist() == [5, 6, -3]
    assert ember._foreach_lerp(xs, [ember.zeros(2), ember.zeros(3)], .25)[0].tolist() == [.75,
                                                                                       -1.5]
    assert [t.item() for t in ember._foreach_norm(xs, 1)] == [3, 12]
    assert [t.item() for t in ember._foreach_max(xs)] == [1, 4]
    assert ember._foreach_norm(xs, dtype=ember.float64)[0].dtype is ember.float64
    ember._foreach_zero_(xs)
    assert xs[1].tolist() == [0, 0, 0]


def test_ema_update_and_autograd():
    ema, cur = [ember.ones(2)], [ember.full((2,), 3.)]
    ember._foreach_mul_(ema, .9)
    ember._foreach_add_(ema, cur, alpha=.1)
    assert ember.allclose(ema[0], ember.full((2,), 1.2))
    w = [ember.tensor([1., 2.], requires_grad=True)]
    ember._foreach_mul(w, 3.0)[0].sum().backward()
    assert w[0].grad.tolist() == [3, 3]


def test_errors():
    xs = _pair()
    with pytest.raises(RuntimeError, match="^Tensor list must have at least one tensor.$"):
        ember._foreach_add([], 1.0)
    with pytest.raises(RuntimeError, match="^Tensor list must have same number of elements "
                                           "as scalar list.$"):
        ember._foreach_add(xs, [1.0])
    with pytest.raises(RuntimeError, match="^Tensor lists must have the same number of "
                                           "tensors, got 2 and 1$"):
        ember._foreach_add_(xs, [ember.ones(2)])
    with pytest.raises(RuntimeError, match="^scalar tensor expected to be 0 dim but it has 1 "
                                           "dimensions and 2 elements.$"):
        ember._foreach_mul(xs, ember.ones(2))
    with pytest.raises(TypeError, match="^_foreach_sqrt\\(\\): argument 'self' \\(position "
                                        "1\\) must be tuple of Tensors, not Tensor$"):
        ember._foreach_sqrt(ember.ones(2))
    with pytest.raises(RuntimeError, match="^Expected packed scalar Tensor to be of dimension "
                                           "1. Got 0 instead.$"):
        ember._foreach_addcmul(xs, xs, xs, ember.tensor(2.0))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        ember._foreach_add_([ember.tensor([1, 2])], 1.5)


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16])
def test_in_place_mul_rounds_its_numbers_to_half_precision(dtype):
    import numpy as np
    x = ember.tensor([2.03125, -1.5, 0.75], dtype=dtype)
    expected = (x.float().numpy() * np.float32(ember.tensor(0.99, dtype=dtype).item()))
    for number in (0.99, [0.99]):
        a = [x.clone()]
        ember._foreach_mul_(a, number)
        assert a[0].tolist() == ember.from_numpy(expected).to(dtype).tolist()
    # out of place, as a 0-dim tensor, and in float32 the number stays whole
    assert ember._foreach_mul([x], 0.99)[0].tolist() == (x * 0.99).tolist()
    b = [x.clone()]
    ember._foreach_mul_(b, ember.tensor(0.99))
    assert b[0].tolist() == (x * 0.99).tolist()
    c = [ember.tensor([0.1])]
    ember._foreach_mul_(c, 0.99)
    assert c[0].item() == (ember.tensor([0.1]) * 0.99).item()
