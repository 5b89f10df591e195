"""Odds and ends of the torch namespace, by concept: grids and index sets (grids.py),
pairwise distances (distances.py), covariance and extremes (moments.py), and NumPy-style
arrangements (arrange.py)."""

from ember.ops import shape  # noqa: F401  (first: join and slicing load through it)
from ember.ops import arrange, distances, grids, moments  # noqa: E402

ALIASES = {**arrange.ALIASES, **distances.ALIASES, **grids.ALIASES, **moments.ALIASES}
PUBLIC = {**arrange.PUBLIC, **distances.PUBLIC, **grids.PUBLIC, **moments.PUBLIC}
