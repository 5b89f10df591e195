"""The OpInfo database: every module here defines ``OPS``, a list of OpInfo entries."""

import importlib
import pkgutil

from tests.ops.opdb.core import OpInfo


def _collect():
    entries = []
    for module in pkgutil.iter_modules(__path__):
        if module.name == "core":
            continue
        entries.extend(importlib.import_module(f"{__name__}.{module.name}").OPS)
    return entries


OPDB: list[OpInfo] = _collect()
