"""The fp32_precision settings of ember.backends (PyTorch's newer TF32 API)."""

import pytest

import ember
from ember import backends
from ember.backends import _fp32_precision, _precision


@pytest.fixture(autouse=True)
def restore_switches():
    """Every test leaves the process-wide switches as it found them."""
    saved = [dict(state) for state in (_fp32_precision._STATE, _precision._STATE,
                                       backends.cudnn._FLAGS)]
    yield
    for live, old in zip((_fp32_precision._STATE, _precision._STATE, backends.cudnn._FLAGS),
                         saved):
        live.clear()
        live.update(old)


def levels():
    b = backends
    return (b.fp32_precision, b.cuda.matmul.fp32_precision, b.cudnn.fp32_precision,
            b.cudnn.conv.fp32_precision, b.cudnn.rnn.fp32_precision, b.mkldnn.fp32_precision,
            b.mkldnn.matmul.fp32_precision, b.mkldnn.conv.fp32_precision,
            b.mkldnn.rnn.fp32_precision)


def test_defaults_and_setting_one_level():
    assert levels() == ("none", "none", "none", "tf32", "tf32", "none", "none", "none", "none")
    backends.cuda.matmul.fp32_precision = "tf32"
    assert levels()[:3] == ("none", "tf32", "none")
    backends.cuda.matmul.fp32_precision = "none"
    assert levels()[1] == "none"


def test_a_level_sets_the_levels_under_it():
    backends.fp32_precision = "ieee"
    assert set(levels()) == {"ieee"}
    backends.cudnn.fp32_precision = "tf32"
    assert levels()[1:5] == ("tf32",) * 4 and levels()[5:] == ("ieee",) * 4
    backends.mkldnn.matmul.fp32_precision = "bf16"
    assert levels()[5:7] == ("ieee", "bf16")


def test_the_matmul_and_conv_levels_drive_the_tf32_flags():
    backends.cuda.matmul.fp32_precision = "tf32"
    assert backends.cuda.matmul.allow_tf32 and ember.get_float32_matmul_precision() == "high"
    backends.cuda.matmul.fp32_precision = "ieee"
    assert not backends.cuda.matmul.allow_tf32
    backends.cudnn.conv.fp32_precision = "ieee"
    assert backends.cudnn.allow_tf32 is False
    backends.cudnn.fp32_precision = "tf32"
    assert backends.cudnn.allow_tf32 is True and backends.cuda.matmul.allow_tf32


def test_the_legacy_setters_show_in_fp32_precision():
    ember.set_float32_matmul_precision("medium")
    assert (backends.cuda.matmul.fp32_precision, backends.mkldnn.matmul.fp32_precision) == \
        ("tf32", "bf16")
    ember.set_float32_matmul_precision("highest")
    assert (backends.cuda.matmul.fp32_precision, backends.mkldnn.matmul.fp32_precision) == \
        ("ieee", "ieee")
    backends.cuda.matmul.allow_tf32 = True
    assert backends.cuda.matmul.fp32_precision == "tf32"


def test_none_inherits_the_level_above():
    backends.fp32_precision = "tf32"
    backends.cuda.matmul.fp32_precision = "none"
    assert backends.cuda.matmul.fp32_precision == "none" and backends.cuda.matmul.allow_tf32


def test_bad_values_raise_pytorchs_errors():
    with pytest.raises(RuntimeError, match="backend 'cuda' does not support precision 'bf16'"):
        backends.cuda.matmul.fp32_precision = "bf16"
    with pytest.raises(RuntimeError, match="Unknown precision: IEEE"):
        backends.cudnn.conv.fp32_precision = "IEEE"
    with pytest.raises(TypeError):
        backends.mkldnn.fp32_precision = 1
    backends.fp32_precision = "bf16"                   # CUDA levels have no bf16: "none"
    assert levels() == ("bf16", "none", "none", "none", "none", "bf16", "bf16", "bf16", "bf16")
