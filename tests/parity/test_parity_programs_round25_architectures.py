"""Efficient convolutional architectures written as their reference code writes them in torch,
run once with `torch` bound to ember and once to PyTorch from the same NumPy weights and data:
MobileNetV2 / EfficientNet / MobileNetV3 blocks (depthwise convs, ReLU6 / Hardswish / SiLU,
squeeze-excitation, stochastic depth and drop_connect, BatchNorm with momentum 0.01 and eps
1e-3, channels_last, TF-style static same padding, RMSprop with label smoothing, an EMA copy,
BN recalibration, bfloat16 autocast inference) and ShuffleNet / ResNeXt / CoordConv / Octave
convolutions. Attention variants are in test_parity_programs_round25_architectures_attention.py
and set models in test_parity_programs_round25_architectures_sets.py; what the three found is
pinned in test_parity_programs_round25_architectures_fixes.py."""

import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _fill_weights(lib, model, rng, scale=0.3):
    """N(0, scale) into every conv / linear parameter; norms keep their ones and zeros."""
    nn = lib.nn
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            fill_(lib, m, rng, scale)


# ------------------------------------------------------------------------ MobileNet / EfficientNet

def mobilenet_program(torch):
    """Inverted residuals (MobileNetV2), MBConv with squeeze-excitation and stochastic depth
    (EfficientNet), a Hardswish / hardsigmoid block (MobileNetV3); trained with RMSprop as the
    EfficientNet paper does, an EMA of the weights, then evaluated with top-k accuracy."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(250)
    res = {}

    def _make_divisible(v, divisor, min_value=None):
        if min_value is None:
            min_value = divisor
        new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
        if new_v < 0.9 * v:
            new_v += divisor
        return new_v

    res["divisible"] = [_make_divisible(c * 0.75, 8) for c in (16, 24, 40, 112)]

    class ConvBNActivation(nn.Sequential):
        def __init__(self, cin, cout, kernel_size=3, stride=1, groups=1, activation=nn.ReLU6):
            padding = (kernel_size - 1) // 2
            layers = [nn.Conv2d(cin, cout, kernel_size, stride, padding, groups=groups,
                                bias=False),
                      nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01)]
            if activation is not None:
                layers.append(activation(inplace=True))
            super().__init__(*layers)
            self.out_channels = cout

    class SqueezeExcitation(nn.Module):
        def __init__(self, cin, squeeze, activation=nn.SiLU, scale_activation=nn.Sigmoid):
            super().__init__()
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc1 = nn.Conv2d(cin, squeeze, 1)
            self.fc2 = nn.Conv2d(squeeze, cin, 1)
            self.activation = activation()
            self.scale_activation = scale_activation()

        def forward(self, x):
            scale = self.avgpool(x)
            scale = self.activation(self.fc1(scale))
            scale = self.scale_activation(self.fc2(scale))
            return scale * x

    def stochastic_depth(x, p, training):
        if not training or p == 0.0:
            return x
        survival_rate = 1.0 - p
        size = [x.shape[0]] + [1] * (x.ndim - 1)
        noise = torch.empty(size, dtype=x.dtype, device=x.device)
        noise = noise.bernoulli_(survival_rate)
        if survival_rate > 0.0:
            noise.div_(survival_rate)
        return x * noise

    class InvertedResidual(nn.Module):
        def __init__(self, inp, oup, stride, expand_ratio):
            super().__init__()
            hidden_dim = int(round(inp * expand_ratio))
            self.use_res_connect = stride == 1 and inp == oup
            layers = []
            if expand_ratio != 1:
                layers.append(ConvBNActivation(inp, hidden_dim, kernel_size=1))
            layers.extend([
                ConvBNActivation(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim),
                nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
                nn.BatchNorm2d(oup, eps=1e-3, momentum=0.01)])
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            if self.use_res_connect:
                return x + self.conv(x)
            return self.conv(x)

    class MBConv(nn.Module):
        def __init__(self, cin, cout, expand, kernel, stride, sd_prob):
            super().__init__()
            self.use_res_connect = stride == 1 and cin == cout
            hidden = _make_divisible(cin * expand, 8)
            self.block = nn.Sequential(
                ConvBNActivation(cin, hidden, 1, activation=nn.SiLU),
                ConvBNActivation(hidden, hidden, kernel, stride, groups=hidden,
                                 activation=nn.SiLU),
                SqueezeExcitation(hidden, max(1, cin // 4)),
                ConvBNActivation(hidden, cout, 1, activation=None))
            self.sd_prob = sd_prob

        def forward(self, x):
            result = self.block(x)
            if self.use_res_connect:
                result = stochastic_depth(result, self.sd_prob, self.training)
                result += x
            return result

    class V3Block(nn.Module):
        def __init__(self, c, hidden):
            super().__init__()
            self.expand = ConvBNActivation(c, hidden, 1, activation=nn.Hardswish)
            self.dw = ConvBNActivation(hidden, hidden, 5, groups=hidden, activation=nn.Hardswish)
            self.se = SqueezeExcitation(hidden, _make_divisible(hidden // 4, 8),
                                        activation=nn.ReLU, scale_activation=nn.Hardsigmoid)
            self.project = ConvBNActivation(hidden, c, 1, activation=None)

        def forward(self, x):
            return x + self.project(self.se(self.dw(self.expand(x))))

    class TinyEfficientNet(nn.Module):
        def __init__(self, num_classes=5, drop_connect_rate=0.0):
            super().__init__()
            self.features = nn.Sequential(
                ConvBNActivation(3, 8, stride=2, activation=nn.SiLU),
                InvertedResidual(8, 8, 1, 1),
                InvertedResidual(8, 12, 2, 6),
                MBConv(12, 12, 4, 3, 1, drop_connect_rate),
                MBConv(12, 16, 4, 5, 2, drop_connect_rate),
                V3Block(16, 24),
                ConvBNActivation(16, 32, 1, activation=nn.Hardswish))
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(nn.Dropout(p=0.2, inplace=True),
                                            nn.Linear(32, num_classes))
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out")
                    if m.bias is not None:
                        nn.init.zeros_(m.bias)
                elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)
                elif isinstance(m, nn.Linear):
                    init_range = 1.0 / math.sqrt(m.out_features)
                    nn.init.uniform_(m.weight, -init_range, init_range)
                    nn.init.zeros_(m.bias)

        def forward(self, x):
            x = self.features(x)
            x = self.avgpool(x)
            x = torch.flatten(x, 1)
            return self.classifier(x)

    model = TinyEfficientNet()
    _fill_weights(torch, model, rng, 0.3)
    res["n_params"] = [sum(p.numel() for p in model.parameters())]
    res["bn_meta"] = [float(model.features[0][1].momentum), float(model.features[0][1].eps)]
    model = model.to(memory_format=torch.channels_last)
    res["channels_last"] = [model.features[0][0].weight.is_contiguous(
        memory_format=torch.channels_last)]

    # the drop-path rate is 0 while training here (random draws differ between libraries);
    # its train-time behaviour is checked on its own below
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    optimizer = torch.optim.RMSprop([{"params": decay, "weight_decay": 1e-5},
                                     {"params": no_decay, "weight_decay": 0.0}],
                                    lr=0.016 * 6 / 256, alpha=0.9, eps=1e-3, momentum=0.9)
    adjust = 1 * 4 * 0.99998 / 6
    alpha = 1.0 - 0.99998
    alpha = min(1.0, alpha * adjust)

    class ExponentialMovingAverage(torch.optim.swa_utils.AveragedModel):
        def __init__(self, model, decay, device="cpu"):
            def ema_avg(avg_model_param, model_param, num_averaged):
                return decay * avg_model_param + (1 - decay) * model_param
            super().__init__(model, device, ema_avg, use_buffers=True)

    ema = ExponentialMovingAverage(model, decay=1.0 - 0.2)
    x = normal(torch, rng, 6, 3, 16, 16).contiguous(memory_format=torch.channels_last)
    y = torch.from_numpy(rng.integers(0, 5, 6))
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    res["losses"], res["grad_norms"] = [], []
    model.train()
    for _ in range(4):
        optimizer.zero_grad(set_to_none=True)
        out = model(x)
        loss = criterion(out, y)
        loss.backward()
        res["grad_norms"].append(nn.utils.clip_grad_norm_(model.parameters(), 2.0).item())
        optimizer.step()
        ema.update_parameters(model)
        res["losses"].append(loss.item())
    res["alpha"] = [alpha]
    res["ema_n"] = [int(ema.n_averaged.item())]
    res["running_mean"] = model.features[3].block[1][1].running_mean.clone()
    res["running_var"] = model.features[5].se.fc1.weight.new_tensor(
        model.features[5].dw[1].running_var.tolist())
    res["num_batches"] = [int(model.features[1].conv[0][1].num_batches_tracked)]
    res["dw_weight"] = model.features[2].conv[1][0].weight
    res["rms_square_avg"] = optimizer.state[model.classifier[1].weight]["square_avg"]

    # BN recalibration before evaluation: cumulative running statistics over a few batches
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None
    with torch.no_grad():
        for i in range(3):
            model(x[2 * i:2 * i + 2])
    res["recalibrated_var"] = model.features[4].block[0][1].running_var
    res["recalibrated_batches"] = [int(model.features[4].block[0][1].num_batches_tracked)]
    model.eval()
    ema.eval()
    with torch.inference_mode():
        logits = model(x)
        ema_logits = ema(x)
        probs = logits.softmax(dim=1)
        maxk = 2
        _, pred = logits.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(y[None])
        res["acc"] = [correct[:k].flatten().sum(dtype=torch.float32).item() * 100.0 / 6
                      for k in (1, 2)]
    res["logits"] = logits
    res["ema_logits"] = ema_logits
    res["probs"] = probs
    res["logits_meta"] = [logits.requires_grad, logits.is_inference(), _name(pred.dtype)]

    # bfloat16 autocast inference: convs and linears run in bfloat16, the rest follows
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        stem = model.features[0](x)
        se_scale = model.features[3].block[2].avgpool(stem)
        bf16_logits = model(x)
    res["autocast_dtypes"] = [_name(t.dtype) for t in (stem, se_scale, bf16_logits)]
    res["autocast_close"] = [bool((bf16_logits.float() - logits).abs().max() < 0.5)]
    # (not the logits themselves: 4 training steps' float32 sums, ordered unlike torch's, move
    # some a bfloat16 step, as channels_last vs contiguous_format does within torch on 1 thread)
    res["autocast_near_float"] = [bool((bf16_logits.float() - logits).abs().max() < 2 ** -4)]
    res["autocast_stem"] = stem

    # the TF-ported EfficientNet's pieces: static "same" padding, drop_connect from uniform
    # noise, and the memory-efficient swish as a custom Function
    class Conv2dStaticSamePadding(nn.Conv2d):
        def __init__(self, cin, cout, kernel_size, stride=1, image_size=None, **kwargs):
            super().__init__(cin, cout, kernel_size, stride, **kwargs)
            self.stride = self.stride if len(self.stride) == 2 else [self.stride[0]] * 2
            ih, iw = (image_size, image_size) if isinstance(image_size, int) else image_size
            kh, kw = self.weight.size()[-2:]
            sh, sw = self.stride
            oh, ow = math.ceil(ih / sh), math.ceil(iw / sw)
            pad_h = max((oh - 1) * self.stride[0] + (kh - 1) * self.dilation[0] + 1 - ih, 0)
            pad_w = max((ow - 1) * self.stride[1] + (kw - 1) * self.dilation[1] + 1 - iw, 0)
            if pad_h > 0 or pad_w > 0:
                self.static_padding = nn.ZeroPad2d((pad_w // 2, pad_w - pad_w // 2,
                                                    pad_h // 2, pad_h - pad_h // 2))
            else:
                self.static_padding = nn.Identity()

        def forward(self, x):
            x = self.static_padding(x)
            return F.conv2d(x, self.weight, self.bias, self.stride, self.padding,
                            self.dilation, self.groups)

    class SwishImplementation(torch.autograd.Function):
        @staticmethod
        def forward(ctx, i):
            result = i * torch.sigmoid(i)
            ctx.save_for_backward(i)
            return result

        @staticmethod
        def backward(ctx, grad_output):
            i = ctx.saved_tensors[0]
            sigmoid_i = torch.sigmoid(i)
            return grad_output * (sigmoid_i * (1 + i * (1 - sigmoid_i)))

    def drop_connect(inputs, p, training, rand):
        if not training:
            return inputs
        keep_prob = 1 - p
        random_tensor = keep_prob
        random_tensor += rand
        binary_tensor = torch.floor(random_tensor)
        return inputs / keep_prob * binary_tensor

    same = Conv2dStaticSamePadding(3, 6, 3, stride=2, image_size=(16, 15), bias=False)
    same_dw = nn.Conv2d(6, 6, 3, padding="same", groups=6, dilation=2)
    fill_(torch, same, rng, 0.3)
    fill_(torch, same_dw, rng, 0.3)
    xs = normal(torch, rng, 2, 3, 16, 15).requires_grad_()
    hs = SwishImplementation.apply(same_dw(same(xs)))
    rand = torch.from_numpy(rng.uniform(0, 1, (2, 1, 1, 1)).astype(np.float32))
    hs = drop_connect(hs, 0.5, True, rand)
    hs.square().mean().backward()
    res["same_pad"] = [str(same.static_padding), list(hs.shape)]
    res["same_out"] = hs
    res["same_grad"] = xs.grad
    res["same_weight_grad"] = same.weight.grad
    res["swish_node"] = [type(hs.grad_fn).__name__, type(
        SwishImplementation.apply(xs).grad_fn).__name__]

    # stochastic depth in train mode: each sample is dropped (0) or scaled by 1 / survival
    h = torch.ones(64, 3, 2, 2)
    dropped = stochastic_depth(h, 0.25, True)
    per_sample = dropped.flatten(1)
    res["sd_values"] = sorted({round(v, 5) for v in per_sample.unique().tolist()})
    res["sd_constant_per_sample"] = [bool((per_sample == per_sample[:, :1]).all())]
    res["sd_eval_is_identity"] = [stochastic_depth(h, 0.25, False) is h]
    # hardswish / relu6 / hardsigmoid / silu at their breakpoints
    pts = torch.tensor([-4.0, -3.0, -1.5, 0.0, 1.5, 3.0, 6.0, 7.0], requires_grad=True)
    acts = F.hardswish(pts) + F.relu6(pts) + F.hardsigmoid(pts) + F.silu(pts)
    acts.sum().backward()
    res["acts"] = acts
    res["acts_grad"] = pts.grad
    return res


# ------------------------------------------------------- ShuffleNet / ResNeXt / CoordConv / Octave

def shufflenet_program(torch):
    """ShuffleNetV2 units (chunk, channel shuffle by view/transpose), a ResNeXt bottleneck with
    grouped convs and zero-init residual BN, CoordConv coordinate channels, and an Octave
    convolution's high/low frequency branches; trained with SGD + Nesterov and OneCycleLR."""
    nn = torch.nn
    F = nn.functional
    rng = np.random.default_rng(251)
    res = {}

    def channel_shuffle(x, groups):
        batchsize, num_channels, height, width = x.size()
        channels_per_group = num_channels // groups
        x = x.view(batchsize, groups, channels_per_group, height, width)
        x = torch.transpose(x, 1, 2).contiguous()
        return x.view(batchsize, -1, height, width)

    probe = torch.arange(2 * 6 * 2 * 2, dtype=torch.float32).view(2, 6, 2, 2)
    shuffled = channel_shuffle(probe, 3)
    res["shuffle_order"] = shuffled[0, :, 0, 0].long().tolist()
    res["shuffle_module_same"] = [bool(torch.equal(nn.ChannelShuffle(3)(probe), shuffled)),
                                  bool(torch.equal(F.channel_shuffle(probe, 3), shuffled))]

    class ShuffleUnit(nn.Module):
        def __init__(self, inp, oup, stride):
            super().__init__()
            self.stride = stride
            branch_features = oup // 2
            if stride > 1:
                self.branch1 = nn.Sequential(
                    nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False),
                    nn.BatchNorm2d(inp),
                    nn.Conv2d(inp, branch_features, 1, 1, 0, bias=False),
                    nn.BatchNorm2d(branch_features), nn.ReLU(inplace=True))
            else:
                self.branch1 = nn.Sequential()
            self.branch2 = nn.Sequential(
                nn.Conv2d(inp if stride > 1 else branch_features, branch_features, 1, bias=False),
                nn.BatchNorm2d(branch_features), nn.ReLU(inplace=True),
                nn.Conv2d(branch_features, branch_features, 3, stride, 1,
                          groups=branch_features, bias=False),
                nn.BatchNorm2d(branch_features),
                nn.Conv2d(branch_features, branch_features, 1, bias=False),
                nn.BatchNorm2d(branch_features), nn.ReLU(inplace=True))

        def forward(self, x):
            if self.stride == 1:
                x1, x2 = x.chunk(2, dim=1)
                out = torch.cat((x1, self.branch2(x2)), dim=1)
            else:
                out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
            return channel_shuffle(out, 2)

    class Bottleneck(nn.Module):
        expansion = 2

        def __init__(self, inplanes, planes, stride=1, groups=4, base_width=8):
            super().__init__()
            width = int(planes * (base_width / 64.0)) * groups
            self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, planes * self.expansion, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(planes * self.expansion)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or inplanes != planes * self.expansion:
                self.downsample = nn.Sequential(
                    nn.Conv2d(inplanes, planes * self.expansion, 1, stride, bias=False),
                    nn.BatchNorm2d(planes * self.expansion))

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            return self.relu(out)

    class AddCoords(nn.Module):
        def __init__(self, with_r=False):
            super().__init__()
            self.with_r = with_r

        def forward(self, input_tensor):
            batch_size, _, x_dim, y_dim = input_tensor.size()
            xx_channel = torch.arange(x_dim).repeat(1, y_dim, 1)
            yy_channel = torch.arange(y_dim).repeat(1, x_dim, 1).transpose(1, 2)
            xx_channel = xx_channel.float() / (x_dim - 1)
            yy_channel = yy_channel.float() / (y_dim - 1)
            xx_channel = xx_channel * 2 - 1
            yy_channel = yy_channel * 2 - 1
            xx_channel = xx_channel.repeat(batch_size, 1, 1, 1).transpose(2, 3)
            yy_channel = yy_channel.repeat(batch_size, 1, 1, 1).transpose(2, 3)
            ret = torch.cat([input_tensor, xx_channel.type_as(input_tensor),
                             yy_channel.type_as(input_tensor)], dim=1)
            if self.with_r:
                rr = torch.sqrt(torch.pow(xx_channel.type_as(input_tensor) - 0.5, 2)
                                + torch.pow(yy_channel.type_as(input_tensor) - 0.5, 2))
                ret = torch.cat([ret, rr], dim=1)
            return ret

    def linspace_coords(x):
        b, _, h, w = x.shape
        ys = torch.linspace(-1, 1, h, device=x.device, dtype=x.dtype)
        xs = torch.linspace(-1, 1, w, device=x.device, dtype=x.dtype)
        grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
        coords = torch.stack((grid_x, grid_y), dim=0).unsqueeze(0).expand(b, -1, -1, -1)
        return torch.cat([x, coords], dim=1)

    class OctaveConv(nn.Module):
        def __init__(self, cin, cout, alpha=0.5):
            super().__init__()
            lin, lout = int(alpha * cin), int(alpha * cout)
            hin, hout = cin - lin, cout - lout
            self.h2g_pool = nn.AvgPool2d(kernel_size=(2, 2), stride=2)
            self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
            self.l2l = nn.Conv2d(lin, lout, 3, 1, 1)
            self.l2h = nn.Conv2d(lin, hout, 3, 1, 1)
            self.h2l = nn.Conv2d(hin, lout, 3, 1, 1)
            self.h2h = nn.Conv2d(hin, hout, 3, 1, 1)

        def forward(self, x):
            x_h, x_l = x
            x_h2l = self.h2g_pool(x_h)
            x_h2h = self.h2h(x_h)
            x_l2h = self.upsample(self.l2h(x_l))
            x_l2l = self.l2l(x_l)
            x_h2l = self.h2l(x_h2l)
            x_l2h = F.interpolate(x_l2h, size=x_h2h.shape[-2:], mode="bilinear",
                                  align_corners=False)
            return x_h2h + x_l2h, x_l2l + x_h2l

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.coords = AddCoords(with_r=True)
            self.stem = nn.Sequential(nn.Conv2d(6, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16),
                                      nn.ReLU(inplace=True))
            self.stage = nn.Sequential(ShuffleUnit(16, 16, 1), ShuffleUnit(16, 24, 2),
                                       ShuffleUnit(24, 24, 1))
            self.bottleneck = Bottleneck(24, 16, stride=1)
            self.octave = OctaveConv(34, 16)
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            x = self.stem(self.coords(x))
            x = self.bottleneck(self.stage(x))
            x = linspace_coords(x)
            hi, lo = x[:, :17], F.avg_pool2d(x[:, 17:], 2)
            hi, lo = self.octave((hi, lo))
            x = hi + F.interpolate(lo, scale_factor=2, mode="nearest")
            return self.fc(F.adaptive_avg_pool2d(x, (1, 1)).flatten(1))

    model = Net()
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
    _fill_weights(torch, model, rng, 0.3)
    for m in model.modules():
        if isinstance(m, Bottleneck):
            nn.init.constant_(m.bn3.weight, 0)
    x = normal(torch, rng, 4, 3, 8, 8)
    res["coords"] = model.coords(x)[:, 3:]
    res["linspace_coords"] = linspace_coords(x)[:, 3:]
    y = torch.from_numpy(rng.integers(0, 4, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                                weight_decay=4e-5)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=5)
    res["losses"], res["lrs"] = [], []
    for _ in range(4):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        res["losses"].append(loss.item())
        res["lrs"].append(scheduler.get_last_lr()[0])
    res["bn3_weight"] = model.bottleneck.bn3.weight
    res["grouped_grad"] = model.bottleneck.conv2.weight.grad
    res["dw_grad"] = model.stage[1].branch1[0].weight.grad
    res["octave_weight"] = model.octave.l2h.weight
    model.eval()
    with torch.no_grad():
        res["eval_out"] = model(x)
    res["momentum"] = [optimizer.param_groups[0]["momentum"]]
    return res


PROGRAMS = [mobilenet_program, shufflenet_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
