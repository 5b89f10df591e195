"""Genomics programs written as their reference repositories write them in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights: scVI (zero-inflated
negative binomial log-likelihood by lgamma/softplus/log-sum-exp, library-size encoder, KL warmup,
Adam eps=0.01 with weight decay), Enformer (attention pooling over unfolded windows, relative
positional features from exponential/central-mask/gamma bases built with lgamma/xlogy, GELU
approximation, residual BatchNorm conv towers) and Basenji/DNABERT-style track models (one-hot DNA
by F.one_hot + permute, reverse-complement augmentation, Poisson loss on tracks, Pearson r).
_fixes pins what they found."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _log_zinb_positive(torch, x, mu, theta, pi, eps=1e-8):
    """scvi.distributions._negative_binomial.log_zinb_positive, as scvi-tools writes it."""
    F = torch.nn.functional
    if theta.ndimension() == 1:
        theta = theta.view(1, theta.size(0))
    softplus_pi = F.softplus(-pi)
    log_theta_eps = torch.log(theta + eps)
    log_theta_mu_eps = torch.log(theta + mu + eps)
    pi_theta_log = -pi + theta * (log_theta_eps - log_theta_mu_eps)
    case_zero = F.softplus(pi_theta_log) - softplus_pi
    mul_case_zero = torch.mul((x < eps).type(torch.float32), case_zero)
    case_non_zero = (
        -softplus_pi
        + pi_theta_log
        + x * (torch.log(mu + eps) - log_theta_mu_eps)
        + torch.lgamma(x + theta)
        - torch.lgamma(theta)
        - torch.lgamma(x + 1)
    )
    mul_case_non_zero = torch.mul((x > eps).type(torch.float32), case_non_zero)
    return mul_case_zero + mul_case_non_zero


def _log_nb_positive(torch, x, mu, theta, eps=1e-8):
    log_theta_mu_eps = torch.log(theta + mu + eps)
    return (theta * (torch.log(theta + eps) - log_theta_mu_eps)
            + x * (torch.log(mu + eps) - log_theta_mu_eps)
            + torch.lgamma(x + theta) - torch.lgamma(theta) - torch.lgamma(x + 1))


def scvi_program(torch):
    """scvi-tools VAE: encoder with library-size branch, ZINB/NB likelihoods, KL warmup."""
    rng = np.random.default_rng(0)
    nn, F = torch.nn, torch.nn.functional
    Normal, kl = torch.distributions.Normal, torch.distributions.kl_divergence
    n_genes, n_hidden, n_latent, n_batch = 12, 16, 4, 2

    class FCLayers(nn.Module):
        def __init__(self, n_in, n_out, n_cat):
            super().__init__()
            self.n_cat = n_cat
            self.fc = nn.Sequential(
                nn.Linear(n_in + n_cat, n_out),
                nn.BatchNorm1d(n_out, momentum=0.01, eps=0.001),
                nn.ReLU(), nn.Dropout(p=0.0))

        def forward(self, x, cat):
            one_hot = F.one_hot(cat.squeeze(-1), self.n_cat).float()
            return self.fc(torch.cat((x, one_hot), dim=-1))

    class Encoder(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.encoder = FCLayers(n_in, n_hidden, n_batch)
            self.mean_encoder = nn.Linear(n_hidden, n_out)
            self.var_encoder = nn.Linear(n_hidden, n_out)
            self.var_eps = 1e-4

        def forward(self, x, cat, eps_noise):
            q = self.encoder(x, cat)
            q_m = self.mean_encoder(q)
            q_v = torch.exp(self.var_encoder(q)) + self.var_eps
            dist = Normal(q_m, q_v.sqrt())
            latent = q_m + q_v.sqrt() * eps_noise   # rsample with NumPy noise
            return dist, latent

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.px_decoder = FCLayers(n_latent, n_hidden, n_batch)
            self.px_scale_decoder = nn.Sequential(nn.Linear(n_hidden, n_genes),
                                                  nn.Softmax(dim=-1))
            self.px_dropout_decoder = nn.Linear(n_hidden, n_genes)

        def forward(self, z, library, cat):
            px = self.px_decoder(z, cat)
            px_scale = self.px_scale_decoder(px)
            px_dropout = self.px_dropout_decoder(px)
            px_rate = torch.exp(library) * px_scale
            return px_scale, px_rate, px_dropout

    z_encoder, l_encoder, decoder = Encoder(n_genes, n_latent), Encoder(n_genes, 1), Decoder()
    px_r = nn.Parameter(torch.randn(n_genes))
    modules = nn.ModuleList([z_encoder, l_encoder, decoder])
    fill_(torch, modules, rng, 0.2)
    with torch.no_grad():
        px_r.copy_(normal(torch, rng, n_genes))
    params = list(filter(lambda p: p.requires_grad, modules.parameters())) + [px_r]
    opt = torch.optim.Adam(params, lr=1e-2, eps=0.01, weight_decay=1e-6, amsgrad=False)
    counts = rng.negative_binomial(2, 0.4, size=(8, n_genes)).astype(np.float32)
    counts[rng.random((8, n_genes)) < 0.3] = 0
    x = torch.from_numpy(counts)
    batch = torch.from_numpy(rng.integers(0, n_batch, (8, 1)))
    log_counts = np.log(counts.sum(1))
    local_l_mean = torch.full((8, 1), float(log_counts.mean()))
    local_l_var = torch.full((8, 1), float(log_counts.var()))
    res = {"loss": [], "rec": [], "kl": [], "weight": []}
    n_epochs_kl_warmup = 4
    modules.train()
    for step in range(3):
        x_ = torch.log(1 + x)
        qz, z = z_encoder(x_, batch, normal(torch, rng, 8, n_latent))
        ql, library = l_encoder(x_, batch, normal(torch, rng, 8, 1))
        px_scale, px_rate, px_dropout = decoder(z, library, batch)
        theta = torch.exp(px_r)
        rec = -_log_zinb_positive(torch, x, px_rate, theta, px_dropout).sum(dim=-1)
        mean, scale = torch.zeros_like(z), torch.ones_like(z)
        kl_z = kl(qz, Normal(mean, scale)).sum(dim=1)
        kl_l = kl(ql, Normal(local_l_mean, torch.sqrt(local_l_var))).sum(dim=1)
        kl_weight = min(1.0, step / n_epochs_kl_warmup)
        loss = torch.mean(rec + kl_weight * kl_z + kl_l)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 10.0)
        opt.step()
        res["loss"].append(loss.item())
        res["rec"].append(rec)
        res["kl"].append(kl_z)
        res["weight"].append(kl_weight)
    res["px_r"] = px_r
    res["px_r_grad"] = px_r.grad
    res["scale"] = px_scale
    res["bn_mean"] = z_encoder.encoder.fc[1].running_mean
    res["bn_var"] = decoder.px_decoder.fc[1].running_var
    # NB likelihood and imputation at eval; get_latent uses the mean, no grad
    modules.eval()
    with torch.no_grad():
        qz, _ = z_encoder(torch.log1p(x), batch, torch.zeros(8, n_latent))
        res["latent"] = qz.loc
        res["nb"] = _log_nb_positive(torch, x, px_rate.detach(), theta.detach())
        res["zinb_zero_only"] = _log_zinb_positive(
            torch, torch.zeros(2, n_genes), px_rate[:2].detach(), theta.detach(),
            px_dropout[:2].detach())
        res["logsumexp_mix"] = torch.logsumexp(torch.stack([
            _log_nb_positive(torch, x, px_rate, theta) + math.log(0.3),
            _log_nb_positive(torch, x, 2 * px_rate, theta) + math.log(0.7)]), dim=0)
    # scvi computes the ELBO with reductions on an empty minibatch in its callbacks
    res["empty"] = _log_zinb_positive(torch, x[:0], px_rate[:0].detach(), theta.detach(),
                                      px_dropout[:0].detach()).sum(-1).shape
    return res


def scvi_distributions_program(torch):
    """scvi-tools' NegativeBinomial / ZeroInflatedNegativeBinomial as Distribution subclasses:
    arg_constraints, support, broadcast_all, lazy_property, logits_to_probs, validation of
    samples, Gamma-Poisson sampling (shapes and ranges only), and the mu/theta <-> total_count/
    logits conversions."""
    rng = np.random.default_rng(4)
    D = torch.distributions
    constraints = D.constraints
    from_utils = D.utils

    def _convert_mean_disp_to_counts_logits(mu, theta, eps=1e-6):
        logits = (mu + eps).log() - (theta + eps).log()
        total_count = theta
        return total_count, logits

    def _convert_counts_logits_to_mean_disp(total_count, logits):
        theta = total_count
        mu = logits.exp() * theta
        return mu, theta

    class NegativeBinomial(D.Distribution):
        arg_constraints = {"mu": constraints.greater_than_eq(0),
                           "theta": constraints.greater_than_eq(0)}
        support = constraints.nonnegative_integer

        def __init__(self, mu, theta, validate_args=False):
            self._eps = 1e-8
            mu, theta = from_utils.broadcast_all(mu, theta)
            self.mu, self.theta = mu, theta
            super().__init__(batch_shape=mu.shape, validate_args=validate_args)

        @property
        def mean(self):
            return self.mu

        @property
        def variance(self):
            return self.mean + (self.mean ** 2) / self.theta

        def sample(self, sample_shape=torch.Size()):
            with torch.no_grad():
                gamma_d = D.Gamma(concentration=self.theta, rate=self.theta / self.mu)
                p_means = gamma_d.sample(sample_shape)
                l_train = torch.clamp(p_means, max=1e8)
                return D.Poisson(l_train).sample()

        def log_prob(self, value):
            if self._validate_args:
                self._validate_sample(value)
            return _log_nb_positive(torch, value, self.mu, self.theta, eps=self._eps)

    class ZeroInflatedNegativeBinomial(NegativeBinomial):
        arg_constraints = {"mu": constraints.greater_than_eq(0),
                           "theta": constraints.greater_than_eq(0),
                           "zi_logits": constraints.real}

        def __init__(self, mu, theta, zi_logits, validate_args=False):
            super().__init__(mu, theta, validate_args=validate_args)
            self.zi_logits, self.mu, self.theta = from_utils.broadcast_all(zi_logits, self.mu,
                                                                           self.theta)

        @from_utils.lazy_property
        def zi_probs(self):
            return from_utils.logits_to_probs(self.zi_logits, is_binary=True)

        @property
        def mean(self):
            return (1 - self.zi_probs) * self.mu

        def sample(self, sample_shape=torch.Size()):
            with torch.no_grad():
                samp = super().sample(sample_shape=sample_shape)
                is_zero = torch.rand_like(samp) <= self.zi_probs
                return torch.where(is_zero, torch.zeros_like(samp), samp)

        def log_prob(self, value):
            try:
                self._validate_sample(value)
            except ValueError:
                pass
            return _log_zinb_positive(torch, value, self.mu, self.theta, self.zi_logits, 1e-8)

    mu = torch.from_numpy(rng.uniform(0.5, 5, (3, 4)).astype(np.float32)).requires_grad_()
    theta = torch.from_numpy(rng.uniform(0.5, 3, 4).astype(np.float32)).requires_grad_()
    zi = normal(torch, rng, 3, 4).requires_grad_()
    x = torch.from_numpy(rng.negative_binomial(2, 0.4, (3, 4)).astype(np.float32))
    nb = NegativeBinomial(mu, theta)
    zinb = ZeroInflatedNegativeBinomial(mu, theta, zi)
    res = {"batch": list(zinb.batch_shape), "event": list(zinb.event_shape)}
    lp = zinb.log_prob(x).sum() + nb.log_prob(x).sum()
    lp.backward()
    res["lp"] = lp
    res["g"] = [mu.grad, theta.grad, zi.grad]
    res["mean"] = zinb.mean
    res["var"] = nb.variance
    res["zi_probs"] = zinb.zi_probs
    res["probs_to_logits"] = from_utils.probs_to_logits(zinb.zi_probs, is_binary=True)
    res["softmax_probs"] = from_utils.logits_to_probs(zi)
    total_count, logits = _convert_mean_disp_to_counts_logits(mu, theta)
    res["conv"] = [total_count, logits, *_convert_counts_logits_to_mean_disp(total_count, logits)]
    # torch's own NegativeBinomial with (total_count, logits) agrees with scvi's mu/theta form
    res["torch_nb"] = D.NegativeBinomial(total_count=theta, logits=logits).log_prob(x)
    res["scvi_nb"] = nb.log_prob(x)
    torch.manual_seed(0)
    s1 = zinb.sample((2,))
    torch.manual_seed(0)
    s2 = zinb.sample((2,))
    res["sample_shape"] = list(s1.shape)
    res["sample"] = [bool((s1 == s2).all()), bool((s1 >= 0).all()),
                     bool((s1 == s1.round()).all()), s1.requires_grad]
    # validation: a non-integer count against the support, under validate_args
    strict = NegativeBinomial(mu.detach(), theta.detach(), validate_args=True)
    try:
        strict.log_prob(x + 0.5)
        res["validate"] = ["no error"]
    except ValueError as e:
        res["validate"] = [str(e).split(" of the distribution")[0].replace("ember", "torch")]
    res["support_check"] = constraints.nonnegative_integer.check(torch.tensor([0., 1.5, -1.]))
    res["gt_check"] = constraints.greater_than_eq(0).check(torch.tensor([0., -1e-9]))
    return res


def _exponential_linspace_int(start, end, num, divisible_by=1):
    def _round(x):
        return int(round(x / divisible_by) * divisible_by)
    base = math.exp(math.log(end / start) / (num - 1))
    return [_round(start * base ** i) for i in range(num)]


def _relative_positional_features(torch, seq_len, feature_size):
    """enformer-pytorch get_positional_embed: exponential, central mask, gamma bases."""
    distances = torch.arange(-seq_len + 1, seq_len)
    num_components = 6
    num_basis = feature_size // num_components

    def exponential(positions, features, min_half_life=3.):
        max_range = math.log(seq_len) / math.log(2.)
        half_life = 2 ** torch.linspace(min_half_life, max_range, features)
        half_life = half_life[None, ...]
        positions = positions.abs()[..., None]
        return torch.exp(-math.log(2.) / half_life * positions)

    def central_mask(positions, features):
        center_widths = 2 ** torch.arange(1, features + 1).float()
        center_widths = center_widths - 1
        return (center_widths[None, ...] > positions.abs()[..., None]).float()

    def gamma_pdf(x, concentration, rate):
        log_unnormalized_prob = torch.xlogy(concentration - 1., x) - rate * x
        log_normalization = torch.lgamma(concentration) - concentration * torch.log(rate)
        return torch.exp(log_unnormalized_prob - log_normalization)

    def gamma(positions, features, stddev=None, start_mean=None, eps=1e-8):
        if stddev is None:
            stddev = seq_len / (2 * features)
        if start_mean is None:
            start_mean = seq_len / features
        mean = torch.linspace(start_mean, seq_len, features)
        mean = mean[None, ...]
        concentration = (mean / stddev) ** 2
        rate = mean / stddev ** 2
        probabilities = gamma_pdf(positions.float().abs()[..., None], concentration, rate)
        probabilities = probabilities + eps
        outputs = probabilities / torch.amax(probabilities, dim=-1, keepdim=True)
        return outputs

    embeddings = [f(distances, num_basis) for f in (exponential, central_mask, gamma)]
    embeddings = torch.cat(embeddings, dim=-1)
    embeddings = torch.cat((embeddings, torch.sign(distances)[..., None] * embeddings), dim=-1)
    return embeddings


def _relative_shift(torch, x):
    to_pad = torch.zeros_like(x[..., :1])
    x = torch.cat((to_pad, x), dim=-1)
    _, h, t1, t2 = x.shape
    x = x.reshape(-1, h, t2, t1)
    x = x[:, :, 1:, :]
    x = x.reshape(-1, h, t1, t2 - 1)
    return x[..., :((t2 + 1) // 2)]


def enformer_program(torch):
    """enformer-pytorch: stem, attention pooling, conv tower, relative-position attention."""
    rng = np.random.default_rng(1)
    nn, F = torch.nn, torch.nn.functional

    class GELU(nn.Module):
        def forward(self, x):
            return torch.sigmoid(1.702 * x) * x

    class Residual(nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, x, **kwargs):
            return self.fn(x, **kwargs) + x

    class AttentionPool(nn.Module):
        def __init__(self, dim, pool_size=2):
            super().__init__()
            self.pool_size = pool_size
            self.to_attn_logits = nn.Conv2d(dim, dim, 1, bias=False)
            nn.init.dirac_(self.to_attn_logits.weight)
            with torch.no_grad():
                self.to_attn_logits.weight.mul_(2)

        def forward(self, x):
            b, _, n = x.shape
            remainder = n % self.pool_size
            needs_padding = remainder > 0
            if needs_padding:
                x = F.pad(x, (0, self.pool_size - remainder), value=0)
                mask = torch.zeros((b, 1, n), dtype=torch.bool, device=x.device)
                mask = F.pad(mask, (0, self.pool_size - remainder), value=True)
            # rearrange 'b d (n p) -> b d n p'
            x = x.reshape(b, x.shape[1], -1, self.pool_size)
            logits = self.to_attn_logits(x)
            if needs_padding:
                mask_value = -torch.finfo(logits.dtype).max
                mask = mask.reshape(b, 1, -1, self.pool_size)
                logits = logits.masked_fill(mask, mask_value)
            attn = logits.softmax(dim=-1)
            return (x * attn).sum(dim=-1)

    def ConvBlock(dim, dim_out=None, kernel_size=1):
        return nn.Sequential(nn.BatchNorm1d(dim), GELU(),
                             nn.Conv1d(dim, dim_out or dim, kernel_size,
                                       padding=kernel_size // 2))

    class Attention(nn.Module):
        def __init__(self, dim, heads, dim_key, dim_value, num_rel_pos_features):
            super().__init__()
            self.scale = dim_key ** -0.5
            self.heads = heads
            self.to_q = nn.Linear(dim, dim_key * heads, bias=False)
            self.to_k = nn.Linear(dim, dim_key * heads, bias=False)
            self.to_v = nn.Linear(dim, dim_value * heads, bias=False)
            self.to_out = nn.Linear(dim_value * heads, dim)
            nn.init.zeros_(self.to_out.weight)
            nn.init.zeros_(self.to_out.bias)
            self.num_rel_pos_features = num_rel_pos_features
            self.to_rel_k = nn.Linear(num_rel_pos_features, dim_key * heads, bias=False)
            self.rel_content_bias = nn.Parameter(torch.randn(1, heads, 1, dim_key))
            self.rel_pos_bias = nn.Parameter(torch.randn(1, heads, 1, dim_key))

        def forward(self, x):
            n, h = x.shape[-2], self.heads
            q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
            q, k, v = (t.view(t.shape[0], n, h, -1).transpose(1, 2) for t in (q, k, v))
            q = q * self.scale
            content_logits = torch.einsum('b h i d, b h j d -> b h i j',
                                          q + self.rel_content_bias, k)
            positions = _relative_positional_features(torch, n, self.num_rel_pos_features)
            rel_k = self.to_rel_k(positions)
            rel_k = rel_k.view(-1, h, rel_k.shape[-1] // h).transpose(0, 1)
            rel_logits = torch.einsum('b h i d, h j d -> b h i j', q + self.rel_pos_bias, rel_k)
            rel_logits = _relative_shift(torch, rel_logits)
            logits = content_logits + rel_logits
            attn = logits.softmax(dim=-1)
            out = torch.einsum('b h i j, b h j d -> b h i d', attn, v)
            out = out.transpose(1, 2).reshape(out.shape[0], n, -1)
            return self.to_out(out)

    dim, half = 12, 6
    stem = nn.Sequential(nn.Conv1d(4, half, 5, padding=2),
                         Residual(ConvBlock(half)), AttentionPool(half, pool_size=2))
    filter_list = _exponential_linspace_int(half, dim, num=3, divisible_by=2)
    filter_list = [half, *filter_list]
    conv_layers = []
    for dim_in, dim_out in zip(filter_list[:-1], filter_list[1:]):
        conv_layers.append(nn.Sequential(ConvBlock(dim_in, dim_out, kernel_size=3),
                                         Residual(ConvBlock(dim_out, dim_out, 1)),
                                         AttentionPool(dim_out, pool_size=2)))
    conv_tower = nn.Sequential(*conv_layers)
    attn = Attention(dim, heads=2, dim_key=4, dim_value=6, num_rel_pos_features=12)
    transformer = nn.Sequential(nn.LayerNorm(dim), attn, nn.Dropout(0.0))
    head = nn.Sequential(nn.Linear(dim, 3), nn.Softplus())
    model = nn.ModuleList([stem, conv_tower, transformer, head])
    fill_(torch, [p for n_, p in model.named_parameters() if "to_attn_logits" not in n_], rng)
    seq = torch.from_numpy(rng.integers(0, 4, (2, 61)))
    one_hot = F.one_hot(seq, num_classes=4).float()
    target = torch.from_numpy(rng.poisson(2.0, (2, 4, 3)).astype(np.float32))
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    res = {"loss": [], "filters": filter_list}
    for _ in range(2):
        x = one_hot.permute(0, 2, 1)        # b n d -> b d n
        x = stem(x)
        x = conv_tower(x)
        x = x.permute(0, 2, 1)
        x = x + transformer(x)
        out = head(x)
        loss = F.poisson_nll_loss(out, target, log_input=False)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["out"] = out
    res["pos"] = _relative_positional_features(torch, 7, 12)
    res["pool_g"] = stem[2].to_attn_logits.weight.grad
    res["relk_g"] = attn.to_rel_k.weight.grad
    res["bias_g"] = attn.rel_pos_bias.grad
    res["bn"] = conv_tower[1][0][0].running_var
    res["shape"] = list(out.shape)
    # tanh GELU approximation as the TF port uses, and crop of the central bins
    res["gelu_tanh"] = F.gelu(x, approximate="tanh")
    res["crop"] = x[:, 1:-1]
    return res


def _pearsonr(torch, x, y, dim=1):
    """Pearson r along ``dim``, as the cosine similarity of the centred tracks."""
    x_centered = x - x.mean(dim=dim, keepdim=True)
    y_centered = y - y.mean(dim=dim, keepdim=True)
    return torch.nn.functional.cosine_similarity(x_centered, y_centered, dim=dim)


def basenji_program(torch):
    """Basenji-style dilated residual tower on one-hot DNA with reverse-complement averaging,
    Poisson loss with log_input, and a Pearson-r metric over bins."""
    rng = np.random.default_rng(2)
    nn, F = torch.nn, torch.nn.functional

    class DilatedResidual(nn.Module):
        def __init__(self, ch, dilation):
            super().__init__()
            self.bn = nn.BatchNorm1d(ch, momentum=0.1)
            self.conv = nn.Conv1d(ch, ch // 2, 3, dilation=dilation, padding=dilation)
            self.bn2 = nn.BatchNorm1d(ch // 2)
            self.conv2 = nn.Conv1d(ch // 2, ch, 1)
            with torch.no_grad():
                self.bn2.weight.zero_()

        def forward(self, x):
            y = self.conv(F.gelu(self.bn(x)))
            y = self.conv2(F.gelu(self.bn2(y)))
            return x + y

    class Basenji(nn.Module):
        def __init__(self, ch=8, tracks=2):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv1d(4, ch, 7, padding=3), nn.BatchNorm1d(ch),
                                      nn.GELU(), nn.MaxPool1d(2))
            self.tower = nn.Sequential(*[DilatedResidual(ch, d) for d in (1, 2, 4)])
            self.final = nn.Conv1d(ch, tracks, 1)

        def forward(self, seq):
            x = F.one_hot(seq, 4).permute(0, 2, 1).to(torch.float32)
            x = self.tower(self.stem(x))
            return self.final(x).permute(0, 2, 1)   # log-rates

    model = Basenji()
    fill_(torch, [p for n_, p in model.named_parameters() if "bn2" not in n_], rng, 0.3)
    seq = torch.from_numpy(rng.integers(0, 4, (3, 32)))
    target = torch.from_numpy(rng.poisson(1.5, (3, 16, 2)).astype(np.float32))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.99, nesterov=True)
    res = {"loss": [], "r": []}
    for step in range(3):
        # reverse complement: A<->T, C<->G is 3 - base; flip the sequence, and the bins
        rc = step % 2 == 1
        s = (3 - seq).flip(-1) if rc else seq
        pred = model(s)
        if rc:
            pred = pred.flip(1)
        loss = F.poisson_nll_loss(pred, target, log_input=True, full=False)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 2.0, norm_type=2)
        opt.step()
        res["loss"].append(loss.item())
        with torch.no_grad():
            r = _pearsonr(torch, pred.exp().transpose(1, 2), target.transpose(1, 2), dim=2)
        res["r"].append(r)
    # one-hot as DNABERT/Basenji load it: a float one-hot flipped on both axes is the RC
    oh = F.one_hot(seq, 4).float()
    res["rc_both_axes"] = oh.flip(dims=(1, 2))
    res["rc_index"] = F.one_hot((3 - seq).flip(-1), 4).float()
    model.eval()
    with torch.no_grad():
        fwd = model(seq)
        rev = model((3 - seq).flip(-1)).flip(1)
        res["ens"] = (fwd + rev) / 2
        res["full_poisson"] = F.poisson_nll_loss(fwd, target, log_input=True, full=True,
                                                 reduction="none")
        res["pois_sum"] = F.poisson_nll_loss(fwd.exp(), target, log_input=False,
                                             eps=1e-6, reduction="sum")
        res["nll_loss_mod"] = nn.PoissonNLLLoss(log_input=True, full=True)(fwd, target)
    res["final_g"] = model.final.weight.grad
    res["tower_g"] = model.tower[2].conv.weight.grad
    res["running"] = model.stem[1].running_mean
    res["num_batches"] = model.stem[1].num_batches_tracked.item()
    return res


def dnabert_kmer_program(torch):
    """DNABERT: k-mer tokenisation by unfold over the sequence, masked-LM on contiguous k-mer
    spans, a tiny encoder and cross entropy with ignore_index=-100."""
    rng = np.random.default_rng(3)
    nn, F = torch.nn, torch.nn.functional
    k, d = 3, 16
    seq = torch.from_numpy(rng.integers(0, 4, (2, 14)))
    windows = seq.unfold(1, k, 1)                         # (b, L-k+1, k)
    powers = 4 ** torch.arange(k - 1, -1, -1)
    ids = (windows * powers).sum(-1) + 5                  # 5 special tokens first
    cls = torch.full((2, 1), 2, dtype=torch.long)
    sep = torch.full((2, 1), 3, dtype=torch.long)
    ids = torch.cat([cls, ids, sep], 1)
    labels = ids.clone()
    centre = torch.tensor([4, 9])
    mask = torch.zeros_like(ids, dtype=torch.bool)
    for b in range(2):
        mask[b, centre[b] - k // 2: centre[b] + k // 2 + 1] = True
    labels[~mask] = -100
    inp = ids.masked_fill(mask, 4)
    emb = nn.Embedding(5 + 4 ** k, d, padding_idx=0)
    pos = nn.Embedding(32, d)
    layer = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=False)
    enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
    lm = nn.Linear(d, 5 + 4 ** k)
    mods = nn.ModuleList([emb, pos, enc, lm])
    fill_(torch, mods, rng, 0.2)
    opt = torch.optim.AdamW(mods.parameters(), lr=4e-4, betas=(0.9, 0.98), eps=1e-6,
                            weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 2))
    res = {"loss": [], "lr": []}
    for _ in range(3):
        h = emb(inp) + pos(torch.arange(inp.shape[1]))[None]
        h = enc(h, src_key_padding_mask=inp == 0)
        logits = lm(h)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
        res["lr"].append(sched.get_last_lr()[0])
    res["ids"] = ids
    res["masked"] = int(mask.sum())
    res["pred"] = logits.argmax(-1)[mask]
    res["emb_g"] = emb.weight.grad
    return res


PROGRAMS = [scvi_program, scvi_distributions_program, enformer_program, basenji_program,
            dnabert_kmer_program]

TOLERANCES = {
    # lgamma of counts ~ 10 and logs of rates summed over genes: float32 rounding of the sums
    "scvi_program": (1e-4, 1e-5),
}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
