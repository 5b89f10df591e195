"""Robot-learning policies written as their reference repositories write them in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights: diffusion
policy (1-D temporal conv U-Net, FiLM from an observation encoder, GroupNorm + Mish, DDPM and
DDIM schedulers by hand, EMA through torch._foreach_*), ACT (CVAE encoder over the action
chunk, nn.Transformer, KL term, temporal ensembling), behaviour cloning with a GMM head
(MixtureSameFamily of Independent Normals) and Diffuser's value-guided inpainting sampler.
Siblings _control, _marl and _vision cover planners, multi-agent RL and policy plumbing;
_fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _cosine_betas(torch, steps, s=0.008, max_beta=0.999):
    """diffusers' squaredcos_cap_v2 schedule."""
    def alpha_bar(t):
        return math.cos((t + s) / (1 + s) * math.pi / 2) ** 2

    betas = [min(1 - alpha_bar((i + 1) / steps) / alpha_bar(i / steps), max_beta)
             for i in range(steps)]
    return torch.tensor(betas, dtype=torch.float32)


def diffusion_policy_program(torch):
    """Chi et al.'s ConditionalUnet1D: FiLM residual blocks, down/up sampling, a DDPM training
    loss with epsilon prediction, AdamW + cosine warmup, EMA with power decay, then DDPM and
    DDIM sampling loops by hand from fixed NumPy noise."""
    rng = np.random.default_rng(0)
    nn, F = torch.nn, torch.nn.functional
    B, T, A, obs_dim, n_obs = 3, 8, 2, 5, 2
    K = 20

    class SinusoidalPosEmb(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim = dim

        def forward(self, x):
            half = self.dim // 2
            emb = math.log(10000) / (half - 1)
            emb = torch.exp(torch.arange(half, device=x.device) * -emb)
            emb = x[:, None] * emb[None, :]
            return torch.cat((emb.sin(), emb.cos()), dim=-1)

    class Conv1dBlock(nn.Module):
        def __init__(self, cin, cout, k, groups=4):
            super().__init__()
            self.block = nn.Sequential(nn.Conv1d(cin, cout, k, padding=k // 2),
                                       nn.GroupNorm(groups, cout), nn.Mish())

        def forward(self, x):
            return self.block(x)

    class CondResBlock(nn.Module):
        def __init__(self, cin, cout, cond_dim, k=3):
            super().__init__()
            self.blocks = nn.ModuleList([Conv1dBlock(cin, cout, k), Conv1dBlock(cout, cout, k)])
            self.out_channels = cout
            self.cond_encoder = nn.Sequential(nn.Mish(), nn.Linear(cond_dim, cout * 2),
                                              nn.Unflatten(-1, (-1, 1)))
            self.residual_conv = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x, cond):
            out = self.blocks[0](x)
            embed = self.cond_encoder(cond)
            embed = embed.reshape(embed.shape[0], 2, self.out_channels, 1)
            scale, bias = embed[:, 0, ...], embed[:, 1, ...]
            out = scale * out + bias
            out = self.blocks[1](out)
            return out + self.residual_conv(x)

    class Unet1D(nn.Module):
        def __init__(self, dims=(8, 16), dsed=8):
            super().__init__()
            cond_dim = dsed + obs_dim * n_obs
            self.diffusion_step_encoder = nn.Sequential(
                SinusoidalPosEmb(dsed), nn.Linear(dsed, dsed * 4), nn.Mish(),
                nn.Linear(dsed * 4, dsed))
            all_dims = [A, *dims]
            pairs = list(zip(all_dims[:-1], all_dims[1:]))
            self.down = nn.ModuleList()
            for i, (cin, cout) in enumerate(pairs):
                last = i == len(pairs) - 1
                self.down.append(nn.ModuleList([
                    CondResBlock(cin, cout, cond_dim), CondResBlock(cout, cout, cond_dim),
                    nn.Conv1d(cout, cout, 3, 2, 1) if not last else nn.Identity()]))
            mid = all_dims[-1]
            self.mid = nn.ModuleList([CondResBlock(mid, mid, cond_dim)])
            self.up = nn.ModuleList()
            for i, (cin, cout) in enumerate(reversed(pairs[1:])):
                self.up.append(nn.ModuleList([
                    CondResBlock(cout * 2, cin, cond_dim), CondResBlock(cin, cin, cond_dim),
                    nn.ConvTranspose1d(cin, cin, 4, 2, 1)]))
            self.final = nn.Sequential(Conv1dBlock(dims[0], dims[0], 3), nn.Conv1d(dims[0], A, 1))

        def forward(self, sample, timestep, global_cond):
            sample = sample.moveaxis(-1, -2)
            if not torch.is_tensor(timestep):
                timestep = torch.tensor([timestep], dtype=torch.long)
            elif len(timestep.shape) == 0:
                timestep = timestep[None]
            timestep = timestep.expand(sample.shape[0])
            feat = torch.cat([self.diffusion_step_encoder(timestep), global_cond], dim=-1)
            x, h = sample, []
            for res1, res2, downsample in self.down:
                x = res2(res1(x, feat), feat)
                h.append(x)
                x = downsample(x)
            for m in self.mid:
                x = m(x, feat)
            for res1, res2, upsample in self.up:
                x = torch.cat((x, h.pop()), dim=1)
                x = upsample(res2(res1(x, feat), feat))
            return self.final(x).moveaxis(-1, -2)

    model = Unet1D()
    fill_(torch, model, rng, 0.2)
    ema = Unet1D()
    ema.load_state_dict(model.state_dict())
    ema.requires_grad_(False)
    obs_enc = nn.Sequential(nn.Linear(obs_dim, obs_dim), nn.LayerNorm(obs_dim))
    fill_(torch, obs_enc, rng, 0.4)

    betas = _cosine_betas(torch, K)
    alphas = 1.0 - betas
    alphas_cumprod = torch.cumprod(alphas, dim=0)
    params = list(model.parameters()) + list(obs_enc.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.95, 0.999), eps=1e-8, weight_decay=1e-6)
    warm, total = 2, 4
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: s / max(1, warm) if s < warm
        else 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, total - warm))))
    res = {"losses": [], "lrs": [], "ema_decay": []}
    step_count = 0
    for it in range(4):
        obs = normal(torch, rng, B, n_obs, obs_dim)
        action = normal(torch, rng, B, T, A).clamp(-1, 1)
        noise = normal(torch, rng, B, T, A)
        timesteps = torch.from_numpy(rng.integers(0, K, size=(B,))).long()
        sqrt_ab = alphas_cumprod[timesteps] ** 0.5
        sqrt_1mab = (1 - alphas_cumprod[timesteps]) ** 0.5
        noisy = sqrt_ab.flatten()[:, None, None] * action + sqrt_1mab[:, None, None] * noise
        cond = obs_enc(obs).flatten(start_dim=1)
        pred = model(noisy, timesteps, global_cond=cond)
        loss = F.mse_loss(pred, noise, reduction="none")
        loss = loss.reshape(B, -1).mean(dim=1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, max_norm=10.0)
        opt.step()
        sched.step()
        # EMAModel: decay = 1 - (1 + step / inv_gamma) ** -power, clamped
        step_count += 1
        decay = min(max(1 - (1 + step_count) ** -0.75, 0.0), 0.9999)
        with torch.no_grad():
            ema_p = list(ema.parameters())
            src_p = [p.detach() for p in model.parameters()]
            if it % 2 == 0:
                torch._foreach_mul_(ema_p, decay)
                torch._foreach_add_(ema_p, src_p, alpha=1 - decay)
            else:
                torch._foreach_lerp_(ema_p, src_p, 1 - decay)
            for b_ema, b in zip(ema.buffers(), model.buffers()):
                b_ema.copy_(b)
        res["losses"].append(loss.item())
        res["lrs"].append(sched.get_last_lr()[0])
        res["ema_decay"].append(decay)
    res["ema_w"] = ema.final[1].weight
    res["ema_film"] = ema.down[0][0].cond_encoder[1].weight
    res["w"] = model.down[0][0].cond_encoder[1].weight

    # DDPM sampling (fixed_small variance, clip_sample) with the EMA model
    ema.eval()
    obs = normal(torch, rng, B, n_obs, obs_dim)
    with torch.no_grad():
        cond = obs_enc(obs).flatten(start_dim=1)
        traj = normal(torch, rng, B, T, A)
        for t in range(K - 1, -1, -1):
            eps = ema(traj, t, global_cond=cond)
            ab_t = alphas_cumprod[t]
            ab_prev = alphas_cumprod[t - 1] if t > 0 else torch.tensor(1.0)
            beta_t = 1 - ab_t / ab_prev
            x0 = (traj - (1 - ab_t) ** 0.5 * eps) / ab_t ** 0.5
            x0 = x0.clamp(-1.0, 1.0)
            c0 = ab_prev ** 0.5 * beta_t / (1 - ab_t)
            ct = (1 - beta_t) ** 0.5 * (1 - ab_prev) / (1 - ab_t)
            mean = c0 * x0 + ct * traj
            if t > 0:
                var = torch.clamp((1 - ab_prev) / (1 - ab_t) * beta_t, min=1e-20)
                traj = mean + var ** 0.5 * normal(torch, rng, B, T, A)
            else:
                traj = mean
        res["ddpm_actions"] = traj
        # DDIM, 5 steps, eta = 0, "leading" spacing
        step_ratio = K // 5
        ts = (torch.arange(0, 5) * step_ratio).round().flip(0).long()
        traj = normal(torch, rng, B, T, A)
        for t in ts.tolist():
            prev_t = t - step_ratio
            eps = ema(traj, torch.tensor(t), global_cond=cond)
            ab_t = alphas_cumprod[t]
            ab_prev = alphas_cumprod[prev_t] if prev_t >= 0 else alphas_cumprod.new_tensor(1.0)
            x0 = (traj - (1 - ab_t).sqrt() * eps) / ab_t.sqrt()
            x0 = x0.clamp(-1, 1)
            eps = (traj - ab_t.sqrt() * x0) / (1 - ab_t).sqrt()
            traj = ab_prev.sqrt() * x0 + (1 - ab_prev).sqrt() * eps
        res["ddim_actions"] = traj
        res["ddim_ts"] = ts.tolist()
    return res


def act_program(torch):
    """ACT (Zhao et al.): a CVAE encoder reads [CLS, qpos, action chunk] through a
    TransformerEncoder, samples z by reparametrisation, a Transformer decodes the chunk from
    learned queries; L1 + KL loss; then temporal ensembling over overlapping chunks."""
    rng = np.random.default_rng(1)
    nn, F = torch.nn, torch.nn.functional
    B, C, A, Q, D, Z, S = 2, 6, 3, 4, 16, 4, 5

    def sinusoid_table(n, d):
        pos = np.arange(n)[:, None]
        ang = pos / np.power(10000, 2 * (np.arange(d) // 2) / d)
        ang[:, 0::2] = np.sin(ang[:, 0::2])
        ang[:, 1::2] = np.cos(ang[:, 1::2])
        return torch.FloatTensor(ang).unsqueeze(0)

    class ACT(nn.Module):
        def __init__(self):
            super().__init__()
            self.cls_embed = nn.Embedding(1, D)
            self.encoder_action_proj = nn.Linear(A, D)
            self.encoder_joint_proj = nn.Linear(Q, D)
            self.latent_proj = nn.Linear(D, Z * 2)
            self.register_buffer("pos_table", sinusoid_table(1 + 1 + C, D))
            layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=False)
            self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.transformer = nn.Transformer(D, 2, 1, 1, 32, dropout=0.0,
                                              norm_first=True)
            self.latent_out_proj = nn.Linear(Z, D)
            self.input_proj_robot_state = nn.Linear(Q, D)
            self.input_proj_env_state = nn.Linear(S, D)
            self.additional_pos_embed = nn.Embedding(3, D)
            self.query_embed = nn.Embedding(C, D)
            self.action_head = nn.Linear(D, A)
            self.is_pad_head = nn.Linear(D, 1)

        def forward(self, qpos, env_state, actions=None, is_pad=None, eps=None):
            bs = qpos.shape[0]
            if actions is not None:
                action_embed = self.encoder_action_proj(actions)
                qpos_embed = self.encoder_joint_proj(qpos).unsqueeze(1)
                cls_embed = torch.unsqueeze(self.cls_embed.weight, axis=0).repeat(bs, 1, 1)
                enc_in = torch.cat([cls_embed, qpos_embed, action_embed], axis=1).permute(1, 0, 2)
                cls_joint_is_pad = torch.full((bs, 2), False)
                is_pad = torch.cat([cls_joint_is_pad, is_pad], axis=1)
                pos = self.pos_table.clone().detach().permute(1, 0, 2)
                out = self.encoder(enc_in + pos, src_key_padding_mask=is_pad)
                latent_info = self.latent_proj(out[0])
                mu, logvar = latent_info[:, :Z], latent_info[:, Z:]
                std = logvar.div(2).exp()
                latent = mu + std * eps
                latent_input = self.latent_out_proj(latent)
            else:
                mu = logvar = None
                latent_input = self.latent_out_proj(torch.zeros([bs, Z], dtype=torch.float32))
            src = torch.stack([latent_input, self.input_proj_robot_state(qpos),
                               self.input_proj_env_state(env_state)], axis=0)
            src = src + self.additional_pos_embed.weight.unsqueeze(1)
            tgt = self.query_embed.weight.unsqueeze(1).repeat(1, bs, 1)
            hs = self.transformer(src, tgt).transpose(0, 1)
            return self.action_head(hs), self.is_pad_head(hs), [mu, logvar]

    def kl_divergence(mu, logvar):
        klds = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp())
        return klds.sum(1).mean(0, True), klds.mean(0), klds.mean(1).mean(0, True)

    model = ACT()
    fill_(torch, model.parameters(), rng, 0.2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-4)
    res = {"losses": [], "kl": [], "dim_kl": []}
    for _ in range(3):
        qpos, env = normal(torch, rng, B, Q), normal(torch, rng, B, S)
        actions = normal(torch, rng, B, C, A)
        is_pad = torch.from_numpy(np.array([[False] * C, [False] * (C - 2) + [True] * 2]))
        eps = normal(torch, rng, B, Z)
        a_hat, pad_hat, (mu, logvar) = model(qpos, env, actions, is_pad, eps)
        total_kld, dim_wise_kld, _ = kl_divergence(mu, logvar)
        all_l1 = F.l1_loss(actions, a_hat, reduction="none")
        l1 = (all_l1 * ~is_pad.unsqueeze(-1)).mean()
        pad_loss = F.binary_cross_entropy_with_logits(pad_hat.squeeze(-1), is_pad.float())
        loss = l1 + 10.0 * total_kld[0] + 0.1 * pad_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
        res["kl"].append(total_kld)
        res["dim_kl"].append(dim_wise_kld)
    res["query"] = model.query_embed.weight
    res["enc_in_proj"] = model.encoder.layers[0].self_attn.in_proj_weight

    # inference with temporal ensembling (query every step, exponential weights)
    model.eval()
    max_t, k = 4, 0.01
    all_time_actions = torch.zeros([max_t, max_t + C, A])
    executed = []
    with torch.inference_mode():
        for t in range(max_t):
            qpos, env = normal(torch, rng, 1, Q), normal(torch, rng, 1, S)
            all_actions, _, _ = model(qpos, env)
            all_time_actions[[t], t:t + C] = all_actions
            actions_for_curr_step = all_time_actions[:, t]
            actions_populated = torch.all(actions_for_curr_step != 0, axis=1)
            actions_for_curr_step = actions_for_curr_step[actions_populated]
            exp_weights = np.exp(-k * np.arange(len(actions_for_curr_step)))
            exp_weights = exp_weights / exp_weights.sum()
            exp_weights = torch.from_numpy(exp_weights).unsqueeze(dim=1)
            raw_action = (actions_for_curr_step * exp_weights).sum(dim=0, keepdim=True)
            executed.append(raw_action)
        res["executed"] = torch.cat(executed)
        res["executed_dtype"] = [str(raw_action.dtype).split(".")[-1]]
        res["inference"] = [raw_action.is_inference(), all_time_actions.is_inference()]
    return res


def gmm_bc_program(torch):
    """robomimic's GMM policy head: MixtureSameFamily(Categorical(logits),
    Independent(Normal(tanh means, softplus scales), 1)), NLL training, low-noise eval mode,
    mixture sampling shapes under manual_seed, entropy of the components, log_prob grads."""
    rng = np.random.default_rng(2)
    nn, F, D = torch.nn, torch.nn.functional, torch.distributions
    B, OBS, A, M = 6, 7, 3, 4

    class GMMHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(OBS, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
            self.mean = nn.Linear(32, M * A)
            self.scale = nn.Linear(32, M * A)
            self.logits = nn.Linear(32, M)
            self.low_noise_eval = True

        def forward(self, obs):
            h = self.trunk(obs)
            means = torch.tanh(self.mean(h).reshape(-1, M, A))
            scales = F.softplus(self.scale(h).reshape(-1, M, A)) + 1e-4
            logits = self.logits(h)
            if not self.training and self.low_noise_eval:
                scales = torch.ones_like(means) * 1e-4
            component = D.Normal(loc=means, scale=scales)
            component = D.Independent(component, 1)
            mixture = D.Categorical(logits=logits)
            return D.MixtureSameFamily(mixture_distribution=mixture,
                                       component_distribution=component)

    policy = GMMHead()
    fill_(torch, policy, rng, 0.3)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    res = {"nll": []}
    for _ in range(3):
        obs, act = normal(torch, rng, B, OBS), normal(torch, rng, B, A).clamp(-0.9, 0.9)
        dist = policy(obs)
        log_probs = dist.log_prob(act)
        loss = -log_probs.mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
        res["nll"].append(loss.item())
    res["batch_shape"] = list(dist.batch_shape)
    res["event_shape"] = list(dist.event_shape)
    res["mean"] = dist.mean
    res["variance"] = dist.variance
    res["comp_entropy"] = dist.component_distribution.entropy()
    res["w_logits"] = policy.logits.weight
    torch.manual_seed(0)
    s = dist.sample((5,))
    res["sample_shape"] = list(s.shape)
    torch.manual_seed(0)
    res["sample_repro"] = [bool(torch.equal(s, dist.sample((5,))))]
    policy.eval()
    with torch.no_grad():
        d2 = policy(normal(torch, rng, B, OBS))
        res["eval_scale"] = d2.component_distribution.base_dist.scale
        res["eval_log_prob"] = d2.log_prob(d2.component_distribution.base_dist.loc[:, 0])
    # BC-RNN style: log_prob over (B, T) batch with a sequence of observations
    policy.train()
    obs = normal(torch, rng, 2, 5, OBS)
    dist = policy(obs.reshape(-1, OBS))
    lp = dist.log_prob(normal(torch, rng, 10, A).clamp(-0.9, 0.9)).reshape(2, 5)
    g, = torch.autograd.grad(lp.sum(), policy.mean.weight)
    res["seq_lp"], res["seq_grad"] = lp, g
    return res


def diffuser_guided_program(torch):
    """Janner et al.'s Diffuser: a trajectory model over [action, state] with inpainting
    (apply_conditioning writes the start state into x in place after every step), value-guided
    sampling (enable_grad inside a no_grad sampling loop, requires_grad_ on the sample,
    autograd.grad of a value net, guide gradients zeroed for the last timesteps by a boolean
    batch mask), then the value net trained on returns with a weighted loss."""
    rng = np.random.default_rng(12)
    nn, F = torch.nn, torch.nn.functional
    B, H, A, S, K = 4, 8, 2, 3, 10
    D = A + S

    def apply_conditioning(x, conditions, action_dim):
        for t, val in conditions.items():
            x[:, t, action_dim:] = val.clone()
        return x

    class TemporalNet(nn.Module):
        def __init__(self, out=D, pooled=False):
            super().__init__()
            self.time = nn.Sequential(nn.Linear(1, 16), nn.Mish(), nn.Linear(16, 16))
            self.c1 = nn.Conv1d(D, 16, 5, padding=2)
            self.n1 = nn.GroupNorm(4, 16)
            self.c2 = nn.Conv1d(16, 16, 5, padding=2)
            self.pooled = pooled
            self.out = nn.Linear(16, 1) if pooled else nn.Conv1d(16, out, 1)

        def forward(self, x, t):
            x = x.transpose(1, 2)
            h = F.mish(self.n1(self.c1(x))) + self.time(t.float()[:, None] / K)[..., None]
            h = F.mish(self.c2(h))
            if self.pooled:
                return self.out(h.mean(-1))
            return self.out(h).transpose(1, 2)

    model, value = TemporalNet(), TemporalNet(pooled=True)
    fill_(torch, model, rng, 0.2)
    fill_(torch, value, rng, 0.2)
    betas = _cosine_betas(torch, K).double()
    alphas_cumprod = torch.cumprod(1 - betas, 0)
    alphas_cumprod_prev = torch.cat([torch.ones(1, dtype=torch.float64), alphas_cumprod[:-1]])
    posterior_variance = betas * (1. - alphas_cumprod_prev) / (1. - alphas_cumprod)
    posterior_log_variance_clipped = torch.log(torch.clamp(posterior_variance, min=1e-20))
    coef1 = betas * torch.sqrt(alphas_cumprod_prev) / (1. - alphas_cumprod)
    coef2 = (1. - alphas_cumprod_prev) * torch.sqrt(1 - betas) / (1. - alphas_cumprod)

    def extract(a, t, x_shape):
        b, *_ = t.shape
        out = a.gather(-1, t)
        return out.reshape(b, *((1,) * (len(x_shape) - 1)))

    res = {"guide_norm": [], "y": []}
    cond = {0: normal(torch, rng, B, S)}
    model.eval()
    with torch.no_grad():
        x = normal(torch, rng, B, H, D)
        x = apply_conditioning(x, cond, A)
        for i in reversed(range(K)):
            t = torch.full((B,), i, dtype=torch.long)
            for _ in range(2):
                with torch.enable_grad():
                    x.requires_grad_()
                    y = value(x, t)
                    grad = torch.autograd.grad([y.sum()], [x])[0]
                    x.detach()
                grad[t < 2] = 0
                x = x + 0.1 * grad
                x = apply_conditioning(x, cond, A)
            res["guide_norm"].append(grad.norm())
            res["y"].append(y.squeeze(-1))
            eps = model(x, t)
            ac = extract(alphas_cumprod, t, x.shape).float()
            x_recon = (x - (1 - ac).sqrt() * eps) / ac.sqrt()
            x_recon = x_recon.clamp(-1., 1.)
            mean = (extract(coef1, t, x.shape) * x_recon + extract(coef2, t, x.shape) * x)
            log_var = extract(posterior_log_variance_clipped, t, x.shape)
            noise = 0.5 * normal(torch, rng, B, H, D)
            noise[t == 0] = 0
            x = (mean + (0.5 * log_var).exp() * noise).float()
            x = apply_conditioning(x, cond, A)
    res["x"], res["x_dtype"] = x, [str(x.dtype).split(".")[-1], str(mean.dtype).split(".")[-1]]
    res["x_requires_grad"] = [x.requires_grad]

    opt = torch.optim.Adam(value.parameters(), lr=2e-4)
    for _ in range(2):
        traj = normal(torch, rng, B, H, D)
        t = torch.from_numpy(rng.integers(0, K, (B,)))
        target = normal(torch, rng, B, 1)
        pred = value(traj, t)
        weights = torch.linspace(1.0, 0.5, B)[:, None]
        loss = (F.mse_loss(pred, target, reduction="none") * weights).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.setdefault("v_loss", []).append(loss.item())
    res["v_out"] = value.out.weight
    return res


PROGRAMS = [diffusion_policy_program, act_program, gmm_bc_program, diffuser_guided_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
