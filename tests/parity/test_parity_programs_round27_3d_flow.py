"""Optical flow and stereo programs written as their reference repositories write them in
torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy data: RAFT
(all-pairs correlation by matmul, an avg_pool2d pyramid, lookup by grid_sample with
align_corners=True around ``meshgrid`` offsets, a separable ConvGRU iterated with the flow
detached between iterations, convex upsampling with unfold + softmax, the gamma-weighted
sequence loss, AdamW + OneCycleLR + a disabled GradScaler + clip_grad_norm_), stereo cost
volumes (PSMNet's concatenation volume filled by slices, GwcNet's group-wise correlation,
F.upsample trilinear, an implicit-dim softmax, disparity regression, smooth_l1_loss with
size_average) and FlowNet / PWC-Net (a shifted-product cost volume, backward warping through
an in-place normalised grid, multiscale EPE with sparse max pooling). Part of the round-27 3-D
programs (see _3d); super-resolution is in _3d_restoration."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def raft_program(torch):
    """princeton-vl/RAFT, small: CorrBlock, bilinear_sampler, coords_grid, SepConvGRU,
    the motion encoder, convex upsampling and sequence_loss, trained two steps."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2711)

    def bilinear_sampler(img, coords, mode="bilinear", mask=False):
        H, W = img.shape[-2:]
        xgrid, ygrid = coords.split([1, 1], dim=-1)
        xgrid = 2 * xgrid / (W - 1) - 1
        ygrid = 2 * ygrid / (H - 1) - 1
        grid = torch.cat([xgrid, ygrid], dim=-1)
        img = F.grid_sample(img, grid, align_corners=True)
        if mask:
            mask = (xgrid > -1) & (ygrid > -1) & (xgrid < 1) & (ygrid < 1)
            return img, mask.float()
        return img

    def coords_grid(batch, ht, wd, device):
        coords = torch.meshgrid(torch.arange(ht, device=device), torch.arange(wd, device=device))
        coords = torch.stack(coords[::-1], dim=0).float()
        return coords[None].repeat(batch, 1, 1, 1)

    class CorrBlock:
        def __init__(self, fmap1, fmap2, num_levels=2, radius=1):
            self.num_levels = num_levels
            self.radius = radius
            self.corr_pyramid = []
            corr = CorrBlock.corr(fmap1, fmap2)
            batch, h1, w1, dim, h2, w2 = corr.shape
            corr = corr.reshape(batch * h1 * w1, dim, h2, w2)
            self.corr_pyramid.append(corr)
            for i in range(self.num_levels - 1):
                corr = F.avg_pool2d(corr, 2, stride=2)
                self.corr_pyramid.append(corr)

        def __call__(self, coords):
            r = self.radius
            coords = coords.permute(0, 2, 3, 1)
            batch, h1, w1, _ = coords.shape
            out_pyramid = []
            for i in range(self.num_levels):
                corr = self.corr_pyramid[i]
                dx = torch.linspace(-r, r, 2 * r + 1, device=coords.device)
                dy = torch.linspace(-r, r, 2 * r + 1, device=coords.device)
                delta = torch.stack(torch.meshgrid(dy, dx), axis=-1)
                centroid_lvl = coords.reshape(batch * h1 * w1, 1, 1, 2) / 2 ** i
                delta_lvl = delta.view(1, 2 * r + 1, 2 * r + 1, 2)
                coords_lvl = centroid_lvl + delta_lvl
                corr = bilinear_sampler(corr, coords_lvl)
                corr = corr.view(batch, h1, w1, -1)
                out_pyramid.append(corr)
            out = torch.cat(out_pyramid, dim=-1)
            return out.permute(0, 3, 1, 2).contiguous().float()

        @staticmethod
        def corr(fmap1, fmap2):
            batch, dim, ht, wd = fmap1.shape
            fmap1 = fmap1.view(batch, dim, ht * wd)
            fmap2 = fmap2.view(batch, dim, ht * wd)
            corr = torch.matmul(fmap1.transpose(1, 2), fmap2)
            corr = corr.view(batch, ht, wd, 1, ht, wd)
            return corr / torch.sqrt(torch.tensor(dim).float())

    class SepConvGRU(nn.Module):
        def __init__(self, hidden_dim=8, input_dim=12):
            super().__init__()
            self.convz1 = nn.Conv2d(hidden_dim + input_dim, hidden_dim, (1, 5), padding=(0, 2))
            self.convr1 = nn.Conv2d(hidden_dim + input_dim, hidden_dim, (1, 5), padding=(0, 2))
            self.convq1 = nn.Conv2d(hidden_dim + input_dim, hidden_dim, (1, 5), padding=(0, 2))
            self.convz2 = nn.Conv2d(hidden_dim + input_dim, hidden_dim, (5, 1), padding=(2, 0))
            self.convr2 = nn.Conv2d(hidden_dim + input_dim, hidden_dim, (5, 1), padding=(2, 0))
            self.convq2 = nn.Conv2d(hidden_dim + input_dim, hidden_dim, (5, 1), padding=(2, 0))

        def forward(self, h, x):
            hx = torch.cat([h, x], dim=1)
            z = torch.sigmoid(self.convz1(hx))
            r = torch.sigmoid(self.convr1(hx))
            q = torch.tanh(self.convq1(torch.cat([r * h, x], dim=1)))
            h = (1 - z) * h + z * q
            hx = torch.cat([h, x], dim=1)
            z = torch.sigmoid(self.convz2(hx))
            r = torch.sigmoid(self.convr2(hx))
            q = torch.tanh(self.convq2(torch.cat([r * h, x], dim=1)))
            h = (1 - z) * h + z * q
            return h

    class BasicMotionEncoder(nn.Module):
        def __init__(self, cor_planes):
            super().__init__()
            self.convc1 = nn.Conv2d(cor_planes, 6, 1, padding=0)
            self.convf1 = nn.Conv2d(2, 4, 7, padding=3)
            self.convf2 = nn.Conv2d(4, 4, 3, padding=1)
            self.conv = nn.Conv2d(6 + 4, 8 - 2, 3, padding=1)

        def forward(self, flow, corr):
            cor = F.relu(self.convc1(corr))
            flo = F.relu(self.convf1(flow))
            flo = F.relu(self.convf2(flo))
            cor_flo = torch.cat([cor, flo], dim=1)
            out = F.relu(self.conv(cor_flo))
            return torch.cat([out, flow], dim=1)

    class BasicUpdateBlock(nn.Module):
        def __init__(self, cor_planes, hidden_dim=8):
            super().__init__()
            self.encoder = BasicMotionEncoder(cor_planes)
            self.gru = SepConvGRU(hidden_dim=hidden_dim, input_dim=4 + 8)
            self.flow_head = nn.Sequential(nn.Conv2d(hidden_dim, 8, 3, padding=1),
                                           nn.ReLU(inplace=True), nn.Conv2d(8, 2, 3, padding=1))
            self.mask = nn.Sequential(nn.Conv2d(hidden_dim, 8, 3, padding=1),
                                      nn.ReLU(inplace=True), nn.Conv2d(8, 4 * 9, 1, padding=0))

        def forward(self, net, inp, corr, flow):
            motion_features = self.encoder(flow, corr)
            inp = torch.cat([inp, motion_features], dim=1)
            net = self.gru(net, inp)
            delta_flow = self.flow_head(net)
            mask = .25 * self.mask(net)
            return net, mask, delta_flow

    class RAFT(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden_dim = hdim = 8
            self.context_dim = cdim = 4
            self.fnet = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1),
                                      nn.InstanceNorm2d(8), nn.ReLU(inplace=True))
            self.cnet = nn.Sequential(nn.Conv2d(3, hdim + cdim, 3, stride=2, padding=1),
                                      nn.BatchNorm2d(hdim + cdim), nn.ReLU(inplace=True))
            self.update_block = BasicUpdateBlock(2 * 9, hidden_dim=hdim)

        def freeze_bn(self):
            for m in self.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.eval()

        def initialize_flow(self, img):
            N, C, H, W = img.shape
            coords0 = coords_grid(N, H // 2, W // 2, device=img.device)
            coords1 = coords_grid(N, H // 2, W // 2, device=img.device)
            return coords0, coords1

        def upsample_flow(self, flow, mask):
            N, _, H, W = flow.shape
            mask = mask.view(N, 1, 9, 2, 2, H, W)
            mask = torch.softmax(mask, dim=2)
            up_flow = F.unfold(2 * flow, [3, 3], padding=1)
            up_flow = up_flow.view(N, 2, 9, 1, 1, H, W)
            up_flow = torch.sum(mask * up_flow, dim=2)
            up_flow = up_flow.permute(0, 1, 4, 2, 5, 3)
            return up_flow.reshape(N, 2, 2 * H, 2 * W)

        def forward(self, image1, image2, iters=3, flow_init=None, test_mode=False):
            image1 = 2 * (image1 / 255.0) - 1.0
            image2 = 2 * (image2 / 255.0) - 1.0
            image1 = image1.contiguous()
            image2 = image2.contiguous()
            fmap1, fmap2 = self.fnet(torch.cat([image1, image2], dim=0)).split(
                [image1.shape[0], image1.shape[0]], dim=0)
            fmap1, fmap2 = fmap1.float(), fmap2.float()
            corr_fn = CorrBlock(fmap1, fmap2)
            cnet = self.cnet(image1)
            net, inp = torch.split(cnet, [self.hidden_dim, self.context_dim], dim=1)
            net = torch.tanh(net)
            inp = torch.relu(inp)
            coords0, coords1 = self.initialize_flow(image1)
            if flow_init is not None:
                coords1 = coords1 + flow_init
            flow_predictions = []
            for itr in range(iters):
                coords1 = coords1.detach()
                corr = corr_fn(coords1)
                flow = coords1 - coords0
                net, up_mask, delta_flow = self.update_block(net, inp, corr, flow)
                coords1 = coords1 + delta_flow
                flow_up = self.upsample_flow(coords1 - coords0, up_mask)
                flow_predictions.append(flow_up)
            if test_mode:
                return coords1 - coords0, flow_up
            return flow_predictions

    def sequence_loss(flow_preds, flow_gt, valid, gamma=0.8, max_flow=400):
        n_predictions = len(flow_preds)
        flow_loss = 0.0
        mag = torch.sum(flow_gt ** 2, dim=1).sqrt()
        valid = (valid >= 0.5) & (mag < max_flow)
        for i in range(n_predictions):
            i_weight = gamma ** (n_predictions - i - 1)
            i_loss = (flow_preds[i] - flow_gt).abs()
            flow_loss += i_weight * (valid[:, None] * i_loss).mean()
        epe = torch.sum((flow_preds[-1] - flow_gt) ** 2, dim=1).sqrt()
        epe = epe.view(-1)[valid.view(-1)]
        metrics = {"epe": epe.mean().item(), "1px": (epe < 1).float().mean().item(),
                   "3px": (epe < 3).float().mean().item()}
        return flow_loss, metrics

    model = RAFT()
    fill_(torch, model, rng, 0.2)
    model.train()
    model.freeze_bn()
    optimizer = torch.optim.AdamW(model.parameters(), lr=4e-4, weight_decay=1e-4, eps=1e-8)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 4e-4, 2 + 100, pct_start=0.05,
                                                    cycle_momentum=False,
                                                    anneal_strategy="linear")
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    res = {"losses": [], "epe": [], "lrs": [], "norms": []}
    for step in range(2):
        image1 = torch.tensor(rng.uniform(0, 255, (2, 3, 8, 8)).astype(np.float32))
        image2 = torch.tensor(rng.uniform(0, 255, (2, 3, 8, 8)).astype(np.float32))
        flow = normal(torch, rng, 2, 2, 8, 8)
        valid = torch.tensor((rng.random((2, 8, 8)) < 0.8).astype(np.float32))
        optimizer.zero_grad()
        flow_predictions = model(image1, image2, iters=3)
        loss, metrics = sequence_loss(flow_predictions, flow, valid, 0.8)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        res["norms"].append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
        if step == 0:
            res["grads"] = [p.grad.clone() for p in model.parameters()]
        scaler.step(optimizer)
        scheduler.step()
        scaler.update()
        res["losses"].append(loss.item())
        res["epe"] += [metrics["epe"], metrics["1px"], metrics["3px"]]
        res["lrs"].append(scheduler.get_last_lr()[0])
    model.eval()
    with torch.no_grad():
        low, up = model(image1, image2, iters=2, flow_init=flow[:, :, ::2, ::2], test_mode=True)
    res.update(low=low, up=up, params=list(model.parameters()),
               flags=[scaler.is_enabled(), model.cnet[1].training, model.fnet[1].training],
               scale=[scaler.get_scale()])
    return res


def stereo_program(torch):
    """JiaRenChang/PSMNet and xy-guo/GwcNet cost volumes: a concatenation volume from
    ``Variable(torch.FloatTensor(...).zero_())`` filled slice by slice, a group-wise
    correlation volume from ``new_zeros``, a Conv3d hourglass with ConvTranspose3d, F.upsample
    to full resolution with mode='trilinear', ``torch.squeeze(cost, 1)``, F.softmax with no dim,
    disparity regression against a buffer built from ``np.array(range(maxdisp))``, and
    smooth_l1_loss over the valid mask with size_average=True."""
    nn, F = torch.nn, torch.nn.functional
    Variable = torch.autograd.Variable
    rng = np.random.default_rng(2714)

    def convbn_3d(in_planes, out_planes, kernel_size, stride, pad):
        return nn.Sequential(nn.Conv3d(in_planes, out_planes, kernel_size=kernel_size,
                                       padding=pad, stride=stride, bias=False),
                             nn.BatchNorm3d(out_planes))

    def build_gwc_volume(refimg_fea, targetimg_fea, maxdisp, num_groups):
        B, C, H, W = refimg_fea.shape
        volume = refimg_fea.new_zeros([B, num_groups, maxdisp, H, W])
        for i in range(maxdisp):
            if i > 0:
                volume[:, :, i, :, i:] = groupwise_correlation(
                    refimg_fea[:, :, :, i:], targetimg_fea[:, :, :, :-i], num_groups)
            else:
                volume[:, :, i, :, :] = groupwise_correlation(refimg_fea, targetimg_fea,
                                                              num_groups)
        return volume.contiguous()

    def groupwise_correlation(fea1, fea2, num_groups):
        B, C, H, W = fea1.shape
        channels_per_group = C // num_groups
        cost = (fea1 * fea2).view([B, num_groups, channels_per_group, H, W]).mean(dim=2)
        assert cost.shape == (B, num_groups, H, W)
        return cost

    class disparityregression(nn.Module):
        def __init__(self, maxdisp):
            super().__init__()
            self.disp = torch.Tensor(np.reshape(np.array(range(maxdisp)), [1, maxdisp, 1, 1]))

        def forward(self, x):
            out = torch.sum(x * self.disp.data, 1, keepdim=True)
            return out

    class PSMNetTiny(nn.Module):
        def __init__(self, maxdisp):
            super().__init__()
            self.maxdisp = maxdisp
            self.feature = nn.Sequential(nn.Conv2d(3, 4, 3, 2, 1, bias=False), nn.BatchNorm2d(4),
                                         nn.ReLU(inplace=True), nn.Conv2d(4, 4, 3, 1, 1))
            self.dres0 = nn.Sequential(convbn_3d(8 + 2, 4, 3, 1, 1), nn.ReLU(inplace=True))
            self.down = nn.Sequential(convbn_3d(4, 4, 3, 2, 1), nn.ReLU(inplace=True))
            self.up = nn.Sequential(nn.ConvTranspose3d(4, 4, 3, padding=1, output_padding=1,
                                                       stride=2, bias=False),
                                    nn.BatchNorm3d(4))
            self.classif = nn.Conv3d(4, 1, kernel_size=3, padding=1, stride=1, bias=False)

        def forward(self, left, right):
            refimg_fea = self.feature(left)
            targetimg_fea = self.feature(right)
            cost = Variable(torch.FloatTensor(refimg_fea.size()[0], refimg_fea.size()[1] * 2,
                                              self.maxdisp // 2, refimg_fea.size()[2],
                                              refimg_fea.size()[3]).zero_())
            for i in range(self.maxdisp // 2):
                if i > 0:
                    cost[:, :refimg_fea.size()[1], i, :, i:] = refimg_fea[:, :, :, i:]
                    cost[:, refimg_fea.size()[1]:, i, :, i:] = targetimg_fea[:, :, :, :-i]
                else:
                    cost[:, :refimg_fea.size()[1], i, :, :] = refimg_fea
                    cost[:, refimg_fea.size()[1]:, i, :, :] = targetimg_fea
            cost = cost.contiguous()
            gwc = build_gwc_volume(refimg_fea, targetimg_fea, self.maxdisp // 2, 2)
            cost0 = self.dres0(torch.cat((cost, gwc), 1))
            out = self.up(self.down(cost0)) + cost0
            cost = self.classif(out)
            cost = F.upsample(cost, [self.maxdisp, left.size()[2], left.size()[3]],
                              mode="trilinear")
            cost = torch.squeeze(cost, 1)
            pred = F.softmax(cost)
            pred = disparityregression(self.maxdisp)(pred)
            return pred.squeeze(1)

    maxdisp = 8
    model = PSMNetTiny(maxdisp)
    fill_(torch, model, rng, 0.3)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001, betas=(0.9, 0.999))
    res = {"losses": [], "epe": []}
    for step in range(2):
        imgL = normal(torch, rng, 2, 3, 8, 12)
        imgR = normal(torch, rng, 2, 3, 8, 12)
        disp_L = torch.tensor(rng.uniform(0, 10, (2, 8, 12)).astype(np.float32))
        model.train()
        disp_true = disp_L
        mask = disp_true < maxdisp
        mask.detach_()
        optimizer.zero_grad()
        output = model(imgL, imgR)
        output = torch.squeeze(output, 1)
        loss = F.smooth_l1_loss(output[mask], disp_true[mask], size_average=True)
        loss.backward()
        if step == 0:
            res["grads"] = [p.grad.clone() for p in model.parameters()]
        optimizer.step()
        res["losses"].append(loss.data.item())
        res["epe"].append(torch.mean(torch.abs(output[mask] - disp_true[mask])).item())
    model.eval()
    with torch.no_grad():
        res["eval"] = model(imgL, imgR)
    res.update(params=list(model.parameters()), shape=list(res["eval"].shape),
               mask_count=[int(mask.sum())])
    return res


def flownet_pwc_program(torch):
    """FlowNetS / PWC-Net plumbing: ``conv`` + LeakyReLU(0.1) encoders, a correlation cost
    volume by shifting a padded feature map in a double loop, PWC's ``warp`` (a grid from
    ``arange().view().repeat()``, written into ``vgrid[:, 0, :, :]`` in place from a
    ``.clone()``, grid_sample without align_corners, a ones mask thresholded in place), the
    deconvolution + ``crop_like`` decoder with an upsampled flow from a bias-free
    ConvTranspose2d, and FlowNet's multiscaleEPE on targets pooled by adaptive_avg_pool2d and
    by the sparse max pool, with the sparse EPE dropping zero-flow pixels; Adam with
    MultiStepLR."""
    nn, F = torch.nn, torch.nn.functional
    Variable = torch.autograd.Variable
    rng = np.random.default_rng(2715)

    def conv(in_planes, out_planes, kernel_size=3, stride=1):
        return nn.Sequential(nn.Conv2d(in_planes, out_planes, kernel_size=kernel_size,
                                       stride=stride, padding=(kernel_size - 1) // 2,
                                       bias=True),
                             nn.LeakyReLU(0.1, inplace=True))

    def predict_flow(in_planes):
        return nn.Conv2d(in_planes, 2, kernel_size=3, stride=1, padding=1, bias=False)

    def deconv(in_planes, out_planes):
        return nn.Sequential(nn.ConvTranspose2d(in_planes, out_planes, kernel_size=4, stride=2,
                                                padding=1, bias=False),
                             nn.LeakyReLU(0.1, inplace=True))

    def crop_like(input, target):
        if input.size()[2:] == target.size()[2:]:
            return input
        return input[:, :, :target.size(2), :target.size(3)]

    def correlate(f1, f2, md=1):
        H, W = f1.shape[2:]
        f2p = F.pad(f2, (md, md, md, md))
        cost = []
        for i in range(2 * md + 1):
            for j in range(2 * md + 1):
                cost.append((f1 * f2p[:, :, i:i + H, j:j + W]).mean(1, keepdim=True))
        return F.leaky_relu(torch.cat(cost, 1), 0.1)

    def warp(x, flo):
        B, C, H, W = x.size()
        xx = torch.arange(0, W).view(1, -1).repeat(H, 1)
        yy = torch.arange(0, H).view(-1, 1).repeat(1, W)
        xx = xx.view(1, 1, H, W).repeat(B, 1, 1, 1)
        yy = yy.view(1, 1, H, W).repeat(B, 1, 1, 1)
        grid = torch.cat((xx, yy), 1).float()
        vgrid = Variable(grid) + flo
        vgrid[:, 0, :, :] = 2.0 * vgrid[:, 0, :, :].clone() / max(W - 1, 1) - 1.0
        vgrid[:, 1, :, :] = 2.0 * vgrid[:, 1, :, :].clone() / max(H - 1, 1) - 1.0
        vgrid = vgrid.permute(0, 2, 3, 1)
        output = nn.functional.grid_sample(x, vgrid)
        mask = torch.autograd.Variable(torch.ones(x.size()))
        mask = nn.functional.grid_sample(mask, vgrid)
        mask[mask < 0.9999] = 0
        mask[mask > 0] = 1
        return output * mask

    class FlowNetTiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = conv(3, 4, kernel_size=3, stride=2)
            self.conv2 = conv(4, 6, stride=2)
            self.conv_corr = conv(9 + 6, 6)
            self.predict_flow2 = predict_flow(6)
            self.deconv1 = deconv(6, 4)
            self.upsampled_flow2_to_1 = nn.ConvTranspose2d(2, 2, 4, 2, 1, bias=False)
            self.predict_flow1 = predict_flow(4 + 4 + 2)

        def forward(self, im1, im2):
            f1a, f1b = self.conv1(im1), self.conv1(im2)
            f2a, f2b = self.conv2(f1a), self.conv2(f1b)
            out2 = self.conv_corr(torch.cat((correlate(f2a, f2b), f2a), 1))
            flow2 = self.predict_flow2(out2)
            flow2_up = crop_like(self.upsampled_flow2_to_1(flow2), f1a)
            out_deconv1 = crop_like(self.deconv1(out2), f1a)
            warped = warp(f1b, flow2_up)
            flow1 = self.predict_flow1(torch.cat((f1a, out_deconv1, flow2_up), 1)) + \
                (warped - f1a).mean(1, keepdim=True)
            if self.training:
                return flow1, flow2
            return flow1

    def EPE(input_flow, target_flow, sparse=False, mean=True):
        EPE_map = torch.norm(target_flow - input_flow, 2, 1)
        batch_size = EPE_map.size(0)
        if sparse:
            mask = (target_flow[:, 0] == 0) & (target_flow[:, 1] == 0)
            EPE_map = EPE_map[~mask]
        if mean:
            return EPE_map.mean()
        return EPE_map.sum() / batch_size

    def sparse_max_pool(input, size):
        positive = (input > 0).float()
        negative = (input < 0).float()
        return F.adaptive_max_pool2d(input * positive, size) - F.adaptive_max_pool2d(
            -input * negative, size)

    def multiscaleEPE(network_output, target_flow, weights=None, sparse=False):
        def one_scale(output, target, sparse):
            b, _, h, w = output.size()
            if sparse:
                target_scaled = sparse_max_pool(target, (h, w))
            else:
                target_scaled = F.adaptive_avg_pool2d(target, (h, w))
            return EPE(output, target_scaled, sparse, mean=False)

        if type(network_output) not in [tuple, list]:
            network_output = [network_output]
        if weights is None:
            weights = [0.005, 0.01, 0.02, 0.08, 0.32]
        assert len(weights) == len(network_output)
        loss = 0
        for output, weight in zip(network_output, weights):
            loss += weight * one_scale(output, target_flow, sparse)
        return loss

    model = FlowNetTiny()
    fill_(torch, model, rng, 0.3)
    optimizer = torch.optim.Adam(model.parameters(), 1e-3, betas=(0.9, 0.999))
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[1], gamma=0.5)
    res = {"losses": [], "epe": []}
    for step in range(3):
        im1, im2 = normal(torch, rng, 2, 3, 8, 8), normal(torch, rng, 2, 3, 8, 8)
        target = normal(torch, rng, 2, 2, 8, 8)
        if step == 2:
            target[:, :, ::3] = 0
        model.train()
        output = model(im1, im2)
        loss = multiscaleEPE(output, target, weights=[0.32, 0.08], sparse=step == 2)
        flow2_EPE = 20 * EPE(F.interpolate(output[0], (8, 8), mode="bilinear",
                                           align_corners=False), target, sparse=step == 2)
        optimizer.zero_grad()
        loss.backward()
        if step == 0:
            res["grads"] = [p.grad.clone() for p in model.parameters()]
        optimizer.step()
        scheduler.step()
        res["losses"].append(loss.item())
        res["epe"].append(flow2_EPE.item())
    model.eval()
    with torch.no_grad():
        res["eval"] = model(im1, im2)
    res["params"] = list(model.parameters())
    return res


PROGRAMS = [raft_program, stereo_program, flownet_pwc_program]


# Later values differ by float32 accumulation order (flows and EPEs of magnitude 10-70,
# Adam's normalised steps; RAFT's by as much as PyTorch's own on 1 thread instead of
# several), PWC's gradients of magnitude 10 already by a few ulps
TOLERANCES = {"raft_program": (1e-4, 1e-5), "flownet_pwc_program": (1e-4, 1e-6)}


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
