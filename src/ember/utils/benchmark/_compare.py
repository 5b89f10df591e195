"""``Compare``: tables of many Measurements, as ``torch.utils.benchmark.Compare`` prints."""

import enum
import math

from ember.utils.benchmark._common import (Measurement, _log10_f32, ordered_unique,
                                            select_unit, trim_sigfig, unit_to_english)

__all__ = ["Colorize", "Compare"]

_BEST, _GOOD = "\033[92m", "\033[34m"
_BAD, _VERY_BAD = "\033[2m\033[91m", "\033[31m"
_BOLD, _END = "\033[1m", "\033[0m"
_SEP = "  |  "


class Colorize(enum.Enum):
    """How Compare colours a table's cells: not at all, against the column, or the row."""

    NONE = "none"
    COLUMNWISE = "columnwise"
    ROWWISE = "rowwise"


def _colour(text, value, best):
    """``text`` coloured by how ``value`` compares with the ``best`` value."""
    if value <= best * 1.01 or value <= best + 100e-9:
        return _BEST + _BOLD + text + _END * 2
    if value <= best * 1.1:
        return _GOOD + _BOLD + text + _END * 2
    if value >= best * 5:
        return _VERY_BAD + _BOLD + text + _END * 2
    if value >= best * 2:
        return _BAD + text + _END * 2
    return text


class _ColumnFormat:
    """How the numbers of one table column are written (shared width and decimals)."""

    def __init__(self, cells, scale, trim, highlight):
        present = [m for m in cells if m is not None]
        self.trim = trim
        self.highlight = highlight and any(m.has_warnings for m in present)
        digits = [int(math.ceil(_log10_f32(m.median / scale))) for m in present]
        decimals = (min(max(m.significant_figures - d, 0) for d, m in zip(digits, present))
                    if trim else 1)
        self.width = max(digits) + decimals + (1 if decimals else 0)
        self.decimals = decimals

    def text(self, value, sigfigs, spread):
        """One cell: ``value`` (or blanks when None) and, if highlighted, its spread."""
        if value is None:
            return " " * len(self.text(1, sigfigs, None))
        if self.trim:
            value = trim_sigfig(value, sigfigs)
        note = f" (! {spread * 100:.0f}%)" if self.highlight and spread is not None else ""
        return f"{value:>{self.width}.{self.decimals}f}" + note.rjust(7 if self.highlight else 0)


class _Table:
    """The table of the Measurements that share one label."""

    def __init__(self, results, colorize, trim, highlight):
        self.results, self.colorize, self.highlight = results, colorize, highlight
        self.label = results[0].label
        self.unit, self.scale = select_unit(min(m.median for m in results))
        keys = ordered_unique((m.num_threads, m.env, m.as_row_name) for m in results)
        self.row_keys = sorted(keys, key=lambda key: key[:2])  # stable: stmt order stays
        self.col_keys = ordered_unique(m.description for m in results)
        rows = {key: i for i, key in enumerate(self.row_keys)}
        cols = {key: j for j, key in enumerate(self.col_keys)}
        self.grid = [[None] * len(self.col_keys) for _ in self.row_keys]
        for m in results:
            self.grid[rows[(m.num_threads, m.env, m.as_row_name)]][cols[m.description]] = m
        # rows with the same thread count form a group (under a "N threads: ----" line)
        self.groups = []
        for i, key in enumerate(self.row_keys):
            if i == 0 or key[0] != self.row_keys[i - 1][0]:
                self.groups.append([])
            self.groups[-1].append(i)
        self.formats = [_ColumnFormat([row[j] for row in self.grid], self.scale, trim,
                                      highlight) for j in range(len(self.col_keys))]

    def _row_strings(self, i, show_env, env_width):
        """The unpadded cells of row ``i``: its name, then one number per column."""
        row = self.grid[i]
        first = next(m for m in row if m is not None)
        env = f"({first.env})" if show_env else ""
        cells = ["  " + env.ljust(env_width + 4) + first.as_row_name]
        for m, fmt in zip(row, self.formats):
            if m is None:
                cells.append(fmt.text(None, 1, None))
            else:
                spread = m.iqr / m.median if m.has_warnings else None
                cells.append(fmt.text(m.median / self.scale, m.significant_figures, spread))
        return cells

    def _best(self, i, group):
        """The reference (smallest) median of each cell of row ``i`` for colouring."""
        row = self.grid[i]
        if self.colorize == Colorize.ROWWISE:
            best = min(m.median for m in row if m is not None)
            return [best] * len(row)
        if self.colorize == Colorize.COLUMNWISE:
            column = [[self.grid[r][j] for r in group] for j in range(len(row))]
            return [min((m.median for m in c if m is not None), default=None) for c in column]
        return [None] * len(row)

    def render(self):
        """The table's text, ending with a newline."""
        envs = {m.env for m in self.results}
        many_envs = len(envs) > 1
        env_width = max(len(e) for e in envs) if many_envs else 0
        shown = []  # per row: (thread count or None, whether its env is shown)
        for group in self.groups:
            prior_env = ""  # each group shows its first env (unless that env is "")
            for k, i in enumerate(group):
                threads, env, _ = self.row_keys[i]
                shown.append((threads if k == 0 else None, many_envs and env != prior_env))
                prior_env = env
        header = [""] + ["" if d is None else d for d in self.col_keys]
        body = [self._row_strings(i, env, env_width) for i, (_, env) in enumerate(shown)]
        widths = [max(len(cells[j]) if j < len(cells) else 0 for cells in [header] + body)
                  for j in range(len(header))]
        lines = [_SEP.join(c.center(w) for c, w in zip(header, widths))]
        total = len(lines[0])
        group_of = {i: group for group in self.groups for i in group}
        for i, (threads, _) in enumerate(shown):
            if threads is not None:
                lines.append(f"{threads} threads: ".ljust(total, "-"))
            cells = [body[i][0].ljust(widths[0])]
            best = self._best(i, group_of[i])
            for cell, width, m, ref in zip(body[i][1:], widths[1:], self.grid[i], best):
                cell = cell.center(width)
                if ref is not None and m is not None:
                    cell = _colour(cell, m.median, ref)
                cells.append(cell)
            lines.append(_SEP.join(cells))
        title = f" {self.label or ''} ".center(total - 2, "-")
        text = f"[{title}]\n" + "\n".join(lines)
        text += f"\n\nTimes are in {unit_to_english(self.unit)}s ({self.unit}).\n"
        if self.highlight and any(m.has_warnings for m in self.results):
            text += ("(! XX%) Measurement has high variance, where XX is the IQR / median "
                     "* 100.\n")
        return text


class Compare:
    """Formats many Measurements as tables: one per label, a row per sub_label (or stmt),
    a column per description."""

    def __init__(self, results):
        self._results = []
        self.extend_results(results)
        self._trim_significant_figures = False
        self._colorize = Colorize.NONE
        self._highlight_warnings = False

    def __str__(self):
        return "\n".join(self._render())

    def extend_results(self, results):
        """Add more Measurements to the comparison."""
        results = list(results)
        for r in results:
            if not isinstance(r, Measurement):
                raise ValueError(f"Expected an instance of `Measurement`, got {type(r)} instead.")
        self._results.extend(results)

    def trim_significant_figures(self):
        """Show each time only to the digits its spread makes significant."""
        self._trim_significant_figures = True

    def colorize(self, rowwise=False):
        """Colour each time against the best of its column (or row, if ``rowwise``)."""
        self._colorize = Colorize.ROWWISE if rowwise else Colorize.COLUMNWISE

    def highlight_warnings(self):
        """Mark the times whose spread is large with their IQR / median."""
        self._highlight_warnings = True

    def print(self):
        """Print the tables."""
        print(str(self))

    def _render(self):
        """The text of each label's table."""
        by_label = {}
        for m in Measurement.merge(self._results):
            by_label.setdefault(m.label, []).append(m)
        return [_Table(group, self._colorize, self._trim_significant_figures,
                       self._highlight_warnings).render() for group in by_label.values()]
