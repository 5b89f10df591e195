"""Learned image compression written as CompressAI writes it in torch, run once with `torch`
bound to ember and once to PyTorch from the same NumPy weights: GDN / inverse GDN over
non-negative reparametrised beta and gamma (LowerBound, a custom autograd.Function with a
straight-through gradient), the factorized-prior EntropyBottleneck (cumulative logits through
softplus/tanh chains, medians, uniform-noise quantisation in training and rounding about the
medians in eval, likelihood lower bound, auxiliary quantile loss on a second optimizer), the
GaussianConditional (scale table, erfc likelihoods, index building), a scale hyperprior trained
on the rate-distortion loss, and the CDF tables `update()` builds. Sibling _audio runs DDSP,
LaMa's Fourier convolutions and audio classification front ends, _context the autoregressive
context model, torchlibrosa, PANNs and Griffin-Lim; _fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _dt(t):
    """A tensor's dtype as PyTorch names it without the module: 'int32'."""
    return str(t.dtype).split(".")[-1]


def _lower_bound_class(torch):
    class LowerBoundFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input_, bound):
            ctx.save_for_backward(input_, bound)
            return torch.max(input_, bound)

        @staticmethod
        def backward(ctx, grad_output):
            input_, bound = ctx.saved_tensors
            pass_through_if = (input_ >= bound) | (grad_output < 0)
            return pass_through_if * grad_output, None

    class LowerBound(torch.nn.Module):
        def __init__(self, bound):
            super().__init__()
            self.register_buffer("bound", torch.Tensor([float(bound)]))

        @torch.jit.unused
        def lower_bound(self, x):
            return LowerBoundFunction.apply(x, self.bound)

        def forward(self, x):
            if torch.jit.is_scripting():
                return torch.max(x, self.bound)
            return self.lower_bound(x)

    return LowerBound


def _gdn_class(torch):
    LowerBound = _lower_bound_class(torch)

    class NonNegativeParametrizer(torch.nn.Module):
        def __init__(self, minimum=0, reparam_offset=2 ** -18):
            super().__init__()
            self.minimum = float(minimum)
            self.reparam_offset = float(reparam_offset)
            pedestal = self.reparam_offset ** 2
            self.register_buffer("pedestal", torch.Tensor([pedestal]))
            bound = (self.minimum + self.reparam_offset ** 2) ** 0.5
            self.lower_bound = LowerBound(bound)

        def init(self, x):
            return torch.sqrt(torch.max(x + self.pedestal, self.pedestal))

        def forward(self, x):
            out = self.lower_bound(x)
            out = out ** 2 - self.pedestal
            return out

    class GDN(torch.nn.Module):
        def __init__(self, in_channels, inverse=False, beta_min=1e-6, gamma_init=0.1):
            super().__init__()
            beta_min = float(beta_min)
            gamma_init = float(gamma_init)
            self.inverse = bool(inverse)
            self.beta_reparam = NonNegativeParametrizer(minimum=beta_min)
            beta = torch.ones(in_channels)
            beta = self.beta_reparam.init(beta)
            self.beta = torch.nn.Parameter(beta)
            self.gamma_reparam = NonNegativeParametrizer()
            gamma = gamma_init * torch.eye(in_channels)
            gamma = self.gamma_reparam.init(gamma)
            self.gamma = torch.nn.Parameter(gamma)

        def forward(self, x):
            _, C, _, _ = x.size()
            beta = self.beta_reparam(self.beta)
            gamma = self.gamma_reparam(self.gamma)
            gamma = gamma.reshape(C, C, 1, 1)
            norm = torch.nn.functional.conv2d(x ** 2, gamma, beta)
            if self.inverse:
                norm = torch.sqrt(norm)
            else:
                norm = torch.rsqrt(norm)
            return x * norm

    return GDN, LowerBound


def _conv(torch, cin, cout, k=5, stride=2):
    return torch.nn.Conv2d(cin, cout, kernel_size=k, stride=stride, padding=k // 2)


def _deconv(torch, cin, cout, k=5, stride=2):
    return torch.nn.ConvTranspose2d(cin, cout, kernel_size=k, stride=stride,
                                    output_padding=stride - 1, padding=k // 2)


def _entropy_bottleneck_class(torch):
    F = torch.nn.functional
    _, LowerBound = _gdn_class(torch)

    class EntropyBottleneck(torch.nn.Module):
        def __init__(self, channels, tail_mass=1e-9, init_scale=10, filters=(3, 3, 3, 3),
                     likelihood_bound=1e-9):
            super().__init__()
            self.channels = int(channels)
            self.filters = tuple(int(f) for f in filters)
            self.init_scale = float(init_scale)
            self.tail_mass = float(tail_mass)
            self.likelihood_lower_bound = LowerBound(likelihood_bound)
            filters = (1,) + self.filters + (1,)
            scale = self.init_scale ** (1 / (len(self.filters) + 1))
            channels = self.channels
            self.matrices = torch.nn.ParameterList()
            self.biases = torch.nn.ParameterList()
            self.factors = torch.nn.ParameterList()
            for i in range(len(self.filters) + 1):
                init = math.log(math.expm1(1 / scale / filters[i + 1]))
                matrix = torch.Tensor(channels, filters[i + 1], filters[i])
                matrix.data.fill_(init)
                self.matrices.append(torch.nn.Parameter(matrix))
                bias = torch.Tensor(channels, filters[i + 1], 1)
                torch.nn.init.uniform_(bias, -0.5, 0.5)
                self.biases.append(torch.nn.Parameter(bias))
                if i < len(self.filters):
                    factor = torch.Tensor(channels, filters[i + 1], 1)
                    torch.nn.init.zeros_(factor)
                    self.factors.append(torch.nn.Parameter(factor))
            self.quantiles = torch.nn.Parameter(torch.Tensor(channels, 1, 3))
            init = torch.Tensor([-self.init_scale, 0, self.init_scale])
            self.quantiles.data = init.repeat(self.quantiles.size(0), 1, 1)
            target = np.log(2 / self.tail_mass - 1)
            self.register_buffer("target", torch.Tensor([-target, 0, target]))
            self.register_buffer("_offset", torch.IntTensor())
            self.register_buffer("_quantized_cdf", torch.IntTensor())
            self.register_buffer("_cdf_length", torch.IntTensor())

        def _get_medians(self):
            return self.quantiles[:, :, 1:2]

        def _logits_cumulative(self, inputs, stop_gradient):
            logits = inputs
            for i in range(len(self.filters) + 1):
                matrix = self.matrices[i]
                if stop_gradient:
                    matrix = matrix.detach()
                logits = torch.matmul(F.softplus(matrix), logits)
                bias = self.biases[i]
                if stop_gradient:
                    bias = bias.detach()
                logits = logits + bias
                if i < len(self.factors):
                    factor = self.factors[i]
                    if stop_gradient:
                        factor = factor.detach()
                    logits = logits + torch.tanh(factor) * torch.tanh(logits)
            return logits

        def _likelihood(self, inputs, stop_gradient=False):
            half = float(0.5)
            lower = self._logits_cumulative(inputs - half, stop_gradient=stop_gradient)
            upper = self._logits_cumulative(inputs + half, stop_gradient=stop_gradient)
            sign = -torch.sign(lower + upper)
            sign = sign.detach()
            likelihood = torch.abs(torch.sigmoid(sign * upper) - torch.sigmoid(sign * lower))
            return likelihood, lower, upper

        def quantize(self, inputs, mode, means=None, noise=None):
            if mode == "noise":
                return inputs + noise
            outputs = inputs.clone()
            if means is not None:
                outputs -= means
            outputs = torch.round(outputs)
            if mode == "dequantize":
                if means is not None:
                    outputs += means
                return outputs
            return outputs.int()

        def forward(self, x, noise=None):
            perm = np.arange(len(x.shape))
            perm[0], perm[1] = perm[1], perm[0]
            inv_perm = np.arange(len(x.shape))[np.argsort(perm)]
            x = x.permute(*perm).contiguous()
            shape = x.size()
            values = x.reshape(x.size(0), 1, -1)
            medians = self._get_medians()
            if self.training:
                outputs = self.quantize(values, "noise", noise=noise.reshape(values.shape))
            else:
                outputs = self.quantize(values, "dequantize", medians)
            likelihood, _, _ = self._likelihood(outputs)
            likelihood = self.likelihood_lower_bound(likelihood)
            outputs = outputs.reshape(shape).permute(*inv_perm).contiguous()
            likelihood = likelihood.reshape(shape).permute(*inv_perm).contiguous()
            return outputs, likelihood

        def loss(self):
            logits = self._logits_cumulative(self.quantiles, stop_gradient=True)
            return torch.abs(logits - self.target).sum()

        def pmf_tables(self):
            # update(): the support of each channel from its quantiles, then pmf and tails
            medians = self.quantiles[:, 0, 1]
            minima = medians - self.quantiles[:, 0, 0]
            minima = torch.ceil(minima).int()
            minima = torch.clamp(minima, min=0)
            maxima = self.quantiles[:, 0, 2] - medians
            maxima = torch.ceil(maxima).int()
            maxima = torch.clamp(maxima, min=0)
            self._offset = -minima
            pmf_start = medians - minima
            pmf_length = maxima + minima + 1
            max_length = pmf_length.max().item()
            device = pmf_start.device
            samples = torch.arange(max_length, device=device)
            samples = samples[None, :] + pmf_start[:, None, None]
            pmf, lower, upper = self._likelihood(samples, stop_gradient=True)
            pmf = pmf[:, 0, :]
            tail_mass = torch.sigmoid(lower[:, 0, :1]) + torch.sigmoid(-upper[:, 0, -1:])
            return pmf, tail_mass, pmf_length, max_length

        def build_cdf(self, pmf, tail_mass, pmf_length, max_length, precision=16):
            # pmf_to_quantized_cdf in torch ops: scale, round, cumulative sum (C++ in CompressAI)
            cdf = torch.zeros((len(pmf_length), max_length + 2), dtype=torch.int32,
                              device=pmf.device)
            for i, p in enumerate(pmf):
                prob = torch.cat((p[: pmf_length[i]], tail_mass[i]), dim=0)
                freq = torch.round(prob / prob.sum() * (1 << precision)).to(torch.int64)
                freq = torch.clamp(freq, min=1)
                c = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(freq, 0)])
                cdf[i, : c.numel()] = c.to(torch.int32)
            self._quantized_cdf = cdf
            self._cdf_length = pmf_length + 2
            return cdf

    return EntropyBottleneck


def _gaussian_conditional_class(torch):
    _, LowerBound = _gdn_class(torch)

    class GaussianConditional(torch.nn.Module):
        def __init__(self, scale_table, scale_bound=0.11, likelihood_bound=1e-9):
            super().__init__()
            self.lower_bound_scale = LowerBound(scale_bound)
            self.likelihood_lower_bound = LowerBound(likelihood_bound)
            self.register_buffer(
                "scale_table",
                self._prepare_scale_table(scale_table) if scale_table else torch.Tensor())
            self.register_buffer(
                "scale_bound",
                torch.Tensor([float(scale_bound)]) if scale_bound is not None else None)

        @staticmethod
        def _prepare_scale_table(scale_table):
            return torch.Tensor(tuple(float(s) for s in scale_table))

        def _standardized_cumulative(self, inputs):
            half = float(0.5)
            const = float(-(2 ** -0.5))
            return half * torch.erfc(const * inputs)

        @staticmethod
        def _standardized_quantile(quantile):
            from scipy.stats import norm
            return norm.ppf(quantile)

        def _likelihood(self, inputs, scales, means=None):
            half = float(0.5)
            values = inputs - means if means is not None else inputs
            scales = self.lower_bound_scale(scales)
            values = torch.abs(values)
            upper = self._standardized_cumulative((half - values) / scales)
            lower = self._standardized_cumulative((-half - values) / scales)
            return upper - lower

        def forward(self, inputs, scales, means=None, training=True, noise=None):
            if training:
                outputs = inputs + noise
            else:
                outputs = inputs.clone()
                if means is not None:
                    outputs -= means
                outputs = torch.round(outputs)
                if means is not None:
                    outputs += means
            likelihood = self._likelihood(outputs, scales, means)
            likelihood = self.likelihood_lower_bound(likelihood)
            return outputs, likelihood

        def build_indexes(self, scales):
            scales = self.lower_bound_scale(scales)
            indexes = scales.new_full(scales.size(), len(self.scale_table) - 1).int()
            for s in self.scale_table[:-1]:
                indexes -= (scales <= s).int()
            return indexes

    return GaussianConditional


def _seed_biases(torch, eb, rng):
    # EntropyBottleneck draws its biases with init.uniform_: take them from NumPy instead
    with torch.no_grad():
        for b in eb.biases:
            b.copy_(torch.from_numpy(rng.uniform(-0.5, 0.5, tuple(b.shape)).astype(np.float32)))


def get_scale_table(torch, min=0.11, max=256, levels=64):
    return torch.exp(torch.linspace(math.log(min), math.log(max), levels))


def gdn_program(torch):
    rng = np.random.default_rng(3201)
    GDN, LowerBound = _gdn_class(torch)
    res = {}
    gdn = GDN(4)
    igdn = GDN(4, inverse=True)
    res["beta0"], res["gamma0"] = gdn.beta, gdn.gamma
    res["keys"] = list(gdn.state_dict().keys())
    x = normal(torch, rng, 2, 4, 6, 6)
    y = gdn(x)
    z = igdn(y)
    res["y"], res["z"] = y, z
    opt = torch.optim.Adam(list(gdn.parameters()) + list(igdn.parameters()), lr=1e-2)
    target = normal(torch, rng, 2, 4, 6, 6) * 0.3
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(igdn(gdn(x)), x) + (gdn(x) - target).abs().mean()
        loss.backward()
        opt.step()
        res.setdefault("losses", []).append(loss.item())
    res["beta_grad"], res["gamma_grad"] = gdn.beta.grad, gdn.gamma.grad
    res["ibeta"], res["igamma"] = igdn.beta, igdn.gamma
    # the straight-through lower bound: gradient flows below the bound only when it pushes up
    lb = LowerBound(0.5)
    t = torch.tensor([0.1, 0.4, 0.6, 0.9], requires_grad=True)
    out = lb(t)
    out.backward(torch.tensor([1.0, -1.0, 1.0, -1.0]))
    res["lb_out"], res["lb_grad"] = out, t.grad
    res["lb_node"] = [type(out.grad_fn).__name__, out.grad_fn.name()]
    res["lb_bound"] = [_dt(lb.bound), str(tuple(lb.bound.shape))]
    # a GDN-normalised analysis transform with gradients to the input
    g_a = torch.nn.Sequential(_conv(torch, 3, 4), GDN(4), _conv(torch, 4, 4))
    fill_(torch, [p for n, p in g_a.named_parameters() if "beta" not in n
                  and "gamma" not in n], rng, 0.2)
    img = torch.from_numpy(rng.random((1, 3, 8, 8)).astype(np.float32)).requires_grad_()
    out = g_a(img)
    out.pow(2).sum().backward()
    res["g_a"], res["img_grad"] = out, img.grad
    res["names"] = [n for n, _ in g_a.named_parameters()]
    res["bufs"] = [n for n, _ in g_a.named_buffers()]
    return res


def entropy_bottleneck_program(torch):
    rng = np.random.default_rng(3202)
    EB = _entropy_bottleneck_class(torch)
    res = {}
    eb = EB(3)
    _seed_biases(torch, eb, rng)
    res["quantiles0"], res["target"] = eb.quantiles, eb.target
    res["keys"] = list(eb.state_dict().keys())
    res["medians"] = eb._get_medians()
    params = {n for n, p in eb.named_parameters() if not n.endswith("quantiles")}
    aux_params = {n for n, p in eb.named_parameters() if n.endswith("quantiles")}
    pd = dict(eb.named_parameters())
    opt = torch.optim.Adam((pd[n] for n in sorted(params)), lr=1e-2)
    aux_opt = torch.optim.Adam((pd[n] for n in sorted(aux_params)), lr=1e-1)
    res["groups"] = [len(opt.param_groups[0]["params"]), len(aux_opt.param_groups[0]["params"])]
    y = normal(torch, rng, 2, 3, 4, 4) * 3
    eb.train()
    for _ in range(3):
        noise = torch.from_numpy(rng.uniform(-0.5, 0.5, (3, 2, 4, 4)).astype(np.float32))
        opt.zero_grad()
        aux_opt.zero_grad()
        y_hat, lik = eb(y, noise=noise)
        bpp = torch.log(lik).sum() / (-math.log(2) * 2 * 4 * 4)
        bpp.backward()
        opt.step()
        aux = eb.loss()
        aux.backward()
        aux_opt.step()
        res.setdefault("bpp", []).append(bpp.item())
        res.setdefault("aux", []).append(aux.item())
    res["y_hat"], res["lik"] = y_hat, lik
    res["q_grad"], res["m_grad"] = eb.quantiles.grad, eb.matrices[0].grad
    res["quantiles"], res["factor"] = eb.quantiles, eb.factors[1]
    eb.eval()
    with torch.no_grad():
        y_hat, lik = eb(y)
    res["eval_y_hat"], res["eval_lik"] = y_hat, lik
    res["eval_flags"] = [eb.training, y_hat.is_contiguous(), lik.requires_grad]
    pmf, tail, lengths, max_length = eb.pmf_tables()
    res["pmf"], res["tail"], res["lengths"] = pmf, tail, lengths
    res["offset"], res["max_len"] = eb._offset, [int(max_length)]
    cdf = eb.build_cdf(pmf, tail, lengths, max_length)
    # counts round sigmoid differences (1-ulp noise, amplified by the pmf's cancellation), so
    # compare the table's layout, not each count
    res["cdf_len"], res["cdf_first"] = eb._cdf_length, cdf[:, 0]
    res["cdf_mono"] = [bool((cdf[i, 1:lengths[i] + 2] > cdf[i, :lengths[i] + 1]).all())
                       for i in range(len(cdf))]
    res["cdf_dtype"] = [_dt(cdf), _dt(eb._offset), _dt(lengths)]
    # int symbols about the medians, as compress() gives the range coder
    sym = eb.quantize(y.permute(1, 0, 2, 3).reshape(3, 1, -1), "symbols", eb._get_medians())
    res["sym"], res["sym_dtype"] = sym, [_dt(sym)]
    return res


def hyperprior_program(torch):
    rng = np.random.default_rng(3203)
    GDN, _ = _gdn_class(torch)
    EB = _entropy_bottleneck_class(torch)
    GC = _gaussian_conditional_class(torch)
    nn = torch.nn
    N, M = 4, 6

    class ScaleHyperprior(nn.Module):
        def __init__(self):
            super().__init__()
            self.entropy_bottleneck = EB(N)
            self.g_a = nn.Sequential(_conv(torch, 3, N), GDN(N), _conv(torch, N, M))
            self.g_s = nn.Sequential(_deconv(torch, M, N), GDN(N, inverse=True),
                                     _deconv(torch, N, 3))
            self.h_a = nn.Sequential(_conv(torch, M, N, stride=1, k=3), nn.ReLU(inplace=True),
                                     _conv(torch, N, N))
            self.h_s = nn.Sequential(_deconv(torch, N, N), nn.ReLU(inplace=True),
                                     _conv(torch, N, M, stride=1, k=3), nn.ReLU(inplace=True))
            self.gaussian_conditional = GC(None)

        def forward(self, x, n_z, n_y):
            y = self.g_a(x)
            z = self.h_a(torch.abs(y))
            z_hat, z_likelihoods = self.entropy_bottleneck(z, noise=n_z)
            scales_hat = self.h_s(z_hat)
            y_hat, y_likelihoods = self.gaussian_conditional(
                y, scales_hat, training=self.training, noise=n_y)
            x_hat = self.g_s(y_hat)
            return {"x_hat": x_hat, "likelihoods": {"y": y_likelihoods, "z": z_likelihoods}}

        def aux_loss(self):
            return sum(m.loss() for m in self.modules() if isinstance(m, EB))

    class RateDistortionLoss(nn.Module):
        def __init__(self, lmbda=1e-2):
            super().__init__()
            self.mse = nn.MSELoss()
            self.lmbda = lmbda

        def forward(self, output, target):
            N, _, H, W = target.size()
            out = {}
            num_pixels = N * H * W
            out["bpp_loss"] = sum(
                (torch.log(likelihoods).sum() / (-math.log(2) * num_pixels))
                for likelihoods in output["likelihoods"].values())
            out["mse_loss"] = self.mse(output["x_hat"], target)
            out["loss"] = self.lmbda * 255 ** 2 * out["mse_loss"] + out["bpp_loss"]
            return out

    net = ScaleHyperprior()
    fill_(torch, [p for n, p in net.named_parameters()
                  if n.startswith(("g_", "h_")) and "beta" not in n and "gamma" not in n],
          rng, 0.2)
    _seed_biases(torch, net.entropy_bottleneck, rng)
    res = {"keys": list(net.state_dict().keys())}
    parameters = {n for n, p in net.named_parameters()
                  if not n.endswith(".quantiles") and p.requires_grad}
    aux_parameters = {n for n, p in net.named_parameters()
                      if n.endswith(".quantiles") and p.requires_grad}
    inter_params = parameters & aux_parameters
    union_params = parameters | aux_parameters
    res["split"] = [len(inter_params), len(union_params), len(aux_parameters)]
    params_dict = dict(net.named_parameters())
    optimizer = torch.optim.Adam((params_dict[n] for n in sorted(parameters)), lr=1e-3)
    aux_optimizer = torch.optim.Adam((params_dict[n] for n in sorted(aux_parameters)), lr=1e-2)
    criterion = RateDistortionLoss(lmbda=0.01)
    x = torch.from_numpy(rng.random((2, 3, 16, 16)).astype(np.float32))
    net.train()
    for _ in range(2):
        n_z = torch.from_numpy(rng.uniform(-0.5, 0.5, (N, 2, 2, 2)).astype(np.float32))
        n_y = torch.from_numpy(rng.uniform(-0.5, 0.5, (2, M, 4, 4)).astype(np.float32))
        optimizer.zero_grad()
        aux_optimizer.zero_grad()
        out_net = net(x, n_z, n_y)
        out = criterion(out_net, x)
        out["loss"].backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
        aux_loss = net.aux_loss()
        aux_loss.backward()
        aux_optimizer.step()
        for k in ("loss", "bpp_loss", "mse_loss"):
            res.setdefault(k, []).append(out[k].item())
        res.setdefault("aux", []).append(aux_loss.item())
    res["x_hat"] = out_net["x_hat"]
    res["y_lik"] = out_net["likelihoods"]["y"]
    res["g_a_grad"] = net.g_a[0].weight.grad
    res["gdn_beta"] = net.g_a[1].beta
    # eval: rounding, PSNR, bpp, and the scale table indexes compress() would send
    net.eval()
    with torch.no_grad():
        out_net = net(x, None, None)
        out_net["x_hat"].clamp_(0, 1)
        mse = torch.mean((x - out_net["x_hat"]) ** 2).item()
        res["psnr"] = [-10 * math.log10(mse)]
        size = x.size()
        num_pixels = size[0] * size[2] * size[3]
        res["bpp"] = sum(torch.log(lk).sum() / (-math.log(2) * num_pixels)
                         for lk in out_net["likelihoods"].values())
    gc = GC(get_scale_table(torch).tolist())
    res["table"] = gc.scale_table
    res["scale_bound"] = gc.scale_bound
    scales = torch.exp(normal(torch, rng, 2, M, 4, 4) * 2)
    idx = gc.build_indexes(scales)
    res["idx"], res["idx_dtype"] = idx, [_dt(idx)]
    y = normal(torch, rng, 2, M, 4, 4) * 4
    means = normal(torch, rng, 2, M, 4, 4)
    y_hat, lik = gc(y, scales, means, training=False)
    res["gc_y_hat"], res["gc_lik"] = y_hat, lik
    s = scales.clone().requires_grad_()
    _, lik2 = gc(y, s, means, training=True, noise=torch.zeros_like(y))
    (-torch.log2(lik2)).sum().backward()
    res["scale_grad"] = s.grad
    return res


def checkpoint_update_program(torch):
    """CompressAI's load_state_dict resizes the CDF buffers; the sizes come from the saved
    state, and the aux/main parameter split is checked before training."""
    import io
    rng = np.random.default_rng(3204)
    EB = _entropy_bottleneck_class(torch)
    res = {}
    eb = EB(2, filters=(2, 2))
    _seed_biases(torch, eb, rng)
    pmf, tail, lengths, max_length = eb.pmf_tables()
    eb.build_cdf(pmf, tail, lengths, max_length)
    buf = io.BytesIO()
    torch.save(eb.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    fresh = EB(2, filters=(2, 2))
    _seed_biases(torch, fresh, rng)
    res["empty"] = [tuple(fresh._quantized_cdf.shape) == (0,), _dt(fresh._offset)]
    for name in ("_quantized_cdf", "_offset", "_cdf_length"):
        attr = getattr(fresh, name)
        attr.resize_(state[name].size())
        res.setdefault("resized", []).append(str(tuple(attr.shape)))
    fresh.load_state_dict(state)
    res["offset"], res["cdf_shape"] = fresh._offset, list(fresh._quantized_cdf.shape)
    res["same"] = [bool(torch.equal(fresh._quantized_cdf, eb._quantized_cdf))]
    # strict=False reports what the checkpoint lacks
    partial = {k: v for k, v in state.items() if not k.startswith("matrices")}
    missing, unexpected = fresh.load_state_dict(partial, strict=False)
    res["missing"], res["unexpected"] = list(missing), list(unexpected)
    try:
        fresh.load_state_dict({**state, "quantiles": torch.zeros(3, 1, 3)})
    except RuntimeError as e:
        res["err"] = [str(e).splitlines()[0], "size mismatch" in str(e)]
    x = normal(torch, rng, 1, 2, 3, 3)
    fresh.eval()
    with torch.no_grad():
        res["out"] = fresh(x)[1]
    return res


PROGRAMS = [gdn_program, entropy_bottleneck_program, hyperprior_program,
            checkpoint_update_program]


TOLERANCES = {
    # four convolutions and two transposed ones in float32: sums in another order (1e-6 abs)
    "hyperprior_program": (1e-5, 5e-6),
}


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
