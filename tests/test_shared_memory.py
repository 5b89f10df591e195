"""Tensor.share_memory_ / is_shared and Module.share_memory across real processes: children
(fork and spawn) write into the parent's shared tensors, tensors sent through queues and
process arguments attach to the same memory, Hogwild-style updates to a shared model land,
ember.save still writes the bytes, and segments leave /dev/shm once released."""

import gc
import io
import multiprocessing
import os
import pickle
import sys
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import ember
from ember import _shared_memory

posix_shm = pytest.mark.skipif(not sys.platform.startswith("linux"),
                               reason="segments are files in /dev/shm on Linux")


def _name(t):
    return _shared_memory.segment_of(t._data).name


def _exists(name):
    return os.path.exists(f"/dev/shm/{name}")


# ----- what the children run ----------------------------------------------------------------

def add_one(t):
    t.add_(1)


def add_one_and_send_back(inbox, outbox):
    t = inbox.get()
    t.add_(1)
    outbox.put((t.is_shared(), t))


def make_and_send(outbox, done):
    t = ember.full((2, 2), 7.0).share_memory_()
    outbox.put(t)
    done.wait(30)          # keep the segment alive until the parent has attached


def hogwild_rows(model, row, steps):
    with ember.no_grad():
        for _ in range(steps):
            model.weight[row].add_(1.0)


def sgd_step(model, row):
    opt = ember.optim.SGD(model.parameters(), lr=1.0)
    opt.zero_grad()
    model.weight[row].sum().backward()
    opt.step()


def load_and_send(path, outbox):
    outbox.put(ember.load(path).tolist())


# ----- across processes ----------------------------------------------------------------------

@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_child_writes_into_a_shared_tensor(method):
    ctx = multiprocessing.get_context(method)
    t = ember.zeros(2, 3).share_memory_()
    p = ctx.Process(target=add_one, args=(t,))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert t.tolist() == [[1.0] * 3] * 2


def test_a_queue_round_trip_shares_memory():
    ctx = multiprocessing.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    t = ember.arange(6.0).reshape(2, 3).clone().share_memory_()
    p = ctx.Process(target=add_one_and_send_back, args=(inbox, outbox))
    p.start()
    inbox.put(t[:, 1:])                  # a view: offset and strides travel with the name
    shared_there, back = outbox.get(timeout=60)
    p.join(60)
    assert shared_there and back.is_shared()
    assert t.tolist() == [[0.0, 2.0, 3.0], [3.0, 5.0, 6.0]]
    back.add_(10)                        # the same memory again in this process
    assert t.tolist() == [[0.0, 12.0, 13.0], [3.0, 15.0, 16.0]]
    assert back.stride() == (3, 1) and back.data_ptr() == t[:, 1:].data_ptr()


@posix_shm
def test_a_segment_a_child_made_stays_after_the_child_ends():
    ctx = multiprocessing.get_context("fork")
    outbox, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=make_and_send, args=(outbox, done))
    p.start()
    t = outbox.get(timeout=60)
    done.set()
    p.join(60)
    assert t.is_shared() and t.tolist() == [[7.0, 7.0], [7.0, 7.0]]
    t.add_(1)
    assert t.sum().item() == 32.0
    # the creator unlinked the name when it ended; the mapping here stays valid
    assert not _exists(_name(t))


def test_hogwild_updates_from_two_processes_land():
    ctx = multiprocessing.get_context("fork")
    model = ember.nn.Linear(3, 2)
    with ember.no_grad():
        model.weight.zero_()
    assert model.share_memory() is model
    procs = [ctx.Process(target=hogwild_rows, args=(model, row, 50)) for row in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert model.weight.tolist() == [[50.0] * 3, [50.0] * 3]


def test_optimizer_steps_in_spawned_children_update_the_shared_model():
    ctx = multiprocessing.get_context("spawn")
    model = ember.nn.Linear(3, 2).share_memory()
    before = model.weight.detach().clone()
    for row in (0, 1):                   # one after the other: a deterministic result
        p = ctx.Process(target=sgd_step, args=(model, row))
        p.start()
        p.join(60)
        assert p.exitcode == 0
    assert ember.equal(model.weight.detach(), before - 1)


@posix_shm
def test_save_writes_the_bytes_not_the_segment(tmp_path):
    path = str(tmp_path / "t.pt")
    t = ember.arange(4.0).share_memory_()
    ember.save(t, path)
    name = _name(t)
    del t
    gc.collect()
    assert not _exists(name)
    ctx = multiprocessing.get_context("spawn")
    outbox = ctx.Queue()
    p = ctx.Process(target=load_and_send, args=(path, outbox))
    p.start()
    assert outbox.get(timeout=60) == [0.0, 1.0, 2.0, 3.0]
    p.join(60)


def test_save_keeps_views_of_a_shared_tensor_on_one_storage():
    t = ember.arange(6.0).reshape(2, 3).clone().share_memory_()
    buf = io.BytesIO()
    ember.save({"t": t, "row": t[1]}, buf)
    buf.seek(0)
    loaded = ember.load(buf)
    assert not loaded["t"].is_shared()
    loaded["row"].add_(1)
    assert loaded["t"].tolist() == [[0.0, 1.0, 2.0], [4.0, 5.0, 6.0]]


# ----- in one process ------------------------------------------------------------------------

@posix_shm
def test_a_segment_is_unlinked_when_its_last_tensor_goes():
    t = ember.ones(5).share_memory_()
    view = t[1:]
    name = _name(t)
    assert _exists(name)
    del t
    gc.collect()
    assert _exists(name) and view.sum().item() == 4.0
    del view
    gc.collect()
    assert not _exists(name)


def test_share_memory_returns_self_and_keeps_values_and_layout():
    t = ember.from_numpy(np.arange(6.0, dtype=np.float32).reshape(2, 3).T)
    stride = t.stride()
    assert stride == (1, 3)
    t.requires_grad_()
    assert t.share_memory_() is t and t.is_shared()
    assert t.stride() == stride and t.requires_grad and t.is_leaf
    assert t.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    ptr = t.data_ptr()
    assert t.share_memory_() is t and t.data_ptr() == ptr      # already shared: a no-op
    empty = ember.zeros(0, 3)
    assert empty.share_memory_().is_shared() and empty.shape == (0, 3)


def test_is_shared_on_views():
    base = ember.zeros(4, 4)
    before = base[0]
    assert not base.is_shared() and not before.is_shared()
    base.share_memory_()
    assert base.is_shared() and base[1:, ::2].is_shared() and base.t().is_shared()
    assert not before.is_shared()            # views taken before keep the old memory
    assert not base.clone().is_shared()
    other = ember.zeros(3, 3)
    row = other[1]
    row.share_memory_()                      # sharing a view shares its base
    assert other.is_shared() and row.is_shared()
    row.fill_(2.0)
    assert other[1].tolist() == [2.0] * 3
    assert row.storage_offset() == 3 and row.data_ptr() == other.data_ptr() + 12


def test_module_share_memory_shares_parameters_buffers_and_grads():
    model = ember.nn.Sequential(ember.nn.Linear(2, 2), ember.nn.BatchNorm1d(2))
    model[0].weight.grad = ember.zeros(2, 2)
    assert model.share_memory() is model
    assert all(p.is_shared() for p in model.parameters())
    assert all(b.is_shared() for b in model.buffers())
    assert model[0].weight.grad.is_shared() and model[0].bias.grad is None
    assert isinstance(model[0].weight, ember.nn.Parameter)


def test_plain_pickle_copies_while_multiprocessing_pickling_shares():
    t = ember.arange(3.0).share_memory_()
    assert not pickle.loads(pickle.dumps(t)).is_shared()
    u = ForkingPickler.loads(ForkingPickler.dumps(t))
    assert u.is_shared() and u.data_ptr() == t.data_ptr()
    p = ember.nn.Parameter(ember.ones(2)).share_memory_()
    p.grad = ember.ones(2)
    q = ForkingPickler.loads(ForkingPickler.dumps(p))
    assert type(q) is ember.nn.Parameter and q.requires_grad and q.grad is None
    plain = ForkingPickler.loads(ForkingPickler.dumps(ember.ones(2)))
    assert not plain.is_shared()
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        ForkingPickler.dumps((p * 2).share_memory_())
