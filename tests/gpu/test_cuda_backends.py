"""The switches and helpers of ember.backends / ember.cuda that answer differently with a
GPU: bfloat16 support, memory statistics under PyTorch's names, the amp aliases enabled."""

import warnings

import pytest

import ember

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
