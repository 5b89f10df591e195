"""expand against PyTorch: strides, storage offsets and values over input layouts."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _inputs(lib):
    base = lib.arange(24.0).reshape(2, 3, 4)
    return {
        "contiguous": base,
        "transposed": base.transpose(0, 2),
        "sliced": base[:, 1:2, ::2],
        "unit dims": base[:1, :, :1],
        "offset": base[1, 2:3],
    }


@pytest.mark.parametrize("name", ["contiguous", "transposed", "sliced", "unit dims", "offset"])
@pytest.mark.parametrize("lead", [(), (2,), (0, 3)])
def test_expand_layout(name, lead):
    ours, theirs = _inputs(ember)[name], _inputs(torch)[name]
    size = lead + tuple(n if n != 1 else 3 for n in theirs.shape)
    t = theirs.expand(*size)
    e = ours.expand(*size)
    assert tuple(e.shape) == tuple(t.shape)
    assert e.stride() == t.stride()
    assert e.storage_offset() == t.storage_offset()
    np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("shape,size", [((0, 3), (2, 0, 3)), ((3, 0), (2, 3, 0)),
                                        ((2, 0, 1), (2, 0, 4)), ((2, 0, 1), (5, 2, 0, 1)),
                                        ((0,), (4, 0)), ((1, 0), (3, 0)), ((0, 3), (0, 3))])
def test_expand_empty(shape, size):
    t = torch.ones(*shape).expand(*size)
    e = ember.ones(*shape).expand(*size)
    assert (tuple(e.shape), e.stride()) == (tuple(t.shape), t.stride())


def test_expand_fuzz():
    """Random shapes (with size-1 dims), layouts (permuted, sliced) and sizes (-1, kept,
    expanded, leading dims): same shape, strides, offset and values as PyTorch."""
    gen = np.random.default_rng(35)
    for _ in range(300):
        ndim = int(gen.integers(0, 4))
        shape = tuple(int(n) for n in gen.choice([1, 1, 2, 3], ndim))
        values = gen.standard_normal(shape).astype(np.float32)
        ours, theirs = ember.tensor(values), torch.tensor(values)
        if ndim > 1 and gen.random() < 0.3:
            perm = tuple(int(p) for p in gen.permutation(ndim))
            ours, theirs = ours.permute(perm), theirs.permute(perm)
        if ndim and gen.random() < 0.3 and ours.shape[0] > 1:
            ours, theirs = ours[::2], theirs[::2]
        size = [int(gen.integers(1, 3)) for _ in range(int(gen.integers(0, 3)))]
        for n in theirs.shape:
            size.append(n if n != 1 else int(gen.choice([1, 4]))
                        if gen.random() < 0.7 else -1)
        t = theirs.expand(size)
        e = ours.expand(size)
        assert (tuple(e.shape), e.stride(), e.storage_offset()) == \
            (tuple(t.shape), t.stride(), t.storage_offset()), (shape, size)
        np.testing.assert_array_equal(e.numpy(), t.numpy())
