"""ember.backends, the float32 matmul precision, the amp aliases and the ember.cuda helpers
against PyTorch's answers on a machine without CUDA. Skipped when PyTorch is not installed."""

import warnings

import pytest

import ember
from ember.backends import _fp32_precision, _precision
from tests.parity._compare import ok, recorded

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.parity,
              pytest.mark.skipif(torch.cuda.is_available() or ember.cuda.is_available(),
                                 reason="compares the answers without CUDA")]

_CUDNN = ["enabled", "benchmark", "deterministic", "allow_tf32"]
_MATMUL = ["allow_tf32", "allow_fp16_reduced_precision_reduction",
           "allow_bf16_reduced_precision_reduction", "allow_fp16_accumulation"]
_SDP = ["flash", "mem_efficient", "math", "cudnn"]


def _state(lib):
    b = lib.backends
    return {"cudnn": [getattr(b.cudnn, n) for n in _CUDNN],
            "matmul": [getattr(b.cuda.matmul, n) for n in _MATMUL],
            "precision": lib.get_float32_matmul_precision(),
            "sdp": [getattr(b.cuda, f"{k}_sdp_enabled")() for k in _SDP],
            "math_reduction": b.cuda.fp16_bf16_reduction_math_sdp_allowed()}


@pytest.fixture(autouse=True)
def restore_both():
    saved = {lib: _state(lib) for lib in (torch, ember)}
    saved_precision = dict(_precision._STATE)
    saved_fp32 = dict(_fp32_precision._STATE)
    yield
    for lib, state in saved.items():
        b = lib.backends
        lib.set_float32_matmul_precision(state["precision"])
        for name, value in zip(_CUDNN, state["cudnn"]):
            setattr(b.cudnn, name, value)
        for name, value in zip(_MATMUL[1:], state["matmul"][1:]):
            setattr(b.cuda.matmul, name, value)
        for kind, value in zip(_SDP, state["sdp"]):
            getattr(b.cuda, f"enable_{kind}_sdp")(value)
        b.cuda.allow_fp16_bf16_reduction_math_sdp(state["math_reduction"])
    _precision._STATE.update(saved_precision)
    _fp32_precision._STATE.update(saved_fp32)


def _outcome(call):
    """(result or exception type and message, [(warning category, message)])."""
    return recorded(call, describe=ok)


def test_defaults_and_queries_match():
    assert _state(ember) == _state(torch)
    for lib in (torch, ember):
        b = lib.backends
        answers = [b.cudnn.is_available(), b.cudnn.version(), b.cudnn.benchmark_limit,
                   b.cuda.is_built(), b.mps.is_available(), b.mps.is_built(),
                   b.cpu.get_cpu_capability(), lib.cpu.is_available(),
                   lib.cpu.device_count(), lib.cpu.current_device()]
        if lib is torch:
            theirs = answers
    assert answers == theirs


@pytest.mark.parametrize("steps", [
    [("precision", "high")], [("precision", "medium")],
    [("precision", "high"), ("precision", "highest")],
    [("precision", "medium"), ("precision", "high")],
    [("allow_tf32", True)], [("allow_tf32", True), ("allow_tf32", False)],
    [("precision", "high"), ("precision", "low")],
])
def test_precision_and_allow_tf32_move_together(steps):
    for lib in (torch, ember):
        for kind, value in steps:
            if kind == "precision":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    lib.set_float32_matmul_precision(value)
            else:
                lib.backends.cuda.matmul.allow_tf32 = value
    assert _state(ember) == _state(torch)


def test_an_unknown_precision_warns_alike():
    (ours, [(category, message)]), (theirs, [(t_category, t_message)]) = (
        _outcome(lambda: lib.set_float32_matmul_precision("low")) for lib in (ember, torch))
    assert ours == theirs == ("ok", None) and category == t_category == "UserWarning"
    assert message.startswith("low is not one of 'highest', 'high', or 'medium'; the current")
    assert t_message.startswith("low is not one of 'highest', 'high', or 'medium'; the current")
    assert message.endswith("call has no effect.")


@pytest.mark.parametrize("assign", [
    lambda lib: lib.set_float32_matmul_precision(3),
    lambda lib: setattr(lib.backends.cudnn, "benchmark", 1),
    lambda lib: setattr(lib.backends.cudnn, "deterministic", "yes"),
    lambda lib: setattr(lib.backends.cudnn, "enabled", None),
    lambda lib: setattr(lib.backends.cuda.matmul, "allow_tf32", 1),
    lambda lib: setattr(lib.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction", 1),
    lambda lib: setattr(lib.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction",
                        (True, False)),
    lambda lib: setattr(lib.backends.cuda.matmul, "allow_everything", True),
    lambda lib: lib.backends.cuda.matmul.allow_everything,
    lambda lib: lib.backends.cuda.enable_flash_sdp(0),
    lambda lib: lib.backends.cuda.enable_math_sdp("x"),
    lambda lib: lib.backends.cuda.allow_fp16_bf16_reduction_math_sdp(1),
], ids=["precision", "benchmark", "deterministic", "enabled", "tf32", "fp16", "splitk",
        "unknown-set", "unknown-get", "flash", "math", "math-reduction"])
def test_bad_values_fail_alike(assign):
    (ours, _), (theirs, _) = (_outcome(lambda: assign(lib)) for lib in (ember, torch))
    assert ours[0] == theirs[0]
    tail = theirs[1].split(" but got ")[-1] if "expects a" in theirs[1] else theirs[1]
    assert ours[1].endswith(tail)                       # the C++ setter names may differ
    assert _state(ember) == _state(torch)


def test_cudnn_flags_context_matches():
    seen = {}
    for lib in (torch, ember):
        lib.backends.cudnn.benchmark = True
        with lib.backends.cudnn.flags() as inside:
            seen[lib] = [inside, _state(lib)]
        with lib.backends.cudnn.flags(enabled=True, deterministic=True, allow_tf32=False):
            seen[lib].append(_state(lib))
        seen[lib].append(_state(lib))
    assert seen[ember] == seen[torch]


def test_sdp_kernel_matches():
    seen = {}
    for lib in (torch, ember):
        lib.backends.cuda.enable_cudnn_sdp(False)
        made, caught = _outcome(lambda: lib.backends.cuda.sdp_kernel(enable_flash=False,
                                                                     enable_cudnn=True))
        with made[1] as inside:
            seen[lib] = [inside, _state(lib), caught]
        seen[lib].append(_state(lib))
    assert seen[ember] == seen[torch]


@pytest.mark.parametrize("make", [
    lambda lib: lib.cuda.amp.autocast(),
    lambda lib: lib.cuda.amp.autocast(enabled=False),
    lambda lib: lib.cuda.amp.autocast(dtype=lib.bfloat16),
    lambda lib: lib.cuda.amp.GradScaler(),
    lambda lib: lib.cuda.amp.GradScaler(enabled=False),
    lambda lib: lib.cpu.amp.autocast(),
    lambda lib: lib.cpu.amp.GradScaler(init_scale=4.0),
], ids=["cuda-autocast", "cuda-autocast-off", "cuda-autocast-bf16", "cuda-scaler",
        "cuda-scaler-off", "cpu-autocast", "cpu-scaler"])
def test_amp_aliases_warn_and_enable_alike(make):
    (ours, our_warnings), (theirs, their_warnings) = (_outcome(lambda: make(lib))
                                                      for lib in (ember, torch))
    assert our_warnings == their_warnings
    made, t_made = ours[1], theirs[1]
    assert made.__class__.__name__ == t_made.__class__.__name__
    if hasattr(t_made, "fast_dtype"):
        assert (made.device, made._enabled, str(made.fast_dtype).split(".")[-1]) == \
            (t_made.device, t_made._enabled, str(t_made.fast_dtype).split(".")[-1])
        with made, t_made:
            assert ember.is_autocast_enabled(made.device) == \
                torch.is_autocast_enabled(t_made.device)
    else:
        assert made.is_enabled() == t_made.is_enabled()


def test_cuda_helpers_match():
    for lib in (torch, ember):
        answers = [lib.cuda.is_bf16_supported(), lib.cuda.is_bf16_supported(False),
                   lib.cuda.memory_stats(), type(lib.cuda.memory_stats()).__name__,
                   lib.cuda.memory_stats("cuda:1"), lib.cuda.max_memory_reserved(),
                   lib.cuda.max_memory_reserved(0), _outcome(lib.cuda.memory_cached),
                   _outcome(lib.cuda.max_memory_cached)]
        if lib is torch:
            theirs = answers
    assert answers == theirs


def _deterministic_state(lib):
    return (lib.are_deterministic_algorithms_enabled(),
            lib.is_deterministic_algorithms_warn_only_enabled(),
            lib.get_deterministic_debug_mode(),
            lib.utils.deterministic.fill_uninitialized_memory)


@pytest.mark.parametrize("calls", [
    [("use", True, False)], [("use", True, True)], [("use", False, True)],
    [("debug", "warn")], [("debug", 2), ("use", False, False)], [("debug", "default")],
    [("fill", False)], [("debug", 1), ("fill", False), ("use", True, False)]])
def test_deterministic_mode_switches_match(calls):
    for lib in (torch, ember):
        try:
            for call in calls:
                if call[0] == "use":
                    lib.use_deterministic_algorithms(call[1], warn_only=call[2])
                elif call[0] == "debug":
                    lib.set_deterministic_debug_mode(call[1])
                else:
                    lib.utils.deterministic.fill_uninitialized_memory = call[1]
            state = _deterministic_state(lib)
            empty = lib.empty(2).isnan().all().item(), lib.empty(1, dtype=lib.int16).item()
        finally:
            lib.use_deterministic_algorithms(False)
            lib.utils.deterministic.fill_uninitialized_memory = True
        if lib is torch:
            want = state, empty
    assert (state, empty[0]) == (want[0], want[1][0])
    if want[1][0]:                                  # filled: PyTorch's integer fill too
        assert empty[1] == want[1][1]


@pytest.mark.parametrize("call", [
    lambda lib: lib.set_deterministic_debug_mode("loud"),
    lambda lib: lib.set_deterministic_debug_mode(3),
    lambda lib: lib.set_deterministic_debug_mode(1.5),
    lambda lib: lib.use_deterministic_algorithms(1),
    lambda lib: lib.use_deterministic_algorithms(True, warn_only="yes"),
    lambda lib: setattr(lib.utils.deterministic, "fill_uninitialized_memory", 1)])
def test_deterministic_mode_errors_match(call):
    errors = []
    for lib in (torch, ember):
        with pytest.raises((RuntimeError, TypeError)) as info:
            call(lib)
        errors.append((info.type, str(info.value)))
    assert errors[0] == errors[1]
