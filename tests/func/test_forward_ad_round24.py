"""Forward-AD refusals of round 24, without PyTorch (tests/parity/test_parity_forward_ad_round24
.py pins them against it): vmap's attention rule refuses by the logical rank, double backward
of PyTorch kernels without a second derivative refuses under vmap too, attn_mask under a
forward transform, refusals under no_grad, the composites grid_sample, embedding_bag and
segment_reduce, and ``_foreach_lerp_`` with a tensor weight requiring grad."""

import numpy as np
import pytest

import ember
from ember.func import grad, jacfwd, jacrev, jvp, vmap

F = ember.nn.functional
_NOT_YET = "that does not support it because it has not been implemented yet."


def _refused(kernel):
    return pytest.raises(NotImplementedError, match=f"^Trying to use forward AD with {kernel} "
                                                    f"{_NOT_YET}")


def _randn(rng, *shape):
    return ember.tensor(rng.standard_normal(shape))


def _sdpa(q, k, v, mask=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _softmax_attention(q, k, v, mask=None):
    """The reference: softmax(q k^T / sqrt(d) + mask) v, in NumPy."""
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]) + (0 if mask is None else mask)
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


def test_vmap_of_jvp_refuses_for_4d_logical_attention_only():
    rng = np.random.default_rng(0)
    q, k, v = (_randn(rng, 3, 2, 2, n, 8) for n in (4, 5, 5))

    def tangent(a, b, c):
        return jvp(_sdpa, (a, b, c), (a, b, c))[1]
    with _refused("_scaled_dot_product_flash_attention_for_cpu"):
        vmap(tangent)(q, k, v)
    # 3-D logical tensors: PyTorch's math kernel, whose ops have forward derivatives
    out = vmap(tangent)(q[0], k[0], v[0])
    h = 1e-6
    ref = (_softmax_attention(*(t[0].numpy() * (1 + h) for t in (q, k, v)))
           - _softmax_attention(*(t[0].numpy() * (1 - h) for t in (q, k, v)))) / (2 * h)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-7)


def test_vmap_of_jacfwd_of_3d_attention_computes():
    rng = np.random.default_rng(1)
    q, k, v = (_randn(rng, 2, 2, n, 4) for n in (3, 4, 4))
    assert vmap(jacfwd(_sdpa))(q, k, v).shape == (2, 2, 3, 4, 2, 3, 4)
    # linear in v: d out[h, i, d] / d v[h', j, d'] = [h == h'] weights[h, i, j] [d == d']
    jac_v = vmap(jacfwd(_sdpa, argnums=2))(q, k, v).numpy()
    eye4 = np.broadcast_to(np.eye(4), (2, 2, 4, 4))
    weights = _softmax_attention(q.numpy(), k.numpy(), eye4)
    expected = np.einsum("bhij,hg,de->bhidgje", weights, np.eye(2), np.eye(4))
    np.testing.assert_allclose(jac_v, expected, rtol=1e-10, atol=1e-14)


def test_double_backward_of_flash_attention_refuses_under_vmap():
    rng = np.random.default_rng(2)
    q, k, v = (_randn(rng, 1, 1, 2, 3) for _ in range(3))

    def f(x):
        return _sdpa(x, k, v).sum()
    message = ("^derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward is "
               "not implemented$")
    with pytest.raises(RuntimeError, match=message):
        jacrev(jacrev(lambda x: _sdpa(x, k, v)))(q)
    with pytest.raises(RuntimeError, match=message):
        vmap(jacrev(jacrev(f)))(q.unsqueeze(0).expand(2, 1, 1, 2, 3))


def test_jacrev_of_jacrev_of_cdist_refuses_and_its_first_order_holds():
    x = ember.tensor(np.arange(12.0).reshape(3, 4) / 5, requires_grad=True)
    y = ember.ones(2, 4, dtype=ember.float64)
    with pytest.raises(NotImplementedError,
                       match="^the derivative for '_cdist_backward' is not implemented.$"):
        jacrev(jacrev(lambda a: ember.cdist(a, y, p=1.0)))(x.detach())
    # a jacobian with a graph (x requires grad): d|a - y|_1 / da = sign(a - y)
    jac = jacrev(lambda a: ember.cdist(a, y, p=1.0))(x)
    assert jac.requires_grad
    expected = np.zeros((3, 2, 3, 4))
    for i in range(3):
        expected[i, :, i] = np.sign(x.detach().numpy()[i] - 1)
    np.testing.assert_array_equal(jac.detach().numpy(), expected)


def test_jvp_with_respect_to_attn_mask_refuses_as_the_flash_kernel():
    rng = np.random.default_rng(3)
    q, k, v = _randn(rng, 2, 2, 3, 4), _randn(rng, 2, 2, 5, 4), _randn(rng, 2, 2, 5, 4)
    m = _randn(rng, 3, 5)
    with _refused("_scaled_dot_product_flash_attention_for_cpu"):
        jvp(lambda m2: _sdpa(q, k, v, m2), (m,), (m,))
    mask = m.detach().requires_grad_()      # (torch refuses requires_grad_() inside jvp)
    with _refused("_scaled_dot_product_flash_attention_for_cpu"):
        jvp(lambda q2: _sdpa(q2, k, v, mask), (q,), (q,))
    # inside grad (the innermost transform) the mask requires grad: the math kernel
    out = jvp(grad(lambda m2: _sdpa(q, k, v, m2).sum()), (m,), (m,))[1]
    assert out.shape == (3, 5) and bool(ember.isfinite(out).all())


def test_refusals_under_no_grad_inside_jvp():
    rng = np.random.default_rng(4)
    x, y = _randn(rng, 3, 4), _randn(rng, 5, 4)

    def cdist_without_grad(a):
        with ember.no_grad():
            return ember.cdist(a, y)
    with _refused("_cdist_forward"):
        jvp(cdist_without_grad, (x,), (x,))

    def cdist_in_inference(a):
        with ember.inference_mode():
            return ember.cdist(a, y, p=1.0)
    out = jvp(cdist_in_inference, (x,), (x,))[0]
    expected = np.abs(x.numpy()[:, None] - y.numpy()[None]).sum(-1)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_refuses_forward_ad_and_keeps_its_values(mode):
    rng = np.random.default_rng(5)
    x = _randn(rng, 1, 1, 3, 3)
    grid = ember.zeros(1, 1, 1, 2, dtype=ember.float64)      # the centre pixel
    with _refused("grid_sampler_2d"):
        jvp(lambda a: F.grid_sample(a, grid, mode=mode, align_corners=True), (x,), (x,))
    fw = ember.autograd.forward_ad
    with fw.dual_level(), _refused("grid_sampler_2d"):
        F.grid_sample(x, fw.make_dual(grid, grid), mode=mode, align_corners=True)
    out = F.grid_sample(x, grid, mode=mode, align_corners=True)
    assert out.item() == pytest.approx(x[0, 0, 1, 1].item(), rel=1e-12)


def test_embedding_bag_refuses_forward_ad_naming_the_kernel_by_weight():
    rng = np.random.default_rng(6)
    w, psw = _randn(rng, 10, 3), ember.tensor(rng.uniform(0, 1, 8))
    idx, off = ember.tensor([1, 2, 4, 5, 4, 3, 2, 9]), ember.tensor([0, 4])
    with _refused("_embedding_bag"):
        jvp(lambda a: F.embedding_bag(idx, a, off, mode="sum"), (w,), (w,))
    with _refused("_embedding_bag_forward_only"):
        jvp(lambda p: F.embedding_bag(idx, w, off, mode="sum", per_sample_weights=p),
            (psw,), (psw,))
    out = F.embedding_bag(idx, w, off, mode="sum", per_sample_weights=psw)
    rows = w.numpy()[idx.numpy()] * psw.numpy()[:, None]
    np.testing.assert_allclose(out.numpy(), [rows[:4].sum(0), rows[4:].sum(0)], rtol=1e-12)


def test_segment_reduce_refuses_forward_ad_and_double_backward():
    data = ember.tensor(np.arange(1.0, 7.0), requires_grad=True)
    lengths = ember.tensor([2, 0, 3, 1])
    with _refused("segment_reduce"):
        jvp(lambda d: ember.segment_reduce(d, "sum", lengths=lengths), (data,), (data,))
    out = ember.segment_reduce(data, "prod", lengths=lengths)
    assert type(out.grad_fn).__name__ == "SegmentReduceBackward0"
    g, = ember.autograd.grad(out.pow(2).sum(), data, create_graph=True)
    # d/dx (prod)^2 = 2 prod^2 / x within each segment
    x = data.detach().numpy()
    prods = np.array([2.0, 2.0, 60.0, 60.0, 60.0, 6.0])
    np.testing.assert_allclose(g.detach().numpy(), 2 * prods ** 2 / x, rtol=1e-12)
    with pytest.raises(RuntimeError, match="^derivative for aten::_segment_reduce_backward is "
                                           "not implemented$"):
        ember.autograd.grad(g.sum(), data)


def test_segment_reduce_first_order_under_vmap():
    data = ember.tensor(np.arange(12.0).reshape(2, 6))
    lengths = ember.tensor([2, 4])
    g = vmap(grad(lambda d: ember.segment_reduce(d, "max", lengths=lengths).pow(2).sum()))(data)
    expected = np.zeros((2, 6))
    expected[:, 1] = 2 * data.numpy()[:, 1]
    expected[:, 5] = 2 * data.numpy()[:, 5]
    np.testing.assert_array_equal(g.numpy(), expected)


def test_foreach_lerp_refuses_a_weight_requiring_grad():
    xs, ys = [ember.zeros(2), ember.zeros(3)], [ember.ones(2), ember.ones(3)]
    w = ember.tensor(0.5, requires_grad=True)
    marked = "(!list of [Tensor, Tensor]!, !list of [Tensor, Tensor]!, !Tensor!)"
    with pytest.raises(TypeError) as info:
        ember._foreach_lerp_(xs, ys, w)
    lines = str(info.value).split("\n")
    assert lines[0] == ("_foreach_lerp_() received an invalid combination of arguments - got "
                        "(list, list, Tensor), but expected one of:")
    assert lines[1::2][:3] == [
        " * (tuple of Tensors self, tuple of Tensors tensors1, Number weight)",
        " * (tuple of Tensors self, tuple of Tensors tensors1, tuple of Scalars weight)",
        " * (tuple of Tensors self, tuple of Tensors tensors1, tuple of Tensors weights)"]
    assert lines[2] == ("      didn't match because some of the arguments have invalid types: "
                        + marked)
    assert xs[0].tolist() == [0.0, 0.0]         # nothing written
    with pytest.raises(TypeError, match=r"\(!tuple of \(Tensor,\)!"):
        ember._foreach_lerp((xs[0],), (ys[0],), w)
    with pytest.raises(TypeError, match=r"^_foreach_lerp_\(\) received"):
        ember._foreach_lerp_(xs, ys, ember.tensor([0.5]))
    assert ember._foreach_lerp_(xs, ys, ember.tensor(0.25))[1].tolist() == [0.25] * 3
