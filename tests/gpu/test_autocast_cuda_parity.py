"""CUDA autocast against PyTorch's on the same GPU: every OpInfo sample (float32, float16
autocast) gives the result dtypes (or the error type) torch's CUDA autocast gives, which
checks ember's CUDA op lists (ember/amp/_policy.py) by construction, as
tests/parity/test_parity_autocast_ops.py does for the CPU's. Runs only where both libraries
see a GPU (the borrowed machine's run_gpu_checks.sh); skipped elsewhere."""

import warnings

import pytest

import ember
from tests.gpu.test_opinfo_cuda import _to_cuda
from tests.ops.opdb import OPDB
from tests.ops.opdb.core import replace_tensors, tensor_args

pytestmark = pytest.mark.cuda
torch = pytest.importorskip("torch")
if not (torch.cuda.is_available() and ember.cuda.is_available()):
    pytest.skip("needs a GPU seen by both torch and ember", allow_module_level=True)

from tests.parity.test_parity_ops import _as_tuple, compared, to_torch, torch_function  # noqa

_STAND_INS = {"_along_dims"}        # the OpInfo's torch call is a stand-in (see the CPU test)
_SAMPLES_PER_OP = 2


def _run(lib, fn, sample):
    """Result dtype names of ``fn(sample)`` under ``lib``'s CUDA autocast, or the error type."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with lib.autocast("cuda", dtype=lib.float16):
                out = _as_tuple(fn(sample[0], *sample[1], **sample[2]))
    except Exception as e:          # noqa: BLE001 (both libraries must raise the same type)
        return type(e).__name__
    return [str(o.dtype).split(".")[-1] if hasattr(o, "dtype") else type(o).__name__
            for o in out]


def _torch_cuda(x):
    if isinstance(x, torch.Tensor):
        return x.cuda()
    if isinstance(x, (list, tuple)):
        return type(x)(_torch_cuda(y) for y in x)
    if isinstance(x, dict):
        return {k: _torch_cuda(v) for k, v in x.items()}
    return x


@pytest.mark.parametrize("info", [pytest.param(i, id=i.name) for i in OPDB
                                  if compared(i) and i.name not in _STAND_INS
                                  and ember.float32 in i.dtypes and "cuda" not in i.skips])
def test_cuda_autocast_dtypes_match_torch(info):
    fn = torch_function(info)
    if fn is None:
        pytest.skip(f"torch has no {info.name}")
    ember.manual_seed(0)
    for sample in list(info.sample_inputs(ember.float32, False))[:_SAMPLES_PER_OP]:
        theirs = _run(torch, fn, _torch_cuda(to_torch((sample.input, sample.args,
                                                        sample.kwargs))))
        moved = replace_tensors(sample, [_to_cuda(t) for t in tensor_args(sample)])
        ours = _run(ember, info.function(), (moved.input, moved.args, moved.kwargs))
        assert ours == theirs, sample
