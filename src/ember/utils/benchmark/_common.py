"""Task descriptions, measurements and number formatting of ``torch.utils.benchmark``."""

import contextlib
import dataclasses
import math
import textwrap

import numpy as np

import ember

__all__ = ["TaskSpec", "Measurement", "select_unit", "unit_to_english", "trim_sigfig",
           "ordered_unique", "set_torch_threads"]

_MAX_SIGFIGS = 4
_MIN_CONFIDENCE_INTERVAL = 25e-9  # seconds: no measurement is trusted below 25 ns
_IQR_WARN = 0.1  # iqr / median above this: the repr warns of fluctuation
_IQR_GROSS_WARN = 0.25  # ... and above this: of strong environmental influence
_SCALES = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}
_ENGLISH = {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}


def _log10_f32(x):
    """log10 of ``x`` in single precision, as PyTorch's helpers compute it on a float tensor
    (correctly rounded: NumPy's float32 log10 is off by an ulp on some CPUs, 1e-6 -> -6.0000005)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float32(np.log10(np.float64(np.float32(x)))))


def _indent(text):
    """``text`` with every line indented by two spaces."""
    return textwrap.indent(text, "  ")


@dataclasses.dataclass(init=True, repr=False, eq=True, frozen=True)
class TaskSpec:
    """What a Timer measures, and the labels that describe it (everything but globals)."""

    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self):
        """A one-line name for the task: its label, else its stmt (plus the sub_label)."""
        suffix = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + suffix
        if "\n" not in self.stmt:
            return self.stmt + suffix
        sub = f" ({self.sub_label})" if self.sub_label else ""
        return f"stmt:{sub}\n{_indent(self.stmt)}"

    def setup_str(self):
        """The setup line(s) of a repr; empty when the setup does nothing."""
        if self.setup in ("pass", ""):
            return ""
        if "\n" in self.setup:
            return f"setup:\n{_indent(self.setup)}"
        return f"setup: {self.setup}"

    def summarize(self):
        """The title, description and setup lines of a Measurement's repr."""
        parts = [p for p in (self.title, self.description or "", self.setup_str()) if p]
        return "\n".join(p + "\n" if "\n" in p else p for p in parts)


_TASKSPEC_FIELDS = tuple(f.name for f in dataclasses.fields(TaskSpec))


@dataclasses.dataclass(init=True, repr=False)
class Measurement:
    """The times of one or more runs of a statement, with their statistics."""

    number_per_run: int
    raw_times: list[float]
    task_spec: TaskSpec
    metadata: dict | None = None  # free for the user's own payload

    def __post_init__(self):
        self._stats = None

    def __getattr__(self, name):
        if name in _TASKSPEC_FIELDS:  # label, stmt, num_threads... come from the task
            return getattr(self.task_spec, name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    @property
    def times(self):
        """The time of a single run of stmt, for each measurement."""
        return [t / self.number_per_run for t in self.raw_times]

    def _statistics(self):
        """Sorted times, quartiles, mean and warnings, computed once."""
        if self._stats is None and self.raw_times:
            ordered = np.sort(np.asarray(self.times, dtype=np.float64))
            p25, median, p75 = (float(q) for q in np.quantile(ordered, [0.25, 0.5, 0.75]))
            stats = {"sorted": tuple(float(t) for t in ordered), "median": median,
                     "mean": float(ordered.mean()), "p25": p25, "p75": p75, "warnings": ()}
            self._stats = stats
            note = ("This suggests significant environmental influence."
                    if not self.meets_confidence(_IQR_GROSS_WARN)
                    else "This could indicate system fluctuation."
                    if not self.meets_confidence(_IQR_WARN) else None)
            if note is not None:
                percent = self.iqr / median * 100
                stats["warnings"] = (f"  WARNING: Interquartile range is {percent:.1f}% of the "
                                     f"median measurement.\n           {note}",)
        return self._stats or {"sorted": (), "median": -1.0, "mean": -1.0, "p25": -1.0,
                               "p75": -1.0, "warnings": ()}

    @property
    def median(self):
        """The median time of one run."""
        return self._statistics()["median"]

    @property
    def mean(self):
        """The mean time of one run."""
        return self._statistics()["mean"]

    @property
    def iqr(self):
        """The interquartile range (75th minus 25th percentile) of the times of one run."""
        stats = self._statistics()
        return stats["p75"] - stats["p25"]

    @property
    def significant_figures(self):
        """A rough count (1 to 4) of the median's digits that the spread of the times allows."""
        ordered = self._statistics()["sorted"]
        n = len(ordered)
        middle = np.asarray(ordered[n // 4:math.ceil(3 * n / 4)], dtype=np.float64)
        std = float(middle.std()) if middle.size else math.nan
        interval = max(1.645 * std / math.sqrt(middle.size), _MIN_CONFIDENCE_INTERVAL)
        figures = int(math.floor(_log10_f32(self.median / interval)))
        return min(max(figures, 1), _MAX_SIGFIGS)

    @property
    def has_warnings(self):
        """Whether the spread of the times is large enough for the repr to warn about it."""
        return bool(self._statistics()["warnings"])

    def meets_confidence(self, threshold=_IQR_WARN):
        """Whether iqr / median is below ``threshold``."""
        return self.iqr / self.median < threshold

    @property
    def title(self):
        """The task's title (see ``TaskSpec.title``)."""
        return self.task_spec.title

    @property
    def env(self):
        """The task's env tag."""
        return self.task_spec.env

    @property
    def as_row_name(self):
        """The name of this measurement's row in a Compare table."""
        return self.sub_label or self.stmt or "[Unknown]"

    def __repr__(self):
        stats = self._statistics()
        n = len(stats["sorted"])
        unit, scale = select_unit(stats["median"])

        def show(seconds):
            return f"{seconds / scale:.2f}"

        lines = [object.__repr__(self), self.task_spec.summarize()]
        lines.append(f"  {'Median: ' if n > 1 else ''}{show(stats['median'])} {unit}")
        if n >= 4:
            lines.append(f"  IQR:    {show(self.iqr)} {unit} "
                         f"({show(stats['p25'])} to {show(stats['p75'])})")
        threads = self.num_threads
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement,' if n > 1 else ','} "
                     f"{threads} thread{'s' if threads > 1 else ''}")
        lines.extend(stats["warnings"])
        return "\n".join(lines).strip()

    @staticmethod
    def merge(measurements):
        """One Measurement per distinct TaskSpec, holding all its times (per single run)."""
        groups = {}
        for m in measurements:
            groups.setdefault(m.task_spec, []).extend(m.times)
        return [Measurement(number_per_run=1, raw_times=times, task_spec=spec, metadata=None)
                for spec, times in groups.items()]


def select_unit(t):
    """The unit ("ns", "us", "ms" or "s") to show a time ``t`` (seconds) in, and its scale."""
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(_log10_f32(t) // 3), "s")
    return unit, _SCALES[unit]


def unit_to_english(u):
    """The English name of a time unit ("us" -> "microsecond")."""
    return _ENGLISH[u]


def trim_sigfig(x, n):
    """``x`` rounded to ``n`` significant figures (in single precision, like PyTorch)."""
    if n != int(n):
        raise AssertionError("Number of significant figures must be an integer")
    magnitude = int(math.ceil(_log10_f32(abs(x))))
    scale = 10 ** (magnitude - n)
    return float(np.round(np.float32(x / scale)) * np.float32(scale))


def ordered_unique(elements):
    """The distinct ``elements``, in order of first appearance."""
    return list(dict.fromkeys(elements))


@contextlib.contextmanager
def set_torch_threads(n):
    """Run the block with ember's CPU kernels using ``n`` threads, then restore the count."""
    prior = ember.get_num_threads()
    try:
        ember.set_num_threads(n)
        yield
    finally:
        ember.set_num_threads(prior)
