"""ChannelShuffle: interleave the channels of several groups (ShuffleNet)."""

from ember.nn import functional as F
from ember.nn.modules.module import Module

__all__ = ["ChannelShuffle"]


class ChannelShuffle(Module):
    """Split the channels into ``groups`` groups and interleave them."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
