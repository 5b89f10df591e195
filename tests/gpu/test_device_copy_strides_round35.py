"""``.cuda()`` / ``.to(device)`` / ``.cpu()`` keep a dense tensor's strides exactly, size-1
dims' included, as PyTorch's preserve_format copies do (a (1, 1, 3, 3) channels_last tensor
went up as (9, 9, 3, 1), PyTorch's (9, 1, 3, 1)), and a dense permuted GPU tensor comes back
to the host in its layout (it came back row-major)."""

import pytest

import ember

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("shape,fmt,strides", [
    ((1, 1, 3, 3), ember.channels_last, (9, 1, 3, 1)),
    ((2, 3, 4, 5), ember.channels_last, (60, 1, 15, 3)),
    ((1, 3, 1, 1), ember.channels_last, (3, 1, 3, 3)),
    ((2, 1, 3, 3), ember.channels_last, (9, 1, 3, 1)),
    ((1, 1, 2, 3, 3), ember.channels_last_3d, (18, 1, 9, 3, 1)),
])
def test_memory_formats_survive_the_trip(shape, fmt, strides):
    x = ember.empty(*shape, memory_format=fmt).fill_(1.5)
    assert x.stride() == strides
    for moved in (x.cuda(), x.to("cuda"), x.to("cuda", ember.float64)):
        assert moved.stride() == strides and moved.is_contiguous(memory_format=fmt)
    back = x.cuda().cpu()
    assert back.stride() == strides and back.tolist() == x.tolist()


@pytest.mark.parametrize("make,strides", [
    (lambda: ember.arange(12.0).reshape(3, 4).t(), (1, 4)),
    (lambda: ember.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1), (1, 12, 4)),
    (lambda: ember.arange(6.0).reshape(2, 1, 3).transpose(0, 1), (3, 3, 1)),
    (lambda: ember.arange(24.0).reshape(4, 6)[:, ::2], (3, 1)),     # not dense: row-major
    (lambda: ember.arange(3.0).expand(2, 3), (3, 1)),
])
def test_other_layouts_as_pytorchs_preserve_format(make, strides):
    x = make()
    moved = x.cuda()
    assert moved.stride() == strides and moved.tolist() == x.tolist()
    assert moved.cpu().stride() == strides and moved.cpu().tolist() == x.tolist()
