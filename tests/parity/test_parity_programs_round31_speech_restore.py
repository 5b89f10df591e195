"""OCR and image restoration programs written as the CRNN, DBNet, Restormer and NAFNet
repositories write them in torch, run once with `torch` bound to ember and once to PyTorch from
the same NumPy weights: CRNN with a bidirectional LSTM and CTC (blank last, int32 lengths,
zero_infinity, 1-D concatenated targets, Adadelta), greedy decoding by unique_consecutive;
DBNet's differentiable binarisation, balanced BCE with OHEM by topk over negatives, dice and
masked L1 losses; Restormer's transposed channel attention (F.normalize, learned temperature),
gated depthwise FFN, pixel_(un)shuffle; NAFNet's SimpleGate, simplified channel attention and
LayerNorm2d as a custom autograd.Function; charbonnier loss, PSNR and SSIM with a gaussian
window conv2d over groups, progressive patch sizes. Sibling of _speech."""

import itertools
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def crnn_ctc_program(torch):
    """CRNN: conv features collapsed to a sequence, BiLSTM, log_softmax over (T, N, C); CTC
    with blank as the last class and 1-D targets, per-sample losses, zero_infinity for a target
    longer than the input, Adadelta steps; greedy decode with unique_consecutive."""
    rng = np.random.default_rng(10)
    F = torch.nn.functional
    nclass, nh, B = 6, 8, 3

    class BidirectionalLSTM(torch.nn.Module):
        def __init__(self, n_in, n_hidden, n_out):
            super().__init__()
            self.rnn = torch.nn.LSTM(n_in, n_hidden, bidirectional=True)
            self.embedding = torch.nn.Linear(n_hidden * 2, n_out)

        def forward(self, x):
            recurrent, _ = self.rnn(x)
            T, b, h = recurrent.size()
            output = self.embedding(recurrent.view(T * b, h))
            return output.view(T, b, -1)

    class CRNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            cnn = torch.nn.Sequential()
            cnn.add_module("conv0", torch.nn.Conv2d(1, 4, 3, 1, 1))
            cnn.add_module("batchnorm0", torch.nn.BatchNorm2d(4))
            cnn.add_module("relu0", torch.nn.LeakyReLU(0.2, inplace=True))
            cnn.add_module("pooling0", torch.nn.MaxPool2d((2, 2), (2, 1), (0, 1)))
            cnn.add_module("conv1", torch.nn.Conv2d(4, 8, 3, 1, 1))
            cnn.add_module("relu1", torch.nn.ReLU(True))
            cnn.add_module("pooling1", torch.nn.MaxPool2d((2, 2), (2, 1), (0, 1)))
            cnn.add_module("conv2", torch.nn.Conv2d(8, 8, (2, 1), 1, 0))
            self.cnn = cnn
            self.rnn = torch.nn.Sequential(BidirectionalLSTM(8, nh, nh),
                                           BidirectionalLSTM(nh, nh, nclass))

        def forward(self, x):
            conv = self.cnn(x)
            b, c, h, w = conv.size()
            assert h == 1, "the height of conv must be 1"
            conv = conv.squeeze(2).permute(2, 0, 1)
            return F.log_softmax(self.rnn(conv), dim=2)

    model = CRNN()
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0, rho=0.9)
    ctc = torch.nn.CTCLoss(blank=nclass - 1, reduction="none", zero_infinity=True)
    images = normal(torch, rng, B, 1, 8, 6)
    text = torch.IntTensor([0, 1, 1, 2, 3, 1] + [2] * 9 + [4, 0])
    length = torch.IntTensor([6, 9, 2])
    res = {"losses": [], "per_sample": []}
    for _ in range(3):
        preds = model(images)
        preds_size = torch.IntTensor([preds.size(0)] * B)
        per = ctc(preds, text, preds_size, length)
        loss = per.sum() / B
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
        res["per_sample"].append(per.detach())
    res["T"] = [preds.size(0)]
    res["bn_running"] = [model.cnn.batchnorm0.running_mean, model.cnn.batchnorm0.running_var]
    res["lstm_grad"] = model.rnn[0].rnn.weight_hh_l0_reverse.grad
    model.eval()
    with torch.no_grad():
        _, preds = model(images).max(2)
        preds = preds.transpose(1, 0).contiguous()
    decoded = []
    for seq in preds:
        collapsed = torch.unique_consecutive(seq)
        decoded.append(collapsed[collapsed != nclass - 1].tolist())
    res["decoded"] = [str(d) for d in decoded]
    with torch.no_grad():
        res["mean_reduction"] = torch.nn.CTCLoss(blank=nclass - 1)(
            model(images), text, preds_size, length)
    return res


def dbnet_program(torch):
    """DBNet head: FPN-lite features, probability and threshold maps via ConvTranspose2d,
    differentiable binarisation 1/(1+exp(-k(P-T))), balanced BCE with OHEM (topk over negatives),
    dice loss on the binary map, masked L1 on thresholds; SGD with poly lr."""
    rng = np.random.default_rng(11)
    F = torch.nn.functional
    B, S, k = 2, 16, 50

    class DBHead(torch.nn.Module):
        def __init__(self, in_channels=8):
            super().__init__()
            self.binarize = torch.nn.Sequential(
                torch.nn.Conv2d(in_channels, in_channels // 4, 3, padding=1, bias=False),
                torch.nn.BatchNorm2d(in_channels // 4), torch.nn.ReLU(inplace=True),
                torch.nn.ConvTranspose2d(in_channels // 4, in_channels // 4, 2, 2),
                torch.nn.BatchNorm2d(in_channels // 4), torch.nn.ReLU(inplace=True),
                torch.nn.ConvTranspose2d(in_channels // 4, 1, 2, 2), torch.nn.Sigmoid())
            self.thresh = torch.nn.Sequential(
                torch.nn.Conv2d(in_channels, in_channels // 4, 3, padding=1, bias=False),
                torch.nn.BatchNorm2d(in_channels // 4), torch.nn.ReLU(inplace=True),
                torch.nn.Upsample(scale_factor=2, mode="nearest"),
                torch.nn.Conv2d(in_channels // 4, in_channels // 4, 3, padding=1),
                torch.nn.BatchNorm2d(in_channels // 4), torch.nn.ReLU(inplace=True),
                torch.nn.ConvTranspose2d(in_channels // 4, 1, 2, 2), torch.nn.Sigmoid())

        def step_function(self, x, y):
            return torch.reciprocal(1 + torch.exp(-k * (x - y)))

        def forward(self, x):
            shrink_maps = self.binarize(x)
            if not self.training:
                return shrink_maps
            threshold_maps = self.thresh(x)
            binary_maps = self.step_function(shrink_maps, threshold_maps)
            return torch.cat((shrink_maps, threshold_maps, binary_maps), dim=1)

    class Neck(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.in5, self.in4 = torch.nn.Conv2d(8, 8, 1), torch.nn.Conv2d(4, 8, 1)
            self.out5 = torch.nn.Conv2d(8, 4, 3, padding=1)
            self.out4 = torch.nn.Conv2d(8, 4, 3, padding=1)

        def forward(self, c4, c5):
            in5, in4 = self.in5(c5), self.in4(c4)
            out4 = F.interpolate(in5, size=in4.shape[2:], mode="nearest") + in4
            p5 = F.interpolate(self.out5(in5), scale_factor=2, mode="nearest")
            return torch.cat((p5, self.out4(out4)), 1)

    def balance_bce(pred, gt, mask, negative_ratio=3.0, eps=1e-6):
        positive = (gt * mask).byte()
        negative = ((1 - gt) * mask).byte()
        positive_count = int(positive.float().sum())
        negative_count = min(int(negative.float().sum()), int(positive_count * negative_ratio))
        loss = F.binary_cross_entropy(pred, gt, reduction="none")
        positive_loss = loss * positive.float()
        negative_loss = loss * negative.float()
        negative_loss, _ = negative_loss.view(-1).topk(negative_count)
        return (positive_loss.sum() + negative_loss.sum()) / (
            positive_count + negative_count + eps)

    def dice_loss(pred, gt, mask, weights=None, eps=1e-6):
        if pred.dim() == 4:
            pred, gt, mask = pred[:, 0, :, :], gt[:, 0, :, :], mask[:, 0, :, :]
        intersection = (pred * gt * mask).sum()
        union = (pred * mask).sum() + (gt * mask).sum() + eps
        loss = 1 - 2.0 * intersection / union
        assert loss <= 1
        return loss

    def masked_l1(pred, gt, mask, eps=1e-6):
        return (torch.abs(pred - gt) * mask).sum() / (mask.sum() + eps)

    neck, head = Neck(), DBHead()
    backbone = torch.nn.ModuleDict({"c4": torch.nn.Conv2d(3, 4, 3, 4, 1),
                                    "c5": torch.nn.Conv2d(4, 8, 3, 2, 1)})
    model = torch.nn.ModuleList([backbone, neck, head])
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=10, power=0.9)
    img = normal(torch, rng, B, 3, S, S)
    gt = torch.zeros(B, S, S)
    gt[0, 3:9, 2:12] = 1
    gt[1, 8:12, 4:15] = 1
    mask = torch.ones(B, S, S)
    mask[1, :2] = 0
    thr_map = torch.from_numpy(rng.uniform(0.3, 0.7, (B, S, S)).astype(np.float32))
    thr_mask = torch.from_numpy((rng.uniform(size=(B, S, S)) > 0.5).astype(np.float32))
    res = {"losses": [], "parts": []}
    for _ in range(3):
        c4 = backbone["c4"](img)
        c5 = backbone["c5"](F.relu(c4))
        pred = head(neck(F.relu(c4), F.relu(c5)))
        shrink, thresh, binary = pred[:, 0], pred[:, 1], pred[:, 2]
        loss_s = balance_bce(shrink, gt, mask)
        loss_t = masked_l1(thresh, thr_map, thr_mask)
        loss_b = dice_loss(binary, gt, mask)
        loss = loss_s + 10 * loss_t + loss_b
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["parts"].append(torch.stack([loss_s, loss_t, loss_b]).detach())
    res["lr"] = sched.get_last_lr()
    res["bn"] = [head.binarize[1].running_mean, head.binarize[1].running_var]
    res["deconv_grad"] = head.thresh[7].weight.grad
    model.eval()
    with torch.no_grad():
        prob = head(neck(F.relu(c4), F.relu(c5)))
    res["eval_shape"] = list(prob.shape)
    res["text_pixels"] = [int((prob > 0.3).sum())]
    return res


class _LayerNormFunction:
    """NAFNet's LayerNorm2d forward/backward, bound to a library's autograd.Function."""

    @staticmethod
    def make(torch):
        class LayerNormFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, bias, eps):
                ctx.eps = eps
                N, C, H, W = x.size()
                mu = x.mean(1, keepdim=True)
                var = (x - mu).pow(2).mean(1, keepdim=True)
                y = (x - mu) / (var + eps).sqrt()
                ctx.save_for_backward(y, var, weight)
                y = weight.view(1, C, 1, 1) * y + bias.view(1, C, 1, 1)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                eps = ctx.eps
                N, C, H, W = grad_output.size()
                y, var, weight = ctx.saved_variables
                g = grad_output * weight.view(1, C, 1, 1)
                mean_g = g.mean(dim=1, keepdim=True)
                mean_gy = (g * y).mean(dim=1, keepdim=True)
                gx = 1. / torch.sqrt(var + eps) * (g - y * mean_gy - mean_g)
                return (gx, (grad_output * y).sum(dim=3).sum(dim=2).sum(dim=0),
                        grad_output.sum(dim=3).sum(dim=2).sum(dim=0), None)
        return LayerNormFunction


def nafnet_program(torch):
    """NAFNet blocks: LayerNorm2d as a custom autograd.Function (saved_variables), SimpleGate
    by chunk-multiply, simplified channel attention, beta/gamma residual scales, PixelShuffle
    up and strided-conv down; charbonnier loss, AdamW with cosine annealing, PSNR."""
    rng = np.random.default_rng(12)
    F = torch.nn.functional
    LayerNormFunction = _LayerNormFunction.make(torch)

    class LayerNorm2d(torch.nn.Module):
        def __init__(self, channels, eps=1e-6):
            super().__init__()
            self.register_parameter("weight", torch.nn.Parameter(torch.ones(channels)))
            self.register_parameter("bias", torch.nn.Parameter(torch.zeros(channels)))
            self.eps = eps

        def forward(self, x):
            return LayerNormFunction.apply(x, self.weight, self.bias, self.eps)

    class SimpleGate(torch.nn.Module):
        def forward(self, x):
            x1, x2 = x.chunk(2, dim=1)
            return x1 * x2

    class NAFBlock(torch.nn.Module):
        def __init__(self, c, DW_Expand=2, FFN_Expand=2):
            super().__init__()
            dw = c * DW_Expand
            self.conv1 = torch.nn.Conv2d(c, dw, 1, padding=0, stride=1, groups=1, bias=True)
            self.conv2 = torch.nn.Conv2d(dw, dw, 3, padding=1, stride=1, groups=dw, bias=True)
            self.conv3 = torch.nn.Conv2d(dw // 2, c, 1, padding=0, stride=1, groups=1, bias=True)
            self.sca = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1),
                                           torch.nn.Conv2d(dw // 2, dw // 2, 1, bias=True))
            self.sg = SimpleGate()
            ffn = FFN_Expand * c
            self.conv4 = torch.nn.Conv2d(c, ffn, 1, bias=True)
            self.conv5 = torch.nn.Conv2d(ffn // 2, c, 1, bias=True)
            self.norm1, self.norm2 = LayerNorm2d(c), LayerNorm2d(c)
            self.dropout1 = torch.nn.Identity()
            self.dropout2 = torch.nn.Identity()
            self.beta = torch.nn.Parameter(torch.zeros((1, c, 1, 1)), requires_grad=True)
            self.gamma = torch.nn.Parameter(torch.zeros((1, c, 1, 1)), requires_grad=True)

        def forward(self, inp):
            x = self.norm1(inp)
            x = self.sg(self.conv2(self.conv1(x)))
            x = x * self.sca(x)
            x = self.dropout1(self.conv3(x))
            y = inp + x * self.beta
            x = self.conv5(self.sg(self.conv4(self.norm2(y))))
            return y + self.dropout2(x) * self.gamma

    class NAFNet(torch.nn.Module):
        def __init__(self, width=4):
            super().__init__()
            self.intro = torch.nn.Conv2d(3, width, 3, padding=1)
            self.ending = torch.nn.Conv2d(width, 3, 3, padding=1)
            self.enc = NAFBlock(width)
            self.down = torch.nn.Conv2d(width, 2 * width, 2, 2)
            self.middle = torch.nn.Sequential(*[NAFBlock(2 * width) for _ in range(2)])
            self.up = torch.nn.Sequential(torch.nn.Conv2d(2 * width, 4 * width, 1, bias=False),
                                          torch.nn.PixelShuffle(2))
            self.dec = NAFBlock(width)
            self.padder_size = 2

        def check_image_size(self, x):
            _, _, h, w = x.size()
            mod_pad_h = (self.padder_size - h % self.padder_size) % self.padder_size
            mod_pad_w = (self.padder_size - w % self.padder_size) % self.padder_size
            return F.pad(x, (0, mod_pad_w, 0, mod_pad_h))

        def forward(self, inp):
            B, C, H, W = inp.shape
            inp = self.check_image_size(inp)
            x = self.intro(inp)
            e = self.enc(x)
            x = self.middle(self.down(e))
            x = self.dec(self.up(x) + e)
            x = self.ending(x) + inp
            return x[:, :, :H, :W]

    def psnr(pred, gt):
        mse = ((pred.clamp(0, 1) - gt) ** 2).mean(dim=(1, 2, 3))
        return (10 * torch.log10(1.0 / mse)).mean()

    model = NAFNet()
    fill_(torch, model, rng, 0.25)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0, betas=(0.9, 0.9))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=1e-7)
    res = {"losses": [], "psnr": []}
    for size in (6, 7, 8):  # progressive patch sizes; 7 exercises the padder
        gt = torch.from_numpy(rng.uniform(size=(2, 3, size, size)).astype(np.float32))
        lq = gt + 0.1 * normal(torch, rng, 2, 3, size, size)
        pred = model(lq)
        loss = torch.mean(torch.sqrt((pred - gt) ** 2 + 1e-3 ** 2))  # charbonnier
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)
        opt.step()
        sched.step()
        res["losses"].append(loss.item())
        res["psnr"].append(psnr(pred.detach(), gt).item())
    res["norm_w"] = model.enc.norm1.weight
    res["norm_grad"] = model.dec.norm2.bias.grad
    res["beta"] = model.middle[1].beta
    res["lr"] = sched.get_last_lr()
    # the custom Function's backward against autograd through the same maths
    x = normal(torch, rng, 2, 4, 3, 3).requires_grad_()
    w = normal(torch, rng, 4).requires_grad_()
    b = normal(torch, rng, 4).requires_grad_()
    y = LayerNormFunction.apply(x, w, b, 1e-6)
    res["fn_grads"] = list(torch.autograd.grad((y * y.detach().flip(0)).sum(), (x, w, b)))
    res["fn_node"] = [type(y.grad_fn).__name__]
    return res


def restormer_program(torch):
    """Restormer: MDTA (transposed attention over channels with F.normalize and a learned
    temperature, depthwise qkv), GDFN with depthwise convs and gelu gating, WithBias LayerNorm
    over (b, hw, c) via einops-style rearranges, PixelUnshuffle down / PixelShuffle up; SSIM
    with a gaussian window by grouped conv2d, charbonnier + (1 - SSIM), Adam."""
    rng = np.random.default_rng(13)
    F = torch.nn.functional

    def to_3d(x):
        b, c, h, w = x.shape
        return x.reshape(b, c, h * w).transpose(1, 2)

    def to_4d(x, h, w):
        b, hw, c = x.shape
        return x.transpose(1, 2).reshape(b, c, h, w)

    class WithBias_LayerNorm(torch.nn.Module):
        def __init__(self, normalized_shape):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(normalized_shape))
            self.bias = torch.nn.Parameter(torch.zeros(normalized_shape))

        def forward(self, x):
            mu = x.mean(-1, keepdim=True)
            sigma = x.var(-1, keepdim=True, unbiased=False)
            return (x - mu) / torch.sqrt(sigma + 1e-5) * self.weight + self.bias

    class LayerNorm(torch.nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.body = WithBias_LayerNorm(dim)

        def forward(self, x):
            h, w = x.shape[-2:]
            return to_4d(self.body(to_3d(x)), h, w)

    class FeedForward(torch.nn.Module):
        def __init__(self, dim, ffn_expansion_factor, bias):
            super().__init__()
            hidden = int(dim * ffn_expansion_factor)
            self.project_in = torch.nn.Conv2d(dim, hidden * 2, kernel_size=1, bias=bias)
            self.dwconv = torch.nn.Conv2d(hidden * 2, hidden * 2, kernel_size=3, stride=1,
                                          padding=1, groups=hidden * 2, bias=bias)
            self.project_out = torch.nn.Conv2d(hidden, dim, kernel_size=1, bias=bias)

        def forward(self, x):
            x = self.project_in(x)
            x1, x2 = self.dwconv(x).chunk(2, dim=1)
            x = F.gelu(x1) * x2
            return self.project_out(x)

    class Attention(torch.nn.Module):
        def __init__(self, dim, num_heads, bias):
            super().__init__()
            self.num_heads = num_heads
            self.temperature = torch.nn.Parameter(torch.ones(num_heads, 1, 1))
            self.qkv = torch.nn.Conv2d(dim, dim * 3, kernel_size=1, bias=bias)
            self.qkv_dwconv = torch.nn.Conv2d(dim * 3, dim * 3, kernel_size=3, stride=1,
                                              padding=1, groups=dim * 3, bias=bias)
            self.project_out = torch.nn.Conv2d(dim, dim, kernel_size=1, bias=bias)

        def forward(self, x):
            b, c, h, w = x.shape
            qkv = self.qkv_dwconv(self.qkv(x))
            q, k, v = qkv.chunk(3, dim=1)
            q = q.reshape(b, self.num_heads, c // self.num_heads, h * w)
            k = k.reshape(b, self.num_heads, c // self.num_heads, h * w)
            v = v.reshape(b, self.num_heads, c // self.num_heads, h * w)
            q = torch.nn.functional.normalize(q, dim=-1)
            k = torch.nn.functional.normalize(k, dim=-1)
            attn = (q @ k.transpose(-2, -1)) * self.temperature
            attn = attn.softmax(dim=-1)
            out = attn @ v
            out = out.reshape(b, c, h, w)
            return self.project_out(out)

    class TransformerBlock(torch.nn.Module):
        def __init__(self, dim, num_heads):
            super().__init__()
            self.norm1, self.attn = LayerNorm(dim), Attention(dim, num_heads, False)
            self.norm2, self.ffn = LayerNorm(dim), FeedForward(dim, 2.66, False)

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.ffn(self.norm2(x))

    class Restormer(torch.nn.Module):
        def __init__(self, dim=4):
            super().__init__()
            self.patch_embed = torch.nn.Conv2d(3, dim, 3, 1, 1, bias=False)
            self.enc = TransformerBlock(dim, 1)
            self.down = torch.nn.Sequential(torch.nn.Conv2d(dim, dim // 2, 3, 1, 1, bias=False),
                                            torch.nn.PixelUnshuffle(2))
            self.latent = TransformerBlock(dim * 2, 2)
            self.up = torch.nn.Sequential(torch.nn.Conv2d(dim * 2, dim * 4, 3, 1, 1, bias=False),
                                          torch.nn.PixelShuffle(2))
            self.reduce = torch.nn.Conv2d(dim * 2, dim, 1, bias=False)
            self.dec = TransformerBlock(dim, 1)
            self.output = torch.nn.Conv2d(dim, 3, 3, 1, 1, bias=False)

        def forward(self, inp_img):
            e = self.enc(self.patch_embed(inp_img))
            lat = self.latent(self.down(e))
            d = self.reduce(torch.cat([self.up(lat), e], 1))
            return self.output(self.dec(d)) + inp_img

    def gaussian(window_size, sigma):
        gauss = torch.Tensor([math.exp(-(x - window_size // 2) ** 2 / float(2 * sigma ** 2))
                              for x in range(window_size)])
        return gauss / gauss.sum()

    def create_window(window_size, channel):
        _1D_window = gaussian(window_size, 1.5).unsqueeze(1)
        _2D_window = _1D_window.mm(_1D_window.t()).float().unsqueeze(0).unsqueeze(0)
        return _2D_window.expand(channel, 1, window_size, window_size).contiguous()

    def ssim(img1, img2, window_size=5):
        channel = img1.size(1)
        window = create_window(window_size, channel).type_as(img1)
        pad = window_size // 2
        mu1 = F.conv2d(img1, window, padding=pad, groups=channel)
        mu2 = F.conv2d(img2, window, padding=pad, groups=channel)
        mu1_sq, mu2_sq, mu1_mu2 = mu1.pow(2), mu2.pow(2), mu1 * mu2
        sigma1_sq = F.conv2d(img1 * img1, window, padding=pad, groups=channel) - mu1_sq
        sigma2_sq = F.conv2d(img2 * img2, window, padding=pad, groups=channel) - mu2_sq
        sigma12 = F.conv2d(img1 * img2, window, padding=pad, groups=channel) - mu1_mu2
        C1, C2 = 0.01 ** 2, 0.03 ** 2
        ssim_map = ((2 * mu1_mu2 + C1) * (2 * sigma12 + C2)) / (
            (mu1_sq + mu2_sq + C1) * (sigma1_sq + sigma2_sq + C2))
        return ssim_map.mean()

    model = Restormer()
    fill_(torch, model, rng, 0.3)
    for m in model.modules():
        if isinstance(m, Attention):
            torch.nn.init.ones_(m.temperature)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4, betas=(0.9, 0.999), weight_decay=1e-4)
    res = {"losses": [], "ssim": []}
    for size in (4, 8):
        gt = torch.from_numpy(rng.uniform(size=(2, 3, size, size)).astype(np.float32))
        lq = gt + 0.1 * normal(torch, rng, 2, 3, size, size)
        pred = model(lq)
        s = ssim(pred, gt)
        charb = torch.mean(torch.sqrt((pred - gt) * (pred - gt) + 1e-6))
        loss = charb + 0.5 * (1 - s)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.item())
        res["ssim"].append(s.item())
    res["temperature"] = [model.latent.attn.temperature, model.enc.attn.temperature.grad]
    res["dw_grad"] = model.latent.ffn.dwconv.weight.grad
    res["out"] = pred
    x = normal(torch, rng, 1, 2, 4, 6)
    res["unshuffle"] = F.pixel_unshuffle(x, 2)
    res["roundtrip"] = [bool(torch.equal(F.pixel_shuffle(F.pixel_unshuffle(x, 2), 2), x))]
    return res


def aster_program(torch):
    """ASTER-style recognition: a thin-plate-spline rectifier (kernel inverse, r^2 log r with
    its NaN masked out in place, grid_sample with border padding and align_corners), a conv
    encoder, a GRUCell attention decoder with teacher forcing, cross entropy with ignore_index
    and label smoothing, and greedy decoding until an end token."""
    rng = np.random.default_rng(14)
    F = torch.nn.functional
    B, H, W, K, V, L, EOS, PAD = 2, 8, 16, 6, 7, 4, 1, 0

    def compute_partial_repr(input_points, control_points):
        N, M = input_points.size(0), control_points.size(0)
        pairwise_diff = input_points.view(N, 1, 2) - control_points.view(1, M, 2)
        pairwise_diff_square = pairwise_diff * pairwise_diff
        pairwise_dist = pairwise_diff_square[:, :, 0] + pairwise_diff_square[:, :, 1]
        repr_matrix = 0.5 * pairwise_dist * torch.log(pairwise_dist)
        mask = repr_matrix != repr_matrix
        repr_matrix.masked_fill_(mask, 0)
        return repr_matrix

    def build_output_control_points(num_control_points, margins):
        margin_x, margin_y = margins
        per_side = num_control_points // 2
        ctrl_pts_x = np.linspace(margin_x, 1.0 - margin_x, per_side)
        ctrl_pts_top = np.stack([ctrl_pts_x, np.ones(per_side) * margin_y], axis=1)
        ctrl_pts_bottom = np.stack([ctrl_pts_x, np.ones(per_side) * (1.0 - margin_y)], axis=1)
        return torch.Tensor(np.concatenate([ctrl_pts_top, ctrl_pts_bottom], axis=0))

    class TPSSpatialTransformer(torch.nn.Module):
        def __init__(self, output_image_size, num_control_points, margins):
            super().__init__()
            self.output_image_size = output_image_size
            target_control_points = build_output_control_points(num_control_points, margins)
            N = num_control_points
            forward_kernel = torch.zeros(N + 3, N + 3)
            target_control_partial_repr = compute_partial_repr(target_control_points,
                                                               target_control_points)
            forward_kernel[:N, :N].copy_(target_control_partial_repr)
            forward_kernel[:N, -3].fill_(1)
            forward_kernel[-3, :N].fill_(1)
            forward_kernel[:N, -2:].copy_(target_control_points)
            forward_kernel[-2:, :N].copy_(target_control_points.transpose(0, 1))
            inverse_kernel = torch.inverse(forward_kernel)
            HW = output_image_size[0] * output_image_size[1]
            target_coordinate = list(itertools.product(range(output_image_size[0]),
                                                       range(output_image_size[1])))
            target_coordinate = torch.Tensor(target_coordinate)
            Y, X = target_coordinate.split(1, dim=1)
            Y = Y / (output_image_size[0] - 1)
            X = X / (output_image_size[1] - 1)
            target_coordinate = torch.cat([X, Y], dim=1)
            target_coordinate_partial_repr = compute_partial_repr(target_coordinate,
                                                                  target_control_points)
            target_coordinate_repr = torch.cat(
                [target_coordinate_partial_repr, torch.ones(HW, 1), target_coordinate], dim=1)
            self.register_buffer("inverse_kernel", inverse_kernel)
            self.register_buffer("padding_matrix", torch.zeros(3, 2))
            self.register_buffer("target_coordinate_repr", target_coordinate_repr)
            self.register_buffer("target_control_points", target_control_points)

        def forward(self, input, source_control_points):
            batch_size = source_control_points.size(0)
            Y = torch.cat([source_control_points,
                           self.padding_matrix.expand(batch_size, 3, 2)], 1)
            mapping_matrix = torch.matmul(self.inverse_kernel, Y)
            source_coordinate = torch.matmul(self.target_coordinate_repr, mapping_matrix)
            grid = source_coordinate.view(-1, self.output_image_size[0],
                                          self.output_image_size[1], 2)
            grid = torch.clamp(grid, 0, 1)
            grid = 2.0 * grid - 1.0
            return F.grid_sample(input, grid, padding_mode="border", align_corners=True)

    class AttentionUnit(torch.nn.Module):
        def __init__(self, sDim, xDim, attDim):
            super().__init__()
            self.sEmbed = torch.nn.Linear(sDim, attDim)
            self.xEmbed = torch.nn.Linear(xDim, attDim)
            self.wEmbed = torch.nn.Linear(attDim, 1)

        def forward(self, x, sPrev):
            batch_size, T, _ = x.size()
            xProj = self.xEmbed(x.view(-1, x.size(2))).view(batch_size, T, -1)
            sProj = self.sEmbed(sPrev.squeeze(0)).unsqueeze(1).expand(batch_size, T, -1)
            sumTanh = torch.tanh(sProj + xProj).view(-1, xProj.size(2))
            alpha = F.softmax(self.wEmbed(sumTanh).view(batch_size, T), dim=1)
            return alpha

    class DecoderUnit(torch.nn.Module):
        def __init__(self, sDim, xDim, yDim, attDim):
            super().__init__()
            self.attention_unit = AttentionUnit(sDim, xDim, attDim)
            self.tgt_embedding = torch.nn.Embedding(yDim + 1, attDim)
            self.gru = torch.nn.GRUCell(xDim + attDim, sDim)
            self.fc = torch.nn.Linear(sDim, yDim)
            self.yDim = yDim

        def forward(self, x, sPrev, yPrev):
            alpha = self.attention_unit(x, sPrev)
            context = torch.bmm(alpha.unsqueeze(1), x).squeeze(1)
            yProj = self.tgt_embedding(yPrev.long())
            state = self.gru(torch.cat([yProj, context], 1), sPrev)
            return self.fc(state), state, alpha

    stn = TPSSpatialTransformer((H, W), K, (0.05, 0.05))
    loc = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, 2, 1), torch.nn.ReLU(True),
                              torch.nn.AdaptiveAvgPool2d((1, 2)), torch.nn.Flatten(),
                              torch.nn.Linear(8, K * 2))
    enc = torch.nn.Sequential(torch.nn.Conv2d(1, 6, 3, (2, 1), 1), torch.nn.BatchNorm2d(6),
                              torch.nn.ReLU(inplace=True), torch.nn.Conv2d(6, 8, (4, 1)))
    dec = DecoderUnit(8, 8, V, 6)
    model = torch.nn.ModuleList([loc, enc, dec])
    fill_(torch, model, rng, 0.3)
    with torch.no_grad():
        loc[-1].weight.mul_(0.1)
        loc[-1].bias.copy_(stn.target_control_points.view(-1))
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0, weight_decay=1e-5)
    img = normal(torch, rng, B, 1, H, W)
    rec_targets = torch.tensor([[3, 4, 2, EOS], [5, EOS, PAD, PAD]])
    res = {"losses": []}
    for _ in range(2):
        ctrl = torch.sigmoid(loc(img)).view(B, K, 2)
        x = stn(img, ctrl)
        feats = enc(x).squeeze(2).transpose(1, 2).contiguous()
        state = torch.zeros(B, 8)
        outputs = []
        for i in range(L):
            y_prev = torch.zeros((B,)).fill_(V) if i == 0 else rec_targets[:, i - 1]
            output, state, _ = dec(feats, state, y_prev)
            outputs.append(output)
        outputs = torch.cat([_.unsqueeze(1) for _ in outputs], 1)
        loss = F.cross_entropy(outputs.reshape(-1, V), rec_targets.reshape(-1),
                               ignore_index=PAD, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        res["losses"].append(loss.item())
    res["rectified"], res["ctrl"] = x, ctrl
    res["kernel"] = stn.inverse_kernel
    res["loc_grad"] = loc[-1].weight.grad
    model.eval()
    with torch.no_grad():
        feats = enc(stn(img, torch.sigmoid(loc(img)).view(B, K, 2))).squeeze(2).transpose(1, 2)
        feats = feats.contiguous()
        state, y_prev, preds = torch.zeros(B, 8), torch.zeros((B,)).fill_(V), []
        for i in range(L):
            output, state, alpha = dec(feats, state, y_prev)
            output = F.softmax(output, dim=1)
            score, predicted = output.max(1)
            y_prev = predicted
            preds.append(predicted)
        preds = torch.stack(preds, 1)
    res["preds"], res["alpha"] = preds, alpha
    return res


PROGRAMS = [crnn_ctc_program, dbnet_program, nafnet_program, restormer_program,
            aster_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # outputs reach 8 and are sums of conv terms of that size: float32 accumulation order
        # leaves 4e-6 absolute on small entries
        "restormer_program": (1e-5, 1e-5),
        # the float32 inverse of the TPS kernel (entries to 3.7) differs by 1e-6 between
        # LAPACK builds; the sampling grid and the rectified image inherit it
        "aster_program": (1e-5, 1e-5),
    })
