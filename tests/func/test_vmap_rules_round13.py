"""vmap batching rules added in audit round 13, each against a loop over the batch, with no
loop fallback warning."""

import warnings

import pytest

import ember
import ember.nn.functional as F
from ember.func import grad, vmap
from tests.func.test_vmap_rules_round11 import _check, _randn


def _sorted(*shape):
    return ember.sort(_randn(*shape)).values


IDX = ember.tensor([[0, 2], [1, 1], [2, 0]])
TARGET = ember.randint(0, 4, (3, 5, 6))
TARGET2D = ember.tensor([[0, 3, 1, -100, 2], [1, 1, 0, 2, 3], [3, 2, 2, 0, 1]])
PERM = ember.stack([ember.randperm(5)[:3] for _ in range(3)])

CASES = [
    ("index_select", lambda x, i: ember.index_select(x, 0, i), (_randn(3, 4, 2), IDX), None),
    ("index_select_unbatched_x", lambda x, i: ember.index_select(x, 1, i),
     (_randn(4, 5), ember.randint(0, 5, (3, 2))), (None, 0)),
    ("index_select_0d_index", lambda x, i: ember.index_select(x, -1, i),
     (_randn(3, 4, 5), ember.randint(0, 5, (3,))), None),
    ("index_add", lambda x, i, s: x.index_add(0, i, s), (_randn(3, 4, 2), IDX, _randn(3, 2, 2)),
     None),
    ("index_add_alpha", lambda x, i, s: x.index_add(-1, i, s, alpha=2),
     (_randn(4, 5), ember.randint(0, 5, (3, 6)), _randn(3, 4, 6)), (None, 0, 0)),
    ("index_copy", lambda x, i, s: x.index_copy(1, i, s), (_randn(3, 4, 5), PERM, _randn(3, 4, 3)),
     None),
    ("index_fill", lambda x, i: x.index_fill(1, i, 2.5),
     (_randn(3, 4, 5), ember.randint(0, 5, (3, 2))), None),
    ("cross_entropy_batched_weight", lambda x, t, w: F.cross_entropy(x, t, weight=w),
     (_randn(3, 5, 4), TARGET2D, _randn(3, 4).abs()), None),
    ("cross_entropy_kdim_batched_weight_none",
     lambda x, t, w: F.cross_entropy(x, t, weight=w, reduction="none"),
     (_randn(3, 5, 4, 6), TARGET, _randn(3, 4).abs()), None),
    ("cross_entropy_kdim_batched_weight_sum",
     lambda x, t, w: F.cross_entropy(x, t, weight=w, reduction="sum", ignore_index=1),
     (_randn(3, 5, 4, 6), TARGET, _randn(3, 4).abs()), None),
    ("nll_loss_batched_weight", lambda x, t, w: F.nll_loss(x, t, weight=w),
     (_randn(5, 4), TARGET2D, _randn(3, 4).abs()), (None, 0, 0)),
    ("nll_loss_1d_batched_weight", lambda x, t, w: F.nll_loss(x, t, weight=w),
     (_randn(3, 4), ember.tensor([1, 2, 3]), _randn(3, 4).abs()), None),
    ("conv_transpose1d_batched_weight", lambda x, w: F.conv_transpose1d(x, w),
     (_randn(3, 2, 4, 7), _randn(3, 4, 5, 3)), None),
    ("conv_transpose2d_batched_weight_groups",
     lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, groups=2),
     (_randn(3, 2, 4, 5, 5), _randn(3, 4, 3, 3, 3), _randn(3, 6)), None),
    ("conv_transpose3d_batched_weight", lambda x, w: F.conv_transpose3d(x, w, stride=(1, 2, 1)),
     (_randn(2, 1, 2, 3, 3, 3), _randn(2, 2, 3, 2, 2, 2)), None),
    ("conv_transpose1d_unbatched_input",
     lambda x, w, b: F.conv_transpose1d(x, w, b, groups=2, dilation=2, output_padding=1,
                                        stride=2),
     (_randn(4, 7), _randn(3, 4, 3, 3), _randn(3, 6)), (None, 0, 0)),
    ("conv_transpose1d_batched_bias", lambda x, w, b: F.conv_transpose1d(x, w, b),
     (_randn(3, 4, 7), _randn(4, 3, 3), _randn(3, 3)), (0, None, 0)),
    ("take", lambda x, i: ember.take(x, i), (_randn(3, 4, 5), ember.randint(-20, 20, (3, 6))),
     None),
    ("take_unbatched_x", lambda x, i: ember.take(x, i),
     (_randn(4, 5), ember.randint(-20, 20, (3, 2, 2))), (None, 0)),
    ("take_along_dim_no_dim", lambda x, i: ember.take_along_dim(x, i),
     (_randn(3, 4, 5), ember.randint(0, 20, (3, 6))), None),
    ("bucketize", lambda x, b: ember.bucketize(x, b), (_randn(3, 6), _sorted(3, 5)), None),
    ("bucketize_right", lambda x, b: ember.bucketize(x, b, right=True),
     (_randn(3, 2, 6), _sorted(3, 5)), None),
    ("bucketize_shared_boundaries", lambda x, b: ember.bucketize(x, b),
     (_randn(3, 6), _sorted(5)), (0, None)),
    ("searchsorted", lambda s, x: ember.searchsorted(s, x), (_sorted(3, 5), _randn(3, 6)), None),
    ("searchsorted_nd", lambda s, x: ember.searchsorted(s, x, right=True),
     (_sorted(3, 2, 5), _randn(3, 2, 6)), None),
    ("searchsorted_shared_seq", lambda s, x: ember.searchsorted(s, x, side="right"),
     (_sorted(2, 5), _randn(3, 2, 4)), (None, 0)),
    ("searchsorted_shared_values", lambda s, x: ember.searchsorted(s, x, out_int32=True),
     (_sorted(3, 5), _randn(2, 4)), (0, None)),
    ("einsum_implicit_ellipsis", lambda a, b: ember.einsum("...ij,...jk", a, b),
     (_randn(3, 2, 4, 5), _randn(3, 2, 5, 6)), None),
    ("einsum_implicit_ellipsis_sum", lambda a: ember.einsum("i...", a), (_randn(3, 2, 4, 5),),
     None),
    ("trapezoid", lambda y: ember.trapezoid(y), (_randn(3, 4, 5),), None),
    ("trapezoid_dx_dim", lambda y: ember.trapezoid(y, dx=0.5, dim=0), (_randn(3, 4, 5),), None),
    ("trapezoid_x", lambda y, x: ember.trapezoid(y, x), (_randn(3, 4, 5), _randn(3, 5)), None),
    ("trapezoid_shared_x", lambda y, x: ember.trapezoid(y, x, dim=-2),
     (_randn(3, 4, 5), _randn(4)), (0, None)),
    ("trapezoid_broadcast_x", lambda y, x: ember.trapezoid(y, x, dim=1),
     (_randn(3, 2, 4, 5), _randn(3, 4, 5)), None),
    ("cumulative_trapezoid", lambda y: ember.cumulative_trapezoid(y), (_randn(3, 4, 5),), None),
    ("cumulative_trapezoid_shared_y", lambda y, x: ember.cumulative_trapezoid(y, x, dim=0),
     (_randn(4, 5), _randn(3, 4)), (None, 0)),
    ("diag_vector", lambda x: ember.diag(x, -2), (_randn(3, 4),), None),
    ("diag_matrix", lambda x: ember.diag(x, 1), (_randn(3, 4, 4),), None),
    ("kron", lambda a, b: ember.kron(a, b), (_randn(3, 2, 3), _randn(3, 4, 2)), None),
    ("kron_ranks_dtypes", lambda a, b: ember.kron(a, b),
     (ember.randint(0, 5, (3, 2, 3, 2)), _randn(2, 2)), (0, None)),
    ("inner", lambda a, b: ember.inner(a, b), (_randn(3, 2, 3), _randn(3, 4, 3)), None),
    ("inner_scalar", lambda a, b: ember.inner(a, b), (_randn(3), _randn(3, 4)), None),
    ("inner_shared", lambda a, b: ember.inner(a, b), (_randn(3, 4), _randn(5, 4)), (0, None)),
    ("tensordot", lambda a, b: ember.tensordot(a, b, dims=2),
     (_randn(3, 2, 3, 4), _randn(3, 3, 4, 5)), None),
    ("tensordot_lists", lambda a, b: ember.tensordot(a, b, dims=([0, 2], [1, 0])),
     (_randn(3, 2, 3, 4), _randn(4, 2, 5)), (0, None)),
    ("tensordot_outer", lambda a, b: ember.tensordot(a, b, dims=0), (_randn(3, 2), _randn(3, 3)),
     None),
    ("argmax_keepdim_no_dim", lambda x: ember.argmax(x, keepdim=True), (_randn(3, 4, 5),), None),
    ("argmin_keepdim_no_dim", lambda x: ember.argmin(x, keepdim=True), (_randn(3, 4, 5),), None),
    ("aminmax_keepdim_no_dim", lambda x: ember.aminmax(x, keepdim=True), (_randn(3, 4, 5),),
     None),
    ("norm_keepdim_no_dim", lambda x: ember.norm(x, keepdim=True), (_randn(3, 2, 3),), None),
    ("scalar_sum_dim", lambda x: x.sum(0), (_randn(3),), None),
    ("scalar_sum_keepdim", lambda x: x.sum(-1, keepdim=True), (_randn(3),), None),
    ("scalar_softmax", lambda x: x.softmax(0), (_randn(3),), None),
    ("scalar_log_softmax", lambda x: ember.log_softmax(x, -1), (_randn(3),), None),
    ("scalar_cumsum", lambda x: x.cumsum(0), (_randn(3),), None),
    ("scalar_amax", lambda x: ember.amax(x), (_randn(3),), None),
    ("scalar_var", lambda x: x.var(0, correction=0), (_randn(3),), None),
    ("scalar_sort", lambda x: x.sort(0), (_randn(3),), None),
    ("scalar_topk", lambda x: x.topk(1), (_randn(3),), None),
    ("scalar_max_dim", lambda x: x.max(0), (_randn(3),), None),
    ("scalar_argmax_keepdim", lambda x: x.argmax(keepdim=True), (_randn(3),), None),
    ("scalar_prod", lambda x: x.prod(), (_randn(3),), None),
]


@pytest.mark.parametrize("name,f,args,in_dims", CASES, ids=[c[0] for c in CASES])
def test_rule_matches_loop(name, f, args, in_dims):
    _check(f, *args, in_dims=in_dims)


def test_label_smoothing_with_batched_weight_takes_the_loop():
    _check(lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1),
           _randn(3, 5, 4), TARGET2D, _randn(3, 4).abs(), fallback=True)


def test_out_of_range_index_keeps_the_ops_error():
    with pytest.raises(IndexError, match="index out of range"):
        vmap(lambda x, i: ember.index_select(x, 0, i))(_randn(3, 4), ember.tensor([[0], [4],
                                                                                  [1]]))


def test_per_sample_grads_through_new_rules():
    w = _randn(4, 3, 3)
    x = _randn(5, 4, 7)
    idx = ember.randint(0, 3, (5, 2))

    def loss(w, x, i):
        y = F.conv_transpose1d(x.unsqueeze(0), w).squeeze(0)
        return ember.index_select(y, 0, i).sum()
    got = vmap(grad(loss), in_dims=(None, 0, 0))(w, x, idx)
    want = ember.stack([grad(loss)(w, x[b], idx[b]) for b in range(5)])
    assert ember.allclose(got, want)


def test_nested_vmap_with_per_example_indices_needs_no_loop():
    x, i = _randn(2, 3, 4, 5), ember.randint(-3, 4, (2, 3, 2))   # |i| < 4 = x.shape[2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = vmap(vmap(lambda x, i: ember.index_select(x, 0, i.abs())))(x, i)
        taken = vmap(vmap(lambda x, i: ember.take(x, i)))(x, i)
    want = ember.stack([ember.stack([ember.index_select(x[a, b], 0, i[a, b].abs())
                                     for b in range(3)]) for a in range(2)])
    assert ember.allclose(got, want)
    assert ember.allclose(taken, ember.stack([ember.stack([ember.take(x[a, b], i[a, b])
                                                           for b in range(3)])
                                              for a in range(2)]))


def test_empty_per_example_index():
    x = _randn(3, 4, 5)
    got = vmap(lambda x, i: ember.index_select(x, 1, i))(x, ember.zeros(3, 0, dtype=ember.int64))
    assert got.shape == (3, 4, 0)
