"""Every OpInfo sample run under ``autocast("cpu")`` in both libraries: the same result
dtypes (or the same error), and values as close as the autocast dtype allows. This checks
ember's autocast policy (ember/amp/_policy.py) against PyTorch's op lists by construction."""

import warnings

import numpy as np
import pytest

import ember
from tests.ops.opdb import OPDB
from tests.parity.test_parity_ops import (_as_tuple, assert_matches, compared, to_numpy,
                                          to_torch, torch_function)

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

# ops whose torch counterpart in the OpInfo is a stand-in, not PyTorch's own kernel:
# the stand-in's matmul is cast where the real op (adaptive pooling) is not
_STAND_INS = {"_along_dims"}

# the tolerance of each autocast dtype, relative to the result's largest magnitude: the
# operands are rounded, and oneDNN accumulates some products partly in the low dtype
_TOLERANCE = {"bfloat16": (3.2e-2, 2e-2), "float16": (4e-3, 2e-3)}
_SAMPLES_PER_OP = 3


def _cases():
    for info in OPDB:
        if compared(info) and info.name not in _STAND_INS and ember.float32 in info.dtypes:
            yield pytest.param(info, id=info.name)


def _run(lib, fn, autocast_dtype, sample):
    """The outputs of ``fn`` on ``sample`` under ``lib``'s CPU autocast, or the error type."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with lib.autocast("cpu", dtype=getattr(lib, autocast_dtype)):
                return _as_tuple(fn(*sample))
    except Exception as e:          # noqa: BLE001 (both libraries must raise the same type)
        return type(e).__name__


def _dtype_names(outputs):
    if isinstance(outputs, str):
        return outputs
    return [str(o.dtype).split(".")[-1] if hasattr(o, "dtype") else type(o).__name__
            for o in outputs]


@pytest.mark.parametrize("autocast_dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("info", list(_cases()))
def test_autocast_parity(info, autocast_dtype):
    """float32 and float64 samples: result dtypes (or errors) and values match torch's."""
    fn = torch_function(info)
    if fn is None:
        pytest.skip(f"torch has no {info.name}")
    for dtype in (ember.float32, ember.float64):
        if dtype not in info.dtypes:
            continue
        ember.manual_seed(0)
        for sample in list(info.sample_inputs(dtype, False))[:_SAMPLES_PER_OP]:
            theirs = _run(torch, lambda *a: fn(a[0], *a[1], **a[2]), autocast_dtype,
                          (to_torch(sample.input), to_torch(sample.args),
                           to_torch(sample.kwargs)))
            ours = _run(ember, lambda *a: info.function()(a[0], *a[1], **a[2]),
                        autocast_dtype, (sample.input, sample.args, sample.kwargs))
            assert _dtype_names(ours) == _dtype_names(theirs), (sample, dtype)
            if isinstance(ours, str) or info.name.startswith(("rand", "nn.functional.drop")):
                continue
            for o, t in zip(ours, theirs):
                if isinstance(t, torch.Tensor) and (t.dtype.is_floating_point
                                                     or t.dtype.is_complex):
                    expected = to_numpy(t)
                    rtol, atol = _TOLERANCE[autocast_dtype]
                    scale = max(1.0, float(np.nanmax(np.abs(expected), initial=0.0)))
                    assert_matches(o, expected, rtol, atol * scale, sample)
