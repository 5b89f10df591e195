"""torch.func.vmap against ember's with BatchedTensors inside op parameters (advanced indices,
index_put's indices, searchsorted's sorter, pinv's atol), cat's skipped 1-D empty examples,
and the errors of such calls."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _set(x, key, value):
    y = x.clone()
    y[key] = value
    return y


def _data(L):
    return {"x": L.arange(24.).reshape(2, 3, 4), "idx": L.tensor([[0, 2], [-1, 1], [3, 3]]),
            "rows": L.tensor([[0, 1], [1, 0], [1, 1]]), "vals": L.arange(6.).reshape(3, 2)}


CASES = [
    ("index_unbatched_x", lambda L, d: L.func.vmap(lambda i: d["x"][0, 1][i])(d["idx"])),
    ("index_after_slice", lambda L, d: L.func.vmap(lambda x, i: x[:, i])(d["x"], d["idx"][:2])),
    ("index_two_indices", lambda L, d: L.func.vmap(
        lambda i: d["x"][L.tensor([0, 1]), :, i])(d["idx"])),
    ("index_not_adjacent", lambda L, d: L.func.vmap(
        lambda i: d["x"][i, :, i])(d["rows"])),
    ("index_outer_level", lambda L, d: L.func.vmap(
        lambda i: L.func.vmap(lambda r: r[i])(d["x"][0]))(d["rows"])),
    ("index_put_index_only", lambda L, d: L.func.vmap(
        lambda i: L.zeros(4).index_put((i,), L.tensor(1.)))(d["idx"])),
    ("index_put_accumulate", lambda L, d: L.func.vmap(
        lambda i, v: L.zeros(4).index_put((i,), v, accumulate=True))(d["rows"], d["vals"])),
    ("index_put_after_slice", lambda L, d: L.func.vmap(
        lambda i, v: L.zeros(2, 4).index_put((L.tensor([0, 1]), i), v))(d["rows"], d["vals"])),
    ("setitem_batched_self", lambda L, d: L.func.vmap(
        lambda x, i: _set(x, (slice(None), i), 5.))(d["x"], d["idx"][:2])),
    ("searchsorted_sorter", lambda L, d: L.func.vmap(
        lambda s: L.searchsorted(L.tensor([5., 1., 3.]), L.tensor([2., 4.]), sorter=s))(
            L.tensor([[1, 2, 0], [1, 2, 0]]))),
    ("pinv_atol", lambda L, d: L.func.vmap(
        lambda t: L.linalg.pinv(L.tensor([[1., 0.], [0., 1e-3]]), atol=t))(
            L.tensor([1e-2, 1e-4]))),
    ("cat_batched_empty", lambda L, d: L.func.vmap(
        lambda e, t: L.cat([e, t]))(L.zeros(2, 0), d["x"])),
    ("cat_unbatched_empty_dim1", lambda L, d: L.func.vmap(
        lambda t: L.cat([L.tensor([]), t], 1))(d["x"])),
    ("cat_empty_promotes", lambda L, d: L.func.vmap(
        lambda e: L.cat([L.ones(2, 3), e], -1))(L.zeros(2, 0, dtype=L.float64))),
]


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_func(name, fn):
    want = fn(torch, _data(torch))
    got = fn(ember, _data(ember))
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    assert tuple(got.shape) == tuple(want.shape)


ERRORS = [
    ("index_out_of_range", lambda L, d: L.func.vmap(lambda i: d["x"][0, 0][i])(
        L.tensor([[0], [7], [1]]))),
    ("index_out_of_range_batched_x", lambda L, d: L.func.vmap(lambda x, i: x[:, i])(
        d["x"].expand(3, 2, 3, 4), L.tensor([[0], [7], [1]]))),
    ("index_put_out_of_range", lambda L, d: L.func.vmap(
        lambda i: L.zeros(4).index_put((i,), L.tensor(1.)))(L.tensor([[0], [-5], [1]]))),
    ("float_index", lambda L, d: L.func.vmap(lambda i: d["x"][0, 0][i])(
        L.tensor([[0.], [1.]]))),
    ("values_too_many_dims", lambda L, d: L.func.vmap(
        lambda i: L.zeros(4).index_put((i,), L.ones(2, 2)))(d["idx"])),
    ("in_place_on_unbatched", lambda L, d: L.func.vmap(
        lambda i: L.zeros(4).index_put_((i,), L.tensor(1.)))(d["idx"])),
    ("setitem_on_unbatched", lambda L, d: L.func.vmap(
        lambda i: _set(L.zeros(4), i, 1.))(d["idx"])),
    ("cat_dim_out_of_range", lambda L, d: L.func.vmap(
        lambda e, t: L.cat([e, t], 2))(L.zeros(2, 0), L.ones(2, 2, 3))),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[c[0] for c in ERRORS])
def test_errors_match_torch_func(name, fn):
    with pytest.raises(Exception) as want:
        fn(torch, _data(torch))
    with pytest.raises(type(want.value)) as got:
        fn(ember, _data(ember))
    assert str(got.value) == str(want.value).replace("torch.", "ember.")
