"""Every distribution's example parameters, gathered from the ``examples_*`` modules.

``EXAMPLES`` lists ``(Distribution subclass, [constructor keyword dicts])``; the generic tests
build each distribution from each dict (``CASES``).
"""

import importlib
import pathlib

_GROUPS = sorted(p.stem for p in pathlib.Path(__file__).parent.glob("examples_*.py"))

EXAMPLES = [entry for group in _GROUPS
            for entry in importlib.import_module(f"tests.distributions.{group}").EXAMPLES]

CASES = [(cls, params) for cls, dicts in EXAMPLES for params in dicts]
CASE_IDS = [f"{cls.__name__}-{i}" for cls, dicts in EXAMPLES for i in range(len(dicts))]
