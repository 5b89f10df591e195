"""Result and gradient strides against PyTorch's: unreduced pointwise losses on channels-last,
permuted and sliced operands in either position (binary_cross_entropy and soft_margin_loss
follow the input, binary_cross_entropy_with_logits the target, the others TensorIterator),
softmax/log_softmax backward and reductions (row-major whatever the operands' layout)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

SHAPE = (2, 3, 4, 5)


def _made(lib, layout, seed, grad=True):
    """The same values in (0.1, 0.9) in either library, laid out as ``layout``: rm, cl
    (channels-last), perm (dims reversed in memory), slice (every other channel of a
    channels-last tensor: not dense), one (a size-1 channel dim, channels-last), exp (one
    channel expanded: a zero stride)."""
    shape = (2, 1, 4, 5) if layout == "one" else SHAPE
    a = np.random.default_rng(seed).random(shape).astype(np.float32) * 0.8 + 0.1
    if layout in ("cl", "one"):
        t = lib.from_numpy(a).contiguous(memory_format=lib.channels_last)
    elif layout == "perm":
        t = lib.from_numpy(np.ascontiguousarray(a.transpose(3, 2, 1, 0))).permute(3, 2, 1, 0)
    elif layout == "exp":
        t = lib.from_numpy(a[:, :1]).expand(*SHAPE)
    elif layout == "slice":
        wide = np.ascontiguousarray(np.repeat(a, 2, axis=1).transpose(0, 2, 3, 1))
        t = lib.from_numpy(wide).permute(0, 3, 1, 2)[:, ::2]
    else:
        t = lib.from_numpy(a)
    return t.detach().requires_grad_(grad)


def _losses(lib):
    F = lib.nn.functional
    ones = lib.ones(5)
    return {
        "mse": lambda x, y: F.mse_loss(x, y, reduction="none"),
        "l1": lambda x, y: F.l1_loss(x, y, reduction="none"),
        "smooth_l1": lambda x, y: F.smooth_l1_loss(x, y, reduction="none", beta=0.5),
        "huber": lambda x, y: F.huber_loss(x, y, reduction="none", delta=0.3),
        "bce": lambda x, y: F.binary_cross_entropy(x, y, reduction="none"),
        "bce_weight": lambda x, y: F.binary_cross_entropy(x, y, weight=ones * 2,
                                                          reduction="none"),
        "bce_logits": lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none"),
        "bce_logits_pos": lambda x, y: F.binary_cross_entropy_with_logits(
            x, y, pos_weight=ones * 3, reduction="none"),
        "bce_logits_both": lambda x, y: F.binary_cross_entropy_with_logits(
            x, y, weight=lib.ones(4, 5) * 2, pos_weight=ones * 3, reduction="none"),
        "soft_margin": lambda x, y: F.soft_margin_loss(x, y, reduction="none"),
        "kl_div": lambda x, y: F.kl_div(x, y, reduction="none"),
        "kl_div_log": lambda x, y: F.kl_div(x, y, reduction="none", log_target=True),
        "poisson": lambda x, y: F.poisson_nll_loss(x, y, reduction="none"),
        "poisson_full": lambda x, y: F.poisson_nll_loss(x, y, log_input=False, full=True,
                                                        reduction="none"),
        "gaussian": lambda x, y: F.gaussian_nll_loss(x, y, lib.ones(2, 1, 4, 5),
                                                     reduction="none"),
    }


LAYOUTS = [("cl", "rm"), ("rm", "cl"), ("cl", "cl"), ("perm", "rm"), ("rm", "perm"),
           ("slice", "rm"), ("rm", "slice"), ("one", "one"), ("perm", "cl"), ("exp", "rm"),
           ("rm", "exp")]


@pytest.mark.parametrize("layouts", LAYOUTS, ids="-".join)
@pytest.mark.parametrize("name", list(_losses(torch)))
def test_unreduced_loss_strides(name, layouts):
    if "one" in layouts and name == "gaussian":
        pytest.skip("the variance's shape is for three channels")
    results = []
    for lib in (torch, ember):
        target_grad = name != "soft_margin"        # (PyTorch's refuses a target's gradient)
        x, y = _made(lib, layouts[0], 0), _made(lib, layouts[1], 1, target_grad)
        out = _losses(lib)[name](x, y)
        out.backward(lib.ones_like(out))
        results.append((out, x.grad, y.grad))
    (t_out, t_gx, t_gy), (e_out, e_gx, e_gy) = results
    assert e_out.stride() == t_out.stride()
    assert e_gx.stride() == t_gx.stride()
    assert (e_gy is None) == (t_gy is None)
    if t_gy is not None:
        assert e_gy.stride() == t_gy.stride()
    np.testing.assert_allclose(e_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
@pytest.mark.parametrize("dim", [1, 3])
@pytest.mark.parametrize("layouts", [("perm", "rm"), ("cl", "cl"), ("rm", "perm"),
                                     ("rm", "cl"), ("slice", "perm")], ids="-".join)
def test_softmax_backward_strides(layouts, dim, name, create_graph):
    results = []
    for lib in (torch, ember):
        x = _made(lib, layouts[0], 0)
        out = getattr(lib.nn.functional, name)(x, dim=dim)
        g = _made(lib, layouts[1], 1, grad=False)
        gx, = lib.autograd.grad(out, x, g, create_graph=create_graph)
        results.append(gx)
    assert results[1].stride() == results[0].stride()
    np.testing.assert_allclose(results[1].detach().numpy(), results[0].detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def _reduced_inputs(lib):
    """Non-row-major inputs whose reductions NumPy would lay out in their dim order."""
    base = lib.arange(120.).reshape(2, 3, 4, 5)
    return {"perm": base.permute(3, 1, 0, 2),
            "cl": base.contiguous(memory_format=lib.channels_last),
            "slice": base.transpose(0, 2)[:1],
            "unsqueezed": base.permute(2, 0, 3, 1).unsqueeze(1),
            "expanded": base[:, :1].expand(2, 3, 4, 5),
            "flipped": base.flip(0)[..., ::2],
            "empty": lib.zeros(0, 3, 4).transpose(0, 2)}


_REDUCTIONS = {
    "sum": lambda lib, t, d, k: t.sum(d, keepdim=k),
    "mean": lambda lib, t, d, k: t.mean(d, keepdim=k),
    "nansum": lambda lib, t, d, k: t.nansum(d, keepdim=k),
    "nanmean": lambda lib, t, d, k: t.nanmean(d, keepdim=k),
    "prod": lambda lib, t, d, k: t.prod(d[0], keepdim=k),
    "amax": lambda lib, t, d, k: t.amax(d, keepdim=k),
    "amin": lambda lib, t, d, k: t.amin(d, keepdim=k),
    "aminmax": lambda lib, t, d, k: lib.aminmax(t, dim=d[0], keepdim=k),
    "logsumexp": lambda lib, t, d, k: t.logsumexp(d, keepdim=k),
    "var": lambda lib, t, d, k: t.var(d, keepdim=k),
    "std_mean": lambda lib, t, d, k: lib.std_mean(t, d, keepdim=k),
    "median": lambda lib, t, d, k: t.median(d[0], keepdim=k),
    "norm": lambda lib, t, d, k: t.norm(dim=d, keepdim=k),
    "all": lambda lib, t, d, k: (t > 30).all(d[0], keepdim=k),
    "count_nonzero": lambda lib, t, d, k: lib.count_nonzero(t, d),
}


@pytest.mark.parametrize("keepdim", [True, False])
@pytest.mark.parametrize("name", list(_REDUCTIONS))
@pytest.mark.parametrize("layout", list(_reduced_inputs(torch)))
def test_reduction_strides_row_major(layout, name, keepdim):
    # PyTorch allocates a reduction's result row-major, whatever the input's layout
    if layout == "expanded" and name == "median":
        pytest.skip("PyTorch's median along a zero stride reads past the slice: [0, 0, 0] "
                    "gives 1")
    checked = 0
    for dims in [(0,), (1,), (-1,), (0, -1)]:
        results = []
        for lib in (torch, ember):
            t = _reduced_inputs(lib)[layout]
            try:
                r = _REDUCTIONS[name](lib, t, dims, keepdim)
            except (RuntimeError, IndexError) as e:
                r = type(e)
            results.append(r if isinstance(r, tuple) or isinstance(r, type) else (r,))
        if isinstance(results[0], type):
            continue
        checked += 1
        for i, (theirs, ours) in enumerate(zip(*results)):
            assert ours.stride() == theirs.stride(), (dims, ours.shape)
            if name == "median" and i:
                continue            # (which index of tied values: PyTorch's is unspecified)
            np.testing.assert_allclose(ours.double().numpy(), theirs.double().numpy(),
                                       rtol=1e-6)
    assert checked
