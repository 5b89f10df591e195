"""Training recipes written the way their popular repositories write them, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights and data:
sharpness-aware minimization as an Optimizer subclass with mixup/cutmix and label smoothing,
and quantization-aware training by hand (fake quantization, observers, straight-through
rounding, LSQ and PACT), with the fake-quantization kernels checked against PyTorch's
roundings, gradients and errors. More recipes (TabNet, an optimizer zoo, distillation) are in
test_parity_programs_round20_recipes_zoo.py.

Random draws (Beta, randperm) do not follow PyTorch's streams, so the programs draw the values
that steer training from NumPy and compare only properties of the libraries' own samples."""

import copy

import numpy as np
import pytest

import ember
from tests.parity._compare import error
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def sam_optimizer(torch):
    """davda54/sam's SAM optimizer class (ASAM with adaptive=True) for ``torch``: an
    Optimizer wrapping a base optimizer class (shared by the programs that train with it)."""
    class SAM(torch.optim.Optimizer):
        def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
            if not rho >= 0.0:
                raise ValueError(f"Invalid rho, should be non-negative: {rho}")
            defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
            super().__init__(params, defaults)
            self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
            self.param_groups = self.base_optimizer.param_groups
            self.defaults.update(self.base_optimizer.defaults)

        @torch.no_grad()
        def first_step(self, zero_grad=False):
            grad_norm = self._grad_norm()
            for group in self.param_groups:
                scale = group["rho"] / (grad_norm + 1e-12)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    self.state[p]["old_p"] = p.data.clone()
                    e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                    p.add_(e_w)
            if zero_grad:
                self.zero_grad()

        @torch.no_grad()
        def second_step(self, zero_grad=False):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.data = self.state[p]["old_p"]
            self.base_optimizer.step()
            if zero_grad:
                self.zero_grad()

        @torch.no_grad()
        def step(self, closure=None):
            assert closure is not None, "SAM requires closure, but it was not provided"
            closure = torch.enable_grad()(closure)
            self.first_step(zero_grad=True)
            closure()
            self.second_step()

        def _grad_norm(self):
            shared_device = self.param_groups[0]["params"][0].device
            return torch.norm(torch.stack([
                ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2)
                .to(shared_device)
                for group in self.param_groups for p in group["params"]
                if p.grad is not None]), p=2)

        def load_state_dict(self, state_dict):
            super().load_state_dict(state_dict)
            self.base_optimizer.param_groups = self.param_groups

    return SAM


def sam_program(torch):
    """SAM (davda54/sam's class) around SGD, trained on mixup and cutmix batches."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(20)

    SAM = sam_optimizer(torch)

    class Net(nn.Module):
        def __init__(self, classes=5):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.fc = nn.Linear(4, classes)

        def forward(self, x):
            x = F.relu(self.bn(self.conv(x)))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    def one_hot(x, num_classes, on_value=1.0, off_value=0.0):
        x = x.long().view(-1, 1)
        return torch.full((x.size()[0], num_classes), off_value).scatter_(1, x, on_value)

    def rand_bbox(size, lam, cx, cy):
        W, H = size[2], size[3]
        cut_rat = np.sqrt(1.0 - lam)
        cut_w, cut_h = int(W * cut_rat), int(H * cut_rat)
        bbx1, bby1 = np.clip(cx - cut_w // 2, 0, W), np.clip(cy - cut_h // 2, 0, H)
        bbx2, bby2 = np.clip(cx + cut_w // 2, 0, W), np.clip(cy + cut_h // 2, 0, H)
        return int(bbx1), int(bby1), int(bbx2), int(bby2)

    res = {}
    # the libraries' own draws: their properties, and reproducibility under manual_seed
    beta = torch.distributions.Beta(torch.tensor([0.4]), torch.tensor([0.4]))
    torch.manual_seed(3)
    lam_a = beta.sample()
    perm_a = torch.randperm(6)
    torch.manual_seed(3)
    lam_b, perm_b = beta.sample(), torch.randperm(6)
    res["draws"] = [bool(lam_a == lam_b), bool((perm_a == perm_b).all()),
                    bool(0 < lam_a.item() < 1), sorted(perm_a.tolist()) == list(range(6)),
                    _name(lam_a.dtype), _name(perm_a.dtype), str(tuple(lam_a.shape)),
                    str(tuple(beta.rsample((2,)).shape)), str(tuple(beta.batch_shape))]
    res["beta_stats"] = [beta.mean.item(), beta.variance.item(),
                         beta.log_prob(torch.tensor([0.3])).item(), beta.entropy().item()]

    torch.manual_seed(0)
    model = Net()
    fill_(torch, model, rng, 0.4)
    x = normal(torch, rng, 6, 3, 6, 6)
    y = torch.from_numpy(rng.integers(0, 5, 6))
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    opt = SAM(model.parameters(), torch.optim.SGD, rho=0.05, adaptive=True, lr=0.1,
              momentum=0.9, weight_decay=5e-4, nesterov=True)
    res["defaults"] = sorted(opt.defaults)
    res["group_keys"] = sorted(opt.param_groups[0])
    res.update(loss=[], norm=[])
    for step in range(4):
        lam = float(rng.beta(0.4, 0.4))
        index = torch.from_numpy(rng.permutation(6))
        if step % 2 == 0:       # mixup: hard-label losses mixed by lam
            mixed = lam * x + (1 - lam) * x.index_select(0, index)
            y_a, y_b = y, y[index]

            def closure():
                out = model(mixed)
                loss = lam * criterion(out, y_a) + (1 - lam) * criterion(out, y_b)
                loss.backward()
                return loss
        else:                   # cutmix: soft one-hot targets
            x1, y1, x2, y2 = rand_bbox(x.size(), lam, int(rng.integers(6)), int(rng.integers(6)))
            mixed = x.clone()
            mixed[:, :, x1:x2, y1:y2] = x[index, :, x1:x2, y1:y2]
            lam = 1 - ((x2 - x1) * (y2 - y1) / (x.size()[-1] * x.size()[-2]))
            off = 0.1 / 5
            target = (one_hot(y, 5, 1 - 0.1 + off, off) * lam
                      + one_hot(y[index], 5, 1 - 0.1 + off, off) * (1 - lam))

            def closure():
                out = model(mixed)
                loss = torch.sum(-target * F.log_softmax(out, dim=-1), dim=-1).mean()
                loss.backward()
                return loss
        loss = closure()
        total = nn.utils.clip_grad_norm_(model.parameters(), max_norm=2.0, norm_type=2.0,
                                         error_if_nonfinite=True, foreach=True)
        opt.step(closure)
        opt.zero_grad()
        res["loss"].append(loss.item())
        res["norm"].append(total.item())
    res["params"] = torch.cat([p.detach().flatten() for p in model.parameters()])
    res["running"] = torch.cat([model.bn.running_mean, model.bn.running_var])
    res["tracked"] = [int(model.bn.num_batches_tracked)]
    # probability targets with label smoothing, as F.cross_entropy takes them
    with torch.no_grad():
        probs = F.softmax(normal(torch, rng, 6, 5), dim=1)
        res["soft_ce"] = [F.cross_entropy(model(x), probs, label_smoothing=0.2).item(),
                          F.cross_entropy(model(x), y, label_smoothing=0.2,
                                          reduction="sum").item()]
    # state_dict round trip, base optimizer sharing the loaded groups
    extra = nn.Parameter(torch.ones(3))
    opt.add_param_group({"params": [extra], "rho": 0.1})
    res["added_group"] = sorted(f"{k}={v}" for k, v in opt.param_groups[1].items()
                                if k != "params")
    res["shared_groups"] = [opt.base_optimizer.param_groups is opt.param_groups]
    sd = opt.state_dict()
    res["sd_state"] = [str(k) + ":" + ",".join(sorted(v)) for k, v in sd["state"].items()]
    res["sd_groups"] = [str(g["params"]) for g in sd["param_groups"]]
    res["base_state"] = [",".join(sorted(v)) for v in opt.base_optimizer.state.values()]
    clone = copy.deepcopy(model)
    opt2 = SAM(clone.parameters(), torch.optim.SGD, rho=0.5, lr=0.5, momentum=0.9)
    opt2.add_param_group({"params": [nn.Parameter(torch.zeros(3))]})
    opt2.load_state_dict(sd)
    res["loaded_rho"] = [opt2.param_groups[0]["rho"], opt2.param_groups[1]["rho"],
                         opt2.base_optimizer.param_groups[0]["lr"]]
    res["loaded_shared"] = [opt2.base_optimizer.param_groups is opt2.param_groups]
    res["loaded_old_p"] = opt2.state[next(clone.parameters())]["old_p"]
    # a non-finite gradient norm refuses to clip
    bad = nn.Parameter(torch.ones(2))
    bad.grad = torch.tensor([1.0, float("inf")])
    res["nonfinite"] = list(error(lambda lib: nn.utils.clip_grad_norm_(
        [bad], 1.0, error_if_nonfinite=True, foreach=True), torch))
    res["nonfinite_ok"] = [nn.utils.clip_grad_norm_([bad], 1.0, foreach=True).item()]
    res["nonfinite_grad"] = bad.grad
    res["inf_norm"] = [nn.utils.clip_grad_norm_(model.parameters(), 1.0, norm_type="inf",
                                                foreach=True).item()]
    return res


def qat_program(torch):
    """Quantization-aware training by hand: observers, fake quantization, straight-through
    rounding, batch norm folding and an int8 inference path."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(21)
    qmin, qmax = torch.iinfo(torch.int8).min, torch.iinfo(torch.int8).max

    class RoundSTE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return torch.round(x)

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output

    class MovingAverageMinMaxObserver(nn.Module):
        def __init__(self, averaging_constant=0.1, ch_axis=None):
            super().__init__()
            self.averaging_constant = averaging_constant
            self.ch_axis = ch_axis
            self.register_buffer("min_val", torch.tensor(float("inf")))
            self.register_buffer("max_val", torch.tensor(float("-inf")))
            self.register_buffer("eps", torch.tensor([torch.finfo(torch.float32).eps]))

        def forward(self, x_orig):
            if x_orig.numel() == 0:
                return x_orig
            x = x_orig.detach().to(self.min_val.dtype)
            if self.ch_axis is None:
                min_val_cur, max_val_cur = torch.aminmax(x)
            else:
                y = torch.flatten(x.transpose(0, self.ch_axis), start_dim=1)
                min_val_cur, max_val_cur = torch.aminmax(y, dim=1)
            if self.min_val.numel() != min_val_cur.numel() or torch.isinf(self.min_val).all():
                min_val, max_val = min_val_cur, max_val_cur
            else:
                min_val = self.min_val + self.averaging_constant * (min_val_cur - self.min_val)
                max_val = self.max_val + self.averaging_constant * (max_val_cur - self.max_val)
            self.min_val.resize_(min_val.shape)
            self.max_val.resize_(max_val.shape)
            self.min_val.copy_(min_val)
            self.max_val.copy_(max_val)
            return x_orig

        @torch.jit.export
        def calculate_qparams(self, symmetric):
            min_val_neg = torch.min(self.min_val, torch.zeros_like(self.min_val))
            max_val_pos = torch.max(self.max_val, torch.zeros_like(self.max_val))
            zero_point = torch.zeros(min_val_neg.size(), dtype=torch.int64)
            if symmetric:
                max_val_pos = torch.max(-min_val_neg, max_val_pos)
                scale = max_val_pos / (float(qmax - qmin) / 2)
                scale = torch.max(scale, self.eps)
            else:
                scale = (max_val_pos - min_val_neg) / float(qmax - qmin)
                scale = torch.max(scale, self.eps)
                zero_point = qmin - torch.round(min_val_neg / scale).to(torch.int)
                zero_point = torch.clamp(zero_point, qmin, qmax)
            return scale, zero_point

    class QATLinear(nn.Linear):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.act_obs = MovingAverageMinMaxObserver()
            self.w_obs = MovingAverageMinMaxObserver(averaging_constant=1.0, ch_axis=0)

        def forward(self, x):
            self.act_obs(x)
            scale, zp = self.act_obs.calculate_qparams(symmetric=False)
            xq = torch.fake_quantize_per_tensor_affine(x, scale, zp, qmin, qmax)
            self.w_obs(self.weight)
            w_scale, w_zp = self.w_obs.calculate_qparams(symmetric=True)
            wq = torch.fake_quantize_per_channel_affine(
                self.weight, w_scale, w_zp.to(torch.int32), 0, qmin, qmax)
            return F.linear(xq, wq, self.bias)

    class STEConv(nn.Conv2d):
        """Weights rounded to 4 bits with x + (q - x).detach(), and BN folded in."""
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.bn = nn.BatchNorm2d(self.out_channels)

        def forward(self, x):
            if self.training:
                self.bn(F.conv2d(x, self.weight, None, self.stride, self.padding))
            std = torch.sqrt(self.bn.running_var + self.bn.eps)
            w = self.weight * (self.bn.weight / std).reshape(-1, 1, 1, 1)
            b = self.bn.bias - self.bn.weight * self.bn.running_mean / std
            s = w.detach().abs().amax(dim=(1, 2, 3), keepdim=True).clamp(min=1e-8) / 7
            q = torch.clamp(torch.round(w / s), -8, 7) * s
            w_q = w + (q - w).detach()
            return F.conv2d(x, w_q, b, self.stride, self.padding)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = STEConv(2, 3, 3, padding=1, bias=False)
            self.fc1 = QATLinear(12, 8)
            self.fc2 = QATLinear(8, 3)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv(x)), 2)
            x = torch.flatten(x, 1)
            return self.fc2(F.relu6(self.fc1(x)))

    res = {}
    # the fake-quantize primitives: values, and gradients straight through within range
    v = torch.linspace(-2, 2, 17, requires_grad=True)
    fq = torch.fake_quantize_per_tensor_affine(v, 0.15, 3, -10, 10)
    fq.sum().backward()
    res["fq_tensor"] = fq
    res["fq_grad"] = v.grad
    res["fq_node"] = [type(fq.grad_fn).__name__]
    v.grad = None
    fq = torch.fake_quantize_per_tensor_affine(v, torch.tensor(0.15), torch.tensor(3), -10, 10)
    (fq * torch.arange(17.0)).sum().backward()
    res["fq_qparams"] = fq
    res["fq_qparams_grad"] = v.grad
    res["fq_qparams_node"] = [type(fq.grad_fn).__name__, len(fq.grad_fn.next_functions)]
    w = normal(torch, rng, 3, 5).requires_grad_()
    fqc = torch.fake_quantize_per_channel_affine(
        w, torch.tensor([0.1, 0.2, 0.05]), torch.tensor([0, 2, -3], dtype=torch.int32), 0, -8, 7)
    fqc.backward(torch.ones_like(fqc))
    res["fq_channel"] = fqc
    res["fq_channel_grad"] = w.grad
    res["fq_channel_node"] = [type(fqc.grad_fn).__name__]
    res["fq_channel_float_zp"] = torch.fake_quantize_per_channel_affine(
        w.detach().t(), torch.tensor([0.1, 0.2, 0.05, 0.3, 0.1]),
        torch.tensor([0.5, -1.0, 0.25, 0.0, 2.0]), 0, 0, 15)
    ste = RoundSTE.apply(v * 3)
    ste.sum().backward()
    res["ste"] = [ste, v.grad]
    mn, mx = torch.aminmax(w.detach(), dim=1, keepdim=True)
    res["aminmax"] = [mn, mx]
    res["aminmax_shape"] = [str(tuple(mn.shape)), type(torch.aminmax(w)).__name__]

    torch.manual_seed(0)
    model = Net()
    fill_(torch, model, rng, 0.4)
    x = normal(torch, rng, 8, 2, 4, 4)
    y = torch.from_numpy(rng.integers(0, 3, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    res["buffers"] = [n for n, _ in model.named_buffers()]
    res.update(loss=[], act_scale=[], zero_point=[])
    model.train()
    for step in range(4):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        scale, zp = model.fc1.act_obs.calculate_qparams(symmetric=False)
        res["act_scale"].append(scale.item())
        res["zero_point"].append(int(zp))
        if step == 1:       # freeze the batch norm statistics, as QAT recipes do late
            model.conv.bn.eval()
    res["zp_dtype"] = [_name(zp.dtype), _name(model.fc1.w_obs.min_val.dtype)]
    res["observed"] = [model.fc1.w_obs.min_val, model.fc1.w_obs.max_val]
    res["grads"] = [p.grad for p in model.parameters()]
    res["params"] = torch.cat([p.detach().flatten() for p in model.parameters()])
    # int8 inference: integer weights, an int32 accumulation, dequantized outputs
    model.eval()
    with torch.no_grad():
        ref = model(x)
        fc = model.fc2
        h = F.relu6(model.fc1(torch.flatten(F.max_pool2d(F.relu(model.conv(x)), 2), 1)))
        a_scale, a_zp = fc.act_obs.calculate_qparams(symmetric=False)
        w_scale, _ = fc.w_obs.calculate_qparams(symmetric=True)
        h_int = torch.clamp(torch.round(h / a_scale) + a_zp, qmin, qmax).to(torch.int8)
        w_int = torch.clamp(torch.round(fc.weight / w_scale[:, None]), qmin, qmax).char()
        acc = (h_int.to(torch.int32) - a_zp.int()) @ w_int.t().to(torch.int32)
        out = acc.float() * (a_scale * w_scale) + fc.bias
    res["int_dtypes"] = [_name(h_int.dtype), _name(w_int.dtype), _name(acc.dtype)]
    res["int_weights"] = w_int
    res["int_acc"] = acc
    res["int_out"] = out
    res["int_vs_fake"] = [(out - ref).abs().max()]
    res["state_dict"] = list(model.state_dict().keys())

    # LSQ (lsq-net's quantizer: learned step sizes with scaled gradients) and PACT (a learned
    # clipping level, torch.clamp with a tensor bound) on a small conv layer
    def grad_scale(x, scale):
        y_grad = x * scale
        return (x - y_grad).detach() + y_grad

    def round_pass(x):
        y_grad = x
        return (x.round() - y_grad).detach() + y_grad

    class LsqQuan(nn.Module):
        def __init__(self, bit, all_positive=False, per_channel=True):
            super().__init__()
            if all_positive:
                self.thd_neg, self.thd_pos = 0, 2 ** bit - 1
            else:
                self.thd_neg, self.thd_pos = -2 ** (bit - 1) + 1, 2 ** (bit - 1) - 1
            self.per_channel = per_channel
            self.s = nn.Parameter(torch.ones(1))

        def init_from(self, x):
            if self.per_channel:
                self.s = nn.Parameter(x.detach().abs().mean(dim=list(range(1, x.dim())),
                                                            keepdim=True)
                                      * 2 / (self.thd_pos ** 0.5))
            else:
                self.s = nn.Parameter(x.detach().abs().mean() * 2 / (self.thd_pos ** 0.5))

        def forward(self, x):
            s_grad_scale = 1.0 / ((self.thd_pos * x.numel()) ** 0.5)
            s_scale = grad_scale(self.s, s_grad_scale)
            x = torch.clamp(x / s_scale, self.thd_neg, self.thd_pos)
            return round_pass(x) * s_scale

    class QConv(nn.Conv2d):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.quan_w_fn = LsqQuan(3, per_channel=True)
            self.quan_a_fn = LsqQuan(4, all_positive=True, per_channel=False)
            self.alpha = nn.Parameter(torch.tensor(1.5))
            self.quan_w_fn.init_from(self.weight)

        def forward(self, x):
            x = torch.clamp(x, min=torch.zeros(()), max=self.alpha)     # PACT
            return self._conv_forward(self.quan_a_fn(x), self.quan_w_fn(self.weight), self.bias)

    qconv = QConv(2, 3, 3, padding=1)
    fill_(torch, [qconv.weight, qconv.bias], rng, 0.4)
    qconv.quan_w_fn.init_from(qconv.weight)
    with torch.no_grad():
        qconv.quan_a_fn.s.fill_(0.2)
    lsq_opt = torch.optim.SGD(qconv.parameters(), lr=0.01, momentum=0.9)
    res.update(lsq_loss=[])
    xa = normal(torch, rng, 2, 2, 4, 4) * 2
    for step in range(3):
        lsq_opt.zero_grad()
        loss = qconv(xa).pow(2).mean()
        loss.backward()
        if step == 0:
            res["lsq_grads"] = [qconv.quan_w_fn.s.grad, qconv.quan_a_fn.s.grad, qconv.alpha.grad,
                                qconv.weight.grad]
        lsq_opt.step()
        res["lsq_loss"].append(loss.item())
    res["lsq_steps"] = [qconv.quan_w_fn.s.flatten(), qconv.quan_a_fn.s, qconv.alpha]
    res["lsq_names"] = [n for n, _ in qconv.named_parameters()]
    return res


PROGRAMS = [sam_program, qat_program]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=2e-4, atol=2e-5)


# --- fake quantization (ember/ops/fake_quantize.py) -------------------------------------------

def _near_ties(lib, dtype, scale, shift=0.0):
    """Values on and next to the midpoints of a ``scale`` grid, where the kernels' roundings
    decide the result."""
    rng = np.random.default_rng(5)
    k = rng.integers(-40, 40, 600) + 0.5 - shift
    noise = rng.choice([0.0, 1e-7, -1e-7, 1e-9], 600)
    return lib.tensor(k * scale + noise, dtype=lib.float64).to(getattr(lib, dtype))


FQ_DTYPES = ["float32", "float64", "float16", "bfloat16"]


@pytest.mark.parametrize("dtype", FQ_DTYPES)
@pytest.mark.parametrize("qparams", ["numbers", "tensors", "0-dim scale"])
def test_fake_quantize_per_tensor_rounds_as_torch(dtype, qparams):
    def run(lib):
        x = _near_ties(lib, dtype, 0.3)
        if qparams == "numbers":
            args = (0.3, 3)
        elif qparams == "tensors":      # a float zero point is truncated in this overload
            args = (lib.tensor(0.3, dtype=lib.float64), lib.tensor(3.7))
        else:
            args = (lib.tensor(0.3), 3)
        return lib.fake_quantize_per_tensor_affine(x, *args, -50, 60)
    ours, theirs = run(ember), run(torch)
    assert _name(ours.dtype) == _name(theirs.dtype)
    np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())


@pytest.mark.parametrize("dtype", FQ_DTYPES)
@pytest.mark.parametrize("zero_point", ["int32", "float32", "float16"])
def test_fake_quantize_per_channel_rounds_as_torch(dtype, zero_point):
    def run(lib):
        x = _near_ties(lib, dtype, 0.07, 0.7).reshape(20, 30).t()    # channels along axis 1
        scale = lib.linspace(0.05, 0.1, 20)
        zp = lib.linspace(-3, 3, 20) * (1 if zero_point == "int32" else 0.9)
        zp = zp.round().to(lib.int32) if zero_point == "int32" else zp.to(getattr(lib, zero_point))
        return lib.fake_quantize_per_channel_affine(x, scale, zp, 1, -20, 20)
    ours, theirs = run(ember), run(torch)
    assert _name(ours.dtype) == _name(theirs.dtype)
    np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())


def test_fake_quantize_gradients_pass_straight_through_within_range():
    def run(lib):
        x = lib.linspace(-2, 2, 17, requires_grad=True)
        w = lib.linspace(-1, 1, 12).reshape(3, 4).requires_grad_()
        y = lib.fake_quantize_per_tensor_affine(x, 0.15, 3, -10, 10)
        yt = lib.fake_quantize_per_tensor_affine(x, lib.tensor(0.15), lib.tensor(3), -10, 10)
        yc = lib.fake_quantize_per_channel_affine(
            w, lib.tensor([0.1, 0.2, 0.05]), lib.tensor([0, 2, -3], dtype=lib.int32), 0, -8, 7)
        (y * lib.arange(17.0)).sum().backward()
        gx = x.grad.clone()
        x.grad = None
        yt.sum().backward()
        yc.backward(lib.ones_like(yc))
        nodes = [(type(t.grad_fn).__name__, len(t.grad_fn.next_functions)) for t in (y, yt, yc)]
        # the mask is kept, not the input: the input may change in place before backward
        h = x * 1
        z = lib.fake_quantize_per_tensor_affine(h, 0.15, 3, -10, 10)
        h.add_(100)
        g2, = lib.autograd.grad(z.sum(), x, create_graph=True)
        return [gx, x.grad, w.grad, g2], nodes, type(g2.grad_fn).__name__
    ours, theirs = run(ember), run(torch)
    assert ours[1:] == theirs[1:]
    for a, b in zip(ours[0], theirs[0]):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


FQ_ERRORS = {
    "range": lambda lib, x: lib.fake_quantize_per_tensor_affine(x, 0.1, 0, 5, 3),
    "zero_point": lambda lib, x: lib.fake_quantize_per_tensor_affine(x, 0.1, 9, 0, 5),
    "long": lambda lib, x: lib.fake_quantize_per_tensor_affine(x.long(), 0.1, 0, 0, 5),
    "two_elements": lambda lib, x: lib.fake_quantize_per_tensor_affine(
        x, lib.ones(2), lib.tensor(0), 0, 5),
    "tensor_scale_int_zero_point": lambda lib, x: lib.fake_quantize_per_tensor_affine(
        x, lib.tensor([0.1]), 0, 0, 5),
    "float_zero_point": lambda lib, x: lib.fake_quantize_per_tensor_affine(x, 0.1, 0.5, 0, 5),
    "str_quant_max": lambda lib, x: lib.fake_quantize_per_tensor_affine(x, 0.1, 0, 0, "a"),
    "scale_requires_grad": lambda lib, x: lib.fake_quantize_per_tensor_affine(
        x, lib.tensor(0.1, requires_grad=True), lib.tensor(0), 0, 5),
    "zero_point_requires_grad": lambda lib, x: lib.fake_quantize_per_tensor_affine(
        x, lib.tensor(0.1), lib.tensor(0.0, requires_grad=True), 0, 5),
    "channel_scale_double": lambda lib, x: lib.fake_quantize_per_channel_affine(
        x, lib.ones(2, dtype=lib.float64), lib.zeros(2, dtype=lib.int32), 0, -8, 7),
    "channel_zero_point_long": lambda lib, x: lib.fake_quantize_per_channel_affine(
        x, lib.ones(2), lib.zeros(2, dtype=lib.int64), 0, -8, 7),
    "channel_axis": lambda lib, x: lib.fake_quantize_per_channel_affine(
        x, lib.ones(2), lib.zeros(2, dtype=lib.int32), -2, -8, 7),
    "channel_sizes": lambda lib, x: lib.fake_quantize_per_channel_affine(
        x, lib.ones(3), lib.zeros(3, dtype=lib.int32), 0, -8, 7),
    "channel_scale_requires_grad": lambda lib, x: lib.fake_quantize_per_channel_affine(
        x, lib.ones(2, requires_grad=True), lib.zeros(2, dtype=lib.int32), 0, -8, 7),
    "channel_scale_number": lambda lib, x: lib.fake_quantize_per_channel_affine(
        x, 0.1, lib.zeros(2, dtype=lib.int32), 0, -8, 7),
}


@pytest.mark.parametrize("case", sorted(FQ_ERRORS))
def test_fake_quantize_errors_as_torch(case):
    from tests.parity._compare import assert_same_error
    assert_same_error(FQ_ERRORS[case], lambda lib: lib.ones(2, 3))


@pytest.mark.xfail(strict=True, reason="quantized tensors (torch.quantize_per_tensor, qint8, "
                   "int_repr, dequantize) are not implemented in ember: a later issue")
def test_quantize_per_tensor_int_repr():
    x = ember.tensor([0.31, -1.26, 2.0])
    q = ember.quantize_per_tensor(x, 0.1, 0, ember.qint8)
    assert q.int_repr().tolist() == [3, -13, 20]
