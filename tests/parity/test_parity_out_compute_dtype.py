"""Reductions and scans given an ``out=`` of another dtype, against PyTorch: the values they
compute in out's dtype, and the errors (ops/_out_compute.py)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

OUT_DTYPES = ("bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64",
              "complex64")
# rounding of 16-bit results (torch accumulates some in 16 bits); float64 ones are compared
# tightly, so a float32 computation cast after would fail
RTOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-5, "float64": 1e-8,
        "complex64": 1e-5}
# float32 values whose float32 and float64 reductions differ visibly
WIDE = (np.arange(400, dtype=np.float32) * 0.37 + 0.013).reshape(2, 200) / 7
INPUTS = {
    "float": [[0.5, 1.7, 2.6, -0.4], [3.3, 4.9, 1.25, 0.75]],
    "int": [[1, 2, 3, 4], [5, 6, 7, 8]],
    "bool": [[True, False, True, True], [False, True, True, True]],
    "wide": WIDE.tolist(),
}

CALLS = {
    "sum": lambda m, x, **k: m.sum(x, 1, **k),
    "prod": lambda m, x, **k: m.prod(x[:, :8] / 20 + 0.7 if x.is_floating_point() else x, 1,
                                      **k),
    "nansum": lambda m, x, **k: m.nansum(x, 1, **k),
    "mean": lambda m, x, **k: m.mean(x, 1, **k),
    "nanmean": lambda m, x, **k: m.nanmean(x, 1, **k),
    "cumsum": lambda m, x, **k: m.cumsum(x, 1, **k),
    "cumprod": lambda m, x, **k: m.cumprod(x[:, :8] / 20 + 0.7 if x.is_floating_point() else x,
                                           1, **k),
    "std": lambda m, x, **k: m.std(x, 1, **k),
    "var": lambda m, x, **k: m.var(x, 1, **k),
    "logsumexp": lambda m, x, **k: m.logsumexp(x, 1, **k),
    "softmax": lambda m, x, **k: m.softmax(x, 1, **k),
    "log_softmax": lambda m, x, **k: m.log_softmax(x, 1, **k),
}
WITH_DTYPE = ("sum", "prod", "nansum", "mean", "nanmean", "cumsum", "cumprod")


def _run(module, name, data, out_dtype, dtype=None):
    x = module.tensor(data)
    out = module.empty(0, dtype=getattr(module, out_dtype))
    kwargs = {} if dtype is None else {"dtype": getattr(module, dtype)}
    try:
        return CALLS[name](module, x, out=out, **kwargs), None
    except Exception as e:              # noqa: BLE001 - compared with torch's
        return None, e


def _compare(name, data, out_dtype, dtype=None):
    ours, our_error = _run(ember, name, data, out_dtype, dtype)
    theirs, their_error = _run(torch, name, data, out_dtype, dtype)
    assert type(our_error) is type(their_error), (our_error, their_error)
    if their_error is not None:
        assert str(our_error) == str(their_error).split("\n")[0]
        return
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    expected = theirs.to(torch.complex128 if theirs.is_complex() else torch.float64).numpy()
    got = np.asarray(ours.to(ember.complex128 if ours.is_complex() else ember.float64)
                     .tolist())
    rtol = RTOL.get(out_dtype, 0)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * 1e-3)


@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("name", CALLS)
def test_out_dtype_sets_the_compute_dtype(name, kind, out_dtype):
    if name in ("prod", "cumprod") and kind == "wide" and out_dtype in ("float16", "bfloat16"):
        pytest.skip("torch multiplies 16-bit values with 16-bit rounding at each step")
    _compare(name, INPUTS[kind], out_dtype)


@pytest.mark.parametrize("out_dtype", ("int64", "float16", "float64"))
@pytest.mark.parametrize("dtype", ("int64", "float16", "float64"))
@pytest.mark.parametrize("name", WITH_DTYPE)
def test_dtype_and_out_together(name, dtype, out_dtype):
    _compare(name, INPUTS["float"], out_dtype, dtype=dtype)
