"""Volumetric segmentation programs written as their reference repositories write them in
torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy data:
3-D U-Net as wolny/pytorch-3dunet writes it (GroupNorm + Conv3d blocks, trilinear and nearest
upsampling, a per-channel soft Dice loss on one-hot targets from scatter_), V-Net (5^3
convolutions, PReLU, a batch norm that always uses batch statistics, ConvTranspose3d, a Dice
loss written as an autograd.Function), nnU-Net (InstanceNorm3d + LeakyReLU stages, deep
supervision over nearest-downsampled targets, soft Dice + CE, SGD with Nesterov and a
hand-written poly schedule) and MONAI-style sliding-window inference (Gaussian importance map,
overlap-add into slices). Part of the round-27 3-D programs (see _3d)."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def unet3d_program(torch):
    """wolny/pytorch-3dunet: SingleConv blocks in 'gcr' order (GroupNorm, Conv3d, ReLU),
    MaxPool3d encoders, decoders upsampling with ``F.interpolate(size=..., mode='nearest')``
    or trilinear and joining by concatenation, a final 1x1x1 Conv3d, the per-channel Dice
    loss over ``flatten`` (permute + contiguous + view) with ``denominator.clamp(min=eps)``,
    one-hot targets from ``zeros(shape).scatter_(1, input, 1)``, and BCE+Dice; Adam and
    ReduceLROnPlateau; eval applies a Sigmoid final activation."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2704)

    def create_conv(in_channels, out_channels, kernel_size, order, num_groups, padding):
        modules = []
        for i, char in enumerate(order):
            if char == "r":
                modules.append(("ReLU", nn.ReLU(inplace=True)))
            elif char == "c":
                bias = not ("g" in order or "b" in order)
                modules.append(("conv", nn.Conv3d(in_channels, out_channels, kernel_size,
                                                  padding=padding, bias=bias)))
            elif char == "g":
                is_before_conv = i < order.index("c")
                num_channels = in_channels if is_before_conv else out_channels
                if num_channels < num_groups:
                    num_groups = 1
                modules.append(("groupnorm", nn.GroupNorm(num_groups=num_groups,
                                                          num_channels=num_channels)))
        return modules

    class SingleConv(nn.Sequential):
        def __init__(self, in_channels, out_channels, kernel_size=3, order="gcr", num_groups=2,
                     padding=1):
            super().__init__()
            for name, module in create_conv(in_channels, out_channels, kernel_size, order,
                                            num_groups, padding):
                self.add_module(name, module)

    class DoubleConv(nn.Sequential):
        def __init__(self, in_channels, out_channels, encoder, order="gcr", num_groups=2):
            super().__init__()
            if encoder:
                c1_in, c1_out = in_channels, max(out_channels // 2, in_channels)
            else:
                c1_in, c1_out = in_channels, out_channels
            self.add_module("SingleConv1", SingleConv(c1_in, c1_out, 3, order, num_groups))
            self.add_module("SingleConv2", SingleConv(c1_out, out_channels, 3, order,
                                                      num_groups))

    class Encoder(nn.Module):
        def __init__(self, in_channels, out_channels, apply_pooling=True):
            super().__init__()
            self.pooling = nn.MaxPool3d(kernel_size=2) if apply_pooling else None
            self.basic_module = DoubleConv(in_channels, out_channels, encoder=True)

        def forward(self, x):
            if self.pooling is not None:
                x = self.pooling(x)
            return self.basic_module(x)

    class Decoder(nn.Module):
        def __init__(self, in_channels, out_channels, mode):
            super().__init__()
            self.mode = mode
            self.basic_module = DoubleConv(in_channels, out_channels, encoder=False)

        def forward(self, encoder_features, x):
            output_size = encoder_features.size()[2:]
            if self.mode == "nearest":
                x = F.interpolate(x, size=output_size, mode=self.mode)
            else:
                x = F.interpolate(x, size=output_size, mode=self.mode, align_corners=False)
            x = torch.cat((encoder_features, x), dim=1)
            return self.basic_module(x)

    class UNet3D(nn.Module):
        def __init__(self, in_channels, out_channels, f_maps=(4, 8, 8)):
            super().__init__()
            self.encoders = nn.ModuleList([
                Encoder(in_channels, f_maps[0], apply_pooling=False),
                Encoder(f_maps[0], f_maps[1]), Encoder(f_maps[1], f_maps[2])])
            self.decoders = nn.ModuleList([Decoder(f_maps[2] + f_maps[1], f_maps[1], "nearest"),
                                           Decoder(f_maps[1] + f_maps[0], f_maps[0],
                                                   "trilinear")])
            self.final_conv = nn.Conv3d(f_maps[0], out_channels, 1)
            self.final_activation = nn.Sigmoid()

        def forward(self, x):
            encoders_features = []
            for encoder in self.encoders:
                x = encoder(x)
                encoders_features.insert(0, x)
            encoders_features = encoders_features[1:]
            for decoder, encoder_features in zip(self.decoders, encoders_features):
                x = decoder(encoder_features, x)
            x = self.final_conv(x)
            if not self.training:
                x = self.final_activation(x)
            return x

    def flatten(tensor):
        C = tensor.size(1)
        axis_order = (1, 0) + tuple(range(2, tensor.dim()))
        transposed = tensor.permute(axis_order)
        return transposed.contiguous().view(C, -1)

    def compute_per_channel_dice(input, target, epsilon=1e-6, weight=None):
        assert input.size() == target.size(), "'input' and 'target' must have the same shape"
        input = flatten(input)
        target = flatten(target)
        target = target.float()
        intersect = (input * target).sum(-1)
        if weight is not None:
            intersect = weight * intersect
        denominator = (input * input).sum(-1) + (target * target).sum(-1)
        return 2 * (intersect / denominator.clamp(min=epsilon))

    def expand_as_one_hot(input, C, ignore_index=None):
        assert input.dim() == 4
        input = input.unsqueeze(1)
        shape = list(input.size())
        shape[1] = C
        return torch.zeros(shape).to(input.device).scatter_(1, input, 1)

    class BCEDiceLoss(nn.Module):
        def __init__(self, alpha, beta):
            super().__init__()
            self.alpha = alpha
            self.bce = nn.BCEWithLogitsLoss()
            self.beta = beta

        def forward(self, input, target):
            dice = 1. - torch.mean(compute_per_channel_dice(nn.Sigmoid()(input), target))
            return self.alpha * self.bce(input, target) + self.beta * dice

    C, D = 3, 6
    model = UNet3D(2, C)
    fill_(torch, model, rng, 0.3)
    loss_criterion = BCEDiceLoss(1.0, 1.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001, weight_decay=1e-5)
    lr_scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.2,
                                                              patience=0)
    res = {"losses": [], "lrs": []}
    for step in range(3):
        input = normal(torch, rng, 2, 2, D, D, D)
        target = expand_as_one_hot(torch.tensor(rng.integers(0, C, (2, D, D, D))), C)
        model.train()
        output = model(input)
        loss = loss_criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        if step == 0:
            res["grads"] = [p.grad.clone() for p in model.parameters()]
        optimizer.step()
        lr_scheduler.step(loss.item() + (1 if step == 1 else 0))
        res["losses"].append(loss.item())
        res["lrs"].append(optimizer.param_groups[0]["lr"])
    model.eval()
    with torch.no_grad():
        out = model(normal(torch, rng, 1, 2, D, D, D))
    res["eval_out"] = out
    res["params"] = list(model.parameters())
    res["names"] = [n for n, _ in model.named_parameters()]
    res["shape"] = list(out.shape)
    return res


def vnet_program(torch):
    """mattmacy/vnet.pytorch: 5x5x5 Conv3d with padding 2, PReLU (ELU in the up path), a
    ContBatchNorm3d subclass of _BatchNorm whose forward calls ``F.batch_norm(..., True, ...)``
    always, the input transition adding the input repeated by ``torch.cat`` 8 times, strided
    2x2x2 down convolutions with ``torch.add`` residuals, ConvTranspose3d up transitions
    concatenating skips, the output ``permute(0, 2, 3, 4, 1).contiguous()`` + view +
    softmax, and the Dice loss as a custom autograd.Function with a hand-written backward."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2705)

    def passthrough(x, **kwargs):
        return x

    def ELUCons(elu, nchan):
        if elu:
            return nn.ELU(inplace=True)
        return nn.PReLU(nchan)

    class ContBatchNorm3d(nn.modules.batchnorm._BatchNorm):
        def _check_input_dim(self, input):
            if input.dim() != 5:
                raise ValueError("expected 5D input (got {}D input)".format(input.dim()))

        def forward(self, input):
            self._check_input_dim(input)
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, True, self.momentum, self.eps)

    class LUConv(nn.Module):
        def __init__(self, nchan, elu):
            super().__init__()
            self.relu1 = ELUCons(elu, nchan)
            self.conv1 = nn.Conv3d(nchan, nchan, kernel_size=5, padding=2)
            self.bn1 = ContBatchNorm3d(nchan)

        def forward(self, x):
            return self.relu1(self.bn1(self.conv1(x)))

    def _make_nConv(nchan, depth, elu):
        return nn.Sequential(*[LUConv(nchan, elu) for _ in range(depth)])

    class InputTransition(nn.Module):
        def __init__(self, outChans, elu):
            super().__init__()
            self.conv1 = nn.Conv3d(1, 8, kernel_size=5, padding=2)
            self.bn1 = ContBatchNorm3d(8)
            self.relu1 = ELUCons(elu, 8)

        def forward(self, x):
            out = self.bn1(self.conv1(x))
            x16 = torch.cat((x, x, x, x, x, x, x, x), 1)
            out = self.relu1(torch.add(out, x16))
            return out

    class DownTransition(nn.Module):
        def __init__(self, inChans, nConvs, elu, dropout=False):
            super().__init__()
            outChans = 2 * inChans
            self.down_conv = nn.Conv3d(inChans, outChans, kernel_size=2, stride=2)
            self.bn1 = ContBatchNorm3d(outChans)
            self.do1 = passthrough
            self.relu1 = ELUCons(elu, outChans)
            self.relu2 = ELUCons(elu, outChans)
            self.ops = _make_nConv(outChans, nConvs, elu)

        def forward(self, x):
            down = self.relu1(self.bn1(self.down_conv(x)))
            out = self.do1(down)
            out = self.ops(out)
            out = self.relu2(torch.add(out, down))
            return out

    class UpTransition(nn.Module):
        def __init__(self, inChans, outChans, nConvs, elu):
            super().__init__()
            self.up_conv = nn.ConvTranspose3d(inChans, outChans // 2, kernel_size=2, stride=2)
            self.bn1 = ContBatchNorm3d(outChans // 2)
            self.do1 = passthrough
            self.relu1 = ELUCons(elu, outChans // 2)
            self.relu2 = ELUCons(elu, outChans)
            self.ops = _make_nConv(outChans, nConvs, elu)

        def forward(self, x, skipx):
            out = self.do1(x)
            skipxdo = skipx
            out = self.relu1(self.bn1(self.up_conv(out)))
            xcat = torch.cat((out, skipxdo), 1)
            out = self.ops(xcat)
            out = self.relu2(torch.add(out, xcat))
            return out

    class OutputTransition(nn.Module):
        def __init__(self, inChans, elu):
            super().__init__()
            self.conv1 = nn.Conv3d(inChans, 2, kernel_size=5, padding=2)
            self.bn1 = ContBatchNorm3d(2)
            self.conv2 = nn.Conv3d(2, 2, kernel_size=1)
            self.relu1 = ELUCons(elu, 2)
            self.softmax = F.softmax

        def forward(self, x):
            out = self.relu1(self.bn1(self.conv1(x)))
            out = self.conv2(out)
            out = out.permute(0, 2, 3, 4, 1).contiguous()
            out = out.view(out.numel() // 2, 2)
            out = self.softmax(out, dim=1)
            return out

    class VNet(nn.Module):
        def __init__(self, elu):
            super().__init__()
            self.in_tr = InputTransition(8, elu)
            self.down_tr32 = DownTransition(8, 1, elu)
            self.up_tr = UpTransition(16, 16, 1, True)
            self.out_tr = OutputTransition(16, elu)

        def forward(self, x):
            out16 = self.in_tr(x)
            out32 = self.down_tr32(out16)
            out = self.up_tr(out32, out16)
            return self.out_tr(out)

    class DiceLoss(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, target, save=True):
            eps = 0.000001
            _, result_ = input.max(1)
            result_ = torch.squeeze(result_)
            result = result_.float()
            target = target.float()
            intersect = torch.dot(result, target)
            result_sum = torch.sum(result)
            target_sum = torch.sum(target)
            union = result_sum + target_sum + (2 * eps)
            IoU = intersect / union
            ctx.save_for_backward(input, target, intersect, union)
            out = torch.FloatTensor(1).fill_(2 * IoU)
            return out

        @staticmethod
        def backward(ctx, grad_output):
            input, target, intersect, union = ctx.saved_tensors
            gt = torch.div(target, union)
            IoU2 = intersect / (union * union)
            pred = torch.mul(input[:, 1], IoU2)
            dDice = torch.add(torch.mul(gt, 2), torch.mul(pred, -4))
            grad_input = torch.cat((torch.mul(dDice, -grad_output[0]).unsqueeze(1),
                                    torch.mul(dDice, grad_output[0]).unsqueeze(1)), dim=1)
            return grad_input, None, None

    model = VNet(elu=False)
    fill_(torch, model, rng, 0.2)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.PReLU):
                m.weight.fill_(0.25)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.99, weight_decay=1e-8)
    res = {"nll": [], "dice": [], "names": [n for n, _ in model.named_modules()][:12]}
    for step in range(2):
        data = normal(torch, rng, 2, 1, 8, 8, 8)
        target = torch.tensor(rng.integers(0, 2, (2, 8, 8, 8)))
        target = target.view(target.numel())
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(torch.log(output), target, weight=torch.tensor([0.4, 0.6]))
        dice = DiceLoss.apply(output, target)
        (loss - 0.1 * dice.sum()).backward()
        optimizer.step()
        res["nll"].append(loss.item())
        res["dice"].append(dice.item())
    res["params"] = list(model.parameters())
    res["running"] = [model.in_tr.bn1.running_mean, model.down_tr32.bn1.running_var]
    pred = output.data.max(1)[1]
    res["incorrect"] = [pred.ne(target.data).cpu().sum().item()]
    return res


def nnunet_program(torch):
    """MIC-DKFZ/nnUNet v2 as it trains: PlainConvUNet stages of Conv3d + InstanceNorm3d(affine)
    + LeakyReLU(1e-2), ConvTranspose3d up-sampling, deep-supervision heads reversed; weights
    through ``module.weight = nn.init.kaiming_normal_(module.weight, a=1e-2)``; the
    MemoryEfficientSoftDiceLoss (one-hot by ``zeros(dtype=bool).scatter_(1, y, 1)`` under
    no_grad, background dropped, batch dice, ``torch.clip``) plus RobustCrossEntropyLoss, summed
    by DeepSupervisionWrapper with NumPy float64 weights; SGD Nesterov 0.99 and a
    PolyLRScheduler subclassing _LRScheduler, set_to_none
    zero_grad, clip_grad_norm_(12); validation's tp/fp/fn from a scattered argmax, and
    mirroring test-time augmentation with torch.flip."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2721)

    class ConvDropoutNormReLU(nn.Module):
        def __init__(self, input_channels, output_channels, kernel_size, stride):
            super().__init__()
            self.conv = nn.Conv3d(input_channels, output_channels, kernel_size, stride,
                                  padding=[(i - 1) // 2 for i in kernel_size], dilation=1,
                                  bias=True)
            self.norm = nn.InstanceNorm3d(output_channels, eps=1e-5, affine=True)
            self.nonlin = nn.LeakyReLU(negative_slope=1e-2, inplace=True)
            self.all_modules = nn.Sequential(self.conv, self.norm, self.nonlin)

        def forward(self, x):
            return self.all_modules(x)

    class StackedConvBlocks(nn.Module):
        def __init__(self, num_convs, input_channels, output_channels, kernel_size,
                     initial_stride):
            super().__init__()
            self.convs = nn.Sequential(
                ConvDropoutNormReLU(input_channels, output_channels, kernel_size,
                                    initial_stride),
                *[ConvDropoutNormReLU(output_channels, output_channels, kernel_size, 1)
                  for _ in range(1, num_convs)])

        def forward(self, x):
            return self.convs(x)

    class PlainConvUNet(nn.Module):
        def __init__(self, features=(4, 8), num_classes=3, deep_supervision=True):
            super().__init__()
            self.stages = nn.ModuleList([StackedConvBlocks(2, 1, features[0], [3, 3, 3], 1),
                                         StackedConvBlocks(2, features[0], features[1],
                                                           [3, 3, 3], 2)])
            self.transpconvs = nn.ModuleList([nn.ConvTranspose3d(features[1], features[0],
                                                                 2, 2, bias=True)])
            self.dec_stages = nn.ModuleList([StackedConvBlocks(2, 2 * features[0],
                                                               features[0], [3, 3, 3], 1)])
            self.seg_layers = nn.ModuleList([nn.Conv3d(features[1], num_classes, 1, 1, 0),
                                             nn.Conv3d(features[0], num_classes, 1, 1, 0)])
            self.deep_supervision = deep_supervision

        def forward(self, x):
            skips = []
            for s in self.stages:
                x = s(x)
                skips.append(x)
            lres_input = skips[-1]
            seg_outputs = [self.seg_layers[0](lres_input)]
            for s in range(len(self.dec_stages)):
                x = self.transpconvs[s](lres_input)
                x = torch.cat((x, skips[-(s + 2)]), 1)
                x = self.dec_stages[s](x)
                seg_outputs.append(self.seg_layers[s + 1](x))
                lres_input = x
            seg_outputs = seg_outputs[::-1]
            if not self.deep_supervision:
                return seg_outputs[0]
            return seg_outputs

    class InitWeights_He:
        def __init__(self, neg_slope=1e-2):
            self.neg_slope = neg_slope

        def __call__(self, module):
            if isinstance(module, (nn.Conv3d, nn.ConvTranspose3d)):
                module.weight = nn.init.kaiming_normal_(module.weight, a=self.neg_slope)
                if module.bias is not None:
                    module.bias = nn.init.constant_(module.bias, 0)

    def softmax_helper_dim1(x):
        return torch.softmax(x, 1)

    class MemoryEfficientSoftDiceLoss(nn.Module):
        def __init__(self, apply_nonlin=None, batch_dice=False, do_bg=True, smooth=1.):
            super().__init__()
            self.do_bg = do_bg
            self.batch_dice = batch_dice
            self.apply_nonlin = apply_nonlin
            self.smooth = smooth

        def forward(self, x, y, loss_mask=None):
            if self.apply_nonlin is not None:
                x = self.apply_nonlin(x)
            axes = tuple(range(2, x.ndim))
            with torch.no_grad():
                if x.ndim != y.ndim:
                    y = y.view((y.shape[0], 1, *y.shape[1:]))
                if x.shape == y.shape:
                    y_onehot = y
                else:
                    y_onehot = torch.zeros(x.shape, device=x.device, dtype=torch.bool)
                    y_onehot.scatter_(1, y.long(), 1)
                if not self.do_bg:
                    y_onehot = y_onehot[:, 1:]
                sum_gt = y_onehot.sum(axes)
            if not self.do_bg:
                x = x[:, 1:]
            intersect = (x * y_onehot).sum(axes)
            sum_pred = x.sum(axes)
            if self.batch_dice:
                intersect = intersect.sum(0)
                sum_pred = sum_pred.sum(0)
                sum_gt = sum_gt.sum(0)
            dc = (2 * intersect + self.smooth) / (torch.clip(sum_gt + sum_pred + self.smooth,
                                                             1e-8))
            dc = dc.mean()
            return -dc

    class RobustCrossEntropyLoss(nn.CrossEntropyLoss):
        def forward(self, input, target):
            if target.ndim == input.ndim:
                assert target.shape[1] == 1
                target = target[:, 0]
            return super().forward(input, target.long())

    class DC_and_CE_loss(nn.Module):
        def __init__(self, soft_dice_kwargs, ce_kwargs, weight_ce=1, weight_dice=1):
            super().__init__()
            self.weight_dice = weight_dice
            self.weight_ce = weight_ce
            self.ce = RobustCrossEntropyLoss(**ce_kwargs)
            self.dc = MemoryEfficientSoftDiceLoss(apply_nonlin=softmax_helper_dim1,
                                                  **soft_dice_kwargs)

        def forward(self, net_output, target):
            dc_loss = self.dc(net_output, target)
            ce_loss = self.ce(net_output, target[:, 0])
            return self.weight_ce * ce_loss + self.weight_dice * dc_loss

    class DeepSupervisionWrapper(nn.Module):
        def __init__(self, loss, weight_factors=None):
            super().__init__()
            self.weight_factors = tuple(weight_factors)
            self.loss = loss

        def forward(self, *args):
            return sum([self.weight_factors[i] * self.loss(*inputs)
                        for i, inputs in enumerate(zip(*args)) if self.weight_factors[i] != 0.0])

    class PolyLRScheduler(torch.optim.lr_scheduler._LRScheduler):
        def __init__(self, optimizer, initial_lr, max_steps, exponent=0.9, current_step=None):
            self.optimizer = optimizer
            self.initial_lr = initial_lr
            self.max_steps = max_steps
            self.exponent = exponent
            self.ctr = 0
            super().__init__(optimizer, current_step if current_step is not None else -1)

        def step(self, current_step=None):
            if current_step is None or current_step == -1:
                current_step = self.ctr
                self.ctr += 1
            new_lr = self.initial_lr * (1 - current_step / self.max_steps) ** self.exponent
            for param_group in self.optimizer.param_groups:
                param_group["lr"] = new_lr
            self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    network = PlainConvUNet()
    network.apply(InitWeights_He(1e-2))
    fill_(torch, network, rng, 0.2)
    weights = np.array([1 / (2 ** i) for i in range(2)])
    weights = weights / weights.sum()
    loss = DeepSupervisionWrapper(DC_and_CE_loss({"batch_dice": True, "smooth": 1e-5,
                                                  "do_bg": False}, {}), weights)
    optimizer = torch.optim.SGD(network.parameters(), 0.01, weight_decay=3e-5, momentum=0.99,
                                nesterov=True)
    lr_scheduler = PolyLRScheduler(optimizer, 0.01, 10)
    res = {"losses": [], "lrs": [], "norms": []}
    for step in range(3):
        data = normal(torch, rng, 2, 1, 4, 4, 4)
        seg = torch.from_numpy(rng.integers(0, 3, (2, 1, 4, 4, 4)).astype(np.float32))
        target = [seg, F.interpolate(seg, scale_factor=0.5, mode="nearest")]
        lr_scheduler.step(step)
        optimizer.zero_grad(set_to_none=True)
        output = network(data)
        loss_value = loss(output, target)
        loss_value.backward()
        res["norms"].append(torch.nn.utils.clip_grad_norm_(network.parameters(), 12).item())
        optimizer.step()
        res["losses"].append(loss_value.detach().cpu().numpy().item())
        res["lrs"].append(optimizer.param_groups[0]["lr"])
    network.eval()
    with torch.no_grad():
        data = normal(torch, rng, 2, 1, 4, 4, 4)
        target = torch.from_numpy(rng.integers(0, 3, (2, 1, 4, 4, 4)))
        output = network(data)[0]
        axes = [0] + list(range(2, output.ndim))
        output_seg = output.argmax(1)[:, None]
        predicted_segmentation_onehot = torch.zeros(output.shape, device=output.device,
                                                    dtype=torch.float32)
        predicted_segmentation_onehot.scatter_(1, output_seg, 1)
        y_onehot = torch.zeros(output.shape, device=output.device, dtype=torch.bool)
        y_onehot.scatter_(1, target.long(), 1)
        tp = (predicted_segmentation_onehot * y_onehot).sum(dim=axes)
        fp = (predicted_segmentation_onehot * (~y_onehot)).sum(dim=axes)
        fn = ((1 - predicted_segmentation_onehot) * y_onehot).sum(dim=axes)
        network.deep_supervision = False
        prediction = network(data)
        mirror_axes = (0, 1)
        axes_combinations = [c for i in range(len(mirror_axes))
                             for c in __import__("itertools").combinations(
                                 [m + 2 for m in mirror_axes], i + 1)]
        for axes_ in axes_combinations:
            prediction += torch.flip(network(torch.flip(data, axes_)), axes_)
        prediction /= (len(axes_combinations) + 1)
    res.update(tp=tp, fp=fp, fn=fn, prediction=prediction, params=list(network.parameters()),
               dtypes=[str(t.dtype).rsplit(".", 1)[-1] for t in (tp, y_onehot, output_seg)],
               last_lr=lr_scheduler.get_last_lr())
    return res


def sliding_window_program(torch):
    """MONAI's sliding_window_inference over a padded volume: a Gaussian importance map from
    ``torch.arange`` with float bounds, ``torch.exp`` and an in-place ``clamp_``, scan
    intervals turned into slices, predictions accumulated with ``+=`` into slices of output and
    count maps, padding undone by slicing; then a gradient through the whole inference (as
    test-time adaptation does) with the network's ``requires_grad_`` toggled."""
    import itertools
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2722)

    def compute_importance_map(patch_size, sigma_scale=0.125):
        sigmas = [i * sigma_scale for i in patch_size]
        importance_map = None
        for i in range(len(patch_size)):
            x = torch.arange(start=-(patch_size[i] - 1) / 2.0, end=(patch_size[i] - 1) / 2.0 + 1,
                             dtype=torch.float)
            x = torch.exp(x ** 2 / (-2 * sigmas[i] ** 2))
            importance_map = x if importance_map is None else \
                importance_map.unsqueeze(-1) * x[(None,) * i]
        importance_map = importance_map / torch.max(importance_map)
        min_non_zero = max(torch.min(importance_map).item(), 1e-3)
        return torch.clamp_(importance_map.to(torch.float), min=min_non_zero)

    def _get_scan_interval(image_size, roi_size, overlap):
        scan_interval = []
        for i in range(len(roi_size)):
            if roi_size[i] == image_size[i]:
                scan_interval.append(int(roi_size[i]))
            else:
                interval = int(roi_size[i] * (1 - overlap))
                scan_interval.append(interval if interval > 0 else 1)
        return tuple(scan_interval)

    def sliding_window_inference(inputs, roi_size, predictor, overlap=0.5):
        num_spatial_dims = len(inputs.shape) - 2
        image_size_ = list(inputs.shape[2:])
        batch_size = inputs.shape[0]
        image_size = tuple(max(image_size_[i], roi_size[i]) for i in range(num_spatial_dims))
        pad_size = []
        for k in range(len(inputs.shape) - 1, 1, -1):
            diff = max(roi_size[k - 2] - inputs.shape[k], 0)
            half = diff // 2
            pad_size.extend([half, diff - half])
        inputs = F.pad(inputs, pad=pad_size, mode="constant", value=0.0)
        scan_interval = _get_scan_interval(image_size, roi_size, overlap)
        starts = [list(range(0, max(image_size[d] - roi_size[d], 0) + 1, scan_interval[d]))
                  for d in range(num_spatial_dims)]
        for d in range(num_spatial_dims):
            if starts[d][-1] + roi_size[d] < image_size[d]:
                starts[d].append(image_size[d] - roi_size[d])
        slices = [tuple(slice(s, s + r) for s, r in zip(start, roi_size))
                  for start in itertools.product(*starts)]
        importance_map = compute_importance_map(roi_size)
        output_image, count_map = None, None
        for sl in slices:
            window = inputs[(slice(None), slice(None)) + sl]
            seg_prob = predictor(window)
            if output_image is None:
                output_shape = (batch_size, seg_prob.shape[1]) + image_size
                output_image = torch.zeros(output_shape, dtype=torch.float32)
                count_map = torch.zeros(output_shape, dtype=torch.float32)
            output_image[(slice(None), slice(None)) + sl] += seg_prob * importance_map
            count_map[(slice(None), slice(None)) + sl] += importance_map
        output_image = output_image / count_map
        final_slicing = []
        for sp in range(num_spatial_dims):
            slice_dim = slice(pad_size[sp * 2],
                              image_size_[num_spatial_dims - sp - 1] + pad_size[sp * 2])
            final_slicing.insert(0, slice_dim)
        return output_image[(slice(None), slice(None)) + tuple(final_slicing)], len(slices)

    model = nn.Sequential(nn.Conv3d(1, 4, 3, padding=1), nn.PReLU(), nn.Conv3d(4, 2, 1),
                          nn.Softmax(dim=1))
    fill_(torch, model, rng, 0.4)
    res = {"importance": compute_importance_map((3, 4, 5))}
    volume = normal(torch, rng, 1, 1, 7, 9, 3)
    model.eval()
    with torch.no_grad():
        out, n = sliding_window_inference(volume, (4, 4, 4), model, overlap=0.25)
    res.update(out=out, n=[n], shape=list(out.shape))
    model.requires_grad_(False)
    x = volume.clone().requires_grad_(True)
    out, _ = sliding_window_inference(x, (4, 6, 4), model, overlap=0.5)
    (out[:, 1] ** 2).mean().backward()
    res.update(input_grad=x.grad, frozen=[p.grad is None for p in model.parameters()],
               requires=[out.requires_grad, out.is_leaf])
    return res


PROGRAMS = [unet3d_program, vnet_program, nnunet_program, sliding_window_program]


# step-0 gradients agree at 1e-5; Adam's normalised steps amplify float32 accumulation order
TOLERANCES = {"unet3d_program": (1e-4, 1e-6)}


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
