"""Behaviour of ops/binary_math.py that the OpInfo checks cannot see: subgradients at ties and
bounds, dtype promotion across operand kinds, and PyTorch's edge values (checked against
PyTorch 2.13)."""

import math

import pytest

import ember
from ember.testing import assert_close

NAN, INF = float("nan"), float("inf")


def _grads(fn, *args):
    """Gradients of ``fn(*args).sum()`` for the float arguments (None for the others)."""
    leaves = [a.detach().double().requires_grad_() if isinstance(a, ember.Tensor)
              and a.is_floating_point() else a for a in args]
    fn(*leaves).sum().backward()
    return [a.grad if isinstance(a, ember.Tensor) and a.requires_grad else None
            for a in leaves]


def _t(values, dtype=ember.float64):
    return ember.tensor(values, dtype=dtype)


# --- gradients --------------------------------------------------------------------------------

def test_maximum_minimum_split_ties_and_pass_nan():
    a, b = _t([1., 2., 3., NAN, 1.]), _t([1., 1., 4., 1., NAN])
    ga, gb = _grads(ember.maximum, a, b)
    assert_close(ga, _t([0.5, 1., 0., 1., 1.]))
    assert_close(gb, _t([0.5, 0., 1., 1., 1.]))
    ga, gb = _grads(ember.minimum, a, b)
    assert_close(ga, _t([0.5, 0., 1., 1., 1.]))
    assert_close(gb, _t([0.5, 1., 0., 1., 1.]))


def test_fmax_fmin_give_ties_to_input_and_skip_nan():
    a, b = _t([1., 2., 3., NAN, 1.]), _t([1., 1., 4., 1., NAN])
    ga, gb = _grads(ember.fmax, a, b)
    assert_close(ga, _t([1., 1., 0., 0., 1.]))
    assert_close(gb, _t([0., 0., 1., 1., 0.]))
    ga, gb = _grads(ember.fmin, a, b)
    assert_close(ga, _t([1., 0., 1., 0., 1.]))
    assert_close(gb, _t([0., 1., 0., 1., 0.]))


def test_clamp_gradient_goes_where_each_operand_was_selected():
    x = _t([0., 1., 2., 3., -1.])
    gx, glo, ghi = _grads(ember.clamp, x, _t([1.] * 5), _t([2.] * 5))
    assert_close(gx, _t([0., 1., 1., 0., 0.]))          # bounds themselves count as inside
    assert_close(glo, _t([1., 0., 0., 0., 1.]))
    assert_close(ghi, _t([0., 0., 0., 1., 0.]))
    # min > max: max wins everywhere, and gets all the gradient
    gx, glo, ghi = _grads(ember.clamp, x, _t([2.] * 5), _t([1.] * 5))
    assert_close(gx, _t([0.] * 5))
    assert_close(glo, _t([0.] * 5))
    assert_close(ghi, _t([1.] * 5))
    # min == max: min wins only where min < max, so below the bounds nobody gets gradient
    gx, glo, ghi = _grads(ember.clamp, x, _t([1.] * 5), _t([1.] * 5))
    assert_close(gx, _t([0., 1., 0., 0., 0.]))
    assert_close(glo, _t([0.] * 5))
    assert_close(ghi, _t([0., 0., 1., 1., 0.]))


def test_clamp_gradient_with_number_bounds_and_nan():
    (gx, _, _) = _grads(ember.clamp, _t([0., 1., 2., 3., NAN]), 1., 2.)
    assert_close(gx, _t([0., 1., 1., 0., 0.]))
    (gx, _, _) = _grads(ember.clamp, _t([0., 1., 2.]), 2., 1.)
    assert_close(gx, _t([0., 0., 0.]))
    gx, gmin = _grads(ember.clamp_min, _t([0., 1., 2.]), _t([1., 1., 1.]))
    assert_close(gx, _t([0., 1., 1.]))
    assert_close(gmin, _t([1., 0., 0.]))
    gx, gmax = _grads(ember.clamp_max, _t([0., 1., 2.]), _t([1.]))
    assert_close(gx, _t([1., 1., 0.]))
    assert_close(gmax, _t([1.]))


def test_where_routes_gradient_to_the_chosen_side():
    cond = ember.tensor([True, False, True])
    _, gx, gy = _grads(ember.where, cond, _t([1., 2., 3.]), _t([4.]))
    assert_close(gx, _t([1., 0., 1.]))
    assert_close(gy, _t([1.]))
    _, gx, _ = _grads(ember.where, cond, _t([1., 2., 3.]), 0.)
    assert_close(gx, _t([1., 0., 1.]))


def test_xlogy_copysign_atan2_hypot_gradients_at_special_points():
    gx, gy = _grads(ember.xlogy, _t([0., 1., 2., 0.]), _t([0., 1., 2., 3.]))
    assert_close(gx, _t([0., 0., math.log(2), math.log(3)]))  # log y also at x = 0
    assert_close(gy, _t([NAN, 1., 1., 0.]), equal_nan=True)
    gx, gy = _grads(ember.copysign, _t([0., -1., 2., -0.]), _t([-1., -1., 1., 1.]))
    assert_close(gx, _t([0., 1., 1., 0.]))
    assert_close(gy, _t([0., 0., 0., 0.]))
    ga, gb = _grads(ember.atan2, _t([0., 3.]), _t([0., 4.]))
    assert_close(ga, _t([0., 0.16]))
    assert_close(gb, _t([0., -0.12]))
    ga, gb = _grads(ember.hypot, _t([0., 3.]), _t([0., 4.]))
    assert_close(ga, _t([NAN, 0.6]), equal_nan=True)
    assert_close(gb, _t([NAN, 0.8]), equal_nan=True)


def test_heaviside_has_no_derivative():
    x = _t([0., 3.]).requires_grad_()
    out = ember.heaviside(x, _t([0.5]))
    assert out.requires_grad
    with pytest.raises(RuntimeError, match="derivative for aten::heaviside is not implemented"):
        out.sum().backward()


def test_lerp_addcmul_addcdiv_differentiate_every_tensor():
    x, end, w = _t([1., 2.]), _t([3., 6.]), _t([0.25, 0.75])
    gx, gend, gw = _grads(ember.lerp, x, end, w)
    assert_close(gx, _t([0.75, 0.25]))
    assert_close(gend, w)
    assert_close(gw, end - x)
    gx, g1, g2 = _grads(lambda a, b, c: ember.addcdiv(a, b, c, value=2), x, end, w)
    assert_close(gx, _t([1., 1.]))
    assert_close(g1, 2 / w)
    assert_close(g2, -2 * end / (w * w))


# --- dtypes and values ------------------------------------------------------------------------

def test_where_promotes_its_values_weakly():
    b = ember.tensor([True, False, True])
    i, f = ember.tensor([1, 2, 3]), ember.tensor([1., 2., 3.])
    h = f.half()
    assert ember.where(b, f, i).dtype is ember.float32
    assert ember.where(b, i, 2.5).dtype is ember.float32
    assert ember.where(b, 1, 2).dtype is ember.int64
    assert ember.where(b, 1., 2).dtype is ember.float32
    assert ember.where(b, True, False).dtype is ember.bool
    assert ember.where(b, h, 2.5).dtype is ember.float16
    assert ember.where(b, h, ember.tensor(2.5, dtype=ember.float64)).dtype is ember.float16
    assert ember.where(b, f, 1j).dtype is ember.complex64
    out = ember.where(b, i.to(ember.uint8), -1)
    assert out.dtype is ember.uint8 and out.tolist() == [1, 255, 3]
    assert f.where(b, 0).tolist() == [1., 0., 3.]


def test_where_accepts_a_uint8_condition_with_a_warning():
    with pytest.warns(UserWarning, match="uint8 condition tensor. This behavior is deprecated "
                                         "and will be removed in a future version of PyTorch"):
        out = ember.where(ember.tensor([1, 0], dtype=ember.uint8), ember.tensor([1., 2.]), 0.)
    assert out.tolist() == [1., 0.]


def test_clamp_promotion_and_bounds():
    i, f = ember.tensor([1, 2, 3]), ember.tensor([1., 2., 3.])
    b = ember.tensor([True, False, True])
    assert ember.clamp(i, 1.5).tolist() == [1.5, 2., 3.]
    assert ember.clamp(i, 1.5).dtype is ember.float32
    assert ember.clamp(b, 0, 1).dtype is ember.int64
    assert ember.clamp(b, ember.tensor([False, True, True])).tolist() == [True, True, True]
    assert ember.clamp(i, ember.tensor(2.)).dtype is ember.float32
    assert ember.clamp(i.int(), ember.tensor([1, 1, 1])).dtype is ember.int64
    assert ember.clamp(f, 3, 1).tolist() == [1., 1., 1.]
    assert ember.clamp(f, ember.tensor(1.), 2.5).tolist() == [1., 2., 2.5]
    assert ember.clip(f, 2).tolist() == [2., 2., 3.]
    assert ember.clamp(i.to(ember.uint8), -1).tolist() == [255, 255, 255]
    assert all(map(math.isnan, ember.clamp(ember.tensor([0., 1.]), NAN, 2.).tolist()))
    # a number bound: clamp's own kernel check names the C++ type, a tensor bound the dtype
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type long int"):
        i.clone().clamp_(1.5)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long$"):
        i.clone().clamp_(ember.tensor(1.5))
    t = f.clone()
    assert t.clip_(1.5) is t and t.tolist() == [1.5, 2., 3.]


def test_lerp_and_addc_edge_values():
    x, end = ember.tensor([0., 1e8]), ember.tensor([1., 1e8 + 8])
    assert_close(ember.lerp(x, end, 0.7), ember.tensor([0.7, 1e8 + 8]))
    assert ember.lerp(x, end, 1).tolist() == end.tolist()
    f = ember.tensor([1., 2., 3.])
    assert ember.lerp(f, f, ember.tensor(0.5, dtype=ember.float64)).dtype is ember.float32
    i = ember.tensor([1, 2, 3])
    assert ember.addcmul(i, i, i, value=2.5).tolist() == [3, 10, 21]   # value truncates
    out = ember.addcmul(i.to(ember.uint8), i.to(ember.uint8), i.to(ember.uint8), value=-1)
    assert out.tolist() == [0, 254, 250]
    assert ember.addcmul(i, i, f, value=2.5).tolist() == [3.5, 12., 25.5]
    assert ember.addcmul(f, f, ember.tensor(2., dtype=ember.float64)).dtype is ember.float32
    assert ember.addcmul(f, f.double(), f).dtype is ember.float64
    assert ember.addcdiv(i, f, i).tolist() == [2., 3., 4.]
    assert ember.addcdiv(f, f, ember.zeros(3)).tolist() == [INF] * 3
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        i.clone().addcmul_(f, f)


def test_pointwise_edge_values():
    assert ember.xlogy(ember.tensor([0., 0., 0., 0., NAN, 1.]),
                       ember.tensor([NAN, 0., INF, -1., 0., -1.])).tolist()[1:4] == [0., 0., 0.]
    assert ember.xlogy(2, ember.tensor([1, 2, 3])).dtype is ember.float32
    assert ember.xlogy(ember.tensor([0., 2.]), 0.).tolist() == [0., -INF]
    out = ember.copysign(ember.tensor([1., -0.0, 0.0]), ember.tensor([-0.0, 1., -1.]))
    assert [math.copysign(1, v) for v in out.tolist()] == [-1, 1, -1]
    assert ember.atan2(ember.tensor([0., -0.]), ember.tensor([-1., -1.])).tolist() == \
        pytest.approx([math.pi, -math.pi])
    assert ember.hypot(ember.tensor([INF, NAN]), ember.tensor([NAN, INF])).tolist() == [INF, INF]
    assert ember.heaviside(ember.tensor([-1., 0., 2., NAN]), ember.tensor([0.5])).tolist() == \
        [0., 0.5, 1., 0.]
    assert ember.heaviside(ember.tensor([-1, 0, 2]), ember.tensor([7])).tolist() == [0, 7, 1]
    assert ember.maximum(ember.tensor([1, 5], dtype=ember.uint8),
                         ember.tensor([3, 2], dtype=ember.int8)).dtype is ember.int16


def test_methods_and_aliases():
    f = ember.tensor([1., 2., 3.])
    assert ember.clip is not ember.clamp and ember.clip._ember_op is ember.clamp._ember_op
    assert f.clip(2).tolist() == f.clamp(2).tolist() == [2., 2., 3.]
    assert f.clamp_min(2).tolist() == [2., 2., 3.] and f.clamp_max(2).tolist() == [1., 2., 2.]
    t = f.clone()
    assert t.lerp_(ember.zeros(3), 0.5) is t and t.tolist() == [0.5, 1., 1.5]
    assert not hasattr(ember.Tensor, "maximum_") and not hasattr(ember.Tensor, "where_")
