"""The Triton overrides on the GPU (backend/cuda_kernels): each against the op's CPU result,
on the layouts a kernel covers and on those it hands back to the generic forward."""

import contextlib
import functools
import os

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.testing import assert_close

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module")
def overrides():
    pytest.importorskip("triton")
    if os.environ.get("EMBER_CUDA_KERNELS") == "0":
        pytest.skip("the Triton kernels are turned off (EMBER_CUDA_KERNELS=0)")
    ember.ones(1).cuda()                            # loads the backend and its kernels
    from ember.backend.cuda_kernels import OVERRIDES
    return OVERRIDES


@pytest.fixture(autouse=True)
def no_kernel_fell_back():
    """Every kernel a test reaches must run: one that could not is switched off, with a
    warning, and its op quietly runs the generic code."""
    yield
    from ember.backend.cuda_kernels import DISABLED
    assert not DISABLED, f"kernels switched off: {DISABLED}"


def _count_launches(monkeypatch, module_name, launcher):
    """A list that grows by one each time ``launcher`` of the Triton module runs."""
    import importlib
    module = importlib.import_module(f"ember.backend.cuda_kernels.{module_name}")
    real, calls = getattr(module, launcher), []

    def counting(*args, **kwargs):
        calls.append(launcher)
        return real(*args, **kwargs)
    monkeypatch.setattr(module, launcher, counting)
    return calls


def _pair(shape, dtype=ember.float32, seed=0, scale=3.0):
    ember.manual_seed(seed)
    host = (ember.randn(shape) * scale).to(dtype)
    return host, host.cuda()


def _same(gpu, host, **tol):
    assert gpu.is_cuda and gpu.dtype is host.dtype
    assert_close(gpu.cpu(), host, equal_nan=True, **tol)


def test_kernels_are_registered(overrides):
    assert {"softmax", "log_softmax", "native_layer_norm", "native_batch_norm",
            "nn.functional.cross_entropy", "nn.functional.gelu", "_gelu_backward",
            "nn.functional.silu",
            "nn.functional.max_pool2d_with_indices", "max_pool1d_with_indices",
            "nn.functional.avg_pool2d", "avg_pool1d", "nn.functional.adaptive_avg_pool2d",
            "nn.functional.max_pool3d_with_indices", "nn.functional.avg_pool3d",
            "nn.functional.adaptive_avg_pool3d",
            "adaptive_avg_pool1d", "nn.functional.interpolate"} <= set(overrides)
    from ember.backend.cuda_kernels import DERIVATIVES
    assert {"softmax", "log_softmax", "nn.functional.silu", "native_layer_norm",
            "native_batch_norm", "nn.functional.cross_entropy",
            "nn.functional.scaled_dot_product_attention"} <= set(DERIVATIVES)
    assert {"adam", "lstm_steps", "lstm_steps_backward", "gru_steps", "random"} <= set(
        ember.backend.DEVICE_KERNELS)


LOW = dict(atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.float16])
@pytest.mark.parametrize("shape, dim", [((64, 33), -1), ((4, 8, 1000), 2), ((3, 40000), 1),
                                        ((5, 6, 7), 1), ((7,), 0)])
@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_softmax_family(overrides, fn, shape, dim, dtype):
    host, gpu = _pair(shape, dtype)
    tol = {} if dtype is ember.float32 else LOW
    _same(fn(gpu, dim), fn(host, dim), **tol)
    _same(fn(gpu.mT if gpu.ndim > 1 else gpu, -1), fn(host.mT if host.ndim > 1 else host, -1),
          **tol)


def test_softmax_with_dtype_argument_and_gradient(overrides):
    host, gpu = _pair((16, 50))
    _same(F.softmax(gpu, -1, dtype=ember.float64), F.softmax(host, -1, dtype=ember.float64))
    for x in (host, gpu):
        x.requires_grad_()
        F.log_softmax(x, -1).mul(ember.arange(50.).to(x.device)).sum().backward()
    _same(gpu.grad, host.grad)


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape, normalized", [((8, 16, 128), (128,)), ((4, 6, 10), (6, 10)),
                                               ((3, 40000), (40000,))])
def test_layer_norm(overrides, shape, normalized, affine, dtype):
    host, gpu = _pair(shape, dtype)
    w, b = (ember.randn(normalized).to(dtype) if affine else None for _ in range(2))
    out_h = ember.native_layer_norm(host, normalized, w, b, 1e-5)
    out_g = ember.native_layer_norm(gpu, normalized, *(v if v is None else v.cuda()
                                                       for v in (w, b)), 1e-5)
    tol = {} if dtype is ember.float32 else LOW
    for g, h in zip(out_g, out_h):
        assert g.shape == h.shape
        _same(g, h, **tol)


@pytest.mark.parametrize("dtype, weight", [(ember.float32, ember.float32), (ember.float32, None),
                                           (ember.bfloat16, ember.float32),
                                           (ember.bfloat16, ember.bfloat16)])
@pytest.mark.parametrize("shape, normalized", [((4, 8, 32), (32,)), ((3, 4, 5), (4, 5)),
                                               ((2, 40000), (40000,))])
def test_rms_norm(overrides, monkeypatch, shape, normalized, dtype, weight):
    launches = [_count_launches(monkeypatch, "triton_rows", name)
                for name in ("rms_norm_rows", "rms_norm_backward_rows")]
    host, gpu = _pair(shape, dtype)
    w = None if weight is None else ember.randn(normalized).to(weight)
    grad = ember.randn(shape, generator=ember.Generator().manual_seed(2)).to(dtype)
    results = []
    for x in (host, gpu):
        x.requires_grad_()
        ws = None if w is None else w.to(x.device, copy=True).requires_grad_()
        y = F.rms_norm(x, normalized, ws)
        y.backward(grad.to(x.device))
        results.append([y, x.grad] + ([] if w is None else [ws.grad]))
    tol = dict(atol=1e-4, rtol=1e-4) if dtype is ember.float32 else LOW
    for h, g in zip(*results):
        _same(g, h, **tol)
    from ember.backend.cuda_kernels.triton_rows import MAX_ROW
    held = shape[-1] <= MAX_ROW                     # longer rows take the generic code
    assert [bool(n) for n in launches] == [held, held]


def test_layer_norm_module_trains_like_cpu(overrides):
    host = ember.nn.LayerNorm(64)
    gpu = ember.nn.LayerNorm(64).cuda()
    gpu.load_state_dict(host.state_dict())
    x, xg = _pair((32, 64))
    for model, inp in ((host, x), (gpu, xg)):
        inp.requires_grad_()
        model(inp).pow(2).sum().backward()
    _same(xg.grad, x.grad, atol=1e-4, rtol=1e-4)
    _same(gpu.weight.grad, host.weight.grad, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape", [(8, 5), (4, 3, 5, 7), (2, 3, 2000), (3, 2, 2, 3, 4)])
def test_batch_norm(overrides, monkeypatch, shape, affine, training):
    launches = [_count_launches(monkeypatch, "triton_batch_norm", name)
                for name in ("statistics", "normalize", "backward")]
    host, gpu = _pair(shape)
    c = shape[1]
    w, b = (ember.randn(c) if affine else None for _ in range(2))
    stats = ember.randn(c), ember.rand(c) + 0.5
    results = []
    for x in (host, gpu):
        x.requires_grad_()
        weight, bias = (None if v is None else v.to(x.device, copy=True).requires_grad_()
                        for v in (w, b))
        running = [v.to(x.device, copy=True) for v in stats]      # updated in place
        out = ember.native_batch_norm(x, weight, bias, *running, training, 0.3, 1e-5)
        grad = ember.randn(shape, generator=ember.Generator().manual_seed(1))
        out[0].backward(grad.to(x.device))
        results.append([*out, *running, x.grad] + ([weight.grad, bias.grad] if affine else []))
    for h, g in zip(*results):
        assert g.shape == h.shape
        _same(g, h, atol=1e-4, rtol=1e-4)
    assert [len(n) for n in launches] == [int(training), 1, 1]


@pytest.mark.parametrize("shape, groups, affine", [
    ((2, 6, 5, 4), 3, True), ((3, 4, 7), 2, False), ((2, 8, 3, 3), 8, True),   # 8: instance
    ((2, 4, 2500), 1, True), ((5, 3), 3, True)])
def test_group_norm(overrides, monkeypatch, shape, groups, affine):
    launches = [_count_launches(monkeypatch, "triton_group_norm", name)
                for name in ("normalize", "backward")]
    host, gpu = _pair(shape)
    c = shape[1]
    w, b = (ember.randn(c) if affine else None for _ in range(2))
    grad = ember.randn(shape, generator=ember.Generator().manual_seed(2))
    results = []
    for x in (host, gpu):
        x.requires_grad_()
        weight, bias = (None if v is None else v.to(x.device, copy=True).requires_grad_()
                        for v in (w, b))
        out = ember.native_group_norm(x, weight, bias, shape[0], c, x[0, 0].numel(), groups,
                                      1e-5)
        out[0].backward(grad.to(x.device))
        results.append([*out, x.grad] + ([weight.grad, bias.grad] if affine else []))
    for h, g in zip(*results):
        assert g.shape == h.shape
        _same(g, h, atol=1e-4, rtol=1e-4)
    assert all(launches)


def test_group_norm_in_bfloat16(overrides):
    host, gpu = _pair((2, 8, 6, 6), ember.bfloat16)
    exact = host.double()
    norms = [ember.nn.GroupNorm(4, 8) for _ in range(3)]
    norms[1].cuda(), norms[2].double()
    grad = ember.randn(host.shape)
    outputs = []
    for x, norm in zip((host, gpu, exact), norms):
        norm.to(x.dtype)
        x.requires_grad_()
        outputs.append(norm(x))
        outputs[-1].backward(grad.to(x.device, x.dtype))
    _same(outputs[1].detach(), outputs[0].detach(), **LOW)
    assert_close(gpu.grad.cpu().double(), exact.grad, atol=4e-2, rtol=2e-2)


def test_batch_norm_of_bfloat16_inputs_with_float32_parameters(overrides):
    host, gpu = _pair((6, 4, 9, 9), ember.bfloat16)
    exact = host.double()
    modules = [ember.nn.BatchNorm2d(4) for _ in range(3)]
    modules[1].cuda(), modules[2].double()
    grad = ember.randn(host.shape)
    outputs = []
    for x, module in zip((host, gpu, exact), modules):
        x.requires_grad_()
        outputs.append(module(x))
        assert outputs[-1].dtype is x.dtype
        outputs[-1].backward(grad.to(x.device, x.dtype))
    _same(outputs[1].detach(), outputs[0].detach(), **LOW)
    assert_close(gpu.grad.cpu().double(), exact.grad, atol=4e-2, rtol=2e-2)
    assert_close(modules[1].weight.grad.cpu().double(), modules[2].weight.grad, atol=1e-1,
                 rtol=1e-2)
    _same(modules[1].running_var, modules[0].running_var)


def test_batch_norm_module_with_cumulative_average_trains_like_cpu(overrides):
    host = ember.nn.BatchNorm1d(6, momentum=None)
    gpu = ember.nn.BatchNorm1d(6, momentum=None).cuda()
    for step in range(3):
        x, xg = _pair((16, 6, 10), seed=step)
        for model, inp in ((host, x), (gpu, xg)):
            model(inp).pow(3).sum().backward()
    for name, value in host.state_dict().items():
        _same(gpu.state_dict()[name], value, atol=1e-5, rtol=1e-5)
    _same(gpu.weight.grad, host.weight.grad, atol=1e-3, rtol=1e-4)
    gpu.eval(), host.eval()
    x, xg = _pair((5, 6, 3))
    _same(gpu(xg), host(x))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
@pytest.mark.parametrize("n, c", [(64, 10), (8, 50257), (1, 1)])
def test_cross_entropy(overrides, n, c, dtype, reduction):
    host, gpu = _pair((n, c), dtype)
    target = ember.randint(0, c, (n,))
    target[0] = -100
    tol = {} if dtype is ember.float32 else LOW
    _same(F.cross_entropy(gpu, target.cuda(), reduction=reduction),
          F.cross_entropy(host, target, reduction=reduction), **tol)
    for x in (host, gpu):                           # and its gradient, through the override
        x.requires_grad_()
        F.cross_entropy(x, target.to(x.device)).backward()
    _same(gpu.grad, host.grad, **tol)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape, smoothing, weighted", [
    ((6, 5), 0.1, False), ((4, 7, 3, 5), 0.0, False), ((4, 7, 9), 0.25, False),
    ((3, 11), 1.0, False), ((6, 5), 0.0, True), ((4, 7, 9), 0.3, True)])
def test_cross_entropy_with_weights_smoothing_or_more_dims(overrides, monkeypatch, shape,
                                                           smoothing, weighted, reduction):
    forward = _count_launches(monkeypatch, "triton_losses", "cross_entropy_rows")
    backward = _count_launches(monkeypatch, "triton_losses", "cross_entropy_backward_rows")
    host, gpu = _pair(shape)
    target = ember.randint(0, shape[1], shape[:1] + shape[2:])
    target.view(-1)[0] = -100
    weight = ember.rand(shape[1]) + 0.2 if weighted else None
    losses = []
    for x in (host, gpu):
        x.requires_grad_()
        loss = F.cross_entropy(x, target.to(x.device), reduction=reduction,
                               label_smoothing=smoothing,
                               weight=None if weight is None else weight.to(x.device))
        loss.backward(ember.ones_like(loss) if reduction != "none" else
                      ember.rand(loss.shape, generator=ember.Generator().manual_seed(1))
                      .to(x.device))
        losses.append(loss)
    _same(losses[1], losses[0], atol=1e-5, rtol=1e-5)
    _same(gpu.grad, host.grad, atol=1e-6, rtol=1e-5)
    assert forward and backward


@pytest.mark.parametrize("smoothing, weighted", [(0.0, False), (0.2, True)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(8, 10), (3, 5000), (7,)])
def test_cross_entropy_with_class_probabilities(overrides, monkeypatch, shape, reduction,
                                                smoothing, weighted):
    # mixup's and distillation's targets: a distribution over the classes per row
    launches = [_count_launches(monkeypatch, "triton_losses", name) for name in
                ("soft_cross_entropy_rows", "soft_cross_entropy_backward_rows")]
    host, gpu = _pair(shape)
    target = ember.softmax(ember.randn(shape), -1)
    weight = ember.rand(shape[-1]) + 0.5 if weighted else None
    results = []
    for x in (host, gpu):
        x.requires_grad_()
        loss = F.cross_entropy(x, target.to(x.device), reduction=reduction,
                               label_smoothing=smoothing,
                               weight=None if weight is None else weight.to(x.device))
        loss.backward(ember.arange(1.0, loss.numel() + 1).view(loss.shape).to(x.device))
        results.append((loss, x.grad))
    for want, got in zip(*results):
        _same(got, want, atol=1e-5, rtol=1e-5)
    assert all(launches)


def test_cross_entropy_cases_the_kernel_leaves_alone(overrides, monkeypatch):
    forward = _count_launches(monkeypatch, "triton_losses", "cross_entropy_rows")
    soft = _count_launches(monkeypatch, "triton_losses", "soft_cross_entropy_rows")
    host, gpu = _pair((6, 5, 3))
    p = ember.softmax(ember.randn(6, 5, 3), 1)      # probabilities over dim 1 of (N, C, d)
    _same(F.cross_entropy(gpu, p.cuda()), F.cross_entropy(host, p), atol=1e-6, rtol=1e-6)
    assert not forward and not soft
    host, gpu = _pair((6, 5))
    t = ember.tensor([0, 1, 2, 3, 4, 0])
    _same(F.cross_entropy(gpu, t.cuda(), ignore_index=0), F.cross_entropy(host, t, ignore_index=0))
    with pytest.raises(RuntimeError, match="weight tensor should be defined"):
        F.cross_entropy(gpu, t.cuda(), weight=ember.ones(4, device="cuda"))


def test_cross_entropy_reports_a_bad_target_at_the_next_wait(overrides):
    gpu = _pair((6, 5))[1]
    loss = F.cross_entropy(gpu, ember.tensor([0, 1, 2, 3, 4, 5]).cuda())   # no wait here
    with pytest.raises(IndexError, match="Target 5 is out of bounds"):
        loss.item()
    loss.item()                                     # reported once; the value is garbage


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_its_gradient(overrides, approximate):
    host, gpu = _pair((256, 300), scale=4.0)
    for x in (host, gpu):
        x.requires_grad_()
        F.gelu(x, approximate=approximate).mul(x.detach()).sum().backward()
    _same(F.gelu(gpu, approximate=approximate), F.gelu(host, approximate=approximate),
          atol=1e-6, rtol=1e-5)
    _same(gpu.grad, host.grad, atol=1e-5, rtol=1e-5)
    _same(F.gelu(gpu.mT), F.gelu(host.mT), atol=1e-6, rtol=1e-5)    # strided: generic


def test_silu(overrides):
    host, gpu = _pair((1000, 3))
    _same(F.silu(gpu), F.silu(host), atol=1e-6, rtol=1e-5)
    _same(F.silu(gpu.to(ember.float16)), F.silu(host.to(ember.float16)), **LOW)


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
@pytest.mark.parametrize("fn, shape, args", [
    (F.max_pool2d, (2, 3, 9, 11), (3, 2, 1, 1, True)),
    (F.max_pool2d, (3, 8, 8), ((2, 3), 1, (1, 0), 2, False)),
    (F.max_pool1d, (2, 4, 13), (4, 3, 2, 1, True)),
    (F.max_pool3d, (2, 3, 5, 7, 8), (3, 2, 1, 1, True)),               # video stems
    (F.max_pool3d, (2, 4, 6, 6), ((2, 3, 2), (1, 2, 2), 0, (2, 1, 1), False))])
def test_max_pooling_with_nans_and_its_gradient(overrides, monkeypatch, fn, shape, args,
                                                dtype):
    calls = _count_launches(monkeypatch, "triton_pooling", "max_pool3d")
    host, gpu = _pair(shape, dtype)
    host[..., 0, 1] = float("nan")
    gpu[..., 0, 1] = float("nan")
    host.requires_grad_(), gpu.requires_grad_()
    (y, i), (hy, hi) = (fn(x, *args, return_indices=True) for x in (gpu, host))
    _same(y, hy)
    assert ember.equal(i.cpu(), hi) and calls
    y.sum().backward(), hy.sum().backward()
    _same(gpu.grad, host.grad)


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
@pytest.mark.parametrize("fn, shape, args", [
    (F.avg_pool2d, (2, 3, 9, 11), (3, 2, 1, True, False)),
    (F.avg_pool2d, (3, 8, 8), ((2, 3), 1, (1, 0), False, True, 4)),
    (F.avg_pool1d, (2, 4, 13), (4, 3, 2, True)),
    (F.adaptive_avg_pool2d, (2, 3, 8, 12), ((4, 3),)),
    (F.adaptive_avg_pool1d, (2, 4, 12), (6,)),
    (F.avg_pool3d, (2, 3, 5, 7, 8), (3, 2, 1, True, False)),
    (F.avg_pool3d, (2, 4, 6, 6), ((2, 2, 3), (2, 1, 2), (1, 0, 1), False, True, 5)),
    (F.adaptive_avg_pool3d, (2, 3, 4, 8, 6), ((2, 4, 3),))])
def test_average_pooling_with_infinities_and_its_gradient(overrides, monkeypatch, fn, shape,
                                                          args, dtype):
    if fn is F.avg_pool3d and dtype is ember.bfloat16:
        # PyTorch's CPU avg_pool3d takes no 16-bit floats (nor does ember's), its CUDA one
        # does: compare with the CPU's float32 result
        x = ember.randn(shape).to(dtype)
        want = fn(x.float(), *args)
        _same(fn(x.cuda(), *args).float(), want, **LOW)
        return
    forward = _count_launches(monkeypatch, "triton_pooling", "avg_pool3d")
    backward = _count_launches(monkeypatch, "triton_pooling", "avg_pool3d_backward")
    host, gpu = _pair(shape, dtype)
    host[..., 0, 1] = float("inf")
    gpu[..., 0, 1] = float("inf")
    host.requires_grad_(), gpu.requires_grad_()
    y, hy = fn(gpu, *args), fn(host, *args)
    _same(y, hy, **({} if dtype is ember.float32 else LOW))
    g = ember.randn(hy.shape).to(dtype)
    y.backward(g.cuda()), hy.backward(g)
    _same(gpu.grad, host.grad, **({} if dtype is ember.float32 else LOW))
    assert forward and backward


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
@pytest.mark.parametrize("shape, kwargs", [
    ((2, 3, 5, 7), dict(scale_factor=2, mode="bilinear")),
    ((2, 3, 5, 7), dict(size=(8, 4), mode="bilinear", align_corners=True)),
    ((2, 3, 5, 7), dict(scale_factor=(2, 3), mode="nearest")),
    ((2, 3, 9, 7), dict(size=(4, 5), mode="nearest-exact")),
    ((2, 3, 6, 6), dict(size=(9, 4), mode="bicubic")),
    ((2, 3, 8, 9), dict(size=(4, 3), mode="area")),
    ((2, 3, 12, 12), dict(size=(5, 5), mode="bilinear", antialias=True)),
    ((2, 4, 11), dict(scale_factor=1.7, mode="linear")),
    ((2, 4, 11), dict(size=4, mode="nearest"))])
def test_interpolation_with_infinities_and_its_gradient(overrides, monkeypatch, shape, kwargs,
                                                        dtype):
    if kwargs.get("antialias") and dtype is not ember.float32:
        pytest.skip("PyTorch has no 16-bit antialiasing")
    forward = _count_launches(monkeypatch, "triton_resample", "resample2d")
    backward = _count_launches(monkeypatch, "triton_resample", "resample2d_backward")
    host, gpu = _pair(shape, dtype)
    host[..., 0, 1] = float("inf")
    gpu[..., 0, 1] = float("inf")
    host.requires_grad_(), gpu.requires_grad_()
    y, hy = F.interpolate(gpu, **kwargs), F.interpolate(host, **kwargs)
    tol = dict(atol=1e-5, rtol=1e-5) if dtype is ember.float32 else LOW
    _same(y, hy, **tol)
    y.sum().backward(), hy.sum().backward()
    _same(gpu.grad, host.grad, **tol)
    assert forward and backward


@pytest.mark.parametrize("cls, kwargs", [
    (ember.optim.Adam, {}), (ember.optim.Adam, {"weight_decay": 0.1}),
    (ember.optim.AdamW, {"weight_decay": 0.1}), (ember.optim.Adam, {"amsgrad": True}),
    (ember.optim.Adam, {"maximize": True}), (ember.optim.SGD, {}),
    (ember.optim.SGD, {"momentum": 0.9, "weight_decay": 0.1}),
    (ember.optim.SGD, {"momentum": 0.9, "dampening": 0.3}),
    (ember.optim.SGD, {"momentum": 0.9, "nesterov": True, "maximize": True}),
    (ember.optim.RMSprop, {}), (ember.optim.RMSprop, {"weight_decay": 0.1, "momentum": 0.9}),
    (ember.optim.RMSprop, {"centered": True, "momentum": 0.5, "maximize": True}),
    (ember.optim.Adagrad, {}), (ember.optim.Adagrad, {"lr_decay": 0.1, "weight_decay": 0.1,
                                                      "initial_accumulator_value": 0.5}),
    (ember.optim.Adadelta, {}), (ember.optim.Adadelta, {"weight_decay": 0.1, "rho": 0.5,
                                                        "maximize": True}),
    (ember.optim.NAdam, {}), (ember.optim.NAdam, {"weight_decay": 0.1, "momentum_decay": 0.1}),
    (ember.optim.NAdam, {"weight_decay": 0.1, "decoupled_weight_decay": True,
                         "maximize": True}),
    # beta2 = 0.7: the steps are rectified from the 10th on
    (ember.optim.RAdam, {"betas": (0.9, 0.7)}),
    (ember.optim.RAdam, {"betas": (0.9, 0.7), "weight_decay": 0.1}),
    (ember.optim.RAdam, {"betas": (0.9, 0.7), "weight_decay": 0.1,
                         "decoupled_weight_decay": True}),
    (ember.optim.Adamax, {}), (ember.optim.Adamax, {"weight_decay": 0.1, "maximize": True})])
def test_fused_optimizers_match_cpu(overrides, monkeypatch, cls, kwargs):
    name = {ember.optim.SGD: "sgd", ember.optim.RMSprop: "rmsprop",
            ember.optim.Adagrad: "adagrad", ember.optim.Adadelta: "adadelta",
            ember.optim.NAdam: "nadam", ember.optim.RAdam: "radam",
            ember.optim.Adamax: "adamax"}.get(cls, "adam")
    fused, calls = ember.backend.DEVICE_KERNELS[name], []

    def recording(params, **hyper):
        left = fused(params, **hyper)
        calls.append(len(params) - len(left))       # the parameters it updated
        return left
    monkeypatch.setitem(ember.backend.DEVICE_KERNELS, name, recording)
    ember.manual_seed(0)
    params = [ember.randn(300, 7), ember.randn(11)]
    host = [p.clone().requires_grad_() for p in params]
    gpu = [p.cuda().requires_grad_() for p in params]
    opts = [cls(ps, lr=1e-2, **kwargs) for ps in (host, gpu)]
    steps = 12 if name == "radam" else 3
    for step in range(steps):
        for ps, opt in zip((host, gpu), opts):
            for p, g in zip(ps, params):
                p.grad = (g * (step + 1)).to(p.device)
            opt.step()
    for h, g in zip(host, gpu):
        _same(g.detach(), h.detach(), atol=1e-6, rtol=1e-5)
    key = {"adam": "exp_avg", "rmsprop": "square_avg", "adagrad": "sum",
           "adadelta": "acc_delta", "nadam": "exp_avg_sq", "radam": "exp_avg_sq",
           "adamax": "exp_inf"}.get(name, "momentum_buffer")
    if key in opts[0].state[host[0]]:
        assert np.isclose(opts[1].state[gpu[0]][key].cpu().numpy(),
                          opts[0].state[host[0]][key].numpy(), atol=1e-6).all()
    assert calls == [2] * steps                     # each step: both parameters, one launch


def test_adam_hands_a_groups_parameters_to_the_fused_kernel_at_once(monkeypatch):
    calls = []
    fused = ember.backend.DEVICE_KERNELS.get("adam", lambda params, **hyper: None)

    def recording(params, **hyper):
        calls.append(([x.shape for x, *_ in params], [p[4] is None for p in params],
                      [p[5] for p in params], hyper))
        return fused(params, **hyper)
    monkeypatch.setitem(ember.backend.DEVICE_KERNELS, "adam", recording)
    p = ember.ones(4, device="cuda", requires_grad=True)
    q = ember.ones(2, 3, device="cuda", requires_grad=True)
    opt = ember.optim.AdamW([p, q], lr=0.5, weight_decay=0.1)
    for _ in range(2):
        p.grad = ember.full((4,), 2.0, device="cuda")
        q.grad = ember.full((2, 3), 2.0, device="cuda")
        opt.step()
    assert [c[0] for c in calls] == [[(4,), (2, 3)]] * 2 and calls[0][1] == [True, True]
    assert calls[1][2] == [2.0, 2.0] and calls[1][3] == dict(
        lr=0.5, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, decoupled=True,
        amsgrad=False)
    # a constant gradient makes each step move the weight by lr, after the decay
    expected = ((1 - 0.05) - 0.5) * (1 - 0.05) - 0.5
    assert_close(p.detach().cpu(), ember.full((4,), expected), atol=1e-5, rtol=0)
    assert_close(q.detach().cpu(), ember.full((2, 3), expected), atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("L, S, E", [(256, 256, 64), (100, 37, 20), (64, 64, 128)])
def test_flash_attention_and_its_gradient(overrides, L, S, E, causal, dtype):
    if causal and L > S:
        pytest.skip("covered by the square cases")
    if dtype is ember.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("Triton 3.9's interpreter multiplies bfloat16 matrices wrongly")
    ember.manual_seed(0)
    host = [ember.randn(2, L if i == 0 else S, 4, E).to(dtype).transpose(1, 2)  # head split
            for i in range(3)]
    gpu = [t.cuda() for t in host]
    results = []
    for q, k, v in (host, gpu):
        for t in (q, k, v):
            t.requires_grad_()
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out.float().pow(2).sum().backward()
        results.append((out, q.grad, k.grad, v.grad))
    # float32: blockwise sums in another order than the CPU's (one gradient entry of 0.1 in
    # 65,536 differed by 2.4e-5 under NumPy 2.4's interpreter run)
    tol = dict(atol=5e-5, rtol=2e-5) if dtype is ember.float32 else LOW
    for g, h in zip(results[1], results[0]):
        _same(g, h, **tol)
    assert results[1][0].grad_fn.name() == "ScaledDotProductAttentionBackward0"


def _attention_on_both(operands, grad, attn_mask=None, **kwargs):
    """[output, then the operands' gradients] of F.scaled_dot_product_attention on the CPU,
    and the same on the GPU."""
    results = []
    for device in ("cpu", "cuda"):
        leaves = [t.to(device, copy=True).requires_grad_() for t in operands]
        out = F.scaled_dot_product_attention(
            *leaves, attn_mask=None if attn_mask is None else attn_mask.to(device), **kwargs)
        out.backward(grad.to(device))
        results.append([out] + [t.grad for t in leaves])
    return results


def _attention_masks(B, H, L, S):
    """name -> an attn_mask: boolean and float, broadcast and full, with rows that see no
    key (zeros out, as PyTorch gives) and -inf scores."""
    ember.manual_seed(3)
    hidden = ember.rand(L, S) > 0.3
    hidden[5] = False
    padding = ember.ones(B, 1, 1, S, dtype=ember.bool)
    padding[1, ..., S // 2:] = False                # BERT's padding mask
    additive = ember.randn(B, H, L, S)
    additive[0, 1, 3] = float("-inf")
    additive[1, 0, :, 7] = float("-inf")
    return {"bool": hidden, "padding": padding, "float": additive, "float row": ember.randn(1, S)}


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16])
@pytest.mark.parametrize("name", ["bool", "padding", "float", "float row"])
def test_flash_attention_under_a_mask(overrides, monkeypatch, name, dtype):
    launches = [_count_launches(monkeypatch, "triton_attention", launcher)
                for launcher in ("attention_forward", "attention_backward")]
    B, H, L, S, E = 2, 3, 70, 45, 16
    mask = _attention_masks(B, H, L, S)[name]
    operands = [ember.randn(B, H, n, E).to(dtype) for n in (L, S, S)]
    grad = ember.randn(B, H, L, E).to(dtype)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype is ember.float32 else dict(atol=5e-3, rtol=5e-3)
    for want, got in zip(*_attention_on_both(operands, grad, attn_mask=mask)):
        _same(got, want, **tol)
    assert all(launches)


@pytest.mark.parametrize("masked", [False, True])
def test_flash_attention_dropout_is_the_philox_mask(overrides, monkeypatch, masked):
    # the kernels keep weight (b, h, i, j) where the Philox number that ember.rand would
    # draw for that position from the same generator state is at least p
    launches = [_count_launches(monkeypatch, "triton_attention", launcher)
                for launcher in ("attention_forward", "attention_backward")]
    B, H, L, S, E, p = 2, 2, 40, 33, 16, 0.3
    ember.manual_seed(0)
    q, k, v = (ember.randn(B, H, n, E, device="cuda") for n in (L, S, S))
    grad = ember.randn(B, H, L, E, device="cuda")
    mask = _attention_masks(B, H, L, S)["padding"] if masked else None
    ember.cuda.manual_seed(7)
    keep = (ember.rand(B, H, L, S, device="cuda") >= p).cpu().double()
    exact = [t.cpu().double().requires_grad_() for t in (q, k, v)]
    scores = exact[0] @ exact[1].mT / E ** 0.5
    if masked:
        scores = scores.masked_fill(~mask, float("-inf"))
    want = (scores.softmax(-1) * keep / (1 - p)) @ exact[2]
    want.backward(grad.cpu().double())
    for create_graph in (False, True):          # the kernels' backward, then the generic one
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        ember.cuda.manual_seed(7)
        out = F.scaled_dot_product_attention(*leaves, dropout_p=p,
                                             attn_mask=None if mask is None else mask.cuda())
        got = ember.autograd.grad(out, leaves, grad, create_graph=create_graph)
        assert_close(out.detach().cpu().double(), want.detach(), atol=1e-4, rtol=1e-4)
        for g, t in zip(got, exact):
            assert_close(g.detach().cpu().double(), t.grad, atol=1e-4, rtol=1e-4)
    assert [len(n) for n in launches] == [2, 1]
    again = F.scaled_dot_product_attention(q, k, v, dropout_p=p)     # the stream moved on
    assert not ember.equal(again, F.scaled_dot_product_attention(q, k, v, dropout_p=p))


@pytest.mark.parametrize("causal, masked", [(False, False), (True, False), (False, True)])
def test_flash_attention_with_grouped_query_heads(overrides, monkeypatch, causal, masked):
    # LLaMA-style: 6 query heads share 2 key/value heads; their gradients sum over the 3
    launches = [_count_launches(monkeypatch, "triton_attention", launcher)
                for launcher in ("attention_forward", "attention_backward")]
    ember.manual_seed(0)
    q, k, v = ember.randn(2, 6, 37, 16), ember.randn(2, 2, 37, 16), ember.randn(2, 2, 37, 16)
    mask = ember.rand(2, 1, 37, 37) > 0.3 if masked else None
    results = _attention_on_both((q, k, v), ember.randn(2, 6, 37, 16), attn_mask=mask,
                                 is_causal=causal, enable_gqa=True)
    for want, got in zip(*results):
        _same(got, want, atol=1e-4, rtol=1e-4)
    assert all(launches)


@pytest.mark.parametrize("masked", [False, True])
def test_flash_attention_of_three_dim_inputs(overrides, monkeypatch, masked):
    # (B, L, E) queries, keys and values: one head
    launches = [_count_launches(monkeypatch, "triton_attention", launcher)
                for launcher in ("attention_forward", "attention_backward")]
    ember.manual_seed(0)
    q, k, v = ember.randn(3, 20, 8), ember.randn(3, 25, 8), ember.randn(3, 25, 8)
    mask = ember.rand(3, 20, 25) > 0.3 if masked else None
    for want, got in zip(*_attention_on_both((q, k, v), ember.randn(3, 20, 8), attn_mask=mask)):
        _same(got, want, atol=1e-4, rtol=1e-4)
    assert all(launches)


def test_a_float_mask_that_needs_its_gradient_takes_the_generic_backward(overrides,
                                                                          monkeypatch):
    backward = _count_launches(monkeypatch, "triton_attention", "attention_backward")
    ember.manual_seed(0)
    q, k, v = (ember.randn(2, 2, 9, 8) for _ in range(3))
    mask = ember.randn(9, 9)
    grads = []
    for device in ("cpu", "cuda"):
        leaves = [t.to(device, copy=True).requires_grad_() for t in (q, k, v, mask)]
        F.scaled_dot_product_attention(*leaves[:3], attn_mask=leaves[3]).square().sum().backward()
        grads.append([t.grad for t in leaves])
    for want, got in zip(*grads):
        _same(got, want, atol=1e-4, rtol=1e-4)
    assert not backward


def test_attention_cases_the_kernel_leaves_alone(overrides):
    ember.manual_seed(0)
    q, k, v = (ember.randn(2, 4, 8, 16) for _ in range(3))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(),
                                       attn_mask=ember.ones(3, 2, 4, 8, 8).cuda())
    kg, vg = k[:, :2], v[:, :1]                   # key and value heads shared unevenly
    _same(F.scaled_dot_product_attention(q.cuda(), kg.cuda(), vg.cuda(), enable_gqa=True),
          F.scaled_dot_product_attention(q, kg, vg, enable_gqa=True), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("module, launcher", [("triton_rows", "layer_norm_backward_rows"),
                                              ("triton_losses", "cross_entropy_backward_rows")])
def test_fused_gradient_kernels_are_used(overrides, monkeypatch, module, launcher):
    used = _count_launches(monkeypatch, module, launcher)
    host, gpu = _pair((48, 96))
    target = ember.randint(0, 96, (48,))
    grads = []
    for x in (host, gpu):
        ln = ember.nn.LayerNorm(96).to(x.device)
        x.requires_grad_()
        F.cross_entropy(ln(x), target.to(x.device)).backward()
        grads.append((x.grad, ln.weight.grad, ln.bias.grad))
    assert used
    for g, h in zip(grads[1], grads[0]):
        _same(g, h, atol=1e-5, rtol=1e-4)


def test_dropout_draws_on_the_device_reproducibly(overrides):
    x = ember.ones(64, 1000, device="cuda", requires_grad=True)
    ember.manual_seed(3)
    first = F.dropout(x, 0.3)
    state = ember.cuda.get_rng_state()
    second = F.dropout(x, 0.3)
    ember.cuda.set_rng_state(state)
    again = F.dropout(x, 0.3)
    assert first.is_cuda and abs(float((first == 0).float().mean()) - 0.3) < 0.01
    assert set(np.unique(first.detach().cpu().numpy()).tolist()) == {0.0, np.float32(1 / 0.7)}
    assert not ember.equal(first, second) and ember.equal(second, again)
    ember.manual_seed(3)
    assert ember.equal(F.dropout(x, 0.3), first)
    first.sum().backward()                          # the gradient takes the same mask
    assert ember.equal(x.grad, first.detach())
    assert F.dropout(x, 1.0).abs().sum().item() == 0



CONVOLUTIONS = [  # (input shape, weight shape, keyword arguments)
    ((2, 3, 9, 11), (5, 3, 3, 3), dict(stride=1, padding=1)),
    ((2, 6, 9, 11), (5, 6, 3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    ((2, 8, 7, 7), (8, 8, 3, 3), dict(padding=1, bias=False)),   # input gradient: the kernel
    ((3, 4, 17), (6, 4, 5), dict(stride=2, padding=2)),          # 1-D
    ((1, 2, 6, 6), (70, 2, 1, 1), {}),                           # 1x1, more channels than a tile
    ((2, 3, 8, 8), (4, 3, 4, 4), dict(padding="same")),          # uneven padding
    ((2, 8, 9, 9), (12, 2, 3, 3), dict(padding=1, groups=4)),    # ResNeXt-style groups
    ((2, 70, 5, 5), (70, 35, 1, 1), dict(groups=2)),             # a group wider than a tile
    ((3, 8, 11), (4, 4, 3), dict(padding=1, groups=2)),          # 1-D, grouped
    ((2, 3, 5, 6, 7), (4, 3, 3, 2, 3), dict(stride=(1, 2, 1), padding=(1, 0, 1),
                                            dilation=(2, 1, 1))),  # 3-D
    ((1, 4, 4, 5, 5), (6, 2, 1, 3, 3), dict(padding=(0, 1, 1), groups=2)),
]


TRANSPOSED = [  # (input shape, weight shape (C_in, C_out, *K), keyword arguments)
    ((2, 5, 4, 6), (5, 3, 4, 4), dict(stride=2, padding=1)),    # a GAN's upsampling layer
    ((2, 4, 5, 5), (4, 6, 3, 2), dict(stride=(3, 2), padding=(1, 0), output_padding=(2, 1),
                                      dilation=(1, 2))),
    ((3, 4, 9), (4, 2, 3), dict(stride=2, padding=1, output_padding=1)),   # 1-D
    ((2, 6, 5, 5), (6, 2, 4, 4), dict(stride=2, padding=1, groups=2)),     # grouped
    ((1, 3, 3, 4, 4), (3, 2, 2, 2, 2), dict(stride=2, padding=(0, 1, 0))),  # 3-D
]


@pytest.mark.parametrize("x_shape, w_shape, kwargs", CONVOLUTIONS + TRANSPOSED)
def test_convolutions_run_as_implicit_gemms(overrides, monkeypatch, x_shape, w_shape, kwargs):
    forward = _count_launches(monkeypatch, "triton_conv", "conv3d")
    weight = _count_launches(monkeypatch, "triton_conv", "conv3d_weight_grad")
    backward = _count_launches(monkeypatch, "triton_conv", "conv3d_input_grad")
    kwargs = dict(kwargs)
    bias = kwargs.pop("bias", True)
    transposed = (x_shape, w_shape, kwargs) in TRANSPOSED
    conv = {3: (F.conv1d, F.conv_transpose1d), 4: (F.conv2d, F.conv_transpose2d),
            5: (F.conv3d, F.conv_transpose3d)}[len(x_shape)][transposed]
    results = []
    for device in ("cpu", "cuda"):
        ember.manual_seed(0)
        x, w = ember.randn(x_shape), ember.randn(w_shape)
        out_channels = w_shape[1] * kwargs.get("groups", 1) if transposed else w_shape[0]
        b = ember.randn(out_channels) if bias else None
        leaves = [t.to(device).requires_grad_() for t in (x, w, b) if t is not None]
        y = conv(*leaves, **kwargs)
        y.square().sum().backward()
        results.append([y] + [t.grad for t in leaves])
    assert forward and weight and backward          # a transposed one's output: input_grad
    for got, want in zip(results[1], results[0]):
        _same(got, want, atol=1e-4, rtol=1e-5)


DEPTHWISE = [  # (input shape, weight shape, keyword arguments), groups = input channels
    ((2, 4, 9, 8), (4, 1, 3, 3), dict(padding=1)),                          # MobileNet's
    ((2, 3, 11, 10), (6, 1, 3, 2), dict(stride=(2, 3), padding=(1, 0), dilation=(2, 1))),
    ((1, 5, 7, 7), (5, 1, 5, 5), dict(stride=2, padding=2, bias=False)),
    ((3, 4, 20), (8, 1, 3), dict(padding=1, dilation=2)),                   # 1-D, 2 per channel
    ((2, 4, 6, 6), (4, 1, 4, 4), dict(stride=2, padding=1, transposed=True)),
]


@pytest.mark.parametrize("x_shape, w_shape, kwargs", DEPTHWISE)
def test_depthwise_convolutions_run_tap_by_tap(overrides, monkeypatch, x_shape, w_shape,
                                               kwargs):
    launches = [_count_launches(monkeypatch, "triton_depthwise", name) for name in
                ("depthwise2d", "depthwise2d_input_grad", "depthwise2d_weight_grad")]
    kwargs = dict(kwargs)
    bias, transposed = kwargs.pop("bias", True), kwargs.pop("transposed", False)
    conv = (F.conv_transpose2d if transposed else F.conv2d) if len(x_shape) == 4 else F.conv1d
    results = []
    for device in ("cpu", "cuda"):
        ember.manual_seed(0)
        x, w = ember.randn(x_shape), ember.randn(w_shape)
        b = ember.randn(w_shape[1 if transposed else 0] * (x_shape[1] if transposed else 1)) \
            if bias else None
        leaves = [t.to(device).requires_grad_() for t in (x, w, b) if t is not None]
        y = conv(*leaves[:2], leaves[2] if bias else None, groups=x_shape[1], **kwargs)
        y.backward(ember.randn(*y.shape, generator=ember.Generator().manual_seed(1)).to(device))
        results.append([y] + [t.grad for t in leaves])
    assert all(launches)
    for got, want in zip(results[1], results[0]):
        _same(got, want, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("groups", [1, 6])              # one group, and depthwise
@pytest.mark.parametrize("transposed", [False, True])
def test_half_precision_convolutions_run_natively(overrides, monkeypatch, transposed, groups):
    # float16 (and bfloat16) operands go to the kernels as they are: products sum in float32
    # and round once, where the generic code multiplies float32 copies
    module, names = ("triton_conv", ("conv3d", "conv3d_input_grad", "conv3d_weight_grad")) \
        if groups == 1 else ("triton_depthwise", ("depthwise2d", "depthwise2d_input_grad",
                                                  "depthwise2d_weight_grad"))
    launches = [_count_launches(monkeypatch, module, name) for name in names]
    conv = F.conv_transpose2d if transposed else F.conv2d
    results = []
    for device in ("cpu", "cuda"):
        ember.manual_seed(0)
        x, w = ember.randn(2, 6, 7, 7), ember.randn(6, 6 // groups, 3, 3) / 8
        x, w = (t.half().to(device).requires_grad_() for t in (x, w))
        y = conv(x, w, stride=2, padding=1, groups=groups)
        y.float().square().sum().backward()
        results.append((y, x.grad, w.grad))
    assert all(launches)
    for got, want in zip(results[1], results[0]):
        assert got.dtype is ember.float16
        _same(got, want, atol=2e-2, rtol=2e-3)


def test_convolutions_the_kernels_leave_alone_run_generic(overrides, monkeypatch):
    forward = _count_launches(monkeypatch, "triton_conv", "conv3d")
    depthwise = _count_launches(monkeypatch, "triton_depthwise", "depthwise2d")
    ember.manual_seed(0)
    x, w = ember.randn(2, 4, 6, 6), ember.randn(6, 4, 3, 3)
    _same(F.conv2d(x.double().cuda(), w.double().cuda()), F.conv2d(x.double(), w.double()))
    x3, w3 = ember.randn(1, 4, 3, 4, 4), ember.randn(4, 1, 2, 2, 2)     # 3-D depthwise
    _same(F.conv3d(x3.cuda(), w3.cuda(), groups=4), F.conv3d(x3, w3, groups=4), atol=1e-5,
          rtol=1e-5)
    assert not depthwise and len(forward) == 1      # the 3-D one: a GEMM per group


@pytest.mark.parametrize("max_norm", [0.5, 1e6])          # clipped, and left as they are
def test_gradient_clipping_runs_in_two_launches(overrides, monkeypatch, host_traffic,
                                                max_norm):
    norms = _count_launches(monkeypatch, "triton_optimizers", "sum_of_squares")
    scales = _count_launches(monkeypatch, "triton_optimizers", "scale")
    results = []
    for device in ("cpu", "cuda"):
        ember.manual_seed(0)
        model = ember.nn.Sequential(ember.nn.Linear(30, 40), ember.nn.Tanh(),
                                    ember.nn.Linear(40, 1100)).to(device)
        model(ember.randn(8, 30).to(device)).square().mean().backward()
        with host_traffic() if device == "cuda" else contextlib.nullcontext() as traffic:
            total = ember.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        results.append([total] + [p.grad for p in model.parameters()])
    assert norms == ["sum_of_squares"] and scales == ["scale"]
    assert not traffic, dict(traffic)
    for got, want in zip(results[1], results[0]):
        _same(got, want, atol=1e-6, rtol=1e-5)


def test_gradient_clipping_of_what_the_kernels_leave_alone(overrides, monkeypatch):
    norms = _count_launches(monkeypatch, "triton_optimizers", "sum_of_squares")
    ember.manual_seed(0)
    grads = [ember.randn(5, dtype=ember.float64), ember.randn(3, 4)]
    params = [ember.zeros_like(g).requires_grad_() for g in grads]
    for device in ("cpu", "cuda"):
        moved = [p.detach().to(device).requires_grad_() for p in params]
        for p, g in zip(moved, grads):
            p.grad = g.clone().to(device)
        results = [ember.nn.utils.clip_grad_norm_(moved, 1.0)] + [p.grad for p in moved]
        if device == "cpu":
            want = results
    for got, w in zip(results, want):
        _same(got, w, atol=1e-6, rtol=1e-6)
    inf = ember.nn.utils.clip_grad_norm_(moved, 1.0, norm_type="inf")
    assert abs(inf.item() - max(g.abs().max().item() for g in results[1:])) < 1e-6
    assert not norms                                # float64 and the inf-norm: generic


@pytest.mark.parametrize("poison", [None, float("inf"), float("nan")])
def test_grad_scaler_unscales_in_one_launch(overrides, monkeypatch, poison):
    scales = _count_launches(monkeypatch, "triton_optimizers", "scale")
    results = []
    for device in ("cpu", "cuda"):
        ember.manual_seed(0)
        model = ember.nn.Sequential(ember.nn.Linear(6, 5), ember.nn.Linear(5, 1300)).to(device)
        opt = ember.optim.SGD(model.parameters(), lr=0.1)
        scaler = ember.amp.GradScaler(device, init_scale=256.0)
        scaler.scale(model(ember.randn(3, 6).to(device)).square().mean()).backward()
        if poison is not None:
            model[1].bias.grad[1234] = poison       # in the second block of the last tensor
        scaler.unscale_(opt)
        before = model[0].weight.detach().clone()
        scaler.step(opt)
        scaler.update()
        stepped = not ember.equal(model[0].weight.detach(), before)
        results.append((stepped, scaler.get_scale(), [p.grad for p in model.parameters()]))
    assert scales == ["scale"]
    (gpu_stepped, gpu_scale, gpu_grads), (cpu_stepped, cpu_scale, cpu_grads) = results[::-1]
    assert gpu_stepped == cpu_stepped == (poison is None) and gpu_scale == cpu_scale
    for got, want in zip(gpu_grads, cpu_grads):
        _same(got, want, atol=1e-7, rtol=1e-6)


SAMPLERS = {       # name -> (draw n samples on cuda, expected mean, expected std)
    "rand": (lambda n: ember.rand(n, device="cuda"), 0.5, 12 ** -0.5),
    "randn bfloat16": (lambda n: ember.randn(n, device="cuda", dtype=ember.bfloat16), 0, 1),
    "normal": (lambda n: ember.normal(2.0, 3.0, (n,), device="cuda"), 2, 3),
    "randn_like": (lambda n: ember.randn_like(ember.ones(n, device="cuda")), 0, 1),
    "uniform_ float16": (lambda n: ember.empty(n, device="cuda", dtype=ember.float16)
                         .uniform_(-1, 1), 0, 3 ** -0.5),
    "normal_": (lambda n: ember.empty(n, device="cuda").normal_(1, 0.5), 1, 0.5),
    "bernoulli": (lambda n: ember.bernoulli(ember.full((n,), 0.25, device="cuda")), 0.25,
                  0.1875 ** 0.5),
    "bernoulli_ tensor p": (lambda n: ember.zeros(n, device="cuda").bernoulli_(
        ember.full((n,), 0.75, device="cuda")), 0.75, 0.1875 ** 0.5),
    "randint int32": (lambda n: ember.randint(-3, 7, (n,), device="cuda", dtype=ember.int32),
                      1.5, (99 / 12) ** 0.5),
    "random_ uint8": (lambda n: ember.empty(n, device="cuda", dtype=ember.uint8).random_(),
                      127.5, ((256 ** 2 - 1) / 12) ** 0.5),
}


@pytest.mark.parametrize("name", SAMPLERS)
def test_samples_draw_on_the_device_reproducibly(overrides, host_traffic, name):
    draw, mean, std = SAMPLERS[name]
    ember.manual_seed(5)
    with host_traffic() as traffic:
        first = draw(20000)
    assert not traffic, f"{name} waited for the device: {dict(traffic)}"
    state = ember.cuda.get_rng_state()
    second = draw(20000)
    ember.cuda.set_rng_state(state)
    assert ember.equal(draw(20000), second) and not ember.equal(first, second)
    ember.manual_seed(5)
    assert ember.equal(draw(20000), first)
    values = first.double()
    assert abs(values.mean().item() - mean) < 4 * std / 20000 ** 0.5
    assert abs(values.std().item() / std - 1) < 0.03


def test_permutations_draw_on_the_device_reproducibly(overrides, host_traffic):
    n = 20000
    ember.manual_seed(5)
    with host_traffic() as traffic:
        first = ember.randperm(n, device="cuda")
    assert not traffic, f"randperm waited for the device: {dict(traffic)}"
    assert first.is_cuda and first.dtype is ember.int64
    assert ember.equal(first.sort().values.cpu(), ember.arange(n))
    ember.manual_seed(5)
    assert ember.equal(ember.randperm(n, device="cuda"), first)
    assert not ember.equal(ember.randperm(n, device="cuda"), first)
    # shuffled: the first half holds about half of the small values
    assert abs((first[: n // 2] < n // 2).double().mean().item() - 0.5) < 0.02
    halves = ember.randperm(6, device="cuda", dtype=ember.float32)
    assert halves.dtype is ember.float32 and sorted(halves.tolist()) == list(range(6))
    assert ember.randperm(0, device="cuda").shape == (0,)


def test_multinomial_draws_on_the_device(overrides, host_traffic):
    weights = ember.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 0.0, 2.0]], device="cuda")
    ember.manual_seed(3)
    with host_traffic() as traffic:
        drawn = ember.multinomial(weights, 20000, replacement=True)
        unique = ember.multinomial(weights, 3)
    assert not traffic, f"multinomial waited for the device: {dict(traffic)}"
    assert drawn.is_cuda and drawn.dtype is ember.int64 and drawn.shape == (2, 20000)
    for row, w in zip(drawn.cpu(), weights.cpu()):
        freq = ember.bincount(row, minlength=4).double() / 20000
        assert_close(freq, (w / w.sum()).double(), atol=0.015, rtol=0)
    # all three nonzero weights of each row, each once: a zero weight is never drawn
    assert [sorted(row) for row in unique.tolist()] == [[0, 2, 3], [0, 1, 3]]
    ember.manual_seed(3)
    assert ember.equal(ember.multinomial(weights, 20000, replacement=True), drawn)
    # without replacement, the first pick follows the weights
    firsts = ember.stack([ember.multinomial(weights[0], 2)[0] for _ in range(600)]).cpu()
    assert_close(ember.bincount(firsts, minlength=4).double() / 600,
                 ember.tensor([0.1, 0.0, 0.6, 0.3], dtype=ember.float64), atol=0.07, rtol=0)
    ember.multinomial(ember.tensor([0.5, -1.0], device="cuda"), 1)
    with pytest.raises(RuntimeError, match="contains either `inf`, `nan` or element < 0"):
        ember.cuda.synchronize()                    # checked on the device, reported here
    ember.multinomial(ember.tensor([0.5, 0.0, 0.0], device="cuda"), 2)
    with pytest.raises(RuntimeError, match="not enough non-negative category"):
        ember.cuda.synchronize()


def test_uniform_draws_stay_below_the_upper_bound_in_16_bits(overrides):
    # 0.9995 and up round to 1.0 in float16: PyTorch's kernels count such a draw as the
    # lower bound, so every value stays in [low, high)
    x = ember.empty(200000, device="cuda", dtype=ember.float16).uniform_(0, 1)
    assert x.max().item() < 1 and x.min().item() >= 0
    assert (x == 0).float().mean().item() > 1e-4            # where the rounded draws went


def test_a_kernel_that_cannot_run_falls_back_to_the_generic_forward(overrides, monkeypatch):
    from ember.backend.cuda_kernels import DISABLED, KernelUnavailable, triton_rows

    def broken(*args, **kwargs):
        raise KernelUnavailable("softmax_rows: CompilationError: planted")
    monkeypatch.setattr(triton_rows, "softmax_rows", broken)
    host, gpu = _pair((8, 40))
    with pytest.warns(RuntimeWarning, match="kernel for softmax is off.*planted"):
        _same(F.softmax(gpu, -1), F.softmax(host, -1))
    assert "planted" in DISABLED.pop("softmax")
    with pytest.warns(RuntimeWarning, match="kernel for log_softmax is off"):  # a sibling
        _same(F.log_softmax(gpu, -1), F.log_softmax(host, -1))
    assert "planted" in DISABLED.pop("log_softmax")


@pytest.mark.parametrize("causal", [False, True])
def test_flash_backward_kernel_is_used(overrides, monkeypatch, causal):
    used = _count_launches(monkeypatch, "triton_attention", "attention_backward")
    ember.manual_seed(0)
    host = [ember.randn(2, 3, 70 if i == 0 else 45, 32) for i in range(3)]
    grads = []
    for device in ("cpu", "cuda"):
        q, k, v = (t.detach().to(device).requires_grad_() for t in host)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out.backward(ember.ones_like(out) * ember.arange(32.).to(device))
        grads.append((q.grad, k.grad, v.grad))
    assert len(used) == 1
    for g, h in zip(grads[1], grads[0]):
        _same(g, h, atol=2e-5, rtol=2e-5)


RECURRENT_CASES = [  # layer, GEMM in the step's kernel, bias, packed, bidirectional
    (layer, in_kernel, bias, packed, both_ways)
    for layer, choices in (("LSTM", (True, False)), ("GRU", (True, False)), ("RNN", (True,)),
                           ("RNN_RELU", (True,)))
    for in_kernel in choices
    for bias, packed, both_ways in ((True, False, False), (False, True, True))]


@pytest.mark.parametrize("layer, in_kernel, bias, packed, both_ways", RECURRENT_CASES)
def test_recurrent_steps_run_fused_and_match_cpu(overrides, monkeypatch, layer, in_kernel, bias,
                                                 packed, both_ways):
    from ember.backend.cuda_kernels import recurrent
    base = layer.lower().removesuffix("_relu")
    calls = {f"{base}_steps": 0, f"{base}_steps_backward": 0}
    for name in calls:
        kernel = ember.backend.DEVICE_KERNELS[name]

        def recording(*args, _kernel=kernel, _name=name):
            done = _kernel(*args)
            calls[_name] += bool(done)
            return done
        monkeypatch.setitem(ember.backend.DEVICE_KERNELS, name, recording)
    monkeypatch.setattr(recurrent, "RECURRENT_GEMM_IN_KERNEL", in_kernel)
    launcher = f"{base}_gemm_step" if in_kernel else f"{base}_step"
    module = "triton_rnn_gemm" if in_kernel else "triton_rnn"
    launches = [_count_launches(monkeypatch, module, name)
                for name in (launcher, launcher + "_backward")]
    ember.manual_seed(0)
    make = getattr(ember.nn, layer) if layer != "RNN_RELU" else functools.partial(
        ember.nn.RNN, nonlinearity="relu")
    hidden = 70                     # over one 64-wide block of the in-kernel GEMM
    host = make(12, hidden, num_layers=2, bias=bias, bidirectional=both_ways)
    gpu = make(12, hidden, num_layers=2, bias=bias, bidirectional=both_ways).cuda()
    gpu.load_state_dict(host.state_dict())
    x = ember.randn(7, 3, 12)
    states = 4 if both_ways else 2
    h0 = ember.randn(states, 3, hidden)
    c0 = ember.randn(states, 3, hidden)
    results = []
    for model, device in ((host, "cpu"), (gpu, "cuda")):
        inp = x.detach().to(device).requires_grad_()
        start = [t.to(device, copy=True).requires_grad_() for t in (h0, c0)]
        feed = inp
        if packed:
            feed = ember.nn.utils.rnn.pack_padded_sequence(inp, [7, 5, 2])
        out, state = model(feed, tuple(start) if layer == "LSTM" else start[0])
        h, c = state if layer == "LSTM" else (state, state)
        if packed:
            out = ember.nn.utils.rnn.pad_packed_sequence(out)[0]
        (out.pow(2).sum() + h.sum() + c.pow(2).sum()).backward()
        results.append((out, h, c, inp.grad, start[0].grad,
                        *(p.grad for p in model.parameters())))
        if layer == "LSTM":
            results[-1] += (start[1].grad,)
    assert all(calls.values()), calls
    assert all(launches), launches
    for g, want in zip(results[1], results[0], strict=True):
        _same(g.detach(), want.detach(), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("layer", ["LSTM", "GRU", "RNN"])
def test_recurrent_layers_under_autocast_run_in_half_precision_in_the_kernels(
        overrides, monkeypatch, layer):
    # as PyTorch's cuDNN layers under autocast: all operands in the low dtype, which the
    # step kernels take (mixed dtypes would send them to the generic loop)
    base = layer.lower()
    calls = []
    for name in (f"{base}_steps", f"{base}_steps_backward"):
        kernel = ember.backend.DEVICE_KERNELS[name]
        monkeypatch.setitem(ember.backend.DEVICE_KERNELS, name,
                            lambda *args, _kernel=kernel, _name=name:
                            calls.append(_name) or _kernel(*args))
    ember.manual_seed(0)
    host = getattr(ember.nn, layer)(8, 20)
    gpu = getattr(ember.nn, layer)(8, 20).cuda()
    gpu.load_state_dict(host.state_dict())
    x = ember.randn(5, 3, 8)
    results = []
    for model, device in ((host, "cpu"), (gpu, "cuda")):
        with ember.autocast("cuda", dtype=ember.float16):
            out, state = model(x.to(device))
        h = state[0] if layer == "LSTM" else state
        assert out.dtype == h.dtype == (ember.float16 if device == "cuda" else ember.float32)
        out.float().square().sum().backward()
        results.append((out.float(), model.weight_hh_l0.grad))
    assert sorted(set(calls)) == [f"{base}_steps", f"{base}_steps_backward"]
    for got, want in zip(results[1], results[0]):
        _same(got, want, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("module, launcher, fn", [
    ("triton_rows", "softmax_backward_rows", F.softmax),
    ("triton_rows", "softmax_backward_rows", F.log_softmax),
    ("triton_pointwise", "silu_backward", None)])
def test_elementwise_gradient_kernels_are_used(overrides, monkeypatch, module, launcher, fn):
    used = _count_launches(monkeypatch, module, launcher)
    host, gpu = _pair((33, 70))
    weights = ember.randn(33, 70)
    grads = []
    for x in (host, gpu):
        x.requires_grad_()
        y = F.silu(x) if fn is None else fn(x, -1)
        (y * weights.to(x.device)).sum().backward()
        grads.append(x.grad)
    assert used
    _same(grads[1], grads[0], atol=1e-5, rtol=1e-5)


@pytest.fixture
def flash_calls(monkeypatch):
    """A list that gains an entry each time the flash-attention kernel runs."""
    calls = []
    from ember.backend.cuda_kernels import triton_attention
    kernel = triton_attention.attention_forward
    monkeypatch.setattr(triton_attention, "attention_forward",
                        lambda *args: calls.append(1) or kernel(*args))
    return calls


def test_flash_attention_follows_the_backends_switch(overrides, flash_calls):
    calls = flash_calls
    q = ember.randn(1, 2, 16, 16, device="cuda")
    F.scaled_dot_product_attention(q, q, q)
    ember.backends.cuda.enable_flash_sdp(False)
    try:
        F.scaled_dot_product_attention(q, q, q)
    finally:
        ember.backends.cuda.enable_flash_sdp(True)
    assert calls == [1]


def test_sdpa_kernel_picks_the_attention_path_on_a_gpu(overrides, flash_calls):
    from ember.nn.attention import SDPBackend, sdpa_kernel
    calls = flash_calls
    q = ember.randn(1, 2, 16, 16, device="cuda")
    with sdpa_kernel(SDPBackend.MATH):              # the generic path
        expected = F.scaled_dot_product_attention(q, q, q).cpu()
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        _same(F.scaled_dot_product_attention(q, q, q), expected, atol=1e-5, rtol=1e-5)
    assert calls == [1]
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):   # the generic path stands in
        _same(F.scaled_dot_product_attention(q, q, q), expected, atol=1e-5, rtol=1e-5)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):       # the kernel takes no float64
        with pytest.raises(RuntimeError, match="^No available kernel. Aborting execution.$"):
            F.scaled_dot_product_attention(q.double(), q.double(), q.double())
    assert calls == [1]


def _gpt_step(nn):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(50, 32), nn.Embedding(16, 32)
            self.ln1, self.ln2 = nn.LayerNorm(32), nn.LayerNorm(32)
            self.qkv, self.head = nn.Linear(32, 96), nn.Linear(32, 50)
            self.mlp = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32),
                                     nn.Dropout(0.1))

        def forward(self, idx):
            x = self.tok(idx) + self.pos(ember.arange(idx.shape[1], device=idx.device))
            q, k, v = (z.view(4, 16, 2, 16).transpose(1, 2)
                       for z in self.qkv(self.ln1(x)).split(32, dim=2))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + a.transpose(1, 2).reshape(4, 16, 32)
            return self.head(x + self.mlp(self.ln2(x))).view(-1, 50)
    return Block(), (4, 16), 50


def _flex_step(nn):
    from ember.nn.attention.flex_attention import create_block_mask, flex_attention

    class Attend(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.qkv, self.head = nn.Embedding(50, 32), nn.Linear(32, 96), \
                nn.Linear(32, 50)
            self.slopes = nn.Parameter(ember.tensor([0.5, 0.25]))
            self.mask = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, 16, 16,
                                          device="cuda", BLOCK_SIZE=8)

        def forward(self, idx):
            q, k, v = (z.view(4, 16, 2, 16).transpose(1, 2)
                       for z in self.qkv(self.tok(idx)).split(32, dim=2))
            alibi = lambda s, b, h, qi, kv: s - self.slopes[h] * (qi - kv)  # noqa: E731
            a = flex_attention(q, k, v, score_mod=alibi, block_mask=self.mask)
            return self.head(a.transpose(1, 2).reshape(4, 16, 32)).view(-1, 50)
    return Attend(), (4, 16), 50


def _conv_step(nn):
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.SiLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    return model, (4, 3, 8, 8), 10


def _lenet_step(nn):
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 3),
                          nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(6, 10))
    return model, (4, 1, 10, 10), 10


def _lstm_step(nn):
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.rnn, self.dec = nn.Embedding(30, 16), nn.LSTM(16, 16, 2), \
                nn.Linear(16, 30)

        def forward(self, idx):
            return self.dec(self.rnn(self.emb(idx))[0]).view(-1, 30)
    return LM(), (5, 3), 30


@pytest.mark.parametrize("make", [_gpt_step, _flex_step, _conv_step, _lenet_step, _lstm_step])
def test_a_training_step_never_waits_for_the_gpu(overrides, host_traffic, make):
    # a read of device values or an upload mid-step drains the GPU's queue of kernels
    model, shape, classes = make(ember.nn)
    model.cuda()
    opt = ember.optim.AdamW(model.parameters(), lr=1e-3)
    if len(shape) == 2:
        x = ember.randint(0, classes, shape, device="cuda")
    else:
        x = ember.randn(shape, device="cuda")
    y = ember.randint(0, classes, (model(x).shape[0],), device="cuda")
    for step in range(3):
        with host_traffic() as traffic:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        if step:                                    # the first step makes Adam's state
            assert not traffic, dict(traffic)


def test_a_segmentation_step_never_waits_for_the_gpu(overrides, host_traffic):
    # pooling down, bilinear upsampling, and a per-pixel cross entropy with label smoothing
    nn = ember.nn
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
                          nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Upsample(scale_factor=4, mode="bilinear"), nn.Conv2d(8, 5, 1))
    model.cuda()
    opt = ember.optim.AdamW(model.parameters(), lr=1e-3)
    x = ember.randn(2, 3, 8, 8, device="cuda")
    y = ember.randint(0, 5, (2, 8, 8), device="cuda")
    for step in range(3):
        with host_traffic() as traffic:
            opt.zero_grad()
            F.cross_entropy(model(x), y, label_smoothing=0.1).backward()
            opt.step()
        if step:
            assert not traffic, dict(traffic)
