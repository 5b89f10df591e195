"""Review of round 35's expand fast path: broadcast_view's direct view over a row-major
array keeps the source's writability and byte order, and new leading size-1 dims take
PyTorch's strides over already-expanded, sliced and permuted inputs (values: PyTorch 2.13)."""

import numpy as np
import pytest

import ember as torch
from ember.backend import broadcast_view


def test_direct_view_follows_the_sources_writability():
    read_only = np.frombuffer(b"\x00" * 12, dtype=np.float32)
    assert not broadcast_view(np, read_only, (2, 3), (0, 4)).flags.writeable
    flagged = np.arange(3.0)
    flagged.flags.writeable = False
    assert not broadcast_view(np, flagged, (2, 3), (0, 8)).flags.writeable
    broadcast = np.broadcast_to(np.ones(1), (1,))      # row-major and read-only
    assert not broadcast_view(np, broadcast, (3, 1), (0, 8)).flags.writeable
    base = np.arange(6.0)
    view = broadcast_view(np, base[2:5], (2, 3), (0, 8))  # a view of a view: writes through
    assert view.flags.writeable
    view[1, 0] = 99.0
    assert base.tolist() == [0.0, 1.0, 99.0, 3.0, 4.0, 5.0]
    swapped = np.arange(3, dtype=">f4")
    view = broadcast_view(np, swapped, (2, 3), (0, 4))
    assert view.dtype == np.dtype(">f4") and view[1].tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("make,size,strides", [
    (lambda: torch.ones(3, 1).expand(3, 4), (1, 3, 4), (3, 1, 0)),
    (lambda: torch.ones(1, 3).expand(2, 3), (1, 1, 2, 3), (0, 0, 0, 1)),
    (lambda: torch.arange(8.).reshape(2, 1, 2, 2)[:, :, :, 0].permute(1, 0, 2),
     (2, 1, 1, 2, 2), (0, 4, 4, 4, 2)),
    (lambda: torch.ones(4, 3).t()[:1], (1, 2, 1, 4), (0, 0, 1, 3)),
    (lambda: torch.ones(2, 3)[:, 1:2], (1, 1, 2, 1), (6, 6, 3, 1)),
])
def test_leading_unit_dims_over_strided_inputs(make, size, strides):
    x = make()
    e = x.expand(size)
    assert e.stride() == strides
    assert e.storage_offset() == x.storage_offset()
    assert np.array_equal(e.numpy(), np.broadcast_to(x.numpy(), size))
