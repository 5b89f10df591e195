"""Regressions found by differential fuzzing against PyTorch (audit round 10): advanced
indexing writes (one value through a mask, the order of index_put's checks, dims of size 0),
variance without degrees of freedom, and the dtype checks of out= tensors."""

import warnings

import pytest

import ember
from tests.parity._compare import outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _both(fn):
    return fn(ember), fn(torch)


MASK_WRITES = {
    "long_value": lambda lib, y, m: y.__setitem__(m, lib.tensor(2)),
    "float_value_2d": lambda lib, y, m: y.__setitem__(m, lib.tensor([[2.5]], dtype=lib.float32)),
    "none_then_mask": lambda lib, y, m: y.__setitem__((None, m), lib.tensor(3)),
    "index_put": lambda lib, y, m: y.index_put_((m,), lib.tensor(4)),
    "int_overflow": lambda lib, y, m: y.to(lib.int8).index_put_((m,), lib.tensor(300)),
    "complex_into_real": lambda lib, y, m: y.__setitem__(m, lib.tensor(1 + 2j)),
    "byte_mask": lambda lib, y, m: y.index_put_((m.to(lib.uint8),), lib.tensor(2.)),
    "accumulate_refuses": lambda lib, y, m: y.index_put_((m,), lib.tensor(2), accumulate=True),
    "long_index_refuses": lambda lib, y, m: y.__setitem__(lib.tensor([0, 2]), lib.tensor(2)),
}


@pytest.mark.parametrize("name", sorted(MASK_WRITES))
def test_one_value_through_one_mask_is_converted(name):
    # PyTorch writes a one-element value through a sole mask with masked_fill_, which converts
    # it (and checks overflow); other writes demand the destination's dtype
    def run(lib):
        y = lib.zeros(4, dtype=lib.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = outcome(lambda: MASK_WRITES[name](lib, y, lib.tensor([True, False, True,
                                                                          False])))
        return got if isinstance(got, tuple) else y.tolist()
    got, expected = _both(run)
    assert got == expected


def test_mask_write_of_other_dtype_value_keeps_its_gradient():
    def run(lib):
        x = lib.zeros(4, dtype=lib.float64, requires_grad=True)
        v = lib.tensor(2., requires_grad=True)
        y = x * 1
        y[lib.tensor([True, False, True, False])] = v
        (y * lib.arange(4.)).sum().backward()
        return y.tolist(), x.grad.tolist(), v.grad.item(), str(v.grad.dtype).split(".")[1]
    got, expected = _both(run)
    assert got == expected


INDEX_PUT_ERRORS = {
    "unbroadcastable_indices": lambda lib: lib.zeros(3, 2, dtype=lib.float64).index_put_(
        (lib.tensor([0, 1]), lib.tensor([0, 1, 1])), lib.tensor([1])),
    "value_shape": lambda lib: lib.zeros(3, dtype=lib.float64).index_put_(
        (lib.tensor([1]),), lib.tensor([1, 2])),
    "dim_of_size_0": lambda lib: lib.zeros(3, 0, dtype=lib.float64).index_put_(
        (lib.tensor([5]), lib.tensor([0])), lib.tensor([1])),
    "dtype_before_bounds": lambda lib: lib.zeros(3, dtype=lib.float64).index_put_(
        (lib.tensor([5]),), lib.tensor([1])),
}


@pytest.mark.parametrize("name", sorted(INDEX_PUT_ERRORS))
def test_index_put_checks_in_pytorchs_order(name):
    # the indices' shapes, then the value's shape, then the dtypes, then the bounds
    got, expected = _both(lambda lib: outcome(lambda: INDEX_PUT_ERRORS[name](lib)))
    assert got == expected


SIZE_0_DIMS = {
    "empty_broadcast_reads_nothing": lambda lib: lib.zeros(0, 3, 0)[[0], []].shape,
    "empty_broadcast_writes_nothing": lambda lib: lib.zeros(0, 3, 0).index_put_(
        (lib.tensor([0]), lib.tensor([], dtype=lib.int64)), lib.tensor(1.)).shape,
    "other_dim_empty_read": lambda lib: lib.zeros(0, 4, 0, 0)[:, 3, lib.tensor([0])].shape,
    "other_dim_empty_write": lambda lib: lib.zeros(0, 4, 0, 0).__setitem__(
        (slice(None), 3, lib.tensor([0])), 1.),
}


@pytest.mark.parametrize("name", sorted(SIZE_0_DIMS))
def test_index_into_dim_of_size_0(name):
    # an index into a dim of size 0 is an error unless the indices broadcast to nothing
    got, expected = _both(lambda lib: outcome(lambda: tuple(SIZE_0_DIMS[name](lib) or ())))
    assert got == expected


VARIANCES = {
    "0d": (-1.5, 1, {}),
    "one_element": ([-1.5], 1, {}),
    "equal_elements": ([-1.5, -1.5], 2, {}),
    "distinct_elements": ([-1.5, 2.], 2, {}),
    "0d_dim0": (-1.5, 1, {"dim": 0}),
}


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("name", sorted(VARIANCES))
def test_variance_without_degrees_of_freedom(name, dtype):
    # full reductions: grad * inf, nan where the input is its mean; a complex variance is
    # the real part's plus the imaginary part's (0/0 = nan)
    values, correction, kw = VARIANCES[name]

    def run(lib):
        x = lib.tensor(values, dtype=getattr(lib, dtype), requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = lib.var(x, correction=correction, **kw)
        y.sum().backward()
        return repr(y.tolist()), repr(x.grad.tolist())
    got, expected = _both(run)
    assert got == expected


OUT_DTYPES = {
    "bitwise_not": lambda lib, x, out: lib.bitwise_not(x, out=out),
    "nan_to_num": lambda lib, x, out: lib.nan_to_num(x, out=out),
    "clamp_min_number": lambda lib, x, out: lib.clamp_min(x, 2, out=out),
    "clamp_max_float": lambda lib, x, out: lib.clamp_max(x, 2.5, out=out),
    "clamp_numbers": lambda lib, x, out: lib.clamp(x, 0, 1, out=out),
    "clamp_min_tensor_casts": lambda lib, x, out: lib.clamp_min(x, lib.tensor(2), out=out),
    "ldexp": lambda lib, x, out: lib.ldexp(x.float(), x, out=out),
}


@pytest.mark.parametrize("out_dtype", ["int8", "int64", "float32"])
@pytest.mark.parametrize("name", sorted(OUT_DTYPES))
def test_out_dtype_checks(name, out_dtype):
    def run(lib):
        out = lib.empty(2, dtype=getattr(lib, out_dtype))
        got = outcome(lambda: OUT_DTYPES[name](lib, lib.tensor([1, 2], dtype=lib.int8), out))
        return got if isinstance(got, tuple) else out.tolist()
    got, expected = _both(run)
    assert got == expected


def test_take_along_dim_without_dim_takes_int32_indices():
    def outcomes(lib):
        x = lib.arange(6.0).reshape(2, 3)
        i = lib.tensor([[0], [2]], dtype=lib.int32)
        flat = lib.take_along_dim(x, i.flatten()).tolist()
        try:
            lib.take_along_dim(x, i, 1)
        except RuntimeError as e:
            return flat, str(e)
    assert outcomes(ember) == outcomes(torch)
