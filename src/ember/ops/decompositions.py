"""Linear algebra beyond products (``torch.linalg``): the modules below register the ops;
this one gathers their other names."""

from ember.ops import (factorizations, householder, ldl, least_squares, lowrank,  # noqa: F401
                       lu, matrix_functions, norms, singular, solvers)

ALIASES = {}
PUBLIC = {**factorizations.PUBLIC, **singular.PUBLIC, **lu.PUBLIC, **lowrank.PUBLIC}
