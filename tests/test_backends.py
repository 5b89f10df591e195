"""ember.backends (cuDNN, cuBLAS, attention, MPS and CPU switches), the float32 matmul
precision, the deprecated ``cuda.amp``/``cpu.amp`` aliases and the ember.cuda helpers that
answer without a GPU."""

import importlib.util
import sys
import warnings
from collections import OrderedDict

import pytest

import ember
from ember import backends
from ember.backends import _fp32_precision, _precision

no_cuda = pytest.mark.skipif(ember.cuda.is_available(), reason="checks the no-CUDA answers")


@pytest.fixture(autouse=True)
def restore_switches():
    """Every test leaves the process-wide switches as it found them."""
    switches = (backends.cudnn._FLAGS, backends.cuda._SDP, backends.cuda.matmul._flags,
                _precision._STATE, _fp32_precision._STATE)
    saved = [dict(state) for state in switches]
    yield
    for live, old in zip(switches, saved):
        live.clear()
        live.update(old)


def test_a_gpu_scripts_preamble_runs():
    torch = ember
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    device = ("cuda" if torch.cuda.is_available() else
              "mps" if torch.backends.mps.is_available() else "cpu")
    assert device == ("cuda" if ember.cuda.is_available() else "cpu")
    assert torch.get_float32_matmul_precision() == "high"
    assert (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic) == (True, True)
    torch.backends.cuda.enable_flash_sdp(False)
    assert torch.backends.cuda.flash_sdp_enabled() is False


# --- cudnn --------------------------------------------------------------------------------------


def test_cudnn_defaults_and_queries():
    cudnn = backends.cudnn
    assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32) == \
        (True, False, False, True)
    assert cudnn.is_available() is False and cudnn.version() is None
    assert cudnn.is_acceptable(ember.ones(1)) is False
    assert cudnn.benchmark_limit is None


@pytest.mark.parametrize("name, setter", [
    ("enabled", "set_enabled_cudnn"), ("benchmark", "set_benchmark_cudnn"),
    ("deterministic", "set_deterministic_cudnn"), ("allow_tf32", "set_allow_tf32_cudnn")])
def test_cudnn_flags_take_only_bools(name, setter):
    before = getattr(backends.cudnn, name)
    setattr(backends.cudnn, name, not before)
    assert getattr(backends.cudnn, name) is (not before)
    for bad, kind in ((1, "int"), ("yes", "str"), (None, "NoneType")):
        with pytest.raises(RuntimeError, match=f"^{setter} expects a bool, but got {kind}$"):
            setattr(backends.cudnn, name, bad)
    assert getattr(backends.cudnn, name) is (not before)      # a refused value changes nothing


def test_cudnn_benchmark_limit_is_a_plain_attribute_without_cudnn():
    backends.cudnn.benchmark_limit = 5
    try:
        assert backends.cudnn.benchmark_limit == 5
    finally:
        backends.cudnn.benchmark_limit = None


def test_cudnn_flags_context_sets_and_restores():
    cudnn = backends.cudnn
    cudnn.benchmark = True
    with cudnn.flags() as inside:                 # PyTorch's defaults: enabled=False
        assert inside is None
        assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32) == \
            (False, False, False, True)
    assert (cudnn.enabled, cudnn.benchmark) == (True, True)
    with cudnn.flags(enabled=True, benchmark=False, deterministic=True, allow_tf32=False):
        assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32) == \
            (True, False, True, False)
    assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32) == \
        (True, True, False, True)


def test_cudnn_flags_context_restores_after_errors():
    cudnn = backends.cudnn
    with pytest.raises(ValueError, match="boom"):
        with cudnn.flags(enabled=True, deterministic=True):
            raise ValueError("boom")
    assert (cudnn.enabled, cudnn.deterministic) == (True, False)
    with pytest.raises(RuntimeError, match="set_allow_tf32_cudnn expects a bool"):
        with cudnn.flags(enabled=True, deterministic=True, allow_tf32=1):
            pass
    assert (cudnn.enabled, cudnn.deterministic, cudnn.allow_tf32) == (True, False, True)


# --- float32 matmul precision and cuBLAS ----------------------------------------------------------


def test_float32_matmul_precision_and_allow_tf32_are_one_setting():
    matmul = backends.cuda.matmul
    assert ember.get_float32_matmul_precision() == "highest" and matmul.allow_tf32 is False
    for precision, tf32 in (("high", True), ("medium", True), ("highest", False)):
        assert ember.set_float32_matmul_precision(precision) is None
        assert (ember.get_float32_matmul_precision(), matmul.allow_tf32) == (precision, tf32)
    matmul.allow_tf32 = True
    assert ember.get_float32_matmul_precision() == "high"
    matmul.allow_tf32 = False
    assert ember.get_float32_matmul_precision() == "highest"


def test_matmul_results_do_not_depend_on_the_precision():
    a = ember.randn(16, 16, generator=ember.Generator().manual_seed(0)) + 1.0 / 3
    full = a @ a
    exact = a.double() @ a.double()
    # float32 rounding leaves ~1e-7 relative error; TF32's 10-bit mantissa would leave ~1e-3
    assert ((full - exact).abs().max() / exact.abs().max()).item() < 1e-6
    for precision in ("high", "medium"):
        ember.set_float32_matmul_precision(precision)
        assert ember.equal(a @ a, full)


@pytest.mark.parametrize("bad", ["low", "HIGH", ""])
def test_an_unknown_precision_warns_and_changes_nothing(bad):
    ember.set_float32_matmul_precision("medium")
    with pytest.warns(UserWarning, match=f"^{bad} is not one of 'highest', 'high', or "
                                         f"'medium'; the current set_float32_matmul_precision "
                                         f"call has no effect.$"):
        ember.set_float32_matmul_precision(bad)
    assert ember.get_float32_matmul_precision() == "medium"


def test_a_precision_must_be_a_string():
    with pytest.raises(RuntimeError, match="^set_float32_matmul_precision expects a str, but "
                                           "got int$"):
        ember.set_float32_matmul_precision(3)
    assert ember.get_float32_matmul_precision() == "highest"


def test_cublas_reduced_precision_flags():
    matmul = backends.cuda.matmul
    assert (matmul.allow_fp16_reduced_precision_reduction,
            matmul.allow_bf16_reduced_precision_reduction, matmul.allow_fp16_accumulation) == \
        (True, True, False)
    matmul.allow_fp16_reduced_precision_reduction = False
    matmul.allow_bf16_reduced_precision_reduction = (False, True)
    matmul.allow_fp16_accumulation = True
    assert (matmul.allow_fp16_reduced_precision_reduction,
            matmul.allow_bf16_reduced_precision_reduction, matmul.allow_fp16_accumulation) == \
        (False, False, True)
    matmul.allow_fp16_reduced_precision_reduction = [True]
    assert matmul.allow_fp16_reduced_precision_reduction is True


def test_cublas_flag_errors():
    matmul = backends.cuda.matmul
    with pytest.raises(RuntimeError, match="^set_allow_tf32_cublas expects a bool, but got int$"):
        matmul.allow_tf32 = 1
    with pytest.raises(TypeError, match="^allow_fp16_reduced_precision_reduction expects a bool "
                                        "or a tuple/list of bools, but got <class 'int'>$"):
        matmul.allow_fp16_reduced_precision_reduction = 1
    with pytest.raises(TypeError, match="allow_bf16_reduced_precision_reduction expects"):
        matmul.allow_bf16_reduced_precision_reduction = (True, 0)
    with pytest.raises(RuntimeError, match="^allow_splitk=False is not supported when reduced "
                                           "precision reductions are enabled$"):
        matmul.allow_fp16_reduced_precision_reduction = (True, False)
    assert matmul.allow_fp16_reduced_precision_reduction is True and matmul.allow_tf32 is False
    with pytest.raises(AttributeError, match="^Unknown attribute allow_fp64$"):
        matmul.allow_fp64 = True
    with pytest.raises(AttributeError, match="^Unknown attribute allow_fp64$"):
        matmul.allow_fp64


# --- attention switches -------------------------------------------------------------------------

_SDP_KINDS = ["flash", "mem_efficient", "math", "cudnn"]


def _sdp_state():
    return [getattr(backends.cuda, f"{k}_sdp_enabled")() for k in _SDP_KINDS]


@pytest.mark.parametrize("kind", _SDP_KINDS)
def test_each_sdp_switch(kind):
    enable, enabled = (getattr(backends.cuda, n) for n in (f"enable_{kind}_sdp",
                                                           f"{kind}_sdp_enabled"))
    assert enabled() is True
    assert enable(False) is None
    assert enabled() is False and _sdp_state().count(False) == 1
    with pytest.raises(RuntimeError, match=f"^set_sdp_use_{kind} expects a bool, but got int$"):
        enable(1)
    assert enabled() is False
    enable(True)
    assert enabled() is True


def test_math_sdp_reduction_switch():
    cuda = backends.cuda
    assert cuda.fp16_bf16_reduction_math_sdp_allowed() is False
    cuda.allow_fp16_bf16_reduction_math_sdp(True)
    assert cuda.fp16_bf16_reduction_math_sdp_allowed() is True
    with pytest.raises(RuntimeError, match="expects a bool, but got str"):
        cuda.allow_fp16_bf16_reduction_math_sdp("no")


def test_sdp_kernel_warns_sets_and_restores():
    with pytest.warns(FutureWarning, match=r"`torch.backends.cuda.sdp_kernel\(\)` is "
                                           r"deprecated\. In the future"):
        context = backends.cuda.sdp_kernel(enable_flash=False)
    assert _sdp_state() == [True] * 4                # nothing changes before the block
    with context as inside:
        assert inside == {}
        assert _sdp_state() == [False, True, True, True]
    assert _sdp_state() == [True] * 4
    backends.cuda.enable_math_sdp(False)
    with pytest.raises(KeyError), pytest.warns(FutureWarning):
        with backends.cuda.sdp_kernel(False, True, False, False):
            assert _sdp_state() == [False, False, True, False]
            raise KeyError
    assert _sdp_state() == [True, True, False, True]


def test_sdpa_kernel_allows_only_the_backends_named():
    from ember.nn.attention import SDPBackend, sdpa_kernel
    # reached as attributes too, as scripts that only ``import torch`` do (the layers' file
    # nn/modules/attention.py once shadowed the package)
    assert ember.nn.attention.sdpa_kernel is sdpa_kernel and not hasattr(ember.nn, "linear")
    with sdpa_kernel(SDPBackend.MATH):
        assert _sdp_state() == [False, False, True, False]
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION], set_priority=True):
        assert _sdp_state() == [True, False, False, True]
    with pytest.raises(KeyError), sdpa_kernel([]):
        assert _sdp_state() == [False] * 4
        raise KeyError
    assert _sdp_state() == [True] * 4
    with pytest.raises(AssertionError, match="must be an instance of SDPBackend or a list of "
                                             "SDPBackend instances, got str"):
        with sdpa_kernel("math"):
            pass
    assert [int(b) for b in SDPBackend] == [-1, 0, 1, 2, 3, 4]


def test_attention_on_the_cpu_needs_the_flash_or_math_switch():
    from ember.nn.attention import SDPBackend, sdpa_kernel
    q = ember.randn(1, 2, 4, 8)
    expected = ember.nn.functional.scaled_dot_product_attention(q, q, q)
    for allowed in (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH):
        with sdpa_kernel(allowed):
            out = ember.nn.functional.scaled_dot_product_attention(q, q, q)
        assert ember.equal(out, expected)
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]):
        with pytest.raises(RuntimeError, match="^No viable backend for scaled_dot_product_"
                                               "attention was found"):
            ember.nn.functional.scaled_dot_product_attention(q, q, q)


# --- is_built, mps, cpu -------------------------------------------------------------------------


def test_is_built_looks_for_cupy_without_importing_it(monkeypatch):
    asked = []
    monkeypatch.delitem(sys.modules, "cupy", raising=False)

    def find_spec(name, *args):
        asked.append(name)
        return None if name == "cupy" else importlib.util.find_spec(name, *args)
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert backends.cuda.is_built() is False
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: object())
    assert backends.cuda.is_built() is True
    assert asked == ["cupy"] and "cupy" not in sys.modules


def test_mps_and_cpu():
    assert backends.mps.is_available() is False and backends.mps.is_built() is False
    assert backends.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT")
    assert ember.cpu.is_available() is True and ember.cpu.device_count() == 1
    assert ember.cpu.current_device() == "cpu" and ember.cpu.synchronize() is None


def test_device_modules_load_amp_on_first_use():
    assert ember.cuda.amp is sys.modules["ember.cuda.amp"]
    assert ember.cuda.comm.gather is ember.nn.parallel.comm.gather
    assert ember.cpu.amp is sys.modules["ember.cpu.amp"]
    for module in (ember.cuda, ember.cpu):
        with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
            module.nothing


# --- the deprecated amp aliases -----------------------------------------------------------------

_CUDA_AUTOCAST = (r"^`torch\.cuda\.amp\.autocast\(args\.\.\.\)` is deprecated\. Please use "
                  r"`torch\.amp\.autocast\('cuda', args\.\.\.\)` instead\.$")
_CUDA_SCALER = (r"^`torch\.cuda\.amp\.GradScaler\(args\.\.\.\)` is deprecated\. Please use "
                r"`torch\.amp\.GradScaler\('cuda', args\.\.\.\)` instead\.$")


def _warnings_of(make):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = make()
    return made, [(w.category, str(w.message)) for w in caught]


@no_cuda
def test_cuda_autocast_alias_warns_then_disables_itself_without_cuda():
    made, caught = _warnings_of(lambda: ember.cuda.amp.autocast(dtype=ember.bfloat16))
    assert isinstance(made, ember.amp.autocast) and made.device == "cuda"
    assert [c for c, _ in caught] == [FutureWarning, UserWarning]
    assert "CUDA is not available" in caught[1][1]
    with pytest.warns(FutureWarning, match=_CUDA_AUTOCAST):
        made = ember.cuda.amp.autocast(enabled=False)
    with made:
        assert not ember.is_autocast_enabled("cuda")
    assert made.fast_dtype == ember.float16


@no_cuda
def test_cuda_grad_scaler_alias_warns_then_disables_itself_without_cuda():
    scaler, caught = _warnings_of(lambda: ember.cuda.amp.GradScaler(init_scale=8.0))
    assert isinstance(scaler, ember.amp.GradScaler) and scaler.is_enabled() is False
    assert [c for c, _ in caught] == [FutureWarning, UserWarning]
    assert caught[1][1] == ("torch.cuda.amp.GradScaler is enabled, but CUDA is not available."
                            "  Disabling.")
    loss = ember.tensor(2.0)
    assert scaler.scale(loss) is loss
    with pytest.warns(FutureWarning, match=_CUDA_SCALER):
        ember.cuda.amp.GradScaler(enabled=False)


def test_cpu_autocast_alias_runs_matmuls_in_bfloat16():
    a = ember.ones(2, 2)
    with pytest.warns(FutureWarning, match=r"^`torch\.cpu\.amp\.autocast\(args\.\.\.\)` is "
                                           r"deprecated\. Please use `torch\.amp\.autocast\("
                                           r"'cpu', args\.\.\.\)` instead\.$"):
        context = ember.cpu.amp.autocast()
    with context:
        assert ember.is_autocast_enabled("cpu") and (a @ a).dtype == ember.bfloat16
    assert not ember.is_autocast_enabled("cpu") and (a @ a).dtype == ember.float32
    with pytest.warns(FutureWarning):
        half = ember.cpu.amp.autocast(dtype=ember.float16)(lambda: (a @ a).dtype)
    assert half() == ember.float16


def test_cpu_grad_scaler_alias_passes_its_arguments_on():
    with pytest.warns(FutureWarning, match=r"`torch\.cpu\.amp\.GradScaler\(args\.\.\.\)` is "
                                           r"deprecated\. Please use `torch\.amp\.GradScaler\("
                                           r"'cpu', args\.\.\.\)` instead\."):
        scaler = ember.cpu.amp.GradScaler(8.0, 3.0, 0.25, 7)
    assert scaler.is_enabled()
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(),
            scaler.get_growth_interval()) == (3.0, 0.25, 7)
    assert scaler.scale(ember.tensor(2.0)).item() == 16.0
    with pytest.raises(AssertionError, match="The growth factor must be > 1.0."), \
            pytest.warns(FutureWarning):
        ember.cpu.amp.GradScaler(growth_factor=1.0)


# --- ember.cuda without a GPU -------------------------------------------------------------------


@no_cuda
def test_cuda_helpers_answer_without_a_gpu():
    cuda = ember.cuda
    assert cuda.is_bf16_supported() is False
    assert cuda.is_bf16_supported(including_emulation=False) is False
    stats = cuda.memory_stats()
    assert type(stats) is OrderedDict and stats == {}
    assert cuda.memory_stats("cuda:1") == {} and cuda.memory_stats(0) == {}
    assert cuda.max_memory_reserved() == 0 and cuda.max_memory_reserved("cuda:0") == 0
    with pytest.warns(FutureWarning, match="`torch.cuda.memory_cached` has been renamed to "
                                           "`torch.cuda.memory_reserved`"):
        assert cuda.memory_cached() == 0
    with pytest.warns(FutureWarning, match="`torch.cuda.max_memory_cached` has been renamed"):
        assert cuda.max_memory_cached() == 0


@no_cuda
def test_more_cuda_helpers_answer_without_a_gpu():
    cuda = ember.cuda
    assert cuda.is_tf32_supported() is False and cuda.get_gencode_flags() == ""
    assert cuda.memory_stats_as_nested_dict() == {}
    assert cuda.get_allocator_backend() == "native" and cuda.is_current_stream_capturing() is False
    assert (cuda.has_half, cuda.has_magma) == (True, False)
    cuda.check_error(0)


@no_cuda
@pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None, reason="nvidia-ml-py found")
def test_nvml_readings_need_nvidia_ml_py():
    with pytest.raises(ModuleNotFoundError, match="^nvidia-ml-py does not seem to be installed "
                                                  "or it can't be imported.$"):
        ember.cuda.utilization()
    assert ember.cuda.list_gpu_processes() == ("pynvml module not found, please install "
                                               "nvidia-ml-py")


@no_cuda
def test_memory_summary_without_a_gpu():
    lines = ember.cuda.memory_summary().splitlines()
    assert "ember CUDA memory summary, device ID 0" in lines[1]
    assert [line.split("|")[1].strip() for line in lines[5:7]] == \
        ["Allocated memory", "GPU reserved memory"]
    assert all(line.count("0 bytes") == 2 for line in lines[5:7])
    assert len({len(line) for line in lines}) == 1           # a rectangular table
    assert "device ID 2" in ember.cuda.memory_summary("cuda:2", abbreviated=True)


def test_library_switches_without_their_libraries():
    assert not (backends.mkldnn.is_available() or backends.mkl.is_available()
                or backends.openmp.is_available() or backends.opt_einsum.is_available())
    assert backends.mkldnn.enabled is True and backends.mkldnn.deterministic is False
    with backends.mkldnn.flags():
        assert backends.mkldnn.enabled is False
    assert backends.mkldnn.enabled is True
    with pytest.raises(RuntimeError, match="set_enabled_mkldnn expects a bool, but got int"):
        backends.mkldnn.enabled = 1
    assert backends.opt_einsum.get_opt_einsum() is None and backends.opt_einsum.strategy is None
    with backends.opt_einsum.flags(enabled=True, strategy="greedy"):
        assert (backends.opt_einsum.enabled, backends.opt_einsum.strategy) == (True, "greedy")
    assert (backends.opt_einsum.enabled, backends.opt_einsum.strategy) == (False, None)
    assert backends.mha.get_fastpath_enabled() is True
    backends.mha.set_fastpath_enabled(False)
    assert backends.mha.get_fastpath_enabled() is False
    backends.mha.set_fastpath_enabled(True)


def test_broadcast_view_of_one_value_writes_through_and_keeps_read_only():
    import numpy as np

    from ember.backend import broadcast_view
    row = np.arange(3.0)
    for value in (np.array(2.0, np.float32), row[1:2].reshape(())):     # the second: a view
        view = broadcast_view(np, value, (2, 3))
        assert view.shape == (2, 3) and view.strides == (0, 0) and view.dtype == value.dtype
        np.testing.assert_array_equal(view, np.full((2, 3), value))
        view[1, 2] = 7
        assert value == 7
    assert row[1] == 7
    frozen = np.array(1.0)
    frozen.flags.writeable = False
    assert not broadcast_view(np, frozen, (4,)).flags.writeable
    assert broadcast_view(np, np.ones(3), (2, 3)).flags.writeable   # the general path
