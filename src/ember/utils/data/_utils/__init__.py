"""The module paths PyTorch documents under ``torch.utils.data._utils`` (``collate``, for
custom ``collate_fn_map`` tables); the code lives in ``ember.utils.data``."""

from ember.utils.data._utils import collate  # noqa: F401
