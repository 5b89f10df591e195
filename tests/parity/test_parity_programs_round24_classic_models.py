"""Classic research models written as their papers' reference code writes them in torch, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights and data:
neural style transfer (a frozen conv feature extractor, Gram matrices, total variation, the
image optimised by LBFGS with a strong-Wolfe line search), CycleGAN / pix2pix (reflection
padding, instance norms, transposed convs with output_padding, spectral-normed PatchGAN
discriminators, LSGAN losses, an image pool, itertools.chain optimisers, LambdaLR decay),
capsule networks (squash, dynamic routing with detached predictions, margin loss, a masked
reconstruction decoder); few-shot learning and the Neural Turing Machine are in
test_parity_programs_round24_classic_models_memory.py.
What they found is pinned in test_parity_programs_round24_classic_models_fixes.py."""

import itertools

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


# --------------------------------------------------------------------------- style transfer

def style_transfer_program(torch):
    """Gatys et al.: content and style losses on a frozen feature extractor, total variation,
    the input image as the only parameter, LBFGS with strong Wolfe and clamping between steps."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(240)
    res = {}

    class Normalization(nn.Module):
        def __init__(self, mean, std):
            super().__init__()
            self.mean = torch.tensor(mean).view(-1, 1, 1)
            self.std = torch.tensor(std).view(-1, 1, 1)

        def forward(self, img):
            return (img - self.mean) / self.std

    def gram_matrix(x):
        b, c, h, w = x.size()
        features = x.view(b * c, h * w)
        G = torch.mm(features, features.t())
        return G.div(b * c * h * w)

    def gram_bmm(x):
        b, c, h, w = x.shape
        f = x.view(b, c, h * w)
        return torch.bmm(f, f.transpose(1, 2)) / (c * h * w)

    class ContentLoss(nn.Module):
        def __init__(self, target):
            super().__init__()
            self.target = target.detach()

        def forward(self, x):
            self.loss = F.mse_loss(x, self.target)
            return x

    class StyleLoss(nn.Module):
        def __init__(self, target_feature):
            super().__init__()
            self.target = gram_matrix(target_feature).detach()

        def forward(self, x):
            self.loss = F.mse_loss(gram_matrix(x), self.target)
            return x

    features = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=False),
        nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=False),
        nn.MaxPool2d(2, 2),
        nn.Conv2d(8, 12, 3, padding=1), nn.ReLU(inplace=False),
        nn.AvgPool2d(2),
        nn.Conv2d(12, 12, 3, padding=1), nn.ReLU(inplace=False))
    fill_(torch, features, rng, 0.3)
    features = features.eval()
    features.requires_grad_(False)
    res["frozen"] = [all(not p.requires_grad for p in features.parameters())]

    content_img = torch.from_numpy(rng.uniform(0, 1, (1, 3, 16, 16)).astype(np.float32))
    # the style image arrives at another size: resized as torchvision's Resize does
    style_big = torch.from_numpy(rng.uniform(0, 1, (1, 3, 27, 21)).astype(np.float32))
    style_img = F.interpolate(style_big, size=(16, 16), mode="bilinear", align_corners=False,
                              antialias=True)
    res["style_resized"] = style_img
    res["style_bicubic"] = F.interpolate(style_big, scale_factor=0.5, mode="bicubic",
                                         antialias=True, recompute_scale_factor=True)

    # build the model the tutorial's way: walk the children, rename, insert loss modules
    norm = Normalization([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    model = nn.Sequential(norm)
    content_losses, style_losses = [], []
    content_layers, style_layers = ["conv_3"], ["conv_1", "conv_2", "conv_3", "conv_4"]
    i = 0
    for layer in features.children():
        if isinstance(layer, nn.Conv2d):
            i += 1
            name = f"conv_{i}"
        elif isinstance(layer, nn.ReLU):
            name = f"relu_{i}"
            layer = nn.ReLU(inplace=False)
        elif isinstance(layer, (nn.MaxPool2d, nn.AvgPool2d)):
            name = f"pool_{i}"
        model.add_module(name, layer)
        if name in content_layers:
            target = model(content_img).detach()
            content_loss = ContentLoss(target)
            model.add_module(f"content_loss_{i}", content_loss)
            content_losses.append(content_loss)
        if name in style_layers:
            target_feature = model(style_img).detach()
            style_loss = StyleLoss(target_feature)
            model.add_module(f"style_loss_{i}", style_loss)
            style_losses.append(style_loss)
    res["module_names"] = [n for n, _ in model.named_children()]
    res["gram_bmm_matches"] = [bool(torch.allclose(
        gram_bmm(features[:2](style_img)), gram_matrix(features[:2](style_img)), atol=1e-6))]

    def tv_loss(img):
        dh = img[:, :, 1:, :] - img[:, :, :-1, :]
        dw = img[:, :, :, 1:] - img[:, :, :, :-1]
        return dh.abs().sum() + dw.abs().sum()

    input_img = content_img.clone()
    input_img.requires_grad_(True)
    model.eval()
    model.requires_grad_(False)
    optimizer = torch.optim.LBFGS([input_img], lr=1, max_iter=4, history_size=5,
                                  line_search_fn="strong_wolfe")
    res["closure_losses"] = []
    style_weight, content_weight, tv_weight = 1e4, 1.0, 1e-3
    for _ in range(3):
        def closure():
            with torch.no_grad():
                input_img.clamp_(0, 1)
            optimizer.zero_grad()
            model(input_img)
            style_score = sum(sl.loss for sl in style_losses) * style_weight
            content_score = sum(cl.loss for cl in content_losses) * content_weight
            loss = style_score + content_score + tv_weight * tv_loss(input_img)
            loss.backward()
            res["closure_losses"].append(loss.item())
            return loss
        out = optimizer.step(closure)
        res.setdefault("step_returns", []).append(out.item())
    with torch.no_grad():
        input_img.clamp_(0, 1)
    res["image"] = input_img.detach()
    # saved the way the examples save it: to uint8 HWC
    as_uint8 = input_img.detach().squeeze(0).mul(255).add_(0.5).clamp_(0, 255).permute(
        1, 2, 0).to("cpu", torch.uint8)
    res["uint8"] = as_uint8
    res["uint8_meta"] = [_name(as_uint8.dtype), as_uint8.is_contiguous()]
    state = optimizer.state[optimizer.param_groups[0]["params"][0]]
    res["lbfgs_state"] = [int(state["func_evals"]), int(state["n_iter"]),
                          len(state["old_dirs"])]
    res["lbfgs_t"] = [type(state["t"]).__name__, float(state["t"])]
    res["image_grad_norm"] = input_img.grad.norm()
    res["feature_grads_none"] = [all(p.grad is None for p in features.parameters())]

    # a second variant: Adam on a pixel tensor initialised from noise, with normalised Gram
    # matrices over a batch of two images, and the style loss as a weighted sum over layers
    gen = torch.Generator().manual_seed(0)
    noise = torch.rand(2, 3, 16, 16, generator=gen)
    res["noise_shape"] = list(noise.shape)
    pixels = torch.from_numpy(rng.uniform(0, 1, (2, 3, 16, 16)).astype(np.float32))
    pixels = nn.Parameter(pixels)
    style_targets = []
    layers = [1, 3, 6, 9]
    with torch.no_grad():
        h = norm(torch.cat([style_img, style_img.flip(-1)]))
        for j, layer in enumerate(features):
            h = layer(h)
            if j in layers:
                style_targets.append(gram_bmm(h))
    opt = torch.optim.Adam([pixels], lr=0.05)
    res["adam_losses"] = []
    for _ in range(3):
        h = norm(pixels)
        loss = 0.0
        k = 0
        for j, layer in enumerate(features):
            h = layer(h)
            if j in layers:
                loss = loss + F.mse_loss(gram_bmm(h), style_targets[k], reduction="sum") / len(
                    layers)
                k += 1
        loss = loss + 1e-2 * (torch.diff(pixels, dim=2).pow(2).mean()
                              + torch.diff(pixels, dim=3).pow(2).mean())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        pixels.data.clamp_(0, 1)
        res["adam_losses"].append(loss.item())
    res["pixels"] = pixels.detach()
    return res


# --------------------------------------------------------------------------- CycleGAN

def cyclegan_program(torch):
    """CycleGAN / pix2pix as the reference implementation writes them: ResNet generators with
    reflection padding and instance norms, PatchGAN discriminators with spectral norm, LSGAN,
    cycle and identity L1 losses, an image pool, chained generator optimisers, LambdaLR."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(242)
    res = {}

    class ResnetBlock(nn.Module):
        def __init__(self, dim, norm_layer):
            super().__init__()
            self.conv_block = nn.Sequential(
                nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, padding=0, bias=False),
                norm_layer(dim), nn.ReLU(True), nn.Dropout(0.0),
                nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, padding=0, bias=False),
                norm_layer(dim))

        def forward(self, x):
            return x + self.conv_block(x)

    # the reference sets use_bias = (norm_layer == InstanceNorm2d); here the convolutions
    # before a norm have no bias: its gradient is zero but for rounding, which Adam would
    # turn into full-size steps of either sign (and tracked running means would carry them)
    def resnet_generator(norm_layer, ngf=4, n_blocks=1, use_bias=False):
        model = [nn.ReflectionPad2d(3), nn.Conv2d(3, ngf, kernel_size=7, padding=0,
                                                  bias=use_bias),
                 norm_layer(ngf), nn.ReLU(True)]
        for i in range(2):
            mult = 2 ** i
            model += [nn.Conv2d(ngf * mult, ngf * mult * 2, kernel_size=3, stride=2, padding=1,
                                bias=use_bias),
                      norm_layer(ngf * mult * 2), nn.ReLU(True)]
        for _ in range(n_blocks):
            model += [ResnetBlock(ngf * 4, norm_layer)]
        for i in range(2):
            mult = 2 ** (2 - i)
            model += [nn.ConvTranspose2d(ngf * mult, ngf * mult // 2, kernel_size=3, stride=2,
                                         padding=1, output_padding=1, bias=use_bias),
                      norm_layer(ngf * mult // 2), nn.ReLU(True)]
        model += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, 3, kernel_size=7, padding=0), nn.Tanh()]
        return nn.Sequential(*model)

    def patch_discriminator(sn, ndf=4):
        return nn.Sequential(
            sn(nn.Conv2d(3, ndf, 4, stride=2, padding=1)), nn.LeakyReLU(0.2, True),
            sn(nn.Conv2d(ndf, ndf * 2, 4, stride=2, padding=1, bias=False)),
            nn.InstanceNorm2d(ndf * 2, affine=True), nn.LeakyReLU(0.2, True),
            sn(nn.Conv2d(ndf * 2, 1, 3, stride=1, padding=1)))

    def plain_norm(c):
        return nn.InstanceNorm2d(c, affine=False, track_running_stats=False)

    def tracked_norm(c):
        return nn.InstanceNorm2d(c, affine=True, track_running_stats=True, momentum=0.2)

    netG_A = resnet_generator(plain_norm)
    netG_B = resnet_generator(tracked_norm)
    netD_A = patch_discriminator(nn.utils.spectral_norm)
    netD_B = patch_discriminator(nn.utils.parametrizations.spectral_norm)
    # init_weights("normal") of the reference: convolutions drawn, norms left at weight 1 and
    # bias 0 (a drawn norm bias can keep a channel's ReLU open everywhere, and the next
    # norm then cancels its gradient exactly: Adam would step on rounding noise)
    for net in (netG_A, netG_B, netD_A, netD_B):
        fill_(torch, [p for n, p in net.named_parameters() if p.dim() > 1], rng, 0.2)
        fill_(torch, [p for n, p in net.named_parameters() if p.dim() == 1 and "bias" in n
                      and not isinstance(net.get_submodule(n.rsplit(".", 1)[0]),
                                         nn.InstanceNorm2d)], rng, 0.05)
    res["param_counts"] = [sum(p.numel() for p in n.parameters())
                           for n in (netG_A, netG_B, netD_A, netD_B)]
    res["sn_names"] = [sorted(n for n, _ in netD_A[0].named_parameters()),
                       sorted(n for n, _ in netD_B[0].named_parameters()),
                       sorted(n for n, _ in netD_A[0].named_buffers()),
                       sorted(n for n, _ in netD_B[0].named_buffers())]
    res["sn_names"] = [" ".join(x) for x in res["sn_names"]]
    res["sd_keys"] = sorted(netD_B.state_dict().keys()) + sorted(netG_B.state_dict().keys())
    # spectral norm's power-iteration vectors start random: give both libraries the same ones
    with torch.no_grad():
        for m in netD_A.modules():
            if hasattr(m, "weight_u"):
                m.weight_u.copy_(F.normalize(normal(torch, rng, *m.weight_u.shape), dim=0))
                m.weight_v.copy_(F.normalize(normal(torch, rng, *m.weight_v.shape), dim=0))
        for m in netD_B.modules():
            if hasattr(m, "parametrizations"):
                sn = m.parametrizations.weight[0]
                sn._u.copy_(F.normalize(normal(torch, rng, *sn._u.shape), dim=0))
                sn._v.copy_(F.normalize(normal(torch, rng, *sn._v.shape), dim=0))

    class ImagePool:
        def __init__(self, pool_size, rng):
            self.pool_size, self.rng = pool_size, rng
            self.num_imgs, self.images = 0, []

        def query(self, images):
            return_images = []
            for image in images:
                image = torch.unsqueeze(image.data, 0)
                if self.num_imgs < self.pool_size:
                    self.num_imgs += 1
                    self.images.append(image)
                    return_images.append(image)
                elif self.rng.uniform(0, 1) > 0.5:
                    random_id = int(self.rng.integers(0, self.pool_size))
                    tmp = self.images[random_id].clone()
                    self.images[random_id] = image
                    return_images.append(tmp)
                else:
                    return_images.append(image)
            return torch.cat(return_images, 0)

    def set_requires_grad(nets, requires_grad=False):
        if not isinstance(nets, list):
            nets = [nets]
        for net in nets:
            if net is not None:
                for param in net.parameters():
                    param.requires_grad = requires_grad

    class GANLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("real_label", torch.tensor(1.0))
            self.register_buffer("fake_label", torch.tensor(0.0))
            self.loss = nn.MSELoss()

        def forward(self, prediction, target_is_real):
            target = self.real_label if target_is_real else self.fake_label
            return self.loss(prediction, target.expand_as(prediction))

    criterionGAN, criterionCycle, criterionIdt = GANLoss(), nn.L1Loss(), torch.nn.L1Loss()
    optimizer_G = torch.optim.Adam(itertools.chain(netG_A.parameters(), netG_B.parameters()),
                                   lr=2e-3, betas=(0.5, 0.999))
    optimizer_D = torch.optim.Adam(itertools.chain(netD_A.parameters(), netD_B.parameters()),
                                   lr=2e-3, betas=(0.5, 0.999))
    n_epochs, n_epochs_decay, epoch_count = 2, 3, 1

    def lambda_rule(epoch):
        return 1.0 - max(0, epoch + epoch_count - n_epochs) / float(n_epochs_decay + 1)
    schedulers = [torch.optim.lr_scheduler.LambdaLR(o, lr_lambda=lambda_rule)
                  for o in (optimizer_G, optimizer_D)]
    pool_A, pool_B = ImagePool(3, np.random.default_rng(5)), ImagePool(3,
                                                                       np.random.default_rng(6))
    real_A_all = torch.tanh(normal(torch, rng, 5, 2, 3, 16, 16))
    real_B_all = torch.tanh(normal(torch, rng, 5, 2, 3, 16, 16))
    lambda_A, lambda_B, lambda_idt = 10.0, 10.0, 0.5
    for key in ("G", "D_A", "D_B", "cycle", "idt", "lr"):
        res[key] = []
    for step in range(5):
        real_A, real_B = real_A_all[step], real_B_all[step]
        fake_B = netG_A(real_A)
        rec_A = netG_B(fake_B)
        fake_A = netG_B(real_B)
        rec_B = netG_A(fake_A)
        # generators
        set_requires_grad([netD_A, netD_B], False)
        optimizer_G.zero_grad()
        idt_A = netG_A(real_B)
        loss_idt_A = criterionIdt(idt_A, real_B) * lambda_B * lambda_idt
        idt_B = netG_B(real_A)
        loss_idt_B = criterionIdt(idt_B, real_A) * lambda_A * lambda_idt
        loss_G_A = criterionGAN(netD_A(fake_B), True)
        loss_G_B = criterionGAN(netD_B(fake_A), True)
        loss_cycle = criterionCycle(rec_A, real_A) * lambda_A + \
            criterionCycle(rec_B, real_B) * lambda_B
        loss_G = loss_G_A + loss_G_B + loss_cycle + loss_idt_A + loss_idt_B
        loss_G.backward()
        optimizer_G.step()
        # discriminators, on pooled fakes
        set_requires_grad([netD_A, netD_B], True)
        optimizer_D.zero_grad()

        def backward_D_basic(netD, real, fake):
            loss_D_real = criterionGAN(netD(real), True)
            loss_D_fake = criterionGAN(netD(fake.detach()), False)
            loss_D = (loss_D_real + loss_D_fake) * 0.5
            loss_D.backward()
            return loss_D
        loss_D_A = backward_D_basic(netD_A, real_B, pool_B.query(fake_B))
        loss_D_B = backward_D_basic(netD_B, real_A, pool_A.query(fake_A))
        optimizer_D.step()
        for s in schedulers:
            s.step()
        res["G"].append(loss_G.item())
        res["D_A"].append(loss_D_A.item())
        res["D_B"].append(loss_D_B.item())
        res["cycle"].append(loss_cycle.item())
        res["idt"].append((loss_idt_A + loss_idt_B).item())
        res["lr"].append(optimizer_G.param_groups[0]["lr"])
    res["G_A_params"] = [p.detach() for p in netG_A.parameters()]
    res["G_B_state"] = [v for _, v in sorted(netG_B.state_dict().items())
                        if v.is_floating_point()]
    res["D_A_state"] = [v for _, v in sorted(netD_A.state_dict().items())]
    res["D_B_state"] = [v for _, v in sorted(netD_B.state_dict().items())]
    res["tracked_batches"] = [int(netG_B[2].num_batches_tracked)]
    res["fake_range"] = [bool(fake_B.abs().max() <= 1)]

    # pix2pix: a U-Net-ish encoder/decoder with skip concatenation, eval-mode inference
    # (tracked instance norms now use their running statistics) and a conditional D on cat
    netG_B.eval()
    netD_B.eval()
    with torch.no_grad():
        out_eval = netG_B(real_A_all[0])
        cond = netD_B(torch.cat([real_A_all[0][:, :1].expand(-1, 3, -1, -1)], 1))
    res["eval_out"] = out_eval
    res["eval_D"] = cond
    res["eval_sigma_u"] = netD_B[0].parametrizations.weight[0]._u
    down = nn.Sequential(nn.Conv2d(6, 4, 4, 2, 1), nn.LeakyReLU(0.2))
    up = nn.Sequential(nn.ReLU(), nn.ConvTranspose2d(4, 3, 4, 2, 1), nn.Tanh())
    fill_(torch, down, rng, 0.2)
    fill_(torch, up, rng, 0.2)
    x = torch.cat([real_A_all[1], real_B_all[1]], dim=1)
    y = up(down(x))
    l1 = F.l1_loss(y, real_B_all[1]) * 100 + F.mse_loss(
        netD_A(y), torch.ones_like(netD_A(y)))
    l1.backward()
    res["pix2pix"] = [l1.detach(), down[0].weight.grad, up[1].weight.grad]
    return res


# --------------------------------------------------------------------------- capsule network

def capsule_program(torch):
    """Sabour et al.'s CapsNet: primary capsules from a conv, squash, dynamic routing by
    agreement with detached predictions in all but the last iteration, margin loss and a
    reconstruction decoder fed the capsule picked by the label (training) or argmax (test)."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(242)
    res = {}

    def squash(s, dim=-1, eps=1e-8):
        squared_norm = (s ** 2).sum(dim=dim, keepdim=True)
        scale = squared_norm / (1 + squared_norm)
        return scale * s / torch.sqrt(squared_norm + eps)

    def squash_norm(s, dim=-1):
        norm = torch.linalg.vector_norm(s, dim=dim, keepdim=True)
        return (norm ** 2 / (1 + norm ** 2)) * (s / norm.clamp_min(1e-8))

    class PrimaryCaps(nn.Module):
        def __init__(self, in_ch, caps, dim, k, stride):
            super().__init__()
            self.dim = dim
            self.conv = nn.Conv2d(in_ch, caps * dim, k, stride=stride)

        def forward(self, x):
            out = self.conv(x)                                  # (B, caps*dim, H, W)
            b, _, h, w = out.shape
            out = out.view(b, -1, self.dim, h, w).permute(0, 1, 3, 4, 2).contiguous()
            return squash(out.view(b, -1, self.dim))            # (B, N_in, dim)

    class DigitCaps(nn.Module):
        def __init__(self, n_in, in_dim, n_out, out_dim, iters):
            super().__init__()
            self.iters = iters
            self.W = nn.Parameter(0.1 * torch.randn(1, n_in, n_out, out_dim, in_dim))

        def forward(self, u):
            b = u.size(0)
            u = u[:, :, None, :, None]                           # (B, N_in, 1, in_dim, 1)
            u_hat = torch.matmul(self.W, u).squeeze(-1)         # (B, N_in, N_out, out_dim)
            u_hat_detached = u_hat.detach()
            logits = torch.zeros(b, u_hat.size(1), u_hat.size(2), device=u.device)
            for i in range(self.iters):
                c = F.softmax(logits, dim=2)                    # couple over output capsules
                if i == self.iters - 1:
                    s = (c.unsqueeze(-1) * u_hat).sum(dim=1)
                    v = squash(s)
                else:
                    s = torch.einsum("bij,bijd->bjd", c, u_hat_detached)
                    v = squash(s)
                    logits = logits + torch.einsum("bijd,bjd->bij", u_hat_detached, v)
            self.last_c = c
            return v

    class Decoder(nn.Module):
        def __init__(self, n_caps, dim, out):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(n_caps * dim, 32), nn.ReLU(inplace=True),
                                     nn.Linear(32, 48), nn.ReLU(inplace=True),
                                     nn.Linear(48, out), nn.Sigmoid())

        def forward(self, v, y=None):
            lengths = v.norm(dim=-1)
            if y is None:
                y = lengths.argmax(dim=1)
            mask = F.one_hot(y, num_classes=v.size(1)).type_as(v)
            return self.net((v * mask.unsqueeze(2)).flatten(1)), y

    class CapsNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, kernel_size=5, stride=1)
            self.primary = PrimaryCaps(8, 4, 4, 5, 2)
            self.digits = DigitCaps(4 * 3 * 3, 4, 5, 6, iters=3)
            self.decoder = Decoder(5, 6, 14 * 14)

        def forward(self, x, y=None):
            v = self.digits(self.primary(F.relu(self.conv1(x))))
            recon, pred = self.decoder(v, y)
            return v, recon, pred

    model = CapsNet()
    fill_(torch, model, rng, 0.2)
    res["W_shape"] = list(model.digits.W.shape)

    def margin_loss(v, target, m_pos=0.9, m_neg=0.1, lam=0.5):
        lengths = torch.sqrt((v ** 2).sum(dim=-1))
        t = F.one_hot(target, v.size(1)).float()
        left = F.relu(m_pos - lengths).pow(2)
        right = F.relu(lengths - m_neg).pow(2)
        return (t * left + lam * (1.0 - t) * right).sum(dim=1).mean()

    images = torch.from_numpy(rng.uniform(0, 1, (6, 4, 1, 14, 14)).astype(np.float32))
    labels = torch.from_numpy(rng.integers(0, 5, (6, 4)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.96)
    res["loss"], res["margin"], res["recon"], res["acc"] = [], [], [], []
    for step in range(6):
        x, y = images[step], labels[step]
        v, recon, _ = model(x, y)
        m = margin_loss(v, y)
        r = F.mse_loss(recon, x.view(x.size(0), -1), reduction="sum") / x.size(0)
        loss = m + 0.0005 * r
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
        res["margin"].append(m.item())
        res["recon"].append(r.item())
        res["acc"].append((v.norm(dim=-1).argmax(1) == y).sum().item())
    res["coupling"] = model.digits.last_c
    res["coupling_sums"] = model.digits.last_c.sum(-1)
    res["params"] = [p.detach() for p in model.parameters()]
    res["W_grad"] = model.digits.W.grad

    # inference: argmax-masked reconstruction, index_select of the winning capsules
    model.eval()
    with torch.no_grad():
        v, recon, pred = model(images[0])
        winners = torch.stack([v[i].index_select(0, pred[i:i + 1]).squeeze(0)
                               for i in range(v.size(0))])
        res["pred"] = pred
        res["winners"] = winners
        res["recon_eval"] = recon
        res["gathered"] = v.gather(1, pred.view(-1, 1, 1).expand(-1, 1, v.size(-1))).squeeze(1)
    res["squash_forms"] = [squash(v), squash_norm(v)]
    # the routing coefficients' gradient through a differentiable last iteration only
    x = images[1][:2].clone().requires_grad_(True)
    v, _, _ = model(x)
    g, = torch.autograd.grad(v.norm(dim=-1).sum(), x)
    res["input_grad"] = g

    # the older style (gram-ai/capsule-networks): Variable, W tiled with torch.cat, one-hot
    # rows of torch.eye picked by index_select, softmax with the implicit dim, stacked
    # primary capsules from a ModuleList of convs
    Variable = torch.autograd.Variable
    convs = nn.ModuleList([nn.Conv2d(8, 4, 5, stride=2) for _ in range(3)])
    fill_(torch, convs, rng, 0.2)
    W = nn.Parameter(normal(torch, rng, 1, 36, 5, 6, 3) * 0.2)
    x = Variable(images[2])
    feats = F.relu(model.conv1(x))
    u = torch.stack([c(feats) for c in convs], dim=1).view(x.size(0), 3, -1).transpose(1, 2)
    u = squash(u)                                               # (B, 36, 3)
    xb = torch.stack([u] * 5, dim=2).unsqueeze(4)               # (B, 36, 5, 3, 1)
    Wb = torch.cat([W] * x.size(0), dim=0)
    u_hat = torch.matmul(Wb, xb)                                # (B, 36, 5, 6, 1)
    b_ij = Variable(torch.zeros(1, 36, 5, 1))
    for iteration in range(3):
        c_ij = F.softmax(b_ij.squeeze(3).transpose(1, 2)).transpose(1, 2).unsqueeze(3)
        c_ij = torch.cat([c_ij] * x.size(0), dim=0).unsqueeze(4)
        s_j = (c_ij * u_hat).sum(dim=1, keepdim=True)
        v_j = squash(s_j, dim=3)
        if iteration < 2:
            a_ij = torch.matmul(u_hat.transpose(3, 4), torch.cat([v_j] * 36, dim=1))
            b_ij = b_ij + a_ij.squeeze(4).mean(dim=0, keepdim=True)
    v_j = v_j.squeeze(1).squeeze(-1)                            # (B, 5, 6)
    target = torch.sparse.torch.eye(5).index_select(dim=0, index=labels[2])
    lengths = torch.sqrt((v_j ** 2).sum(dim=2))
    left = F.relu(0.9 - lengths).view(x.size(0), -1) ** 2
    right = F.relu(lengths - 0.1).view(x.size(0), -1) ** 2
    loss = (target * left + 0.5 * (1.0 - target) * right).sum(dim=1).mean()
    res["old_style_loss_is_margin"] = [bool(torch.allclose(loss, margin_loss(v_j, labels[2])))]
    loss.backward()
    res["old_style"] = [v_j.detach(), b_ij.detach(), W.grad, convs[1].weight.grad]
    res["old_style_meta"] = [type(x).__name__, x.requires_grad, _name(target.dtype)]
    return res


PROGRAMS = [style_transfer_program, cyclegan_program, capsule_program]

# CycleGAN's Adam steps carry float32 rounding (1e-5 of the gradients) into the parameters
# (2e-6 after five steps); eval mode then normalises with the running statistics those
# parameters produced, 20 layers deep: its outputs differ by up to 2.5e-5.
TOLERANCES = {"cyclegan_program": (1e-5, 5e-5)}


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
