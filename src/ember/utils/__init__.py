"""ember.utils: data loading and other utilities (``torch.utils``)."""

from ember.utils import data  # noqa: F401
from ember.utils import checkpoint  # noqa: F401
from ember.utils import safetensors  # noqa: F401
from ember.utils import deterministic  # noqa: F401
from ember.utils import dlpack  # noqa: F401
from ember.utils import hooks  # noqa: F401
from ember.utils import collect_env  # noqa: F401  (torch.utils has it loaded)
from ember.utils._swap import swap_tensors  # noqa: F401
