"""Linear algebra beyond products (``torch.linalg``): the modules below register the ops;
this one gathers their other names."""

from ember.ops import (factorizations, least_squares, lu, matrix_functions,  # noqa: F401
                       norms, singular, solvers)

ALIASES = {}
PUBLIC = {**factorizations.PUBLIC, **singular.PUBLIC}
