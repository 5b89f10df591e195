"""The OpInfo database run on the GPU: every sample is moved to CUDA and each op's forward
values, result dtype, gradients and error types must match those of the same call on the
CPU (the CPU results are checked against NumPy references by tests/ops/test_opinfo.py).

EMBER_CUDA_OPINFO_DTYPES (comma-separated names, default "float32,float64") picks the dtypes
of the forward checks, to fit the GPU machine's time; "all" runs every dtype an entry lists.
EMBER_CUDA_OPINFO_DEVICE (default "cuda") picks the GPU: "cuda:1" runs every op on a GPU that
is not the current one (the stand-in has two).
"""

import os
import warnings

import numpy as np
import pytest

import ember
from ember._storage_place import _storage_root
from ember._tensor import _make
from ember.backend import xp_of
from ember.testing import assert_close

from tests.ops.opdb import OPDB
from tests.ops.opdb.core import replace_tensors, tensor_args

pytestmark = pytest.mark.cuda

_NAMES = os.environ.get("EMBER_CUDA_OPINFO_DTYPES", "float32,float64")
_DEVICE = ember.device(os.environ.get("EMBER_CUDA_OPINFO_DEVICE", "cuda"))


def _on_the_gpu(t):
    return t.device.type == "cuda" and _DEVICE.index in (None, t.device.index)


def _wanted(dtype):
    return _NAMES == "all" or dtype.name in _NAMES.split(",")


# "cuda": ops whose samples carry backend arrays made on the CPU (_sampled's drawn sample)
FORWARD = [pytest.param(info, d, id=f"{info.name}-{d.name}") for info in OPDB
           if not {"forward", "cuda"} & set(info.skips) for d in info.dtypes if _wanted(d)]
GRAD = [pytest.param(info, id=info.name) for info in OPDB
        if not {"grad", "cuda"} & set(info.skips) and info.grad and ember.float64 in info.dtypes]
ERRORS = [pytest.param(info, id=info.name) for info in OPDB
          if "errors" not in info.skips and info.error_inputs is not None]


def _to_cuda(t):
    """``t`` on the GPU with its layout: a view keeps its strides and storage offset (over a
    copy of the memory it views), as ops that check layouts (view_as_complex) need."""
    requires_grad, t = t.requires_grad, t.detach()
    if t.numel() and (not t.is_contiguous() or t.storage_offset()):
        owner = _storage_root(t)._data                 # the base, or what t was detached from
        offset, item = t.storage_offset(), owner.itemsize
        span = offset + 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
        memory = np.lib.stride_tricks.as_strided(owner, (span,), (item,))   # in memory order
        device = ember.from_numpy(memory.copy()).to(_DEVICE)._data
        moved = _make(xp_of(device).lib.stride_tricks.as_strided(
            device[offset:], tuple(t.shape), tuple(s * item for s in t.stride())))
    else:
        moved = t.to(_DEVICE)
    return moved.requires_grad_(requires_grad)


def _samples(info, dtype, grad=False):
    ember.manual_seed(0)
    make = info.grad_samples if grad and info.grad_samples else info.sample_inputs
    return list(make(dtype, grad))


def _on_cuda(sample):
    return replace_tensors(sample, [_to_cuda(t) for t in tensor_args(sample)])


def _run(info, sample):
    ember.manual_seed(1)                            # random ops draw the same numbers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = info.function()(sample.input, *sample.args, **sample.kwargs)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _tolerance(info, dtype):
    return info.tol.get(dtype) or {ember.float16: (1e-3, 1e-3), ember.bfloat16: (1.6e-2, 1e-2),
                                   ember.float32: (1.3e-5, 1e-5),
                                   ember.complex64: (1.3e-5, 1e-5)}.get(dtype, (1e-7, 1e-7))


def _compare(got, want, sample, rtol, atol):
    assert len(got) == len(want), f"{sample}: {len(got)} results, on the CPU {len(want)}"
    for g, w in zip(got, want):
        if not isinstance(w, ember.Tensor):
            assert g == w, f"{sample}: {g!r} != {w!r}"
            continue
        assert _on_the_gpu(g), f"{sample}: result on {g.device}"
        assert g.dtype is w.dtype, f"{sample}: dtype {g.dtype}, on the CPU {w.dtype}"
        assert tuple(g.shape) == tuple(w.shape), f"{sample}: shape {g.shape} != {w.shape}"
        assert_close(g.detach().cpu(), w.detach(), rtol=rtol, atol=atol, equal_nan=True,
                     msg=lambda m: f"{sample}:\n{m}")


# ops whose kernels multiply bfloat16 blocks with tl.dot (natively, summing in float32)
_BFLOAT16_PRODUCTS = {"nn.functional.scaled_dot_product_attention", "convolution", "conv1d",
                      "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                      "conv_transpose3d"}


@pytest.mark.parametrize("info,dtype", FORWARD)
def test_forward_matches_cpu(info, dtype):
    if (info.name in _BFLOAT16_PRODUCTS and dtype is ember.bfloat16
            and os.environ.get("TRITON_INTERPRET") == "1"):
        pytest.skip("Triton 3.9's interpreter multiplies bfloat16 matrices wrongly")
    rtol, atol = _tolerance(info, dtype)
    for sample in _samples(info, dtype):
        _compare(_run(info, _on_cuda(sample)), _run(info, sample), sample, rtol, atol)


@pytest.mark.parametrize("info", GRAD)
def test_gradients_match_cpu(info):
    for sample in _samples(info, ember.float64, grad=True):
        inputs = [t for t in tensor_args(sample) if t.requires_grad]
        if not inputs:
            continue
        moved = _on_cuda(sample)
        grads = []
        for s in (sample, moved):
            outs = [o for o in _run(info, s)
                    if isinstance(o, ember.Tensor) and o.requires_grad]
            if not outs:
                assert not grads, f"{sample}: no differentiable output on CUDA"
                break
            ember.manual_seed(2)
            cots = [ember.randn(o.shape, dtype=o.dtype).to(o.device) for o in outs]
            leaves = [t for t in tensor_args(s) if t.requires_grad]
            grads.append(ember.autograd.grad(outs, leaves, cots, allow_unused=True))
        if len(grads) < 2:
            continue
        want, got = grads
        for g, w in zip(got, want):
            if w is None:
                assert g is None, f"{sample}: a gradient on CUDA, none on the CPU"
                continue
            assert _on_the_gpu(g), f"{sample}: gradient on {g.device}"
            assert_close(g.cpu(), w, rtol=1e-7, atol=1e-7, msg=lambda m: f"{sample}:\n{m}")


def _drop_deferred_checks():
    """Forget the checks a previous error input queued on the device: an op that raised on
    the host after queueing one leaves it behind (as a device-side assert in PyTorch would
    fail a later call)."""
    ember.backend.cuda_backend()._DEFERRED.clear()


@pytest.mark.parametrize("info", ERRORS)
def test_errors_match_cpu(info):
    for err in info.error_inputs():
        if err.unsupported or err.cpu_only:
            continue
        _drop_deferred_checks()
        with pytest.raises(err.error_type, match=err.match):
            _run(info, _on_cuda(err.sample))
            ember.cuda.synchronize()    # checks on device values report here (deferred)
