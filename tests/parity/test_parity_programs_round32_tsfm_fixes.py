"""What the time-series foundation-model programs of round 32
(test_parity_programs_round32_tsfm*.py: Chronos, Chronos-Bolt, Lag-Llama, TimesFM, Moirai,
TabPFN) found, each pinned against PyTorch. Chronos clamps its token ids in place
(``token_ids.clamp_(0, n_tokens - 1)``); given a float bound on an integer tensor, PyTorch's
number-bound clamp kernels refuse the cast naming self's C++ type ("... desired output type
long int"), where ember printed the dtype ("Long") as the common in-place check does (and as
PyTorch still does for tensor bounds)."""

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_DTYPES = ["int64", "int32", "int16", "int8", "uint8", "bool"]
_CALLS = {
    "clamp_": lambda t, lib: t.clamp_(0.5, 2),
    "clamp_min_only": lambda t, lib: t.clamp_(min=0.5),
    "clamp_int_lo_float_hi": lambda t, lib: t.clamp_(0, 2.5),
    "clamp_min_": lambda t, lib: t.clamp_min_(0.5),
    "clamp_max_": lambda t, lib: t.clamp_max_(2.5),
    "clip_": lambda t, lib: t.clip_(0.5, 2.0),
    "function_clamp_": lambda t, lib: lib.clamp_(t, 0.5, 2),
    "tensor_bound": lambda t, lib: t.clamp_(lib.tensor([0.5, 0.5])),
    "zero_dim_bound": lambda t, lib: t.clamp_min_(lib.tensor(0.5)),
}


def _error(lib, dtype, call):
    t = lib.tensor([1, 5]).to(getattr(lib, dtype))
    try:
        _CALLS[call](t, lib)
    except RuntimeError as e:
        return str(e)
    return t.tolist()


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("call", list(_CALLS))
def test_inplace_clamp_cast_error_names_like_torch(call, dtype):
    assert _error(ember, dtype, call) == _error(torch, dtype, call)
