"""Linear algebra beyond products (``torch.linalg``): the modules below register the ops;
this one gathers their other names."""

from ember.ops import (factorizations, householder, least_squares, lu,  # noqa: F401
                       matrix_functions, norms, singular, solvers)

ALIASES = {}
PUBLIC = {**factorizations.PUBLIC, **singular.PUBLIC, **lu.PUBLIC}
