"""``Timer``: timeit-style measurement of Python statements that use ember."""

import enum
import textwrap
import time
import timeit

import ember
from ember import backend
from ember.utils.benchmark._common import Measurement, TaskSpec, set_torch_threads

__all__ = ["Timer", "timer", "Language"]

_MAX_BLOCK = 2 ** 31 - 1  # block sizes stay within a C int, as PyTorch's do


def timer():
    """The current time in seconds, after queued GPU work finished (when CUDA is in use)."""
    if backend.cuda_initialized():  # never loads CuPy for a CPU-only program
        ember.cuda.synchronize()
    return time.perf_counter()


class Language(enum.Enum):
    """The language of a Timer's statements."""

    PYTHON = 0
    CPP = 1


def _clean(code):
    """``code`` dedented, without a leading newline or trailing whitespace."""
    code = textwrap.dedent(code)
    return (code[1:] if code.startswith("\n") else code).rstrip()


class Timer:
    """Measures the run time of ``stmt`` (after ``setup``), like ``timeit.Timer``."""

    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=timer, globals=None,
                 label=None, sub_label=None, description=None, env=None, num_threads=1,
                 language=Language.PYTHON):
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        if language in (Language.CPP, "cpp", "c++"):
            raise NotImplementedError("ember's Timer does not time C++ statements")
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError(f"Invalid language `{language}`.")
        if global_setup:
            raise ValueError(f"global_setup is C++ only, got `{global_setup}`. Most likely "
                             "this code can simply be moved to `setup`.")
        self._language = Language.PYTHON
        self._globals = dict(globals or {})
        self._globals.setdefault("torch", ember)  # as PyTorch offers `torch` to the statements
        stmt, setup = _clean(stmt), _clean(setup)
        self._timer = timeit.Timer(stmt=stmt, setup=setup, timer=timer, globals=self._globals)
        self._task_spec = TaskSpec(stmt=stmt, setup=setup, global_setup=global_setup,
                                   label=label, sub_label=sub_label, description=description,
                                   env=env, num_threads=num_threads)

    def _timeit(self, number):
        """Seconds taken by ``number`` runs of stmt (after one setup), at least 1 ns."""
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number=1000000):
        """Run stmt ``number`` times (after a short warm-up) and measure it once."""
        with set_torch_threads(self._task_spec.num_threads):
            self._timeit(max(number // 100, 2))
            return Measurement(number_per_run=number, raw_times=[self._timeit(number)],
                               task_spec=self._task_spec)

    def repeat(self, repeat=-1, number=-1):
        """Not provided (as in PyTorch): use ``blocked_autorange``."""
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback=None):
        """Not provided (as in PyTorch): use ``blocked_autorange``."""
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _block_size(self, min_run_time):
        """Runs per block: enough that the timer's own overhead is negligible."""
        with set_torch_threads(self._task_spec.num_threads):
            overheads = sorted(self._timeit(0) for _ in range(5))
            overhead = overheads[2]
            number = 1
            while True:
                taken = self._timeit(number)
                if overhead / taken <= 1e-4 and taken >= min_run_time / 1000:
                    return number
                if taken > min_run_time or number * 10 > _MAX_BLOCK:
                    return number
                number *= 10

    def _measure_blocks(self, number, done, min_run_time, max_run_time=None, callback=None):
        """Time blocks of ``number`` runs until ``min_run_time`` passed and ``done(times)``
        holds, or until ``max_run_time`` passed."""
        times, total = [], 0.0
        with set_torch_threads(self._task_spec.num_threads):
            while True:
                taken = self._timeit(number)
                times.append(taken)
                total += taken
                if callback:
                    callback(number, taken)
                stop = done(times)
                if max_run_time and total > max_run_time:
                    break
                if total >= min_run_time and stop:
                    break
        return times

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        """Time blocks of runs of stmt for at least ``min_run_time`` seconds."""
        number = self._block_size(min_run_time)
        times = self._measure_blocks(number, lambda times: True, min_run_time,
                                     callback=callback)
        return Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0,
                           callback=None):
        """Time blocks of runs until iqr / median falls below ``threshold`` (after at least 4
        blocks and ``min_run_time`` seconds) or ``max_run_time`` seconds have passed."""
        number = self._block_size(0.05)

        def steady(times):
            if len(times) <= 3:
                return False
            partial = Measurement(number_per_run=number, raw_times=times,
                                  task_spec=self._task_spec)
            return partial.meets_confidence(threshold=threshold)

        times = self._measure_blocks(number, steady, min_run_time, max_run_time, callback)
        return Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)
