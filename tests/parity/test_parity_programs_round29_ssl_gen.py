"""New generative models written as facebookresearch/DiT, openai/consistency_models and the
guidance-distillation recipe write them in torch, run once with `torch` bound to ember and once
to PyTorch from the same NumPy weights and data: DiT with adaLN-Zero (zero-initialised
modulation and final layers through nn.init.constant_, chunk(6, dim=1), a frozen sin-cos
pos-embed copied from NumPy, label dropout by torch.where with a Python int, reshape(shape=...),
einsum unpatchify, learned-sigma split) trained as a rectified flow with logit-normal times,
SD3's timestep shift and Euler/Heun samplers; consistency training and distillation (Karras
boundaries, c_skip/c_out/c_in scalings, append_dims, an EMA target updated through detach().
mul_().add_(), dropout replayed with get_rng_state/set_rng_state, pseudo-Huber and l2 losses,
lognormal index probabilities from erf, multistep sampling with NumPy-float times); guidance
distillation of a v-prediction teacher into a guidance-conditioned student; MeanFlow and sCM
(TrigFlow) training through torch.func.jvp, and forward_ad through the DiT."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _sincos_2d(embed_dim, grid_size):
    """DiT's get_2d_sincos_pos_embed, in NumPy as the repository has it."""
    grid_h = np.arange(grid_size, dtype=np.float32)
    grid = np.meshgrid(grid_h, grid_h)
    grid = np.stack(grid, axis=0).reshape([2, 1, grid_size, grid_size])

    def from_grid(dim, pos):
        omega = np.arange(dim // 2, dtype=np.float64) / (dim / 2.0)
        omega = 1.0 / 10000 ** omega
        out = np.einsum("m,d->md", pos.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)
    return np.concatenate([from_grid(embed_dim // 2, grid[0]),
                           from_grid(embed_dim // 2, grid[1])], axis=1)


def _dit(torch, input_size=4, patch_size=2, in_channels=2, hidden_size=8, depth=2,
         num_heads=2, num_classes=3, class_dropout_prob=0.1, learn_sigma=True):
    """DiT (models.py), shrunk."""
    nn, F = torch.nn, torch.nn.functional

    def modulate(x, shift, scale):
        return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)

    class TimestepEmbedder(nn.Module):
        def __init__(self, frequency_embedding_size=9):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(frequency_embedding_size, hidden_size), nn.SiLU(),
                                     nn.Linear(hidden_size, hidden_size))
            self.frequency_embedding_size = frequency_embedding_size

        @staticmethod
        def timestep_embedding(t, dim, max_period=10000):
            half = dim // 2
            freqs = torch.exp(-math.log(max_period) * torch.arange(
                start=0, end=half, dtype=torch.float32) / half).to(device=t.device)
            args = t[:, None].float() * freqs[None]
            embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
            if dim % 2:
                embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
            return embedding

        def forward(self, t):
            return self.mlp(self.timestep_embedding(t, self.frequency_embedding_size))

    class LabelEmbedder(nn.Module):
        def __init__(self):
            super().__init__()
            use_cfg_embedding = class_dropout_prob > 0
            self.embedding_table = nn.Embedding(num_classes + use_cfg_embedding, hidden_size)
            self.num_classes, self.dropout_prob = num_classes, class_dropout_prob

        def token_drop(self, labels, force_drop_ids=None):
            if force_drop_ids is None:
                drop_ids = torch.rand(labels.shape[0], device=labels.device) < self.dropout_prob
            else:
                drop_ids = force_drop_ids == 1
            return torch.where(drop_ids, self.num_classes, labels)

        def forward(self, labels, train, force_drop_ids=None):
            use_dropout = self.dropout_prob > 0
            if (train and use_dropout) or (force_drop_ids is not None):
                labels = self.token_drop(labels, force_drop_ids)
            return self.embedding_table(labels)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.num_heads, self.head_dim = num_heads, hidden_size // num_heads
            self.qkv = nn.Linear(hidden_size, hidden_size * 3, bias=True)
            self.proj = nn.Linear(hidden_size, hidden_size)
            self.fused_attn = True

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            if self.fused_attn:
                x = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
            else:
                attn = (q * self.head_dim ** -0.5) @ k.transpose(-2, -1)
                x = attn.softmax(dim=-1) @ v
            return self.proj(x.transpose(1, 2).reshape(B, N, C))

    class DiTBlock(nn.Module):
        def __init__(self, mlp_ratio=2.0):
            super().__init__()
            self.norm1 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
            self.attn = Attention()
            self.norm2 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
            mlp_hidden_dim = int(hidden_size * mlp_ratio)
            self.mlp = nn.Sequential(nn.Linear(hidden_size, mlp_hidden_dim),
                                     nn.GELU(approximate="tanh"),
                                     nn.Linear(mlp_hidden_dim, hidden_size))
            self.adaLN_modulation = nn.Sequential(nn.SiLU(),
                                                  nn.Linear(hidden_size, 6 * hidden_size))

        def forward(self, x, c):
            shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = \
                self.adaLN_modulation(c).chunk(6, dim=1)
            x = x + gate_msa.unsqueeze(1) * self.attn(modulate(self.norm1(x), shift_msa,
                                                               scale_msa))
            return x + gate_mlp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), shift_mlp,
                                                                 scale_mlp))

    class FinalLayer(nn.Module):
        def __init__(self, out_channels):
            super().__init__()
            self.norm_final = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
            self.linear = nn.Linear(hidden_size, patch_size * patch_size * out_channels)
            self.adaLN_modulation = nn.Sequential(nn.SiLU(),
                                                  nn.Linear(hidden_size, 2 * hidden_size))

        def forward(self, x, c):
            shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
            return self.linear(modulate(self.norm_final(x), shift, scale))

    class PatchEmbed(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_size = (patch_size, patch_size)
            self.num_patches = (input_size // patch_size) ** 2
            self.proj = nn.Conv2d(in_channels, hidden_size, patch_size, patch_size)

        def forward(self, x):
            return self.proj(x).flatten(2).transpose(1, 2)

    class DiT(nn.Module):
        def __init__(self):
            super().__init__()
            self.learn_sigma = learn_sigma
            self.in_channels = in_channels
            self.out_channels = in_channels * 2 if learn_sigma else in_channels
            self.x_embedder = PatchEmbed()
            self.t_embedder = TimestepEmbedder()
            self.y_embedder = LabelEmbedder()
            num_patches = self.x_embedder.num_patches
            self.pos_embed = nn.Parameter(torch.zeros(1, num_patches, hidden_size),
                                          requires_grad=False)
            self.blocks = nn.ModuleList([DiTBlock() for _ in range(depth)])
            self.final_layer = FinalLayer(self.out_channels)
            self.initialize_weights()

        def initialize_weights(self):
            def _basic_init(module):
                if isinstance(module, nn.Linear):
                    torch.nn.init.xavier_uniform_(module.weight)
                    if module.bias is not None:
                        nn.init.constant_(module.bias, 0)
            self.apply(_basic_init)
            pos_embed = _sincos_2d(self.pos_embed.shape[-1],
                                   int(self.x_embedder.num_patches ** 0.5))
            self.pos_embed.data.copy_(torch.from_numpy(pos_embed).float().unsqueeze(0))
            w = self.x_embedder.proj.weight.data
            nn.init.xavier_uniform_(w.view([w.shape[0], -1]))
            nn.init.constant_(self.x_embedder.proj.bias, 0)
            nn.init.normal_(self.y_embedder.embedding_table.weight, std=0.02)
            nn.init.normal_(self.t_embedder.mlp[0].weight, std=0.02)
            nn.init.normal_(self.t_embedder.mlp[2].weight, std=0.02)
            self.zero_init()

        def zero_init(self):
            for block in self.blocks:
                nn.init.constant_(block.adaLN_modulation[-1].weight, 0)
                nn.init.constant_(block.adaLN_modulation[-1].bias, 0)
            nn.init.constant_(self.final_layer.adaLN_modulation[-1].weight, 0)
            nn.init.constant_(self.final_layer.adaLN_modulation[-1].bias, 0)
            nn.init.constant_(self.final_layer.linear.weight, 0)
            nn.init.constant_(self.final_layer.linear.bias, 0)

        def unpatchify(self, x):
            c = self.out_channels
            p = self.x_embedder.patch_size[0]
            h = w = int(x.shape[1] ** 0.5)
            assert h * w == x.shape[1]
            x = x.reshape(shape=(x.shape[0], h, w, p, p, c))
            x = torch.einsum("nhwpqc->nchpwq", x)
            return x.reshape(shape=(x.shape[0], c, h * p, h * p))

        def forward(self, x, t, y, force_drop_ids=None):
            x = self.x_embedder(x) + self.pos_embed
            t = self.t_embedder(t)
            y = self.y_embedder(y, self.training, force_drop_ids)
            c = t + y
            for block in self.blocks:
                x = block(x, c)
            return self.unpatchify(self.final_layer(x, c))
    return DiT


def dit_rectified_flow_program(torch):
    """DiT trained as a rectified flow (SiT/SD3 style): adaLN-Zero makes the first step's
    gradients reach only the final layer, label dropout from NumPy ids, logit-normal times, a
    learned-sigma split, then Euler and Heun samplers over SD3-shifted times under no_grad."""
    rng = np.random.default_rng(2911)
    DiT = _dit(torch)
    res = {}
    model = DiT()
    bound = math.sqrt(6 / (8 + 2 * 2 * 2))
    w = model.x_embedder.proj.weight
    res["init"] = [bool(w.abs().max() <= bound), w.abs().max().item() > 0.5 * bound,
                   float(model.final_layer.linear.weight.detach().abs().sum()) == 0.0,
                   model.pos_embed.requires_grad]
    res["pos_embed"] = model.pos_embed.clone()
    fill_(torch, [p for p in model.parameters() if p.requires_grad], rng, 0.3)
    model.zero_init()
    res["param_names"] = [n for n, p in model.named_parameters() if p.requires_grad]
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-2,
                            weight_decay=0)
    res.update(loss=[], first_zero=[], sigma=[])

    def mean_flat(tensor):
        return tensor.mean(dim=list(range(1, len(tensor.shape))))

    for step in range(3):
        x0 = normal(torch, rng, 4, 2, 4, 4)
        noise = normal(torch, rng, 4, 2, 4, 4)
        y = torch.from_numpy(rng.integers(0, 3, 4))
        drop = torch.from_numpy((rng.uniform(size=4) < 0.3).astype(np.int64))
        t = torch.sigmoid(normal(torch, rng, 4))                     # logit-normal times
        t_ = t.view(-1, *([1] * (x0.ndim - 1)))
        xt = (1 - t_) * x0 + t_ * noise
        target = noise - x0
        model_output = model(xt, t * 1000, y, force_drop_ids=drop)
        B, C = xt.shape[:2]
        assert model_output.shape == (B, C * 2, *xt.shape[2:])
        model_output, model_var_values = torch.split(model_output, C, dim=1)
        loss = mean_flat((model_output - target) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if step == 0:
            res["first_zero"] = [bool(p.grad is None or (p.grad == 0).all())
                                 for p in model.parameters() if p.requires_grad]
        opt.step()
        res["loss"].append(loss.item())
        res["sigma"].append(model_var_values.detach().abs().mean().item())
    # a key bias only shifts each softmax row: its gradient is rounding noise, which AdamW
    # turns into steps of either sign, so only the query and value parts are compared
    res["params"] = [torch.cat((p[:8], p[16:])).detach() if n.endswith("qkv.bias")
                     else p.detach().clone() for n, p in model.named_parameters()]
    res["dropped_label_row"] = model.y_embedder.embedding_table.weight[3]

    model.eval()
    shift = 3.0
    with torch.no_grad():
        z = normal(torch, rng, 2, 2, 4, 4)
        y = torch.tensor([0, 2])
        n = 4
        ts = torch.linspace(1, 0, n + 1)
        ts = shift * ts / (1 + (shift - 1) * ts)
        x_euler, x_heun = z.clone(), z.clone()
        for i in range(n):
            t_cur, t_next = ts[i], ts[i + 1]
            dt = t_next - t_cur
            v = model(x_euler, t_cur.repeat(2) * 1000, y)[:, :2]
            x_euler = x_euler + dt * v
            d = model(x_heun, t_cur.expand(2) * 1000, y).chunk(2, dim=1)[0]
            x_next = x_heun + dt * d
            if i < n - 1:
                d2 = model(x_next, t_next.expand(2) * 1000, y).chunk(2, dim=1)[0]
                x_next = x_heun + dt * 0.5 * (d + d2)
            x_heun = x_next
        res["ts"] = ts
        res["samples"] = [x_euler, x_heun]
        res["eval_drop"] = model.y_embedder(y, False)
    res["sample_flags"] = [x_euler.requires_grad, x_heun.is_contiguous()]
    return res



def _unet_lite(torch, channels=2, hidden=12, dropout=0.0):
    """A small conv denoiser taking a (scaled) time and an optional extra conditioning scalar."""
    nn, F = torch.nn, torch.nn.functional

    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.t_proj = nn.Linear(8, hidden)
            self.w_proj = nn.Linear(8, hidden)
            self.c_proj = nn.Embedding(3, hidden)
            self.inp = nn.Conv2d(channels, hidden, 3, padding=1)
            self.mid = nn.Conv2d(hidden, hidden, 3, padding=1)
            self.norm = nn.GroupNorm(4, hidden)
            self.drop = nn.Dropout(dropout)
            self.out = nn.Conv2d(hidden, channels, 3, padding=1)

        @staticmethod
        def fourier(t, dim=8):
            freqs = torch.exp(torch.arange(dim // 2, dtype=torch.float32) * -math.log(100.0)
                              / (dim // 2))
            args = t.float()[:, None] * freqs[None, :]
            return torch.cat([args.sin(), args.cos()], dim=1)

        def forward(self, x, t, w=None, y=None):
            emb = F.silu(self.t_proj(self.fourier(t)))
            if w is not None:
                emb = emb + F.silu(self.w_proj(self.fourier(w)))
            if y is not None:
                emb = emb + self.c_proj(y)
            h = F.silu(self.inp(x)) + emb[:, :, None, None]
            h = self.drop(F.silu(self.norm(self.mid(h))))
            return self.out(h)
    return Denoiser


def consistency_program(torch):
    """Consistency training (Euler step with the data as denoiser) and distillation (Heun steps
    of an EDM teacher) as openai/consistency_models' KarrasDenoiser writes them, with an EMA
    target, improved-CT pseudo-Huber loss and lognormal index probabilities, and multistep
    sampling whose times are NumPy floats multiplying tensors."""
    import copy
    rng = np.random.default_rng(2912)
    Denoiser = _unet_lite(torch)
    res = {}
    sigma_data, sigma_min, sigma_max, rho = 0.5, 0.002, 80.0, 7.0

    def append_dims(x, target_dims):
        dims_to_append = target_dims - x.ndim
        if dims_to_append < 0:
            raise ValueError(f"input has {x.ndim} dims but target_dims is {target_dims}")
        return x[(...,) + (None,) * dims_to_append]

    def mean_flat(tensor):
        return tensor.mean(dim=list(range(1, len(tensor.shape))))

    def scalings_for_boundary_condition(sigma):
        c_skip = sigma_data ** 2 / ((sigma - sigma_min) ** 2 + sigma_data ** 2)
        c_out = (sigma - sigma_min) * sigma_data / (sigma ** 2 + sigma_data ** 2) ** 0.5
        c_in = 1 / (sigma ** 2 + sigma_data ** 2) ** 0.5
        return c_skip, c_out, c_in

    def denoise(model, x_t, sigmas):
        c_skip, c_out, c_in = [append_dims(x, x_t.ndim)
                               for x in scalings_for_boundary_condition(sigmas)]
        rescaled_t = 1000 * 0.25 * torch.log(sigmas + 1e-44)
        model_output = model(c_in * x_t, rescaled_t)
        return model_output, c_out * model_output + c_skip * x_t

    def karras_t(indices, num_scales):
        t = sigma_max ** (1 / rho) + indices / (num_scales - 1) * (
            sigma_min ** (1 / rho) - sigma_max ** (1 / rho))
        return t ** rho

    def update_ema(target_params, source_params, rate=0.99):
        for targ, src in zip(target_params, source_params):
            targ.detach().mul_(rate).add_(src, alpha=1 - rate)

    model = Denoiser()
    fill_(torch, model, rng, 0.3)
    target_model = copy.deepcopy(model)
    target_model.requires_grad_(False)
    target_model.train()
    teacher = Denoiser()
    fill_(torch, teacher, rng, 0.3)
    opt = torch.optim.RAdam(model.parameters(), lr=5e-3)
    res.update(ct=[], cd=[], weights=[])

    def teacher_denoise(x_t, t):
        c_skip = sigma_data ** 2 / (t ** 2 + sigma_data ** 2)
        c_out = t * sigma_data / (t ** 2 + sigma_data ** 2) ** 0.5
        c_in = 1 / (t ** 2 + sigma_data ** 2) ** 0.5
        out = teacher(append_dims(c_in, 4) * x_t, 1000 * 0.25 * torch.log(t + 1e-44))
        return append_dims(c_out, 4) * out + append_dims(c_skip, 4) * x_t

    @torch.no_grad()
    def heun_solver(samples, t, next_t, x0):
        x = samples
        denoiser = teacher_denoise(x, t)
        d = (x - denoiser) / append_dims(t, x.ndim)
        samples = x + d * append_dims(next_t - t, x.ndim)
        denoiser = teacher_denoise(samples, next_t)
        next_d = (samples - denoiser) / append_dims(next_t, x.ndim)
        return x + (d + next_d) * append_dims((next_t - t) / 2, x.ndim)

    @torch.no_grad()
    def euler_to_denoiser(samples, t, x0, next_t):
        d = (samples - x0) / append_dims(t, samples.ndim)
        return samples + d * append_dims(next_t - t, samples.ndim)

    num_scales = 6
    for step in range(4):
        distill = step >= 2
        x_start = normal(torch, rng, 3, 2, 4, 4) * 0.5
        noise = normal(torch, rng, 3, 2, 4, 4)
        indices = torch.from_numpy(rng.integers(0, num_scales - 1, 3))
        t = karras_t(indices, num_scales)
        t2 = karras_t(indices + 1, num_scales)
        x_t = x_start + noise * append_dims(t, x_start.ndim)
        dropout_state = torch.get_rng_state()
        _, distiller = denoise(model, x_t, t)
        if distill:
            x_t2 = heun_solver(x_t, t, t2, x_start).detach()
        else:
            x_t2 = euler_to_denoiser(x_t, t, x_start, t2).detach()
        torch.set_rng_state(dropout_state)
        _, distiller_target = denoise(target_model, x_t2, t2)
        distiller_target = distiller_target.detach()
        snrs = t ** -2
        weights = snrs + 1.0 / sigma_data ** 2 if distill else torch.ones_like(snrs)
        if distill:
            diffs = (distiller - distiller_target) ** 2
            loss = (mean_flat(diffs) * weights).mean()
        else:
            c = 0.00054 * math.sqrt(distiller[0].numel())
            loss = (torch.sqrt((distiller - distiller_target) ** 2 + c ** 2) - c).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        update_ema(target_model.parameters(), model.parameters(), rate=0.9)
        res["cd" if distill else "ct"].append(loss.item())
        res["weights"].append(weights)
    res["params"] = [p.detach().clone() for p in model.parameters()]
    res["target"] = [p.clone() for p in target_model.parameters()]
    res["target_flags"] = [p.requires_grad for p in target_model.parameters()][:2] + [
        target_model.training]
    res["boundary"] = list(scalings_for_boundary_condition(torch.tensor([sigma_min, 1.0])))

    # dropout replayed: the same RNG state gives the same masks
    Dropped = _unet_lite(torch, dropout=0.5)
    net = Dropped()
    fill_(torch, net, rng, 0.3)
    x = normal(torch, rng, 2, 2, 4, 4)
    tt = torch.tensor([1.0, 2.0])
    state = torch.get_rng_state()
    a = net(x, tt)
    torch.set_rng_state(state)
    b = net(x, tt)
    c = net(x, tt)
    res["replay"] = [bool(torch.equal(a, b)), bool(torch.equal(b, c)),
                     state.dtype == torch.uint8, state.dim()]

    # improved CT: lognormal index probabilities over Karras sigmas, then a multinomial draw
    sigmas = karras_t(torch.arange(11, dtype=torch.float64), 11).flip(0)
    p_mean, p_std = -1.1, 2.0
    pdf = torch.erf((torch.log(sigmas[1:]) - p_mean) / (p_std * math.sqrt(2))) - torch.erf(
        (torch.log(sigmas[:-1]) - p_mean) / (p_std * math.sqrt(2)))
    pdf = pdf / pdf.sum()
    res["index_pdf"] = pdf
    torch.manual_seed(0)
    draws = torch.multinomial(pdf, 64, replacement=True)
    res["draws"] = [draws.dtype == torch.int64, int(draws.min()) >= 0, int(draws.max()) < 10,
                    *draws.shape]
    curriculum = [min(10 * 2 ** math.floor(k / 3), 80) + 1 for k in range(8)]
    res["curriculum"] = curriculum

    # multistep consistency sampling: NumPy-float times multiply tensors from the left
    model.eval()
    with torch.no_grad():
        ts = [0, 2, 4]
        steps = 6
        t_max_rho, t_min_rho = sigma_max ** (1 / rho), sigma_min ** (1 / rho)
        x = normal(torch, rng, 2, 2, 4, 4) * sigma_max
        s_in = x.new_ones([x.shape[0]])
        times = []
        for i in range(len(ts) - 1):
            t = (t_max_rho + ts[i] / (steps - 1) * (t_min_rho - t_max_rho)) ** rho
            _, x0 = denoise(model, x, t * s_in)
            next_t = (t_max_rho + ts[i + 1] / (steps - 1) * (t_min_rho - t_max_rho)) ** rho
            next_t = np.clip(next_t, sigma_min, sigma_max)
            times.append(type(t * s_in).__name__)
            x = x0 + normal(torch, rng, *x.shape) * np.sqrt(next_t ** 2 - sigma_min ** 2)
        res["sample"] = x
        res["time_types"] = times
        res["np_scalar_left"] = [type(np.float64(2.0) * s_in).__name__,
                                 str(np.float32(2.0) * s_in.double()).split("(")[0],
                                 (np.float64(2.0) * s_in).dtype == torch.float32]
    return res


def guidance_distillation_program(torch):
    """Meng et al.'s guidance distillation: a class-conditional v-prediction teacher under
    classifier-free guidance at a NumPy-drawn strength w is distilled into a student that takes
    w through a Fourier embedding; then a few deterministic DDIM steps from the student."""
    F = torch.nn.functional
    rng = np.random.default_rng(2913)
    Denoiser = _unet_lite(torch)
    res = {}
    teacher, student = Denoiser(), Denoiser()
    fill_(torch, teacher, rng, 0.3)
    student.load_state_dict(teacher.state_dict())
    teacher.eval().requires_grad_(False)
    opt = torch.optim.Adam(student.parameters(), lr=3e-3)
    null = 2

    def alpha_sigma(t):
        return torch.cos(t * math.pi / 2), torch.sin(t * math.pi / 2)

    res.update(loss=[], guided=[])
    for step in range(4):
        x = normal(torch, rng, 4, 2, 4, 4) * 0.5
        eps = normal(torch, rng, 4, 2, 4, 4)
        t = torch.from_numpy(rng.uniform(0.02, 0.98, 4).astype(np.float32))
        w = torch.from_numpy(rng.uniform(0, 4, 4).astype(np.float32))
        y = torch.from_numpy(rng.integers(0, 2, 4))
        alpha, sigma = (a.view(-1, 1, 1, 1) for a in alpha_sigma(t))
        z = alpha * x + sigma * eps
        with torch.no_grad():
            v_both = teacher(torch.cat([z, z]), torch.cat([t, t]) * 1000,
                             y=torch.cat([y, torch.full_like(y, null)]))
            v_cond, v_uncond = v_both.chunk(2)
            w_ = w.view(-1, 1, 1, 1)
            v_guided = (1 + w_) * v_cond - w_ * v_uncond
        v_student = student(z, t * 1000, w=w, y=y)
        x_hat_s = alpha * z - sigma * v_student
        x_hat_t = alpha * z - sigma * v_guided
        snr = (alpha / sigma) ** 2
        loss = (torch.clamp(snr, max=5.0).squeeze() * F.mse_loss(
            x_hat_s, x_hat_t, reduction="none").mean(dim=(1, 2, 3))).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["guided"].append(v_guided)
    res["params"] = [p.detach().clone() for p in student.parameters()]
    res["teacher_grads"] = [p.grad is None for p in teacher.parameters()][:3]

    with torch.inference_mode():
        z = normal(torch, rng, 2, 2, 4, 4)
        y = torch.tensor([0, 1])
        w = torch.full((2,), 2.5)
        ts = torch.linspace(1.0, 0.0, 5)[:-1].tolist() + [0.0]
        for t_cur, t_next in zip(ts[:-1], ts[1:]):
            tt = torch.full((2,), t_cur)
            a_t, s_t = alpha_sigma(tt)
            a_n, s_n = alpha_sigma(torch.full((2,), t_next))
            v = student(z, tt * 1000, w=w, y=y)
            a_t, s_t, a_n, s_n = (q.view(-1, 1, 1, 1) for q in (a_t, s_t, a_n, s_n))
            x_pred = a_t * z - s_t * v
            eps_pred = s_t * z + a_t * v
            z = a_n * x_pred + s_n * eps_pred
        res["ddim"] = z
        res["ddim_flags"] = [z.is_inference(), z.requires_grad]
    return res


def meanflow_scm_program(torch):
    """Consistency-style training through forward-mode AD, as the MeanFlow and sCM (TrigFlow)
    recipes write it: torch.func.jvp through the network for du/dt with tangents (v, 0, 1),
    a stop-gradient target, adaptive loss weights; sCM's tangent built from cos/sin of t with
    the jvp over functional_call, a normalised g and a learned log-variance weighting; jvp
    with has_aux; and the same tangent through torch.autograd.forward_ad on the DiT, after the
    fused attention's missing forward-AD formula sends it to the math path."""
    rng = np.random.default_rng(2914)
    Denoiser = _unet_lite(torch)
    res = {}
    model = Denoiser()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.95))
    res.update(mf=[], mf_weights=[])
    for step in range(3):
        x = normal(torch, rng, 3, 2, 4, 4)
        e = normal(torch, rng, 3, 2, 4, 4)
        t = torch.from_numpy(rng.uniform(0.1, 1.0, 3).astype(np.float32))
        r = t * torch.from_numpy(rng.uniform(0, 1, 3).astype(np.float32))
        r = torch.where(torch.arange(3) == 0, t, r)          # one sample with r = t
        t_, r_ = t.view(-1, 1, 1, 1), r.view(-1, 1, 1, 1)
        z = (1 - t_) * x + t_ * e
        v = e - x

        def fn(z, r, t):
            return model(z, t * 100, w=(t - r) * 100)

        u, dudt = torch.func.jvp(fn, (z, r, t), (v, torch.zeros_like(r), torch.ones_like(t)))
        u_tgt = (v - (t_ - r_) * dudt).detach()
        error = u - u_tgt
        delta_sq = error.pow(2).mean(dim=(1, 2, 3))
        w = 1.0 / (delta_sq + 1e-3).pow(1.0 - 0.5)
        loss = (w.detach() * delta_sq).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["mf"].append([loss.item(), dudt.abs().mean().item()])
        res["mf_weights"].append(w.detach())
    res["mf_params"] = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        z1 = normal(torch, rng, 2, 2, 4, 4)
        one, zero = torch.ones(2), torch.zeros(2)
        res["one_step"] = z1 - model(z1, one * 100, w=(one - zero) * 100)

    # sCM in TrigFlow: x_t = cos(t) x0 + sin(t) z, f = cos(t) x_t - sin(t) sigma_d F(x_t / sigma_d)
    sigma_d = 0.5
    net = Denoiser()
    fill_(torch, net, rng, 0.3)
    logvar = torch.nn.Linear(8, 1)
    fill_(torch, logvar, rng, 0.1)
    params = dict(net.named_parameters())
    opt = torch.optim.AdamW(list(net.parameters()) + list(logvar.parameters()), lr=1e-3,
                            weight_decay=0.0)
    res["scm"] = []
    for step in range(3):
        x0 = normal(torch, rng, 3, 2, 4, 4) * sigma_d
        z = normal(torch, rng, 3, 2, 4, 4) * sigma_d
        tau = torch.from_numpy(rng.normal(-1.0, 1.4, 3).astype(np.float32))
        t = torch.atan(torch.exp(tau) / sigma_d)
        tc = t.view(-1, 1, 1, 1)
        x_t = torch.cos(tc) * x0 + torch.sin(tc) * z
        dxt_dt = torch.cos(tc) * z - torch.sin(tc) * x0

        def model_wrapper(scaled_x_t, t):
            pred = torch.func.functional_call(net, params, (scaled_x_t, t * 100))
            return pred, pred.abs().mean()

        v_x = torch.cos(tc) * torch.sin(tc) * dxt_dt / sigma_d
        v_t = torch.cos(t) * torch.sin(t)
        F_theta, F_theta_grad, aux = torch.func.jvp(model_wrapper, (x_t / sigma_d, t),
                                                    (v_x, v_t), has_aux=True)
        F_theta_grad = F_theta_grad.detach()
        F_theta_minus = F_theta.detach()
        r = min(1.0, (step + 1) / 2)
        g = -torch.cos(tc) * torch.cos(tc) * (sigma_d * F_theta_minus - dxt_dt)
        second_term = -r * (torch.cos(tc) * torch.sin(tc) * x_t + sigma_d * F_theta_grad)
        g = g + second_term
        g_norm = torch.linalg.vector_norm(g, dim=(1, 2, 3), keepdim=True)
        g_norm = g_norm * np.sqrt(g_norm.numel() / g.numel())
        g = g / (g_norm + 0.1)
        lv = logvar(Denoiser.fourier(t * 100)).view(-1, 1, 1, 1)
        weight = 1 / sigma_d
        loss = (weight / torch.exp(lv)) * torch.square(F_theta - F_theta_minus - g) + lv
        loss = loss.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["scm"].append([loss.item(), aux.item(), g_norm.mean().item()])
    res["scm_params"] = [p.detach().clone() for p in net.parameters()] + [
        p.detach().clone() for p in logvar.parameters()]

    # the same tangent through the dual-number API on DiT (adaLN, SDPA, LayerNorm)
    DiT = _dit(torch, learn_sigma=False)
    dit = DiT().eval()                               # no random label dropout
    fill_(torch, [p for p in dit.parameters() if p.requires_grad], rng, 0.3)
    fwAD = torch.autograd.forward_ad
    z = normal(torch, rng, 2, 2, 4, 4)
    v = normal(torch, rng, 2, 2, 4, 4)
    tt = torch.tensor([0.3, 0.8])
    y = torch.tensor([0, 2])
    try:
        torch.func.jvp(lambda a: dit(a, tt * 1000, y), (z,), (v,))
        res["fused_error"] = ["none"]
    except NotImplementedError as err:        # the fused CPU kernel has no forward-AD formula
        res["fused_error"] = [str(err).splitlines()[0]]
        for block in dit.blocks:
            block.attn.fused_attn = False
    with fwAD.dual_level():
        out = dit(fwAD.make_dual(z, v), fwAD.make_dual(tt, torch.ones_like(tt)) * 1000, y)
        primal, tangent = fwAD.unpack_dual(out)
    res["dual"] = [primal, tangent]
    res["jvp_same"] = torch.func.jvp(lambda a, b: dit(a, b * 1000, y), (z, tt),
                                     (v, torch.ones_like(tt)))[1]
    return res

PROGRAMS = [dit_rectified_flow_program, consistency_program, guidance_distillation_program,
            meanflow_scm_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # Fourier features of 250 log(sigma) reach ~1100 rad: NumPy's float32 log differs from
        # PyTorch's by one ulp in ~5% of inputs, which moves sin/cos by up to 1e-4
        "consistency_program": (1e-4, 1e-5),
        # (1 + w) v_cond - w v_uncond with w up to 4 cancels terms of size ~20 to ~1e-2
        "guidance_distillation_program": (1e-5, 1e-5),
        # tangents of 1000 t through sin/cos carry that factor: terms of ~100 to one ulp each
        "meanflow_scm_program": (1e-4, 1e-4),
    })
