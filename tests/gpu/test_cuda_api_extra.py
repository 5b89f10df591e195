"""The rest of ember.cuda and ember.backends.cuda on a GPU: memory snapshots, raw allocations
and the caching switch, the synchronization debug mode, the cuFFT plan caches, the solver
handle, and which attention kernel would take a call. On the CuPy stand-in
(EMBER_FAKE_CUDA=1) the CuPy calls it lacks are stood in for by the tests."""

import json
import os
import subprocess
import sys
import textwrap
import types
import warnings
from pathlib import Path

import pytest

import ember
from ember.backends import cuda as backends_cuda
from ember.cuda import _allocator, _sync_debug

pytestmark = pytest.mark.cuda

ROOT = Path(__file__).resolve().parents[2]
SYNC = "called a synchronizing CUDA operation"


def _cupy():
    return ember.backend.cuda_backend().cupy


def _on_stand_in():
    return _cupy().__version__ == "fake"


@pytest.fixture
def sync_mode():
    """The synchronization debug mode, back at "default" after the test."""
    ember.cuda.init()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # the once-only "prototype" warning
        yield ember.cuda.set_sync_debug_mode
        ember.cuda.set_sync_debug_mode(0)


# --- memory snapshots, raw allocations, the caching switch -----------------------------------

def test_memory_snapshot_describes_each_gpus_pool():
    x = ember.ones(1000, device="cuda")
    segments = ember.cuda.memory_snapshot()
    mine = [s for s in segments if s["device"] == 0]
    assert len(mine) == 1 and [s["device"] for s in segments] == sorted({s["device"]
                                                                          for s in segments})
    seg = mine[0]
    assert set(seg) == {"device", "total_size", "allocated_size", "active_size",
                        "segment_pool_id", "is_expandable", "frames", "blocks"}
    assert seg["total_size"] == ember.cuda.memory_reserved(0)
    assert seg["allocated_size"] == seg["active_size"] == ember.cuda.memory_allocated(0) >= 4000
    assert (seg["segment_pool_id"], seg["is_expandable"], seg["frames"]) == ((0, 0), False, [])
    sizes = {b["state"]: b["size"] for b in seg["blocks"]}
    assert sizes["active_allocated"] == seg["allocated_size"]
    assert sum(sizes.values()) == seg["total_size"]
    assert set(sizes) <= {"active_allocated", "inactive"}
    assert ember.cuda.memory.memory_snapshot(include_traces=False) == segments
    assert ember.cuda.memory_snapshot(mempool_id=(1, 7)) == []
    del x


def test_the_memory_module_has_pytorchs_names():
    memory = ember.cuda.memory
    ember.ones(1, device="cuda")
    assert memory.is_initialized() is True and ember.cuda.is_initialized() is True
    assert memory.list_gpu_processes is ember.cuda.list_gpu_processes
    assert memory.host_memory_stats() == {} and memory.host_memory_stats_as_nested_dict() == {}
    assert type(memory.host_memory_stats()).__name__ == "OrderedDict"
    assert memory.reset_peak_host_memory_stats() is None
    assert memory.reset_accumulated_host_memory_stats() is None
    for name in ("memory_snapshot", "caching_allocator_alloc", "caching_allocator_delete",
                 "caching_allocator_enable", "caching_allocator_disabled"):
        assert getattr(memory, name) is getattr(ember.cuda, name) and name in memory.__all__


@pytest.fixture
def raw_allocations(monkeypatch):
    """Where each raw allocation was made: (bytes, GPU, stream handle). The stand-in has no
    ``cupy.cuda.alloc`` nor pointers in its pool's memory: they are added."""
    cupy, made = _cupy(), []
    real = getattr(cupy.cuda, "alloc", None)
    if _on_stand_in():
        from tests.gpu import fake_cupy
        monkeypatch.setattr(fake_cupy._Memory, "ptr", property(id), raising=False)
        real = fake_cupy._STATE["allocator"]

    def alloc(size):
        made.append((size, cupy.cuda.runtime.getDevice(), cupy.cuda.get_current_stream().ptr))
        return real(size)
    monkeypatch.setattr(cupy.cuda, "alloc", alloc, raising=False)
    return made


def test_raw_allocations_come_from_the_pool_and_go_back(raw_allocations):
    before = ember.cuda.memory_allocated()
    ptr = ember.cuda.caching_allocator_alloc(2 ** 20)
    assert ptr and ember.cuda.memory_allocated() == before + 2 ** 20
    assert raw_allocations == [(2 ** 20, 0, ember.cuda.current_stream().cuda_stream)]
    ember.cuda.caching_allocator_delete(ptr)
    assert ember.cuda.memory_allocated() == before
    with pytest.raises(RuntimeError, match=f"invalid device pointer: {ptr:#x}"):
        ember.cuda.caching_allocator_delete(ptr)
    ember.cuda.caching_allocator_delete(0)                  # a null pointer: ignored
    assert ember.cuda.caching_allocator_alloc(0) == 0 and len(raw_allocations) == 1


def test_raw_allocations_follow_the_stream_and_device_asked_for(raw_allocations):
    side = ember.cuda.Stream()
    ptrs = [ember.cuda.caching_allocator_alloc(512, stream=side),
            ember.cuda.caching_allocator_alloc(512, 0, side.cuda_stream)]
    assert [made[2] for made in raw_allocations] == [side.cuda_stream] * 2
    assert ember.cuda.current_stream() != side              # the stream is current only inside
    if ember.cuda.device_count() > 1:
        ptrs.append(ember.cuda.caching_allocator_alloc(512, "cuda:1"))
        assert raw_allocations[-1][1] == 1 and ember.cuda.current_device() == 0
    for ptr in ptrs:
        ember.cuda.caching_allocator_delete(ptr)
    with pytest.raises(TypeError, match="Invalid type for stream argument"):
        ember.cuda.caching_allocator_alloc(512, stream="side")
    with pytest.raises(TypeError, match="'size' must be a non-negative int"):
        ember.cuda.caching_allocator_alloc(-1)


@pytest.fixture
def allocators(monkeypatch):
    """CuPy's current allocator (what ``cupy.cuda.get_allocator`` returns) and a list of
    the sizes of unpooled ``cupy.cuda.Memory`` allocations; the stand-in gets both."""
    cuda, unpooled = _cupy().cuda, []
    if _on_stand_in():
        from tests.gpu import fake_cupy
        monkeypatch.setattr(cuda, "get_allocator", lambda: fake_cupy._STATE["allocator"],
                            raising=False)
        monkeypatch.setattr(cuda, "Memory", lambda size: unpooled.append(size) or size,
                            raising=False)
        monkeypatch.setattr(cuda, "MemoryPointer", lambda mem, offset: ("raw", mem, offset),
                            raising=False)
    yield cuda.get_allocator, unpooled
    ember.cuda.caching_allocator_enable(True)


def test_the_caching_allocator_can_be_switched_off(allocators):
    current, unpooled = allocators
    pooled = current()
    ember.cuda.caching_allocator_enable(False)
    assert current() is _allocator._uncached
    ember.cuda.caching_allocator_enable(False)              # twice: still restorable
    if _on_stand_in():
        assert _allocator._uncached(4096) == ("raw", 4096, 0) and unpooled == [4096]
    else:                       # memory outside the pool: the pool's counts do not move
        before = ember.cuda.memory_allocated()
        x = ember.empty(2 ** 20, device="cuda")
        assert ember.cuda.memory_allocated() == before and x.numel() == 2 ** 20
    ember.cuda.caching_allocator_enable()
    assert current() is pooled
    with ember.cuda.caching_allocator_disabled():
        assert current() is _allocator._uncached
        with ember.cuda.caching_allocator_disabled():
            pass
        assert current() is _allocator._uncached           # the outer block's state
    assert current() is pooled


# --- the synchronization debug mode ----------------------------------------------------------

def test_sync_debug_mode_warns_at_the_callers_line(sync_mode):
    x = ember.ones(3, device="cuda")
    assert ember.cuda.get_sync_debug_mode() == 0
    sync_mode("warn")
    assert ember.cuda.get_sync_debug_mode() == 1
    for read in (lambda: x.sum().item(), x.tolist, x.cpu, lambda: float(x[0]),
                 lambda: bool(x[0]), lambda: repr(x),
                 ember.cuda.current_stream().synchronize):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            read()
        assert [str(w.message) for w in caught] == [SYNC]
        assert caught[0].category is UserWarning and caught[0].filename == __file__
    for quiet in (lambda: x.to("cpu", non_blocking=True), ember.cuda.synchronize,
                  lambda: ember.ones(2).sum().item(), lambda: x + 1):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            quiet()


def test_sync_debug_mode_raises_and_goes_back_to_default(sync_mode):
    x = ember.full((), 2.0, device="cuda")
    sync_mode(2)
    with pytest.raises(RuntimeError, match=f"^{SYNC}$"):
        x.item()
    with pytest.raises(RuntimeError, match=f"^{SYNC}$"):
        x.cpu()
    assert ember.ones(2).tolist() == [1.0, 1.0]             # the CPU's reads wait for nothing
    sync_mode("default")
    assert ember.cuda.get_sync_debug_mode() == 0 and x.item() == 2.0


@pytest.mark.parametrize("mode, message", [
    ("loud", "invalid value of debug_mode, expected one of `default`, `warn`, `error`"),
    (3, "invalid value of debug_mode, expected one of 0,1,2"),
    (-1, "invalid value of debug_mode, expected one of 0,1,2"),
    (1.0, "invalid argument to set_sync_debug_mode"),
    (True, "invalid argument to set_sync_debug_mode")])
def test_sync_debug_mode_rejects_what_pytorch_rejects(sync_mode, mode, message):
    sync_mode("warn")
    with pytest.raises(RuntimeError, match=f"^{message}$"):
        sync_mode(mode)
    assert ember.cuda.get_sync_debug_mode() == 1


def test_sync_debug_mode_says_once_that_it_is_a_prototype(monkeypatch):
    monkeypatch.setattr(_sync_debug, "_PROTOTYPE_WARNED", [])
    try:
        with pytest.warns(UserWarning, match="Synchronization debug mode is a prototype"):
            ember.cuda.set_sync_debug_mode(0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ember.cuda.set_sync_debug_mode(0)
    finally:
        _sync_debug.MODE[0] = 0


# --- cuFFT plan caches, handles --------------------------------------------------------------

class _PlanCache:
    """CuPy's PlanCache as far as the manager uses it."""

    def __init__(self):
        self.limit, self.plans = 16, ["plan"]

    def get_size(self):
        return self.limit

    def set_size(self, size):
        self.limit = size

    def get_curr_size(self):
        return len(self.plans)

    def clear(self):
        self.plans = []


@pytest.fixture
def plan_caches(monkeypatch):
    """The manager, over stand-in plan caches (one per GPU) on the stand-in."""
    cupy = _cupy()
    if _on_stand_in():
        caches = [_PlanCache() for _ in range(ember.cuda.device_count())]
        config = types.SimpleNamespace(
            get_plan_cache=lambda: caches[cupy.cuda.runtime.getDevice()])
        monkeypatch.setattr(cupy.fft, "config", config, raising=False)
    limits = [backends_cuda.cufft_plan_cache[i].max_size
              for i in range(ember.cuda.device_count())]
    yield backends_cuda.cufft_plan_cache
    for i, limit in enumerate(limits):
        backends_cuda.cufft_plan_cache[i].max_size = limit


def test_cufft_plan_caches(plan_caches):
    first = plan_caches[0]
    assert plan_caches["cuda:0"] is first and plan_caches[ember.device("cuda", 0)] is first
    first.max_size = 32
    assert first.max_size == plan_caches.max_size == 32
    plan_caches.max_size = 5                                # the current GPU's
    assert first.max_size == 5
    if ember.cuda.device_count() > 1:
        assert plan_caches[1].max_size != 5
        with ember.cuda.device(1):
            plan_caches.max_size = 9
        assert (plan_caches[1].max_size, first.max_size) == (9, 5)
    if not _on_stand_in():                                  # a transform keeps its plan
        ember.fft.fft(ember.randn(64, device="cuda"))
    assert first.size >= 1
    plan_caches.clear()
    assert first.size == 0
    with pytest.raises(RuntimeError, match=r"^.size is a read-only property showing the number "
                                           r"of plans currently in the cache"):
        first.size = 3
    with pytest.raises(RuntimeError, match="cuFFT plan cache size must be non-negative, but "
                                           "got -1"):
        plan_caches.max_size = -1
    with pytest.raises(TypeError, match="must be int, not float"):
        first.max_size = 2.0
    count = ember.cuda.device_count()
    with pytest.raises(RuntimeError, match=f"expected 0 <= device index < {count}, but got "
                                           f"device with index {count}"):
        plan_caches[count]


def test_solver_handle_and_cuda_status(monkeypatch):
    device = _cupy().cuda.device
    if _on_stand_in():
        monkeypatch.setattr(device, "get_cusolver_handle", lambda: 0x50171, raising=False)
    handle = ember.cuda.current_solver_handle()
    assert isinstance(handle, int) and handle == device.get_cusolver_handle()
    assert (ember.cuda.cudaStatus.SUCCESS, ember.cuda.cudaStatus.ERROR_NOT_READY) == (0, 34)
    assert issubclass(ember.cuda.DeferredCudaCallError, Exception)


def test_profiler_collection_starts_and_stops(monkeypatch):
    calls = []
    if _on_stand_in():
        monkeypatch.setattr(_cupy().cuda, "profiler", types.SimpleNamespace(
            start=lambda: calls.append("start"), stop=lambda: calls.append("stop")),
            raising=False)
    with ember.cuda.profiler.profile():
        y = ember.ones(4, device="cuda") * 2
    ember.cuda.profiler.start()
    ember.cuda.profiler.stop()
    assert y.sum().item() == 8.0 and ember.cuda.profiler.__all__ == ["start", "stop", "profile"]
    if _on_stand_in():
        assert calls == ["start", "stop"] * 2


def test_profiler_refusals_are_cuda_errors(monkeypatch):
    if not _on_stand_in():
        pytest.skip("a refusal is made up on the stand-in")
    runtime = _cupy().cuda.runtime

    def refuse():
        error = runtime.CUDARuntimeError(1)
        error.status = 1
        raise error
    monkeypatch.setattr(_cupy().cuda, "profiler", types.SimpleNamespace(start=refuse),
                        raising=False)
    with pytest.raises(ember.cuda.CudaError, match="cudaErrorInvalidValue") as info:
        ember.cuda.profiler.start()
    assert info.value.code == 1


# --- which attention kernel would run --------------------------------------------------------

def _flash_loaded():
    from ember.backend.cuda_kernels import OVERRIDES
    return "nn.functional.scaled_dot_product_attention" in OVERRIDES


def _params(*shape, device="cuda", **kw):
    q = ember.randn(shape, device=device)
    return backends_cuda.SDPAParams(q, q, q, kw.get("mask"), kw.get("dropout", 0.0),
                                    kw.get("causal", False), kw.get("gqa", False))


def _debug(can_use, params):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        answer = can_use(params, debug=True)
    return answer, [str(w.message) for w in caught]


def test_flash_attention_answers_for_ember_s_kernel():
    params = _params(2, 3, 8, 16)
    answer, said = _debug(backends_cuda.can_use_flash_attention, params)
    if _flash_loaded():
        assert (answer, said) == (True, [])
    else:
        assert answer is False and said == [
            "ember's flash attention kernel is not loaded here: it needs Triton, and "
            "EMBER_CUDA_KERNELS unset or 1"]
    assert backends_cuda.can_use_flash_attention(params) is answer
    on_cpu = _params(2, 3, 8, 16, device="cpu")
    assert _debug(backends_cuda.can_use_flash_attention, on_cpu) == (False, [
        "ember's flash attention needs its tensors on one CUDA device, but got query on cpu, "
        "key on cpu, value on cpu"])
    with ember.nn.attention.sdpa_kernel(ember.nn.attention.SDPBackend.MATH):
        assert _debug(backends_cuda.can_use_flash_attention, params) == (False, [
            "Flash attention has been turned off (enable_flash_sdp or sdpa_kernel)."])


def test_ember_has_no_efficient_or_cudnn_attention():
    params = _params(1, 2, 4, 8)
    assert _debug(backends_cuda.can_use_efficient_attention, params) == (False, [
        "ember has no memory-efficient attention kernel: its generic attention runs where "
        "PyTorch would use one"])
    assert _debug(backends_cuda.can_use_cudnn_attention, params) == (False, [
        "ember has no cuDNN attention kernel: its generic attention runs where PyTorch would "
        "use one"])
    assert backends_cuda.is_ck_sdpa_available() is False
    with pytest.raises(TypeError, match="argument 'params' must be SDPAParams, not tuple"):
        backends_cuda.can_use_flash_attention((1, 2))


def _flash_cases():
    """(name, query, key, value, attn_mask, dropout, is_causal, enable_gqa) on the GPU."""
    def r(*shape, dtype=ember.float32):
        return ember.randn(shape, device="cuda").to(dtype)
    q = r(1, 2, 3, 4)
    bool_mask = ember.ones(3, 5, dtype=ember.bool, device="cuda")
    yield "plain", q, r(1, 2, 5, 4), r(1, 2, 5, 6), None, 0.0, False, False
    yield "causal", q, q, q, None, 0.0, True, False
    yield "half", *[r(1, 2, 3, 4, dtype=ember.float16)] * 3, None, 0.0, False, False
    yield "bfloat16", *[r(1, 2, 3, 4, dtype=ember.bfloat16)] * 3, None, 0.0, False, False
    yield "double", *[r(1, 2, 3, 4, dtype=ember.float64)] * 3, None, 0.0, False, False
    yield "mixed dtypes", q, r(1, 2, 3, 4, dtype=ember.float16), q, None, 0.0, False, False
    yield "3-D", r(2, 3, 4), r(2, 5, 4), r(2, 5, 4), None, 0.0, False, False
    yield "3-D mask", r(2, 3, 4), r(2, 5, 4), r(2, 5, 4), r(2, 3, 5), 0.0, False, False
    yield "3-D grouped", r(4, 3, 4), r(2, 3, 4), r(2, 3, 4), None, 0.0, False, True
    yield "grouped", r(1, 4, 3, 4), r(1, 2, 3, 4), r(1, 2, 3, 4), None, 0.0, False, True
    yield "uneven groups", r(1, 4, 3, 4), r(1, 2, 3, 4), r(1, 1, 3, 4), None, 0.0, False, True
    yield "batch broadcast", r(2, 2, 3, 4), r(1, 2, 3, 4), r(1, 2, 3, 4), None, 0.0, False, \
        False
    yield "5-D", *[r(1, 1, 2, 3, 4)] * 3, None, 0.0, False, False
    yield "ranks differ", q, r(2, 3, 4), r(2, 3, 4), None, 0.0, False, False
    yield "wide heads", *[r(1, 1, 3, 160)] * 3, None, 0.0, False, False
    yield "empty", *[r(1, 2, 0, 4)] * 3, None, 0.0, False, False
    yield "strided rows", r(1, 2, 4, 3).transpose(-1, -2), r(1, 2, 5, 4), r(1, 2, 5, 4), None, \
        0.0, False, False
    yield "bool mask", q, r(1, 2, 5, 4), r(1, 2, 5, 4), bool_mask, 0.0, False, False
    yield "float mask", q, r(1, 2, 5, 4), r(1, 2, 5, 4), r(1, 1, 3, 5), 0.0, False, False
    yield "mask too big", q, r(1, 2, 5, 4), r(1, 2, 5, 4), r(2, 2, 3, 5), 0.0, False, False
    yield "int mask", q, r(1, 2, 5, 4), r(1, 2, 5, 4), bool_mask.long(), 0.0, False, False
    yield "mask and causal", q, q, q, r(3, 3), 0.0, True, False
    yield "dropout", q, q, q, None, 0.3, False, False
    yield "dropout 1", q, q, q, None, 1.0, False, False


def flash_disagreements():
    """[(case, can_use_flash_attention, whether the kernel took it)] where the two differ, and
    the set of answers given. Needs the kernels loaded."""
    cupy, differ, answers = _cupy(), [], set()         # loads the backend and its kernels
    from ember.backend.cuda_kernels import OVERRIDES
    fast = OVERRIDES["nn.functional.scaled_dot_product_attention"]
    for name, q, k, v, mask, dropout, causal, gqa in _flash_cases():
        can = backends_cuda.can_use_flash_attention(
            backends_cuda.SDPAParams(q, k, v, mask, dropout, causal, gqa))
        arrays = [t._data for t in (q, k, v)] + [None if mask is None else mask._data]
        try:
            took = fast(cupy, *arrays, dropout, causal, None, gqa) is not None
        except (RuntimeError, IndexError):
            took = False                # the op's own check: the generic code raises it too
        answers.add(can)
        if can != took:
            differ.append((name, can, took))
    return differ, sorted(answers)


def test_flash_answers_agree_with_the_kernel():
    if _flash_loaded():
        differ, answers = flash_disagreements()
    elif _on_stand_in() and "TRITON_INTERPRET" not in os.environ:
        pytest.importorskip("triton")
        script = textwrap.dedent("""
            import json
            from tests.gpu import fake_cupy
            fake_cupy.install()
            from ember.backend.cuda_kernels import _launch
            from tests.gpu.host_buffers import Host
            _launch.buffer = Host
            _launch.follow_cupy = lambda cupy: None
            from tests.gpu.test_cuda_api_extra import flash_disagreements
            print(json.dumps(flash_disagreements()))
        """)
        env = dict(os.environ, TRITON_INTERPRET="1", EMBER_CUDA_KERNELS="1",
                   PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
        run = subprocess.run([sys.executable, "-W", "ignore", "-c", script], env=env,
                             capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert run.returncode == 0, run.stderr[-3000:]
        differ, answers = json.loads(run.stdout.strip().splitlines()[-1])
    else:
        pytest.skip("ember's flash kernel is not loaded here")
    assert differ == [] and answers == [False, True]
