"""Training on a GPU: the same steps give the CPU's parameters, and mixed precision
(autocast on cuda, GradScaler) behaves as PyTorch's."""

import copy
import os
import pathlib
import runpy

import pytest

import ember
import ember.nn.functional as F
from ember import nn
from ember.testing import assert_close

pytestmark = pytest.mark.cuda


def _mlp():
    return nn.Sequential(nn.Linear(12, 16), nn.BatchNorm1d(16), nn.ReLU(),
                         nn.Linear(16, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 3))


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 2 * 2, 3))


def _train_on_both(make, optimizer, shape):
    """Parameters after three steps of the same float64 model on the CPU and on the GPU."""
    ember.manual_seed(0)
    cpu = make().double()
    gpu = copy.deepcopy(cpu).cuda()
    assert all(p.is_cuda for p in gpu.parameters()) and all(b.is_cuda for b in gpu.buffers())
    opts = [optimizer(m.parameters(), lr=0.05) for m in (cpu, gpu)]
    x, y = ember.randn(shape, dtype=ember.float64), ember.randint(0, 3, (shape[0],))
    for _ in range(3):
        for model, opt, dev in ((cpu, opts[0], "cpu"), (gpu, opts[1], "cuda")):
            loss = F.cross_entropy(model(x.to(dev)), y.to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
    for (name, p), q in zip(cpu.state_dict().items(), gpu.state_dict().values()):
        assert q.is_cuda
        assert_close(q.cpu(), p, rtol=1e-9, atol=1e-10, msg=lambda m: f"{name}: {m}")


def _adafactor(params, lr):
    """Adafactor with an eps1 above rounding noise: a bias BatchNorm cancels has gradients of
    about 1e-17, which Adafactor's scale-free update would otherwise take at full size."""
    return ember.optim.Adafactor(params, lr=lr, eps=(1e-6, 1e-3))


def _adam(optimizer):
    """Adam or AdamW with an eps above rounding noise, for Adafactor's reason: its update
    divides the BatchNorm-cancelled bias gradients (about 1e-17) by their own size."""
    def make(params, lr):
        return optimizer(params, lr=lr, eps=1e-6)
    return make


def _muon(params, lr):
    """Muon on the matrices (it takes no others; the rest stay as they are)."""
    return ember.optim.Muon([p for p in params if p.dim() == 2], lr=lr)


@pytest.mark.parametrize("optimizer", [ember.optim.SGD, _adam(ember.optim.Adam),
                                       _adam(ember.optim.AdamW), _adafactor, _muon],
                         ids=["SGD", "Adam", "AdamW", "Adafactor", "Muon"])
def test_mlp_training_steps_on_the_gpu_match_the_cpu(optimizer):
    _train_on_both(_mlp, optimizer, (8, 12))


def test_cnn_training_steps_on_the_gpu_match_the_cpu():
    _train_on_both(_cnn, ember.optim.SGD, (8, 1, 4, 4))


def test_autocast_on_cuda_uses_pytorchs_lists():
    a = ember.randn(4, 4, device="cuda")
    with ember.autocast("cuda"):
        assert ember.is_autocast_enabled("cuda")
        assert (a @ a).dtype is ember.float16
        assert F.softmax(a @ a, -1).dtype is ember.float32
        assert nn.Linear(4, 2).cuda()(a).dtype is ember.float16
    with ember.autocast("cuda", dtype=ember.bfloat16):
        assert (a @ a).dtype is ember.bfloat16
    with ember.autocast("cpu"):
        assert (a @ a).dtype is ember.float32            # only the CPU is autocast


def test_cuda_autocast_runs_rms_norm_in_float32_without_the_mixed_dtype_warning():
    """PyTorch's CUDA autocast lists rms_norm with layer_norm (float32): a float16 input and
    a float32 weight are both cast, so its fused kernel's mixed-dtype warning does not fire
    (as it does outside autocast)."""
    import warnings
    x = ember.randn(2, 4, device="cuda").half()
    rms = nn.RMSNorm(4, device="cuda")
    ember.set_warn_always(True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with ember.autocast("cuda"):
                outs = [F.rms_norm(x, (4,), rms.weight), rms(x)]
        with pytest.warns(UserWarning, match="Mismatch dtype between input and weight"):
            assert rms(x).dtype is ember.float16
    finally:
        ember.set_warn_always(False)
    expected = F.rms_norm(x.float(), (4,), rms.weight)
    for out in outs:
        assert out.dtype is ember.float32
        assert_close(out, expected, rtol=0, atol=0)


def test_bfloat16_autocast_trains_like_float32():
    losses = {}
    for amp in (False, True):
        ember.manual_seed(0)
        model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 1)).cuda()
        opt = ember.optim.AdamW(model.parameters(), lr=1e-2)
        x = ember.randn(256, 32, device="cuda")
        y = (x[:, :4].sum(1, keepdim=True)).tanh()
        for _ in range(60):
            with ember.autocast("cuda", dtype=ember.bfloat16, enabled=amp):
                loss = F.mse_loss(model(x).float(), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses[amp] = loss.item()
    assert losses[False] < 0.05 and losses[True] < 2 * losses[False] + 0.01, losses


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1",
                    reason="minutes interpreted; the float16 step kernels are checked in "
                           "test_cuda_kernels.py")
def test_float16_autocast_trains_an_lstm_like_float32():
    # the recurrence runs in float16 (as cuDNN's under autocast), with a GradScaler
    losses = {}
    for amp in (False, True):
        ember.manual_seed(0)
        emb, rnn, head = nn.Embedding(12, 16).cuda(), nn.LSTM(16, 32).cuda(), \
            nn.Linear(32, 12).cuda()
        params = [*emb.parameters(), *rnn.parameters(), *head.parameters()]
        opt = ember.optim.Adam(params, lr=1e-2)
        scaler = ember.amp.GradScaler("cuda", enabled=amp)
        tokens = ember.randint(0, 12, (8, 16), device="cuda")
        target = (tokens * 5 + 1) % 12
        for _ in range(40):
            with ember.autocast("cuda", dtype=ember.float16, enabled=amp):
                out, _ = rnn(emb(tokens))
                assert out.dtype == (ember.float16 if amp else ember.float32)
                loss = F.cross_entropy(head(out).reshape(-1, 12), target.reshape(-1))
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        losses[amp] = loss.item()
    assert losses[False] < 0.5 and losses[True] < 1.5 * losses[False] + 0.05, losses


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1",
                    reason="minutes interpreted; the kernels are checked in test_cuda_kernels.py")
@pytest.mark.parametrize("amp", ["float32", "bfloat16", "float16"])
def test_the_gpt_example_trains_on_the_gpu(amp, capsys):
    example = runpy.run_path(str(pathlib.Path(__file__).parents[2] / "examples/char_gpt.py"))
    losses, sample = example["main"](
        ["--device", "cuda", "--amp", amp, "--steps", "15", "--batch-size", "8", "--context",
         "32", "--dim", "32", "--layers", "1", "--sample", "10", "--log-every", "15",
         "--module", "string"])
    assert sum(losses[-5:]) / 5 < losses[0] - 0.3
    assert sample.startswith("def ") and len(sample) == 14
    assert f"on cuda, {amp}" in capsys.readouterr().out


def test_grad_scaler_skips_steps_with_inf_gradients():
    model = nn.Linear(4, 1).cuda()
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    scaler = ember.amp.GradScaler("cuda", init_scale=2.0 ** 10)
    assert scaler.is_enabled()
    before = model.weight.detach().clone()
    with ember.autocast("cuda"):
        loss = model(ember.randn(8, 4, device="cuda")).float().pow(2).mean()
    scaler.scale(loss).backward()
    model.weight.grad[0, 0] = float("inf")
    scaler.step(opt)
    scaler.update()
    assert ember.equal(model.weight.detach(), before) and scaler.get_scale() == 2.0 ** 9
    opt.zero_grad()
    with ember.autocast("cuda"):
        loss = model(ember.randn(8, 4, device="cuda")).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert not ember.equal(model.weight.detach(), before)


def test_a_grad_scaler_step_reads_the_gpu_once(host_traffic):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)).cuda()
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    scaler = ember.amp.GradScaler("cuda")
    x = ember.randn(8, 4, device="cuda")
    for _ in range(2):
        with host_traffic() as traffic:
            opt.zero_grad()
            with ember.autocast("cuda"):
                loss = model(x).float().pow(2).mean()
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            scaler.step(opt)                        # reads the inf/NaN flag: PyTorch does too
            scaler.update()
        assert sum(traffic.values()) == 1, dict(traffic)


@pytest.mark.parametrize("loss", [
    lambda out, y: F.nll_loss(F.log_softmax(out, dim=1), y),
    lambda out, y: F.nll_loss(F.log_softmax(out, dim=1), y, weight=ember.ones(3, device="cuda"),
                              ignore_index=0),
    lambda out, y: F.binary_cross_entropy(out.sigmoid(),
                                          (y > 0).float().unsqueeze(1).expand(-1, 3)),
    lambda out, y: out.gather(1, y.unsqueeze(1)).square().mean(),
], ids=["nll_loss", "weighted_nll_loss", "binary_cross_entropy", "gather"])
def test_index_checks_in_a_step_do_not_wait_for_the_gpu(host_traffic, loss):
    model = nn.Linear(4, 3).cuda()
    x, y = ember.randn(8, 4, device="cuda"), ember.randint(0, 3, (8,), device="cuda")
    loss(model(x), y).backward()
    with host_traffic() as traffic:
        loss(model(x), y).backward()
    assert not traffic, dict(traffic)


@pytest.mark.parametrize("layer", [
    lambda x: F.cross_entropy(x.flatten(1), ember.softmax(x.flatten(1).detach() * 2, -1)),
    lambda x: F.adaptive_max_pool2d(x, (3, 4)),                     # unequal windows
    lambda x: F.max_pool3d(x[None], 2),
    lambda x: F.avg_pool3d(x[None], 2),
    lambda x: F.interpolate(x[None], scale_factor=1.5, mode="trilinear"),
], ids=["cross_entropy probabilities", "adaptive_max_pool2d", "max_pool3d", "avg_pool3d",
        "trilinear"])
def test_data_dependent_branches_do_not_wait_for_the_gpu(host_traffic, layer):
    # where the CPU reads the data to pick a path (a NaN? an underflow? an infinity?), a GPU
    # takes the path that is right either way, and matches the CPU's result
    ember.manual_seed(0)
    host = ember.randn(2, 4, 7, 9)
    host[0, 0, 1, 1] = float("nan")
    outs = []
    for x in (host.clone().requires_grad_(), host.cuda().requires_grad_()):
        out = layer(x)
        out = out[0] if isinstance(out, tuple) else out
        out.nan_to_num().sum().backward()
        outs.append((out, x.grad))
    x = host.cuda().requires_grad_()
    with host_traffic() as traffic:
        out = layer(x)
        (out[0] if isinstance(out, tuple) else out).nan_to_num().sum().backward()
    assert not traffic, dict(traffic)
    for got, want in zip(outs[1], outs[0]):
        assert_close(got.detach().cpu(), want.detach(), equal_nan=True, atol=1e-5, rtol=1e-5)
