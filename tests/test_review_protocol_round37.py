"""Review of round 37's Tensor-protocol and promotion changes (RW1): clamp's checks made
before promotion keep PyTorch's order; pickling of subclasses and Parameters."""
import copy
import io
import pickle

import pytest

import ember


def _c():
    return ember.tensor([1 + 1j, 2j])


@pytest.mark.parametrize("call", [
    lambda c, f: ember.clamp(c, min=1, max=f),
    lambda c, f: ember.clamp(c, 1, f),
    lambda c, f: ember.clip(c, 1, f),
    lambda c, f: c.clamp(f, 1),
    lambda c, f: c.clone().clamp_(1, f),
])
def test_clamp_mixed_bounds_parser_error_before_complex_check(call):
    with pytest.raises(TypeError, match="received an invalid combination of arguments"):
        call(_c(), ember.tensor([1.0, 2.0]))


@pytest.mark.parametrize("call, kernel", [
    (lambda c, f: ember.clamp_min(c, f), "maximum_cpu"),
    (lambda c, f: ember.clamp_max(c, f), "minimum_cpu"),
    (lambda c, f: c.clone().clamp_min_(f), "maximum_cpu"),
    (lambda c, f: ember.clamp_min(f, c), "maximum_cpu"),
    (lambda c, f: ember.clamp_min(c, f[0]), "maximum_cpu"),
    (lambda c, f: ember.clamp_max(c[0], f), "minimum_cpu"),
    (lambda c, f: ember.clamp_min(c, f, out=ember.empty(2, dtype=ember.complex64)),
     "maximum_cpu"),
])
def test_clamp_min_max_tensor_bound_names_extremum_kernel(call, kernel):
    with pytest.raises(NotImplementedError) as info:
        call(_c(), ember.tensor([1.0, 2.0]))
    assert str(info.value) == f"\"{kernel}\" not implemented for 'ComplexFloat'"


def test_clamp_min_tensor_bound_checks_shapes_and_out_cast_first():
    with pytest.raises(RuntimeError, match=r"size of tensor a \(2\) must match"):
        ember.clamp_min(_c(), ember.ones(3))
    with pytest.raises(RuntimeError, match="result type ComplexFloat can't be cast to the "
                                           "desired output type Float"):
        ember.clamp_min(_c(), ember.tensor([1.0, 2.0]), out=ember.empty(2))


def test_clamp_complex_self_still_refused_first():
    for call in (lambda c: ember.clamp_min(c, 1), lambda c: ember.clamp(c, ember.ones(3)),
                 lambda c: ember.clamp(c, None, ember.tensor([1.0, 2.0]))):
        with pytest.raises(NotImplementedError, match="^clamp is not supported for complex"):
            call(_c())
    f = ember.tensor([1.0, 5.0])
    assert ember.clamp_min(f, ember.tensor([2.0, 2.0])).tolist() == [2.0, 5.0]
    assert ember.clamp(f, min=2, max=4).tolist() == [2.0, 4.0]


def test_huge_python_ints_overflow():
    with pytest.raises(OverflowError):
        ember.ones(2) + 2 ** 64
    with pytest.raises(OverflowError):
        ember.ones(2) * -(2 ** 63 + 1)
    assert (ember.ones(2, dtype=ember.float64) + 2 ** 63).tolist() == [2.0 ** 63] * 2


class _Sub(ember.Tensor):
    pass


def _saved(x):
    buf = io.BytesIO()
    ember.save(x, buf)
    buf.seek(0)
    return ember.load(buf, weights_only=False)


@pytest.mark.parametrize("trip", [lambda x: pickle.loads(pickle.dumps(x)), _saved, copy.copy])
def test_subclass_and_parameter_round_trips_keep_type_and_attributes(trip):
    s = ember.tensor([1.0, 2.0]).as_subclass(_Sub)
    s.label = "L"
    p = ember.nn.Parameter(ember.tensor([3.0, 4.0]))
    p.label = "P"
    s2, p2 = trip(s), trip(p)
    assert type(s2) is _Sub and s2.label == "L" and s2.tolist() == [1.0, 2.0]
    assert type(p2) is ember.nn.Parameter and p2.label == "P" and p2.requires_grad
    assert p2.tolist() == [3.0, 4.0]


def test_getstate_and_setstate():
    t = ember.tensor([1.0])
    assert t.__getstate__() is None
    t.label = "x"
    assert t.__getstate__() == {"label": "x"}
    with pytest.raises(ValueError):
        ember.tensor([1.0]).__setstate__({"a": 1})
    u = ember.tensor([1.0])
    u.__setstate__((True, None, None))
    assert u.requires_grad
    m = copy.deepcopy(ember.nn.Linear(2, 2))
    assert type(m.weight) is ember.nn.Parameter
