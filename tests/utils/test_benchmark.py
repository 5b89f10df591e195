"""ember.utils.benchmark (``torch.utils.benchmark``): Measurement statistics and reprs, Compare
tables, and Timer's run counts. The expected texts were recorded from torch 2.13 on the same
Measurements (built from fixed times); Timer's counts were checked against torch's with the
same fake clock."""

import dataclasses
import os
import pickle
import subprocess
import sys

import pytest

import ember
import ember.utils.benchmark as benchmark
from ember.utils.benchmark import Compare, Measurement, TaskSpec, Timer


def spread_times(base, spread, n):
    """n raw times around ``base``, deterministic, varying by up to ``spread`` of it."""
    return [base * (1 + spread * (((i * 7) % 5) - 2) / 4) for i in range(n)]


def table_results(threads=(1,), envs=(None,), labels=("Add",)):
    """Measurements for Compare: 3 rows (one cell missing), 3 columns, 2 replicates each."""
    out = []
    for label in labels:
        for env in envs:
            for th in threads:
                for sub in ["float", "int", "double long name"]:
                    for k, desc in enumerate(["n=1", "n=64", "n=4096"]):
                        if (sub, desc) == ("int", "n=64"):
                            continue
                        base = 1e-3 * (1 + k * 30) * (1 + len(sub) / 10) / th
                        spread = 0.6 if sub == "int" else 0.02
                        spec = TaskSpec(f"f({sub})", "pass", "", label, sub, desc, env, th)
                        for rep in range(2):
                            times = spread_times(base * (1 + rep / 100), spread, 5)
                            out.append(Measurement(1000, times, spec))
    return out


def body(m):
    """A Measurement's repr without its first line (which holds the object's address)."""
    first, rest = repr(m).split("\n", 1)
    assert first.startswith("<") and "Measurement object at 0x" in first
    return rest


# ---- texts recorded from torch 2.13 ----------------------------------------------------------

REPR_10 = (
    'add: float\n'
    'n=1\n'
    'setup: x = 1\n'
    '  Median: 2.50 us\n'
    '  IQR:    0.05 us (2.48 to 2.52)\n'
    '  10 measurements, 100 runs per measurement, 4 threads'
)

REPR_2 = (
    'stmt: (s)\n'
    '  a\n'
    '  b\n'
    '\n'
    'dd\n'
    'setup:\n'
    '  c\n'
    '  d\n'
    '\n'
    '  Median: 833.33 ns\n'
    '  2 measurements, 3 runs per measurement, 1 thread\n'
    '  WARNING: Interquartile range is 20.0% of the median measurement.\n'
    '           This could indicate system fluctuation.'
)

REPR_1 = (
    'a\n'
    'setup: b\n'
    '  2.00 us\n'
    '  1 measurement, 1 runs , 1 thread'
)

REPR_WARN = (
    'y\n'
    '  Median: 300.00 ms\n'
    '  IQR:    168.75 ms (215.62 to 384.38)\n'
    '  8 measurements, 10 runs per measurement, 1 thread\n'
    '  WARNING: Interquartile range is 56.3% of the median measurement.\n'
    '           This suggests significant environmental influence.'
)

TABLE_BASIC = (
    '[--------------------- Add ----------------------]\n'
    '                        |  n=1  |  n=64  |  n=4096\n'
    '1 threads: ---------------------------------------\n'
    '      float             |  1.5  |  46.7  |   92.0 \n'
    '      int               |  1.3  |        |   79.7 \n'
    '      double long name  |  2.6  |  81.0  |  159.4 \n'
    '\n'
    'Times are in microseconds (us).\n'
)

TABLE_ENVS = (
    '[--------------------------- Add ---------------------------]\n'
    '                           |   n=1    |    n=64   |   n=4096 \n'
    '1 threads: --------------------------------------------------\n'
    '  (A)    float             |  1507.5  |  46731.3  |   91955.2\n'
    '         int               |  1306.5  |           |   79696.5\n'
    '         double long name  |  2612.9  |  81001.0  |  159389.0\n'
    '  (Bee)  float             |  1507.5  |  46731.3  |   91955.2\n'
    '         int               |  1306.5  |           |   79696.5\n'
    '         double long name  |  2612.9  |  81001.0  |  159389.0\n'
    '4 threads: --------------------------------------------------\n'
    '  (A)    float             |   376.9  |  11682.8  |   22988.8\n'
    '         int               |   326.6  |           |   19924.1\n'
    '         double long name  |   653.2  |  20250.2  |   39847.3\n'
    '  (Bee)  float             |   376.9  |  11682.8  |   22988.8\n'
    '         int               |   326.6  |           |   19924.1\n'
    '         double long name  |   653.2  |  20250.2  |   39847.3\n'
    '\n'
    'Times are in nanoseconds (ns).\n'
)

_TRIM_ADD = (
    '[------------------------------ Add -------------------------------]\n'
    '                        |      n=1       |   n=64  |      n=4096    \n'
    '1 threads: ---------------------------------------------------------\n'
    '      float             |  2000          |  47000  |   92000        \n'
    '      int               |  1000 (! 30%)  |         |   80000 (! 30%)\n'
    '      double long name  |  2600          |  81000  |  160000        \n'
    '2 threads: ---------------------------------------------------------\n'
    '      float             |   800          |  23000  |   46000        \n'
    '      int               |   700 (! 30%)  |         |   40000 (! 30%)\n'
    '      double long name  |  1000          |  41000  |   80000        \n'
    '\n'
    'Times are in nanoseconds (ns).\n'
    '(! XX%) Measurement has high variance, where XX is the IQR / median * 100.\n'
)
# the Mul table is the Add table under another title
TABLE_TRIM = (_TRIM_ADD + "\n"
              + _TRIM_ADD.replace("-- Add --", "-- Mul --"))

TABLE_COLUMNWISE = (
    '[------------------------- Add --------------------------]\n'
    '                        |   n=1    |    n=64   |   n=4096 \n'
    '1 threads: -----------------------------------------------\n'
    '      float             |  1507.5  |  \x1b[92m\x1b[1m467'
    '31.3\x1b[0m\x1b[0m  |   91955.2\n'
    '      int               |  \x1b[92m\x1b[1m1306.5\x1b[0m\x1b[0m'
    '  |           |  \x1b[92m\x1b[1m 79696.5\x1b[0m\x1b[0m\n'
    '      double long name  |  2612.9  |  81001.0  |  159389.0\n'
    '2 threads: -----------------------------------------------\n'
    '      float             |   753.7  |  \x1b[92m\x1b[1m233'
    '65.7\x1b[0m\x1b[0m  |   45977.6\n'
    '      int               |  \x1b[92m\x1b[1m 653.2\x1b[0m\x1b[0m'
    '  |           |  \x1b[92m\x1b[1m 39848.2\x1b[0m\x1b[0m\n'
    '      double long name  |  1306.5  |  40500.5  |   79694.5\n'
    '\n'
    'Times are in nanoseconds (ns).\n'
)

TABLE_ROWWISE = (
    '[--------------------- Add ----------------------]\n'
    '                        |  n=1  |  n=64  |  n=4096\n'
    '1 threads: ---------------------------------------\n'
    '      float             |  \x1b[92m\x1b[1m1.5\x1b[0m\x1b[0m  |'
    '  \x1b[31m\x1b[1m46.7\x1b[0m\x1b[0m  |  \x1b[31m\x1b[1m 92.0 \x1b[0m\x1b[0m\n'
    '      int               |  \x1b[92m\x1b[1m1.3\x1b[0m\x1b[0m  |'
    '        |  \x1b[31m\x1b[1m 79.7 \x1b[0m\x1b[0m\n'
    '      double long name  |  \x1b[92m\x1b[1m2.6\x1b[0m\x1b[0m  |'
    '  \x1b[31m\x1b[1m81.0\x1b[0m\x1b[0m  |  \x1b[31m\x1b[1m159.4 \x1b[0m\x1b[0m\n'
    '\n'
    'Times are in microseconds (us).\n'
)

# ---- Measurement -----------------------------------------------------------------------------

def test_measurement_statistics_and_repr():
    spec = TaskSpec("x + 1", "x = 1", label="add", sub_label="float", description="n=1",
                    num_threads=4)
    m = Measurement(100, spread_times(2.5e-4, 0.04, 10), spec)
    assert m.times[:3] == pytest.approx([2.45e-6, 2.5e-6, 2.55e-6], rel=1e-12)
    assert m.median == pytest.approx(2.5e-6, rel=1e-12)
    assert m.mean == pytest.approx(2.5e-6, rel=1e-12)
    assert m.iqr == pytest.approx(5e-8, rel=1e-9)
    assert m.significant_figures == 2 and not m.has_warnings and m.meets_confidence()
    assert body(m) == REPR_10
    assert (m.label, m.sub_label, m.description, m.num_threads) == ("add", "float", "n=1", 4)
    assert (m.stmt, m.setup, m.env, m.metadata) == ("x + 1", "x = 1", None, None)
    assert m.title == "add: float" and m.as_row_name == "float"


def test_repr_of_few_or_spread_measurements():
    m = Measurement(3, [2e-6, 3e-6], TaskSpec("a\nb", "c\nd", sub_label="s", description="dd"))
    assert body(m) == REPR_2
    assert m.title == "stmt: (s)\n  a\n  b" and m.as_row_name == "s"
    assert m.median == pytest.approx(2.5e-6 / 3) and m.iqr == pytest.approx(0.5e-6 / 3)
    assert m.has_warnings and m.significant_figures == 1
    assert body(Measurement(1, [2e-6], TaskSpec("a", "b"))) == REPR_1
    m = Measurement(10, spread_times(3.0, 0.9, 8), TaskSpec("y", "pass"))
    assert body(m) == REPR_WARN and m.has_warnings and not m.meets_confidence(0.5)
    assert m.iqr == pytest.approx(0.16875) and m.median == pytest.approx(0.3)


def test_significant_figures_grow_with_precision():
    spec = TaskSpec("x", "pass")
    assert Measurement(1, [1.0, 1.0, 1.0, 1.0], spec).significant_figures == 4
    assert Measurement(1, [1e-3, 1.1e-3, 1.2e-3, 1.3e-3], spec).significant_figures == 1
    assert Measurement(1, [1e-3, 1.001e-3, 1.002e-3, 1.003e-3], spec).significant_figures == 3


def test_merge_normalizes_runs_and_groups_by_task():
    a, c = TaskSpec("a", "b"), TaskSpec("a", "c")
    merged = Measurement.merge([Measurement(10, [1e-3], a, {"k": 1}),
                                Measurement(5, [1e-3, 2e-3], a), Measurement(1, [1.0], c)])
    assert [(m.number_per_run, m.raw_times, m.task_spec, m.metadata) for m in merged] == [
        (1, pytest.approx([1e-4, 2e-4, 4e-4]), a, None), (1, [1.0], c, None)]


def test_task_spec_is_a_frozen_hashable_dataclass():
    spec = TaskSpec("a", "b")
    assert dataclasses.is_dataclass(spec) and hash(spec) == hash(TaskSpec("a", "b"))
    assert (spec.global_setup, spec.num_threads, spec.label) == ("", 1, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.stmt = "c"
    with pytest.raises(TypeError, match="unhashable"):
        hash(Measurement(1, [1.0], spec))
    assert Measurement(1, [1.0], spec) == Measurement(1, [1.0], TaskSpec("a", "b"))
    m = pickle.loads(pickle.dumps(Measurement(2, [1e-3, 2e-3, 3e-3, 4e-3], spec)))
    assert m.task_spec == spec and m.median == 1.25e-3 and m.iqr == pytest.approx(0.75e-3)


def test_units_and_significant_figure_trimming():
    assert [benchmark.select_unit(t) for t in [5e-9, 1e-6, 3e-4, 1.0, 5000.0]] == [
        ("ns", 1e-9), ("us", 1e-6), ("us", 1e-6), ("s", 1), ("s", 1)]
    # single precision, as PyTorch rounds: 3.14159 -> 3.1000001430511475
    assert [benchmark.trim_sigfig(x, n) for x, n in
            [(3.14159, 2), (123456.7, 3), (0.000123456, 2), (2.5, 1)]] == [
        3.1000001430511475, 123000.0, 0.00011999999696854502, 2.0]
    with pytest.raises(AssertionError, match="Number of significant figures must be an integer"):
        benchmark.trim_sigfig(1.0, 1.5)
    assert benchmark.unit_to_english("us") == "microsecond"
    assert benchmark.ordered_unique([3, 1, 3, 2, 1]) == [3, 1, 2]


# ---- Compare ---------------------------------------------------------------------------------

def test_compare_table():
    assert str(Compare(table_results())) == TABLE_BASIC


def test_compare_table_with_envs_and_thread_groups():
    assert str(Compare(table_results(threads=(1, 4), envs=("A", "Bee")))) == TABLE_ENVS


def test_compare_trims_and_highlights_per_label(capsys):
    results = table_results(threads=(1, 2), labels=("Add", "Mul"))
    compare = Compare(results[:5])
    compare.extend_results(results[5:])
    compare.trim_significant_figures()
    compare.highlight_warnings()
    assert str(compare) == TABLE_TRIM
    compare.print()
    assert capsys.readouterr().out == TABLE_TRIM + "\n"


def test_compare_colorizes_columnwise_and_rowwise():
    compare = Compare(table_results(threads=(1, 2)))
    compare.colorize()
    assert str(compare) == TABLE_COLUMNWISE
    compare = Compare(table_results())
    compare.colorize(rowwise=True)
    assert str(compare) == TABLE_ROWWISE


def test_compare_without_descriptions_has_one_unnamed_column():
    # torch 2.13 fails here (len(None)); ember shows an unnamed column
    compare = Compare([Measurement(10, [1e-3, 1.1e-3, 1.2e-3], TaskSpec("x", "pass"))])
    assert str(compare) == (
        "[-------  ------]\n"
        "         |       \n"
        "1 threads: ------\n"
        "      x  |  110.0\n"
        "\n"
        "Times are in microseconds (us).\n")


def test_compare_takes_only_measurements():
    with pytest.raises(ValueError, match="Expected an instance of `Measurement`, got <class 'int'"):
        Compare([1])
    compare = Compare([])
    with pytest.raises(ValueError, match="got <class 'str'> instead"):
        compare.extend_results(table_results()[:2] + ["x"])
    assert str(compare) == ""  # nothing was added


# ---- Timer -----------------------------------------------------------------------------------

class Clock:
    """A fake clock that the timed statement advances."""

    now = 0.0


def fake_timer(step):
    """A Timer whose stmt takes exactly ``step`` seconds of a fake clock; its setup is counted."""
    clock, setups = Clock(), [0]
    timer = Timer(f"clock.now += {step!r}", setup="setups[0] += 1", timer=lambda: clock.now,
                  globals={"clock": clock, "setups": setups})
    return timer, clock, setups


def test_timeit_warms_up_then_runs_number_times():
    calls, setups = [0], [0]
    timer = Timer("calls[0] += 1", "setups[0] += 1", globals={"calls": calls, "setups": setups})
    m = timer.timeit(1000)
    assert calls == [1010] and setups == [2]  # warm-up: number // 100 runs, one setup each
    assert m.number_per_run == 1000 and len(m.raw_times) == 1 and m.raw_times[0] > 0
    assert m.task_spec == TaskSpec("calls[0] += 1", "setups[0] += 1")
    calls[0] = 0
    Timer("calls[0] += 1", globals={"calls": calls}).timeit(50)
    assert calls == [52]  # at least 2 warm-up runs


def test_blocked_autorange_on_a_fake_clock():
    timer, clock, setups = fake_timer(2 ** -10)
    calls = []
    m = timer.blocked_autorange(callback=lambda n, t: calls.append((n, t)), min_run_time=0.25)
    assert m.number_per_run == 1 and m.raw_times == [2 ** -10] * 256
    assert calls == [(1, 2 ** -10)] * 256 and setups == [262]  # 5 overhead + 1 size probe
    assert m.median == 2 ** -10 and m.iqr == 0


def test_blocked_autorange_grows_blocks_until_overhead_is_negligible():
    timer, clock, setups = fake_timer(2 ** -20)
    m = timer.blocked_autorange(min_run_time=0.02)
    assert m.number_per_run == 100 and len(m.raw_times) == 210
    assert m.median == pytest.approx(2 ** -20)


def test_adaptive_autorange_stops_when_steady_or_out_of_time():
    timer, clock, setups = fake_timer(2 ** -10)
    m = timer.adaptive_autorange()
    assert m.number_per_run == 1 and len(m.raw_times) == 11  # >= 4 blocks and 0.01 s
    timer, clock, setups = fake_timer(2 ** -10)
    m = timer.adaptive_autorange(threshold=0, max_run_time=0.05)  # never steady enough
    assert len(m.raw_times) == 52 and setups == [58] and clock.now == 53 * 2 ** -10
    with pytest.raises(TypeError):
        timer.adaptive_autorange(0.1, 0.01)  # run times are keyword-only


def test_timer_sets_and_restores_threads():
    prior = ember.get_num_threads()
    seen = []
    try:
        ember.set_num_threads(3)
        Timer("seen.append(torch.get_num_threads())", globals={"seen": seen},
              num_threads=2).timeit(10)
        assert seen == [2] * 12 and ember.get_num_threads() == 3
        with pytest.raises(ZeroDivisionError):
            Timer("1 / 0", num_threads=2).timeit(1)
        assert ember.get_num_threads() == 3
    finally:
        ember.set_num_threads(prior)


def test_timer_globals_are_copied_and_offer_torch():
    env = {"x": 1}
    timer = Timer("y = torch.tensor([x]) * 2", globals=env, label="double")
    assert timer.timeit(3).task_spec.label == "double"
    assert env == {"x": 1}  # `torch` (ember) was added to a copy
    assert Timer("x", globals={"x": 1, "torch": 5})._globals["torch"] == 5


def test_timer_dedents_code_and_fills_task_spec():
    timer = Timer("\n    a = 1\n    b = a\n  ", setup="  c = 2", sub_label="s", description="d",
                  env="e", num_threads=2)
    assert timer._task_spec == TaskSpec("a = 1\nb = a", "c = 2", "", None, "s", "d", "e", 2)
    assert Timer(language="py")._language is benchmark.Language.PYTHON


def test_timer_errors_as_torch_words_them():
    with pytest.raises(ValueError, match="Currently only a `str` stmt is supported."):
        Timer(lambda: None)
    with pytest.raises(ValueError, match="global_setup is C\\+\\+ only, got `x`. Most likely"):
        Timer(global_setup="x")
    with pytest.raises(ValueError, match="Invalid language `rust`."):
        Timer(language="rust")
    with pytest.raises(TypeError):
        Timer(setup=lambda: None)
    with pytest.raises(NotImplementedError, match="C\\+\\+"):  # ember has no C++ JIT
        Timer(language="c++")
    timer = Timer()
    for method in (timer.repeat, timer.autorange):
        with pytest.raises(NotImplementedError, match="See `Timer.blocked_autorange.`"):
            method()


def test_default_timer_synchronizes_only_when_cuda_is_in_use(monkeypatch):
    syncs = []
    monkeypatch.setattr(ember.cuda, "synchronize", lambda device=None: syncs.append(device))
    monkeypatch.setattr(ember.backend, "cuda_initialized", lambda: False)
    assert benchmark.timer() > 0 and syncs == []
    Timer("pass").timeit(5)
    assert syncs == []
    monkeypatch.setattr(ember.backend, "cuda_initialized", lambda: True)
    Timer("pass").timeit(5)
    assert syncs == [None] * 4  # before and after the warm-up and the measured runs


def test_public_names_and_language():
    assert {n for n in dir(benchmark) if not n.startswith("_")} >= {
        "Colorize", "Compare", "Language", "Measurement", "TaskSpec", "Timer", "ordered_unique",
        "select_unit", "set_torch_threads", "timer", "trim_sigfig", "unit_to_english"}
    assert [(x.name, x.value) for x in benchmark.Language] == [("PYTHON", 0), ("CPP", 1)]
    assert [x.value for x in benchmark.Colorize] == ["none", "columnwise", "rowwise"]


def test_import_ember_leaves_benchmark_unloaded():
    code = ("import sys, ember; print('ember.utils.benchmark' in sys.modules, "
            "hasattr(ember.utils, 'benchmark')); import ember.utils.benchmark; "
            "print(ember.utils.benchmark.Timer.__name__)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout
    assert out.split() == ["False", "False", "Timer"]  # as torch.utils.benchmark is lazy
