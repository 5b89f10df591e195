"""Regressions found by differential fuzzing against PyTorch (audit round 8): gradients at
edges, the layout of selection and scan results, and the errors of in-place broadcasting and
of numbers in tensor-only positions."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _both(fn):
    return fn(ember), fn(torch)


def test_acosh_grad_below_minus_one_is_finite():
    def grad(lib):
        x = lib.tensor([-1.5, -1.0, 0.5, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
        lib.acosh(x).sum().backward()
        return x.grad.tolist()
    got, expected = _both(grad)
    assert got == pytest.approx(expected, nan_ok=True)


def test_acosh_complex_grad_unchanged():
    def grad(lib):
        x = lib.tensor(-1.5 + 0.5j, dtype=lib.complex128, requires_grad=True)
        lib.acosh(x).abs().backward()
        return complex(x.grad.item())
    got, expected = _both(grad)
    assert got == pytest.approx(expected)


SELECTIONS = {
    "topk_smallest": lambda lib, x: x.topk(2, largest=False),
    "topk_dim0": lambda lib, x: x.topk(2, dim=0),
    "kthvalue": lambda lib, x: lib.kthvalue(x, 1),
    "kthvalue_keepdim": lambda lib, x: lib.kthvalue(x, 2, 1, keepdim=True),
    "cummax": lambda lib, x: lib.cummax(x.transpose(0, 1), 1),
    "cummin": lambda lib, x: lib.cummin(x.transpose(0, 1), 0),
    "logcumsumexp": lambda lib, x: (lib.logcumsumexp(x.transpose(0, 1), 1),),
    "logcumsumexp_complex": lambda lib, x: (
        lib.logcumsumexp(x.transpose(0, 1).to(lib.complex64), 1),),
}


@pytest.mark.parametrize("name", sorted(SELECTIONS))
def test_selection_and_scan_results_are_contiguous(name):
    def run(lib):
        x = lib.tensor([[[3., 1., 4.], [1., 5., 9.], [2., 6., 5.], [3., 5., 8.]]] * 3)
        return [(t.stride(), t.flatten().tolist()) for t in SELECTIONS[name](lib, x)]
    got, expected = _both(run)
    assert [stride for stride, _ in got] == [stride for stride, _ in expected]
    for (_, values), (_, want) in zip(got, expected):
        assert values == pytest.approx(want, rel=1e-6)


INPLACE_MISMATCH = {
    "add_": lambda lib, a, b: a.add_(b),
    "pow_": lambda lib, a, b: a.pow_(b),
    "div_": lambda lib, a, b: a.div_(b),
    "remainder_": lambda lib, a, b: a.remainder_(b),
    "lerp_": lambda lib, a, b: a.lerp_(b, 0.5),
    "iadd_float16": lambda lib, a, b: a.half().__iadd__(b.double()),
}


@pytest.mark.parametrize("name", sorted(INPLACE_MISMATCH))
def test_inplace_with_unbroadcastable_operand_raises_runtime_error(name):
    def run(lib):
        try:
            INPLACE_MISMATCH[name](lib, lib.zeros(3), lib.zeros(1, 4))
        except Exception as e:  # noqa: BLE001 - the type is what is compared
            return type(e), str(e)
        return None
    got, expected = _both(run)
    assert got == expected


@pytest.mark.parametrize("first", [2, 2.5, True])
def test_fmod_rejects_a_number_first(first):
    for lib in (ember, torch):
        with pytest.raises(TypeError):
            lib.fmod(first, lib.tensor([1.0, 2.0]))
    got, expected = _both(lambda lib: lib.fmod(lib.tensor([5.0, -3.5]), 2).tolist())
    assert got == expected


DIVISIONS = {
    "uint8_true_div_negative": lambda lib: lib.tensor([3, 7], dtype=lib.uint8) / -3,
    "uint8_0dim_true_div": lambda lib: lib.tensor(3, dtype=lib.uint8) / -3,
    "int8_true_div_wide": lambda lib: lib.true_divide(lib.tensor([3, -7], dtype=lib.int8), -300),
    "number_over_uint8": lambda lib: -3 / lib.tensor([3, 7], dtype=lib.uint8),
    "int8_over_uint64_range": lambda lib: lib.tensor([100, -7], dtype=lib.int8) / (2 ** 64 - 1),
    "int8_floor_div_wraps": lambda lib: lib.div(lib.tensor([7, -7, 100], dtype=lib.int8), -300,
                                                rounding_mode="floor"),
    "uint8_trunc_div_wraps": lambda lib: lib.div(lib.tensor([3, 200], dtype=lib.uint8), -3,
                                                 rounding_mode="trunc"),
}


@pytest.mark.parametrize("name", sorted(DIVISIONS))
def test_int_tensor_divided_by_python_int(name):
    got, expected = _both(lambda lib: DIVISIONS[name](lib))
    assert str(got.dtype).split(".")[1] == str(expected.dtype).split(".")[1]
    assert got.tolist() == pytest.approx(expected.tolist(), rel=1e-6)


def test_mv_of_a_0dim_input_raises_index_error():
    for lib in (ember, torch):
        with pytest.raises(IndexError, match="Dimension specified as 0 but tensor has no"):
            lib.mv(lib.tensor(1.0), lib.ones(3))


MOMENT_GRADS = {
    "std_zero_times_inf": lambda lib, x: lib.logit(x.std(0, correction=0)).sum(),
    "std_mean_zero_times_inf": lambda lib, x: lib.logit(lib.std_mean(x, 0)[0]).sum(),
    "var_negative_dof": lambda lib, x: x.var(1, correction=5).sum(),
    "var_mean_negative_dof": lambda lib, x: lib.var_mean(x, 1, correction=4)[0].sum(),
}


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("name", sorted(MOMENT_GRADS))
def test_moment_gradients_at_edges(name):
    def grad(lib):
        rows = [[1.0, 1.0, 1.0]] * 3 if name.startswith("std") else [[1.0, 2.0, 3.0]]
        x = lib.tensor(rows, dtype=lib.float64, requires_grad=True)
        return lib.autograd.grad(MOMENT_GRADS[name](lib, x), x)[0].flatten().tolist()
    got, expected = _both(grad)
    assert got == pytest.approx(expected, nan_ok=True)


def test_cumulative_trapezoid_of_empty_dim_has_zero_gradients():
    def grad(lib):
        y = lib.ones(5, 0, dtype=lib.float64, requires_grad=True)
        x = lib.ones(5, 0, dtype=lib.float64, requires_grad=True)
        gy, gx = lib.autograd.grad(lib.cumulative_trapezoid(y, x).sum(), (y, x))
        return tuple(gy.shape), tuple(gx.shape)
    got, expected = _both(grad)
    assert got == expected == ((5, 0), (5, 0))


def test_index_put_checks_index_count_before_dtypes():
    def run(lib):
        try:
            lib.index_put(lib.tensor(1.0), (lib.tensor([0]),), lib.tensor([1]))
        except Exception as e:  # noqa: BLE001 - the type is what is compared
            return type(e), str(e)
        return None
    got, expected = _both(run)
    assert got == expected
    assert got[0] is IndexError


@pytest.mark.parametrize("fn,correction,kw", [("var", 8, {}), ("var", 6, {}), ("std", 8, {}),
                                              ("var", 8, {"dim": 1}), ("var", 3, {"dim": 1})])
def test_moment_gradients_without_degrees_of_freedom(fn, correction, kw):
    grads = []
    for m in (ember, torch):
        x = m.tensor([[1.0, -2, 3], [0.5, 4, -1]], dtype=m.float64, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            getattr(m, fn)(x, correction=correction, **kw).sum().backward()
        grads.append(x.grad.tolist())
    np.testing.assert_array_equal(np.array(grads[0]), np.array(grads[1]))
