"""vmap: batching rules against a loop over the batch, errors, nesting, randomness."""

import warnings

import pytest

import ember
import ember.nn.functional as F
from ember.func import vmap


def _randn(*shape):
    return ember.randn(shape, dtype=ember.float64)


def _loop(f, *args, in_dims=0):
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    return ember.stack([f(*[a if d is None else a.select(d, b) for a, d in zip(args, dims)])
                        for b in range(size)])


def _check(f, *args, in_dims=0):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no loop fallback for these
        got = vmap(f, in_dims=in_dims)(*args)
    want = _loop(f, *args, in_dims=in_dims)
    assert got.shape == want.shape
    assert ember.allclose(got, want)


CASES = [
    ("unary", lambda a: a.sin().exp(), (3, 4)),
    ("binary_broadcast", lambda a: a * ember.arange(4.0, dtype=ember.float64) + 1, (3, 4)),
    ("sum_dim", lambda a: a.sum(1), (3, 4, 5)),
    ("sum_all", lambda a: a.sum(), (3, 4, 5)),
    ("mean_keepdim", lambda a: a.mean(-1, keepdim=True), (3, 4, 5)),
    ("softmax", lambda a: a.softmax(0), (3, 4, 5)),
    ("argmax_all", lambda a: a.argmax().to(ember.float64), (3, 4, 5)),
    ("max_all", lambda a: a.max(), (3, 4, 5)),
    ("max_dim", lambda a: a.max(1).values, (3, 4, 5)),
    ("cumsum", lambda a: a.cumsum(-1), (3, 4, 5)),
    ("sort", lambda a: a.sort(0).values, (3, 4, 5)),
    ("var", lambda a: a.var(0), (3, 4, 5)),
    ("view", lambda a: a.view(20), (3, 4, 5)),
    ("reshape", lambda a: a.reshape(-1, 2), (3, 4, 6)),
    ("permute", lambda a: a.permute(2, 0, 1), (3, 4, 5, 2)),
    ("transpose", lambda a: a.transpose(0, 1), (3, 4, 5)),
    ("t", lambda a: a.t(), (3, 4, 5)),
    ("unsqueeze", lambda a: a.unsqueeze(-1), (3, 4)),
    ("squeeze", lambda a: a.squeeze(), (3, 1, 4)),
    ("expand", lambda a: a.expand(2, 4), (3, 4)),
    ("flatten", lambda a: a.flatten(), (3, 4, 5)),
    ("getitem", lambda a: a[1:, None, 0], (3, 4, 5)),
    ("index", lambda a: a[ember.tensor([2, 0])], (3, 4, 5)),
    ("cat", lambda a: ember.cat([a, a * 2], 1), (3, 4, 5)),
    ("stack", lambda a: ember.stack([a, ember.ones(4, dtype=ember.float64)]), (3, 4)),
    ("split", lambda a: a.split(2, 1)[1], (3, 4, 5)),
    ("matmul_vec", lambda a: a @ ember.ones(4, dtype=ember.float64), (3, 5, 4)),
    ("matmul_mat", lambda a: ember.ones(2, 5, dtype=ember.float64) @ a, (3, 5, 4)),
    ("mm", lambda a: a.mm(a.t()), (3, 5, 4)),
    ("einsum", lambda a: ember.einsum("ij,kj->ik", a, a), (3, 5, 4)),
    ("linear", lambda a: F.linear(a, ember.ones(2, 4, dtype=ember.float64)), (3, 5, 4)),
    ("tril", lambda a: a.tril(), (3, 4, 4)),
    ("inv", lambda a: ember.linalg.inv(a + 4 * ember.eye(4, dtype=ember.float64)), (3, 4, 4)),
    ("where", lambda a: ember.where(a > 0, a, -a), (3, 4)),
    ("gather", lambda a: a.gather(1, ember.tensor([[0, 0], [1, 0]])), (3, 2, 4)),
    ("conv2d", lambda a: F.conv2d(a, ember.ones(2, 1, 3, 3, dtype=ember.float64)), (3, 2, 1, 6, 6)),
    ("conv_nobatch", lambda a: F.conv1d(a, ember.ones(2, 1, 3, dtype=ember.float64)), (3, 1, 6)),
    ("max_pool", lambda a: F.max_pool2d(a, 2), (3, 2, 1, 6, 6)),
    ("avg_pool", lambda a: F.avg_pool2d(a, 2), (3, 1, 6, 6)),
    ("layer_norm", lambda a: F.layer_norm(a, (5,)), (3, 4, 5)),
    ("batch_norm", lambda a: F.batch_norm(a, None, None, training=True), (3, 4, 5)),
    ("group_norm", lambda a: F.group_norm(a, 2), (3, 2, 4, 5)),
    ("cross_entropy", lambda a: F.cross_entropy(a, ember.tensor([1, 0, 2, 2])), (3, 4, 5)),
    ("mse", lambda a: F.mse_loss(a, ember.zeros(4, 5, dtype=ember.float64)), (3, 4, 5)),
    ("mse_sum", lambda a: F.mse_loss(a, a.flip(1).detach(), reduction="sum"), (3, 4, 5)),
    ("huber_none", lambda a: F.huber_loss(a, a.flip(0), reduction="none", delta=0.5), (3, 4)),
    ("smooth_l1", lambda a: F.smooth_l1_loss(a, ember.zeros(4, dtype=ember.float64)), (3, 4)),
    ("soft_margin", lambda a: F.soft_margin_loss(a, ember.tensor([1.0, -1.0, 1.0, 1.0],
                                                                 dtype=ember.float64)), (3, 4)),
    ("bce", lambda a: F.binary_cross_entropy(a.sigmoid(), ember.full((4,), 0.25,
                                                                     dtype=ember.float64)),
     (3, 4)),
    ("bce_logits", lambda a: F.binary_cross_entropy_with_logits(
        a, ember.full((2, 4), 0.25, dtype=ember.float64),
        pos_weight=ember.tensor([2.0, 1.0, 1.0, 3.0], dtype=ember.float64)), (3, 2, 4)),
]


@pytest.mark.parametrize("name,f,shape", CASES, ids=[c[0] for c in CASES])
def test_rule_matches_loop(name, f, shape):
    ember.manual_seed(0)
    _check(f, _randn(*shape))


def test_in_dims_and_out_dims():
    x, y = _randn(4, 3), _randn(4)
    got = vmap(lambda a, b: a * b, in_dims=(1, None), out_dims=1)(x, y)
    assert ember.allclose(got, x * y.unsqueeze(1))
    out = vmap(lambda a: (a.sum(), ember.ones(2)), out_dims=(0, None))(x)
    assert ember.allclose(out[0], x.sum(1)) and out[1].shape == (2,)


def test_pytree_inputs_and_outputs():
    x = _randn(3, 2)
    got = vmap(lambda d: {"s": d["a"] + d["b"][0]})({"a": x, "b": [x * 2]})
    assert ember.allclose(got["s"], 3 * x)


def test_unbatched_output_is_expanded():
    got = vmap(lambda a: ember.ones(2))(_randn(3, 4))
    assert got.shape == (3, 2)


def test_nested_vmap_is_an_outer_product():
    x, y = _randn(3), _randn(4)
    got = vmap(vmap(lambda a, b: a * b, in_dims=(None, 0)), in_dims=(0, None))(x, y)
    assert ember.allclose(got, x.unsqueeze(1) * y)


def test_chunk_size_gives_the_same_result():
    x = _randn(7, 3)
    assert ember.allclose(vmap(lambda a: a.exp().sum(), chunk_size=3)(x), x.exp().sum(1))


def test_loop_fallback_warns_and_is_right():
    x = _randn(3, 4)
    with pytest.warns(UserWarning, match="batching rule for aten::histc"):
        got = vmap(lambda a: ember.histc(a, bins=3, min=-1, max=1))(x)
    assert ember.allclose(got, _loop(lambda a: ember.histc(a, bins=3, min=-1, max=1), x))


def test_inplace_on_batched_and_unbatched():
    x = _randn(3, 4)

    def f(a):
        b = a.clone()
        b.mul_(2)
        b[0] = 0.0
        return b
    want = x * 2
    want[:, 0] = 0.0
    assert ember.allclose(vmap(f)(x), want)
    with pytest.raises(RuntimeError, match=r"output with shape \[4\] doesn't match the broadcast "
                                           r"shape \[3, 4\]"):
        vmap(lambda a, b: a.add_(b), in_dims=(None, 0))(ember.ones(4, dtype=ember.float64), x)


@pytest.mark.parametrize("f", [lambda a: a.sum().item(), lambda a: float(a.sum())])
def test_item_raises(f):
    with pytest.raises(RuntimeError, match=r"calling \.item\(\) on a Tensor"):
        vmap(f)(_randn(3, 4))


def test_data_dependent_control_flow_raises():
    with pytest.raises(RuntimeError, match="data-dependent control flow"):
        vmap(lambda a: a if a.sum() > 0 else -a)(_randn(3, 4))


def test_argument_errors():
    x = _randn(3, 4)
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        vmap(lambda a, b: a + b)(x, _randn(4, 4))
    with pytest.raises(ValueError, match="at least one Tensor"):
        vmap(lambda a: a, in_dims=(None,))(x)
    with pytest.raises(ValueError, match="expected in_dim to satisfy -2 <= in_dim < 2"):
        vmap(lambda a: a, in_dims=2)(x)
    with pytest.raises(ValueError, match="in_dims is not compatible"):
        vmap(lambda a: a, in_dims=(0, 0))(x)
    with pytest.raises(ValueError, match="must only return Tensors"):
        vmap(lambda a: 3)(x)
    with pytest.raises(ValueError, match="can not return a BatchedTensor"):
        vmap(lambda a: a, out_dims=None)(x)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        vmap(lambda a: a, randomness="foo")
    with pytest.raises(ValueError, match="chunk_size should be None or greater than 0"):
        vmap(lambda a: a, chunk_size=0)


def test_randomness_modes():
    x = ember.ones(4, 1000)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda a: F.dropout(a, 0.5))(x)
    same = vmap(lambda a: F.dropout(a, 0.5), randomness="same")(x)
    assert ember.equal(same[0], same[1])
    different = vmap(lambda a: F.dropout(a, 0.5), randomness="different")(x)
    assert not ember.equal(different[0], different[1])
    assert 0.4 < (different == 0).double().mean().item() < 0.6


def test_batched_index_into_unbatched_tensor():
    table = _randn(5, 2)
    idx = ember.tensor([[0, 1], [2, 3], [4, 4]])
    got = vmap(lambda i: table[i])(idx)
    assert got.shape == (3, 2, 2)
    assert ember.equal(got[1], table[ember.tensor([2, 3])])
    got = vmap(lambda i: table.t()[1:, i[0]])(idx)
    assert got.tolist() == table.t()[1:, ember.tensor([0, 2, 4])].t().tolist()
    got = vmap(lambda i: table.index_select(0, i))(idx)
    assert ember.allclose(got[1], table[ember.tensor([2, 3])])


MORE = [
    ("roll", lambda a: a.roll(1, 0), (3, 4, 5)),
    ("diff", lambda a: ember.diff(a, dim=1, prepend=ember.zeros(4, 1, dtype=ember.float64)),
     (3, 4, 5)),
    ("msort", lambda a: ember.msort(a), (3, 4, 5)),
    ("vecdot", lambda a: ember.linalg.vecdot(a, a, dim=0), (3, 4, 5)),
    ("prelu", lambda a: F.prelu(a, ember.full((4,), 0.25, dtype=ember.float64)), (3, 2, 4, 5)),
]


@pytest.mark.parametrize("name,f,shape", MORE, ids=[c[0] for c in MORE])
def test_more_rules_match_loop(name, f, shape):
    ember.manual_seed(0)
    _check(f, _randn(*shape))


def test_logically_0dim_values_promote_weakly():
    x = _randn(4)                               # each element is a float64 0-dim tensor
    assert vmap(lambda a: a * ember.ones(3))(x).dtype is ember.float32
    assert vmap(lambda a: a + 1)(x).dtype is ember.float64
    assert vmap(lambda a: a * ember.ones(3, dtype=ember.int64))(x).dtype is ember.float64


def test_roll_and_trace_have_batching_rules():
    import warnings
    x = ember.randn(3, 4, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # the per-sample fallback warns
        flat = ember.func.vmap(lambda t: t.roll(2))(x)
        along = ember.func.vmap(lambda t: t.roll((1, 2), (0, 1)))(x)
        traces = ember.func.vmap(ember.trace)(x[:, :4, :4])
    for i in range(3):
        assert ember.equal(flat[i], x[i].roll(2))
        assert ember.equal(along[i], x[i].roll((1, 2), (0, 1)))
        assert ember.allclose(traces[i], x[i, :4, :4].trace())


def test_no_inputs_raises_torch_message():
    with pytest.raises(ValueError, match=r"vmap\(<lambda>\)\(<inputs>\): got no inputs"):
        vmap(lambda a=None: a)()
    with pytest.raises(ValueError, match="got no inputs"):
        vmap(lambda a: a)(a=ember.ones(2))


def _rows_equal(out):
    return bool((out[0] == out[1]).all())


@pytest.mark.parametrize("sample", [
    lambda a: a.clone().normal_(), lambda a: a.clone().uniform_(),
    lambda a: a.clone().bernoulli_(0.5), lambda a: a.clone().exponential_(),
    lambda a: a.clone().random_(0, 5)])
def test_inplace_sampling_on_batched_tensor(sample):
    z = ember.zeros(3, 40)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(sample)(z)
    same = vmap(sample, randomness="same")(z)
    assert same.shape == (3, 40) and _rows_equal(same) and _rows_equal(same[1:])
    different = vmap(sample, randomness="different")(z)
    assert different.shape == (3, 40) and not _rows_equal(different)


@pytest.mark.parametrize("sample", [
    lambda a: ember.normal(a, 1.0), lambda a: ember.normal(0.0, a + 1),
    lambda a: ember.bernoulli(a), lambda a: ember.poisson(a + 1),
    lambda a: ember.binomial(a * 0 + 10, a)])
def test_sampling_with_batched_parameters(sample):
    p = ember.full((3, 40), 0.5)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(sample)(p)
    with pytest.raises(RuntimeError, match="same randomness with a batched tensor input"):
        vmap(sample, randomness="same")(p)
    different = vmap(sample, randomness="different")(p)
    assert different.shape == (3, 40) and not _rows_equal(different)


def test_multinomial_with_batched_weights():
    w = ember.ones(3, 5)
    out = vmap(lambda a: ember.multinomial(a, 5), randomness="different")(w)
    assert out.shape == (3, 5) and out.dtype == ember.int64
    assert sorted(out[0].tolist()) == [0, 1, 2, 3, 4]
    with pytest.raises(RuntimeError, match="same randomness with a batched tensor input"):
        vmap(lambda a: ember.zeros(5).bernoulli_(a), randomness="same")(w * 0.5)


def test_batch_norm_training_with_shared_running_stats_raises():
    x = ember.arange(24.0).reshape(3, 2, 4).sin()
    rm, rv = ember.zeros(4), ember.ones(4)
    with pytest.raises(RuntimeError, match="Batch norm got a batched tensor as input while the "
                                           "running_mean or running_var"):
        vmap(lambda a: F.batch_norm(a, rm, rv, training=True))(x)
    assert rm.tolist() == [0.0] * 4 and rv.tolist() == [1.0] * 4


def test_batch_norm_eval_and_batched_affine_rules():
    x = ember.tensor([[[1.0, 2.0], [3.0, 6.0]], [[0.0, 0.0], [2.0, 4.0]]])
    rm, rv = ember.tensor([1.0, 2.0]), ember.tensor([4.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = vmap(lambda a: F.batch_norm(a, rm, rv, training=False, eps=0.0))(x)
    assert out.tolist() == [[[0.0, 0.0], [1.0, 4.0]], [[-0.5, -2.0], [0.5, 2.0]]]
    w, b = ember.tensor([[1.0, 2.0], [3.0, 4.0]]), ember.tensor([[0.0, 1.0], [1.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = vmap(lambda ww, bb: F.batch_norm(x[0], rm, rv, ww, bb, training=True, eps=1e-30))(
            w, b)
    # x[0] has per-channel batch values (1, 3) and (2, 6): normalized to (-1, 1)
    assert out.tolist() == [[[-1.0, -1.0], [1.0, 3.0]], [[-2.0, -4.0], [4.0, 4.0]]]
    assert ember.allclose(rm, ember.tensor([1.1, 2.2]))     # updated once, not per element
    assert ember.allclose(rv, ember.tensor([3.8, 1.7]))


def test_batched_zero_dim_index_is_an_advanced_index():
    x = ember.arange(12.0).reshape(3, 4)
    out = vmap(lambda a, i: a[i])(x, ember.tensor([0, 1, 3]))
    assert out.tolist() == [0.0, 5.0, 11.0]


def test_copy_of_batched_source_into_unbatched_tensor_raises():
    with pytest.raises(RuntimeError, match="vmap: inplace arithmetic\\(self, \\*extra_args\\) "
                                           "is not possible"):
        vmap(lambda a: ember.zeros(4).copy_(a))(ember.ones(3, 4))


@pytest.mark.parametrize("f", [
    lambda a: a.nonzero(), lambda a: ember.unique(a), lambda a: ember.where(a)])
def test_dynamic_shape_ops_raise_even_when_shapes_agree(f):
    x = ember.arange(1.0, 13.0).reshape(3, 4)          # every row has 4 distinct nonzeros
    with pytest.raises(RuntimeError, match="can output dynamic shape"):
        vmap(f)(x)


def test_argwhere_stacks_equal_shapes_and_raises_otherwise():
    x = ember.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 4.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # the loop fallback's performance warning
        assert vmap(ember.argwhere)(x).tolist() == [[[0], [2]], [[1], [2]]]
    with pytest.raises(RuntimeError, match="can output dynamic shape"):
        vmap(ember.argwhere)(ember.tensor([[1.0, 0.0], [1.0, 1.0]]))


def test_masked_select_with_one_mask_for_the_batch():
    x = ember.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 4.0]])
    mask = ember.tensor([True, False, True])
    assert vmap(ember.masked_select, in_dims=(0, None))(x, mask).tolist() == [[1.0, 2.0],
                                                                              [0.0, 4.0]]
    assert vmap(lambda a: a.masked_select(mask))(x).tolist() == [[1.0, 2.0], [0.0, 4.0]]
    got = vmap(ember.masked_select, in_dims=(0, None))(ember.tensor([5.0, 6.0]), mask)
    assert got.tolist() == [[5.0, 5.0], [6.0, 6.0]]       # a 0-dim self broadcasts to the mask
    with pytest.raises(RuntimeError, match="Attempted to vmap over `mask` in "
                                           "torch.masked_select"):
        vmap(lambda a: a.masked_select(a > 0))(x)


def test_boolean_mask_index_raises():
    x = ember.arange(1.0, 13.0).reshape(3, 4)
    with pytest.raises(RuntimeError, match="indexing with a boolean mask"):
        vmap(lambda a: a[a > 0])(x)


def test_full_reductions_with_empty_dim_default_reduce_each_element():
    x = ember.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    assert vmap(ember.amax)(x).tolist() == [5.0, 7.0]
    assert vmap(ember.amin)(x).tolist() == [1.0, 0.0]
    assert vmap(lambda a: a.amax(()))(x.t()).tolist() == [7.0, 5.0, 3.0]


@pytest.mark.parametrize("name,want", [
    ("silu", [0.7311, 1.7616]), ("mish", [0.8651, 1.944]), ("hardswish", [0.6667, 1.6667]),
    ("hardsigmoid", [0.6667, 0.8333]), ("relu6", [1.0, 2.0]), ("selu", [1.0507, 2.1014])])
def test_inplace_activations_under_vmap(name, want):
    f = getattr(F, name)
    got = vmap(lambda a: f(a.clone(), inplace=True))(ember.tensor([[1.0, 2.0], [1.0, 2.0]]))
    assert [round(v, 4) for v in got[1].tolist()] == want


def test_linear_with_a_batched_one_dim_weight():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    w = ember.tensor([[1.0, 0.0], [0.5, 0.5]])
    assert vmap(F.linear)(x, w).tolist() == [1.0, 3.5]
    assert vmap(F.linear, in_dims=(None, 0))(x[0], w).tolist() == [1.0, 1.5]
    bias = ember.tensor([10.0, 20.0])
    assert vmap(F.linear)(x, w, bias).tolist() == [11.0, 23.5]
    xs = ember.tensor([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]])
    got = vmap(F.linear, in_dims=(0, None, 0))(xs, ember.tensor([1.0, 1.0]), bias)
    assert got.tolist() == [[13.0, 17.0], [31.0, 35.0]]


def test_scatter_into_a_view_of_an_unbatched_input():
    src = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    got = vmap(lambda s: ember.slice_scatter(ember.zeros(4), s, 0, 1, 3))(src)
    assert got.tolist() == [[0.0, 1.0, 2.0, 0.0], [0.0, 3.0, 4.0, 0.0]]
    got = vmap(lambda s: ember.select_scatter(ember.zeros(3, 2), s, 0, 2))(src)
    assert got.tolist() == [[[0.0, 0.0], [0.0, 0.0], [1.0, 2.0]],
                            [[0.0, 0.0], [0.0, 0.0], [3.0, 4.0]]]


def test_one_hot_needs_num_classes_under_vmap():
    idx = ember.tensor([[0, 1], [2, 1]])
    with pytest.raises(RuntimeError, match="please provide an explicit positive num_classes"):
        vmap(F.one_hot)(idx)
    assert vmap(lambda i: F.one_hot(i, 3))(idx)[1].tolist() == [[0, 0, 1], [0, 1, 0]]


def test_dropout_of_everything_draws_nothing():
    x = ember.ones(2, 3)
    assert vmap(lambda a: F.dropout(a, 1.0))(x).tolist() == [[0.0] * 3] * 2
    state = ember.get_rng_state()
    F.dropout(x, 1.0)
    assert ember.equal(state, ember.get_rng_state())


_MSG = ("vmap: {}(self, *extra_args) is not possible because there exists a Tensor `other` in "
        "extra_args that has more elements than `self`. This happened due to `other` being "
        "vmapped over but `self` not being vmapped over {}.")


@pytest.mark.parametrize("f,op,where", [
    (lambda b: ember.ones(3).sub_(b), "inplace arithmetic", "in a vmap"),
    (lambda b: ember.ones(3).mul_(b), "inplace arithmetic", "in a vmap"),
    (lambda b: ember.ones(3).__setitem__(slice(0, 2), b[:2]), "inplace arithmetic", "in a vmap"),
    (lambda b: ember.ones(3).pow_(b), "aten::pow_", "at level 1"),
    (lambda b: ember.ones(3).lerp_(b, 0.5), "aten::lerp_", "at level 1"),
    (lambda b: ember.ones(3).index_add_(0, ember.tensor([0, 1]), b[:2]), "index_add_",
     "in a vmap"),
    (lambda b: ember.ones(3).__setitem__(ember.tensor([0, 1]), b[:2]), "index_put_",
     "in a vmap"),
    (lambda b: ember.ones(3).fill_(b.sum()), "fill_", "in a vmap"),
    (lambda b: vmap(lambda a: a.clone().fill_(b.sum()))(ember.ones(2, 3)), "fill_",
     "in a vmap"),
    (lambda b: vmap(lambda c: ember.ones(3).pow_(c))(b.expand(2, 3)), "aten::pow_",
     "at level 2"),
])
def test_inplace_into_unbatched_self_raises_pytorchs_message(f, op, where):
    with pytest.raises(RuntimeError) as info:
        vmap(f)(ember.ones(2, 3))
    assert str(info.value).startswith(_MSG.format(op, where))


def test_inplace_add_into_unbatched_self_reports_the_shapes():
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the "
                                           r"broadcast shape \[2, 3\]"):
        vmap(lambda b: ember.ones(3).add_(b))(ember.ones(2, 3))


def test_is_nonzero_is_data_dependent_control_flow():
    with pytest.raises(RuntimeError, match="data-dependent control flow"):
        vmap(lambda a: a.sum().is_nonzero())(ember.ones(2, 3))


def test_pinv_with_a_tensor_tolerance_matches_the_loop():
    a = ember.tensor([[[2.0, 0.0], [0.0, 1e-3]], [[1.0, 1.0], [0.0, 1.0]]])
    rtol = ember.tensor([1e-2, 1e-6])
    got = vmap(lambda m, r: ember.linalg.pinv(m, rtol=r))(a, rtol)
    want = ember.stack([ember.linalg.pinv(a[i], rtol=rtol[i]) for i in range(2)])
    assert ember.allclose(got, want)
    assert got[0].tolist() == [[0.5, 0.0], [0.0, 0.0]]


def test_norm_of_all_dims_of_a_3d_element():
    x = ember.arange(24.0).reshape(2, 3, 4) - 10
    got = vmap(ember.norm)(x.reshape(2, 3, 4, 1).expand(2, 3, 4, 2) * ember.tensor([1.0, -1.0]))
    want = [round(ember.norm(x[i]).item() * 2 ** 0.5, 3) for i in range(2)]
    assert [round(v, 3) for v in got.tolist()] == want


def test_class_index_losses_take_a_batched_target():
    # their target range check read the batched target's values (vmap refused it)
    z = ember.tensor([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]])
    classes = ember.tensor([2, 1])
    labels = ember.tensor([[2, 0, -1], [1, -1, 0]])
    got = vmap(lambda a, y: F.multi_margin_loss(a, y, p=2))(z, classes)
    looped = ember.stack([F.multi_margin_loss(z[i], classes[i], p=2) for i in range(2)])
    assert ember.allclose(got, looped) and got.tolist()[1] > 0
    got = vmap(F.multilabel_margin_loss)(z, labels)
    looped = ember.stack([F.multilabel_margin_loss(z[i], labels[i]) for i in range(2)])
    assert ember.allclose(got, looped) and got.tolist()[1] > 0
    with pytest.raises(RuntimeError, match="target out of range"):
        vmap(F.multi_margin_loss)(z, ember.tensor([2, 3]))
