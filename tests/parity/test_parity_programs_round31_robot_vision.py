"""Robot-policy plumbing written as robomimic / diffusion_policy / RT-1 write it in torch, run
with `torch` bound to ember and to PyTorch from the same NumPy weights and data: a ResNet-style
observation encoder whose BatchNorms are swapped for GroupNorms by module surgery, robomimic's
SpatialSoftmax keypoints, crop randomisation (eval centre crop, train crops from NumPy
offsets), diffusion_policy's LinearNormalizer in an nn.ParameterDict, BC-RNN with an LSTM
carrying its state, RT-1 action tokenisation with bucketize and a TokenLearner, and action
chunk bookkeeping with unfold, pad and interpolate."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def encoder_program(torch):
    """A small ResNet trunk built with BatchNorm2d, rewritten by replace_submodules (named_modules,
    get_submodule, setattr on the parent) to GroupNorm(C // 16), SpatialSoftmax keypoints with
    a learnable temperature, crop randomisation, a LinearNormalizer (ParameterDict of frozen
    scale/offset) and an MLP head; a few Adam steps with weight decay, eval-mode outputs."""
    rng = np.random.default_rng(9)
    nn, F = torch.nn, torch.nn.functional

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            out = F.relu(self.bn1(self.conv1(x)), inplace=True)
            return F.relu(self.bn2(self.conv2(out)) + idt)

    def replace_submodules(root, predicate, func):
        if predicate(root):
            return func(root)
        names = [k.split(".") for k, m in root.named_modules(remove_duplicate=True)
                 if predicate(m)]
        for *parent, k in names:
            parent_module = root.get_submodule(".".join(parent)) if parent else root
            if isinstance(parent_module, nn.Sequential):
                src_module = parent_module[int(k)]
            else:
                src_module = getattr(parent_module, k)
            tgt_module = func(src_module)
            if isinstance(parent_module, nn.Sequential):
                parent_module[int(k)] = tgt_module
            else:
                setattr(parent_module, k, tgt_module)
        left = [k for k, m in root.named_modules(remove_duplicate=True) if predicate(m)]
        assert len(left) == 0
        return root

    class SpatialSoftmax(nn.Module):
        def __init__(self, input_shape, num_kp=8, temperature=1.0, learnable_temperature=True):
            super().__init__()
            self._in_c, self._in_h, self._in_w = input_shape
            self.nets = nn.Conv2d(self._in_c, num_kp, kernel_size=1)
            self._num_kp = num_kp
            if learnable_temperature:
                self.temperature = nn.Parameter(torch.ones(1) * temperature, requires_grad=True)
            pos_x, pos_y = np.meshgrid(np.linspace(-1.0, 1.0, self._in_w),
                                       np.linspace(-1.0, 1.0, self._in_h))
            pos_x = torch.from_numpy(pos_x.reshape(1, self._in_h * self._in_w)).float()
            pos_y = torch.from_numpy(pos_y.reshape(1, self._in_h * self._in_w)).float()
            self.register_buffer("pos_x", pos_x)
            self.register_buffer("pos_y", pos_y)

        def forward(self, feature):
            feature = self.nets(feature)
            feature = feature.reshape(-1, self._in_h * self._in_w)
            attention = F.softmax(feature / self.temperature, dim=-1)
            expected_x = torch.sum(self.pos_x * attention, dim=1, keepdim=True)
            expected_y = torch.sum(self.pos_y * attention, dim=1, keepdim=True)
            expected_xy = torch.cat([expected_x, expected_y], 1)
            return expected_xy.view(-1, self._num_kp, 2)

    class LinearNormalizer(nn.Module):
        def __init__(self):
            super().__init__()
            self.params_dict = nn.ParameterDict()

        @torch.no_grad()
        def fit(self, key, data, output_max=1.0, output_min=-1.0, range_eps=1e-4):
            data = data.reshape(-1, data.shape[-1])
            input_max, _ = data.max(axis=0)
            input_min = data.min(axis=0).values
            input_range = input_max - input_min
            ignore_dim = input_range < range_eps
            input_range[ignore_dim] = output_max - output_min
            scale = (output_max - output_min) / input_range
            offset = output_min - scale * input_min
            offset[ignore_dim] = (output_max + output_min) / 2 - input_min[ignore_dim]
            self.params_dict[key] = nn.ParameterDict({
                "scale": nn.Parameter(scale, requires_grad=False),
                "offset": nn.Parameter(offset, requires_grad=False),
                "input_stats": nn.ParameterDict({
                    "min": nn.Parameter(input_min, requires_grad=False),
                    "max": nn.Parameter(input_max, requires_grad=False),
                    "mean": nn.Parameter(data.mean(axis=0), requires_grad=False),
                    "std": nn.Parameter(data.std(axis=0), requires_grad=False)})})

        def normalize(self, key, x, forward=True):
            params = self.params_dict[key]
            scale, offset = params["scale"], params["offset"]
            shape = x.shape
            x = x.reshape(-1, scale.shape[0])
            x = x * scale + offset if forward else (x - offset) / scale
            return x.reshape(shape)

    trunk = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16),
                          nn.ReLU(inplace=True), BasicBlock(16, 16, 1), BasicBlock(16, 32, 2))
    trunk = replace_submodules(trunk, lambda x: isinstance(x, nn.BatchNorm2d),
                               lambda x: nn.GroupNorm(num_groups=x.num_features // 16,
                                                      num_channels=x.num_features))
    pool = SpatialSoftmax((32, 6, 6), num_kp=8)
    head = nn.Sequential(nn.Flatten(), nn.Linear(16 + 3, 32), nn.ReLU(), nn.Linear(32, 4))
    fill_(torch, list(trunk.parameters()) + list(pool.parameters()) + list(head.parameters()),
          rng, 0.3)
    with torch.no_grad():
        pool.temperature.fill_(1.0)
        for m in trunk.modules():
            if isinstance(m, nn.GroupNorm):
                m.weight.fill_(1.0)
                m.bias.zero_()
    norm = LinearNormalizer()
    act_data = normal(torch, rng, 50, 4) * torch.tensor([1.0, 2.0, 0.0, 0.5])
    norm.fit("action", act_data)
    norm.fit("agent_pos", normal(torch, rng, 50, 3))
    res = {"names": sorted(n for n, _ in trunk.named_modules() if n),
           "norm_keys": sorted(norm.state_dict().keys()),
           "n_trainable": [sum(p.numel() for p in norm.parameters() if p.requires_grad)]}
    params = list(trunk.parameters()) + list(pool.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-2)
    losses = []
    for _ in range(3):
        img = torch.from_numpy(rng.random((4, 3, 14, 14)).astype(np.float32))
        # CropRandomizer: a 12x12 crop at NumPy offsets per sample
        offs = rng.integers(0, 3, (4, 2))
        crops = torch.stack([img[i, :, oy:oy + 12, ox:ox + 12] for i, (oy, ox) in
                             enumerate(offs.tolist())])
        kp = pool(trunk(crops))
        pos = norm.normalize("agent_pos", normal(torch, rng, 4, 3))
        out = head(torch.cat([kp.flatten(1), pos], -1))
        target = norm.normalize("action", normal(torch, rng, 4, 4))
        loss = F.mse_loss(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"], res["temperature"] = losses, pool.temperature
    res["gn_weight"] = trunk[4].bn2.weight
    res["scale"] = norm.params_dict["action"]["scale"]
    res["offset"] = norm.params_dict["action"]["offset"]
    res["std"] = norm.params_dict["action"]["input_stats"]["std"]
    with torch.no_grad():
        centre = img[:, :, 1:13, 1:13]
        kp = pool(trunk(centre))
        res["kp"] = kp
        res["unnorm"] = norm.normalize("action", head(torch.cat([kp.flatten(1),
                                                                 torch.zeros(4, 3)], -1)),
                                       forward=False)
    return res


def bc_rnn_program(torch):
    """robomimic BC-RNN: an LSTM over observation sequences (batch_first, 2 layers), hidden
    state carried and detached across windows, a GMM-free deterministic head, L2 + L1 loss,
    then rollout-mode stepping one observation at a time with the returned (h, c), checked
    against the full-sequence forward; packed sequences for ragged demos."""
    rng = np.random.default_rng(10)
    nn, F = torch.nn, torch.nn.functional
    B, T, OBS, A, H = 3, 6, 5, 2, 12
    rnn = nn.LSTM(OBS, H, num_layers=2, batch_first=True)
    head = nn.Linear(H, A)
    fill_(torch, list(rnn.parameters()) + list(head.parameters()), rng, 0.3)
    opt = torch.optim.Adam(list(rnn.parameters()) + list(head.parameters()), lr=1e-3)
    state = None
    res = {"losses": []}
    for _ in range(3):
        obs, act = normal(torch, rng, B, T, OBS), normal(torch, rng, B, T, A)
        out, state = rnn(obs, state)
        state = tuple(s.detach() for s in state)
        pred = head(out)
        loss = F.mse_loss(pred, act) + 0.1 * F.l1_loss(pred, act)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
    res["w_ih_l1"], res["h"] = rnn.weight_ih_l1, state[0]
    with torch.no_grad():
        obs = normal(torch, rng, 1, T, OBS)
        full, _ = rnn(obs)
        hc, steps = None, []
        for t in range(T):
            o, hc = rnn(obs[:, t:t + 1], hc)
            steps.append(o)
        res["step_vs_full"] = torch.cat(steps, 1) - full
        res["full"] = full
        lengths = torch.tensor([6, 4, 2])
        seqs = normal(torch, rng, 3, T, OBS)
        packed = nn.utils.rnn.pack_padded_sequence(seqs, lengths, batch_first=True,
                                                   enforce_sorted=True)
        po, (hn, cn) = rnn(packed)
        padded, lens = nn.utils.rnn.pad_packed_sequence(po, batch_first=True,
                                                        padding_value=-1.0)
        res["padded"], res["hn"], res["lens"] = padded, hn, lens.tolist()
    return res


def rt1_program(torch):
    """RT-1 style: continuous actions tokenised into 16 bins with bucketize / linspace
    (and back to bin centres), a TokenLearner (1x1-conv attention maps, softmax over space,
    einsum pooling), a causal Transformer decoder over image tokens with
    generate_square_subsequent_mask, cross-entropy over action bins with label smoothing,
    and action chunks sliced with unfold, padded with F.pad(mode='replicate') and resampled
    with F.interpolate(mode='linear')."""
    rng = np.random.default_rng(11)
    nn, F = torch.nn, torch.nn.functional
    B, C, S, NT, A, bins = 2, 8, 3, 4, 3, 16
    low, high = -1.0, 1.0

    def tokenize(a):
        a = torch.clamp(a, low, high)
        edges = torch.linspace(low, high, bins + 1)[1:-1]
        return torch.bucketize(a, edges, right=False)

    def detokenize(tok):
        centres = low + (tok.float() + 0.5) * (high - low) / bins
        return centres

    class TokenLearner(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(C)
            self.mlp = nn.Sequential(nn.Linear(C, 16), nn.GELU(approximate="tanh"),
                                     nn.Linear(16, NT))

        def forward(self, x):  # (B, C, H, W)
            feats = x.flatten(2).transpose(1, 2)
            maps = self.mlp(self.norm(feats)).transpose(1, 2).softmax(-1)
            return torch.einsum("bns,bsc->bnc", maps, feats)

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, C, 3, 2, 1)
            self.film = nn.Linear(6, 2 * C)
            self.tl = TokenLearner()
            self.pos = nn.Parameter(torch.zeros(1, S * NT, C))
            layer = nn.TransformerEncoderLayer(C, 2, 32, dropout=0.0, batch_first=True,
                                               activation="gelu")
            self.dec = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.out = nn.Linear(C, A * bins)

        def forward(self, imgs, lang):  # imgs (B, S, 3, 8, 8)
            x = self.stem(imgs.flatten(0, 1))
            gamma, beta = self.film(lang).repeat_interleave(S, 0).chunk(2, -1)
            x = x * (1 + gamma[..., None, None]) + beta[..., None, None]
            tok = self.tl(x).reshape(imgs.shape[0], S * NT, C) + self.pos
            mask = nn.Transformer.generate_square_subsequent_mask(S * NT)
            h = self.dec(tok, mask=mask, is_causal=True)
            return self.out(h[:, -1]).view(-1, A, bins)

    pol = Policy()
    fill_(torch, pol, rng, 0.3)
    opt = torch.optim.AdamW(pol.parameters(), lr=1e-3)
    res = {"losses": [], "tokens": []}
    for _ in range(3):
        imgs = normal(torch, rng, B, S, 3, 8, 8)
        lang = normal(torch, rng, B, 6)
        act = normal(torch, rng, B, A) * 0.6
        tok = tokenize(act)
        logits = pol(imgs, lang)
        loss = F.cross_entropy(logits.transpose(1, 2), tok, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
        res["tokens"].append(tok)
    res["detok_err"] = (detokenize(tok) - act.clamp(low, high)).abs().max()
    res["edge_tokens"] = tokenize(torch.tensor([-2.0, -1.0, -0.875, 0.0, 0.875, 1.0, 5.0]))
    res["pos"], res["out_w"] = pol.pos, pol.out.weight
    pred = logits.argmax(-1)
    res["pred_dtype"] = [str(pred.dtype).split(".")[-1]]

    traj = normal(torch, rng, 10, A)
    chunks = traj.unfold(0, 4, 2)  # (windows, A, 4)
    res["chunks"], res["chunk_stride"] = chunks, list(chunks.stride())
    padded = F.pad(traj.T.unsqueeze(0), (0, 3), mode="replicate")
    res["padded"] = padded
    res["resampled"] = F.interpolate(padded, size=7, mode="linear", align_corners=True)
    res["resampled_nc"] = F.interpolate(padded, scale_factor=0.5, mode="linear")
    return res


PROGRAMS = [encoder_program, bc_rnn_program, rt1_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
