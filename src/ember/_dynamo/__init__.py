"""``torch._dynamo``, as far as programs reach into it: its settings, ``reset``,
``list_backends``, ``is_compiling``, ``disable`` and ``OptimizedModule``. ember compiles
nothing (see ``ember.compiler``)."""

from ember._dynamo import config, eval_frame  # noqa: F401
from ember._dynamo.eval_frame import OptimizedModule  # noqa: F401
from ember.compiler import (allow_in_graph, assume_constant_result, disable,  # noqa: F401
                            is_compiling, list_backends, reset)

optimize = None
