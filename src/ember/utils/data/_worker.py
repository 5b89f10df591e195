"""The loop each DataLoader worker process runs, and what a worker knows about itself."""

import os
import queue
import random
import sys
import traceback
from dataclasses import dataclass

import numpy as np

__all__ = ["WorkerInfo", "get_worker_info", "ExceptionWrapper", "worker_loop",
           "IterationEnded", "ResumeIteration"]

STATUS_CHECK_INTERVAL = 1.0     # seconds between a worker's checks that its parent lives

_worker_info = None


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker."""

    id: int
    num_workers: int
    seed: int
    dataset: object
    rng: object = None
    worker_method: str = "multiprocessing"


def get_worker_info():
    """This worker's WorkerInfo (id, num_workers, seed, its dataset copy); None in the main
    process."""
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process with its traceback."""

    def __init__(self, exc_info, where):
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        """Raise the worker's exception type, its message naming the worker and holding the
        original traceback."""
        msg = (f"Caught {self.exc_type.__name__} {self.where}.\n"
               f"Original {self.exc_msg}")
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exception


class _KeyErrorMessage(str):
    """KeyError quotes its argument; this prints the message as it is."""

    def __repr__(self):
        return self


@dataclass(frozen=True)
class IterationEnded:
    """An iterable dataset's copy in worker ``worker_id`` is exhausted."""

    worker_id: int


@dataclass(frozen=True)
class ResumeIteration:
    """A persistent worker is told a new epoch begins (with the epoch's seed)."""

    seed: int


def _seed_everything(seed):
    import ember
    random.seed(seed)
    ember.manual_seed(seed)
    np.random.seed(seed % 2 ** 32)      # NumPy too: augmentations must differ per worker


def worker_loop(dataset, kind, index_queue, result_queue, auto_collation, collate_fn,
                drop_last, base_seed, init_fn, worker_id, num_workers, dumps):
    """Fetch the batches named on ``index_queue`` and put them (pickled with ``dumps``) on
    ``result_queue`` until told to stop or the parent dies."""
    global _worker_info
    from ember.utils.data._fetch import IterableFetcher, MapFetcher
    fetcher_class = IterableFetcher if kind == "iterable" else MapFetcher
    parent = os.getppid()
    seed = base_seed + worker_id
    _seed_everything(seed)
    _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
    where = f"in DataLoader worker process {worker_id}"
    init_error = None
    fetcher = None
    try:
        if init_fn is not None:
            init_fn(worker_id)
        fetcher = fetcher_class(dataset, auto_collation, collate_fn, drop_last)
    except Exception:
        init_error = ExceptionWrapper(sys.exc_info(), where)
    ended = False
    try:
        while True:
            try:
                task = index_queue.get(timeout=STATUS_CHECK_INTERVAL)
            except queue.Empty:
                if os.getppid() != parent:
                    return
                continue
            if task is None:
                return
            if isinstance(task, ResumeIteration):
                seed = task.seed + worker_id
                _seed_everything(seed)
                _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
                if kind == "iterable":
                    fetcher = fetcher_class(dataset, auto_collation, collate_fn, drop_last)
                ended = False
                result_queue.put((task, None))
                continue
            idx, index = task
            if init_error is not None:
                data, init_error = init_error, None
            elif ended:
                data = IterationEnded(worker_id)
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    data = IterationEnded(worker_id)
                    ended = kind == "iterable"
                except Exception:
                    data = ExceptionWrapper(sys.exc_info(), where)
            try:
                result_queue.put((idx, dumps(data)))
            except Exception:
                result_queue.put((idx, dumps(ExceptionWrapper(sys.exc_info(), where))))
            del data
    except KeyboardInterrupt:
        pass
    finally:
        result_queue.cancel_join_thread()
