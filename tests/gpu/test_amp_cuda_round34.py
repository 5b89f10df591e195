"""CUDA autocast and GradScaler on the GPU path, as the round-34 sweep of training programs
under ``autocast("cuda")`` (against ``autocast("cpu")``) found them: PyTorch 2.13's CUDA op
lists (ATen's autocast_mode.h) run huber_loss, logsumexp, the upsampling kernels and the
norms (without an explicit dtype) in float32 and linalg.vecdot in the autocast dtype, and
refuse binary_cross_entropy of GPU tensors; CTC's CPU targets follow GPU log_probs; vmap's
randomness rules hold for GPU draws. GradScaler behaves on the GPU as on the CPU."""

import math

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.cuda
F = ember.nn.functional


def _dtype(fn):
    with ember.autocast("cuda", dtype=ember.float16):
        return fn().dtype


@pytest.fixture
def half():
    ember.manual_seed(0)
    return ember.randn(2, 3, 4, 4, device="cuda").half()


@pytest.mark.parametrize("name,fn", [
    ("huber_loss", lambda a: F.huber_loss(a, a.flip(0))),
    ("logsumexp", lambda a: ember.logsumexp(a, 0)),
    ("vector_norm", lambda a: ember.linalg.vector_norm(a)),
    ("matrix_norm", lambda a: ember.linalg.matrix_norm(a)),
    ("linalg.norm", lambda a: ember.linalg.norm(a[0, 0])),
    ("norm", lambda a: ember.norm(a)),
    ("nearest", lambda a: F.interpolate(a, scale_factor=2)),
    ("nearest-exact", lambda a: F.interpolate(a, size=(3, 5), mode="nearest-exact")),
    ("bilinear", lambda a: F.interpolate(a, scale_factor=2, mode="bilinear")),
    ("bilinear-aa", lambda a: F.interpolate(a, size=(3, 3), mode="bilinear", antialias=True)),
    ("bicubic", lambda a: F.interpolate(a, scale_factor=2, mode="bicubic")),
    ("linear", lambda a: F.interpolate(a[0], scale_factor=2, mode="linear")),
    ("trilinear", lambda a: F.interpolate(a[None], scale_factor=2, mode="trilinear")),
])
def test_cuda_autocast_runs_these_in_float32(half, name, fn):
    # they ran in float16 (ember's CUDA list lacked them); PyTorch's lists them as fp32
    assert _dtype(lambda: fn(half)) == ember.float32, name
    with ember.autocast("cuda", dtype=ember.float16):
        got = fn(half)
    np.testing.assert_allclose(got.cpu().numpy(), fn(half.float()).cpu().numpy(),
                               rtol=1e-6, atol=1e-6)


def test_cuda_autocast_keeps_area_and_explicit_dtypes(half):
    # "area" is an adaptive average pool (not listed); a norm given dtype= is left alone
    assert _dtype(lambda: F.interpolate(half, scale_factor=2, mode="area")) == ember.float16
    assert _dtype(lambda: ember.linalg.vector_norm(half, dtype=ember.float16)) == ember.float16
    assert _dtype(lambda: ember.linalg.vector_norm(half, dtype=ember.float64)) == ember.float64
    assert _dtype(lambda: ember.linalg.norm(half[0, 0], dtype=ember.float16)) == ember.float16
    # on the CPU's list vector_norm is not listed: it stays float16 there
    with ember.autocast("cpu", dtype=ember.float16):
        assert ember.linalg.vector_norm(half.cpu()).dtype == ember.float16


def test_cuda_autocast_lowers_vecdot():
    x = ember.randn(3, 4, device="cuda")
    assert _dtype(lambda: ember.linalg.vecdot(x, x)) == ember.float16
    with ember.autocast("cuda", dtype=ember.float16):
        got = ember.linalg.vecdot(x, x)
    np.testing.assert_allclose(got.float().cpu().numpy(), (x * x).sum(-1).cpu().numpy(),
                               rtol=2e-3)


def test_binary_cross_entropy_is_refused_under_cuda_autocast():
    x, y = ember.rand(4, device="cuda"), ember.rand(4, device="cuda")
    with ember.autocast("cuda"):
        for call in (lambda: F.binary_cross_entropy(x, y),
                     lambda: ember.nn.BCELoss()(x.double(), y.double())):
            with pytest.raises(RuntimeError, match=r"^torch.nn.functional.binary_cross_entropy "
                               r"and torch.nn.BCELoss are unsafe to autocast.\nMany models "
                               r"use a sigmoid layer.*\nIn this case, combine the two layers "
                               r"using torch.nn.functional.binary_cross_entropy_with_logits\n"
                               r"or torch.nn.BCEWithLogitsLoss.  .*\nsafe to autocast."):
                call()
        want = F.binary_cross_entropy(x.cpu(), y.cpu())     # CPU tensors: no GPU kernel
        assert F.binary_cross_entropy_with_logits(x, y).dtype == ember.float32
    with ember.autocast("cpu"):
        got = F.binary_cross_entropy(x, y)
    assert math.isclose(got.item(), want.item(), rel_tol=1e-6)


@pytest.mark.parametrize("on_gpu", [(), ("targets",), ("lengths",), ("targets", "lengths")])
def test_ctc_loss_takes_cpu_targets_and_lengths_with_gpu_log_probs(on_gpu):
    # CPU targets met GPU log_probs in one kernel (a device error); PyTorch moves them there
    ember.manual_seed(0)
    lp = ember.randn(8, 3, 6).log_softmax(2)
    targets, lengths = ember.randint(1, 6, (3, 4)), (ember.full((3,), 8), ember.full((3,), 4))
    want = F.ctc_loss(lp.requires_grad_(), targets, *lengths)
    want.backward()
    gpu = lp.detach().cuda().requires_grad_()
    targets = targets.cuda() if "targets" in on_gpu else targets
    lengths = [t.cuda() for t in lengths] if "lengths" in on_gpu else lengths
    got = F.ctc_loss(gpu, targets, *lengths)
    got.backward()
    assert got.device.type == "cuda"
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    np.testing.assert_allclose(gpu.grad.cpu().numpy(), lp.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("draw", [lambda z: z + ember.randn_like(z),
                                  lambda z: z + ember.rand((), device=z.device),
                                  lambda z: z + ember.rand(3, device=z.device)])
def test_vmap_randomness_rules_hold_for_gpu_draws(draw):
    # GPU draws skipped vmap's watch: no error by default, tied rows for "different"
    z = ember.zeros(4, 3, device="cuda")
    with pytest.raises(RuntimeError, match="vmap: called random operation while in "
                                           "randomness error mode"):
        ember.func.vmap(draw)(z)
    different = ember.func.vmap(draw, randomness="different")(z)
    same = ember.func.vmap(draw, randomness="same")(z)
    assert not ember.equal(different[0], different[3])
    assert ember.equal(same[0], same[3])
    ember.manual_seed(3)
    once = ember.func.vmap(draw, randomness="different")(z)
    ember.manual_seed(3)
    assert ember.equal(once, ember.func.vmap(draw, randomness="different")(z))


def test_vmap_watches_the_philox_kernel_draws(monkeypatch):
    # with the CUDA kernels, draws skip the NumPy stream: vmap checks them all the same
    from ember import _random
    from ember.backend import DEVICE_KERNELS
    calls = []

    def draw(cupy, shape, dtype, seed, offset, kind="uniform", low=0.0, high=1.0):
        calls.append(shape)
        return cupy.full(shape, float(offset), dtype)
    monkeypatch.setitem(DEVICE_KERNELS, "random", draw)
    z = ember.zeros(4, 3, device="cuda")
    with pytest.raises(RuntimeError, match="randomness error mode"):
        ember.func.vmap(lambda z: z + ember.rand(3, device="cuda"))(z)
    assert calls == []
    out = ember.func.vmap(lambda z: z + ember.rand(3, device="cuda"), randomness="different")(z)
    assert len(calls) == 4 and len({tuple(r.tolist()) for r in out.cpu()}) == 4
    assert _random._drawn_on_device(None, (2,), ember.float32, ember.device("cuda:0")) \
        is not None


# --- GradScaler: the GPU as the CPU -----------------------------------------------------------

def _scaled_training(device, steps=6, poison=(2,), clip=None, dtype=ember.float16):
    """A small MLP trained with autocast and a GradScaler on ``device``; gradients poisoned
    with inf at the steps in ``poison``. Returns the scale history, which steps ran, the
    final weights and the scaler's state_dict."""
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.Tanh(),
                                ember.nn.Linear(8, 1)).to(device)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    scaler = ember.amp.GradScaler(device, init_scale=2.0 ** 10, growth_interval=2)
    x = ember.linspace(-1, 1, 24).view(6, 4).to(device)
    y = x.sum(1, keepdim=True).sin()
    scales, stepped = [], []
    for i in range(steps):
        opt.zero_grad()
        with ember.autocast(device, dtype=dtype):
            loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        if i in poison:
            model[0].weight.grad[0, 0] = math.inf
        if clip is not None:
            scaler.unscale_(opt)
            ember.nn.utils.clip_grad_norm_(model.parameters(), clip)
        before = model[2].weight.detach().clone()
        scaler.step(opt)
        scaler.update()
        stepped.append(not ember.equal(before, model[2].weight.detach()))
        scales.append(scaler.get_scale())
    return scales, stepped, [p.detach().cpu() for p in model.parameters()], scaler.state_dict()


@pytest.mark.parametrize("clip", [None, 0.5])
@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
def test_grad_scaler_on_the_gpu_skips_and_scales_as_on_the_cpu(clip, dtype):
    cpu = _scaled_training("cpu", clip=clip, dtype=dtype)
    gpu = _scaled_training("cuda", clip=clip, dtype=dtype)
    # poisoned step 2 is skipped and halves the scale; two clean steps double it (PyTorch's
    # GradScaler("cpu") gives these values)
    assert cpu[0] == gpu[0] == [1024.0, 2048.0, 1024.0, 1024.0, 2048.0, 2048.0]
    assert cpu[1] == gpu[1] == [True, True, False, True, True, True]
    assert cpu[3] == gpu[3] == {"scale": 2048.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                                "growth_interval": 2, "_growth_tracker": 1}
    # the lists differ (CUDA runs tanh's input matmul alike, mse_loss in float32 on both)
    for c, g in zip(cpu[2], gpu[2]):
        np.testing.assert_allclose(g.numpy(), c.numpy(), rtol=2e-2, atol=2e-3)


def test_grad_scaler_state_dict_round_trip_on_the_gpu():
    _, _, _, state = _scaled_training("cuda", steps=3)
    fresh = ember.amp.GradScaler("cuda")
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state and fresh.get_scale() == state["scale"]
    loss = ember.ones((), device="cuda", dtype=ember.float16)
    scaled = fresh.scale(loss)
    assert scaled.device.type == "cuda" and scaled.dtype == ember.float32
    assert scaled.item() == state["scale"]
    fresh.update(ember.full((), 8.0, device="cuda"))
    assert fresh.get_scale() == 8.0
    with pytest.raises(AssertionError, match="new_scale should be a float or a 1-element"):
        fresh.update(ember.full((), 8.0))       # a CPU tensor for a CUDA scaler


def test_grad_scaler_refuses_float16_gradients_on_the_gpu():
    p = ember.nn.Parameter(ember.ones(3, device="cuda", dtype=ember.float16))
    opt = ember.optim.SGD([p], lr=1.0)
    scaler = ember.amp.GradScaler("cuda")
    scaler.scale(p.float().sum()).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients."):
        scaler.unscale_(opt)
