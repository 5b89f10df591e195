"""The switches and helpers of ember.backends / ember.cuda that answer differently with a
GPU: bfloat16 support, memory statistics under PyTorch's names, the amp aliases enabled."""

import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F

pytestmark = pytest.mark.cuda

_KEYS = ["allocated_bytes.all.current", "allocated_bytes.all.peak",
         "reserved_bytes.all.current", "reserved_bytes.all.peak"]


def test_bf16_support_follows_the_compute_capability():
    major = ember.cuda.get_device_capability()[0]
    assert ember.cuda.is_bf16_supported() is True
    assert ember.cuda.is_bf16_supported(including_emulation=False) is (major >= 8)
    assert ember.backends.cuda.is_built() is True


def test_memory_stats_track_current_and_peak_usage():
    ember.ones(1, device="cuda")                # the backend is loaded
    ember.cuda.empty_cache()
    ember.cuda.reset_peak_memory_stats()
    base = ember.cuda.memory_stats()
    assert list(base) == _KEYS and all(isinstance(v, int) for v in base.values())
    big = ember.empty(2 ** 22, device="cuda")           # 16 MiB
    stats = ember.cuda.memory_stats(0)
    assert stats["allocated_bytes.all.current"] >= base["allocated_bytes.all.current"] + 2 ** 24
    assert stats["reserved_bytes.all.current"] >= stats["allocated_bytes.all.current"]
    peak_reserved = stats["reserved_bytes.all.current"]
    del big
    ember.cuda.empty_cache()                            # reserved memory drops; its peak stays
    after = ember.cuda.memory_stats("cuda:0")
    assert after["reserved_bytes.all.current"] < peak_reserved
    assert after["reserved_bytes.all.peak"] == ember.cuda.max_memory_reserved() >= peak_reserved
    assert after["allocated_bytes.all.peak"] == ember.cuda.max_memory_allocated() >= 2 ** 24
    ember.cuda.reset_peak_memory_stats()
    assert ember.cuda.max_memory_reserved() == ember.cuda.memory_reserved()
    with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
        ember.cuda.memory_stats("cpu")


def test_memory_summary_shows_the_stats():
    keep = ember.empty(2 ** 20, device="cuda")          # 4 MiB
    summary = ember.cuda.memory_summary()
    assert "device ID 0" in summary and "MiB" in summary
    del keep


def test_the_amp_aliases_are_enabled_with_cuda():
    a = ember.ones(4, 4, device="cuda")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        context = ember.cuda.amp.autocast()
        scaler = ember.cuda.amp.GradScaler(init_scale=4.0)
    assert [w.category for w in caught] == [FutureWarning, FutureWarning]
    with context:
        assert ember.is_autocast_enabled("cuda") and (a @ a).dtype == ember.float16
    assert scaler.is_enabled() and scaler.scale(a.sum()).item() == 64.0


def _tf32_now():
    gemm = ember.backend.cuda_backend()._GEMM
    return gemm.get_compute_type(np.float32) == gemm.COMPUTE_TYPE_TF32


def test_float32_matmuls_use_tf32_only_when_their_precision_allows():
    ember.ones(1, device="cuda")
    assert ember.get_float32_matmul_precision() == "highest" and not _tf32_now()
    try:
        ember.set_float32_matmul_precision("high")
        assert _tf32_now()
        ember.backends.cuda.matmul.allow_tf32 = False
        assert not _tf32_now() and ember.get_float32_matmul_precision() == "highest"
        ember.backends.cuda.matmul.allow_tf32 = True
        assert _tf32_now()
    finally:
        ember.set_float32_matmul_precision("highest")
    assert not _tf32_now()


def _record_tf32(monkeypatch, seen, module, names):
    """Make each call of ``module``'s functions ``names`` note in ``seen`` whether TF32 was
    on."""
    for name in names:
        real = getattr(module, name)

        def recording(*args, real=real, **kwargs):
            seen.append(_tf32_now())
            return real(*args, **kwargs)
        monkeypatch.setattr(module, name, recording)


@pytest.mark.parametrize("allow", [True, False])
def test_convolutions_and_recurrent_layers_use_tf32_as_cudnn_allows(monkeypatch, allow):
    import ember.ops._rnn_kernels as rnn
    import ember.ops.conv as conv
    seen = []
    _record_tf32(monkeypatch, seen, conv, ("conv_forward", "conv_input_grad",
                                           "conv_weight_grad"))
    _record_tf32(monkeypatch, seen, rnn, ("lstm_forward", "lstm_backward"))
    x = ember.randn(2, 3, 8, 8, device="cuda", requires_grad=True)
    w = ember.randn(4, 3, 3, 3, device="cuda", requires_grad=True)
    lstm = ember.nn.LSTM(4, 5).cuda()
    with ember.backends.cudnn.flags(enabled=True, allow_tf32=allow):
        F.conv2d(x, w, padding=1).sum().backward()
        lstm(ember.randn(3, 2, 4, device="cuda"))[0].sum().backward()
    # the forwards and gradients of both, each under the switch; and then restored
    assert seen == [allow] * 3 + [allow] * 2 and not _tf32_now()


def test_tf32_convolutions_stay_close_to_full_precision():
    if ember.backend.cuda_backend().cupy.__version__ == "fake":
        pytest.skip("the CuPy stand-in has no TF32")
    x, w = ember.randn(8, 64, 16, 16), ember.randn(64, 64, 3, 3)
    want = F.conv2d(x, w, padding=1)
    full = F.conv2d(x.cuda(), w.cuda(), padding=1).cpu()
    with ember.backends.cudnn.flags(enabled=True, allow_tf32=True):
        fast = F.conv2d(x.cuda(), w.cuda(), padding=1).cpu()
    scale = want.abs().max().item()
    assert (full - want).abs().max().item() < 1e-5 * scale
    assert 1e-6 * scale < (fast - want).abs().max().item() < 1e-2 * scale     # TF32 differs
