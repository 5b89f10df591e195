"""``torch.nn.utils.init``: where PyTorch defines ``skip_init``."""

from ember.nn.utils import skip_init

__all__ = ["skip_init"]
