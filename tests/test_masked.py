"""``ember.masked``: reductions that skip the elements where ``mask`` is False."""

import math

import ember


def _x():
    return ember.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])


_M = [[True, False, True], [False, False, False]]


def test_masked_reductions_use_each_identity():
    x, m = _x(), ember.tensor(_M)
    assert ember.masked.sum(x, 1, mask=m).tolist() == [4.0, 0.0]
    assert ember.masked.prod(x, 1, mask=m).tolist() == [3.0, 1.0]
    assert ember.masked.amax(x, 1, mask=m).tolist() == [3.0, -math.inf]
    assert ember.masked.amin(x, 1, mask=m).tolist() == [1.0, math.inf]
    mean = ember.masked.mean(x, 1, mask=m).tolist()
    assert mean[0] == 2.0 and math.isnan(mean[1])
    assert ember.masked.sum(x, keepdim=True, mask=m).tolist() == [[4.0]]
    assert ember.masked.cumsum(x, 1, mask=m).tolist() == [[1.0, 1.0, 4.0], [0.0] * 3]


def test_masked_softmax_gives_masked_elements_no_weight():
    out = ember.masked.softmax(_x(), 1, mask=ember.tensor(_M))
    assert out[0, 1].item() == 0.0 and abs(out[0].sum().item() - 1.0) < 1e-6
    assert all(math.isnan(v) for v in out[1].tolist())


def test_masked_sum_gradient_reaches_only_unmasked_elements():
    x = _x().requires_grad_()
    ember.masked.sum(x, 1, mask=ember.tensor(_M)).sum().backward()
    assert x.grad.tolist() == [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]


def test_masked_logaddexp_drops_masked_sides():
    a, b = ember.tensor([1.0, 2.0, 3.0]), ember.tensor([0.0, 5.0, -1.0])
    out = ember.masked.logaddexp(a, b, input_mask=ember.tensor([True, False, False]),
                                 other_mask=ember.tensor([True, True, False]))
    assert abs(out[0].item() - math.log(math.e + 1)) < 1e-6
    assert out[1].item() == 5.0 and out[2].item() == -math.inf
