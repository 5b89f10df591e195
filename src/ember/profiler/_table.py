"""The profiler's summary table, laid out as PyTorch prints it: the name column as wide as
the longest name plus 4 (at most ``max_name_column_width``), 12-character number columns,
two spaces after every column, and the totals in a footer."""

from ember.profiler._events import format_time

__all__ = ["build_table"]

_WIDTH = 12
_SPACING = "  "


def _percent(part, total):
    return "0.00%" if total == 0 else f"{part * 100.0 / total:.2f}%"


def _clip_name(name, max_width):
    return name if len(name) < max_width - 3 else name[:max_width - 3] + "..."


def build_table(events, *, sort_by=None, header=None, row_limit=100, max_name_column_width=55,
                max_shapes_column_width=80, top_level_events_only=False, time_unit=None,
                use_device=None):
    """The table for ``events`` (``EventList.table`` documents the arguments); "" for no
    events."""
    if not events:
        return ""
    if sort_by is not None:
        attribute = sort_by.replace("cuda", "device")
        events = sorted(events, key=lambda e: getattr(e, attribute), reverse=True)
    else:
        events = list(events)
    self_cpu_total = sum(e.self_cpu_time_total for e in events)
    self_device_total = sum(e.self_device_time_total for e in events)
    device = use_device.upper() if use_device else None
    # the layout comes from all the events, before the top-level filter and the row limit
    name_width = min(max((len(e.key) for e in events), default=0) + 4, max_name_column_width)
    show_shapes = any(e.input_shapes for e in events)
    shapes_width = min(max((len(str(e.input_shapes)) for e in events), default=0) + 4,
                       max_shapes_column_width)
    if top_level_events_only:
        events = [e for e in events if e.cpu_parent is None]
    if row_limit is not None and 0 < row_limit < len(events):
        events = events[:row_limit]
    titles = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if device:
        titles += [f"Self {device}", f"Self {device} %", f"{device} total",
                   f"{device} time avg"]
    titles.append("# of Calls")
    widths = [name_width] + [_WIDTH] * len(titles)
    titles = ["Name"] + titles
    if show_shapes:
        titles.append("Input Shapes")
        widths.append(shapes_width)

    def row(cells):
        return "".join(str(c).rjust(w) + _SPACING for c, w in zip(cells, widths)) + "\n"

    rule = "".join("-" * w + _SPACING for w in widths) + "\n"
    line = "=" * (sum(widths) + len(_SPACING) * (len(widths) - 1)) + "\n"
    out = []
    if header is not None:
        out.append(line + header + "\n")
    if top_level_events_only:
        out.append(line
                   + "This report only display top-level ops statistics\n")
    out += [rule, row(titles), rule]
    for e in events:
        cells = [_clip_name(e.key, max_name_column_width),
                 _percent(e.self_cpu_time_total, self_cpu_total),
                 format_time(e.self_cpu_time_total, time_unit),
                 _percent(e.cpu_time_total, self_cpu_total),
                 format_time(e.cpu_time_total, time_unit),
                 format_time(e.cpu_time, time_unit)]
        if device:
            cells += [format_time(e.self_device_time_total, time_unit),
                      _percent(e.self_device_time_total, self_device_total),
                      format_time(e.device_time_total, time_unit),
                      format_time(e.device_time, time_unit)]
        cells.append(e.count)
        if show_shapes:
            cells.append(str(e.input_shapes)[:shapes_width])
        out.append(row(cells))
    out.append(rule)
    out.append(f"Self CPU time total: {format_time(self_cpu_total, time_unit)}\n")
    if device:
        out.append(f"Self {device} time total: {format_time(self_device_total, time_unit)}\n")
    return "".join(out)
