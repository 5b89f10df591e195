"""``spawn`` and ``start_processes``: run ``fn(i, *args)`` in ``nprocs`` processes; a
``ProcessContext`` joins them, and when one fails, stops the others and raises
``ProcessRaisedException`` (its traceback) or ``ProcessExitedException`` (its exit code or
signal), worded as PyTorch's."""

import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
import warnings

__all__ = ["ProcessContext", "ProcessException", "ProcessExitedException",
           "ProcessRaisedException", "SpawnContext", "spawn", "start_processes"]

log = logging.getLogger(__name__)


class ProcessException(Exception):
    """A spawned process failed: ``error_index`` is its index, ``error_pid`` its pid."""

    __slots__ = ["error_index", "error_pid"]

    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.error_pid = error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """A spawned process raised an exception; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A spawned process exited with a nonzero code or was killed by a signal."""

    __slots__ = ["exit_code"]

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid, self.exit_code,
                            self.signal_name)


def _wrap(fn, i, args, error_file):
    """A child's entry point: run ``fn(i, *args)``; an exception leaves its traceback in
    ``error_file`` for the parent and exits with code 1."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass                                    # the parent is stopping us
    except Exception:
        with open(error_file, "w") as f:
            f.write(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    """The processes ``start_processes`` started; ``join`` waits for them."""

    def __init__(self, processes, error_files):
        self.error_files = error_files
        self.processes = processes
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        """The processes' pids."""
        return [int(p.pid) for p in self.processes]

    def join(self, timeout=None, grace_period=None):
        """Wait (up to ``timeout`` seconds) for processes to exit: True once all have
        exited, False while some run. When one failed, stop the others (SIGTERM, then after
        ``grace_period`` SIGKILL) and raise its failure."""
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        failed = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            process = self.processes[index]
            process.join()
            if process.exitcode != 0:
                failed = index
                break
        if failed is None:
            if not self.sentinels:
                self._clean()
            return not self.sentinels
        self._stop_the_rest(grace_period)
        self._raise(failed)

    def _stop_the_rest(self, grace_period):
        for process in self.processes:
            if process.is_alive():
                log.warning("Terminating process %s via signal SIGTERM", process.pid)
                process.terminate()
        deadline = time.monotonic() + (grace_period or 0)
        for process in self.processes:
            process.join(max(deadline - time.monotonic(), 0) if grace_period else None)
        for process in self.processes:
            if process.is_alive():
                log.warning("Unable to shutdown process %s via SIGTERM, forcefully exiting "
                            "via SIGKILL", process.pid)
                process.kill()
            process.join()

    def _raise(self, index):
        process = self.processes[index]
        code, pid = process.exitcode, process.pid
        path = self.error_files[index]
        trace = None
        if os.path.exists(path):
            with open(path) as f:
                trace = f.read()
        self._clean()
        if trace is not None:
            raise ProcessRaisedException(
                f"\n\n-- Process {index} terminated with the following error:\n{trace}",
                index, pid)
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"<Unknown signal {-code}>"
            raise ProcessExitedException(f"process {index} terminated with signal {name}",
                                         index, pid, code, name)
        raise ProcessExitedException(f"process {index} terminated with exit code {code}",
                                     index, pid, code)

    def _clean(self):
        for path in self.error_files:
            folder = os.path.dirname(path)
            if os.path.isdir(folder):
                shutil.rmtree(folder, ignore_errors=True)


class SpawnContext(ProcessContext):
    """``ProcessContext``'s old name."""

    def __init__(self, processes, error_files):
        warnings.warn("SpawnContext is renamed to ProcessContext since 1.4 release.",
                      stacklevel=2)
        super().__init__(processes, error_files)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start ``nprocs`` processes running ``fn(i, *args)`` (``i`` = 0 .. nprocs - 1) with
    ``start_method``; join them (None) or return their ``ProcessContext``."""
    mp = multiprocessing.get_context(start_method)
    folder = tempfile.mkdtemp(prefix="ember-mp-")
    error_files, processes = [], []
    for i in range(nprocs):
        error_file = os.path.join(folder, f"error-{i}")    # exists only once a child failed
        process = mp.Process(target=_wrap, args=(fn, i, args, error_file), daemon=daemon)
        process.start()
        error_files.append(error_file)
        processes.append(process)
    context = ProcessContext(processes, error_files)
    if not nprocs:
        context._clean()
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """``start_processes`` with the "spawn" start method (the only one it takes)."""
    if start_method != "spawn":
        warnings.warn(f"This method only supports start_method=spawn (got: {start_method}).\n"
                      f"To use a different start_method use:\n\t\t "
                      f"ember.multiprocessing.start_processes(...)", FutureWarning,
                      stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
