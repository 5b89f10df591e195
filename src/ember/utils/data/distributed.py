"""DistributedSampler: each of ``num_replicas`` processes sees its own share of a dataset."""

import math

import ember
from ember.utils.data.sampler import Sampler, T_co

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler[T_co]):
    """Rank ``rank``'s indices: every ``num_replicas``-th index of a (seeded, per-epoch)
    permutation, padded by repetition (or truncated with ``drop_last``) so that every rank
    gets the same number."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            raise RuntimeError("Requires distributed package to be available")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            g = ember.Generator().manual_seed(self.seed + self.epoch)
            indices = ember.randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        missing = self.total_size - len(indices)
        if not self.drop_last and missing > 0:
            indices += (indices * math.ceil(missing / len(indices)))[:missing]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Make the next iteration's shuffle depend on ``epoch`` (same on every rank)."""
        self.epoch = epoch
