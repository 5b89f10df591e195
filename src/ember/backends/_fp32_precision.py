"""The ``fp32_precision`` settings (PyTorch's newer TF32 API): ``torch.backends.fp32_precision``,
``cuda.matmul``, ``cudnn`` (with ``cudnn.conv``, ``cudnn.rnn``) and ``mkldnn`` (with its
``matmul``, ``conv``, ``rnn``).

Each is "ieee" (full float32), "tf32", "bf16" (oneDNN only) or "none" (inherit from the level
above). Setting a level sets the levels under it too; where a backend does not support the
value, it keeps its own and its op levels take that. Setting "none" returns the levels under
it to their defaults. The settings that act in ember are those of the legacy flags
they stand for: ``cuda.matmul`` is ``backends.cuda.matmul.allow_tf32`` and ``cudnn.conv`` is
``backends.cudnn.allow_tf32`` (TF32 products on a GPU); the others are remembered only.
"""

__all__ = ["get", "set_precision", "note_legacy", "Level"]

_DEFAULTS = {"generic": "none", "cuda": "none", "cuda.matmul": "none", "cuda.conv": "tf32",
             "cuda.rnn": "tf32", "mkldnn": "none", "mkldnn.matmul": "none",
             "mkldnn.conv": "none", "mkldnn.rnn": "none"}
_STATE = dict(_DEFAULTS)
_PRECISIONS = ("ieee", "tf32", "bf16", "none")


def _supports(level, value):
    return value != "bf16" or not level.startswith("cuda")


def _under(level):
    """``level`` and the levels under it."""
    if level == "generic":
        return list(_STATE)
    return [name for name in _STATE if name == level or name.startswith(level + ".")]


def get(level):
    """The ``fp32_precision`` of ``level`` ("generic", "cuda", "cuda.matmul", ...)."""
    return _STATE[level]


def set_precision(level, value):
    """Set ``level`` (and the levels under it) to ``value``, checked as PyTorch does."""
    if not isinstance(value, str):
        raise TypeError(f"fp32_precision expects a str, but got {type(value).__name__}")
    if value not in _PRECISIONS:
        raise RuntimeError(f"Unknown precision: {value}")
    if level != "generic" and not _supports(level, value):
        raise RuntimeError(f"backend '{level.split('.')[0]}' does not support precision "
                           f"'{value}'")
    changed = _under(level)
    for name in changed:
        if value == "none":
            _STATE[name] = "none" if name == level else _DEFAULTS[name]
        elif _supports(name, value):
            _STATE[name] = value
        elif "." in name:                   # an op level takes its backend level's value
            _STATE[name] = _STATE[name.partition(".")[0]]
    _apply(changed)


def note_legacy(level, value):
    """Record what a legacy setter (``allow_tf32``, ``set_float32_matmul_precision``) set
    ``level`` to, as PyTorch reports it through ``fp32_precision``."""
    _STATE[level] = value


def _effective(level):
    """The precision ``level`` runs at: its own, else the nearest level above that is set."""
    while True:
        if _STATE[level] != "none" or level == "generic":
            return _STATE[level]
        level = level.rpartition(".")[0] or "generic"


def _apply(changed):
    """Pass the settings that act on to the legacy flags that carry them out."""
    from ember.backends import _precision, cudnn     # both import this module
    if "cuda.matmul" in changed and _effective("cuda.matmul") in ("ieee", "tf32"):
        own = _STATE["cuda.matmul"]             # set_allow_tf32 records "tf32"/"ieee" here
        _precision.set_allow_tf32(_effective("cuda.matmul") == "tf32")
        _STATE["cuda.matmul"] = own
    if "cuda.conv" in changed and _effective("cuda.conv") in ("ieee", "tf32"):
        cudnn.allow_tf32 = _effective("cuda.conv") == "tf32"


class Level:
    """An object with an ``fp32_precision`` attribute (``cudnn.conv``, ``mkldnn.matmul``)."""

    def __init__(self, level):
        object.__setattr__(self, "_level", level)

    @property
    def fp32_precision(self):
        """This level's precision: "ieee", "tf32", "bf16" or "none"."""
        return get(self._level)

    @fp32_precision.setter
    def fp32_precision(self, value):
        set_precision(self._level, value)
