"""vmap batching rules added or fixed in audit round 11, each against a loop over the batch
(and no loop fallback warning where a rule now applies)."""

import warnings

import pytest

import ember
import ember.nn.functional as F
from ember.func import vmap


def _randn(*shape):
    return ember.randn(shape, dtype=ember.float64)


def _loop(f, args, in_dims):
    size = next(a.shape[0] for a, d in zip(args, in_dims) if d is not None)
    outs = [f(*[a if d is None else a[b] for a, d in zip(args, in_dims)]) for b in range(size)]
    if isinstance(outs[0], tuple):
        return tuple(ember.stack([o[i] for o in outs]) for i in range(len(outs[0])))
    return ember.stack(outs)


def _check(f, *args, in_dims=None, fallback=False):
    in_dims = in_dims or (0,) * len(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = vmap(f, in_dims=in_dims)(*args)
    warned = any("performance" in str(w.message) for w in caught)
    assert warned == fallback, [str(w.message) for w in caught]
    want = _loop(f, args, in_dims)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert ember.allclose(g, w)


IDX = ember.tensor([2, 0, 2])
A = _randn(3, 2, 3, 3) + 3 * ember.eye(3, dtype=ember.float64)

CASES = [
    # var(x, False) is the overload taking unbiased: the rule used to take False as dim 0
    ("var_unbiased_positional", lambda x: ember.var(x, False), (_randn(4, 2, 3),), None),
    ("std_mean_unbiased_positional", lambda x: ember.std_mean(x, True), (_randn(4, 2, 3),),
     None),
    # renorm keeps dim and takes norms over the others: the batch dim must not join them
    ("renorm", lambda x: ember.renorm(x, 2, 0, 1.0), (_randn(3, 4, 3),), None),
    ("renorm_last_dim", lambda x: ember.renorm(x, 1, -1, 0.5), (_randn(3, 2, 4, 3),), None),
    ("linear_broadcast_bias", lambda x, w, b: F.linear(x, w, b),
     (_randn(3, 5, 4), _randn(3, 2, 4), _randn(3, 1)), None),
    ("linear_no_features", lambda x, w, b: F.linear(x, w, b),
     (_randn(3, 2, 0), _randn(3, 2, 0), _randn(3, 2)), None),
    ("solve_vector", lambda a, b: ember.linalg.solve(a, b), (A, _randn(3, 3)), None),
    ("solve_broadcast", lambda a, b: ember.linalg.solve(a, b, left=False),
     (A, _randn(3, 4, 1, 3, 3)), None),
    ("solve_ex_vector", lambda a, b: ember.linalg.solve_ex(a, b)[0], (A, _randn(3, 2, 3)),
     None),
    ("solve_triangular_broadcast",
     lambda a, b: ember.linalg.solve_triangular(a, b, upper=True),
     (_randn(3, 2, 1, 3, 3) + 3 * ember.eye(3, dtype=ember.float64), _randn(3, 4, 3, 2)), None),
    ("cdist_broadcast", lambda a, b: ember.cdist(a, b), (_randn(3, 2, 1, 2, 3), _randn(3, 3, 4, 3)),
     None),
    ("attention_broadcast", lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
     (_randn(3, 2, 1, 3, 4), _randn(3, 3, 5, 4), _randn(3, 1, 5, 4)), None),
    ("channel_shuffle_1d", lambda x: F.channel_shuffle(x, 3), (_randn(3, 2, 6, 3),), None),
    ("channel_shuffle_3d", lambda x: F.channel_shuffle(x, 2), (_randn(3, 2, 4, 3, 2, 2),), None),
    ("index_add", lambda x, s: x.index_add(1, IDX, s, alpha=2),
     (_randn(3, 2, 3, 5), _randn(3, 2, 3, 5)), None),
    ("index_add_unbatched_source", lambda x, s: x.index_add(-2, IDX, s),
     (_randn(3, 2, 3, 5), _randn(2, 3, 5)), (0, None)),
    ("index_add_unbatched_input", lambda x, s: x.index_add(0, IDX, s),
     (_randn(3, 5), _randn(4, 3, 5)), (None, 0)),
    ("index_copy", lambda x, s: x.index_copy(0, ember.tensor([1, 0]), s),
     (_randn(4, 3, 5), _randn(4, 2, 5)), None),
    ("index_fill", lambda x: x.index_fill(1, IDX, -1.0), (_randn(4, 3, 5),), None),
    ("index_fill_tensor_value", lambda x: x.index_fill(1, IDX, ember.tensor(3.0)),
     (_randn(4, 3, 5),), None),
    ("rms_norm", lambda x, w: F.rms_norm(x, (5,), w), (_randn(4, 3, 5), _randn(5)), (0, None)),
    ("rms_norm_batched_weight", lambda x, w: F.rms_norm(x, (3, 5), w, eps=1e-3),
     (_randn(4, 2, 3, 5), _randn(4, 3, 5)), None),
    ("rms_norm_unbatched_input", lambda x, w: F.rms_norm(x, (5,), w),
     (_randn(3, 5), _randn(4, 5)), (None, 0)),
    ("renorm_empty_slices", lambda x: ember.renorm(x, 2, 1, 1.0), (_randn(3, 0, 3),), None),
    ("fftn_int_s", lambda x: ember.fft.fftn(x, s=3), (_randn(3, 4, 5),), None),
    ("fft2", lambda x: ember.fft.fft2(x), (_randn(3, 2, 4, 5),), None),
    ("fftn_s_only", lambda x: ember.fft.fftn(x, s=(3, 4)), (_randn(3, 2, 4, 5),), None),
    ("rfftn_dims", lambda x: ember.fft.rfftn(x, dim=(0, -1), norm="ortho"),
     (_randn(3, 2, 4, 5),), None),
    ("irfft2_s", lambda x: ember.fft.irfft2(x, s=(3, 6)),
     (ember.randn(3, 2, 4, 5, dtype=ember.complex128),), None),
]


@pytest.mark.parametrize("name,f,args,in_dims", CASES, ids=[c[0] for c in CASES])
def test_rule_matches_loop(name, f, args, in_dims):
    _check(f, *args, in_dims=in_dims)


def test_index_copy_of_a_0dim_source_takes_the_loop():
    _check(lambda x, s: x.index_copy(0, ember.tensor([1]), s), _randn(4, 3), _randn(4),
           fallback=True)


def test_per_example_index_has_a_rule():
    # a batched index has a rule since round 13 (no loop, no warning), with the right values
    _check(lambda x, i: x.index_add(0, i, x), _randn(4, 3),
           ember.tensor([[0, 1, 2], [2, 1, 0], [0, 0, 0], [1, 1, 2]]))


def test_rms_norm_per_example_gradients():
    x, w = _randn(4, 3, 5), _randn(5)
    got = vmap(ember.func.grad(lambda x, w: F.rms_norm(x, (5,), w).pow(2).sum()),
               in_dims=(0, None))(x, w)
    want = ember.stack([ember.func.grad(lambda x, w: F.rms_norm(x, (5,), w).pow(2).sum())(
        x[b], w) for b in range(4)])
    assert ember.allclose(got, want)


@pytest.mark.parametrize("aux", [None, 3, 2.5, "s", (ember.ones(1), None)])
@pytest.mark.parametrize("transform", [
    lambda f, x: ember.func.grad(lambda x: (f(x).sum(), f.aux), has_aux=True)(x),
    lambda f, x: ember.func.jacrev(lambda x: (f(x), f.aux), has_aux=True)(x),
    lambda f, x: ember.func.jacfwd(lambda x: (f(x), f.aux), has_aux=True)(x),
    lambda f, x: ember.func.vjp(lambda x: (f(x), f.aux), x, has_aux=True),
    lambda f, x: ember.func.jvp(lambda x: (f(x), f.aux), (x,), (x,), has_aux=True),
], ids=["grad", "jacrev", "jacfwd", "vjp", "jvp"])
def test_aux_must_hold_tensors_only(transform, aux):
    def f(x):
        return x.sin()
    f.aux = aux
    bad = type(aux) if not isinstance(aux, tuple) else type(None)
    with pytest.raises(RuntimeError, match=f"^Expected tensors, got unsupported type {bad}$"):
        transform(f, _randn(2))


def test_grad_of_a_complex_output_raises():
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for real scalar "
                                           "outputs but got ember.complex128"):
        ember.func.grad(lambda x: (x * 1j).sum())(_randn(2))


def test_loop_fallback_on_an_empty_batch_raises_torch_message():
    with pytest.raises(RuntimeError, match=r"^Batching rule not implemented for aten::histc\. The "
                                           r"fallback path does not support vmap over dims of "
                                           r"size 0\.$"):
        vmap(ember.histc)(_randn(0, 3))


def test_jacfwd_random_ops_follow_randomness():
    def f(x):
        return x * ember.rand(2, dtype=ember.float64)
    with pytest.raises(RuntimeError, match="called random operation while in randomness error"):
        ember.func.jacfwd(f)(_randn(2))
    jac = ember.func.jacfwd(f, randomness="same")(_randn(2))
    assert jac.shape == (2, 2) and bool((jac.diagonal() > 0).all())
    assert ember.rand(1).shape == (1,)          # random ops work again afterwards
