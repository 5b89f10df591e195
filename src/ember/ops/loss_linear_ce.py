"""``F.linear_cross_entropy``: cross entropy of the logits of a linear layer, as one call.

PyTorch's options (``nn.LinearCrossEntropyOptions``) choose a chunked path that never holds
the whole (batch, classes) logits; ember computes the reference path, ``cross_entropy(linear(
input, weight, bias), target)``, whatever the options say: the same values, with the logits'
memory.
"""

__all__ = ["LinearCrossEntropyOptions", "linear_cross_entropy"]


class LinearCrossEntropyOptions:
    """Chunking options of ``linear_cross_entropy`` (accepted; ember does not chunk)."""

    def __init__(self, allow_retain_graph=False, batch_chunk_size=None, chunking_method="auto",
                 acc_policy="auto", acc_dtype=None):
        self.allow_retain_graph, self.batch_chunk_size = allow_retain_graph, batch_chunk_size
        self.chunking_method, self.acc_policy = chunking_method, acc_policy
        self.acc_dtype = acc_dtype

    def __repr__(self):
        return (f"LinearCrossEntropyOptions(allow_retain_graph={self.allow_retain_graph}, "
                f"batch_chunk_size={self.batch_chunk_size}, chunking_method="
                f"{self.chunking_method!r}, acc_policy={self.acc_policy!r}, "
                f"acc_dtype={self.acc_dtype})")


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,
                         reduction="mean", ignore_index=None, label_smoothing=0.0,
                         options=None):
    """``cross_entropy(linear(input, linear_weight, linear_bias), target)``; a weight of
    shape (C, d1, ..., dK, in_features) gives K-dimensional logits (N, C, d1, ..., dK)."""
    from ember.nn import functional as F
    if input.ndim not in (1, 2):
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.ndim}")
    if input.shape[-1] != linear_weight.shape[-1]:
        raise RuntimeError(f"expected equal input and linear_weight last dimensions "
                           f"(in_features), got {input.shape[-1]} and "
                           f"{linear_weight.shape[-1]}, respectively")
    classes = tuple(linear_weight.shape[:-1])
    bias = None if linear_bias is None else linear_bias.reshape(-1)
    logits = F.linear(input, linear_weight.reshape(-1, linear_weight.shape[-1]), bias)
    logits = logits.reshape(tuple(input.shape[:-1]) + classes)
    if ignore_index is None:
        ignore_index = -100
    return F.cross_entropy(logits, target, weight=weight, ignore_index=ignore_index,
                           reduction=reduction, label_smoothing=label_smoothing)


FUNCTIONAL = {"linear_cross_entropy": linear_cross_entropy}
