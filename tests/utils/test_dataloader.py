"""The DataLoader, single- and multi-process: batches, seeding, sharding, failures, shutdown."""

import gc
import glob
import os
import signal
import time
import warnings

import numpy as np
import pytest

import ember
from ember.utils.data import (DataLoader, Dataset, IterableDataset, TensorDataset,
                              get_worker_info)
from ember.utils.data import _shared


def _shm_files():
    return set(glob.glob(f"/dev/shm/ember-{os.getpid()}-*"))


@pytest.fixture(autouse=True)
def no_leaks():
    before = _shm_files()
    yield
    gc.collect()
    assert _shm_files() <= before, "a loader left shared-memory files behind"


def _data(n=20):
    return TensorDataset(ember.arange(n * 3.0).reshape(n, 3), ember.arange(n))


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_cover_the_dataset(workers):
    loader = DataLoader(_data(), batch_size=6, shuffle=True, num_workers=workers)
    batches = list(loader)
    assert len(loader) == len(batches) == 4
    assert [len(b[1]) for b in batches] == [6, 6, 6, 2]
    labels = ember.cat([b[1] for b in batches])
    assert sorted(labels.tolist()) == list(range(20))
    for x, y in batches:
        np.testing.assert_array_equal(x.numpy()[:, 0], y.numpy() * 3.0)


@pytest.mark.parametrize("workers", [0, 2])
def test_in_order_and_drop_last(workers):
    loader = DataLoader(_data(), batch_size=6, drop_last=True, num_workers=workers)
    assert [b[1].tolist()[0] for b in loader] == [0, 6, 12] and len(loader) == 3


def test_large_batches_arrive_through_shared_memory_intact():
    big = TensorDataset(ember.randn(4096, 64), ember.arange(4096))
    for x, y in DataLoader(big, batch_size=1024, num_workers=2):
        assert x.shape == (1024, 64) and x._data.flags.writeable
        np.testing.assert_array_equal(x.numpy(), big.tensors[0][y].numpy())
        x.add_(1)                                  # a private copy-on-write mapping


def test_small_samples_viewing_a_dataset_travel_alone(tmp_path):
    # plain pickling keeps a view with the memory it views (as ember.save does); a worker
    # sends only the sample's own elements
    data = ember.arange(40000.0).view(10000, 4)
    sample = TensorDataset(data)[7][0]
    dumps = _shared.Transport(str(tmp_path), "t").pickler_for(0)
    sent = dumps(sample)
    assert len(sent) < 1000
    got = _shared.loads(sent)
    assert got.tolist() == [28.0, 29.0, 30.0, 31.0] and got.storage_offset() == 0
    loader = DataLoader(TensorDataset(data), batch_size=None, num_workers=1, sampler=[3, 9999])
    assert [x[0].tolist() for x in loader] == [[12.0, 13.0, 14.0, 15.0],
                                               [39996.0, 39997.0, 39998.0, 39999.0]]


def test_batch_size_none_and_custom_collate():
    loader = DataLoader(list(range(5)), batch_size=None)
    assert [int(x) for x in loader] == [0, 1, 2, 3, 4]
    loader = DataLoader(list(range(5)), batch_size=2, collate_fn=lambda b: sum(b))
    assert list(loader) == [1, 5, 4]


class Noisy(Dataset):
    """Each sample is a random draw: shows which seed produced it."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return (ember.rand(()).item(), float(np.random.rand()),
                -1 if info is None else info.id)


def test_workers_get_distinct_reproducible_seeds():
    def epoch(loader):
        return [tuple(row) for b in loader for row in zip(*[t.tolist() for t in b])]
    ember.manual_seed(0)
    loader = DataLoader(Noisy(), batch_size=2, num_workers=2)
    first, second = epoch(loader), epoch(loader)
    ember.manual_seed(0)
    assert epoch(DataLoader(Noisy(), batch_size=2, num_workers=2)) == first
    assert {w for *_, w in first} == {0, 1}
    by_worker = {w: [r[0] for r in first if r[2] == w] for w in (0, 1)}
    assert by_worker[0] != by_worker[1]                       # different ember streams
    numpy_by_worker = {w: [r[1] for r in first if r[2] == w] for w in (0, 1)}
    assert numpy_by_worker[0] != numpy_by_worker[1]           # NumPy is seeded too
    assert [r[0] for r in second] != [r[0] for r in first]    # and epochs differ


class Shards(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        lo, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(lo, 11, step))


@pytest.mark.parametrize("workers", [0, 3])
def test_iterable_dataset_sharded_by_worker_info(workers):
    got = [x for b in DataLoader(Shards(), batch_size=2, num_workers=workers) for x in b.tolist()]
    assert sorted(got) == list(range(11))


class Failing(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i == 5:
            raise ValueError("sample 5 is corrupt")
        return i


def test_worker_exception_reraises_with_worker_id_and_traceback():
    loader = DataLoader(Failing(), batch_size=2, num_workers=2)
    with pytest.raises(ValueError) as info:
        list(loader)
    message = str(info.value)
    assert "Caught ValueError in DataLoader worker process 0" in message
    assert "sample 5 is corrupt" in message and "Traceback" in message
    assert "__getitem__" in message


class Slow(Dataset):
    def __init__(self, delay):
        self.delay = delay

    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            time.sleep(self.delay)
        return i


class Suicidal(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 4:
            os.kill(os.getpid(), signal.SIGKILL)
        return i


def test_killed_worker_raises_promptly():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader worker 0 \(pid \d+\) was killed by "
                                           r"signal SIGKILL"):
        list(DataLoader(Suicidal(), batch_size=2, num_workers=2))
    assert time.monotonic() - start < 5


def test_timeout_raises():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.5 seconds"):
        list(DataLoader(Slow(30), batch_size=1, num_workers=1, timeout=0.5))
    assert time.monotonic() - start < 5


def test_break_and_garbage_collection_shut_workers_down():
    loader = DataLoader(_data(400), batch_size=4, num_workers=2)
    it = iter(loader)
    next(it)
    workers = list(it._workers)
    assert all(w.is_alive() for w in workers)
    del it
    gc.collect()
    deadline = time.monotonic() + 5
    while any(w.is_alive() for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(w.is_alive() for w in workers)


def test_persistent_workers_survive_epochs():
    loader = DataLoader(Noisy(), batch_size=4, num_workers=2, persistent_workers=True)
    first = [b[0].tolist() for b in loader]
    pids = [w.pid for w in loader._iterator._workers]
    second = [b[0].tolist() for b in loader]
    assert [w.pid for w in loader._iterator._workers] == pids and first != second
    loader._iterator._shutdown_workers()


def test_out_of_order_yields_everything():
    got = [x for b in DataLoader(Slow(0.3), batch_size=1, num_workers=2, in_order=False)
           for x in b.tolist()]
    assert sorted(got) == [0, 1, 2, 3] and got[-1] == 2


def test_bad_options_are_refused_as_pytorch_words_them():
    data = list(range(4))
    cases = [
        (dict(num_workers=-1), "num_workers option should be non-negative"),
        (dict(timeout=-1), "timeout option should be non-negative"),
        (dict(prefetch_factor=2), "prefetch_factor option could only be specified"),
        (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
        (dict(sampler=[0, 1], shuffle=True), "sampler option is mutually exclusive with shuffle"),
        (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
        (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching"),
        (dict(num_workers=1, multiprocessing_context="bogus"),
         r"multiprocessing_context option should specify a valid start method in \['fork', "
         r"'spawn', 'forkserver'\], but got multiprocessing_context='bogus'"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            DataLoader(data, **kwargs)
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        DataLoader(Shards(), shuffle=True)
    loader = DataLoader(data)
    with pytest.raises(ValueError, match="batch_size attribute should not be set after "
                                         "DataLoader is initialized"):
        loader.batch_size = 3


def test_iterators_have_pytorchs_class_names():
    from ember.utils.data import dataloader
    single, multi = iter(DataLoader(_data(4))), iter(DataLoader(_data(4), num_workers=1))
    assert type(single).__name__ == "_SingleProcessDataLoaderIter"
    assert type(multi).__name__ == "_MultiProcessingDataLoaderIter"
    assert isinstance(multi, dataloader._BaseDataLoaderIter) and len(list(multi)) == 4


class OverLong(IterableDataset):
    def __len__(self):
        return 3

    def __iter__(self):
        return iter(range(5))

    def __repr__(self):
        return "OverLong()"


@pytest.mark.parametrize("workers", [0, 1])
def test_an_iterable_longer_than_its_len_warns_per_extra_sample(workers):
    loader = DataLoader(OverLong(), batch_size=None, num_workers=workers)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(loader) == [0, 1, 2, 3, 4]          # len() not read yet: no warning
        assert len(loader) == 3 and list(loader) == [0, 1, 2, 3, 4]
    messages = [str(w.message) for w in caught if "IterableDataset" in str(w.message)]
    assert [m.split("fetched.")[0] for m in messages] == [
        f"Length of IterableDataset OverLong() was reported to be 3(when accessing "
        f"len(dataloader)), but {n} samples have been " for n in (4, 5)]
    assert ("For multiprocessing data-loading" in messages[0]) == (workers > 0)
    assert {w.filename for w in caught if "IterableDataset" in str(w.message)} == {__file__}


class BigList(Dataset):
    def __init__(self):
        self.items = list(range(200_000))

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return self.items[i]


def test_large_python_list_warns_once():
    with pytest.warns(UserWarning, match="BigList.items is a Python list of 200000 items"):
        list(DataLoader(BigList(), num_workers=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(DataLoader(BigList(), num_workers=1))


def test_small_shared_memory_falls_back_to_files_with_a_warning(monkeypatch, tmp_path):
    monkeypatch.setattr(_shared, "_MIN_FREE", 1 << 62)
    monkeypatch.setattr(_shared, "_warned", False)
    monkeypatch.setattr(_shared.tempfile, "gettempdir", lambda: str(tmp_path))
    big = TensorDataset(ember.randn(64, 1024))
    with pytest.warns(RuntimeWarning, match="has only .* MiB free"):
        batches = list(DataLoader(big, batch_size=32, num_workers=1))
    np.testing.assert_array_equal(batches[1][0].numpy(), big.tensors[0][32:].numpy())
    assert list(tmp_path.iterdir()) == []


_EXIT_SCRIPT = """
import ember
from ember.utils.data import DataLoader, TensorDataset
it = iter(DataLoader(TensorDataset(ember.randn(4096, 256)), batch_size=512, num_workers=2))
next(it)
print(" ".join(str(w.pid) for w in it._workers), flush=True)
"""


def test_interpreter_exit_leaves_no_workers_or_files(tmp_path):
    import subprocess
    import sys
    script = tmp_path / "exit.py"
    script.write_text(_EXIT_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=60, env=env, check=True)
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)
    assert not glob.glob("/dev/shm/ember-*") or all(
        f"ember-{p}-" not in f for f in glob.glob("/dev/shm/ember-*") for p in pids)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:          # a zombie has exited
        return f.read().split()[2] != "Z"


def test_custom_collate_fn_gets_a_list_of_samples():
    seen = []
    ds = TensorDataset(ember.arange(4.0), ember.arange(4))
    batch = next(iter(DataLoader(ds, batch_size=2, collate_fn=lambda b: seen.append(b) or b)))
    assert type(seen[0]) is list and batch is seen[0]
    assert [(x.item(), y.item()) for x, y in batch] == [(0.0, 0), (1.0, 1)]
    sub = ember.utils.data.Subset(ds, [3, 1])
    assert type(next(iter(DataLoader(sub, batch_size=2, collate_fn=lambda b: b)))) is list


def test_custom_collate_fn_map_sees_each_tensor():
    from functools import partial

    from ember.utils.data._utils.collate import collate, default_collate_fn_map
    table = dict(default_collate_fn_map)
    table[ember.Tensor] = lambda batch, *, collate_fn_map=None: ember.stack(batch) * 100
    ds = TensorDataset(ember.arange(3))
    out = next(iter(DataLoader(ds, batch_size=3, collate_fn=partial(collate,
                                                                    collate_fn_map=table))))
    assert out[0].tolist() == [0, 100, 200]
    assert ember.utils.data._utils.collate.collate is collate


def test_more_workers_than_cpus_warns(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    with pytest.warns(UserWarning, match="will create 2 worker processes in total. Our "
                                         "suggested max number of worker in current system is 1"):
        DataLoader(list(range(4)), num_workers=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DataLoader(list(range(4)), num_workers=1)


def test_each_iterator_draws_a_base_seed_from_the_generator():
    ember.manual_seed(0)
    untouched = ember.rand(1).item()
    ember.manual_seed(0)
    list(DataLoader(list(range(3))))                # single-process, no shuffle: still one draw
    assert ember.rand(1).item() != untouched
    g = ember.Generator().manual_seed(5)
    state = g.get_state()
    list(DataLoader(list(range(3)), generator=g))
    assert not ember.equal(g.get_state(), state)
