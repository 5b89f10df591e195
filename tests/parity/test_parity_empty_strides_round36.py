"""Strides of empty tensors against PyTorch's: random chains of views (of fresh empties, and of
expanded or as_strided ones, whose zero strides are real) and of fresh results."""
import random

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

VIEWS = [
    lambda lib, x, r: x.transpose(0, -1),
    lambda lib, x, r: x.permute(*reversed(range(x.ndim))) if x.ndim else x,
    lambda lib, x, r: x.unsqueeze(r % (x.ndim + 1)),
    lambda lib, x, r: x.squeeze(),
    lambda lib, x, r: x.expand(r % 3, *x.shape),
    lambda lib, x, r: x.narrow(0, min(1, x.shape[0]), 0),
    lambda lib, x, r: x[1:1:2],
    lambda lib, x, r: x[..., :0],
    lambda lib, x, r: x[..., ::2],
    lambda lib, x, r: x[None, ..., None],
    lambda lib, x, r: x.movedim(0, -1),
    lambda lib, x, r: x.mT if x.ndim >= 2 else x.t(),
    lambda lib, x, r: x.select(-1, 0),
    lambda lib, x, r: x.unfold(-1, 1, 1 + r % 2),
    lambda lib, x, r: x.diagonal(0, 0, -1),
    lambda lib, x, r: x.chunk(2, 0)[-1],
    lambda lib, x, r: x.unbind(-1)[0],
    lambda lib, x, r: x.detach(),
    lambda lib, x, r: x.view_as(x),
]
# views whose strides are all 0
ZEROS = [
    lambda lib, x, r: x.expand(*[0 if n == 1 else n for n in x.shape] or [0]),
    lambda lib, x, r: x.as_strided((0, r % 3), (r % 2, 0)),
    lambda lib, x, r: x.as_strided((r % 2, 0, 2), (0, 0, 0)),
]
FRESH = [
    lambda lib, x, r: x.sum(0),
    lambda lib, x, r: x.sum(-1, keepdim=True),
    lambda lib, x, r: lib.cat([x, x], 0),
    lambda lib, x, r: lib.stack([x, x], r % (x.ndim + 1)),
    lambda lib, x, r: x.contiguous(),
    lambda lib, x, r: x.clone(),
    lambda lib, x, r: x.clone(memory_format=lib.contiguous_format),
    lambda lib, x, r: lib.zeros_like(x),
    lambda lib, x, r: lib.empty_like(x, memory_format=lib.contiguous_format),
    lambda lib, x, r: x.to(lib.float64),
    lambda lib, x, r: x.new_empty(x.shape),
    lambda lib, x, r: x.repeat(*([2] * x.ndim)),
    lambda lib, x, r: x.flip(0),
    lambda lib, x, r: x.roll(1, 0),
    lambda lib, x, r: x.sort(-1)[0],
    lambda lib, x, r: x.cumsum(-1),
    lambda lib, x, r: x.narrow_copy(0, 0, 0),
    lambda lib, x, r: lib.as_strided_copy(x, (0, 2), (1, 0)),
    lambda lib, x, r: lib.nn.functional.pad(x, (1, 1)),
    lambda lib, x, r: lib.full(x.shape, 2.0),
]


def _chain(lib, shape, fresh, steps, r):
    x = lib.zeros(shape) if fresh else lib.ones([n or 1 for n in shape])
    for f in steps:
        x = f(lib, x, r)
    return x


@pytest.mark.parametrize("seed", range(3))
def test_random_empty_views_and_results_match_torch(seed):
    rng = random.Random(seed)
    checked = 0
    for _ in range(300):
        shape = [rng.choice([0, 1, 1, 2, 3]) for _ in range(rng.randint(1, 4))]
        fresh = rng.random() < 0.6
        steps = [rng.choice(VIEWS + FRESH) for _ in range(rng.randint(0, 2))]
        if rng.random() < 0.4:
            steps.append(rng.choice(ZEROS))
        steps += [rng.choice(VIEWS + FRESH) for _ in range(rng.randint(1, 2))]
        r = rng.randint(0, 5)
        try:
            want = _chain(torch, shape, fresh, steps, r)
        except (RuntimeError, IndexError):
            continue
        if want.numel():
            continue
        got = _chain(ember, shape, fresh, steps, r)
        assert (tuple(got.shape), got.stride(), got.storage_offset()) == \
            (tuple(want.shape), want.stride(), want.storage_offset()), (shape, fresh, r)
        assert got.is_contiguous() == want.is_contiguous()
        checked += 1
    assert checked > 100


@pytest.mark.parametrize("make", [
    lambda lib: lib.ones(()).expand(0, 2),
    lambda lib: lib.ones(1).expand(1, 1, 0),
    lambda lib: lib.empty(0, 4).as_strided((0, 4), (0, 0)),
    lambda lib: lib.empty(0, 4).as_strided((0, 4), (0, 0)).t(),
    lambda lib: lib.zeros(0, 4).T,
    lambda lib: lib.zeros(2, 0, 3)[:, :, ::2],
    lambda lib: lib.zeros(3, 4).narrow(1, 2, 0),
    lambda lib: lib.zeros(0, 4).sum(1),
    lambda lib: lib.cat([lib.zeros(0, 3), lib.zeros(0, 3)]),
    lambda lib: lib.zeros(0, 3) * 2,
    lambda lib: lib.zeros(1, 0, 0, 0) + 1,
    lambda lib: lib.zeros(0, 3).reshape(3, 0),
    lambda lib: lib.ones(()).expand(0, 2).clone(),
    lambda lib: lib.empty_like(lib.ones(()).expand(0, 2)),
    lambda lib: lib.empty(2, 0, 3, 3, memory_format=lib.channels_last),
    lambda lib: lib.as_strided_copy(lib.ones(4, 3).t(), (3, 2), (1, 3)),
    lambda lib: lib.zeros(2, 0, 0).sum(-1).as_strided((0, 1), (0, 0)),
])
def test_named_cases_match_torch(make):
    got, want = make(ember), make(torch)
    assert (got.stride(), got.storage_offset()) == (want.stride(), want.storage_offset())


@pytest.mark.parametrize("array", [np.empty((0, 3)), np.ones((4, 3)).T[:0],
                                   np.ones((4, 1, 3))[:, :, :0], np.empty((2, 0, 3))])
def test_numpy_empties_as_tensors_keep_numpys_strides(array):
    for convert in (lambda lib: lib.from_numpy(array), lambda lib: lib.tensor(array),
                    lambda lib: lib.as_tensor(array), lambda lib: lib.asarray(array),
                    lambda lib: lib.as_tensor(array, dtype=lib.float32),
                    lambda lib: lib.from_numpy(array).t() if array.ndim == 2 else
                    lib.from_numpy(array).unsqueeze(0)):
        assert convert(ember).stride() == convert(torch).stride()
