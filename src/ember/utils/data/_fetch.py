"""Fetching what one step of a DataLoader yields: a collated batch from a map-style or an
iterable dataset."""

from ember.utils.data._stacked import StackedSamples
from ember.utils.data.collate import default_collate

__all__ = ["MapFetcher", "IterableFetcher"]


class MapFetcher:
    """``collate_fn([dataset[i] for i in indices])`` (or the dataset's ``__getitems__``)."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        getitems = getattr(dataset, "__getitems__", None)
        self.getitems = getitems if callable(getitems) else None

    def fetch(self, index):
        """The collated samples at ``index`` (a list of indices, or one index)."""
        if self.auto_collation:
            if self.getitems is not None:
                data = self.getitems(index)
                if isinstance(data, StackedSamples) and self.collate_fn is not default_collate:
                    data = list(data)           # a custom collate_fn gets a real list
            else:
                data = [self.dataset[i] for i in index]
        else:
            data = self.dataset[index]
        return self.collate_fn(data)


class IterableFetcher:
    """The next ``batch_size`` samples of an iterable dataset, collated."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.iterator = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, index):
        """``index`` is a list as long as the batch wanted (or anything, unbatched)."""
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        data = []
        for _ in index:
            try:
                data.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)
