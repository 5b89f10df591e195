"""``torch._dynamo``, as far as programs reach into it: its settings, ``reset``,
``list_backends``, ``is_compiling``, ``disable`` and ``OptimizedModule``. ember compiles
nothing (see ``ember.compiler``)."""

from ember._dynamo import config, eval_frame  # noqa: F401
from ember._dynamo.eval_frame import OptimizedModule  # noqa: F401
from ember.compiler import (allow_in_graph, assume_constant_result, disable,  # noqa: F401
                            is_compiling, list_backends, reset)

optimize = None


def mark_dynamic(t, index, *, min=None, max=None, specialize_on=None):  # noqa: A002
    """Mark dimension(s) ``index`` of ``t`` as dynamic for the compiler: nothing to mark, as
    ember compiles nothing."""


def maybe_mark_dynamic(t, index):
    """Hint that dimension(s) ``index`` of ``t`` may vary: a no-op in ember."""


def mark_static(t, index=None):
    """Mark dimension(s) ``index`` of ``t`` as static for the compiler: a no-op in ember."""


def mark_static_address(t, guard=True):
    """Mark ``t``'s memory address as fixed across calls (for CUDA graphs): a no-op in ember."""
