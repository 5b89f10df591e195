"""vmap batching rules added in audit round 14, each against a loop over the batch (values,
dtypes, shapes and, for differentiable ops, per-example gradients), with no loop fallback
warning (but for the ops PyTorch loops: ``LOOPED``)."""

import re
import warnings

import pytest

import ember
import ember.nn.functional as F
from ember.func import grad, vmap


_GEN = ember.Generator().manual_seed(14)     # the same cases whatever ran before


def _randn(*shape):
    return ember.randn(shape, dtype=ember.float64, generator=_GEN)


def _spd(*batch, n=4):
    a = _randn(*batch, n, n)
    return a @ a.mT + n * ember.eye(n, dtype=ember.float64)


def _outputs(x):
    return x if isinstance(x, tuple) else (x,)


def _loop(f, args, in_dims):
    size = next(a.shape[d] for a, d in zip(args, in_dims) if d is not None)
    outs = [f(*[a if d is None else a.select(d, b) for a, d in zip(args, in_dims)])
            for b in range(size)]
    if isinstance(outs[0], tuple):
        return tuple(ember.stack([o[i] for o in outs]) for i in range(len(outs[0])))
    return ember.stack(outs)


def _no_fallback(fn, *args, fallback=False):
    """``fn(*args)``, checking that it warns of the loop fallback (``fallback``: whether, or
    the set of ATen ops PyTorch's warnings name)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    if isinstance(fallback, set):
        named = {re.search(r"rule for (\S+)\. Please", str(w.message)).group(1)
                 for w in caught if "performance" in str(w.message)}
        assert named == fallback, [str(w.message) for w in caught]
        return out
    warned = any("performance" in str(w.message) for w in caught)
    assert warned == fallback, [str(w.message) for w in caught]
    return out


# ops PyTorch 2.13 has no batching rule for (round 30): ember's rules keep their values but
# warn as PyTorch's loop does; case -> (ops named for vmap(f), for vmap(grad(f))), read off
# torch (under grad, quantile runs its composite body, which loops lerp_ in linear and
# midpoint modes; the source's gradient of masked_scatter loops masked_scatter_backward)
_MS = ({"aten::masked_scatter"}, {"aten::masked_scatter", "aten::masked_scatter_backward"})
LOOPED = {
    **dict.fromkeys(["masked_scatter", "masked_scatter_broadcast_mask",
                     "masked_scatter_shared_x_dim1", "masked_scatter_shared_mask",
                     "masked_scatter_broadcast_input", "masked_scatter_0d"], _MS),
    "quantile": ({"aten::quantile.scalar"}, {"aten::lerp_.Tensor"}),
    "quantile_vector_q_keepdim": ({"aten::quantile"}, {"aten::lerp_.Tensor"}),
    "quantile_dim": ({"aten::quantile"}, {"aten::lerp_.Tensor"}),
    "quantile_dim_keepdim_nearest": ({"aten::quantile.scalar"}, set()),
    "quantile_0d_q": ({"aten::quantile"}, {"aten::lerp_.Tensor"}),
    "nanquantile": ({"aten::nanquantile"}, None),
    "nanquantile_dim": ({"aten::nanquantile.scalar"}, None),
}


def _check(f, *args, in_dims=None, grads=(), fallback=False, grad_fallback=None):
    """vmap(f) against the loop; ``grads``: the argnums to compare gradients of a sum for
    (``grad_fallback``: the gradients' warnings, when not ``fallback``'s)."""
    in_dims = tuple(in_dims or (0,) * len(args))
    got = _no_fallback(vmap(f, in_dims=in_dims), *args, fallback=fallback)
    want = _loop(f, args, in_dims)
    for g, w in zip(_outputs(got), _outputs(want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        assert ember.allclose(g, w, equal_nan=True)
    if not grads:
        return
    grad_f = grad(lambda *a: _outputs(f(*a))[0].sum(), argnums=tuple(grads))
    got = _no_fallback(vmap(grad_f, in_dims=in_dims), *args,
                       fallback=fallback if grad_fallback is None else grad_fallback)
    want = _loop(grad_f, args, in_dims)
    for g, w in zip(got, want):
        assert g.shape == w.shape and ember.allclose(g, w, equal_nan=True)


A = _spd(3)
L = ember.linalg.cholesky(A)
LU, PIV = ember.linalg.lu_factor(A)
LD, LD_PIV = ember.linalg.ldl_factor(A)

T = ember.randint(0, 4, (3, 5))
ML = ember.randint(-1, 4, (3, 5, 4))

Q = ember.tensor([0.1, 0.5, 0.75], dtype=ember.float64)

IDX = ember.randint(0, 5, (3, 4))
MASK = _randn(3, 2, 5) > 0

CASES = [
    ("index_reduce_prod", lambda x, i, s: x.index_reduce(0, i, s, "prod"),
     (_randn(3, 5, 2), IDX, _randn(3, 4, 2)), None, (0, 2)),
    ("index_reduce_mean_exclude_shared_index",
     lambda x, i, s: x.index_reduce(-1, i, s, "mean", include_self=False),
     (_randn(3, 2, 5), IDX[0], _randn(3, 2, 4)), (0, None, 0), (0, 2)),
    ("index_reduce_amax_shared_x_dim1", lambda x, i, s: x.index_reduce(0, i, s, "amax"),
     (_randn(5), IDX, _randn(4, 3)), (None, 0, 1), (0, 2)),
    ("index_reduce_amin_shared_source", lambda x, i, s: x.index_reduce(1, i, s, "amin"),
     (_randn(3, 2, 5), IDX, _randn(2, 4)), (0, 0, None), (0, 2)),
    ("put", lambda x, i, s: x.put(i, s), (_randn(3, 5), ember.randint(-5, 5, (3, 2)),
                                         _randn(3, 2)), None, (0, 2)),
    ("put_accumulate_shared_x", lambda x, i, s: x.put(i, s, accumulate=True),
     (_randn(2, 3), ember.randint(-6, 6, (3, 2, 4)), _randn(8, 3)), (None, 0, 1), (0, 2)),
    ("put_shared_index", lambda x, i, s: ember.put(x, i, s),
     (_randn(3, 2, 2), ember.tensor([3, 0, -1]), _randn(3, 3)), (0, None, 0), (0, 2)),
    ("put_0d", lambda x, i, s: x.put(i, s), (_randn(3), ember.zeros(3, 1, dtype=ember.int64),
                                           _randn(3, 1)), None, (0, 2)),
    ("masked_scatter", lambda x, m, s: x.masked_scatter(m, s),
     (_randn(3, 2, 5), MASK, _randn(3, 10)), None, (0, 2)),
    ("masked_scatter_broadcast_mask", lambda x, m, s: x.masked_scatter(m, s),
     (_randn(3, 2, 5), MASK[:, 0], _randn(3, 2, 5)), None, (0, 2)),
    ("masked_scatter_shared_x_dim1", lambda x, m, s: ember.masked_scatter(x, m, s),
     (_randn(5), MASK[:, 0], _randn(7, 3)), (None, 0, 1), (0, 2)),
    ("masked_scatter_shared_mask", lambda x, m, s: x.masked_scatter(m, s),
     (_randn(3, 2, 5), MASK[0], _randn(12)), (0, None, None), (0, 2)),
    ("masked_scatter_broadcast_input", lambda x, m, s: x.masked_scatter(m, s),
     (_randn(3, 5), MASK, _randn(3, 10)), None, (0, 2)),
    ("masked_scatter_0d", lambda x, m, s: x.masked_scatter(m, s),
     (_randn(3), _randn(3) > 0, _randn(3, 2)), None, (0, 2)),
    ("dist", lambda a, b: ember.dist(a, b), (_randn(3, 5), _randn(3, 5)), None, (0, 1)),
    ("dist_broadcast_p1", lambda a, b: ember.dist(a, b, 1), (_randn(3, 2, 5), _randn(5, 3)),
     (0, 1), (0, 1)),
    ("dist_shared_other_inf", lambda a, b: ember.dist(a, b, float("inf")),
     (_randn(3, 4), _randn(4)), (0, None), (0,)),
    ("dist_p0_fractional", lambda a, b: (ember.dist(a, b, 0), ember.dist(a, b, 0.5)),
     (_randn(3, 4), _randn(3, 4)), None, ()),
    ("dist_0d", lambda a, b: ember.dist(a, b, 3), (_randn(3), _randn(3)), None, (0, 1)),
    ("quantile", lambda x: ember.quantile(x, 0.3), (_randn(3, 5),), None, (0,)),
    ("quantile_vector_q_keepdim", lambda x, q: ember.quantile(x, q, keepdim=True),
     (_randn(3, 2, 5), Q), (0, None), (0,)),
    ("quantile_dim", lambda x, q: ember.quantile(x, q, dim=-1, interpolation="midpoint"),
     (_randn(2, 3, 5), Q), (1, None), (0,)),
    ("quantile_dim_keepdim_nearest",
     lambda x: ember.quantile(x, 0.4, dim=0, keepdim=True, interpolation="nearest"),
     (_randn(3, 5, 2),), None, (0,)),
    ("quantile_0d_q", lambda x, q: ember.quantile(x, q, dim=1), (_randn(3, 5, 4), Q[1]),
     (0, None), (0,)),
    ("nanquantile", lambda x, q: ember.nanquantile(x, q),
     (ember.where(_randn(3, 6) > 0.5, float("nan"), _randn(3, 6)), Q), (0, None), ()),
    ("nanquantile_dim", lambda x: ember.nanquantile(x, 0.5, dim=1, interpolation="lower"),
     (ember.where(_randn(3, 4, 6) > 0.5, float("nan"), _randn(3, 4, 6)),), None, ()),
    ("multi_margin_loss", lambda x, t: F.multi_margin_loss(x, t), (_randn(3, 5, 4), T), None,
     (0,)),
    ("multi_margin_loss_none_p2_weight",
     lambda x, t, w: F.multi_margin_loss(x, t, p=2, margin=0.5, weight=w, reduction="none"),
     (_randn(5, 3, 4), T, _randn(4).abs()), (1, 0, None), (0,)),
    ("multi_margin_loss_sum_shared_x", lambda x, t: F.multi_margin_loss(x, t, reduction="sum"),
     (_randn(5, 4), T), (None, 0), (0,)),
    ("multi_margin_loss_1d", lambda x, t: F.multi_margin_loss(x, t), (_randn(3, 4), T[:, 0]),
     None, (0,)),
    ("multilabel_margin_loss", lambda x, t: F.multilabel_margin_loss(x, t),
     (_randn(3, 5, 4), ML), None, (0,)),
    ("multilabel_margin_loss_none_shared_target",
     lambda x, t: F.multilabel_margin_loss(x, t, reduction="none"),
     (_randn(5, 3, 4), ML[0]), (1, None), (0,)),
    ("multilabel_margin_loss_1d_sum",
     lambda x, t: F.multilabel_margin_loss(x, t, reduction="sum"), (_randn(3, 4), ML[:, 0]),
     None, (0,)),
    ("cholesky_solve", lambda b, f: ember.cholesky_solve(b, f), (_randn(3, 4, 2), L), None,
     (0, 1)),
    ("cholesky_solve_upper_shared_b", lambda b, u: ember.cholesky_solve(b, u, upper=True),
     (_randn(4, 2), L.mT), (None, 0), (0, 1)),
    ("cholesky_solve_shared_factor_dim1", lambda b, f: ember.cholesky_solve(b, f),
     (_randn(2, 4, 3, 2), L[0]), (2, None), (0, 1)),
    ("cholesky_solve_broadcast", lambda b, f: ember.cholesky_solve(b, f),
     (_randn(3, 5, 4, 2), L), None, (0, 1)),
    ("lu_solve", lambda lu, p, b: ember.linalg.lu_solve(lu, p, b), (LU, PIV, _randn(3, 4, 2)),
     None, (0, 2)),
    ("lu_solve_shared_rhs_adjoint", lambda lu, p, b: ember.linalg.lu_solve(lu, p, b,
                                                                           adjoint=True),
     (LU, PIV, _randn(4, 2)), (0, 0, None), (0,)),
    ("lu_solve_shared_factor_right", lambda lu, p, b: ember.linalg.lu_solve(lu, p, b,
                                                                            left=False),
     (LU[0], PIV[0], _randn(2, 3, 4)), (None, None, 1), (2,)),
    ("ldl_solve", lambda ld, p, b: ember.linalg.ldl_solve(ld, p, b),
     (LD, LD_PIV, _randn(3, 4, 2)), None, ()),
    ("ldl_solve_shared_factor", lambda ld, p, b: ember.linalg.ldl_solve(ld, p, b),
     (LD[0], LD_PIV[0], _randn(3, 2, 4, 2)), (None, None, 0), ()),
    ("lstsq", lambda a, b: ember.linalg.lstsq(a, b), (_randn(3, 5, 3), _randn(3, 5, 2)), None,
     ()),
    ("lstsq_solution_grad", lambda a, b: ember.linalg.lstsq(a, b).solution,
     (_randn(3, 5, 3), _randn(5, 2)), (0, None), (0, 1)),
    ("lstsq_gelsd", lambda a, b: ember.linalg.lstsq(a, b, driver="gelsd"),
     (_randn(5, 3, 3), _randn(3, 5, 2)), (1, 0), ()),
    ("vander", lambda x: ember.linalg.vander(x), (_randn(3, 4),), None, (0,)),
    ("vander_n_dim1", lambda x: ember.linalg.vander(x, N=3), (_randn(2, 3, 4),), (1,), (0,)),
    ("cond", lambda a: ember.linalg.cond(a), (A,), None, (0,)),
    ("cond_fro_dim1", lambda a: ember.linalg.cond(a, "fro"), (_spd(2, 3),), (1,), (0,)),
    ("multi_dot", lambda a, b, c: ember.linalg.multi_dot([a, b, c]),
     (_randn(3, 2, 3), _randn(3, 3, 4), _randn(3, 4)), None, (0, 1, 2)),
    ("multi_dot_shared_vector_first", lambda a, b: ember.linalg.multi_dot([a, b]),
     (_randn(3), _randn(3, 4, 3)), (None, 2), (0, 1)),
    ("multi_dot_vectors", lambda a, b: ember.linalg.multi_dot([a, b]),
     (_randn(3, 4), _randn(3, 4)), None, (0, 1)),
    ("block_diag", lambda a, b: ember.block_diag(a, b), (_randn(3, 2, 2), _randn(3, 1, 3)),
     None, (0, 1)),
    ("block_diag_mixed_ranks", lambda a, b, c: ember.block_diag(a, b, c),
     (_randn(3), _randn(2, 3), _randn(2, 2)), (0, 1, None), (0, 1, 2)),
    ("block_diag_promotes", lambda a, b: ember.block_diag(a, b),
     (ember.randint(0, 5, (3, 2, 2)), _randn(3, 3).float()), None, ()),
    ("block_diag_empty_row", lambda a, b: ember.block_diag(a, b),
     (_randn(3, 0), _randn(3, 2, 2)), None, ()),
]


@pytest.mark.parametrize("name,f,args,in_dims,grads", CASES, ids=[c[0] for c in CASES])
def test_rule_matches_loop(name, f, args, in_dims, grads):
    fallback, grad_fallback = LOOPED.get(name, (False, None))
    _check(f, *args, in_dims=in_dims, grads=grads, fallback=fallback, grad_fallback=grad_fallback)


def test_block_diag_with_a_weak_0dim_block_takes_the_loop():
    # a 0-dim float64 block does not promote a float32 matrix (type promotion's weak 0-dim)
    _check(lambda a, b: ember.block_diag(a, b), _randn(3), _randn(3, 2, 2).float(),
           fallback=True)
    assert vmap(ember.block_diag)(_randn(3), _randn(3, 2, 2).float()).dtype == ember.float32


def test_multi_margin_loss_with_a_batched_weight_takes_the_loop():
    _check(lambda x, t, w: F.multi_margin_loss(x, t, weight=w), _randn(3, 5, 4), T,
           _randn(3, 4).abs(), fallback=True, grads=(0,))


def test_quantile_with_per_example_q_takes_the_loop():
    _check(lambda x, q: ember.quantile(x, q), _randn(3, 5), ember.rand(3, 2, dtype=ember.float64),
           fallback={"aten::quantile"}, grads=(0, 1), grad_fallback={"aten::lerp_.Tensor"})


def test_quantile_keeps_its_errors():
    with pytest.raises(RuntimeError, match=r"quantile\(\) q values must be in the range \[0, 1\]"):
        vmap(lambda x: ember.quantile(x, ember.tensor([0.5, 2.0], dtype=ember.float64)))(
            _randn(3, 4))
    with pytest.raises(IndexError, match="Dimension out of range"):
        vmap(lambda x: ember.quantile(x, 0.5, dim=2))(_randn(3, 4, 5))


def test_put_and_masked_scatter_keep_their_errors():
    with pytest.raises(IndexError, match="out of range"):
        vmap(lambda x, i, s: x.put(i, s))(_randn(3, 4), ember.tensor([[0], [4], [1]]),
                                          _randn(3, 1))
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones"):
        vmap(lambda x, m, s: x.masked_scatter(m, s))(_randn(3, 4), ember.ones(3, 4).bool(),
                                                     _randn(3, 2))


@pytest.mark.parametrize("f,args", [
    (lambda x, m, s: x.masked_scatter(m, s),
     (_randn(2, 3, 4), _randn(2, 3, 4) > 0, _randn(2, 3, 4))),
    (lambda x, i, s: x.put(i, s, accumulate=True),
     (_randn(2, 3, 4), ember.randint(-4, 4, (2, 3, 3)), _randn(2, 3, 3))),
    (lambda x, i, s: x.index_reduce(0, i, s, "mean"),
     (_randn(2, 3, 4), ember.randint(0, 4, (2, 3, 2)), _randn(2, 3, 2))),
    (lambda x, q, s: ember.quantile(x + s, q), (_randn(2, 3, 4), Q, _randn(2, 3))),
    (lambda lu, p, b: ember.linalg.lu_solve(lu, p, b),
     ember.linalg.lu_factor(_spd(2, 3)) + (_randn(2, 3, 4, 2),)),
], ids=["masked_scatter", "put", "index_reduce", "quantile", "lu_solve"])
def test_nested_vmap_matches_a_double_loop(request, f, args):
    dims = tuple(None if a is Q else 0 for a in args)
    fallback = {"masked_scatter": {"aten::masked_scatter"},
                "quantile": {"aten::quantile"}}.get(request.node.callspec.id, False)
    got = _no_fallback(vmap(vmap(f, in_dims=dims), in_dims=dims), *args, fallback=fallback)
    want = ember.stack([ember.stack([f(*[a if d is None else a[i, j] for a, d in zip(args, dims)])
                                     for j in range(3)]) for i in range(2)])
    assert got.shape == want.shape and ember.allclose(got, want)


def _log_probs(*shape):
    return _randn(*shape).log_softmax(-1)


CTC_TARGETS = ember.randint(1, 5, (3, 2, 4), generator=_GEN)

CTC_CASES = [
    ("mean", lambda lp, t: F.ctc_loss(lp, t, [6, 5], [4, 2]), (_log_probs(3, 6, 2, 5),
                                                              CTC_TARGETS), None),
    ("sum_tensor_lengths", lambda lp, t: F.ctc_loss(lp, t, ember.tensor([6, 4]),
                                                     ember.tensor([3, 0]), reduction="sum"),
     (_log_probs(6, 3, 2, 5), CTC_TARGETS), (1, 0)),
    ("none_blank_zero_infinity",
     lambda lp, t: F.ctc_loss(lp, t, [2, 6], [4, 1], blank=4, reduction="none",
                              zero_infinity=True), (_log_probs(3, 6, 2, 5), CTC_TARGETS % 4),
     None),
    ("concatenated_targets", lambda lp, t: F.ctc_loss(lp, t, [6, 6], [2, 3]),
     (_log_probs(3, 6, 2, 5), CTC_TARGETS.reshape(3, 8)[:, :5]), None),
    # (an unbatched example's 1-d target is concatenated: its length is the target length)
    ("unbatched_example", lambda lp, t: F.ctc_loss(lp, t, [6], [4]), (_log_probs(3, 6, 5),
                                                                 CTC_TARGETS[:, 0]), None),
    ("unbatched_example_shared_targets", lambda lp, t: F.ctc_loss(lp, t, [5], [4],
                                                                  reduction="none"),
     (_log_probs(3, 6, 5), CTC_TARGETS[0, 0]), (0, None)),
    ("shared_log_probs", lambda lp, t: F.ctc_loss(lp, t, [6, 5], [4, 2], reduction="sum"),
     (_log_probs(6, 2, 5), CTC_TARGETS), (None, 0)),
]


@pytest.mark.parametrize("name,f,args,in_dims", CTC_CASES, ids=[c[0] for c in CTC_CASES])
def test_ctc_loss_rule_matches_loop(name, f, args, in_dims):
    # PyTorch has no rule (round 31): it loops, warning with the overload its lengths pick;
    # under grad, the composite's _ctc_loss and its backward (PyTorch 2.13's loop of the int
    # list backward fails, "Cannot access data pointer", where jacrev's warns as here)
    if name == "sum_tensor_lengths":
        warned = ({"aten::ctc_loss.Tensor"},
                  {"aten::_ctc_loss.Tensor", "aten::_ctc_loss_backward.Tensor"})
    else:
        warned = ({"aten::ctc_loss.IntList"}, {"aten::_ctc_loss", "aten::_ctc_loss_backward"})
    _check(f, *args, in_dims=in_dims, grads=(0,), fallback=warned[0], grad_fallback=warned[1])


def test_ctc_loss_with_per_example_lengths_takes_the_loop():
    _check(lambda lp, t, n: F.ctc_loss(lp, t, n, ember.tensor([3, 2])),
           _log_probs(3, 6, 2, 5), CTC_TARGETS, ember.tensor([[6, 5], [4, 6], [5, 5]]),
           fallback=True, grads=(0,))


POOL_CASES = [
    ("2d", lambda x, u: F.fractional_max_pool2d(x, 2, output_size=3, _random_samples=u),
     (_randn(3, 2, 4, 7, 6), ember.rand(3, 2, 4, 2, dtype=ember.float64)), None),
    ("2d_unbatched_example_indices",
     lambda x, u: F.fractional_max_pool2d(x, (2, 3), output_ratio=0.5, return_indices=True,
                                          _random_samples=u),
     (_randn(4, 8, 8, 3), ember.rand(1, 4, 2, dtype=ember.float64)), (3, None)),
    ("3d_shared_input", lambda x, u: F.fractional_max_pool3d(x, 2, output_size=(2, 3, 2),
                                                            _random_samples=u),
     (_randn(2, 3, 5, 6, 5), ember.rand(3, 2, 3, 3, dtype=ember.float64)), (None, 0)),
]


@pytest.mark.parametrize("name,f,args,in_dims", POOL_CASES, ids=[c[0] for c in POOL_CASES])
def test_fractional_max_pool_rule_matches_loop(name, f, args, in_dims):
    _check(f, *args, in_dims=in_dims, grads=(0,))


def test_fractional_max_pool_draws_samples_per_example():
    x = _randn(3, 2, 6, 6)
    out = _no_fallback(vmap(lambda x: F.fractional_max_pool2d(x, 2, output_size=3),
                            randomness="different"), x)
    assert out.shape == (3, 2, 3, 3)
    same = _no_fallback(vmap(lambda x: F.fractional_max_pool2d(x, 2, output_size=3),
                             randomness="same"), x[0].expand(3, 2, 6, 6) * 1)
    assert ember.equal(same[0], same[1]) and ember.equal(same[1], same[2])
