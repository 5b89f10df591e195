"""Batch normalization: BatchNorm1d/2d/3d, with running statistics (momentum=None: their
cumulative average) used in eval mode."""

import ember
from ember.nn import functional as F
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"]


class _NormBase(Module):
    """Parameters and running-statistics buffers shared by batch and instance norm."""

    _version = 2                        # version 2 added num_batches_tracked

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        self.use_bias = bias
        if affine:
            self.weight = Parameter(ember.empty(num_features, **factory))
            if bias:
                self.bias = Parameter(ember.empty(num_features, **factory))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", ember.zeros(num_features, **factory))
            self.register_buffer("running_var", ember.ones(num_features, **factory))
            self.register_buffer("num_batches_tracked",
                                 ember.tensor(0, dtype=ember.long, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # state dicts older than version 2 (or without metadata) lack num_batches_tracked:
        # the module keeps its own count instead of reporting the key missing
        key = prefix + "num_batches_tracked"
        if (local_metadata.get("version") or 0) < 2 and self.track_running_stats \
                and key not in state_dict:
            state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                               else ember.tensor(0, dtype=ember.long))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    def reset_running_stats(self):
        """Zero the running mean and count; running variance back to ones."""
        if self.track_running_stats:
            with ember.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        """Running statistics reset; weight ones, bias zeros."""
        self.reset_running_stats()
        with ember.no_grad():
            if self.weight is not None:
                self.weight.fill_(1)
            if self.bias is not None:
                self.bias.zero_()

    def _check_input_dim(self, input):
        raise NotImplementedError

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with ember.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:           # cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked)
        use_batch_stats = self.training or (self.running_mean is None
                                            and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None,
                            self.running_var if track else None, self.weight, self.bias,
                            use_batch_stats, momentum, self.eps)


def _batch_norm_class(name, ranks, text):
    def check(self, input):
        if input.dim() not in ranks:    # (dim(): what a non-tensor's AttributeError names)
            raise ValueError(f"expected {text} input (got {input.dim()}D input)")
    doc = f"Batch normalization over a {text} input (dim 1 holds the channels)."
    return type(name, (_BatchNorm,), {"_check_input_dim": check, "__doc__": doc,
                                      "__module__": __name__})


BatchNorm1d = _batch_norm_class("BatchNorm1d", (2, 3), "2D or 3D")
BatchNorm2d = _batch_norm_class("BatchNorm2d", (4,), "4D")
BatchNorm3d = _batch_norm_class("BatchNorm3d", (5,), "5D")


class SyncBatchNorm(_BatchNorm):
    """Batch normalization whose statistics span every process of ``process_group``. ember
    trains in one process (it has no ``ember.distributed`` yet), so they are this process's
    batch's, as BatchNorm's are; any input of 2 or more dims."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None, *,
                 bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with every batch-norm layer in it replaced by a SyncBatchNorm holding
        the same parameters and running statistics."""
        converted = module
        if isinstance(module, _BatchNorm):
            converted = cls(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_group,
                            bias=module.bias is not None or not module.affine)
            for name in ("weight", "bias"):
                if getattr(module, name, None) is not None:
                    setattr(converted, name, getattr(module, name))
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                setattr(converted, name, getattr(module, name))
            converted.training = module.training
        for name, child in module.named_children():
            converted.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return converted
