"""Dropout layers: active in training mode, the identity in eval mode."""

from ember.nn.modules._functional_form import functional_form
from ember.nn.modules.module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "FeatureAlphaDropout"]


class _DropoutNd(Module):
    """Holds ``p`` and ``inplace``; subclasses pick the functional form ``_fn``."""

    _fn = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zeroes each element with probability ``p`` and scales the rest by ``1 / (1 - p)``."""

    _fn = functional_form("dropout")


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of (N, C, L) or (C, L) inputs."""

    _fn = functional_form("dropout1d")


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of (N, C, H, W) inputs."""

    _fn = functional_form("dropout2d")


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) inputs."""

    _fn = functional_form("dropout3d")


class AlphaDropout(_DropoutNd):
    """Dropout that keeps selu's zero mean and unit variance."""

    _fn = functional_form("alpha_dropout")

    def forward(self, input):
        # PyTorch ignores ``inplace`` here: the input is never overwritten
        return type(self)._fn(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels."""

    _fn = functional_form("feature_alpha_dropout")

    def forward(self, input):
        # PyTorch ignores ``inplace`` here: the input is never overwritten
        return type(self)._fn(input, self.p, self.training)
