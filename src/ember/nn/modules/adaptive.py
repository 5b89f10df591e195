"""Adaptive softmax (``nn.AdaptiveLogSoftmaxWithLoss``): log-probabilities over a large
vocabulary, cheap for its frequent classes.

The classes below ``cutoffs[0]`` (the shortlist) get a logit each in the head, a linear layer
that also gives one logit per cluster of rarer classes. A class in cluster i has log-probability
log p(cluster i) + log p(class | cluster i), the second from cluster i's own tail: two linear
layers through a narrower projection (``in_features / div_value ** (i + 1)`` wide). Only the
rows whose targets fall in a cluster run through its tail.
"""

import collections

import ember
from ember.nn import functional as F
from ember.nn.modules.container import ModuleList, Sequential
from ember.nn.modules.linear import Linear
from ember.nn.modules.module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = collections.namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax over ``n_classes`` classes split at ``cutoffs``; ``forward(input,
    target)`` gives each target's log-probability and their mean negative (the loss)."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if (not cutoffs or cutoffs != sorted(cutoffs) or min(cutoffs) <= 0
                or max(cutoffs) > n_classes - 1 or len(set(cutoffs)) != len(cutoffs)
                or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted "
                             "in an increasing order, where each value is between 1 and "
                             "n_classes-1")
        factory = {"device": device, "dtype": dtype}
        self.in_features, self.n_classes, self.div_value = in_features, n_classes, div_value
        self.head_bias = head_bias
        self.cutoffs = cutoffs + [n_classes]
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **factory)
        self.tail = ModuleList(
            Sequential(Linear(in_features, int(in_features // div_value ** (i + 1)), bias=False,
                              **factory),
                       Linear(int(in_features // div_value ** (i + 1)),
                              self.cutoffs[i + 1] - self.cutoffs[i], bias=False, **factory))
            for i in range(self.n_clusters))

    def reset_parameters(self):
        """Initialize the head's and the tails' layers afresh."""
        self.head.reset_parameters()
        for projection, output in self.tail:
            projection.reset_parameters()
            output.reset_parameters()

    def forward(self, input_, target_):
        """(each target's log-probability, their mean negative): ``_ASMoutput``."""
        input, target = input_, target_
        if target.ndim == 1:
            if input.shape[0] != target.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch "
                                   "dimension.")
            if input.ndim != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found "
                                   f"inputs with size {input.shape}")
        elif target.ndim == 0:
            if input.ndim != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found "
                                   f"inputs with size {input.shape}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        unbatched = target.ndim == 0
        if unbatched:
            input, target = input.unsqueeze(0), target.unsqueeze(0)
        if target.numel() and (int(target.min()) < 0 or int(target.max()) >= self.n_classes):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but "
                               f"values in range [{int(target.min())}, {int(target.max())}] "
                               f"were found. ")
        # the tails run before the head, as PyTorch's do (which layer a bad input fails in)
        tails = []
        for i, tail in enumerate(self.tail, start=1):
            rows = ((target >= self.cutoffs[i - 1]) & (target < self.cutoffs[i])).nonzero()
            rows = rows.squeeze(1)
            if rows.numel() == 0:
                continue
            local = F.log_softmax(tail(input.index_select(0, rows)), dim=1)
            within = (target.index_select(0, rows) - self.cutoffs[i - 1]).unsqueeze(1)
            tails.append((rows, local.gather(1, within).squeeze(1)))
        head_logprob = F.log_softmax(self.head(input), dim=1)
        # the head's entry for each row: its class in the shortlist, else its cluster
        in_clusters = target >= self.shortlist_size
        cluster_of = ember.bucketize(target, ember.tensor(self.cutoffs[1:], device=target.device),
                                     right=True)
        column = ember.where(in_clusters, self.shortlist_size + cluster_of, target)
        output = head_logprob.gather(1, column.unsqueeze(1)).squeeze(1)
        for rows, part in tails:
            output = output.index_add(0, rows, part)
        loss = (-output).mean()
        return _ASMoutput(output.squeeze(0) if unbatched else output, loss)

    def _full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i, tail in enumerate(self.tail):
            cluster = head_logprob[:, self.shortlist_size + i].unsqueeze(1)
            parts.append(F.log_softmax(tail(input), dim=1) + cluster)
        return ember.cat(parts, dim=1)

    def log_prob(self, input):
        """Log-probabilities of every class, shape (N, n_classes) (or (n_classes,))."""
        batched = input if input.ndim == 2 else input.unsqueeze(0)
        out = self._full_log_prob(batched, self.head(batched))
        return out if input.ndim == 2 else out.squeeze(0)

    def predict(self, input):
        """The most likely class of each row."""
        return self.log_prob(input).argmax(dim=-1)
