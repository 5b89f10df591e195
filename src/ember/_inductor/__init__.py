"""``torch._inductor``, as far as programs reach into it: its ``config``. ember compiles
nothing (see ``ember.compiler``)."""

from ember._inductor import config  # noqa: F401
