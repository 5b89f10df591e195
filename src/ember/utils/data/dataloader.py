"""DataLoader: batches from a dataset, in the main process or in worker processes.

NOTE [ Worker failures and shutdown ]
A multi-process iterator must never hang. The main process waits for results in short
polls; between polls it checks that every worker it still expects results from is alive
(a worker killed by a signal is reported with its id and exit code) and whether the user's
``timeout`` has passed. Workers check that their parent lives and exit if it doesn't.
Shutdown (end of epoch, ``break`` then garbage collection, or interpreter exit) tells each
worker to stop, joins it briefly, terminates it if needed, and removes every shared-memory
file the iterator's workers created that the main process never received.
"""

import atexit
import itertools
import math
import multiprocessing
import os
import queue
import time
import warnings
import weakref
from typing import Generic, TypeVar

import ember
from ember.profiler import _recorder
from ember.utils.data import _shared
from ember.utils.data._fetch import IterableFetcher, MapFetcher
from ember.utils.data._pin import pin_memory
from ember.utils.data._worker import (ExceptionWrapper, IterationEnded, ResumeIteration,
                                      worker_loop)
from ember.utils.data.collate import default_collate, default_convert
from ember.utils.data.dataset import IterableDataset
from ember.utils.data.sampler import (BatchSampler, RandomSampler, Sampler,
                                      SequentialSampler)

__all__ = ["DataLoader"]

T_co = TypeVar("T_co", covariant=True)

_POLL = 0.1                 # seconds between the main process's liveness checks
_JOIN_TIMEOUT = 1.0         # a worker busy in user code after that is terminated
_LARGE_LIST = 100_000


class _DatasetKind:
    """What ``DataLoader._dataset_kind`` holds (PyTorch's values)."""

    Map = 0
    Iterable = 1


class _InfiniteConstantSampler(Sampler):
    """The sampler of an iterable dataset: None forever (the dataset decides the order)."""

    def __iter__(self):
        while True:
            yield None


class DataLoader(Generic[T_co]):
    """Iterate over ``dataset`` in batches (``torch.utils.data.DataLoader``).

    With ``num_workers > 0`` batches are produced by worker processes and handed over
    through shared memory; a worker that raises re-raises here with its traceback, a worker
    that dies makes the iterator raise, and ``timeout`` bounds each wait.
    """

    _FROZEN = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
               "persistent_workers")

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False,
                 timeout=0, worker_init_fn=None, multiprocessing_context=None, generator=None,
                 *, prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 "
                             "to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            for name, value, default in (("shuffle", shuffle, None), ("sampler", sampler, None),
                                         ("batch_sampler", batch_sampler, None)):
                if value not in (default, False) or (name != "shuffle" and value is not None):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                     f"{name} option, but got {name}={value}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None:
            if iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self._dataset_kind = _DatasetKind.Iterable if iterable else _DatasetKind.Map
        self._iterator = None
        self._IterableDataset_len_called = None     # what len(self) last read, as PyTorch's
        self.__initialized = True
        self.check_worker_number_rationality()

    @property
    def multiprocessing_context(self):
        """The multiprocessing context the workers start from (None: fork where available)."""
        return self.__multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context):
        if context is not None:
            context = _checked_context(context, self.num_workers)
        self.__multiprocessing_context = context

    def check_worker_number_rationality(self):
        """Warn (as PyTorch does) when there are more workers than CPUs this process may use."""
        if self.num_workers <= 1:
            return
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count()
        if cpus is not None and self.num_workers > cpus:
            warnings.warn(
                f"This DataLoader will create {self.num_workers} worker processes in total. Our "
                f"suggested max number of worker in current system is {cpus}, which is smaller "
                f"than what this DataLoader is going to create. Please be aware that excessive "
                f"worker creation might get DataLoader running slow or even freeze, lower the "
                f"worker number to avoid potential slowness/freeze if necessary.", stacklevel=3)

    def __setattr__(self, name, value):
        if self.__dict__.get("_DataLoader__initialized") and name in self._FROZEN:
            raise ValueError(f"{name} attribute should not be set after "
                             f"{type(self).__name__} is initialized")
        super().__setattr__(name, value)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        if self.persistent_workers:
            if self._iterator is None:
                self.check_worker_number_rationality()
                self._iterator = _MultiProcessingDataLoaderIter(self)
            else:
                self._iterator._reset(self)
            return self._iterator
        self.check_worker_number_rationality()
        return _MultiProcessingDataLoaderIter(self)

    def __len__(self):
        if self._dataset_kind == _DatasetKind.Iterable:
            length = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                div = length / self.batch_size
                length = math.floor(div) if self.drop_last else math.ceil(div)
            return length
        return len(self._index_sampler)

    def _new_seed(self):
        return int(ember.empty((), dtype=ember.int64).random_(generator=self.generator).item())


class _BaseDataLoaderIter:
    def __init__(self, loader):
        self._loader = loader
        self._dataset = loader.dataset
        self._kind = "iterable" if loader._dataset_kind == _DatasetKind.Iterable else "map"
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._collate_fn = loader.collate_fn
        self._sampler_iter = iter(loader._index_sampler)
        # drawn by every iterator, as in PyTorch: iterating a loader advances the generator
        self._base_seed = loader._new_seed()
        self._yielded = 0
        self._len_called = loader._IterableDataset_len_called
        self._pin = loader.pin_memory and ember.cuda.is_available()
        if loader.pin_memory and loader.pin_memory_device:    # at each new iterator, as PyTorch
            warnings.warn("pin_memory_device is deprecated, the current accelerator will be "
                          "used as the device,ignore pin_memory_device="
                          f"'{loader.pin_memory_device}'.", UserWarning, stacklevel=2)
        if loader.pin_memory and not self._pin:
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", UserWarning, stacklevel=2)

    def __iter__(self):
        return self

    def __next__(self):
        if not _recorder._ACTIVE:
            return self._next_data()
        # PyTorch's profiles show each batch fetched as this range
        r = _recorder.begin(f"enumerate(DataLoader)#{type(self).__name__}.__next__",
                            "user_annotation")
        try:
            return self._next_data()
        finally:
            _recorder.end(r)

    def _count(self, stacklevel):
        """Count a batch handed out; warn (as PyTorch does) for each beyond the length an
        IterableDataset reported to ``len(loader)``."""
        self._yielded += 1
        if self._kind == "iterable" and self._len_called is not None \
                and self._yielded > self._len_called:
            message = (f"Length of IterableDataset {self._dataset} was reported to be "
                       f"{self._len_called}(when accessing len(dataloader)), but "
                       f"{self._yielded} samples have been fetched. ")
            if self._loader.num_workers > 0:
                message += ("For multiprocessing data-loading, this could be caused by not "
                            "properly configuring the IterableDataset replica at each worker. "
                            "Please see https://pytorch.org/docs/stable/data.html"
                            "#torch.utils.data.IterableDataset for examples.")
            warnings.warn(message, UserWarning, stacklevel=stacklevel + 1)

    def __len__(self):
        return len(self._loader)

    def _next_index(self):
        return next(self._sampler_iter)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    """Fetch each batch in the calling process."""

    def __init__(self, loader):
        super().__init__(loader)
        fetcher = IterableFetcher if self._kind == "iterable" else MapFetcher
        self._fetcher = fetcher(self._dataset, self._auto_collation, self._collate_fn,
                                self._drop_last)

    def _next_data(self):
        data = self._fetcher.fetch(self._next_index())
        self._count(stacklevel=3)
        return pin_memory(data) if self._pin else data


_live_iterators = weakref.WeakSet()


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """Batches from ``num_workers`` worker processes (see NOTE [ Worker failures and
    shutdown ])."""

    _ids = itertools.count()

    def __init__(self, loader):
        super().__init__(loader)
        self._num_workers = loader.num_workers
        self._prefetch = loader.prefetch_factor
        self._timeout = loader.timeout
        self._in_order = loader.in_order
        self._persistent = loader.persistent_workers
        _warn_about_large_lists(self._dataset)
        context = loader.multiprocessing_context or multiprocessing.get_context(
            "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
        prefix = f"ember-{os.getpid()}-{next(self._ids)}-"
        self._transport = _shared.Transport(_shared.shared_directory(), prefix)
        self._result_queue = context.Queue()
        self._index_queues = []
        self._workers = []
        base_seed = self._base_seed
        for wid in range(self._num_workers):
            index_queue = context.Queue()
            index_queue.cancel_join_thread()
            w = context.Process(
                target=worker_loop, daemon=True,
                args=(self._dataset, self._kind, index_queue, self._result_queue,
                      self._auto_collation, self._collate_fn, self._drop_last, base_seed,
                      loader.worker_init_fn, wid, self._num_workers,
                      self._transport.pickler_for(wid)))
            w.start()
            self._index_queues.append(index_queue)
            self._workers.append(w)
        self._owner_pid = os.getpid()
        self._shutdown = False
        _live_iterators.add(self)
        self._start_epoch()

    def _start_epoch(self):
        self._send_idx = 0            # next task number to hand out
        self._rcvd_idx = 0            # next task number to return (in order)
        self._task_info = {}          # task number -> [worker id] or [worker id, data]
        self._outstanding = 0
        self._active = [True] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        for _ in range(self._prefetch * self._num_workers):
            self._try_put_index()

    def _reset(self, loader):
        """Start a new epoch on the same (persistent) workers."""
        self._sampler_iter = iter(loader._index_sampler)
        self._yielded = 0
        self._len_called = loader._IterableDataset_len_called
        self._pin = loader.pin_memory and ember.cuda.is_available()
        seed = loader._new_seed()
        for q in self._index_queues:
            q.put(ResumeIteration(seed))
        pending = self._num_workers
        while pending:
            task, _ = self._get_result()
            if isinstance(task, ResumeIteration):
                pending -= 1
        self._start_epoch()

    def _try_put_index(self):
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):
            wid = next(self._worker_cycle)
            if self._active[wid]:
                break
        else:
            return
        self._index_queues[wid].put((self._send_idx, index))
        self._task_info[self._send_idx] = [wid]
        self._outstanding += 1
        self._send_idx += 1

    def _next_data(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info is not None and (len(info) == 2 or self._active[info[0]]):
                    break
                self._task_info.pop(self._rcvd_idx, None)
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            info = self._task_info[self._rcvd_idx]
            if len(info) == 2:
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
                return self._process(info[1])
            idx, data = self._get_result()
            self._outstanding -= 1
            if isinstance(data, IterationEnded):
                self._active[data.worker_id] = False
                self._task_info.pop(idx, None)
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                if self._in_order:
                    self._task_info[idx].append(data)
                    continue
                del self._task_info[idx]
                return self._process(data)
            del self._task_info[idx]
            self._rcvd_idx += 1
            return self._process(data)

    def _process(self, data):
        self._try_put_index()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        self._count(stacklevel=4)
        return pin_memory(data) if self._pin else data

    def _get_result(self):
        """The next (task, data) from any worker; raises if a worker died or on timeout."""
        start = time.monotonic()
        while True:
            try:
                idx, payload = self._result_queue.get(timeout=_POLL)
            except queue.Empty:
                self._check_workers()
                if self._timeout and time.monotonic() - start >= self._timeout:
                    self._shutdown_workers(graceful=False)
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
                continue
            if isinstance(idx, ResumeIteration):
                return idx, None
            return idx, _shared.loads(payload)

    def _check_workers(self):
        for wid, w in enumerate(self._workers):
            if self._active[wid] and not w.is_alive():
                code = w.exitcode
                self._shutdown_workers(graceful=False)
                how = (f"was killed by signal {_signal_name(-code)}" if code is not None
                       and code < 0 else f"exited unexpectedly with exit code {code}")
                raise RuntimeError(f"DataLoader worker {wid} (pid {w.pid}) {how}. If this "
                                   f"was the out-of-memory killer, reduce batch_size, "
                                   f"num_workers or prefetch_factor.")

    def _shutdown_workers(self, graceful=True):
        if getattr(self, "_shutdown", True):
            return
        self._shutdown = True
        _live_iterators.discard(self)
        if os.getpid() != self._owner_pid:
            return      # a forked copy: the workers, queues and files belong to the parent
        for q in self._index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + (_JOIN_TIMEOUT if graceful else 0.0)
        for w in self._workers:
            w.join(timeout=max(0.0, deadline - time.monotonic()))
        for w in self._workers:
            if w.is_alive():
                w.terminate()
                w.join(timeout=1.0)
        self._drain()
        for q in (*self._index_queues, self._result_queue):
            q.cancel_join_thread()
            q.close()
        self._transport.cleanup()

    def _drain(self):
        """Empty the result queue so its data's files can be removed."""
        try:
            while True:
                self._result_queue.get(timeout=0.01)
        except (queue.Empty, OSError, ValueError, EOFError):
            pass

    def __del__(self):
        self._shutdown_workers()


def _checked_context(context, num_workers):
    """``context`` (a start method's name or a context object) as a context object, checked
    as PyTorch checks it."""
    if num_workers == 0:
        raise ValueError("multiprocessing_context can only be used with multi-process "
                         f"loading (num_workers > 0), but got num_workers={num_workers}")
    if isinstance(context, str):
        methods = multiprocessing.get_all_start_methods()
        if context not in methods:
            raise ValueError("multiprocessing_context option should specify a valid start "
                             f"method in {methods!r}, but got "
                             f"multiprocessing_context={context!r}")
        return multiprocessing.get_context(context)
    if not isinstance(context, multiprocessing.context.BaseContext):
        raise TypeError("multiprocessing_context option should be a valid context object or "
                        "a string specifying the start method, but got "
                        f"multiprocessing_context={context}")
    return context


def _signal_name(number):
    import signal
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _warn_about_large_lists(dataset, _warned=set()):   # noqa: B006  (warn once per class)
    """Fork's copy-on-write does not survive Python refcounts: a big list of Python objects
    read by every worker ends up copied into each of them."""
    cls = type(dataset)
    if cls in _warned:
        return
    for name, value in vars(dataset).items() if hasattr(dataset, "__dict__") else ():
        if isinstance(value, (list, dict, tuple)) and len(value) >= _LARGE_LIST:
            _warned.add(cls)
            warnings.warn(f"{cls.__name__}.{name} is a Python {type(value).__name__} of "
                          f"{len(value)} items. With num_workers > 0 each worker process that "
                          f"reads it copies it (reference counting defeats copy-on-write), so "
                          f"memory grows by its size per worker; store it as a NumPy array "
                          f"instead.", UserWarning, stacklevel=4)
            return


def _shutdown_all():
    for it in list(_live_iterators):
        it._shutdown_workers()


atexit.register(_shutdown_all)
