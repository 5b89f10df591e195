"""view, reshape and unflatten of strided inputs (size-1 dims of any stride, stride-0 dims,
offsets) give PyTorch's strides, values and view-or-copy, on a seeded sample of layouts."""

import itertools
import random

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _shapes(n):
    """Shapes of n elements with up to 4 dims, size-1 dims inserted anywhere."""
    out = set()

    def grow(rest, dims):
        if len(dims) > 3:
            return
        if rest == 1:
            for k in range(3):
                for at in itertools.combinations_with_replacement(range(len(dims) + 1), k):
                    shape = list(dims)
                    for i in sorted(at, reverse=True):
                        shape.insert(i, 1)
                    out.add(tuple(shape))
            return
        for f in range(2, rest + 1):
            if rest % f == 0:
                grow(rest // f, dims + [f])
    grow(n, [])
    return sorted(out)


def _layout(rng):
    nd = rng.randint(1, 4)
    shape = [rng.choice([1, 1, 2, 3]) for _ in range(nd)]
    order = list(range(nd))
    rng.shuffle(order)
    strides, acc = [0] * nd, 1
    for d in reversed(order):
        strides[d] = acc * rng.choice([1, 1, 2])
        acc = strides[d] * shape[d]
    for d in range(nd):
        if shape[d] == 1:
            strides[d] = rng.choice([0, 1, 2, 5, 7])
        elif rng.random() < 0.1:
            strides[d] = 0
    return shape, strides, rng.randint(0, 3)


def _try(fn):
    try:
        r = fn()
    except RuntimeError:
        return None
    return r.shape, r.stride(), r.tolist()


@pytest.mark.parametrize("seed", range(4))
def test_views_of_strided_layouts_agree(seed):
    rng = random.Random(seed)
    checked = 0
    for _ in range(40):
        shape, strides, offset = _layout(rng)
        need = sum((s - 1) * st for s, st in zip(shape, strides)) + 1 + offset
        t = torch.arange(float(need)).as_strided(shape, strides, offset)
        e = ember.arange(float(need)).as_strided(shape, strides, offset)
        for new in _shapes(t.numel()):
            r, q = _try(lambda: t.view(new)), _try(lambda: e.view(new))
            assert (r is None) == (q is None) and (r is None or tuple(r[0]) == tuple(q[0])
                                                   and r[1:] == q[1:]), (shape, strides, new)
            copied = t.reshape(new).data_ptr() != t.data_ptr()
            r, q = _try(lambda: t.reshape(new)), _try(lambda: e.reshape(new))
            assert r[2] == q[2] and (copied or r[1] == q[1]), (shape, strides, new)
            checked += 1
        d = rng.randrange(t.dim())
        for sizes in _shapes(t.shape[d]):
            if sizes:
                r, q = _try(lambda: t.unflatten(d, sizes)), _try(lambda: e.unflatten(d, sizes))
                assert r[1:] == q[1:], (shape, strides, d, sizes)
    assert checked > 100
