"""An LSTM with projections on a padded float32 sequence warns once, as PyTorch's CPU LSTM
does when it passes on oneDNN (which has no projection kernel); oneDNN's TF32 flag reads None
and warns when set (a PyTorch CPU build's behaviour)."""

import warnings

import pytest

import ember

MESSAGE = "LSTM with projections is not supported with oneDNN. Using default implementation."


def _caught(f):
    was = ember.is_warn_always_enabled()
    ember.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f()
    finally:
        ember.set_warn_always(was)
    return [str(w.message) for w in caught]


def test_projected_lstm_warns_on_padded_float32():
    m = ember.nn.LSTM(2, 4, proj_size=3)
    assert _caught(lambda: m(ember.ones(3, 1, 2))) == [MESSAGE]
    out, (h, c) = m(ember.ones(3, 1, 2))
    assert out.shape == (3, 1, 3) and h.shape == (1, 1, 3) and c.shape == (1, 1, 4)


@pytest.mark.parametrize("run", [
    lambda: ember.nn.LSTM(2, 4)(ember.ones(3, 1, 2)),
    lambda: ember.nn.LSTM(2, 4, proj_size=3).double()(ember.ones(3, 1, 2, dtype=ember.float64)),
    lambda: ember.nn.LSTM(2, 4, proj_size=3)(ember.nn.utils.rnn.pack_sequence(
        [ember.ones(2, 2), ember.ones(1, 2)])),
    lambda: ember.nn.LSTMCell(2, 4)(ember.ones(3, 2)),
], ids=["no_projection", "float64", "packed", "cell"])
def test_no_warning_off_the_onednn_path(run):
    assert _caught(run) == []


def test_no_warning_with_mkldnn_disabled():
    m = ember.nn.LSTM(2, 4, proj_size=3)
    with ember.backends.mkldnn.flags(enabled=False):
        assert _caught(lambda: m(ember.ones(3, 1, 2))) == []


def test_mkldnn_allow_tf32_reads_none_and_warns_when_set():
    mk = ember.backends.mkldnn
    assert mk.allow_tf32 is None
    caught = _caught(lambda: setattr(mk, "allow_tf32", True))
    assert len(caught) == 1 and caught[0].startswith("TF32 acceleration on top of oneDNN")
    assert mk.allow_tf32 is None
    with pytest.raises(RuntimeError, match="_set_onednn_allow_tf32 expects a bool, but got int"):
        mk.allow_tf32 = 1


def test_mkldnn_set_flags_returns_previous():
    mk = ember.backends.mkldnn
    try:
        assert mk.set_flags(False) == (True, False, None, "none")
        assert mk.enabled is False
    finally:
        mk.enabled = True
    with mk.flags(fp32_precision="tf32"):
        assert mk.fp32_precision == "tf32" and mk.enabled is False
    assert mk.fp32_precision == "none" and mk.enabled is True
