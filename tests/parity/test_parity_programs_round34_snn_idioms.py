"""Less common idioms of spiking-network code, run once with `torch` bound to ember and once to
PyTorch from the same NumPy weights and data: surrogate Functions in the setup_context style
(vmap over thresholds, forward-mode jvp, once_differentiable, mark_non_differentiable,
set_materialize_grads), snnTorch's Synaptic/Alpha neurons with learnable thresholds, graded
spikes and winner-take-all inhibition, low-precision spiking (bfloat16 autocast, uint8 spike
packing by shifts), and sparse event processing (sparse_coo_tensor synaptic input, unique,
bincount, searchsorted time binning, SpikingJelly-style scripted charge helpers)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def surrogate_functional_program(torch):
    """A surrogate spike written for torch.func (setup_context, generate_vmap_rule, a jvp
    rule): grad and vmap over thresholds, forward-mode jvp; a once_differentiable spike
    counter marking its count output non-differentiable; set_materialize_grads(False) with a
    None-aware backward."""
    once_differentiable = torch.autograd.function.once_differentiable
    F = torch.nn.functional

    class FastSigmoidSpike(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x, slope):
            return (x > 0).to(x.dtype)

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, slope = inputs
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            ctx.slope = slope

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g / (ctx.slope * x.abs() + 1.) ** 2, None

        @staticmethod
        def jvp(ctx, x_t, slope_t):
            x, = ctx.saved_tensors
            return x_t / (ctx.slope * x.abs() + 1.) ** 2

    class CountSpikes(torch.autograd.Function):
        @staticmethod
        def forward(ctx, mem):
            spk = (mem > 0).float()
            count = spk.sum(0).long()
            ctx.mark_non_differentiable(count)
            ctx.save_for_backward(mem)
            ctx.set_materialize_grads(False)
            return spk, count

        @staticmethod
        @once_differentiable
        def backward(ctx, g_spk, g_count):
            mem, = ctx.saved_tensors
            if g_spk is None:
                return None
            return g_spk * torch.sigmoid(4 * mem) * (1 - torch.sigmoid(4 * mem)) * 4

    rng = np.random.default_rng(3431)
    w = normal(torch, rng, 5, 4)
    x = normal(torch, rng, 6, 5)
    thr = torch.tensor([0.0, 0.5, 1.0])

    def rate_loss(w, th):
        mem = x @ w - th
        return FastSigmoidSpike.apply(mem, 5.0).mean()

    res = {}
    res["grad"] = torch.func.grad(rate_loss)(w, thr[1])
    res["vmap"] = torch.func.vmap(torch.func.grad(rate_loss), in_dims=(None, 0))(w, thr)
    res["vmap_val"] = torch.func.vmap(rate_loss, in_dims=(None, 0))(w, thr)
    _, tangent = torch.func.jvp(lambda w: FastSigmoidSpike.apply(x @ w - 0.2, 5.0), (w,),
                                (torch.ones_like(w),))
    res["jvp"] = tangent
    fwAD = torch.autograd.forward_ad
    with fwAD.dual_level():
        dual = fwAD.make_dual(x @ w, torch.full((6, 4), 0.5))
        res["fwad"] = fwAD.unpack_dual(FastSigmoidSpike.apply(dual, 2.0)).tangent
    mem = (x @ w).requires_grad_()
    spk, count = CountSpikes.apply(mem)
    res["count"] = count
    res["count_rg"] = [count.requires_grad, spk.requires_grad, str(count.dtype).split(".")[-1]]
    loss = F.mse_loss(spk.mean(0), torch.full((4,), 0.3))
    g, = torch.autograd.grad(loss, mem, retain_graph=True)
    res["g"] = g
    (g_none,) = torch.autograd.grad(count.float().sum() * 0 + spk.sum(), mem)
    res["g_sum"] = g_none
    try:
        out, _ = CountSpikes.apply(mem)
        gg, = torch.autograd.grad(out.sum(), mem, create_graph=True)
        gg.sum().backward()
        res["double"] = ["ok"]
    except RuntimeError as e:
        res["double"] = [str(e).split("\n")[0][:60]]
    return res


def synaptic_alpha_program(torch):
    """snnTorch's Synaptic (alpha * syn + input; beta * mem + syn) and Alpha neurons with
    learn_alpha/learn_beta/learn_threshold parameters clamped in forward, graded spikes
    (a learnable per-neuron factor), reset_mechanism 'zero' with reset = H(mem_prev - thr)
    detached, and the inhibition option (only the argmax neuron spikes per sample)."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3432)

    class Sigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input_, slope=25):
            ctx.save_for_backward(input_)
            ctx.slope = slope
            return (input_ > 0).float()

        @staticmethod
        def backward(ctx, grad_output):
            (input_,) = ctx.saved_tensors
            grad = grad_output * ctx.slope * torch.exp(-ctx.slope * input_) / (
                (torch.exp(-ctx.slope * input_) + 1) ** 2)
            return grad, None

    class Synaptic(nn.Module):
        def __init__(self, alpha, beta, threshold=1.0, inhibition=False, graded=None,
                     reset_mechanism="subtract"):
            super().__init__()
            self.alpha = nn.Parameter(torch.as_tensor(alpha))
            self.beta = nn.Parameter(torch.as_tensor(beta))
            self.threshold = nn.Parameter(torch.as_tensor(threshold))
            self.inhibition, self.reset_mechanism = inhibition, reset_mechanism
            if graded is not None:
                self.graded_spikes_factor = nn.Parameter(graded)
            else:
                self.register_buffer("graded_spikes_factor", torch.as_tensor(1.0))

        def fire(self, mem):
            spk = Sigmoid.apply(mem - self.threshold, 5.0)
            return spk * self.graded_spikes_factor

        def fire_inhibition(self, batch_size, mem):
            mem_shift = mem - self.threshold
            index = torch.argmax(mem_shift, dim=1)
            spk_tmp = Sigmoid.apply(mem_shift, 5.0)
            mask_spk1 = torch.zeros_like(spk_tmp)
            mask_spk1[torch.arange(batch_size), index] = 1
            return spk_tmp * mask_spk1

        def forward(self, input_, syn, mem):
            reset = Sigmoid.apply(mem - self.threshold, 5.0).clone().detach()
            syn = self.alpha.clamp(0, 1) * syn + input_
            base = self.beta.clamp(0, 1) * mem + syn
            if self.reset_mechanism == "subtract":
                mem = base - reset * self.threshold
            else:
                mem = base - reset * base
            if self.inhibition:
                spk = self.fire_inhibition(mem.size(0), mem)
            else:
                spk = self.fire(mem)
            return spk, syn, mem

    class Alpha(nn.Module):
        """Alpha neuron: two exponentials (excitatory/inhibitory) with alpha > beta."""

        def __init__(self, alpha, beta, threshold=1.0):
            super().__init__()
            self.alpha = nn.Parameter(torch.as_tensor(alpha))
            self.beta = nn.Parameter(torch.as_tensor(beta))
            self.register_buffer("threshold", torch.as_tensor(threshold))

        def forward(self, input_, syn_exc, syn_inh, mem):
            reset = Sigmoid.apply(mem - self.threshold, 5.0).detach()
            alpha, beta = self.alpha.clamp(0, 1), self.beta.clamp(0, 1)
            tau_alpha = torch.log(alpha) / (torch.log(beta) - torch.log(alpha)) + 1
            syn_exc = alpha * syn_exc + input_ - reset * (alpha * self.threshold * tau_alpha)
            syn_inh = beta * syn_inh - input_ - reset * (beta * self.threshold * tau_alpha)
            mem = (tau_alpha * (syn_exc + syn_inh)) / tau_alpha.clamp(min=1e-3)
            return Sigmoid.apply(mem - self.threshold, 5.0), syn_exc, syn_inh, mem

    fc1, fc2, fc3 = nn.Linear(6, 8), nn.Linear(8, 4), nn.Linear(4, 3)
    lif1 = Synaptic(alpha=0.7, beta=0.8, graded=torch.linspace(0.5, 1.5, 8))
    lif2 = Synaptic(alpha=0.6, beta=0.9, threshold=0.8, inhibition=True, reset_mechanism="zero")
    lif3 = Alpha(alpha=0.9, beta=0.8, threshold=0.5)
    mods = nn.ModuleList([fc1, fc2, fc3, lif1, lif2, lif3])
    fill_(torch, [*fc1.parameters(), *fc2.parameters(), *fc3.parameters()], rng, 0.4)
    opt = torch.optim.Adamax(mods.parameters(), lr=2e-2)
    res = {"loss": [], "thr": [], "spk2": []}
    for it in range(3):
        x = normal(torch, rng, 10, 4, 6).abs() * 0.5
        y = torch.from_numpy(rng.integers(0, 3, 4))
        syn1 = mem1 = torch.zeros(4, 8)
        syn2 = mem2 = torch.zeros(4, 4)
        se = si = mem3 = torch.zeros(4, 3)
        mem_rec, spk2_sum = [], 0
        for t in range(10):
            spk1, syn1, mem1 = lif1(fc1(x[t]), syn1, mem1)
            spk2, syn2, mem2 = lif2(fc2(spk1), syn2, mem2)
            spk3, se, si, mem3 = lif3(fc3(spk2), se, si, mem3)
            mem_rec.append(mem3)
            spk2_sum = spk2_sum + spk2.detach()
        loss = F.cross_entropy(torch.stack(mem_rec).sum(0), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["thr"].append(torch.stack([lif1.threshold, lif2.threshold]).detach())
        res["spk2"].append(spk2_sum)
    res["graded"] = lif1.graded_spikes_factor.detach()
    res["grads"] = [p.grad for p in (lif1.alpha, lif1.beta, lif2.threshold, lif3.alpha)]
    res["names"] = [n for n, _ in mods.named_parameters()]
    return res


def low_precision_program(torch):
    """Low-precision spiking as the hardware-oriented repos write it: a bfloat16 autocast
    region on CPU around the synaptic matmuls with a float32 membrane, spikes kept as bool
    and packed eight per uint8 by left shifts and a sum, unpacked by bitwise_and with a shift
    table, float16 weights rounded by .half() and the straight-through quantiser
    w + (round(w * 8) / 8 - w).detach()."""
    nn = torch.nn
    rng = np.random.default_rng(3433)
    fc = nn.Linear(16, 8)
    fill_(torch, fc, rng, 0.6)
    x = normal(torch, rng, 6, 4, 16)
    mem = torch.zeros(4, 8)
    spikes = []
    dtypes = []
    for t in range(6):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            cur = fc(x[t])
            dtypes.append(str(cur.dtype).split(".")[-1])
        mem = 0.9 * mem + cur.float()
        spk = mem > 1.0
        mem = mem.masked_fill(spk, 0.)
        spikes.append(spk)
    spk = torch.stack(spikes)
    bits = spk.reshape(-1, 8).to(torch.uint8)
    shifts = torch.arange(8, dtype=torch.uint8)
    packed = (bits << shifts).sum(dim=1, dtype=torch.uint8)
    unpacked = (packed.unsqueeze(1) >> shifts) & 1
    res = {"dtypes": dtypes, "packed": packed,
           "roundtrip": [bool((unpacked.bool() == bits.bool()).all())],
           "packed_dtype": [str(t.dtype).split(".")[-1]
                            for t in (packed, unpacked, bits << shifts)]}
    w = fc.weight
    wq = w + (torch.round(w * 8) / 8 - w).detach()
    out = (spk[-1].float() @ wq).sum()
    out.backward()
    res["wq"] = wq.detach()
    res["ste_grad"] = w.grad
    res["half"] = w.detach().half().float() - w.detach()
    res["mem"] = mem
    res["rate"] = spk.float().mean(0)
    return res


def sparse_events_program(torch):
    """Sparse event processing: address-event streams binned in time by searchsorted,
    per-bin event counts by bincount with minlength, unique (x, y) addresses with counts
    and inverse indices, a sparse_coo_tensor of spikes (coalesced duplicates) multiplied into
    a dense weight by torch.sparse.mm with gradients to the weight, and a scripted LIF
    charge helper with float defaults as SpikingJelly's jit functions write them."""
    rng = np.random.default_rng(3434)

    @torch.jit.script
    def lif_charge_decay_input(x: torch.Tensor, v: torch.Tensor, v_reset: float, tau: float):
        v = v + (x - (v - v_reset)) / tau
        return v

    n_ev, n_in, T = 40, 10, 5
    addr = torch.from_numpy(rng.integers(0, n_in, n_ev))
    times = torch.from_numpy(np.sort(rng.random(n_ev)).astype(np.float32))
    edges = torch.linspace(0, 1, T + 1)[1:-1].contiguous()
    tbin = torch.searchsorted(edges, times, right=True)
    res = {"tbin": tbin, "per_bin": torch.bincount(tbin, minlength=T)}
    uniq, inv, counts = torch.unique(addr, sorted=True, return_inverse=True, return_counts=True)
    res["uniq"], res["inv"], res["counts"] = uniq, inv, counts
    idx = torch.stack([tbin, addr])
    sp = torch.sparse_coo_tensor(idx, torch.ones(n_ev), (T, n_in))
    res["nnz"] = [sp._nnz(), sp.coalesce()._nnz(), int(sp.is_coalesced())]
    sp = sp.coalesce()
    w = torch.from_numpy(rng.standard_normal((n_in, 6)).astype(np.float32)).requires_grad_()
    cur = torch.sparse.mm(sp, w)
    v = torch.zeros(6)
    vs = []
    for t in range(T):
        v = lif_charge_decay_input(cur[t], v, 0., 2.)
        s = (v >= 1.).float()
        v = v * (1 - s)
        vs.append(v)
    vs = torch.stack(vs)
    (vs ** 2).sum().backward()
    res["vs"] = vs.detach()
    res["w_grad"] = w.grad
    res["dense"] = sp.to_dense().sum(1)
    res["bucket"] = torch.bucketize(times, edges)
    return res


def spikingjelly_functional_program(torch):
    """SpikingJelly's activation_based.functional helpers: redundant_one_hot, first_spike_index
    (cumsum == 1 and spikes), kernel_dot_product ('linear', 'polynomial', 'sigmoid',
    'gaussian') and spike_similar_loss, temporal_efficient_training_cross_entropy (TET) with
    its MMD-like regulariser, spiking max pooling by the first-spiking input via max_pool2d
    return_indices and max_unpool2d, and the fused conv-bn weights of fused_conv2d_weight_of
    _convbn2d / bias."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3435)
    res = {}

    def redundant_one_hot(labels, num_classes, n):
        redundant_classes = num_classes * n
        codes = torch.zeros(size=[labels.shape[0], redundant_classes], device=labels.device)
        for i in range(n):
            codes += F.one_hot(labels * n + i, redundant_classes)
        return codes

    def first_spike_index(spikes):
        with torch.no_grad():
            spikes_cumsum = spikes.cumsum(dim=-1)
            return torch.logical_and(spikes_cumsum == 1, spikes.bool())

    def kernel_dot_product(x, y, kernel="linear", *args):
        if kernel == "linear":
            return x.mm(y.t())
        elif kernel == "polynomial":
            d = args[0]
            return x.mm(y.t()).pow(d)
        elif kernel == "sigmoid":
            alpha = args[0]
            return torch.sigmoid(alpha * x.mm(y.t()))
        elif kernel == "gaussian":
            sigma = args[0]
            N, M = x.shape[0], y.shape[0]
            X = x.unsqueeze(1).repeat(1, M, 1)
            Y = y.unsqueeze(0).repeat(N, 1, 1)
            d = X - Y
            return torch.exp(-d.pow(2).sum(dim=2) / (2 * sigma * sigma))

    def spike_similar_loss(spikes, labels, kernel_type="linear", loss_type="mse", *args):
        spikes = spikes.flatten(start_dim=1)
        sim_p = kernel_dot_product(spikes, spikes, kernel_type, *args)
        if loss_type == "mse":
            sim_p = sim_p / spikes.shape[1] if kernel_type == "linear" else sim_p
        sim_p = sim_p.clamp_(0, 1) if kernel_type == "linear" else sim_p
        labels = labels.float()
        sim_l = labels.mm(labels.t())
        if loss_type == "mse":
            return F.mse_loss(sim_p, sim_l)
        elif loss_type == "l1":
            return F.l1_loss(sim_p, sim_l)
        return -(sim_l * torch.log(sim_p + 1e-8) + (1 - sim_l) * torch.log(1 - sim_p + 1e-8)).mean()

    def tet_loss(x_seq, target, lam=1e-3):
        loss = 0.
        for t in range(x_seq.shape[0]):
            loss = loss + F.cross_entropy(x_seq[t], target)
        loss = loss / x_seq.shape[0]
        mse = F.mse_loss(x_seq, torch.zeros_like(x_seq).fill_(1.0))
        return (1 - lam) * loss + lam * mse

    labels = torch.from_numpy(rng.integers(0, 3, 4))
    codes = redundant_one_hot(labels, 3, 2)
    res["codes"] = codes
    spikes = (torch.from_numpy(rng.random((4, 6, 8)).astype(np.float32)) < 0.3).float()
    res["first"] = first_spike_index(spikes).sum(dim=-1)
    x = normal(torch, rng, 4, 5).requires_grad_()
    spk = torch.sigmoid(3 * x)
    onehot = F.one_hot(labels, 3)
    losses = []
    for kernel, args in (("linear", ()), ("polynomial", (2,)), ("sigmoid", (0.5,)),
                         ("gaussian", (1.5,))):
        for loss_type in ("mse", "l1", "bce"):
            losses.append(spike_similar_loss(spk, onehot, kernel, loss_type, *args))
    total = torch.stack(losses)
    res["sim"] = total
    x_seq = normal(torch, rng, 5, 4, 3).requires_grad_()
    tet = tet_loss(x_seq, labels)
    (total.sum() + tet).backward()
    res["tet"] = tet
    res["x_grad"], res["seq_grad"] = x.grad, x_seq.grad
    # spiking max pool: route the earliest-spiking input by max over spike-time scores
    s = (torch.from_numpy(rng.random((2, 1, 4, 4)).astype(np.float32)) < 0.4).float()
    score = s * torch.arange(16, 0, -1.).view(1, 1, 4, 4)
    pooled, idx = F.max_pool2d(score, 2, return_indices=True)
    res["pool_idx"] = idx
    res["unpool"] = F.max_unpool2d(pooled, idx, 2, output_size=(4, 4))
    res["gathered"] = s.flatten(2).gather(2, idx.flatten(2)).view_as(pooled)
    # fused conv-bn
    conv, bn = nn.Conv2d(2, 3, 3, bias=True), nn.BatchNorm2d(3)
    fill_(torch, conv, rng, 0.5)
    with torch.no_grad():
        bn.running_mean.copy_(torch.tensor([0.1, -0.2, 0.3]))
        bn.running_var.copy_(torch.tensor([0.5, 1.5, 2.0]))
        bn.weight.copy_(torch.tensor([1.2, 0.8, -0.5]))
        bn.bias.copy_(torch.tensor([0.0, 0.1, -0.1]))
    bn.eval()
    std = (bn.running_var + bn.eps).sqrt()
    fused_w = conv.weight * (bn.weight / std).view(-1, 1, 1, 1)
    fused_b = (conv.bias - bn.running_mean) * bn.weight / std + bn.bias
    img = normal(torch, rng, 1, 2, 5, 5)
    res["fused_err"] = (F.conv2d(img, fused_w, fused_b) - bn(conv(img))).abs().max()
    res["fused_w"] = fused_w.detach()
    return res


PROGRAMS = [surrogate_functional_program, synaptic_alpha_program, low_precision_program,
            sparse_events_program, spikingjelly_functional_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
