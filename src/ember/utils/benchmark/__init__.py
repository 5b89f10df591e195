"""Timing of statements and tables of the results (``torch.utils.benchmark``)."""

from ember.utils.benchmark._common import (Measurement, TaskSpec, ordered_unique,
                                            select_unit, set_torch_threads, trim_sigfig,
                                            unit_to_english)
from ember.utils.benchmark._compare import Colorize, Compare
from ember.utils.benchmark._timer import Language, Timer, timer

__all__ = ["Colorize", "Compare", "Language", "Measurement", "TaskSpec", "Timer",
           "ordered_unique", "select_unit", "set_torch_threads", "timer", "trim_sigfig",
           "unit_to_english"]
