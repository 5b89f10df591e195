"""Runnable example programs that ship with ember (``python -m ember.examples.digits``).

More examples, which are plain scripts rather than modules, live in the repository's
``examples/`` folder.
"""
