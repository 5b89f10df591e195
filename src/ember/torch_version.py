"""``torch.torch_version``: the type of ``ember.__version__``.

``TorchVersion`` is a ``str`` that compares as a version number: with another version string
(``ember.__version__ >= "2.0"`` orders "10" after "9", unlike plain strings), a tuple or list
of release numbers (``>= (1, 13)``) or a ``packaging.version.Version``. Versions are parsed
with ``packaging`` when it is installed, else by their numeric release part. A string that is
no version number compares as a plain string; anything else cannot be compared.
"""

import operator
import re

__all__ = ["TorchVersion"]

# a PEP 440 version: the release numbers, then pre-, post- and dev-release tags, a local part
_RELEASE = re.compile(r"v?(\d+(?:\.\d+)*)"
                      r"(?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview|post|rev|r|dev)[-_.]?\d*)*"
                      r"(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?", re.IGNORECASE)


class InvalidVersion(ValueError):
    """A string that is not a version number (``packaging.version.InvalidVersion``)."""


def _parse(text):
    """``text`` as a comparable version: packaging's ``Version``, or without packaging the
    tuple of its release numbers (trailing zeros dropped, so "2.0" equals "2")."""
    try:
        from packaging.version import InvalidVersion as Invalid, Version
    except ImportError:
        match = _RELEASE.fullmatch(text.strip())
        if match is None:
            raise InvalidVersion(f"Invalid version: {text!r}") from None
        numbers = [int(n) for n in match.group(1).split(".")]
        while len(numbers) > 1 and numbers[-1] == 0:
            numbers.pop()
        return tuple(numbers)
    try:
        return Version(text)
    except Invalid:
        raise InvalidVersion(f"Invalid version: {text!r}") from None


def _as_version(other):
    """``other`` as a parsed version; raises ``InvalidVersion`` for a string that is none,
    ``TypeError`` for what cannot name a version."""
    if isinstance(other, str):
        return _parse(other)
    if isinstance(other, (tuple, list)):
        return _parse(".".join(str(part) for part in other))
    if type(other).__name__ == "Version" and hasattr(other, "release"):
        return _parse(str(other))
    raise TypeError


class TorchVersion(str):
    """A version string that compares as a version with strings, tuples and ``Version``s."""

    __hash__ = str.__hash__

    def _compare(self, other, op):
        try:
            theirs = _as_version(other)
            ours = _parse(str(self))
        except InvalidVersion:
            if isinstance(other, str):
                return op(str(self), other)
            return NotImplemented
        except TypeError:
            return NotImplemented
        return op(ours, theirs)

    def __eq__(self, other):
        return self._compare(other, operator.eq)

    def __ne__(self, other):
        result = self._compare(other, operator.eq)
        return result if result is NotImplemented else not result

    def __lt__(self, other):
        return self._compare(other, operator.lt)

    def __le__(self, other):
        return self._compare(other, operator.le)

    def __gt__(self, other):
        return self._compare(other, operator.gt)

    def __ge__(self, other):
        return self._compare(other, operator.ge)
