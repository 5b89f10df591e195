"""Strides of empty tensors: a fresh empty array becomes a tensor's with PyTorch's row-major
strides (``_make``), so that an array's zero strides are real (an expanded or as_strided
view's) and views compute PyTorch's strides from the backend's (values from PyTorch 2.13)."""
import warnings

import numpy as np

import ember


def test_expanded_and_as_strided_empties_keep_zero_strides():
    assert ember.ones(()).expand(0, 2).stride() == (0, 0)
    assert ember.ones(1).expand(1, 1, 0).stride() == (0, 0, 0)
    assert ember.empty(0, 4).as_strided((0, 4), (0, 0)).stride() == (0, 0)
    assert ember.ones(3).as_strided((0, 3), (0, 0)).stride() == (0, 0)
    z = ember.empty(0, 4).as_strided((0, 4), (0, 0))
    assert z.t().stride() == (0, 0) and z.unsqueeze(1).stride() == (0, 0, 0)
    assert z[:, 1:].stride() == (0, 0) and z.expand(2, 0, 4).stride() == (0, 0, 0)


def test_fresh_empties_and_their_views_are_row_major():
    assert ember.zeros(0, 4).stride() == (4, 1) and ember.zeros(2, 0, 3).stride() == (3, 3, 1)
    assert (ember.zeros(0, 4) + 1).stride() == (4, 1)
    assert ember.zeros(0, 4).sum(1).stride() == (1,)
    assert ember.cat([ember.zeros(0, 3), ember.zeros(0, 3)]).stride() == (3, 1)
    assert (ember.zeros(1, 0, 0, 0) + 1).stride() == (1, 1, 1, 1)
    assert ember.zeros(0, 4).T.stride() == (1, 4)
    assert ember.zeros(2, 0, 3).permute(2, 0, 1).stride() == (1, 3, 3)
    assert ember.zeros(2, 0, 3)[:, :, ::2].stride() == (3, 3, 2)
    assert ember.zeros(3, 4).narrow(1, 2, 0).stride() == (4, 1)
    assert ember.ones(()).expand(0, 2).is_contiguous() and ember.zeros(0, 4).T.is_contiguous()


def test_copies_of_zero_strided_empties():
    e = ember.ones(()).expand(0, 2)
    assert e.clone().stride() == (0, 0) and ember.empty_like(e).stride() == (0, 0)
    assert e.float().stride() == (0, 0) and e.contiguous().stride() == (0, 0)
    assert e.clone(memory_format=ember.contiguous_format).stride() == (2, 1)
    assert e.narrow_copy(0, 0, 0).stride() == (2, 1) and e.repeat(1, 1).stride() == (2, 1)
    assert e.roll(1, 0).stride() == (0, 0)
    assert ember.as_strided_copy(ember.zeros(3), (0, 2), (1, 0)).stride() == (2, 1)
    assert ember.as_strided_copy(ember.ones(4, 3).t(), (3, 2), (1, 3)).stride() == (2, 1)


def test_as_strided_of_a_reductions_empty_result_stays_in_its_storage():
    y = ember.zeros(2, 0, 0).sum(-1)
    z = y.as_strided((0, 1), (0, 0))
    assert (z.stride(), z.storage_offset()) == ((0, 0), 0)


def test_numpy_empties_keep_numpys_strides():
    b = np.empty((0, 3))
    for t in (ember.from_numpy(b), ember.tensor(b), ember.as_tensor(b), ember.asarray(b),
              ember.as_tensor(b, dtype=ember.float32)):
        assert t.stride() == (0, 0)
    assert ember.from_numpy(b).T.stride() == (0, 0) and ember.from_numpy(b).clone().stride() \
        == (0, 0)
    assert (ember.from_numpy(b) + 1).stride() == (3, 1)
    a = np.ones((4, 3)).T[:0]
    assert ember.from_numpy(a).stride() == ember.tensor(a).stride() == (1, 3)
    assert ember.tensor([]).stride() == (1,) and ember.tensor([[], []]).stride() == (1, 1)


def test_resized_outs_are_row_major():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for numel in (0, 5):
            assert ember.zeros(0, 3, out=ember.empty(numel)).stride() == (3, 1)
            assert ember.abs(ember.zeros(2, 0, 3), out=ember.empty(numel)).stride() == (3, 3, 1)


def test_channels_last_empties():
    # PyTorch's channels-last strides of an empty tensor count sizes 0 as they are
    cl = ember.channels_last
    assert ember.empty(2, 0, 3, 3, memory_format=cl).stride() == (0, 1, 0, 0)
    assert ember.empty(0, 2, 3, 3, memory_format=cl).stride() == (18, 1, 6, 2)
    assert ember.empty(2, 3, 0, 3, memory_format=cl).stride() == (0, 1, 9, 3)
