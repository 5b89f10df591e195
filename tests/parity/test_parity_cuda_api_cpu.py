"""The rest of torch.cuda, torch.cuda.memory and torch.backends.cuda against ember's answers
on a machine without CUDA: the same value, or the same error. Two known differences are
spelled out: ember's "not compiled with CUDA" error is a RuntimeError naming ember where
PyTorch's is an AssertionError, and where PyTorch's CPU build has no binding at all (an
AttributeError about ``torch._C``) ember answers as a CUDA build does before CUDA is used.
Skipped when PyTorch is not installed."""

import warnings

import pytest

import ember
from ember.backends import cuda_libraries
from tests.parity._compare import ok, recorded

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.parity,
              pytest.mark.skipif(torch.cuda.is_available() or ember.cuda.is_available(),
                                 reason="compares the answers without CUDA")]


def _ours_and_theirs(call):
    """For each library: (("ok", result) or (error type, message), [(warning category,
    message)])."""
    return recorded(call, ember, describe=ok), recorded(call, torch, describe=ok)


def _not_compiled(ours, theirs):
    """Whether both say CUDA is missing: ember always with its RuntimeError, PyTorch with an
    AssertionError, or a RuntimeError where a device guard finds out first."""
    return (ours[0] == "RuntimeError" and ours[1].startswith("ember not compiled with CUDA "
                                                             "enabled")
            and theirs in (("AssertionError", "Torch not compiled with CUDA enabled"),
                           ("RuntimeError", "PyTorch was compiled without CUDA support")))


@pytest.fixture(autouse=True)
def restore_preferences():
    saved = dict(cuda_libraries._PREFERRED)
    backends = torch.backends.cuda
    theirs = (backends.preferred_blas_library(), backends.preferred_linalg_library(),
              backends.preferred_rocm_fa_library())
    yield
    cuda_libraries._PREFERRED.update(saved)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        backends.preferred_blas_library(theirs[0])
        backends.preferred_linalg_library(theirs[1])
        backends.preferred_rocm_fa_library(theirs[2])


@pytest.mark.parametrize("call", [
    lambda lib: lib.cuda.memory.is_initialized(),
    lambda lib: lib.cuda.list_gpu_processes(),
    lambda lib: lib.cuda.memory.list_gpu_processes(0),
    lambda lib: lib.cuda.host_memory_stats(),
    lambda lib: type(lib.cuda.memory.host_memory_stats()).__name__,
    lambda lib: lib.cuda.host_memory_stats_as_nested_dict(),
    lambda lib: lib.cuda.caching_allocator_enable(False),
    lambda lib: lib.cuda.memory.caching_allocator_enable(),
    lambda lib: (lib.cuda.cudaStatus.SUCCESS, lib.cuda.cudaStatus.ERROR_NOT_READY),
    lambda lib: lib.cuda.DeferredCudaCallError.__mro__[1],
    lambda lib: lib.backends.cuda.is_ck_sdpa_available(),
], ids=["is_initialized", "gpu-processes", "memory-gpu-processes", "host-stats",
        "host-stats-type", "host-stats-nested", "caching-off", "caching-on", "cuda-status",
        "deferred-error", "ck-sdpa"])
def test_same_answers(call):
    ours, theirs = _ours_and_theirs(call)
    assert ours == theirs and ours[0][0] == "ok"


@pytest.mark.parametrize("call", [
    lambda lib: lib.cuda.set_sync_debug_mode("warn"),
    lambda lib: lib.cuda.set_sync_debug_mode("loud"),
    lambda lib: lib.cuda.set_sync_debug_mode(7),
    lambda lib: lib.cuda.get_sync_debug_mode(),
    lambda lib: lib.cuda.caching_allocator_alloc(128),
    lambda lib: lib.cuda.caching_allocator_alloc(128, 0, 0),
    lambda lib: lib.cuda.memory.caching_allocator_alloc("x", stream="y"),
    lambda lib: lib.cuda.current_solver_handle(),
    lambda lib: lib.backends.cuda.cufft_plan_cache.size,
    lambda lib: lib.backends.cuda.cufft_plan_cache.max_size,
    lambda lib: lib.backends.cuda.cufft_plan_cache.clear(),
    lambda lib: setattr(lib.backends.cuda.cufft_plan_cache, "max_size", 4),
    lambda lib: lib.cuda.profiler.start(),
    lambda lib: lib.cuda.profiler.stop(),
    lambda lib: lib.cuda.profiler.profile().__enter__(),
], ids=["set-sync", "set-sync-name", "set-sync-value", "get-sync", "alloc", "alloc-device",
        "alloc-bad", "solver", "fft-size", "fft-max-size", "fft-clear", "fft-set",
        "profiler-start", "profiler-stop", "profiler-block"])
def test_gpu_calls_fail_as_not_compiled(call):
    (ours, _), (theirs, _) = _ours_and_theirs(call)
    assert _not_compiled(ours, theirs), (ours, theirs)


@pytest.mark.parametrize("device", [0, 1, -1, "cuda:0", "cpu"])
def test_cufft_plan_cache_indices_fail_alike(device):
    ours, theirs = _ours_and_theirs(lambda lib: lib.backends.cuda.cufft_plan_cache[device])
    assert ours == theirs and ours[0][0] in ("RuntimeError", "ValueError")


def _ember_named(outcome):
    """An outcome with PyTorch's "PyTorch has not been compiled" as ember says it."""
    (kind, value), said = outcome
    if isinstance(value, str):
        value = value.replace("if PyTorch has not", "if ember has not")
    return (kind, value), said


@pytest.mark.parametrize("steps", [
    [None], ["cublas"], ["hipblas"], ["ck"], ["default"], ["ck", None], ["ck", "cublas"],
    ["cublaslt"], ["hipblaslt"], ["mkl"], [3], ["ck", "cublaslt", None]])
def test_blas_preferences_match(steps):
    def run(lib):
        return [str(lib.backends.cuda.preferred_blas_library(step)) for step in steps]
    ours, theirs = _ours_and_theirs(run)
    assert ours == _ember_named(theirs)


@pytest.mark.parametrize("steps", [
    [None], ["default"], ["cusolver"], ["magma"], ["lapack"], [1.5]])
def test_linalg_preferences_match(steps):
    def run(lib):       # (after a refused "magma", PyTorch keeps it preferred: not compared)
        return [str(lib.backends.cuda.preferred_linalg_library(step)) for step in steps]
    ours, theirs = _ours_and_theirs(run)
    assert ours == _ember_named(theirs)


@pytest.mark.parametrize("steps", [
    [None], ["ck"], ["aotriton", None], ["ck", "default"], ["triton"], [2]])
def test_rocm_flash_attention_preferences_match(steps):
    def run(lib):
        return [str(lib.backends.cuda.preferred_rocm_fa_library(step)) for step in steps]
    ours, theirs = _ours_and_theirs(run)
    assert ours == theirs


def _sdpa_params(lib, **changes):
    q = lib.ones(2, 3, 4, 8)
    args = dict(query=q, key=q, value=q, attn_mask=None, dropout=0.0, is_causal=True,
                enable_gqa=False)
    args.update(changes)
    return lib.backends.cuda.SDPAParams(*args.values())


@pytest.mark.parametrize("changes", [
    lambda lib: {}, lambda lib: {"dropout": 1}, lambda lib: {"is_causal": 0},
    lambda lib: {"enable_gqa": 1}, lambda lib: {"attn_mask": lib.zeros(4, 4)},
    lambda lib: {"dropout": "p"}, lambda lib: {"query": 1.0}, lambda lib: {"attn_mask": 0}],
    ids=["plain", "int-dropout", "int-causal", "int-gqa", "mask", "str-dropout", "no-tensor",
         "int-mask"])
def test_sdpa_params_match(changes):
    def fields(lib):
        params = _sdpa_params(lib, **changes(lib))
        return (params.dropout, type(params.dropout).__name__, params.is_causal,
                params.enable_gqa, params.attn_mask is None)
    (ours, _), (theirs, _) = _ours_and_theirs(fields)
    assert ours[0] == theirs[0] and (ours[0] != "ok" or ours == theirs)


@pytest.mark.parametrize("name", ["can_use_flash_attention", "can_use_efficient_attention",
                                  "can_use_cudnn_attention"])
@pytest.mark.parametrize("debug", [False, True])
def test_no_attention_kernel_can_run(name, debug):
    ours, theirs = _ours_and_theirs(
        lambda lib: getattr(lib.backends.cuda, name)(_sdpa_params(lib), debug))
    assert ours == theirs == (("ok", False), [])


@pytest.mark.parametrize("call, ours", [
    (lambda lib: lib.cuda.memory_snapshot(), ("ok", [])),
    (lambda lib: lib.cuda.memory.memory_snapshot(include_traces=False), ("ok", [])),
    (lambda lib: lib.cuda.reset_peak_host_memory_stats(), ("ok", None)),
    (lambda lib: lib.cuda.reset_accumulated_host_memory_stats(), ("ok", None)),
    (lambda lib: lib.cuda.caching_allocator_delete(0), ("ok", None)),
    (lambda lib: lib.cuda.caching_allocator_disabled().__enter__(), ("ok", None)),
], ids=["snapshot", "snapshot-no-traces", "reset-peak", "reset-accumulated", "delete-null",
        "disabled-block"])
def test_where_pytorchs_cpu_build_has_no_binding(call, ours):
    """PyTorch's CPU build lacks the C++ function: an AttributeError about torch._C. ember
    answers as a CUDA build does before any GPU memory is used."""
    (mine, _), (theirs, _) = _ours_and_theirs(call)
    assert theirs[0] == "AttributeError" and "torch._C" in theirs[1]
    assert mine == ours
