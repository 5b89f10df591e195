"""Spiking-network learning rules and tooling written as their reference repositories write them
in torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights
and data: SpikingJelly's STDPLearner (monitors as forward hooks, traces, in-place weight updates
under no_grad with clamp_), Diehl & Cook's winner-take-all STDP (adaptive thresholds, column
normalisation), e-prop eligibility traces with random feedback, SpikingJelly's ann2snn
conversion (VoltageHook with quantile scaling, IF neurons swapped in by setattr), firing-rate
hooks with a spike-count regulariser and truncated BPTT detaching module state."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _heaviside_st(torch):
    class Rect(torch.autograd.Function):
        """Rectangular surrogate (SpikingJelly's PiecewiseQuadratic-free 'rect' of width 1)."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.ge(0.).type_as(x)

        @staticmethod
        def backward(ctx, grad_output):
            x, = ctx.saved_tensors
            return grad_output * (x.abs() < 0.5).float()
    return Rect.apply


def stdp_learner_program(torch):
    """SpikingJelly's learning.STDPLearner on a Linear + IF layer: InputMonitor/OutputMonitor
    as forward hooks (pre- and post-) appending to lists, trace_pre/trace_post per step,
    delta_w by (trace_post.unsqueeze(2) * in_spike.unsqueeze(1)).sum(0), weight.grad set by
    the learner (so an optimizer applies it: -delta_w), and a soft-bounded f_pre/f_post."""
    nn = torch.nn
    rng = np.random.default_rng(3411)
    spike = _heaviside_st(torch)

    class IFNode(nn.Module):
        def __init__(self, v_threshold=1.0):
            super().__init__()
            self.v_threshold, self.v = v_threshold, 0.

        def forward(self, x):
            self.v = self.v + x
            s = spike(self.v - self.v_threshold)
            self.v = self.v - s * self.v_threshold
            return s

        def reset(self):
            self.v = 0.

    class Monitor:
        def __init__(self, module, kind):
            self.records = []
            if kind == "input":
                self.handle = module.register_forward_pre_hook(
                    lambda m, args: self.records.append(args[0].detach()))
            else:
                self.handle = module.register_forward_hook(
                    lambda m, args, out: self.records.append(out.detach()))

        def disable(self):
            self.handle.remove()

    class STDPLearner:
        def __init__(self, synapse, sn, tau_pre, tau_post, f_pre, f_post):
            self.synapse, self.tau_pre, self.tau_post = synapse, tau_pre, tau_post
            self.f_pre, self.f_post = f_pre, f_post
            self.in_spike_monitor = Monitor(synapse, "input")
            self.out_spike_monitor = Monitor(sn, "output")
            self.trace_pre = self.trace_post = None

        def reset(self):
            self.trace_pre = self.trace_post = None
            self.in_spike_monitor.records.clear()
            self.out_spike_monitor.records.clear()

        def step(self, on_grad=True, scale=1.):
            length = len(self.in_spike_monitor.records)
            delta_w = None
            weight = self.synapse.weight.data
            for _ in range(length):
                in_spike = self.in_spike_monitor.records.pop(0)
                out_spike = self.out_spike_monitor.records.pop(0)
                if self.trace_pre is None:
                    self.trace_pre = 0.
                if self.trace_post is None:
                    self.trace_post = 0.
                self.trace_pre = self.trace_pre - self.trace_pre / self.tau_pre + in_spike
                self.trace_post = self.trace_post - self.trace_post / self.tau_post + out_spike
                dw = (self.f_pre(weight) * (self.trace_post.unsqueeze(2)
                                            * in_spike.unsqueeze(1)).sum(0)
                      - self.f_post(weight) * (self.trace_pre.unsqueeze(1)
                                               * out_spike.unsqueeze(2)).sum(0))
                dw = dw * scale
                delta_w = dw if delta_w is None else delta_w + dw
            if on_grad:
                if self.synapse.weight.grad is None:
                    self.synapse.weight.grad = -delta_w
                else:
                    self.synapse.weight.grad = self.synapse.weight.grad - delta_w
            return delta_w

    fc, sn = nn.Linear(8, 4, bias=False), IFNode(v_threshold=1.0)
    net = nn.Sequential(fc, sn)
    fill_(torch, fc, rng, 0.25)
    with torch.no_grad():
        fc.weight.abs_()
    learner = STDPLearner(fc, sn, tau_pre=2., tau_post=2.,
                          f_pre=lambda w: torch.clamp(1. - w, min=0.),
                          f_post=lambda w: torch.clamp(w, min=0.))
    opt = torch.optim.SGD(net.parameters(), lr=0.005, momentum=0.)
    u = rng.random((4, 6, 2, 8)).astype(np.float32)
    res = {"w": [], "dw": [], "rec": []}
    for epoch in range(4):
        sn.reset()
        learner.reset()
        opt.zero_grad()
        with torch.no_grad():
            outs = [net((torch.from_numpy(u[epoch, t]) < 0.4).float()) for t in range(6)]
        res["rec"].append(len(learner.in_spike_monitor.records))
        dw = learner.step(on_grad=True)
        opt.step()
        fc.weight.data.clamp_(0., 1.)
        res["w"].append(fc.weight.detach().clone())
        res["dw"].append(dw)
        res["out"] = torch.stack(outs)
    learner.in_spike_monitor.disable()
    learner.out_spike_monitor.disable()
    net(torch.ones(2, 8))
    res["after_disable"] = [len(learner.in_spike_monitor.records),
                            len(fc._forward_pre_hooks), len(sn._forward_hooks)]
    return res


def diehl_cook_program(torch):
    """Diehl & Cook (2015) as bindsnet-style plain torch: Poisson-like inputs from fixed
    uniforms, excitatory LIF with adaptive thresholds theta (+= on spike, decays), a single
    winner per step by argmax over v - thr with ties broken by topk, lateral inhibition by
    index_fill_, pre/post traces, STDP with addr_-style outer products under no_grad, weight
    clamp_ and column normalisation w *= norm / w.sum(0)."""
    rng = np.random.default_rng(3412)
    n_in, n_exc, T = 16, 5, 25
    w = torch.from_numpy(rng.random((n_in, n_exc)).astype(np.float32) * 0.3)
    theta = torch.zeros(n_exc)
    res = {"spikes": [], "theta": [], "wsum": []}
    for sample in range(3):
        rates = torch.from_numpy(rng.random(n_in).astype(np.float32)) * 0.5
        uniforms = torch.from_numpy(rng.random((T, n_in)).astype(np.float32))
        v = torch.full((n_exc,), -65.)
        x_tr, y_tr = torch.zeros(n_in), torch.zeros(n_exc)
        counts = torch.zeros(n_exc, dtype=torch.int64)
        with torch.no_grad():
            for t in range(T):
                s_in = uniforms[t] < rates
                v = -65. + (v + 65.) * np.exp(-1 / 100.)
                v += s_in.float() @ w * 30.
                thr = -52. + theta
                above = v - thr
                s_out = torch.zeros(n_exc, dtype=torch.bool)
                if (above > 0).any():
                    _, winner = torch.topk(above, 1)
                    s_out[winner] = True
                    v.index_fill_(0, winner, -65.)
                    inhibit = torch.ones(n_exc, dtype=torch.bool).index_fill_(0, winner, False)
                    v.masked_fill_(inhibit, -65.)
                theta.mul_(np.exp(-1 / 1e4)).add_(0.05 * s_out.float())
                x_tr.mul_(np.exp(-1 / 20.)).masked_fill_(s_in, 1.)
                y_tr.mul_(np.exp(-1 / 20.)).masked_fill_(s_out, 1.)
                # nu_pre * (-x_pre-on-post)... : pre spike depresses by post trace,
                # post spike potentiates by pre trace
                w.addr_(s_in.float(), y_tr, alpha=-1e-3)
                w.addr_(x_tr, s_out.float(), alpha=1e-2)
                w.clamp_(0., 1.)
                counts += s_out.long()
            w *= 4.0 / w.sum(0, keepdim=True)
        res["spikes"].append(counts)
        res["theta"].append(theta.clone())
        res["wsum"].append(w.sum(0))
    res["w"] = w
    res["assign"] = torch.stack(res["spikes"]).argmax(0)
    return res


def eprop_program(torch):
    """e-prop (Bellec et al. 2020) for a recurrent LIF layer written as its PyTorch
    reimplementations do, without autograd: pseudo-derivatives psi, eligibility vectors
    low-passed by alpha, filtered traces by kappa, learning signals through a fixed random
    feedback matrix, weight updates accumulated with einsum and applied with add_ under
    no_grad; the readout's gradient taken by autograd for comparison."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3413)
    n_in, H, n_out, T, B = 4, 6, 2, 12, 3
    alpha, kappa, thr, gamma = 0.9, 0.8, 0.6, 0.3
    w_in = nn.Parameter(torch.zeros(H, n_in))
    w_rec = nn.Parameter(torch.zeros(H, H))
    w_out = nn.Parameter(torch.zeros(n_out, H))
    fill_(torch, [w_in, w_rec, w_out], rng, 0.8)
    b_fb = normal(torch, rng, H, n_out)
    with torch.no_grad():
        w_rec.fill_diagonal_(0.)
    res = {"loss": [], "dw_in": [], "dw_rec": [], "out_grad": []}
    for it in range(2):
        x = (torch.from_numpy(rng.random((T, B, n_in)).astype(np.float32)) < 0.4).float()
        target = normal(torch, rng, T, B, n_out)
        v, z = torch.zeros(B, H), torch.zeros(B, H)
        y = torch.zeros(B, n_out)
        e_in_v, e_rec_v = torch.zeros(B, H, n_in), torch.zeros(B, H, H)
        e_in_f, e_rec_f = torch.zeros(B, H, n_in), torch.zeros(B, H, H)
        dw_in, dw_rec = torch.zeros_like(w_in), torch.zeros_like(w_rec)
        loss = 0.
        for t in range(T):
            z_prev = z
            with torch.no_grad():
                v = alpha * v + x[t] @ w_in.t() + z_prev @ w_rec.t() - z_prev * thr
                z = (v > thr).float()
                psi = gamma * torch.clamp(1 - torch.abs((v - thr) / thr), min=0.) / thr
                e_in_v = alpha * e_in_v + x[t][:, None, :]
                e_rec_v = alpha * e_rec_v + z_prev[:, None, :]
                e_in = psi[:, :, None] * e_in_v
                e_rec = psi[:, :, None] * e_rec_v
                e_in_f = kappa * e_in_f + e_in
                e_rec_f = kappa * e_rec_f + e_rec
            y = kappa * y + z @ w_out.t()
            err = y - target[t]
            loss = loss + 0.5 * (err ** 2).sum()
            with torch.no_grad():
                learning_signal = err.detach() @ b_fb.t()
                dw_in += torch.einsum("bj,bji->ji", learning_signal, e_in_f)
                dw_rec += torch.einsum("bj,bji->ji", learning_signal, e_rec_f)
        w_out.grad = None
        loss.backward()
        with torch.no_grad():
            dw_rec.fill_diagonal_(0.)
            w_in.add_(dw_in, alpha=-1e-2)
            w_rec.add_(dw_rec, alpha=-1e-2)
            w_out.sub_(1e-2 * w_out.grad)
        res["loss"].append(loss.item())
        res["dw_in"].append(dw_in)
        res["dw_rec"].append(dw_rec)
        res["out_grad"].append(w_out.grad.clone())
    res["mse"] = F.mse_loss(y, target[-1]).item()
    res["w_rec_diag"] = w_rec.diagonal().abs().sum().item()
    return res


def ann2snn_program(torch):
    """SpikingJelly's ann2snn.Converter in its 'robust normalisation' mode without fx: a ReLU
    network briefly trained, VoltageHook modules recording the 99.9% quantile of each ReLU's
    output over a calibration set (torch.quantile), ReLUs swapped for VoltageScaler-IF-
    VoltageScaler triples by setattr over named_children, IF neurons with reset by
    subtraction run for T steps, and the rates compared with the ANN."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3414)

    class VoltageHook(nn.Module):
        def __init__(self, scale=1.0, momentum=0.1, mode="99.9%"):
            super().__init__()
            self.register_buffer("scale", torch.tensor(scale))
            self.mode, self.num_batches_tracked, self.momentum = mode, 0, momentum

        def forward(self, x):
            err_msg = "You have used a non-defined VoltageScale Method."
            if isinstance(self.mode, str):
                if self.mode[-1] == "%":
                    try:
                        s_t = torch.tensor(np.percentile(
                            x.detach().cpu().numpy().astype(np.float64), float(self.mode[:-1])))
                    except ValueError:
                        raise NotImplementedError(err_msg)
                    s_t = torch.quantile(x.detach().flatten(), float(self.mode[:-1]) / 100.)
                elif self.mode.lower() == "max":
                    s_t = x.max().detach()
                else:
                    raise NotImplementedError(err_msg)
            if self.num_batches_tracked == 0:
                self.scale = s_t
            else:
                self.scale = (1 - self.momentum) * self.scale + self.momentum * s_t
            self.num_batches_tracked += x.shape[0]
            return x

    class VoltageScaler(nn.Module):
        def __init__(self, scale=1.0):
            super().__init__()
            self.register_buffer("scale", torch.tensor(scale))

        def forward(self, x):
            return x * self.scale

        def extra_repr(self):
            return "%f" % self.scale.item()

    class IFNode(nn.Module):
        def __init__(self):
            super().__init__()
            self.v = 0.

        def forward(self, x):
            self.v = self.v + x
            spike = (self.v >= 1.).to(x)
            self.v = self.v - spike
            return spike

        def reset(self):
            self.v = 0.

    ann = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 12), nn.ReLU(),
                        nn.Linear(12, 3))
    fill_(torch, ann, rng, 0.5)
    opt = torch.optim.SGD(ann.parameters(), lr=0.05)
    data = normal(torch, rng, 32, 6)
    labels = torch.from_numpy(rng.integers(0, 3, 32))
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(ann(data), labels).backward()
        opt.step()
    for name, m in list(ann.named_children()):
        if isinstance(m, nn.ReLU):
            setattr(ann, name, nn.Sequential(m, VoltageHook(mode="99.9%")))
    with torch.no_grad():
        for batch in data.split(8):
            ann(batch)
    scales = [m[1].scale.clone() for m in ann if isinstance(m, nn.Sequential)]
    snn = nn.Sequential()
    for name, m in ann.named_children():
        if isinstance(m, nn.Sequential):
            s = m[1].scale.item()
            snn.add_module(name, nn.Sequential(VoltageScaler(1.0 / s), IFNode(),
                                               VoltageScaler(s)))
        else:
            snn.add_module(name, m)
    x = data[:8]
    with torch.no_grad():
        ann_out = ann(x)
        T = 40
        acc = 0.
        for t in range(T):
            acc = acc + snn(x)
        snn_out = acc / T
    for m in snn.modules():
        if hasattr(m, "reset"):
            m.reset()
    return {"scales": scales, "ann": ann_out, "snn": snn_out,
            "agree": (ann_out.argmax(1) == snn_out.argmax(1)).sum().item(),
            "repr": [repr(snn[1][0]), type(snn[1][1].v).__name__],
            "buffers": [n for n, _ in ann.named_buffers()]}


def rate_hooks_tbptt_program(torch):
    """Firing-rate monitoring and truncated BPTT as training scripts write them: a forward
    hook on each spiking layer appending outputs (kept in the graph for a spike-count
    regulariser), a full backward hook recording grad_output norms, Tensor.register_hook on
    the membrane collecting per-step gradients, state held on modules and detach_()-ed every
    K steps, a no_grad burn-in and gradient accumulation over chunks."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3415)

    class FastSigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, slope):
            ctx.save_for_backward(x)
            ctx.slope = slope
            return (x > 0).float()

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g / (ctx.slope * x.abs() + 1.0) ** 2, None

    class LIF(nn.Module):
        def __init__(self, beta):
            super().__init__()
            self.beta = beta
            self.mem = None
            self.mem_grads = []

        def forward(self, x):
            if self.mem is None:
                self.mem = torch.zeros_like(x)
            self.mem = self.beta * self.mem + x
            if self.mem.requires_grad:
                self.mem.register_hook(lambda g: self.mem_grads.append(g.norm()))
            spk = FastSigmoid.apply(self.mem - 1.0, 10.)
            self.mem = self.mem - spk.detach()
            return spk

        def detach_state(self):
            if self.mem is not None:
                self.mem.detach_()

    net = nn.Sequential(nn.Linear(5, 8), LIF(0.9), nn.Linear(8, 8), LIF(0.8), nn.Linear(8, 2))
    fill_(torch, net, rng, 0.8)
    records, grad_norms = {}, []
    handles = []
    for name, m in net.named_modules():
        if isinstance(m, LIF):
            handles.append(m.register_forward_hook(
                lambda mod, inp, out, name=name: records.setdefault(name, []).append(out)))
            handles.append(m.register_full_backward_hook(
                lambda mod, gin, gout: grad_norms.append(gout[0].norm())))
    opt = torch.optim.RMSprop(net.parameters(), lr=1e-2)
    x = normal(torch, rng, 16, 3, 5).abs()
    target = normal(torch, rng, 16, 3, 2)
    res = {"loss": [], "rates": []}
    with torch.no_grad():
        for t in range(4):
            net(x[t])
    records.clear()
    opt.zero_grad()
    K = 4
    for chunk in range(1, 4):
        loss = 0.
        for t in range(chunk * K, (chunk + 1) * K):
            loss = loss + F.mse_loss(net(x[t]), target[t])
        rates = {k: torch.stack(v).mean() for k, v in records.items()}
        loss = loss + 0.1 * sum((r - 0.2) ** 2 for r in rates.values())
        loss.backward()
        for m in net.modules():
            if isinstance(m, LIF):
                m.detach_state()
        res["loss"].append(loss.item())
        res["rates"].append([r.item() for r in rates.values()])
        records.clear()
    opt.step()
    for h in handles:
        h.remove()
    res["grads"] = [p.grad for p in net.parameters()]
    res["grad_norms"] = grad_norms
    res["mem_grads"] = net[1].mem_grads + net[3].mem_grads
    res["leaf"] = [net[1].mem.is_leaf, net[1].mem.requires_grad]
    return res


PROGRAMS = [stdp_learner_program, diehl_cook_program, eprop_program, ann2snn_program,
            rate_hooks_tbptt_program]

TOLERANCES = {"ann2snn_program": (1e-5, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
