"""Music/video programs with the rarer torch corners their repositories use, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights: MuseGAN (ConvTranspose3d
generator over bars/steps/pitches, Conv3d critic, WGAN-GP through autograd.grad with
create_graph, a straight-through binariser as a custom autograd.Function), Coconet (orderless
NADE masking over a pianoroll), Performance RNN (packed variable-length LSTM with control
features, teacher-forcing ratio) and OpenSTL's TAU (dilated depthwise attention, SE gate,
differential-divergence loss by kl_div)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def musegan_program(torch):
    """salu133445/musegan (PyTorch rewrite) with a BinaryNeuron straight-through head."""
    rng = np.random.default_rng(0)
    nn, F = torch.nn, torch.nn.functional
    n_tracks, n_bars, n_steps, n_pitch, latent = 2, 2, 4, 6, 5

    class STBinary(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, threshold):
            ctx.save_for_backward(x)
            return (x > threshold).to(x.dtype)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * (x.abs() <= 1).to(grad_output.dtype), None

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(latent, 8 * n_bars)
            self.shared = nn.Sequential(
                nn.ConvTranspose3d(8, 4, (1, 2, 3), stride=(1, 2, 3), bias=False),
                nn.BatchNorm3d(4),
                nn.ReLU())
            self.private = nn.ModuleList([nn.ConvTranspose3d(4, 1, (1, 2, 2), stride=(1, 2, 2))
                                          for _ in range(n_tracks)])

        def forward(self, z):
            x = self.fc(z).view(-1, 8, n_bars, 1, 1)
            x = self.shared(x)
            x = torch.cat([torch.sigmoid(p(x)) for p in self.private], dim=1)
            return x  # B, tracks, bars, steps, pitches

    class Critic(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Sequential(
                nn.Conv3d(n_tracks, 4, (1, 2, 3), stride=(1, 2, 3)), nn.LeakyReLU(0.2),
                nn.Conv3d(4, 4, (1, 2, 2)), nn.LeakyReLU(0.2))
            self.fc = nn.Linear(4 * n_bars, 1)

        def forward(self, x):
            return self.fc(self.conv(x).flatten(1))

    G, D = Generator(), Critic()
    fill_(torch, G, rng)
    fill_(torch, D, rng)
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.9))
    opt_d = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.9))
    real = torch.from_numpy((rng.random((3, n_tracks, n_bars, n_steps, n_pitch)) > 0.7)
                            .astype(np.float32))
    res = {"d": [], "g": [], "gp": []}
    for step in range(3):
        z = normal(torch, rng, 3, latent)
        fake = G(z)
        d_loss = D(fake.detach()).mean() - D(real).mean()
        alpha = torch.from_numpy(rng.random((3, 1, 1, 1, 1)).astype(np.float32))
        inter = (alpha * real + (1 - alpha) * fake.detach()).requires_grad_(True)
        grads = torch.autograd.grad(outputs=D(inter), inputs=inter,
                                    grad_outputs=torch.ones(3, 1), create_graph=True,
                                    retain_graph=True, only_inputs=True)[0]
        gp = ((grads.view(3, -1).norm(2, dim=1) - 1) ** 2).mean()
        opt_d.zero_grad()
        (d_loss + 10.0 * gp).backward()
        opt_d.step()
        res["d"].append(d_loss.item())
        res["gp"].append(gp.item())
        fake = G(z)
        binar = STBinary.apply(fake * 2 - 1, 0.0)
        g_loss = -D(binar).mean() + 0.1 * F.binary_cross_entropy(fake, real)
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        res["g"].append(g_loss.item())
    res["fake"] = fake
    res["bn_mean"] = G.shared[1].running_mean
    res["bn_var"] = G.shared[1].running_var
    res["priv_g"] = G.private[1].weight.grad
    res["crit_g"] = D.conv[0].weight.grad
    G.eval()
    with torch.no_grad():
        res["eval_bin"] = STBinary.apply(G(z) * 2 - 1, 0.0)
    res["grad_fn"] = [type(binar.grad_fn).__name__]
    return res


def coconet_program(torch):
    """czhuang/coconet (PyTorch port): pianoroll + mask channels, orderless NADE loss
    normalised by the number of masked positions."""
    rng = np.random.default_rng(1)
    nn, F = torch.nn, torch.nn.functional
    B, N, T, P = 2, 2, 4, 5  # batch, instruments, time, pitch

    # no conv bias before a BatchNorm: its gradient is rounding noise that Adam amplifies
    net = nn.Sequential(nn.Conv2d(2 * N, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                        nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                        nn.ReLU(),
                        nn.Conv2d(8, N, 3, padding=1))
    fill_(torch, net, rng)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    pitches = rng.integers(0, P, (B, N, T))
    roll = torch.nn.functional.one_hot(torch.from_numpy(pitches), P).float()  # B I T P
    res = {"losses": []}
    for _ in range(3):
        mask = torch.from_numpy((rng.random((B, N, T, 1)) < 0.5).astype(np.float32))
        mask = mask.expand(-1, -1, -1, P)
        x = torch.cat([roll * (1 - mask), mask], dim=1)  # B 2I T P
        logits = net(x)  # B I T P
        log_p = F.log_softmax(logits, dim=-1)
        nll = -(log_p * roll).sum(-1)  # B I T
        m = mask[..., 0]
        denom = m.sum(dim=(1, 2)).clamp(min=1)
        loss = ((nll * m).sum(dim=(1, 2)) * (N * T) / denom).mean() / (N * T)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["bn"] = net[1].running_var
    # one step of Gibbs: resample the masked (instrument, time) cells greedily
    net.eval()
    with torch.no_grad():
        probs = F.softmax(net(x), dim=-1)
        choice = probs.argmax(-1)
        new_roll = torch.where(m.bool()[..., None], F.one_hot(choice, P).float(), roll)
        res["gibbs"] = new_roll
        res["probs"] = probs
    return res


def performance_rnn_program(torch):
    """djosix/Performance-RNN-PyTorch: event embedding + control features, GRU over packed
    variable-length sequences, teacher forcing with a NumPy-drawn ratio, greedy generation."""
    rng = np.random.default_rng(2)
    nn, F = torch.nn, torch.nn.functional
    pack_padded_sequence = torch.nn.utils.rnn.pack_padded_sequence
    pad_packed_sequence = torch.nn.utils.rnn.pad_packed_sequence
    n_events, ctrl_dim, d = 10, 3, 8

    class PerformanceRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.event_embedding = nn.Embedding(n_events, d)
            self.concat_input_fc = nn.Linear(d + ctrl_dim + 1, d)
            self.concat_input_fc_activation = nn.LeakyReLU(0.1, inplace=True)
            self.gru = nn.GRU(d, d, num_layers=2, dropout=0.0)
            self.output_fc = nn.Linear(d * 2, n_events)
            self.output_fc_activation = nn.Softmax(dim=-1)

        def forward(self, event, control, hidden):
            event = self.event_embedding(event)
            default = torch.ones(1, event.shape[1], 1)
            concat = torch.cat([event, default, control], -1)
            inp = self.concat_input_fc_activation(self.concat_input_fc(concat))
            _, hidden = self.gru(inp, hidden)
            output = hidden.permute(1, 0, 2).contiguous()
            output = output.view(output.shape[0], -1).unsqueeze(0)
            return self.output_fc(output), hidden

    model = PerformanceRNN()
    fill_(torch, model, rng)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    B, T = 3, 5
    events = torch.from_numpy(rng.integers(0, n_events, (T, B)))
    controls = torch.from_numpy(rng.random((T, B, ctrl_dim)).astype(np.float32))
    lengths = torch.tensor([5, 3, 4])
    res = {"losses": []}
    for _ in range(2):
        h = torch.zeros(2, B, d)
        outs = []
        ev = events[0:1]
        for t in range(T - 1):
            out, h = model(ev, controls[t:t + 1], h)
            outs.append(out)
            use_teacher = rng.random() < 0.7
            ev = events[t + 1:t + 2] if use_teacher else out.argmax(-1)
        logits = torch.cat(outs, 0)  # T-1 B E
        mask = (torch.arange(T - 1)[:, None] < (lengths - 1)[None]).float()
        ce = F.cross_entropy(logits.view(-1, n_events), events[1:].reshape(-1),
                             reduction="none").view(T - 1, B)
        loss = (ce * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        res["losses"].append(loss.item())
    # the packed path: a GRU over sorted and unsorted lengths
    gru = model.gru
    emb = model.concat_input_fc_activation(model.concat_input_fc(torch.cat(
        [model.event_embedding(events), torch.ones(T, B, 1), controls], -1)))
    packed = pack_padded_sequence(emb, lengths, enforce_sorted=False)
    out, hn = gru(packed)
    padded, lens = pad_packed_sequence(out, total_length=T, padding_value=-1.0)
    res["padded"] = padded
    res["lens"] = lens
    res["hn"] = hn
    res["sorted_idx"] = packed.sorted_indices
    res["batch_sizes"] = packed.batch_sizes
    hn.sum().backward()
    res["emb_g"] = model.event_embedding.weight.grad
    with torch.no_grad():
        h = torch.zeros(2, B, d)
        ev = events[0:1]
        gen = []
        for t in range(4):
            out, h = model(ev, controls[t:t + 1], h)
            ev = model.output_fc_activation(out).argmax(-1)
            gen.append(ev)
        res["gen"] = torch.cat(gen, 0)
    return res


def tau_program(torch):
    """chengtan9907/OpenSTL TAU: temporal attention unit (large-kernel decomposition: depthwise,
    dilated depthwise, 1x1) with an SE branch, and the differential divergence regulariser."""
    rng = np.random.default_rng(3)
    nn, F = torch.nn, torch.nn.functional
    B, T, C, H, W = 2, 3, 2, 8, 8

    class TemporalAttention(nn.Module):
        def __init__(self, dim, kernel_size=9, dilation=3, reduction=2):
            super().__init__()
            d_k = 2 * dilation - 1
            d_p = (d_k - 1) // 2
            dd_k = kernel_size // dilation + ((kernel_size // dilation) % 2 - 1)
            dd_p = (dilation * (dd_k - 1) // 2)
            self.conv0 = nn.Conv2d(dim, dim, d_k, padding=d_p, groups=dim)
            self.conv_spatial = nn.Conv2d(dim, dim, dd_k, stride=1, padding=dd_p, groups=dim,
                                          dilation=dilation)
            self.conv1 = nn.Conv2d(dim, dim, 1)
            red = max(dim // reduction, 4)
            self.avg_pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Sequential(nn.Linear(dim, red, bias=False), nn.ReLU(True),
                                    nn.Linear(red, dim, bias=False), nn.Sigmoid())

        def forward(self, x):
            u = x.clone()
            attn = self.conv1(self.conv_spatial(self.conv0(x)))
            b, c, _, _ = x.size()
            se_atten = self.fc(self.avg_pool(x).view(b, c)).view(b, c, 1, 1)
            return se_atten * attn * u

    def diff_div_reg(pred_y, batch_y, tau=0.1, eps=1e-12):
        B, T, C = pred_y.shape[:3]
        if T <= 2:
            return 0
        gap_pred_y = (pred_y[:, 1:] - pred_y[:, :-1]).reshape(B, T - 1, -1)
        gap_batch_y = (batch_y[:, 1:] - batch_y[:, :-1]).reshape(B, T - 1, -1)
        softmax_gap_p = F.softmax(gap_pred_y / tau, -1)
        softmax_gap_b = F.softmax(gap_batch_y / tau, -1)
        loss_gap = softmax_gap_p * torch.log(softmax_gap_p / (softmax_gap_b + eps) + eps)
        return loss_gap

    attn = TemporalAttention(T * C)
    fill_(torch, attn, rng)
    opt = torch.optim.AdamW(attn.parameters(), lr=1e-3, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3, eta_min=1e-5)
    x = normal(torch, rng, B, T, C, H, W)
    y = normal(torch, rng, B, T, C, H, W)
    res = {"losses": [], "lrs": [], "kl": []}
    for _ in range(3):
        pred = attn(x.view(B, T * C, H, W)).view(B, T, C, H, W)
        reg = diff_div_reg(pred, y)
        gp = (pred[:, 1:] - pred[:, :-1]).reshape(B, T - 1, -1)
        gy = (y[:, 1:] - y[:, :-1]).reshape(B, T - 1, -1)
        kl = F.kl_div(F.log_softmax(gp / 0.1, -1), F.log_softmax(gy / 0.1, -1),
                      reduction="batchmean", log_target=True)
        loss = F.mse_loss(pred, y) + 0.1 * reg.mean() + 0.01 * kl
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lrs"].append(sched.get_last_lr()[0])
        res["kl"].append(kl.item())
    res["kl_sum"] = F.kl_div(F.log_softmax(gp, -1), F.softmax(gy, -1), reduction="sum")
    res["kl_none"] = F.kl_div(F.log_softmax(gp, -1), F.softmax(gy, -1), reduction="none")
    res["dil_g"] = attn.conv_spatial.weight.grad
    res["dil"] = [attn.conv_spatial.dilation[0], attn.conv_spatial.padding[0],
                  attn.conv_spatial.kernel_size[0]]
    return res


PROGRAMS = [musegan_program, coconet_program, performance_rnn_program, tau_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
