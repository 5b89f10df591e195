"""``x[key] = value`` (copy_/fill_/index_put_ underneath) under forward-mode AD, vmap,
inference mode and TorchFunctionMode, and its number conversions (values from PyTorch 2.13)."""

import math

import pytest

import ember
import ember.autograd.forward_ad as fwAD
from ember.overrides import TorchFunctionMode


def _tangent(x):
    return fwAD.unpack_dual(x).tangent


@pytest.mark.parametrize("key", [0, (slice(None), 1), (0, 1), Ellipsis, "adv"])
def test_float8_e4m3fn_numbers_saturate(key):
    # PyTorch saturates to +-448 (the type has no infinity); a plain cast gives NaN
    for value, want in [(1e10, 448.0), (-1e10, -448.0), (float("inf"), 448.0),
                        (float("-inf"), -448.0), (500, 448.0), (464.0, 448.0), (-449.0, -448.0),
                        (1e308, 448.0), (2.5, 2.5), (True, 1.0)]:
        x = ember.zeros(2, 3, dtype=ember.float8_e4m3fn)
        x[ember.tensor([1]) if key == "adv" else key] = value
        got = x.float()
        region = got[1] if key == "adv" else got[key]
        assert region.eq(want).all(), (value, key, got.tolist())
        assert got.abs().max().item() == abs(want)
    x = ember.zeros(3, dtype=ember.float8_e4m3fn)
    x[1] = float("nan")
    assert math.isnan(x.float()[1].item()) and x.float()[0].item() == 0.0


def test_float8_e4m3fn_saturates_with_history_and_in_vmap():
    x = ember.zeros(2, 3, dtype=ember.float8_e4m3fn)
    x[:, 1] = 1e10
    assert x.float().tolist() == [[0.0, 448.0, 0.0], [0.0, 448.0, 0.0]]

    def f(t):
        t = t.clone()
        t[:, 1] = -1e10
        return t
    y = ember.func.vmap(f)(ember.zeros(2, 2, 3, dtype=ember.float8_e4m3fn)).float()
    assert y[:, :, 1].eq(-448.0).all() and y[:, :, 0].eq(0).all()
    e5 = ember.zeros(2, dtype=ember.float8_e5m2)
    e5[0] = 1e10                    # float8_e5m2 has an infinity: no saturation there
    assert e5.float().tolist() == [float("inf"), 0.0]


def test_dual_written_in_inference_mode_keeps_its_tangent():
    with fwAD.dual_level():
        d = fwAD.make_dual(ember.ones(3), ember.full((3,), 2.))
        with ember.inference_mode():
            d[0] = 5.
            d.mul_(2)
        assert d.tolist() == [10.0, 2.0, 2.0]
        assert _tangent(d).tolist() == [2.0, 2.0, 2.0]


def test_plain_tensor_written_with_dual_in_inference_mode_stays_plain():
    with fwAD.dual_level():
        v = fwAD.make_dual(ember.ones(3), ember.full((3,), 2.))
        x = ember.zeros(2, 3)
        with ember.inference_mode():
            x[1] = v
            x.copy_(v)
        assert _tangent(x) is None and x.tolist() == [[1.0] * 3] * 2
        y = ember.zeros(2, 3)
        y[1] = v                            # outside: it takes the tangent
        assert _tangent(y).tolist() == [[0.0] * 3, [2.0] * 3]


@pytest.mark.parametrize("dtype", [ember.int64, ember.int32, ember.bool])
def test_integer_targets_take_no_tangent(dtype):
    with fwAD.dual_level():
        v = fwAD.make_dual(ember.ones(2), ember.full((2,), 2.))
        x = ember.zeros(2, 3, dtype=dtype)
        x[:, 0] = v
        assert _tangent(x) is None
        assert x[:, 0].tolist() == ([True, True] if dtype is ember.bool else [1, 1])
        z = ember.zeros(2, dtype=dtype)
        z.copy_(v)
        s = fwAD.make_dual(ember.tensor(1.), ember.tensor(3.))
        z.fill_(s)
        assert _tangent(z) is None
        assert z.tolist() == ([True, True] if dtype is ember.bool else [1, 1])


def test_setitem_tangents_values_and_layouts():
    with fwAD.dual_level():
        tp = ember.arange(12.).reshape(4, 3).t()
        d = fwAD.make_dual(ember.zeros(3, 4), tp)
        d[1] = fwAD.make_dual(ember.ones(4), ember.full((4,), 9.))
        t = _tangent(d)
        assert t.tolist() == [[0., 3., 6., 9.], [9.] * 4, [2., 5., 8., 11.]]
        assert t.stride() == (4, 1)
        x = ember.zeros(3, 2).t()
        x[:] = fwAD.make_dual(ember.ones(2, 3), ember.arange(6.).reshape(2, 3))
        assert _tangent(x).stride() == (1, 2)
        assert _tangent(x).tolist() == [[0., 1., 2.], [3., 4., 5.]]

    def f(x, v):
        y = x.clone()
        y[1:] = v
        return y
    out, tangent = ember.func.jvp(f, (ember.arange(3.), ember.tensor([7., 8.])),
                                  (ember.ones(3), ember.tensor([2., 3.])))
    assert out.tolist() == [0., 7., 8.] and tangent.tolist() == [1., 2., 3.]


def test_vmap_refuses_batched_values_into_unbatched_targets():
    def col(v):
        x = ember.zeros(3, 4)
        x[:, 0] = v
        return x

    def row(v):
        x = ember.zeros(3, 4)
        x[0] = v
        return x
    with pytest.raises(RuntimeError, match=r"^vmap: inplace arithmetic\(self, \*extra_args\) "
                                           r"is not possible"):
        ember.func.vmap(col)(ember.ones(2, 3))
    with pytest.raises(RuntimeError, match=r"^vmap: fill_\(self, \*extra_args\) is not"):
        ember.func.vmap(row)(ember.ones(2))

    def both(x, v):
        x = x.clone()
        x[1] = v
        return x
    r = ember.func.vmap(both)(ember.zeros(2, 3, 4), ember.arange(2.))
    assert r[:, 1].tolist() == [[0.] * 4, [1.] * 4] and r.sum().item() == 4.0


def test_modes_see_setitem_only():
    class Seen(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.seen.append(func.__name__)
            return func(*args, **(kwargs or {}))
    x, v, s = ember.zeros(3, 4), ember.ones(4), ember.tensor(2.)
    with Seen() as mode:
        x[0] = v
        x[1] = 2.
        x[2] = s
        x[2, 0] = s
        x[...] = v
    assert mode.seen == ["__setitem__"] * 5
    assert x.sum().item() == 12.0
