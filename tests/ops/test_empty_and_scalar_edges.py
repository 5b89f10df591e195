"""Edge cases of empty and 0-dim tensors that the generic OpInfo samples do not reach:
integer division of empty tensors, and the dim errors of a 0-dim tensor."""

import pytest

import ember


E = ember.zeros(0, dtype=ember.int64)


@pytest.mark.parametrize("fn", [
    lambda: E // 0,
    lambda: E % 0,
    lambda: E // ember.tensor([0]),
    lambda: ember.remainder(E, ember.tensor(0)),
    lambda: ember.div(E, 0, rounding_mode="trunc"),
    lambda: ember.div(E, 0, rounding_mode="floor"),
    lambda: ember.tensor(5) // ember.zeros(0, dtype=ember.int64),
])
def test_integer_division_of_nothing_by_zero_is_empty(fn):
    out = fn()
    assert tuple(out.shape) == (0,) and out.dtype == ember.int64


def test_integer_division_by_zero_still_raises():
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        ember.tensor([1]) // ember.tensor([0])


@pytest.mark.parametrize("method", ["size", "stride"])
@pytest.mark.parametrize("dim", [0, -1, 1, -2])
def test_size_and_stride_of_a_dim_of_a_scalar(method, dim):
    with pytest.raises(IndexError, match=f"^Dimension specified as {dim} but tensor has no "
                                         f"dimensions$"):
        getattr(ember.tensor(2.5), method)(dim)


@pytest.mark.parametrize("fn", [
    lambda s, d: s.unbind(d),
    lambda s, d: ember.take_along_dim(s, ember.tensor(0), d),
])
def test_dim_of_a_scalar_is_wrapped_before_the_error(fn):
    s = ember.tensor(2.5)
    for dim in (0, -1):
        with pytest.raises(IndexError, match="^Dimension specified as 0 but tensor has no"):
            fn(s, dim)
    for dim in (1, -2):
        with pytest.raises(IndexError, match=r"expected to be in range of \[-1, 0\], but got "
                                             f"{dim}"):
            fn(s, dim)


def test_unflatten_of_a_scalar():
    s = ember.tensor(2.5)
    with pytest.raises(RuntimeError, match="unflatten got an unexpected error:\nDimension "
                                           "specified as 0 but tensor has no dimensions"):
        s.unflatten(-1, (1,))
    with pytest.raises(IndexError, match=r"range of \[-1, 0\], but got 1\)"):
        s.unflatten(1, (1,))


@pytest.mark.parametrize("sizes", [(0, -1), (-1, 0), (0, -1, 2)])
def test_unflatten_of_an_empty_dim_with_an_ambiguous_size(sizes):
    with pytest.raises(RuntimeError, match="^unflatten got an unexpected error:\ncannot reshape "
                                           "tensor of 0 elements into shape"):
        ember.zeros(0, 6).unflatten(0, sizes)
    assert tuple(ember.zeros(0, 6).unflatten(0, (2, -1)).shape) == (2, 0, 6)


def test_index_select_from_an_empty_dim():
    with pytest.raises(IndexError, match="^index out of range in self$"):
        ember.index_select(ember.zeros(0), 0, ember.tensor([0]))
    for x, dim in ((ember.zeros(0, 4), 0), (ember.zeros(4, 0), 1)):
        with pytest.raises(RuntimeError, match="self indexing axis dim should be positive"):
            ember.index_select(x, dim, ember.tensor([0]))
    assert tuple(ember.index_select(ember.zeros(0, 4), 0, E).shape) == (0, 4)


def test_embedding_of_an_empty_weight():
    F = ember.nn.functional
    with pytest.raises(RuntimeError, match="self indexing axis dim should be positive"):
        F.embedding(ember.tensor([0]), ember.zeros(0, 2))
    assert tuple(F.embedding(E, ember.zeros(0, 2)).shape) == (0, 2)


@pytest.mark.parametrize("index_shape", [(0,), (0, 3), (0, 2, 2)])
def test_gather_with_an_empty_index_skips_the_shape_checks(index_shape):
    out = ember.gather(ember.zeros(2, 2), 1, ember.zeros(*index_shape, dtype=ember.int64))
    assert tuple(out.shape) == index_shape and out.dtype == ember.float32


def test_linalg_cross_of_scalars():
    s = ember.tensor(1.0)
    with pytest.raises(IndexError, match="^Dimension specified as -1 but tensor has no "
                                         "dimensions$"):
        ember.linalg.cross(s, s)


def test_embedding_with_a_scalar_weight():
    with pytest.raises(RuntimeError, match="^'weight' must be 2-D$"):
        ember.nn.functional.embedding(ember.tensor([0]), ember.tensor(1.0))
