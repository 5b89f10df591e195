"""Forward-AD refusals of round 24, each against PyTorch: the CPU flash attention kernel's
refusal follows the logical rank under vmap; double backward through the flash kernel and
``_cdist_backward`` refuses under vmap too (jacrev of jacrev); a jvp with respect to
attn_mask, or through ``no_grad``, refuses; grid_sample, embedding_bag and segment_reduce
refuse forward AD (segment_reduce double backward too); ``_foreach_lerp_`` refuses a tensor
weight that requires grad."""

import numpy as np
import pytest

import ember
from tests.parity._compare import error, first_line, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_FLASH = ("Trying to use forward AD with _scaled_dot_product_flash_attention_for_cpu that "
          "does not support it because it has not been implemented yet.")


def _values(rng, *shape):
    return rng.standard_normal(shape)


def _tensors(lib, arrays):
    return [lib.tensor(a) for a in arrays]


def _short(result):
    """A result as compared: its error (type, first line), or its shape and values."""
    if isinstance(result, tuple):
        return result
    return tuple(result.shape), np.round(result.detach().double().numpy(), 10).tolist()


def _both(program, *arrays):
    """``program(lib, *tensors)`` run by ember and by PyTorch, outcomes compared."""
    def run(lib):
        return _short(outcome(program, lib, *_tensors(lib, arrays), message=first_line,
                              quiet=True))
    ours, theirs = run(ember), run(torch)
    assert ours == theirs
    return theirs


def _sdpa(lib, q, k, v, mask=None):
    return lib.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _jvp(lib, fn, *xs):
    return lib.func.jvp(fn, xs, xs)[1]


@pytest.mark.parametrize("logical_rank", [3, 4])
def test_vmap_of_jvp_of_attention_refuses_by_logical_rank(logical_rank):
    rng = np.random.default_rng(0)
    shapes = [(3,) + (2,) * (logical_rank - 3) + (2, n, 8) for n in (4, 5, 5)]
    arrays = [_values(rng, *s) for s in shapes]

    def program(lib, q, k, v):
        return lib.func.vmap(lambda a, b, c: _jvp(lib, lambda *x: _sdpa(lib, *x), a, b, c))(
            q, k, v)
    theirs = _both(program, *arrays)
    assert (theirs == ("NotImplementedError", _FLASH)) == (logical_rank == 4)


def test_vmap_of_jacfwd_of_3d_attention_computes():
    rng = np.random.default_rng(1)
    arrays = [_values(rng, 2, 2, n, 4) for n in (3, 4, 4)]

    def program(lib, q, k, v):
        return lib.func.vmap(lib.func.jacfwd(lambda *x: _sdpa(lib, *x)))(q, k, v)
    assert _both(program, *arrays)[0] == (2, 2, 3, 4, 2, 3, 4)


@pytest.mark.parametrize("transform", ["jacrev_jacrev", "vmap_grad_grad",
                                       "vmap_jacrev_jacrev"])
def test_double_backward_of_flash_attention_refuses_under_vmap(transform):
    rng = np.random.default_rng(2)
    q, k, v = (_values(rng, 1, 1, 2, 3) for _ in range(3))

    def program(lib, q, k, v):
        def f(x):
            return _sdpa(lib, x, k, v).sum()

        def grad_grad(x):
            return lib.func.grad(lambda y: lib.func.grad(f)(y).sum())(x)
        if transform == "jacrev_jacrev":
            return lib.func.jacrev(lib.func.jacrev(lambda x: _sdpa(lib, x, k, v)))(q)
        batch = q.unsqueeze(0).expand(2, 1, 1, 2, 3)
        inner = grad_grad if transform == "vmap_grad_grad" else \
            lib.func.jacrev(lib.func.jacrev(f))
        return lib.func.vmap(inner)(batch)
    assert _both(program, q, k, v) == (
        "RuntimeError", "derivative for aten::_scaled_dot_product_flash_attention_for_cpu_"
                        "backward is not implemented")


@pytest.mark.parametrize("p", [1.0, 2.0])
def test_jacrev_of_jacrev_of_cdist_refuses(p):
    rng = np.random.default_rng(3)

    def program(lib, x, y):
        return lib.func.jacrev(lib.func.jacrev(lambda a: lib.cdist(a, y, p=p)))(x)
    assert _both(program, _values(rng, 3, 4), _values(rng, 5, 4)) == (
        "NotImplementedError", "the derivative for '_cdist_backward' is not implemented.")


def test_jacrev_of_jacrev_of_cdist_through_mm_computes():
    rng = np.random.default_rng(4)

    def program(lib, x, y):
        return lib.func.jacrev(lib.func.jacrev(
            lambda a: lib.cdist(a, y, compute_mode="use_mm_for_euclid_dist")))(x)
    assert _both(program, _values(rng, 3, 4), _values(rng, 5, 4))[0] == (3, 5, 3, 4, 3, 4)


@pytest.mark.parametrize("case", ["mask_2d", "mask_4d", "q_and_mask", "jacfwd", "linearize",
                                  "mask_requires_grad", "closure_mask_requires_grad",
                                  "grad_of_jvp", "jvp_of_grad", "vmap_3d"])
def test_jvp_with_respect_to_attn_mask(case):
    rng = np.random.default_rng(5)
    q, k, v = _values(rng, 2, 2, 3, 4), _values(rng, 2, 2, 5, 4), _values(rng, 2, 2, 5, 4)
    mask = _values(rng, 2, 2, 3, 5) if case == "mask_4d" else _values(rng, 3, 5)

    def program(lib, q, k, v, m):
        def at(m2, q2=q):
            return _sdpa(lib, q2, k, v, m2)
        if case == "q_and_mask":
            return _jvp(lib, lambda a, b: at(b, a), q, m)
        if case == "jacfwd":
            return lib.func.jacfwd(at)(m)
        if case == "linearize":
            return lib.func.linearize(at, m)[1](m)
        if case == "mask_requires_grad":
            return _jvp(lib, at, m.requires_grad_())
        if case == "closure_mask_requires_grad":
            m.requires_grad_()
            return _jvp(lib, lambda a: at(m, a), q)
        if case == "grad_of_jvp":
            return lib.func.grad(lambda m2: lib.func.jvp(at, (m2,), (m,))[1].sum())(m)
        if case == "jvp_of_grad":
            return _jvp(lib, lib.func.grad(lambda m2: at(m2).sum()), m)
        if case == "vmap_3d":
            return lib.func.vmap(lambda q2, m2: _jvp(lib, lambda m3: at(m3, q2), m2))(
                q, m.expand(2, 3, 5))
        return _jvp(lib, at, m)
    theirs = _both(program, q, k, v, mask)
    assert (theirs == ("NotImplementedError", _FLASH)) == (case not in ("jvp_of_grad",
                                                                        "vmap_3d"))


def test_dual_attn_mask_requiring_grad_takes_the_math_kernel():
    rng = np.random.default_rng(6)
    arrays = [_values(rng, 2, 2, 3, 4), _values(rng, 2, 2, 5, 4), _values(rng, 2, 2, 5, 4),
              _values(rng, 3, 5), _values(rng, 3, 5)]

    def program(lib, q, k, v, m, t):
        fw = lib.autograd.forward_ad
        with fw.dual_level():
            dual = fw.make_dual(m.requires_grad_(), t)
            return fw.unpack_dual(_sdpa(lib, q, k, v, dual)).tangent
    ours = program(ember, *_tensors(ember, arrays))
    theirs = program(torch, *_tensors(torch, arrays))
    assert theirs.abs().max() > 0.1
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10,
                               atol=1e-14)


def _no_grad(lib, fn):
    def run(*args):
        with lib.no_grad():
            return fn(*args)
    return run


@pytest.mark.parametrize("case", ["sdpa_jvp", "cdist_jvp", "cdist_p1_jacfwd",
                                  "cdist_linearize", "multi_margin_jvp", "cdist_inference"])
def test_refusals_under_no_grad_inside_forward_transforms(case):
    rng = np.random.default_rng(7)
    arrays = [_values(rng, 2, 2, 3, 4), _values(rng, 2, 2, 5, 4), _values(rng, 2, 2, 5, 4)] \
        if case == "sdpa_jvp" else [_values(rng, 3, 4), _values(rng, 5, 4)]

    def program(lib, x, *rest):
        if case == "sdpa_jvp":
            return _jvp(lib, _no_grad(lib, lambda q: _sdpa(lib, q, *rest)), x)
        y = rest[0]
        if case == "cdist_jvp":
            return _jvp(lib, _no_grad(lib, lambda a: lib.cdist(a, y)), x)
        if case == "cdist_p1_jacfwd":
            return lib.func.jacfwd(_no_grad(lib, lambda a: lib.cdist(a, y, p=1.0)))(x)
        if case == "cdist_linearize":
            return lib.func.linearize(_no_grad(lib, lambda a: lib.cdist(a, y)), x)[1](x)
        if case == "multi_margin_jvp":
            target = lib.tensor([0, 1, 3])
            return _jvp(lib, _no_grad(lib, lambda a: lib.nn.functional.multi_margin_loss(
                a, target)), x)
        with_inference = lib.inference_mode()
        return _jvp(lib, lambda a: with_inference(lib.cdist)(a, y, p=1.0), x)
    theirs = _both(program, *arrays)
    assert (theirs[0] == "NotImplementedError") == (case != "cdist_inference")


def _grid_sample(lib, mode):
    def run(x, g):
        return lib.nn.functional.grid_sample(x, g, mode=mode, align_corners=False)
    return run


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("wrt", ["input", "grid"])
def test_grid_sample_refuses_forward_ad(mode, wrt):
    rng = np.random.default_rng(8)
    x, g = _values(rng, 2, 3, 4, 5), rng.uniform(-1, 1, (2, 3, 3, 2))

    def program(lib, x, g):
        sample = _grid_sample(lib, mode)
        if wrt == "input":
            return _jvp(lib, lambda a: sample(a, g), x)
        return _jvp(lib, lambda b: sample(x, b), g)
    assert _both(program, x, g) == (
        "NotImplementedError", "Trying to use forward AD with grid_sampler_2d that does not "
                               "support it because it has not been implemented yet.")


@pytest.mark.parametrize("how", ["dual", "hessian", "grid_sampler_3d", "first_order"])
def test_grid_sample_forward_ad_other_entries(how):
    rng = np.random.default_rng(9)
    x = _values(rng, 1, 2, 3, 4, 5) if how == "grid_sampler_3d" else _values(rng, 2, 3, 4, 5)
    g = rng.uniform(-1, 1, (1, 2, 2, 2, 3) if how == "grid_sampler_3d" else (2, 3, 3, 2))

    def program(lib, x, g):
        sample = _grid_sample(lib, "bilinear")
        if how == "dual":
            fw = lib.autograd.forward_ad
            with fw.dual_level():
                return fw.unpack_dual(sample(fw.make_dual(x, x), g)).tangent
        if how == "hessian":
            return lib.func.hessian(lambda a: sample(a, g).sum())(x)
        if how == "grid_sampler_3d":
            return _jvp(lib, lambda a: sample(a, g), x)
        x.requires_grad_()
        grad, = lib.autograd.grad(sample(x, g).pow(2).sum(), x)
        return grad
    theirs = _both(program, x, g)
    if how != "first_order":
        assert theirs[0] == "NotImplementedError"


@pytest.mark.parametrize("case", ["sum", "mean", "max", "per_sample_weights_only",
                                  "weight_and_per_sample_weights", "padding_idx", "2d_input",
                                  "native", "dual"])
def test_embedding_bag_refuses_forward_ad(case):
    rng = np.random.default_rng(10)
    w, psw = _values(rng, 10, 3), rng.uniform(0, 1, 8)

    def program(lib, w, psw):
        idx, off = lib.tensor([1, 2, 4, 5, 4, 3, 2, 9]), lib.tensor([0, 4])
        bag = lib.nn.functional.embedding_bag
        if case in ("sum", "mean", "max"):
            return _jvp(lib, lambda a: bag(idx, a, off, mode=case), w)
        if case == "per_sample_weights_only":
            return _jvp(lib, lambda p: bag(idx, w, off, mode="sum", per_sample_weights=p), psw)
        if case == "weight_and_per_sample_weights":
            return _jvp(lib, lambda a, p: bag(idx, a, off, mode="sum", per_sample_weights=p),
                        w, psw)
        if case == "padding_idx":
            return _jvp(lib, lambda a: bag(idx, a, off, padding_idx=2), w)
        if case == "2d_input":
            return _jvp(lib, lambda a: bag(idx.reshape(2, 4), a), w)
        if case == "native":
            return _jvp(lib, lambda a: lib.embedding_bag(a, idx, off)[0], w)
        fw = lib.autograd.forward_ad
        with fw.dual_level():
            return fw.unpack_dual(bag(idx, fw.make_dual(w, w), off)).tangent
    kernel = "_embedding_bag_forward_only" if case == "per_sample_weights_only" else \
        "_embedding_bag"
    assert _both(program, w, psw) == (
        "NotImplementedError", f"Trying to use forward AD with {kernel} that does not support "
                               f"it because it has not been implemented yet.")


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce_refuses_forward_ad(reduce):
    rng = np.random.default_rng(11)

    def program(lib, data):
        lengths = lib.tensor([2, 0, 3, 1])
        return _jvp(lib, lambda d: lib.segment_reduce(d, reduce, lengths=lengths), data)
    assert _both(program, _values(rng, 6, 3)) == (
        "NotImplementedError", "Trying to use forward AD with segment_reduce that does not "
                               "support it because it has not been implemented yet.")


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "prod"])
def test_segment_reduce_double_backward_refuses_and_first_order_matches(reduce):
    rng = np.random.default_rng(12)
    data = _values(rng, 6, 3)

    def run(lib):
        d = lib.tensor(data, requires_grad=True)
        out = lib.segment_reduce(d, reduce, lengths=lib.tensor([2, 0, 3, 1]))
        g, = lib.autograd.grad(out.pow(2).sum(), d, create_graph=True)
        name = g.grad_fn.name()
        return (np.round(g.detach().numpy(), 10).tolist(), name.split("::")[-1],
                error(lambda: lib.autograd.grad(g.sum(), d)))
    ours, theirs = run(ember), run(torch)
    assert theirs[2] == ("RuntimeError",
                         "derivative for aten::_segment_reduce_backward is not implemented")
    assert ours == theirs


def test_segment_reduce_gradients_under_vmap():
    rng = np.random.default_rng(13)

    def program(lib, data):
        lengths = lib.tensor([2, 0, 3, 1])
        return lib.func.vmap(lib.func.grad(
            lambda d: lib.segment_reduce(d, "max", lengths=lengths).pow(2).sum()))(data)
    assert _both(program, _values(rng, 4, 6))[0] == (4, 6)


@pytest.mark.parametrize("case", ["zero_dim_requires_grad", "out_of_place", "one_dim",
                                  "tuple_lists", "empty_lists", "zero_dim_plain", "number",
                                  "list_of_tensors"])
def test_foreach_lerp_tensor_weight(case):
    def program(lib):
        xs, ys = [lib.zeros(2), lib.zeros(3)], [lib.ones(2), lib.ones(3)]
        w = lib.tensor(0.5, requires_grad=True)
        if case == "out_of_place":
            return lib._foreach_lerp(xs, ys, w)
        if case == "one_dim":
            return lib._foreach_lerp_(xs, ys, lib.tensor([0.5]))
        if case == "tuple_lists":
            return lib._foreach_lerp_(tuple(xs[:1]), tuple(ys[:1]), w)
        if case == "empty_lists":
            return lib._foreach_lerp_([], [], w)
        if case == "zero_dim_plain":
            return lib._foreach_lerp_(xs, ys, lib.tensor(0.25))
        if case == "number":
            return lib._foreach_lerp_(xs, ys, 0.75)
        if case == "list_of_tensors":
            return lib._foreach_lerp_(xs, ys, [lib.tensor([0.5, 0.5], requires_grad=True),
                                               lib.full((3,), 0.25)])
        return lib._foreach_lerp_(xs, ys, w)

    def run(lib):
        return outcome(program, lib, describe=lambda r: [t.detach().tolist() for t in r])
    ours, theirs = run(ember), run(torch)
    assert ours == theirs
    assert (theirs[0] == "TypeError") == (case in ("zero_dim_requires_grad", "out_of_place",
                                                   "one_dim", "tuple_lists", "empty_lists"))
