"""vmap with BatchedTensors inside an op's parameters (advanced indices, index_put's indices,
searchsorted's sorter, tensor tolerances, ctc_loss's lengths) and cat's skipped 1-D empty
examples, each against a loop over the batch, and without the loop fallback's warning where
a rule exists."""

import warnings

import numpy as np

import pytest

import ember
import ember.nn.functional as F
from ember.func import grad, vmap
from ember.ops._dispatch import ACTIVE_VMAPS

_GEN = ember.Generator().manual_seed(26)


def _randn(*shape):
    return ember.randn(shape, dtype=ember.float64, generator=_GEN)


def _loop(f, args, in_dims):
    size = next(a.shape[d] for a, d in zip(args, in_dims) if d is not None)
    outs = [f(*[a if d is None else a.select(d, b) for a, d in zip(args, in_dims)])
            for b in range(size)]
    return ember.stack(outs)


def _check(f, *args, in_dims=None, fallback=False, grads=()):
    """vmap(f) against the loop; the fallback warning must appear exactly when expected."""
    in_dims = tuple(in_dims or (0,) * len(args))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = vmap(f, in_dims=in_dims)(*args)
    warned = any("performance" in str(w.message) for w in caught)
    assert warned == fallback, [str(w.message) for w in caught]
    want = _loop(f, args, in_dims)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    assert ember.equal(got, want), (got, want)
    if grads:
        grad_f = grad(lambda *a: f(*a).sum(), argnums=grads)
        got_g, want_g = vmap(grad_f, in_dims=in_dims)(*args), _loop_grads(grad_f, args, in_dims)
        for g, w in zip(got_g, want_g):
            assert ember.allclose(g, w)


def _loop_grads(grad_f, args, in_dims):
    size = next(a.shape[d] for a, d in zip(args, in_dims) if d is not None)
    outs = [grad_f(*[a if d is None else a.select(d, b) for a, d in zip(args, in_dims)])
            for b in range(size)]
    return tuple(ember.stack([o[i] for o in outs]) for i in range(len(outs[0])))


X = ember.arange(24.).reshape(2, 3, 4)
IDX = ember.tensor([[0, 2], [-1, 1], [3, 3]])
ROWS = ember.tensor([[0, 1], [1, 0], [1, 1]])

INDEX_CASES = [
    ("unbatched_x_index_only", lambda i: X[0, 1][i], (IDX,), None),
    ("unbatched_x_after_slice", lambda i: X[:, :, i.clamp(0, 3)], (IDX,), None),
    ("batched_x_and_index", lambda x, i: x[i], (X[0].reshape(3, 4), ROWS), None),
    ("batched_x_after_slice", lambda x, i: x[:, i], (X, IDX[:2]), None),
    ("two_indices_one_batched", lambda i: X[ember.tensor([0, 1]), :, i], (IDX,), None),
    ("not_adjacent", lambda x, i: x[i, :, i], (X.expand(3, 2, 3, 4), ROWS), None),
    ("broadcast_ranks", lambda i: X[0][ember.tensor([[0], [2]]), i], (IDX,), None),
    ("int32_index", lambda i: X[1, 2][i], (IDX.int(),), None),
]


@pytest.mark.parametrize("name,f,args,in_dims", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_advanced_index_with_a_batched_index_has_a_rule(name, f, args, in_dims):
    _check(f, *args, in_dims=in_dims)


def test_advanced_index_gradient_per_example():
    _check(lambda x, i: x[:, i] ** 2, _randn(3, 2, 4), IDX, grads=(0,))


PUT_CASES = [
    ("out_of_place_index_only", lambda i: ember.zeros(4).index_put((i,), ember.tensor(1.)),
     (IDX,), None),
    ("accumulate_values_batched", lambda i, v: ember.zeros(4).index_put((i,), v, True),
     (ember.tensor([[0, 0], [2, 1], [3, 3]]), ember.arange(6.).reshape(3, 2)), None),
    ("after_slice", lambda i, v: ember.zeros(2, 4).index_put((ember.tensor([0, 1]), i), v),
     (ROWS, ember.arange(6.).reshape(3, 2)), None),
    ("setitem_batched_self", lambda x, i: _set(x, (slice(None), i), 5.), (X, IDX[:2]), None),
    ("setitem_int_and_index", lambda x, i: _set(x, (ember.tensor(1), i), 7.),
     (X[:1].expand(3, 3, 4), IDX), None),
]


def _set(x, key, value):
    y = x.clone()
    y[key] = value
    return y


@pytest.mark.parametrize("name,f,args,in_dims", PUT_CASES, ids=[c[0] for c in PUT_CASES])
def test_index_put_with_a_batched_index_has_a_rule(name, f, args, in_dims):
    _check(f, *args, in_dims=in_dims)


def test_index_with_an_index_batched_at_the_outer_level():
    x = ember.arange(12.).reshape(3, 4)
    got = vmap(lambda i: vmap(lambda row: row[i])(x))(ROWS)
    want = ember.stack([ember.stack([row[i] for row in x]) for i in ROWS])
    assert ember.equal(got, want)
    got = vmap(lambda row: vmap(lambda i: row[i])(IDX))(x)
    assert ember.equal(got, ember.stack([ember.stack([row[i] for i in IDX]) for row in x]))


def test_index_put_in_place_on_an_unbatched_tensor_refuses():
    with pytest.raises(RuntimeError, match=r"vmap: index_put_\(self, \*extra_args\) is not "):
        vmap(lambda i: ember.zeros(4).index_put_((i,), ember.tensor(1.)))(IDX)


PARAM_CASES = [
    ("searchsorted_sorter", lambda s: ember.searchsorted(ember.tensor([5., 1., 3.]),
                                                          ember.tensor([2., 4.]), sorter=s),
     (ember.tensor([[1, 2, 0], [1, 2, 0]]),)),
    ("searchsorted_sequence_and_sorter", lambda q, s: ember.searchsorted(
        q, ember.tensor([2., 4.]), sorter=s),
     (ember.tensor([[5., 1., 3.], [2., 9., 4.]]), ember.tensor([[1, 2, 0], [0, 2, 1]]))),
    ("matrix_rank_atol", lambda t: ember.linalg.matrix_rank(
        ember.tensor([[1., 0.], [0., 1e-3]]), atol=t), (ember.tensor([1e-2, 1e-4]),)),
    ("pinv_atol", lambda t: ember.linalg.pinv(ember.tensor([[1., 0.], [0., 1e-3]]), atol=t),
     (ember.tensor([1e-2, 1e-4]),)),
    ("ctc_loss_input_lengths", lambda n: F.ctc_loss(
        ember.arange(40.).reshape(5, 2, 4).sin().log_softmax(-1), ember.tensor([[1, 2], [1, 3]]),
        n, ember.tensor([2, 1])), (ember.tensor([[5, 4], [3, 5]]),)),
]


@pytest.mark.parametrize("name,f,args", PARAM_CASES, ids=[c[0] for c in PARAM_CASES])
def test_a_parameter_batched_alone_is_batched(name, f, args):
    _check(f, *args, fallback=True)


CAT_CASES = [
    ("batched_empty_first", lambda e, t: ember.cat([e, t]), (ember.zeros(2, 0), X), None),
    ("unbatched_empty", lambda t: ember.cat([ember.tensor([]), t]), (X,), None),
    ("batched_empty_dim1", lambda e, t: ember.cat([t, e, t], 1), (ember.zeros(2, 0), X), None),
    ("empty_promotes", lambda e: ember.cat([ember.ones(2, 3), e], -1),
     (ember.zeros(2, 0, dtype=ember.float64),), None),
    ("only_empties", lambda e: ember.cat([e, ember.tensor([])]), (ember.zeros(2, 0),), None),
]


@pytest.mark.parametrize("name,f,args,in_dims", CAT_CASES, ids=[c[0] for c in CAT_CASES])
def test_cat_skips_one_dim_empty_examples(name, f, args, in_dims):
    _check(f, *args, in_dims=in_dims)


def test_vmap_count_returns_to_zero():
    assert ACTIVE_VMAPS[0] == 0
    with pytest.raises(RuntimeError):
        vmap(lambda x: vmap(lambda y: y.item())(x))(ember.ones(2, 2))
    assert ACTIVE_VMAPS[0] == 0


def test_threads_vmapping_indices_each_see_their_own_level(monkeypatch):
    import sys
    import threading
    import time

    import ember.func._batching as batching
    import ember.func._batching.advanced_index as advanced_index
    import ember.func._batching.shape as shape_rules

    def yielding_level():           # widens the window between a rule's start and its read
        time.sleep(0)
        return batching.handled_level()

    monkeypatch.setattr(advanced_index, "handled_level", yielding_level)
    monkeypatch.setattr(shape_rules, "handled_level", yielding_level)
    interval = sys.getswitchinterval()
    rng = np.random.default_rng(0)
    x = rng.random((3, 5, 4), dtype=np.float32)
    rows, cols = rng.integers(0, 5, (3, 2)), rng.integers(0, 4, (3, 2))
    cases = [(lambda t, i: t[i], rows, np.stack([x[b][rows[b]] for b in range(3)])),
             (lambda t, j: t[:, j], cols, np.stack([x[b][:, cols[b]] for b in range(3)]))]
    failures = []

    def work(k):
        fn, index, expected = cases[k % 2]
        try:
            for _ in range(60):
                got = ember.func.vmap(fn)(ember.tensor(x), ember.tensor(index)).numpy()
                np.testing.assert_array_equal(got, expected)
        except Exception as e:      # noqa: BLE001  (reported below)
            failures.append(e)

    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []
