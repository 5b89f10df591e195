"""Instance normalization: InstanceNorm1d/2d/3d (each sample and channel over its spatial
dims), unbatched inputs accepted."""

import warnings

from ember._warn import outside_level
from ember.nn import functional as F
from ember.nn.modules.batchnorm import _NormBase

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


class _InstanceNorm(_NormBase):
    _rank = 0                           # dims of an unbatched input

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def forward(self, input):
        r = self._rank
        if input.dim() not in (r, r + 1):
            raise ValueError(f"expected {r}D or {r + 1}D input (got {input.ndim}D input)")
        feature_dim = input.ndim - r
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. "
                          f"You can silence this warning by not passing in num_features, "
                          f"which is not used because affine=False", stacklevel=outside_level())
        unbatched = input.ndim == r
        x = input.unsqueeze(0) if unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats, self.momentum
                              if self.momentum is not None else 0.0, self.eps)
        return out.squeeze(0) if unbatched else out

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # a checkpoint without version metadata (from before 0.4.0, or a hand-made dict) may
        # carry running stats this module does not track: PyTorch names them in an error of
        # their own, even when strict=False, instead of listing them as unexpected keys
        if local_metadata.get("version") is None and not self.track_running_stats:
            stale = [prefix + name for name in ("running_mean", "running_var")
                     if prefix + name in state_dict]
            if stale:
                name = type(self).__name__
                error_msgs.append(
                    "Unexpected running stats buffer(s) {} for {} with track_running_stats="
                    "False. If state_dict is a checkpoint saved before 0.4.0, this may be "
                    "expected because {} does not track running stats by default since 0.4.0. "
                    "Please remove these keys from state_dict. If the running stats are "
                    "actually needed, instead set track_running_stats=True in {} to enable "
                    "them. See the documentation of {} for details.".format(
                        " and ".join(f'"{key}"' for key in stale), name, name, name, name))
                for key in stale:
                    state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)


def _instance_norm_class(name, rank):
    doc = (f"Instance normalization of a {rank}D (unbatched) or {rank + 1}D input: each "
           f"sample's channels over their spatial dims.")
    return type(name, (_InstanceNorm,), {"_rank": rank, "__doc__": doc,
                                         "__module__": __name__})


InstanceNorm1d = _instance_norm_class("InstanceNorm1d", 2)
InstanceNorm2d = _instance_norm_class("InstanceNorm2d", 3)
InstanceNorm3d = _instance_norm_class("InstanceNorm3d", 4)
