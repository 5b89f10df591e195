"""ember's CPU worker threads (set_num_threads) and allocator policy."""

import platform
import threading
import warnings

import numpy as np
import pytest

import ember
from ember.backend.blas_threads import controls
from ember.backend.cpu_kernels import _cores, _default_threads, map_chunks, map_elementwise
from ember.backend.cpu_memory import keep_freed_memory


@pytest.fixture
def threads():
    before = ember.get_num_threads()
    blas_before = [(setter, getter()) for setter, getter in controls()]
    yield
    ember.set_num_threads(before)
    for setter, count in blas_before:
        setter(count)


def test_set_and_get_num_threads(threads):
    ember.set_num_threads(3)
    assert ember.get_num_threads() == 3
    for bad in (0, -1):
        with pytest.raises(RuntimeError, match="set_num_threads expects a positive integer"):
            ember.set_num_threads(bad)
    for bad, kind in ((1.5, "float"), (True, "bool"), ("2", "str")):
        with pytest.raises(RuntimeError, match=f"set_num_threads expects an int, but got {kind}"):
            ember.set_num_threads(bad)


@pytest.mark.skipif(not controls(), reason="NumPy's BLAS is not OpenBLAS")
def test_set_num_threads_sets_the_blas_threads_of_products(threads):
    # as torch.set_num_threads(1) makes its matrix products single-threaded
    for n in (1, 2):
        ember.set_num_threads(n)
        assert [getter() for _, getter in controls()] == [n] * len(controls())


@pytest.mark.parametrize("env, expected", [
    ({}, "cores"), ({"OMP_NUM_THREADS": "1"}, 1), ({"MKL_NUM_THREADS": "1"}, 1),
    ({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "64"}, "cores"),
    ({"OMP_NUM_THREADS": "64", "MKL_NUM_THREADS": "1"}, 1),
    ({"OMP_NUM_THREADS": "abc"}, "cores"), ({"OMP_NUM_THREADS": "0"}, "cores"),
    ({"OMP_NUM_THREADS": "1,2"}, 1)])
def test_default_thread_count_reads_the_environment_as_torch_does(monkeypatch, env, expected):
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert _default_threads() == (_cores() if expected == "cores" else expected)


def test_map_chunks_covers_the_range_in_order_on_worker_threads(threads):
    ember.set_num_threads(2)
    names = set()

    def work(lo, hi):
        names.add(threading.current_thread().name)
        return list(range(lo, hi))
    parts = map_chunks(np, 10, 3, work)
    # four spans of at most 3, as many per thread: 2 + 3 + 2 + 3
    assert parts == [[0, 1], [2, 3, 4], [5, 6], [7, 8, 9]]
    assert all(n.startswith("ember-cpu") for n in names)
    spans = map_chunks(np, 32, 3, lambda lo, hi: hi - lo)
    assert sum(spans) == 32 and max(spans) <= 3 and len(spans) % 2 == 0
    assert map_chunks(np, 2, 3, work) == [[0, 1]]          # one chunk: the calling thread
    ember.set_num_threads(1)
    names.clear()
    assert map_chunks(np, 10, 5, work) == [list(range(5)), list(range(5, 10))]
    assert names == {threading.current_thread().name}


def _recording_add(calls):
    def add(xp, a, b, out=None):
        calls.append((a.shape, threading.current_thread().name))
        return xp.add(a, b, out=out)
    return add


def test_map_elementwise_splits_large_arrays_into_one_output_on_workers(threads):
    ember.set_num_threads(2)
    a = np.arange(1_100_000, dtype=np.float32).reshape(1100, 1000)
    b = np.full((1100, 1000), 0.5, np.float32)
    calls = []
    out = map_elementwise(np, _recording_add(calls), a, b)
    assert out.shape == (1100, 1000) and out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, a + b)
    # 1.1M elements in spans of at most 65536, as many per thread: eighteen of 61111-61112
    assert sorted({shape for shape, _ in calls}) == [(61_111,), (61_112,)] and len(calls) == 18
    # taken by the calling thread and the workers, as each comes free
    here = threading.current_thread().name
    assert all(name == here or name.startswith("ember-cpu") for _, name in calls)
    calls = []      # under a million elements the spans stay on the calling thread
    map_elementwise(np, _recording_add(calls), a[:300], b[:300])
    assert [shape for shape, _ in calls] == [(65_536,)] * 4 + [(37_856,)]
    assert {name for _, name in calls} == {threading.current_thread().name}


def test_map_elementwise_does_not_wait_for_workers_busy_elsewhere(threads):
    # both workers held by other work: the caller computes every span itself and returns
    # while they are still held (it waited for its queued helper before round 29)
    from ember.backend.cpu_kernels import _Pool
    ember.set_num_threads(2)
    map_chunks(np, 4, 1, lambda lo, hi: None)           # the pool, started
    release, started = threading.Event(), threading.Semaphore(0)

    def hold():
        started.release()
        release.wait(30)
    held = [_Pool.executor.submit(hold) for _ in range(2)]
    for _ in held:
        assert started.acquire(timeout=30)
    try:
        a = np.arange(1_100_000, dtype=np.float32)
        calls = []
        out = map_elementwise(np, _recording_add(calls), a, a)
        assert not any(h.done() for h in held)
    finally:
        release.set()
    np.testing.assert_array_equal(out, a + a)
    assert len(calls) == 18
    assert {name for _, name in calls} == {threading.current_thread().name}


def test_map_elementwise_span_that_fails_stops_the_others_and_raises(threads):
    # the caller's span fails while the worker runs one: the worker takes no further span,
    # and the error reaches the caller once the worker is done
    ember.set_num_threads(2)
    worker_in, caller_failed = threading.Semaphore(0), threading.Event()
    calls = []

    def kernel(xp, a, b, out=None):
        calls.append(threading.current_thread().name)
        if threading.current_thread().name.startswith("ember-cpu"):
            worker_in.release()
            assert caller_failed.wait(30)
            return xp.add(a, b, out=out)
        assert worker_in.acquire(timeout=30)
        caller_failed.set()
        raise ValueError("span failed")
    a = np.ones(1_100_000, np.float32)
    with pytest.raises(ValueError, match="span failed"):
        map_elementwise(np, kernel, a, a)
    assert len(calls) == 2          # one span each of 18

    worker_failed = threading.Event()

    def worker_fails(xp, a, b, out=None):        # a worker's error reaches the caller
        if threading.current_thread().name.startswith("ember-cpu"):
            worker_failed.set()
            raise FloatingPointError("on a worker")
        assert worker_failed.wait(30)
        return xp.add(a, b, out=out)
    with pytest.raises(FloatingPointError, match="on a worker"):
        map_elementwise(np, worker_fails, a, a)


def test_map_elementwise_keeps_small_mixed_or_one_thread_work_on_the_caller(threads):
    ember.set_num_threads(2)
    big = np.ones((400, 400), np.float32)
    for a, b in ((np.ones(8, np.float32), np.ones(8, np.float32)),     # small
                 (big, big.T),                                         # not contiguous
                 (big, big.astype(np.float64))):                       # two dtypes
        calls = []
        np.testing.assert_array_equal(map_elementwise(np, _recording_add(calls), a, b), a + b)
        assert calls == [(a.shape, threading.current_thread().name)]
    ember.set_num_threads(1)          # one thread: the same spans, in turn on this thread
    calls = []
    np.testing.assert_array_equal(map_elementwise(np, _recording_add(calls), big, big), big * 2)
    here = threading.current_thread().name
    assert calls == [((65_536,), here), ((65_536,), here), ((28_928,), here)]


def test_gelu_and_its_gradient_on_two_threads_are_bitwise_those_of_one(threads):
    from ember.ops.activations_smooth import _gelu_erf_form, _gelu_erf_grad
    x = np.random.default_rng(0).standard_normal(1_100_003).astype(np.float32) * 4
    x[:5] = [np.inf, -np.inf, np.nan, 0.0, -0.0]
    g = np.linspace(-3, 3, x.size, dtype=np.float32)
    results = []
    for n in (1, 2):
        ember.set_num_threads(n)
        t = ember.tensor(x, requires_grad=True)
        with warnings.catch_warnings():     # inf and 0 stay silent on the workers too
            warnings.simplefilter("error")
            y = ember.nn.functional.gelu(t)
            y.backward(ember.tensor(g))
        results.append((y.detach().numpy().view(np.uint32), t.grad.numpy().view(np.uint32)))
    with np.errstate(all="ignore"):         # the kernels in one piece, on this thread
        whole = (_gelu_erf_form(np, x).view(np.uint32),
                 _gelu_erf_grad(np, g, x).view(np.uint32))
    for one, two, unsplit in zip(*results, whole):
        np.testing.assert_array_equal(one, two)
        np.testing.assert_array_equal(one, unsplit)


def test_set_num_threads_while_other_threads_run_spans(threads):
    x = ember.randn(1 << 20)
    failures = []

    def work():
        try:
            for _ in range(4):
                ember.nn.functional.gelu(x)
        except Exception as e:      # noqa: BLE001 (the test reports any failure)
            failures.append(e)
    runners = [threading.Thread(target=work) for _ in range(3)]
    for r in runners:
        r.start()
    for n in (1, 2) * 10:
        ember.set_num_threads(n)    # shuts the executor down under the runners' feet
    for r in runners:
        r.join()
    assert failures == []


def test_map_chunks_raises_a_chunks_error(threads):
    ember.set_num_threads(2)

    def work(lo, hi):
        if lo:
            raise ValueError(f"chunk {lo}")
        return lo
    with pytest.raises(ValueError, match="chunk 5"):
        map_chunks(np, 10, 5, work)


def test_convolution_is_the_same_on_one_thread_and_several(threads):
    # big enough (18 MiB of columns) to be cut into chunks
    x = ember.randn(64, 16, 16, 16, dtype=ember.float64)
    w = ember.randn(8, 16, 3, 3, dtype=ember.float64)
    ember.set_num_threads(1)
    one = ember.conv2d(x, w, padding=1)
    ember.set_num_threads(2)
    two = ember.conv2d(x, w, padding=1)
    assert ember.equal(one, two)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the policy is glibc's mallopt")
def test_freed_memory_policy_applies_on_glibc():
    assert keep_freed_memory() is True


def test_float32_erf_on_two_threads_is_bitwise_that_of_one(threads):
    x = np.random.default_rng(1).standard_normal(1_100_001).astype(np.float32) * 3
    x[:5] = [np.inf, -np.inf, np.nan, 1e30, -0.0]      # 1e30 overflows x * x: silent
    results = []
    for n in (1, 2):
        ember.set_num_threads(n)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            results.append(ember.erf(ember.tensor(x)).numpy().view(np.uint32))
    np.testing.assert_array_equal(*results)
    assert results[0][3] == np.float32(1).view(np.uint32)
