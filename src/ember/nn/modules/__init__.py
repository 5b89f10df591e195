"""The layers of ember.nn, one concept per file; each file lists its exports in __all__."""

from ember.nn.modules.module import Module
from ember.nn.modules.activation import *  # noqa: F401,F403
from ember.nn.modules.adaptive import *  # noqa: F401,F403
from ember.nn.modules.attention import *  # noqa: F401,F403
from ember.nn.modules.batchnorm import *  # noqa: F401,F403
from ember.nn.modules.channelshuffle import *  # noqa: F401,F403
from ember.nn.modules.container import *  # noqa: F401,F403
from ember.nn.modules.conv import *  # noqa: F401,F403
from ember.nn.modules.distance import *  # noqa: F401,F403
from ember.nn.modules.dropout import *  # noqa: F401,F403
from ember.nn.modules.flatten import *  # noqa: F401,F403
from ember.nn.modules.fold import *  # noqa: F401,F403
from ember.nn.modules.instancenorm import *  # noqa: F401,F403
from ember.nn.modules.lazy import *  # noqa: F401,F403
from ember.nn.modules.linear import *  # noqa: F401,F403
from ember.nn.modules.loss import *  # noqa: F401,F403
from ember.nn.modules.normalization import *  # noqa: F401,F403
from ember.nn.modules.padding import *  # noqa: F401,F403
from ember.nn.modules.pixelshuffle import *  # noqa: F401,F403
from ember.nn.modules.pooling import *  # noqa: F401,F403
from ember.nn.modules.rnn import *  # noqa: F401,F403
from ember.nn.modules.sparse import *  # noqa: F401,F403
from ember.nn.modules.transformer import *  # noqa: F401,F403
from ember.nn.modules.upsampling import *  # noqa: F401,F403
from ember.nn.modules import utils  # noqa: E402,F401  (_pair, _ntuple: libraries reach them)

import types as _types  # noqa: E402

# ``from ember.nn.modules import *`` exports the layers, not these files: ember.nn has an
# ``attention`` package of its own (``nn.attention.sdpa_kernel``), which the file
# modules/attention.py would otherwise shadow.
__all__ = [name for name, value in globals().items()
           if not name.startswith("_") and not isinstance(value, _types.ModuleType)]
