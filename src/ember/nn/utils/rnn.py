"""Packed variable-length sequences for recurrent layers (``torch.nn.utils.rnn``).

A PackedSequence stores the steps of a batch of sequences one after another: step ``t``
holds ``batch_sizes[t]`` rows, the sequences still running at that step, longest first.
Packing and padding are gathers (``index_select``), so gradients flow through them.
"""

import itertools
from typing import NamedTuple

import numpy as np

import ember
from ember._tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]


class PackedSequence_(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(PackedSequence_):
    """Data and ``batch_sizes`` of a packed batch of sequences (see pack_padded_sequence)."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """The sequence with ``data`` converted by ``Tensor.to`` (indices follow its device)."""
        if kwargs.pop("copy", False):
            raise RuntimeError(".to() does not accept copy argument")
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = {"device": data.device}
        sorted_indices = None if self.sorted_indices is None else \
            self.sorted_indices.to(**move)
        unsorted_indices = None if self.unsorted_indices is None else \
            self.unsorted_indices.to(**move)
        return type(self)(data, self.batch_sizes, sorted_indices, unsorted_indices)

    def cpu(self):
        """The sequence on the CPU."""
        return self.to("cpu")

    def cuda(self, *args, **kwargs):
        """The sequence on a CUDA device."""
        return type(self)(self.data.cuda(*args, **kwargs), self.batch_sizes,
                          *(None if i is None else i.cuda(*args, **kwargs)
                            for i in (self.sorted_indices, self.unsorted_indices)))

    def double(self):
        """``data`` as float64."""
        return self.to(dtype=ember.float64)

    def float(self):
        """``data`` as float32."""
        return self.to(dtype=ember.float32)

    def half(self):
        """``data`` as float16."""
        return self.to(dtype=ember.float16)

    def long(self):
        """``data`` as int64."""
        return self.to(dtype=ember.int64)

    def int(self):
        """``data`` as int32."""
        return self.to(dtype=ember.int32)

    def short(self):
        """``data`` as int16."""
        return self.to(dtype=ember.int16)

    def char(self):
        """``data`` as int8."""
        return self.to(dtype=ember.int8)

    def byte(self):
        """``data`` as uint8."""
        return self.to(dtype=ember.uint8)

    def pin_memory(self):
        """The sequence with ``data`` and the indices in pinned host memory."""
        return type(self)(self.data.pin_memory(), self.batch_sizes,
                          *(None if i is None else i.pin_memory()
                            for i in (self.sorted_indices, self.unsorted_indices)))

    def is_pinned(self):
        """Whether ``data`` is in pinned host memory."""
        return self.data.is_pinned()

    @property
    def is_cuda(self):
        """Whether ``data`` is on a CUDA device."""
        return self.data.device.type == "cuda"


def invert_permutation(permutation):
    """The inverse of a permutation tensor (None stays None)."""
    if permutation is None:
        return None
    inv = np.empty(permutation.shape[0], dtype=np.int64)
    inv[np.asarray(permutation)] = np.arange(permutation.shape[0])
    return ember.tensor(inv, device=permutation.device)


def _lengths_list(lengths, enforce_sorted=True):
    values = lengths.tolist() if isinstance(lengths, Tensor) else lengths
    ndim = np.ndim(values)
    if ndim > 1 and not enforce_sorted:     # PyTorch's sort permutation is an index first
        raise IndexError("index_select(): Index is supposed to be a vector")
    if ndim != 1:
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got "
                           f"{ndim}D cpu Long tensor")
    return [int(v) for v in values]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch ``(T, B, *)`` (``(B, T, *)`` if batch_first) of sequences whose
    lengths are ``lengths``; unless ``enforce_sorted``, they need not be sorted."""
    lengths = _lengths_list(lengths, enforce_sorted)
    if batch_first:
        input = input.transpose(0, 1)
    batch = input.size(1)           # PyTorch's IndexError for inputs of fewer than 2 dims
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    if len(lengths) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lengths)} (batch_size={batch})")
    sorted_indices = None
    if not enforce_sorted:
        order = sorted(range(batch), key=lambda j: -lengths[j])
        lengths = [lengths[j] for j in order]
        sorted_indices = ember.tensor(order, dtype=ember.int64, device=input.device)
        input = input.index_select(1, sorted_indices)
    if lengths and lengths[-1] <= 0:    # (checked before the order, as in PyTorch)
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if any(a < b for a, b in zip(lengths, lengths[1:])):
        raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                           "`enforce_sorted` is True. You can pass `enforce_sorted=False` to "
                           "pack_padded_sequence and/or pack_sequence to sidestep this "
                           "requirement if you do not need ONNX exportability.")
    steps = input.shape[0]
    if lengths and lengths[0] > steps:
        raise RuntimeError(f"Expected all lengths to be at most the padded length {steps}, "
                           f"but got {lengths[0]}")
    counts = np.asarray(lengths, dtype=np.int64)
    batch_sizes = [int((counts > t).sum()) for t in range(lengths[0] if lengths else 0)]
    index = np.concatenate([t * batch + np.arange(bs) for t, bs in enumerate(batch_sizes)]) \
        if batch_sizes else np.zeros(0, dtype=np.int64)
    flat = input.reshape((input.shape[0] * batch,) + tuple(input.shape[2:]))
    data = flat.index_select(0, ember.tensor(index, device=input.device))
    return PackedSequence(data, ember.tensor(batch_sizes, dtype=ember.int64), sorted_indices,
                          None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Undo pack_padded_sequence: ``(padded, lengths)``, padded to ``total_length`` if
    given."""
    data, batch_sizes, _, unsorted_indices = sequence
    sizes = [int(b) for b in batch_sizes.tolist()]
    steps = len(sizes)
    if total_length is not None:
        if isinstance(total_length, float):
            raise TypeError(f"_pad_packed_sequence(): argument 'total_length' (position 5) "
                            f"must be int, not {type(total_length).__name__}")
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {steps}")
        steps = total_length
    batch = sizes[0] if sizes else 0
    _check_batch_sizes(sizes, batch, data)
    pad_row = data.shape[0]
    index = np.full((steps, batch), pad_row, dtype=np.int64)
    offset = 0
    for t, bs in enumerate(sizes):
        index[t, :bs] = np.arange(offset, offset + bs)
        offset += bs
    trailing = tuple(data.shape[1:])
    pad = ember.full((1,) + trailing, padding_value, dtype=data.dtype, device=data.device)
    padded = ember.cat([data, pad]).index_select(0, ember.tensor(index.reshape(-1),
                                                                 device=data.device))
    padded = padded.reshape((steps, batch) + trailing)
    counts = np.asarray(sizes, dtype=np.int64)
    lengths = ember.tensor([int((counts > j).sum()) for j in range(batch)], dtype=ember.int64)
    if batch_first:
        padded = padded.transpose(0, 1)
    if unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, unsorted_indices)
        lengths = lengths[unsorted_indices.cpu()]
    return padded, lengths


def _check_batch_sizes(sizes, batch, data):
    """``batch_sizes`` fit ``data`` and never exceed the first: PyTorch's errors for a
    PackedSequence built by hand, step runs of one batch size at a time."""
    trail, per = list(data.shape[1:]), int(np.prod(data.shape[1:], dtype=np.int64))
    offset = 0
    for bs, run in itertools.groupby(sizes):
        steps = len(list(run))
        want = steps * bs
        have = max(0, min(want, data.shape[0] - offset))
        if have != want:
            raise RuntimeError(f"shape '{[steps, bs] + trail}' is invalid for input of size "
                               f"{have * per}")
        if bs > batch:
            raise RuntimeError(f"output with shape {[steps, batch] + trail} doesn't match the "
                               f"broadcast shape {[steps, bs] + trail}")
        offset += want


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack sequences of shapes ``(L_i, *)`` into ``(max L, B, *)`` (``(B, max L, *)`` if
    batch_first), filling with ``padding_value`` on ``padding_side``."""
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    for i, s in enumerate(sequences):
        if not isinstance(s, Tensor):
            from ember._from_data import _tp_name
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{_tp_name(s)}")
    if sequences[0].dim() == 0:         # (PyTorch slices off its first size)
        raise RuntimeError("ArrayRef: invalid slice, N = 1; size = 0")
    if any(s.dim() == 0 for s in sequences):
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    longest = max(s.shape[0] for s in sequences)
    first = sequences[0]                # sets the trailing dims and dtype, as in PyTorch
    size = (len(sequences), longest) if batch_first else (longest, len(sequences))
    out = ember.full(size + tuple(first.shape[1:]), padding_value, dtype=first.dtype,
                     device=first.device)
    for i, s in enumerate(sequences):
        steps = slice(0, s.shape[0]) if padding_side == "right" else \
            slice(longest - s.shape[0], longest)
        (out[i, steps] if batch_first else out[steps, i]).copy_(s)   # broadcasts as copy_
    return out


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """Split a padded batch back into a list of sequences of the given lengths."""
    if not isinstance(lengths, Tensor):     # (PyTorch moves them to the padded's device)
        raise AttributeError(f"'{type(lengths).__name__}' object has no attribute 'device'")
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:n] for seq, n in zip(padded_sequences, _lengths_list(lengths))]


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences of shapes ``(L_i, *)``."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths,
                                enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences a PackedSequence holds, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
