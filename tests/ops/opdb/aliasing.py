"""OpInfo entries for ops that only re-present a tensor (ember/ops/conversion.py: _alias)."""

import numpy as np

from tests.ops.opdb.core import ALL, OpInfo, unary_samples

OPS = [
    OpInfo("_alias", np.array, unary_samples(), dtypes=ALL, gradgrad=True,
           torch_op=lambda x: x.view_as(x)),
]
