"""Video prediction written as its reference repositories write it in torch, run once with
`torch` bound to ember and once to PyTorch from the same NumPy weights: ConvLSTM (conv over the
cat of x and h, chunk(4) gates), PredRNN (spatiotemporal memory flow, decoupling loss from the
cosine similarity of flattened deltas, reverse scheduled sampling with NumPy Bernoulli masks),
PhyDNet's moment-constrained PhyCell (kernel-to-moment matrices by tensordot), SimVP (inception
translator with grouped convs and GroupNorm), SSIM/PSNR with a gaussian window by grouped conv2d,
each trained a few steps with Adam/OneCycleLR and gradient clipping."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def convlstm_program(torch):
    """ndrplz/ConvLSTM_pytorch."""
    rng = np.random.default_rng(0)
    nn, F = torch.nn, torch.nn.functional

    class ConvLSTMCell(nn.Module):
        def __init__(self, input_dim, hidden_dim, kernel_size, bias):
            super().__init__()
            self.hidden_dim = hidden_dim
            self.padding = kernel_size[0] // 2, kernel_size[1] // 2
            self.conv = nn.Conv2d(input_dim + hidden_dim, 4 * hidden_dim, kernel_size,
                                  padding=self.padding, bias=bias)

        def forward(self, input_tensor, cur_state):
            h_cur, c_cur = cur_state
            combined = torch.cat([input_tensor, h_cur], dim=1)
            combined_conv = self.conv(combined)
            cc_i, cc_f, cc_o, cc_g = torch.split(combined_conv, self.hidden_dim, dim=1)
            i, f = torch.sigmoid(cc_i), torch.sigmoid(cc_f)
            o, g = torch.sigmoid(cc_o), torch.tanh(cc_g)
            c_next = f * c_cur + i * g
            return o * torch.tanh(c_next), c_next

        def init_hidden(self, batch_size, image_size):
            height, width = image_size
            return (torch.zeros(batch_size, self.hidden_dim, height, width,
                                device=self.conv.weight.device),
                    torch.zeros(batch_size, self.hidden_dim, height, width,
                                device=self.conv.weight.device))

    cells = nn.ModuleList([ConvLSTMCell(1, 4, (3, 3), True), ConvLSTMCell(4, 4, (3, 3), True)])
    head = nn.Conv2d(4, 1, 1)
    fill_(torch, cells, rng)
    fill_(torch, head, rng)
    params = list(cells.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-2, total_steps=5)
    seq = torch.sigmoid(normal(torch, rng, 2, 6, 1, 6, 6))  # B T C H W
    res = {"losses": [], "lrs": []}
    for _ in range(3):
        b, t, _, hgt, wid = seq.size()
        cur = seq[:, :4]
        states = [c.init_hidden(b, (hgt, wid)) for c in cells]
        layer_in = cur
        for li, cell in enumerate(cells):
            h, c = states[li]
            out = []
            for ti in range(layer_in.size(1)):
                h, c = cell(layer_in[:, ti], [h, c])
                out.append(h)
            layer_in = torch.stack(out, dim=1)
        preds = [torch.sigmoid(head(layer_in[:, -1]))]
        # rollout one more frame feeding the prediction back (second form: chunk(4))
        h, c = h, c
        x = preds[-1]
        gates = cells[0].conv(torch.cat([x, torch.zeros_like(h)], 1))
        i, f, o, g = gates.chunk(4, dim=1)
        c2 = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        preds.append(torch.sigmoid(head(torch.sigmoid(o) * torch.tanh(c2))))
        pred = torch.stack(preds, 1)
        loss = F.mse_loss(pred, seq[:, 4:]) + F.l1_loss(pred, seq[:, 4:])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, max_norm=0.25, norm_type=2)
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lrs"].append(sched.get_last_lr()[0])
    res["pred"] = pred
    res["conv_g"] = cells[1].conv.weight.grad
    res["head"] = head.weight
    return res


def predrnn_program(torch):
    """thuml/predrnn-pytorch: SpatioTemporalLSTMCell, memory flow, decouple loss, reverse
    scheduled sampling (masks drawn with NumPy and passed in as a tensor)."""
    rng = np.random.default_rng(1)
    nn, F = torch.nn, torch.nn.functional
    C, nh, H, W, L, T_in, T = 2, 4, 6, 6, 2, 3, 6

    class SpatioTemporalLSTMCell(nn.Module):
        def __init__(self, in_channel, num_hidden, filter_size):
            super().__init__()
            self.num_hidden = num_hidden
            self._forget_bias = 1.0
            pad = filter_size // 2
            self.conv_x = nn.Sequential(nn.Conv2d(in_channel, num_hidden * 7, filter_size, 1,
                                                  pad, bias=False),
                                        nn.LayerNorm([num_hidden * 7, H, W]))
            self.conv_h = nn.Sequential(nn.Conv2d(num_hidden, num_hidden * 4, filter_size, 1,
                                                  pad, bias=False),
                                        nn.LayerNorm([num_hidden * 4, H, W]))
            self.conv_m = nn.Sequential(nn.Conv2d(num_hidden, num_hidden * 3, filter_size, 1,
                                                  pad, bias=False),
                                        nn.LayerNorm([num_hidden * 3, H, W]))
            self.conv_o = nn.Sequential(nn.Conv2d(num_hidden * 2, num_hidden, filter_size, 1,
                                                  pad, bias=False),
                                        nn.LayerNorm([num_hidden, H, W]))
            self.conv_last = nn.Conv2d(num_hidden * 2, num_hidden, 1, 1, 0, bias=False)

        def forward(self, x_t, h_t, c_t, m_t):
            x_concat, h_concat, m_concat = self.conv_x(x_t), self.conv_h(h_t), self.conv_m(m_t)
            i_x, f_x, g_x, i_x_prime, f_x_prime, g_x_prime, o_x = torch.split(
                x_concat, self.num_hidden, dim=1)
            i_h, f_h, g_h, o_h = torch.split(h_concat, self.num_hidden, dim=1)
            i_m, f_m, g_m = torch.split(m_concat, self.num_hidden, dim=1)
            i_t = torch.sigmoid(i_x + i_h)
            f_t = torch.sigmoid(f_x + f_h + self._forget_bias)
            g_t = torch.tanh(g_x + g_h)
            delta_c = i_t * g_t
            c_new = f_t * c_t + delta_c
            i_t_prime = torch.sigmoid(i_x_prime + i_m)
            f_t_prime = torch.sigmoid(f_x_prime + f_m + self._forget_bias)
            g_t_prime = torch.tanh(g_x_prime + g_m)
            delta_m = i_t_prime * g_t_prime
            m_new = f_t_prime * m_t + delta_m
            mem = torch.cat((c_new, m_new), 1)
            o_t = torch.sigmoid(o_x + o_h + self.conv_o(mem))
            h_new = o_t * torch.tanh(self.conv_last(mem))
            return h_new, c_new, m_new, delta_c, delta_m

    class RNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell_list = nn.ModuleList(
                [SpatioTemporalLSTMCell(C if i == 0 else nh, nh, 3) for i in range(L)])
            self.conv_last = nn.Conv2d(nh, C, 1, 1, 0, bias=False)
            self.adapter = nn.Conv2d(nh, nh, 1, 1, 0, bias=False)

        def forward(self, frames_tensor, mask_true):
            frames = frames_tensor.permute(0, 1, 4, 2, 3).contiguous()
            mask_true = mask_true.permute(0, 1, 4, 2, 3).contiguous()
            batch = frames.shape[0]
            next_frames, h_t, c_t, delta_c_list, delta_m_list = [], [], [], [], []
            decouple_loss = []
            for i in range(L):
                zeros = torch.zeros([batch, nh, H, W]).to(frames.device)
                h_t.append(zeros)
                c_t.append(zeros)
                delta_c_list.append(zeros)
                delta_m_list.append(zeros)
            memory = torch.zeros([batch, nh, H, W]).to(frames.device)
            x_gen = None
            for t in range(T - 1):
                if t == 0:
                    net = frames[:, t]
                else:
                    net = mask_true[:, t - 1] * frames[:, t] + \
                        (1 - mask_true[:, t - 1]) * x_gen
                h_t[0], c_t[0], memory, delta_c, delta_m = self.cell_list[0](
                    net, h_t[0], c_t[0], memory)
                delta_c_list[0] = F.normalize(
                    self.adapter(delta_c).view(delta_c.shape[0], delta_c.shape[1], -1), dim=2)
                delta_m_list[0] = F.normalize(
                    self.adapter(delta_m).view(delta_m.shape[0], delta_m.shape[1], -1), dim=2)
                for i in range(1, L):
                    h_t[i], c_t[i], memory, delta_c, delta_m = self.cell_list[i](
                        h_t[i - 1], h_t[i], c_t[i], memory)
                    delta_c_list[i] = F.normalize(
                        self.adapter(delta_c).view(delta_c.shape[0], delta_c.shape[1], -1), dim=2)
                    delta_m_list[i] = F.normalize(
                        self.adapter(delta_m).view(delta_m.shape[0], delta_m.shape[1], -1), dim=2)
                x_gen = self.conv_last(h_t[L - 1])
                next_frames.append(x_gen)
                for i in range(0, L):
                    decouple_loss.append(torch.mean(torch.abs(
                        torch.cosine_similarity(delta_c_list[i], delta_m_list[i], dim=2))))
            decouple_loss = torch.mean(torch.stack(decouple_loss, dim=0))
            next_frames = torch.stack(next_frames, dim=0).permute(1, 0, 3, 4, 2).contiguous()
            loss = F.mse_loss(next_frames, frames_tensor[:, 1:]) + 0.1 * decouple_loss
            return next_frames, loss, decouple_loss

    def reserve_schedule_sampling_exp(itr, batch_size, r_sampling_step_1=2, r_exp_alpha=2.0):
        if itr < r_sampling_step_1:
            r_eta = 0.5
        else:
            r_eta = 1.0 - 0.5 * math.exp(-float(itr - r_sampling_step_1) / r_exp_alpha)
        eta = 0.5
        r_random_flip = rng.random_sample((batch_size, T_in - 1)) if hasattr(
            rng, "random_sample") else rng.random((batch_size, T_in - 1))
        r_true_token = r_random_flip < r_eta
        random_flip = rng.random((batch_size, T - T_in - 1))
        true_token = random_flip < eta
        ones, zeros = np.ones((H, W, C)), np.zeros((H, W, C))
        real_input_flag = []
        for i in range(batch_size):
            for j in range(T - 2):
                if j < T_in - 1:
                    real_input_flag.append(ones if r_true_token[i, j] else zeros)
                else:
                    real_input_flag.append(ones if true_token[i, j - (T_in - 1)] else zeros)
        real_input_flag = np.array(real_input_flag)
        return np.reshape(real_input_flag, (batch_size, T - 2, H, W, C))

    model = RNN()
    fill_(torch, model, rng)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    frames = torch.from_numpy(rng.random((2, T, H, W, C)).astype(np.float32))
    res = {"losses": [], "decouple": []}
    for itr in range(3):
        mask = torch.FloatTensor(reserve_schedule_sampling_exp(itr, 2)).to(frames.device)
        pred, loss, dec = model(frames, mask)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        res["losses"].append(loss.item())
        res["decouple"].append(dec.item())
    res["mask_dtype"] = [str(mask.dtype).split(".")[-1]]
    res["pred"] = pred
    res["adapter_g"] = model.adapter.weight.grad
    res["ln_g"] = model.cell_list[0].conv_x[1].weight.grad
    with torch.no_grad():
        res["test"] = model(frames, torch.zeros_like(mask))[0][:, T_in - 1:]
    return res


def phydnet_program(torch):
    """vincent-leguen/PhyDNet: PhyCell with moment constraints (K2M by tensordot)."""
    rng = np.random.default_rng(2)
    nn, F = torch.nn, torch.nn.functional
    from functools import reduce

    def _apply_axis_left_dot(x, mats):
        assert x.dim() == len(mats) + 1
        sizex = x.size()
        k = x.dim() - 1
        for i in range(k):
            x = torch.tensordot(mats[k - i - 1], x, dims=[[1], [k]])
        x = x.permute([k] + list(range(k))).contiguous()
        return x.view(sizex)

    class _MK(nn.Module):
        def __init__(self, shape):
            super().__init__()
            self._size = torch.Size(shape)
            self._dim = len(shape)
            M, invM = [], []
            for i, n in enumerate(shape):
                M.append(np.zeros((n, n)))
                for j in range(n):
                    M[-1][j] = ((np.arange(n) - (n - 1) // 2) ** j) / math.factorial(j)
                invM.append(np.linalg.inv(M[-1]))
                self.register_buffer("_M" + str(i), torch.from_numpy(M[-1]))
                self.register_buffer("_invM" + str(i), torch.from_numpy(invM[-1]))

        @property
        def M(self):
            return list(self._buffers["_M" + str(j)] for j in range(self.dim()))

        @property
        def invM(self):
            return list(self._buffers["_invM" + str(j)] for j in range(self.dim()))

        def size(self):
            return self._size

        def dim(self):
            return self._dim

        def _packdim(self, x):
            assert x.dim() >= self.dim()
            if x.dim() == self.dim():
                x = x[np.newaxis, :]
            x = x.contiguous()
            return x.view([-1] + list(x.size()[-self.dim():]))

    class K2M(_MK):
        def forward(self, k):
            sizek = k.size()
            k = self._packdim(k)
            k = _apply_axis_left_dot(k, self.M)
            return k.view(sizek)

    class PhyCell_Cell(nn.Module):
        def __init__(self, input_dim, F_hidden_dim, kernel_size, bias=1):
            super().__init__()
            self.input_dim = input_dim
            self.padding = kernel_size[0] // 2, kernel_size[1] // 2
            self.F = nn.Sequential()
            self.F.add_module("conv1", nn.Conv2d(input_dim, F_hidden_dim, kernel_size, (1, 1),
                                                 self.padding))
            self.F.add_module("bn1", nn.GroupNorm(4, F_hidden_dim))
            self.F.add_module("conv2", nn.Conv2d(F_hidden_dim, input_dim, (1, 1), (1, 1),
                                                 (0, 0)))
            self.convgate = nn.Conv2d(2 * input_dim, input_dim, (3, 3), padding=(1, 1),
                                      bias=bias)

        def forward(self, x, hidden):
            combined = torch.cat([x, hidden], dim=1)
            combined_conv = self.convgate(combined)
            K = torch.sigmoid(combined_conv)
            hidden_tilde = hidden + self.F(hidden)
            return hidden_tilde + K * (x - hidden_tilde)

    k2m = K2M([3, 3]).double()
    constraints = torch.zeros((9, 3, 3))
    ind = 0
    for i in range(0, 3):
        for j in range(0, 3):
            constraints[ind, i, j] = 1
            ind += 1
    cell = PhyCell_Cell(4, 8, (3, 3))
    fill_(torch, cell, rng)
    enc = nn.Conv2d(1, 4, 3, padding=1)
    dec = nn.ConvTranspose2d(4, 1, 3, padding=1)
    fill_(torch, enc, rng)
    fill_(torch, dec, rng)
    params = [*cell.parameters(), *enc.parameters(), *dec.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    seq = normal(torch, rng, 2, 4, 1, 6, 6)
    res = {"losses": [], "moment": []}
    for _ in range(3):
        hidden = torch.zeros(2, 4, 6, 6)
        loss = 0.0
        for t in range(3):
            hidden = cell(enc(seq[:, t]), hidden)
            loss = loss + F.mse_loss(dec(hidden), seq[:, t + 1])
        k2m_loss = 0.0
        for b in range(0, cell.input_dim):
            filters = cell.F.conv1.weight[:, b, :, :]
            m = k2m(filters.double())
            m = m.float()
            k2m_loss = k2m_loss + F.mse_loss(m, constraints[:8])
        total = loss + k2m_loss
        opt.zero_grad()
        total.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        res["losses"].append(loss.item())
        res["moment"].append(float(k2m_loss))
    res["M0"] = k2m.M[0]
    res["invM1"] = k2m.invM[1]
    res["buf_dtype"] = [str(k2m._M0.dtype).split(".")[-1]]
    res["conv1_g"] = cell.F.conv1.weight.grad
    res["gn_g"] = cell.F.bn1.weight.grad
    res["k2m_roundtrip"] = _apply_axis_left_dot(
        _apply_axis_left_dot(torch.eye(3, dtype=torch.float64)[None].expand(2, 3, 3) + 0.5,
                             k2m.M), k2m.invM)
    res["reduce"] = reduce(lambda a, b: a * b, k2m.size())
    return res


def simvp_program(torch):
    """chengtan9907/SimVPv2 / A4Bio/SimVP: encoder, inception translator (grouped convs with
    GroupNorm and LeakyReLU), decoder with the skip from the first encoder layer."""
    rng = np.random.default_rng(3)
    nn, F = torch.nn, torch.nn.functional
    B, T, C, H, W, hid_S, hid_T = 2, 3, 1, 8, 8, 4, 8

    class BasicConv2d(nn.Module):
        def __init__(self, in_c, out_c, k, stride, padding, transpose=False, act_norm=False):
            super().__init__()
            self.act_norm = act_norm
            if not transpose:
                self.conv = nn.Conv2d(in_c, out_c, k, stride, padding)
            else:
                self.conv = nn.ConvTranspose2d(in_c, out_c, k, stride, padding,
                                               output_padding=stride // 2)
            self.norm = nn.GroupNorm(2, out_c)
            self.act = nn.LeakyReLU(0.2, inplace=True)

        def forward(self, x):
            y = self.conv(x)
            if self.act_norm:
                y = self.act(self.norm(y))
            return y

    class GroupConv2d(nn.Module):
        def __init__(self, in_c, out_c, k, stride, padding, groups, act_norm=False):
            super().__init__()
            self.act_norm = act_norm
            if in_c % groups != 0:
                groups = 1
            self.conv = nn.Conv2d(in_c, out_c, k, stride, padding, groups=groups)
            self.norm = nn.GroupNorm(groups, out_c)
            self.activate = nn.LeakyReLU(0.2, inplace=True)

        def forward(self, x):
            y = self.conv(x)
            if self.act_norm:
                y = self.activate(self.norm(y))
            return y

    class Inception(nn.Module):
        def __init__(self, C_in, C_hid, C_out, incep_ker=(3, 5), groups=4):
            super().__init__()
            self.conv1 = nn.Conv2d(C_in, C_hid, 1, 1, 0)
            self.layers = nn.Sequential(*[GroupConv2d(C_hid, C_out, k, 1, k // 2, groups,
                                                      act_norm=True) for k in incep_ker])

        def forward(self, x):
            x = self.conv1(x)
            y = 0
            for layer in self.layers:
                y += layer(x)
            return y

    enc = nn.Sequential(BasicConv2d(C, hid_S, 3, 1, 1, act_norm=True),
                        BasicConv2d(hid_S, hid_S, 3, 2, 1, act_norm=True))
    dec = nn.Sequential(BasicConv2d(hid_S, hid_S, 3, 2, 1, transpose=True, act_norm=True),
                        BasicConv2d(2 * hid_S, hid_S, 3, 1, 1, act_norm=True))
    readout = nn.Conv2d(hid_S, C, 1)
    trans = nn.ModuleList([Inception(T * hid_S, hid_T // 2, T * hid_S),
                           Inception(T * hid_S, hid_T // 2, T * hid_S)])
    mods = nn.ModuleList([enc, dec, readout, trans])
    fill_(torch, mods, rng)

    def forward(x_raw):
        b, t, c, h, w = x_raw.shape
        x = x_raw.view(b * t, c, h, w)
        skip = enc[0](x)
        embed = enc[1](skip)
        _, c_, h_, w_ = embed.shape
        z = embed.view(b, t * c_, h_, w_)
        z = trans[1](trans[0](z)) + z
        hid = z.reshape(b * t, c_, h_, w_)
        hid = dec[0](hid)
        y = readout(dec[1](torch.cat([hid, skip], dim=1)))
        return y.reshape(b, t, c, h, w)

    opt = torch.optim.Adam(mods.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, steps_per_epoch=2, epochs=2,
                                                three_phase=True)
    x = normal(torch, rng, B, T, C, H, W)
    y = normal(torch, rng, B, T, C, H, W)
    res = {"losses": [], "lrs": [], "moms": []}
    for _ in range(4):
        pred = forward(x)
        loss = F.mse_loss(pred, y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(mods.parameters(), 0.1)
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["lrs"].append(sched.get_last_lr()[0])
        res["moms"].append(opt.param_groups[0]["betas"][0])
    res["pred"] = pred
    res["group_g"] = trans[0].layers[1].conv.weight.grad
    res["groups"] = [m.conv.groups for m in trans[0].layers]
    res["gn_b"] = trans[1].layers[0].norm.bias
    return res


def ssim_psnr_program(torch):
    """pytorch-ssim (Po-Hsun-Su) window by outer product and grouped conv2d, PSNR per frame,
    and SSIM used as a loss."""
    rng = np.random.default_rng(4)
    F = torch.nn.functional

    def gaussian(window_size, sigma):
        gauss = torch.Tensor([math.exp(-(x - window_size // 2) ** 2 / float(2 * sigma ** 2))
                              for x in range(window_size)])
        return gauss / gauss.sum()

    def create_window(window_size, channel):
        _1D_window = gaussian(window_size, 1.5).unsqueeze(1)
        _2D_window = _1D_window.mm(_1D_window.t()).float().unsqueeze(0).unsqueeze(0)
        return torch.autograd.Variable(
            _2D_window.expand(channel, 1, window_size, window_size).contiguous())

    def _ssim(img1, img2, window, window_size, channel, size_average=True):
        mu1 = F.conv2d(img1, window, padding=window_size // 2, groups=channel)
        mu2 = F.conv2d(img2, window, padding=window_size // 2, groups=channel)
        mu1_sq, mu2_sq, mu1_mu2 = mu1.pow(2), mu2.pow(2), mu1 * mu2
        sigma1_sq = F.conv2d(img1 * img1, window, padding=window_size // 2,
                             groups=channel) - mu1_sq
        sigma2_sq = F.conv2d(img2 * img2, window, padding=window_size // 2,
                             groups=channel) - mu2_sq
        sigma12 = F.conv2d(img1 * img2, window, padding=window_size // 2,
                           groups=channel) - mu1_mu2
        C1, C2 = 0.01 ** 2, 0.03 ** 2
        ssim_map = ((2 * mu1_mu2 + C1) * (2 * sigma12 + C2)) / \
            ((mu1_sq + mu2_sq + C1) * (sigma1_sq + sigma2_sq + C2))
        if size_average:
            return ssim_map.mean()
        return ssim_map.mean(1).mean(1).mean(1)

    def psnr(pred, true):
        mse = torch.mean((pred.float() - true.float()) ** 2, dim=(-3, -2, -1))
        return 20 * torch.log10(torch.tensor(1.0) / torch.sqrt(mse))

    window = create_window(5, 3)
    a = torch.from_numpy(rng.random((2, 3, 10, 10)).astype(np.float32))
    b = (a + 0.1 * normal(torch, rng, 2, 3, 10, 10)).clamp(0, 1)
    res = {"window": window, "ssim": _ssim(a, b, window, 5, 3),
           "ssim_per": _ssim(a, b, window, 5, 3, size_average=False),
           "psnr": psnr(b, a), "psnr_same": psnr(a, a)}
    # SSIM as a loss: optimise a copy toward `a`
    x = b.clone().requires_grad_(True)
    opt = torch.optim.Adam([x], lr=0.02)
    for _ in range(3):
        loss = 1 - _ssim(x, a, window, 5, 3)
        opt.zero_grad()
        loss.backward()
        opt.step()
    res["ssim_loss"] = loss
    res["x"] = x
    # uint8 frames as video pipelines store them
    u = (a * 255).round().to(torch.uint8)
    res["psnr_u8"] = 10 * torch.log10(255.0 ** 2 / F.mse_loss(u.float(), (b * 255).round()))
    res["avg_pool_ssim"] = _ssim(F.avg_pool2d(a, 2), F.avg_pool2d(b, 2), window, 5, 3)
    return res


PROGRAMS = [convlstm_program, predrnn_program, phydnet_program, simvp_program, ssim_psnr_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
