"""The loss functions of ember.nn.functional; the ops live in loss_*.py and ctc.py by family,
this module gathers their tables."""

from ember.ops import loss_ce  # noqa: E402,F401

FUNCTIONAL = {}
PUBLIC = {}
