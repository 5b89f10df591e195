"""The user's additions to the globals ``ember.load(weights_only=True)`` accepts."""

__all__ = ["add_safe_globals", "get_safe_globals", "clear_safe_globals", "safe_globals"]

_SAFE = {}          # "module.qualname" -> (object, as given)


def _entry(item):
    if isinstance(item, tuple):
        if len(item) != 2 or not isinstance(item[1], str):
            raise TypeError(f"Expected tuple (object, 'module.name') but got {item!r}")
        return item[1], item[0]
    module = getattr(item, "__module__", None)
    name = getattr(item, "__qualname__", None) or getattr(item, "__name__", None)
    if module is None or name is None:
        raise TypeError(f"add_safe_globals expects classes or functions (or (object, "
                        f"'module.name') tuples), got {item!r}")
    return f"{module}.{name}", item


def add_safe_globals(safe_globals):
    """Mark globals as safe for ``ember.load(weights_only=True)``.

    Each item is a class or function, or ``(object, "module.name")`` when the pickle names it
    differently. Only add what you trust: instances of these classes are created (and their
    ``__setstate__`` run) when a checkpoint refers to them.
    """
    for item in safe_globals:
        name, obj = _entry(item)
        _SAFE[name] = (obj, item)


def get_safe_globals():
    """The globals added with :func:`add_safe_globals`, as given."""
    return [item for _, item in _SAFE.values()]


def clear_safe_globals():
    """Forget every global added with :func:`add_safe_globals`."""
    _SAFE.clear()


def user_globals():
    return {name: obj for name, (obj, _) in _SAFE.items()}


class safe_globals:
    """``with safe_globals([...]):`` allows the globals inside the block only."""

    def __init__(self, safe_globals):
        self.safe_globals = safe_globals

    def __enter__(self):
        self._saved = dict(_SAFE)
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc):
        _SAFE.clear()
        _SAFE.update(self._saved)
