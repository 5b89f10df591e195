"""What the round-31 discrete-diffusion, GFlowNet, retrieval, graph-pooling and learned-optimiser
programs (test_parity_programs_round31_gen*.py) found, pinned against PyTorch: an LSTM with
projections (the L2O optimisers' and ColBERT-style encoders' nn.LSTM(proj_size=...)) ran
silently where PyTorch's CPU LSTM picks oneDNN for the input (float32; bfloat16, and float16
without grad mode, where the CPU runs them) and warns once "LSTM with projections is not
supported with oneDNN. Using default implementation." (a padded input, the module or
torch.lstm; not a packed one, not float64, not with torch.backends.mkldnn disabled);
torch.backends.mkldnn.allow_tf32 read True/False where PyTorch's CPU build reads None and
warns at each set (set_flags was missing, flags() had no fp32_precision); and a read-only
NumPy array warned only through from_numpy, and only once even under set_warn_always, where
PyTorch warns from as_tensor, aliasing asarray, the legacy constructors and so from
default_collate too."""

import numpy as np
import pytest

import ember
from tests.parity._programs import warnings_of

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _lstm(lib, dtype="float32", proj=3, **kw):
    m = lib.nn.LSTM(2, 4, proj_size=proj, **kw).to(getattr(lib, dtype))
    return m, lib.ones(3, 1, 2, dtype=getattr(lib, dtype))


CASES = {
    "float32": lambda lib: _lstm(lib)[0](_lstm(lib)[1]),
    "unbatched_batch_first": lambda lib: _lstm(lib, batch_first=True)[0](lib.ones(3, 2)),
    "no_projection": lambda lib: _lstm(lib, proj=0)[0](_lstm(lib)[1]),
    "float64": lambda lib: _lstm(lib, "float64")[0](_lstm(lib, "float64")[1]),
    "bfloat16": lambda lib: _lstm(lib, "bfloat16")[0](_lstm(lib, "bfloat16")[1]),
    "float16_grad": lambda lib: _lstm(lib, "float16")[0](_lstm(lib, "float16")[1]),
    "float16_no_grad": lambda lib: _no_grad(lib, lambda: _lstm(lib, "float16")[0](
        _lstm(lib, "float16")[1])),
    "packed": lambda lib: _lstm(lib)[0](lib.nn.utils.rnn.pack_sequence(
        [lib.ones(2, 2), lib.ones(1, 2)])),
    "mkldnn_off": lambda lib: _mkldnn_off(lib, lambda: _lstm(lib)[0](_lstm(lib)[1])),
    "autocast_bf16": lambda lib: _autocast(lib, lambda: _lstm(lib)[0](_lstm(lib)[1])),
    "autocast_float64_input": lambda lib: _autocast(lib, lambda: _lstm(lib, "float64")[0](
        _lstm(lib, "float64")[1])),
    "lstm_cell": lambda lib: lib.nn.LSTMCell(2, 4)(lib.ones(3, 2)),
    "functional": lambda lib: _functional(lib),
    "bad_hidden_raises_first": lambda lib: _raises(lambda: _lstm(lib)[0](
        _lstm(lib)[1], (lib.zeros(1, 1, 4), lib.zeros(1, 1, 4)))),
}


def _no_grad(lib, f):
    with lib.no_grad():
        return f()


def _mkldnn_off(lib, f):
    with lib.backends.mkldnn.flags(enabled=False):
        return f()


def _autocast(lib, f):
    with lib.autocast("cpu", dtype=lib.bfloat16):
        return f()


def _raises(f):
    try:
        f()
    except RuntimeError:
        return None
    raise AssertionError("expected a RuntimeError")


def _functional(lib):
    m, x = _lstm(lib)
    return lib.lstm(x, (lib.zeros(1, 1, 3), lib.zeros(1, 1, 4)), m._flat_weights, True, 1, 0.0,
                    False, False, False)


@pytest.mark.parametrize("case", sorted(CASES))
def test_lstm_projection_onednn_warning_as_torchs(case):
    assert warnings_of(CASES[case], ember) == warnings_of(CASES[case], torch)


def test_lstm_projection_warning_wording():
    got = warnings_of(CASES["float32"], ember)
    assert got == [("UserWarning", "LSTM with projections is not supported with oneDNN. "
                                   "Using default implementation.")]


def test_lstm_projection_values_unchanged():
    """The warning changes nothing: the projected LSTM's outputs are still PyTorch's."""
    outs = []
    for lib in (ember, torch):
        m = lib.nn.LSTM(2, 4, proj_size=3, num_layers=2)
        with lib.no_grad():
            for i, p in enumerate(m.parameters()):
                p.copy_(lib.from_numpy(np.random.default_rng(i).standard_normal(
                    tuple(p.shape)).astype(np.float32) * 0.3))
        o, (h, c) = m(lib.from_numpy(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 2, 2)))
        outs.append([t.detach().numpy() for t in (o, h, c)])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# The mkldnn flags the LSTM cases above toggle: PyTorch's CPU build keeps no oneDNN TF32 value
# (allow_tf32 reads None) and warns each time it is set, by the attribute, set_flags or flags().
MKLDNN = {
    "set_true": "torch.backends.mkldnn.allow_tf32 = True",
    "set_false": "torch.backends.mkldnn.allow_tf32 = False",
    "flags_default": "with torch.backends.mkldnn.flags(): pass",
    "flags_off": "with torch.backends.mkldnn.flags(enabled=False, allow_tf32=False): pass",
    "set_flags": "r.append(torch.backends.mkldnn.set_flags(True, False, True))",
    "set_flags_no_tf32": "r.append(torch.backends.mkldnn.set_flags(True))",
    "read": "r.append(torch.backends.mkldnn.allow_tf32)",
    "fp32_block": "with torch.backends.mkldnn.flags(fp32_precision='tf32'):\n"
                  "    r.append(torch.backends.mkldnn.fp32_precision)\n"
                  "r.append(torch.backends.mkldnn.fp32_precision)",
    "bad_type": "torch.backends.mkldnn.allow_tf32 = 1",
}


def _mkldnn(lib, code):
    r = []
    saved = (lib.backends.mkldnn.enabled, lib.backends.mkldnn.fp32_precision)
    try:
        exec(code, {"torch": lib, "r": r})
    except RuntimeError as e:
        r.append(str(e))
    finally:
        lib.backends.mkldnn.enabled, lib.backends.mkldnn.fp32_precision = saved
    return r


@pytest.mark.parametrize("case", sorted(MKLDNN))
def test_mkldnn_flags_as_torchs(case):
    code = MKLDNN[case]
    assert _mkldnn(ember, code) == _mkldnn(torch, code)
    assert warnings_of(lambda lib: _mkldnn(lib, code), ember) == \
        warnings_of(lambda lib: _mkldnn(lib, code), torch)


# Read-only NumPy arrays (np.broadcast_to outputs, frombuffer views, arrays a retrieval index
# memory-maps or freezes) turned into tensors: PyTorch warns (once per program; each time under
# set_warn_always) from from_numpy, as_tensor (even when it converts), an aliasing asarray, the
# legacy constructors and Tensor.new, hence from default_collate and default_convert too, and
# not from the copying tensor(), new_tensor() or asarray(dtype=...). ember warned from
# from_numpy alone, once, even under set_warn_always.
def _frozen():
    a = np.arange(3.0)
    a.flags.writeable = False
    return a


READ_ONLY = {
    "from_numpy": lambda lib: lib.from_numpy(_frozen()),
    "broadcast_to": lambda lib: lib.from_numpy(np.broadcast_to(np.arange(3.0), (2, 3))),
    "as_tensor": lambda lib: lib.as_tensor(_frozen()),
    "as_tensor_converting": lambda lib: lib.as_tensor(_frozen(), dtype=lib.float32),
    "as_tensor_meta": lambda lib: lib.as_tensor(_frozen(), device="meta"),
    "asarray": lambda lib: lib.asarray(_frozen(), requires_grad=True),
    "asarray_converting": lambda lib: lib.asarray(_frozen(), dtype=lib.float32),
    "asarray_copy": lambda lib: lib.asarray(_frozen(), copy=True),
    "tensor": lambda lib: lib.tensor(_frozen()),
    "Tensor": lambda lib: lib.Tensor(_frozen()),
    "LongTensor": lambda lib: lib.LongTensor(_frozen()),
    "new": lambda lib: lib.ones(1).new(_frozen()),
    "new_tensor": lambda lib: lib.ones(1).new_tensor(_frozen()),
    "default_collate": lambda lib: lib.utils.data.default_collate([_frozen(), _frozen()]),
    "default_convert": lambda lib: lib.utils.data.default_convert({"x": _frozen()}),
}


@pytest.mark.parametrize("case", sorted(READ_ONLY))
def test_read_only_numpy_warning_as_torchs(case):
    assert warnings_of(READ_ONLY[case], ember) == warnings_of(READ_ONLY[case], torch)
    ours, theirs = READ_ONLY[case](ember), READ_ONLY[case](torch)
    ours, theirs = (ours["x"], theirs["x"]) if isinstance(ours, dict) else (ours, theirs)
    assert ours.shape == theirs.shape and str(ours.dtype)[6:] == str(theirs.dtype)[6:]
