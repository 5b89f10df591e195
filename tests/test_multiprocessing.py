"""ember.multiprocessing (torch.multiprocessing): the standard library re-exported, sharing
strategies, and spawn/start_processes with PyTorch's failure reports. Messages were checked
against PyTorch 2.13. Children run the small functions below (most with the fast "fork"
start method; ``spawn`` itself always spawns)."""

import multiprocessing as stdlib_mp
import os
import pickle
import sys
import time

import pytest

import ember.multiprocessing as mp
from ember.multiprocessing.spawn import ProcessException


def put_square(i, queue, offset):
    queue.put((i, i * i + offset))


def raise_in_one(i):
    if i == 1:
        raise ValueError(f"bad {i}")
    time.sleep(30)                  # stopped by the parent once process 1 failed


def exit_with_three(i):
    if i == 0:
        sys.exit(3)
    time.sleep(30)


def killed(i):
    if i == 1:
        os.kill(os.getpid(), 9)
    time.sleep(30)


def test_the_standard_library_is_re_exported():
    assert mp.Process is stdlib_mp.Process
    for name in ("Queue", "Pool", "get_context", "cpu_count", "Manager", "set_start_method"):
        assert hasattr(mp, name) and name in mp.__all__
    assert mp.__all__[:3] == ["set_sharing_strategy", "get_sharing_strategy",
                              "get_all_sharing_strategies"]


@pytest.mark.skipif(sys.platform == "darwin", reason="Linux's strategies")
def test_sharing_strategies():
    assert mp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    assert mp.get_sharing_strategy() == "file_descriptor"
    try:
        mp.set_sharing_strategy("file_system")
        assert mp.get_sharing_strategy() == "file_system"
        with pytest.raises(AssertionError) as info:
            mp.set_sharing_strategy("bad")
        assert str(info.value).startswith("invalid sharing strategy 'bad', expected one of {")
    finally:
        mp.set_sharing_strategy("file_descriptor")


def test_spawn_runs_fn_with_the_process_index():
    queue = mp.get_context("spawn").SimpleQueue()
    with pytest.warns(FutureWarning, match="This method only supports start_method=spawn "
                                           r"\(got: fork\)"):
        assert mp.spawn(put_square, args=(queue, 10), nprocs=2, start_method="fork") is None
    assert sorted([queue.get(), queue.get()]) == [(0, 10), (1, 11)]


def test_start_processes_without_join_gives_a_context():
    queue = mp.get_context("fork").SimpleQueue()
    context = mp.start_processes(put_square, args=(queue, 0), nprocs=2, join=False,
                                 start_method="fork")
    assert isinstance(context, mp.ProcessContext) and len(context.pids()) == 2
    while not context.join(timeout=10):
        pass
    assert context.join() is True
    assert sorted([queue.get(), queue.get()]) == [(0, 0), (1, 1)]
    assert mp.start_processes(put_square, nprocs=0, start_method="fork") is None


def _failure(fn):
    with pytest.raises(ProcessException) as info:
        mp.start_processes(fn, nprocs=2, start_method="fork")
    return info.value


def test_a_raised_exception_comes_back_with_its_traceback():
    error = _failure(raise_in_one)
    assert type(error) is mp.ProcessRaisedException
    text = str(error)
    assert text.startswith("\n\n-- Process 1 terminated with the following error:\n"
                           "Traceback (most recent call last):\n")
    assert text.endswith("ValueError: bad 1\n")
    assert error.error_index == 1 and error.error_pid > 0


def test_an_exit_code_and_a_signal():
    error = _failure(exit_with_three)
    assert type(error) is mp.ProcessExitedException
    assert str(error) == "process 0 terminated with exit code 3"
    assert error.exit_code == 3 and error.signal_name is None and error.error_index == 0
    error = _failure(killed)
    assert str(error) == "process 1 terminated with signal SIGKILL"
    assert error.exit_code == -9 and error.signal_name == "SIGKILL"


def test_the_exceptions_pickle_and_the_old_context_name_warns():
    e = pickle.loads(pickle.dumps(mp.ProcessExitedException("m", 1, 2, 3, "SIGX")))
    assert (str(e), e.error_index, e.error_pid, e.exit_code, e.signal_name) == \
        ("m", 1, 2, 3, "SIGX")
    e = pickle.loads(pickle.dumps(mp.ProcessRaisedException("m", 1, 2)))
    assert (str(e), e.error_index, e.error_pid) == ("m", 1, 2)
    with pytest.warns(UserWarning, match="SpawnContext is renamed to ProcessContext since 1.4 "
                                         "release."):
        assert mp.SpawnContext([], []).join() is True
