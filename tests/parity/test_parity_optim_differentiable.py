"""``differentiable=True`` optimizers against PyTorch's: meta-learning programs that
backpropagate through unrolled steps to a learnable lr and to the initial parameters
(float64 values and gradients). Also the helpers a user's Optimizer subclass imports,
capturable's foreach errors and swa_utils' integer buffers. Skipped without PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _inputs(lib, i):
    return lib.tensor([[1.0, 0.5, -1.0], [0.2, -0.3, 0.8]], dtype=lib.float64) * (i + 1)


def _meta_lr(lib, name, options):
    """Three unrolled steps with a learnable lr, then an outer loss backpropagated to the lr
    and the initial weights."""
    lr = lib.tensor(0.1, dtype=lib.float64, requires_grad=True)
    w0 = lib.tensor([1.0, -2.0, 0.5], dtype=lib.float64, requires_grad=True)
    w = w0.clone()
    options = dict(options)
    steps = options.pop("steps", 3)
    opt = getattr(lib.optim, name)([w], lr=lr, differentiable=True, **options)
    for i in range(steps):
        x = _inputs(lib, i)
        loss = (lib.tanh(x @ w) ** 2).sum() + (x @ w).sum()
        w.grad, = lib.autograd.grad(loss, w, create_graph=True)
        opt.step()
    outer = (lib.sin(w) * lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)).sum()
    outer.backward()
    return [outer.item(), lr.grad.item(), *w0.grad.tolist()]


def _unrolled(lib, name, options, steps=3):
    """Unrolled inner steps of a 2x2 linear model, then the outer loss's gradient with
    respect to the initial weights (MAML-style)."""
    w0 = lib.tensor([[0.3, -0.7], [1.2, 0.4]], dtype=lib.float64, requires_grad=True)
    x = lib.tensor([[1.0, 2.0], [-1.0, 0.5], [0.3, 0.3]], dtype=lib.float64)
    w = w0.clone()
    opt = getattr(lib.optim, name)([w], differentiable=True, **options)
    for _ in range(steps):
        loss = (lib.tanh(x @ w) ** 2).sum()
        w.grad, = lib.autograd.grad(loss, w, create_graph=True)
        opt.step()
    outer = (x @ w).sum() ** 2
    outer.backward()
    return [outer.item(), *w0.grad.flatten().tolist(), *w.detach().flatten().tolist()]


META_LR = {
    "SGD": ("SGD", {}),
    "SGD-nesterov": ("SGD", {"momentum": 0.9, "nesterov": True}),
    "SGD-maximize": ("SGD", {"weight_decay": 0.1, "maximize": True}),
    "Adam": ("Adam", {}),
    "AdamW": ("AdamW", {"weight_decay": 0.1}),
    # seven steps: past the sixth RAdam's step is rectified
    "RAdam": ("RAdam", {"steps": 7}),
    "RAdam-decoupled": ("RAdam", {"steps": 7, "weight_decay": 0.1,
                                  "decoupled_weight_decay": True}),
    # one step: over several, NAdam's graph modifies a saved tensor in PyTorch too
    "NAdam": ("NAdam", {"steps": 1}),
}

UNROLLED = {
    "SGD-momentum": ("SGD", {"lr": 0.1, "momentum": 0.9}),
    "Adam": ("Adam", {"lr": 0.01}),
    "RMSprop": ("RMSprop", {"lr": 0.01}),
    "RMSprop-momentum": ("RMSprop", {"lr": 0.01, "momentum": 0.5}),
    "Adagrad": ("Adagrad", {"lr": 0.1, "lr_decay": 0.1}),
    "Adadelta": ("Adadelta", {"lr": 0.5}),
    "RAdam": ("RAdam", {"lr": 0.01}),
    "NAdam": ("NAdam", {"lr": 0.01}),
    "ASGD": ("ASGD", {"lr": 0.01, "weight_decay": 0.1}),
    "Adamax": ("Adamax", {"lr": 0.01}),      # one step: PyTorch's own fails on a second
}


@pytest.mark.parametrize("case", sorted(META_LR))
def test_learnable_lr_gradient_matches_pytorch(case):
    name, options = META_LR[case]
    # NAdam's graph step keeps float64 bias corrections where PyTorch's rounds them to float32
    np.testing.assert_allclose(_meta_lr(ember, name, options), _meta_lr(torch, name, options),
                               rtol=1e-7 if name == "NAdam" else 1e-10, atol=1e-12)


@pytest.mark.parametrize("case", sorted(UNROLLED))
def test_unrolled_steps_gradient_matches_pytorch(case):
    name, options = UNROLLED[case]
    steps = 1 if name == "Adamax" else 3
    ours, theirs = _unrolled(ember, name, options, steps), _unrolled(torch, name, options, steps)
    # PyTorch's graph steps round their bias corrections to float32 (and 0.1 / t is
    # 1 / t * 0.1 there): agreement to about 1e-8 for the Adam family
    loose = name in ("Adam", "NAdam")
    np.testing.assert_allclose(ours, theirs, rtol=1e-7 if loose else 1e-10, atol=1e-12)


def _unrolled_complex(lib, name, options, steps):
    """Unrolled steps of a complex parameter (stepped as (re, im) pairs, as PyTorch's
    view_as_real does), then the gradient of a loss weighing the two parts differently with
    respect to the initial values."""
    w0 = lib.tensor([1 + 2j, -0.5 + 0.3j, 0.7 - 1.1j], dtype=lib.complex128,
                    requires_grad=True)
    w = w0.clone()
    opt = getattr(lib.optim, name)([w], differentiable=True, **options)
    for _ in range(steps):
        loss = (w * w.conj()).real.sum() + 0.3 * (w.real * w.imag).sum()
        w.grad, = lib.autograd.grad(loss, w, create_graph=True)
        opt.step()
    outer = (w.real ** 2 + 3 * w.imag).sum()
    outer.backward()
    return [outer.item(), *lib.view_as_real(w0.grad).flatten().tolist(),
            *lib.view_as_real(w.detach()).flatten().tolist()]


COMPLEX = {
    "Adam": ("Adam", {"lr": 0.01}),
    "AdamW": ("AdamW", {"lr": 0.01}),
    "Adagrad": ("Adagrad", {"lr": 0.1}),
    "RMSprop": ("RMSprop", {"lr": 0.01}),
    "NAdam": ("NAdam", {"lr": 0.01}),
    "Adadelta": ("Adadelta", {"lr": 0.5}),
    "RAdam": ("RAdam", {"lr": 0.01}),
    "Adamax": ("Adamax", {"lr": 0.01}),     # one step: PyTorch's own fails on a second
}


@pytest.mark.parametrize("case", sorted(COMPLEX))
def test_complex_parameter_steps_as_real_pairs_like_pytorch(case):
    name, options = COMPLEX[case]
    steps = 1 if name == "Adamax" else 3
    ours = _unrolled_complex(ember, name, options, steps)
    theirs = _unrolled_complex(torch, name, options, steps)
    np.testing.assert_allclose(ours, theirs, rtol=1e-7, atol=1e-12)


def test_adam_graph_step_keeps_pytorchs_float32_bias_correction():
    def run(lib):
        w = lib.tensor([1.0, -2.0, 0.5], dtype=lib.float64, requires_grad=True).clone()
        opt = lib.optim.Adam([w], lr=lib.tensor(0.1, dtype=lib.float64), differentiable=True)
        w.grad = lib.tensor([0.5, -0.3, 0.9], dtype=lib.float64)
        opt.step()
        return w.tolist()
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-14)
    assert abs(run(ember)[0] - 0.9) > 1e-7        # not the float64 correction's 0.9 - 2e-9


def _error(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value).replace("torch", "ember")


def test_in_place_step_on_a_leaf_fails_as_in_pytorch():
    def run(lib):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1, differentiable=True)
        w.grad = lib.ones(2)
        return lambda: opt.step()
    assert _error(run(ember)) == _error(run(torch))


def test_non_leaf_params_only_when_differentiable():
    def make(lib, differentiable):
        w = lib.ones(2, requires_grad=True).clone()
        return lib.optim.Adam([w], differentiable=differentiable)
    make(ember, True)
    assert _error(lambda: make(ember, False)) == _error(lambda: make(torch, False))


@pytest.mark.parametrize("name", ["Adam", "AdamW", "Adamax", "NAdam", "RAdam", "ASGD",
                                  "RMSprop"])
def test_capturable_foreach_on_cpu_error_matches_pytorch(name):
    def run(lib):
        w = lib.ones(2, requires_grad=True)
        opt = getattr(lib.optim, name)([w], capturable=True, foreach=True)
        w.grad = lib.ones(2)
        return opt.step
    assert _error(run(ember)) == _error(run(torch))


def test_user_subclass_with_use_grad_for_differentiable():
    def run(lib):
        helpers = __import__(f"{lib.__name__}.optim.optimizer", fromlist=["_"])
        seen = []

        class Probe(lib.optim.Optimizer):
            def __init__(self, params, differentiable):
                super().__init__(params, {"lr": 0.1, "differentiable": differentiable})

            @helpers._use_grad_for_differentiable
            def step(self):
                seen.append(lib.is_grad_enabled())
        w = lib.ones(1, requires_grad=True)
        Probe([w], True).step()
        Probe([w], False).step()
        with lib.no_grad():
            Probe([w], True).step()
        t = lib.tensor([2.0])
        return (seen, helpers._get_value(lib.tensor(3.0)), helpers._to_scalar(t).dim(),
                helpers._default_to_fused_or_foreach([t], False, True),
                helpers._default_to_fused_or_foreach([t], True, True),
                str(helpers._get_scalar_dtype()).split(".")[1])
    assert run(ember) == run(torch)


def _averaged_buffers(lib, kind):
    swa = lib.optim.swa_utils
    bn = lib.nn.BatchNorm1d(2).double()
    options = {"use_buffers": True}
    if kind == "ema":
        options["multi_avg_fn"] = swa.get_ema_multi_avg_fn(0.5)
    averaged = swa.AveragedModel(bn, **options)
    for k in range(6):
        bn(lib.tensor([[1.0, 2.0], [3.0, -1.0]], dtype=lib.float64) * (k + 1))
        if k % 2 == 0:
            bn(lib.tensor([[1.0, 2.0], [3.0, -1.0]], dtype=lib.float64))
        averaged.update_parameters(bn)
    return [b.tolist() for b in averaged.buffers()]


@pytest.mark.parametrize("kind", ["swa", "ema"])
def test_averaged_integer_buffer_matches_pytorch(kind):
    ours, theirs = _averaged_buffers(ember, kind), _averaged_buffers(torch, kind)
    assert ours[-1] == theirs[-1]       # num_batches_tracked: the truncated average
    np.testing.assert_allclose(ours[1] + ours[2], theirs[1] + theirs[2], rtol=1e-12)


def test_swa_multi_avg_fn_refuses_integer_tensors_as_pytorch():
    def run(lib):
        fn = lib.optim.swa_utils.get_swa_multi_avg_fn()
        return lambda: fn([lib.tensor([3])], [lib.tensor([5])], lib.tensor(1))
    assert _error(run(ember)) == _error(run(torch))


def _meta_betas(lib, name):
    """Three unrolled steps with learnable betas, then the outer loss's gradient with
    respect to them (the bias corrections' powers of the step count among its paths)."""
    betas = [lib.tensor(b, dtype=lib.float64, requires_grad=True) for b in (0.9, 0.99)]
    w = lib.tensor([1.0, -2.0, 0.5], dtype=lib.float64, requires_grad=True).clone()
    opt = getattr(lib.optim, name)([w], lr=0.1, betas=tuple(betas), differentiable=True)
    for i in range(3):
        loss = (lib.tanh(_inputs(lib, i) @ w) ** 2).sum() + w.sum()
        w.grad, = lib.autograd.grad(loss, w, create_graph=True)
        opt.step()
    outer = lib.sin(w).sum()
    return [outer.item(), *[g.item() for g in lib.autograd.grad(outer, betas)]]


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_learnable_betas_gradient_matches_pytorch(name):
    np.testing.assert_allclose(_meta_betas(ember, name), _meta_betas(torch, name),
                               rtol=1e-9, atol=1e-12)
