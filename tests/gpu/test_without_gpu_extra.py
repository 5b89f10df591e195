"""The rest of the ember.cuda and ember.backends.cuda surface on a machine without CUDA:
snapshots and host statistics are empty, the caching switch and null frees do nothing, the
calls that need a GPU raise ember's "not compiled with CUDA" error, and the attention and
library questions are answered as PyTorch's CPU build answers them."""

import sys
import types
import warnings

import pytest

import ember
from ember.backends import cuda as backends_cuda
from ember.backends import cuda_libraries
from ember.cuda import _allocator, _nvml

no_cuda = pytest.mark.skipif(ember.cuda.is_available(), reason="checks the no-CUDA answers")
NOT_COMPILED = "not compiled with CUDA enabled"


@no_cuda
def test_memory_state_without_a_gpu():
    cuda = ember.cuda
    assert cuda.memory_snapshot() == [] and cuda.memory.memory_snapshot((0, 0), False) == []
    stats = cuda.host_memory_stats()
    assert stats == {} and type(stats).__name__ == "OrderedDict"
    assert cuda.host_memory_stats_as_nested_dict() == {}
    assert cuda.reset_peak_host_memory_stats() is None
    assert cuda.reset_accumulated_host_memory_stats() is None
    assert cuda.memory.is_initialized() is False
    cuda.caching_allocator_enable(False)                    # before CUDA is used: no effect
    assert _allocator._CACHING == {"enabled": True}
    with cuda.caching_allocator_disabled():
        assert _allocator._CACHING == {"enabled": True}
    assert cuda.caching_allocator_delete(0) is None         # a null pointer
    with pytest.raises(RuntimeError, match="^invalid device pointer: 0x1f$"):
        cuda.caching_allocator_delete(31)                   # ember never handed it out


@no_cuda
@pytest.mark.parametrize("call", [
    lambda: ember.cuda.set_sync_debug_mode("warn"), lambda: ember.cuda.set_sync_debug_mode(9),
    ember.cuda.get_sync_debug_mode, lambda: ember.cuda.caching_allocator_alloc(64),
    lambda: ember.cuda.caching_allocator_alloc(64, 0, 0), ember.cuda.current_solver_handle,
    lambda: backends_cuda.cufft_plan_cache.size, lambda: backends_cuda.cufft_plan_cache.max_size,
    lambda: backends_cuda.cufft_plan_cache.clear(),
    lambda: setattr(backends_cuda.cufft_plan_cache, "max_size", 8),
    lambda: ember.cuda.profiler.start(), lambda: ember.cuda.profiler.profile().__enter__()],
    ids=["set-sync", "set-sync-bad", "get-sync", "alloc", "alloc-device", "solver",
         "fft-size", "fft-max-size", "fft-clear", "fft-set", "profiler", "profiler-block"])
def test_calls_that_need_a_gpu_raise_not_compiled(call):
    with pytest.raises(RuntimeError, match=NOT_COMPILED):
        call()


@no_cuda
@pytest.mark.parametrize("device, error, message", [
    (0, RuntimeError, "cufft_plan_cache: expected 0 <= device index < 0, but got device with "
                      "index 0"),
    ("cuda:1", RuntimeError, "expected 0 <= device index < 0, but got device with index 1"),
    ("cpu", ValueError, "Expected a cuda device, but got: cpu")])
def test_cufft_plan_cache_indices_without_gpus(device, error, message):
    with pytest.raises(error, match=message):
        backends_cuda.cufft_plan_cache[device]


def test_cufft_plan_cache_classes():
    cache = backends_cuda.cuFFTPlanCache(3)
    assert cache.device_index == 3
    assert isinstance(backends_cuda.cuFFTPlanCache.size,
                      backends_cuda.cuFFTPlanCacheAttrContextProp)
    with pytest.raises(RuntimeError, match=r"^.size is a read-only property"):
        cache.size = 1
    assert isinstance(backends_cuda.cufft_plan_cache, backends_cuda.cuFFTPlanCacheManager)
    assert not hasattr(backends_cuda.cufft_plan_cache, "__deepcopy__")


def test_list_gpu_processes_without_nvml_or_driver(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)        # not installed
    message = "pynvml module not found, please install nvidia-ml-py"
    assert ember.cuda.list_gpu_processes() == ember.cuda.memory.list_gpu_processes() == message

    class DriverNotLoaded(Exception):
        pass

    def init():
        raise DriverNotLoaded("Driver Not Loaded")
    nvml = types.SimpleNamespace(nvmlInit=init, NVMLError_DriverNotLoaded=DriverNotLoaded)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(_nvml, "_STARTED", [])
    assert ember.cuda.list_gpu_processes() == "cuda driver can't be loaded, is cuda enabled?"


def test_cuda_statuses_and_deferred_errors():
    assert (ember.cuda.cudaStatus.SUCCESS, ember.cuda.cudaStatus.ERROR_NOT_READY) == (0, 34)
    assert ember.cuda.DeferredCudaCallError.__mro__[1] is Exception
    names = {"memory_snapshot", "set_sync_debug_mode", "get_sync_debug_mode",
             "caching_allocator_alloc", "host_memory_stats", "current_solver_handle"}
    assert names <= set(ember.cuda.__all__)
    assert {"SDPAParams", "cufft_plan_cache", "preferred_blas_library",
            "can_use_flash_attention"} <= set(backends_cuda.__all__)


# --- attention: SDPAParams and the can_use_* questions ---------------------------------------

def _params(**changes):
    q = ember.randn(2, 3, 4, 8)
    args = dict(query=q, key=q, value=q, attn_mask=None, dropout=0.0, is_causal=True,
                enable_gqa=False)
    args.update(changes)
    return backends_cuda.SDPAParams(*args.values()), args


def test_sdpa_params_hold_the_call_read_only():
    mask = ember.ones(4, 4, dtype=ember.bool)
    params, args = _params(attn_mask=mask, dropout=1, is_causal=0, enable_gqa=None)
    held = [getattr(params, name) for name in ("query", "key", "value", "attn_mask")]
    assert all(a is b for a, b in zip(held, [args["query"]] * 3 + [mask]))
    assert (params.dropout, params.is_causal, params.enable_gqa) == (1.0, False, False)
    assert type(params.dropout) is float and type(params.is_causal) is bool
    with pytest.raises(AttributeError, match="has no setter"):
        params.dropout = 0.5
    assert backends_cuda.SDPBackend is ember.nn.attention.SDPBackend


@pytest.mark.parametrize("changes", [{"query": [1.0]}, {"attn_mask": 0}, {"dropout": "0.1"},
                                     {"is_causal": "yes"}, {"value": None}])
def test_sdpa_params_take_tensors_and_numbers(changes):
    with pytest.raises(TypeError, match=r"^SDPAParams\(\): expected \(Tensor query"):
        _params(**changes)


def test_sdpa_params_are_positional():
    q = ember.randn(1, 1, 2, 2)
    with pytest.raises(TypeError):
        backends_cuda.SDPAParams(q, q, q, None, 0.0, False)
    with pytest.raises(TypeError):
        backends_cuda.SDPAParams(query=q, key=q, value=q, attn_mask=None, dropout=0.0,
                                 is_causal=False, enable_gqa=False)


@no_cuda
@pytest.mark.parametrize("name", ["can_use_flash_attention", "can_use_efficient_attention",
                                  "can_use_cudnn_attention"])
def test_no_attention_kernel_without_cuda_and_no_debug_talk(name):
    can_use = getattr(backends_cuda, name)
    params, _ = _params()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert can_use(params) is False and can_use(params, debug=True) is False
    with pytest.raises(TypeError, match=f"{name}\\(\\): argument 'params' must be SDPAParams"):
        can_use("params")
    assert backends_cuda.is_ck_sdpa_available() is False


# --- the preferred libraries -----------------------------------------------------------------

@pytest.fixture
def preferences():
    saved = dict(cuda_libraries._PREFERRED)
    yield backends_cuda
    cuda_libraries._PREFERRED.update(saved)


def test_blas_preference(preferences):
    prefer = preferences.preferred_blas_library
    cublas = prefer()
    assert repr(cublas) == "<_BlasBackend.Cublas: 1>" and str(cublas) == "_BlasBackend.Cublas"
    assert (cublas.name, cublas.value, int(cublas)) == ("Cublas", 1, 1)
    assert [m.name for m in type(cublas)] == ["Default", "Cublas", "Cublaslt", "Ck"]
    assert prefer("ck").name == "Ck" and prefer().name == "Ck"
    assert prefer("hipblas") is cublas and prefer("default") is cublas
    assert prefer(type(cublas).Ck).name == "Ck"
    with pytest.raises(RuntimeError, match=r"^Cannot set preferred backend to cuBLASLt if ember "
                                           r"has not been compiled with cuBLASLt.$"):
        prefer("cublaslt")
    assert prefer().name == "Ck"                            # a refused choice changes nothing
    with pytest.raises(RuntimeError, match=r"^Unknown input value. Choose from: default, "
                                           r"cublas, hipblas, cublaslt, hipblaslt, ck.$"):
        prefer("mkl")
    with pytest.raises(RuntimeError, match="^Unknown input value type.$"):
        prefer(1)


def test_linalg_preference(preferences):
    prefer = preferences.preferred_linalg_library
    default = prefer()
    assert repr(default) == "<_LinalgBackend.Default: 0>"
    with pytest.raises(RuntimeError, match=r"^Cannot set preferred backend to MAGMA if ember has "
                                           r"not been compiled with MAGMA.$"):
        prefer("magma")
    if backends_cuda.is_built():                            # CuPy's linear algebra: cuSOLVER
        assert prefer("cusolver").name == "Cusolver" and prefer().name == "Cusolver"
    else:
        with pytest.raises(RuntimeError, match="Cannot set preferred backend to cuSOLVER"):
            prefer("cusolver")
    assert prefer("default") is default
    with pytest.raises(RuntimeError, match=r"^Unknown input value. Choose from: default, "
                                           r"cusolver, magma.$"):
        prefer("lapack")
    with pytest.raises(RuntimeError, match="^Unknown input value type.$"):
        prefer(2.0)


def test_rocm_flash_attention_preference(preferences):
    prefer = preferences.preferred_rocm_fa_library
    assert repr(prefer()) == "<_ROCmFABackend.Default: 0>"
    assert prefer("ck").name == "Ck" and prefer("aotriton").name == "AOTriton"
    assert prefer().name == "AOTriton"
    with pytest.raises(RuntimeError, match=r"^Unknown input value. Choose from: default, "
                                           r"aotriton, ck.$"):
        prefer("triton")
    with pytest.raises(ValueError, match=r"^Unknown input value. Choose from: default, "
                                         r"aotriton, ck.$"):
        prefer(0)
