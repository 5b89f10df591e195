"""Attribution methods written as Captum writes them in torch, run once with `torch` bound to
ember and once to PyTorch from the same NumPy weights and data: integrated gradients (Riemann
trapezoid and Gauss-Legendre alphas, scaled inputs batched and split by internal_batch_size,
gradients of ``torch.unbind(outputs)``, convergence delta), NoiseTunnel over saliency and input x
gradient (smoothgrad, smoothgrad_sq, vargrad; NumPy noise), DeepLIFT's rescale rule by
``register_full_backward_hook`` on the nonlinearities of a doubled input/baseline batch,
Grad-CAM and Grad-CAM++ through forward hooks and full backward hooks (and the pytorch-grad-cam
tensor-hook variant), guided backprop and deconvolution by replacing ReLU's gradient in a hook
(full and legacy ``register_backward_hook``), and occlusion / feature ablation with sliding
windows from ``F.unfold``/``F.fold`` and ``Tensor.unfold``, and Captum's layer/neuron methods
(hooks returning clones of the layer's output or input). Siblings: _mech (TransformerLens-style
caching and patching, logit lens, attention rollout, layer IG, probes), _sae (sparse
autoencoders, influence functions), _circuits (OV/QK circuits, Shapley, causal tracing, neuron
statistics); _fixes pins what they found."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _small_cnn(torch, in_ch=2, classes=3):
    """A Captum-tutorial classifier: conv/ReLU/conv/ReLU/pool/linear, every ReLU its own module
    (the attribution methods hook them)."""
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(in_ch, 4, 3, padding=1)
            self.relu1 = nn.ReLU()
            self.conv2 = nn.Conv2d(4, 5, 3, padding=1)
            self.relu2 = nn.ReLU()
            self.pool = nn.AdaptiveAvgPool2d(2)
            self.fc = nn.Linear(20, classes)

        def forward(self, x):
            x = self.relu2(self.conv2(self.relu1(self.conv1(x))))
            return self.fc(torch.flatten(self.pool(x), 1))
    return Net()


def _approximation(method, n_steps):
    """Captum's approximation_parameters: step sizes and alphas as Python lists (NumPy's
    leggauss for Gauss-Legendre, as Captum computes it)."""
    if method == "riemann_trapezoid":
        step_sizes = [1 / (n_steps - 1)] * n_steps
        step_sizes[0] = step_sizes[-1] = step_sizes[0] / 2
        alphas = list(np.linspace(0, 1, n_steps))
        return step_sizes, alphas
    x, w = np.polynomial.legendre.leggauss(n_steps)
    return list(0.5 * w), list(0.5 * (x + 1))


def integrated_gradients_program(torch):
    """IntegratedGradients.attribute as Captum runs it: scaled inputs ``baseline + alpha * (input
    - baseline)`` concatenated over alphas, forward in chunks of internal_batch_size, targets
    picked by ``gather``, ``autograd.grad(torch.unbind(outputs), inputs)``, gradients scaled by
    step sizes, reshaped and summed over steps, times ``inputs - baselines``; the convergence
    delta from the end-point outputs; two methods, a multi-input model, a per-example target."""
    rng = np.random.default_rng(2901)
    model = _small_cnn(torch)
    fill_(torch, model, rng)
    model.eval()
    x = normal(torch, rng, 2, 2, 5, 5)
    baseline = torch.zeros_like(x)
    target = torch.tensor([0, 2])

    def forward_target(inp):
        out = model(inp)
        n = out.shape[0] // target.shape[0]
        return torch.gather(out, 1, target.repeat(n).reshape(-1, 1)).squeeze(-1)

    def ig(method, n_steps, internal_batch_size):
        step_sizes, alphas = _approximation(method, n_steps)
        scaled = torch.cat([baseline + alpha * (x - baseline) for alpha in alphas], dim=0)
        grads = []
        for chunk in torch.split(scaled, internal_batch_size * x.shape[0]):
            chunk = chunk.detach().requires_grad_()
            with torch.autograd.set_grad_enabled(True):
                outputs = forward_target(chunk)
                (g,) = torch.autograd.grad(torch.unbind(outputs), chunk)
            grads.append(g)
        grads = torch.cat(grads)
        scaled_grads = grads.contiguous().view(n_steps, -1) * torch.tensor(step_sizes).view(
            n_steps, 1).to(grads.device)
        total = torch.sum(scaled_grads.reshape((n_steps, x.shape[0]) + x.shape[1:]), dim=0)
        attributions = total * (x - baseline)
        with torch.no_grad():
            start, end = forward_target(baseline), forward_target(x)
        delta = attributions.view(x.shape[0], -1).sum(1) - (end - start)
        return attributions, delta

    res = {}
    for method, n, ibs in (("riemann_trapezoid", 8, 3), ("gausslegendre", 6, 6)):
        attr, delta = ig(method, n, ibs)
        res[method] = attr
        res[method + "_delta"] = delta
        res[method + "_flags"] = [attr.requires_grad, attr.is_contiguous(), attr.grad_fn is None]

    # multi-input forward (Captum's tuple inputs), two baselines, a scalar-per-example target
    w = normal(torch, rng, 4, 3)

    def two_input(a, b):
        return (torch.tanh(a @ w) * b).sum(-1)

    a, b = normal(torch, rng, 3, 4), normal(torch, rng, 3, 3)
    base_a, base_b = torch.full_like(a, 0.1), torch.zeros_like(b)
    step_sizes, alphas = _approximation("gausslegendre", 5)
    sa = torch.cat([base_a + al * (a - base_a) for al in alphas]).requires_grad_()
    sb = torch.cat([base_b + al * (b - base_b) for al in alphas]).requires_grad_()
    ga, gb = torch.autograd.grad(torch.unbind(two_input(sa, sb)), (sa, sb))
    ss = torch.tensor(step_sizes).view(5, 1, 1)
    res["multi"] = [(ga.view(5, 3, 4) * ss).sum(0) * (a - base_a),
                    (gb.view(5, 3, 3) * ss).sum(0) * (b - base_b)]
    return res


def noise_tunnel_program(torch):
    """NoiseTunnel around Saliency and InputXGradient: inputs repeat_interleave'd nt_samples
    times, NumPy Gaussian noise added, attributions per noisy sample, then smoothgrad (mean),
    smoothgrad_sq (mean of squares) and vargrad (mean of squares minus squared mean); saliency
    with ``abs=True`` and the model's parameters frozen by ``requires_grad_(False)``."""
    F = torch.nn.functional
    rng = np.random.default_rng(2902)
    model = _small_cnn(torch, classes=4)
    fill_(torch, model, rng)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    x = normal(torch, rng, 2, 2, 4, 4)
    nt = 5
    noise = normal(torch, rng, 2 * nt, 2, 4, 4) * 0.2
    target = torch.tensor([1, 3])

    def gradients(inp, tgt):
        inp = inp.clone().requires_grad_(True)
        out = F.softmax(model(inp), dim=1)
        selected = out[torch.arange(out.shape[0]), tgt]
        (g,) = torch.autograd.grad(selected.sum(), inp)
        return inp, g

    res = {}
    expanded = x.repeat_interleave(nt, dim=0) + noise
    tgt = target.repeat_interleave(nt)
    inp, g = gradients(expanded, tgt)
    for name, attr in (("saliency", g.abs()), ("ixg", inp * g)):
        attr = attr.detach().view(2, nt, *x.shape[1:])
        mean, sq = attr.mean(dim=1), (attr ** 2).mean(dim=1)
        res[name + "_smoothgrad"] = mean
        res[name + "_smoothgrad_sq"] = sq
        res[name + "_vargrad"] = sq - mean ** 2
    _, plain = gradients(x, target)
    res["saliency"] = plain.abs()
    res["grad_flags"] = [p.grad is None for p in model.parameters()]
    return res


def deeplift_program(torch):
    """DeepLIFT's rescale rule as Captum implements it: the model runs on ``cat([inputs,
    baselines])``; forward hooks stash each nonlinearity's input and output; full backward hooks
    replace grad_input by ``grad_output * delta_out / delta_in`` (the plain gradient where
    ``|delta_in| < eps``) for both halves; the multipliers times ``inputs - baselines`` are the
    attributions, checked against completeness; hooks removed afterwards."""
    nn = torch.nn
    rng = np.random.default_rng(2903)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 5), nn.Sigmoid(),
                          nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2))
    fill_(torch, model, rng, scale=0.6)
    x = normal(torch, rng, 3, 4)
    x[0, 1] = 0.0
    baseline = torch.zeros_like(x)
    baseline[:, 1] = 0.0
    eps = 1e-10
    handles = []

    def forward_hook(module, inputs, output):
        module.input = inputs[0].detach()
        module.output = output.detach()

    def backward_hook(module, grad_input, grad_output):
        delta_in = module.input[:3] - module.input[3:]
        delta_out = module.output[:3] - module.output[3:]
        delta_in, delta_out = torch.cat([delta_in, delta_in]), torch.cat([delta_out, delta_out])
        multiplier = torch.where(delta_in.abs() < eps, grad_input[0],
                                 grad_output[0] * delta_out / delta_in)
        return (multiplier,)

    for m in model.modules():
        if isinstance(m, (nn.ReLU, nn.Sigmoid, nn.Tanh)):
            handles.append(m.register_forward_hook(forward_hook))
            handles.append(m.register_full_backward_hook(backward_hook))
    both = torch.cat([x, baseline]).requires_grad_()
    out = model(both)
    res = {}
    for t in range(2):
        (g,) = torch.autograd.grad(out[:, t].sum(), both, retain_graph=t == 0)
        attr = (x - baseline) * g[:3]
        res["attr%d" % t] = attr
        res["delta%d" % t] = attr.sum(1) - (out[:3, t] - out[3:, t]).detach()
    for h in handles:
        h.remove()
    res["hooks_left"] = [len(m._forward_hooks) + len(m._backward_hooks) for m in model]
    plain = torch.cat([x, baseline]).requires_grad_()
    (g,) = torch.autograd.grad(model(plain)[:, 0].sum(), plain)
    res["plain_grad"] = g
    return res


def grad_cam_program(torch):
    """Grad-CAM and Grad-CAM++ on the last conv layer: activations from a forward hook,
    gradients from a full backward hook (Captum's LayerGradCam) and from a tensor hook registered
    on the output inside the forward hook (pytorch-grad-cam's ActivationsAndGradients); weights
    from the spatial mean (Grad-CAM) or the alpha formula with second and third gradient powers
    (Grad-CAM++), ReLU of the weighted sum, bilinear upsampling to the input and min-max
    normalisation; a score per class one-hot backward with ``retain_graph``."""
    F = torch.nn.functional
    rng = np.random.default_rng(2904)
    model = _small_cnn(torch, classes=3)
    fill_(torch, model, rng, scale=0.5)
    model.eval()
    x = normal(torch, rng, 2, 2, 6, 6)
    store = {}

    def fwd(module, inputs, output):
        store["act"] = output.detach()

        def save_grad(grad):
            store["tensor_grad"] = grad.detach()
        output.register_hook(save_grad)

    def bwd(module, grad_input, grad_output):
        store["grad"] = grad_output[0].detach()

    handles = [model.conv2.register_forward_hook(fwd),
               model.conv2.register_full_backward_hook(bwd)]
    res = {}
    out = model(x)
    for cls in range(2):
        model.zero_grad()
        one_hot = torch.zeros_like(out)
        one_hot[:, cls] = 1
        out.backward(gradient=one_hot, retain_graph=True)
        acts, grads = store["act"], store["grad"]
        res["same_grad%d" % cls] = [bool(torch.equal(grads, store["tensor_grad"]))]
        weights = grads.mean(dim=(2, 3), keepdim=True)
        cam = F.relu((weights * acts).sum(dim=1, keepdim=True))
        g2 = grads.pow(2)
        g3 = g2 * grads
        sum_acts = acts.sum(dim=(2, 3))
        aij = g2 / (2 * g2 + sum_acts[:, :, None, None] * g3 + 1e-7)
        aij = torch.where(grads != 0, aij, torch.zeros_like(aij))
        pp_weights = (torch.clamp(grads, min=0) * aij).sum(dim=(2, 3))
        cam_pp = F.relu((pp_weights[:, :, None, None] * acts).sum(1, keepdim=True))
        for name, c in (("cam", cam), ("campp", cam_pp)):
            up = F.interpolate(c, size=x.shape[-2:], mode="bilinear", align_corners=False)
            flat = up.view(up.size(0), -1)
            lo, hi = flat.min(1, keepdim=True)[0], flat.max(1, keepdim=True)[0]
            res["%s%d" % (name, cls)] = ((flat - lo) / (hi - lo + 1e-8)).view_as(up)
    res["fc_grad"] = model.fc.weight.grad
    for h in handles:
        h.remove()
    return res


def guided_backprop_program(torch):
    """Guided backprop and deconvolution as Captum's ModifiedReluGradientAttribution does them:
    every ReLU gets a full backward hook returning ``F.relu`` of grad_input (guided) or of
    grad_output (deconvolution); the older pytorch-cnn-visualizations form with the legacy
    ``register_backward_hook`` clamping grad_in[0]; and the guided Grad-CAM product."""
    F = torch.nn.functional
    rng = np.random.default_rng(2905)
    model = _small_cnn(torch, classes=3)
    fill_(torch, model, rng, scale=0.5)
    x = normal(torch, rng, 2, 2, 5, 5)
    res = {}

    def attribute(use_grad_output, legacy=False, model=model):
        relus = [model.relu1, model.relu2]

        def hook(module, grad_input, grad_output):
            chosen = grad_output if use_grad_output else grad_input
            return tuple(F.relu(g) for g in chosen)

        def legacy_hook(module, grad_in, grad_out):
            return (torch.clamp(grad_in[0], min=0.0),)
        if legacy:
            handles = [m.register_backward_hook(legacy_hook) for m in relus]
        else:
            handles = [m.register_full_backward_hook(hook) for m in relus]
        try:
            inp = x.clone().requires_grad_()
            out = model(inp)
            out.gather(1, torch.tensor([[2], [0]])).sum().backward()
            return inp.grad
        finally:
            for h in handles:
                h.remove()

    res["guided"] = attribute(False)
    res["deconv"] = attribute(True)
    try:        # the kind of backward hook sticks to a module after its hooks are removed
        attribute(False, legacy=True)
    except RuntimeError as e:
        res["mixed_kinds"] = [str(e)]
    fresh = _small_cnn(torch, classes=3)
    fresh.load_state_dict(model.state_dict())
    res["legacy_guided"] = attribute(False, legacy=True, model=fresh)
    inp = x.clone().requires_grad_()
    model(inp)[:, 1].sum().backward()
    res["vanilla"] = inp.grad
    res["guided_gradcam"] = res["guided"] * res["vanilla"].abs().sum(1, keepdim=True)
    return res


def occlusion_program(torch):
    """Occlusion and FeatureAblation as Captum computes them: sliding windows (kernel 3, stride
    2) as masks from ``F.fold`` of one-hot columns, each window replaced by the baseline in one
    batched forward, output differences spread over the window and divided by the per-pixel
    window count from ``F.fold(F.unfold(ones))``; ablation of grouped features by a
    feature_mask; a 1-D occlusion with ``Tensor.unfold``; all under ``torch.no_grad``."""
    F = torch.nn.functional
    rng = np.random.default_rng(2906)
    model = _small_cnn(torch, classes=3)
    fill_(torch, model, rng, scale=0.5)
    x = normal(torch, rng, 2, 2, 7, 7)
    target = torch.tensor([1, 2])
    res = {}
    with torch.no_grad():
        base_out = model(x).gather(1, target[:, None]).squeeze(1)
        k, s = 3, 2
        ones = torch.ones(1, 1, 7, 7)
        cols = F.unfold(ones, kernel_size=k, stride=s)
        n_win = cols.shape[-1]
        counts = F.fold(cols, output_size=(7, 7), kernel_size=k, stride=s)
        eye = torch.eye(n_win)
        masks = F.fold(cols.expand(n_win, -1, -1) * eye[:, None, :], (7, 7), k, stride=s)
        ablated = x[:, None] * (1 - masks[None]) + 0.0 * masks[None]
        outs = model(ablated.reshape(-1, 2, 7, 7)).view(2, n_win, -1)
        outs = outs.gather(2, target[:, None, None].expand(-1, n_win, 1)).squeeze(2)
        diffs = base_out[:, None] - outs
        attr = (diffs[:, :, None, None, None] * masks[None]).sum(1) / counts
        res["occlusion"] = attr.expand(-1, 2, -1, -1)
        res["n_windows"] = [n_win, int(counts.max().item())]

        feature_mask = torch.arange(49).reshape(7, 7) // 10
        n_feat = int(feature_mask.max().item()) + 1
        fa = torch.zeros_like(x)
        for f in range(n_feat):
            m = (feature_mask == f).to(x.dtype)
            out = model(x * (1 - m) + 0.5 * m).gather(1, target[:, None]).squeeze(1)
            fa += (base_out - out)[:, None, None, None] * m
        res["feature_ablation"] = fa

        seq = normal(torch, rng, 2, 10)
        w = normal(torch, rng, 10)
        windows = torch.arange(10.0).unfold(0, 4, 3)
        res["windows"] = windows
        occ = torch.zeros_like(seq)
        for win in windows.long():
            mask = torch.zeros(10).index_fill_(0, win, 1.0)
            occ += ((seq * w).sum(1) - ((seq * (1 - mask)) * w).sum(1))[:, None] * mask
        res["occ1d"] = occ
    return res


def layer_attribution_program(torch):
    """Captum's layer and neuron methods through its ``_forward_layer_eval`` machinery: a forward
    hook saving the layer output and returning clones of it (``forward_hook_with_return``), a
    forward pre-hook doing the same for the layer input (``attribute_to_layer_input``) after
    ``requires_grad_()`` on it, gradients by ``autograd.grad`` of the selected outputs with
    respect to the saved tensors; LayerGradientXActivation, LayerConductance (scaled inputs, the
    layer gradients times the steps' activation differences) and NeuronGradient of one unit,
    with ``torch.enable_grad()`` inside ``torch.no_grad()`` as Captum's attribute runs."""
    rng = np.random.default_rng(2907)
    model = _small_cnn(torch, classes=3)
    fill_(torch, model, rng, scale=0.5)
    model.eval()
    x = normal(torch, rng, 2, 2, 5, 5)
    target = torch.tensor([2, 1])

    def layer_eval(inputs, layer, to_input=False):
        saved = {}

        def hook(module, inp, out=None):
            tensors = inp if to_input else (out,)
            for t in tensors:
                if not t.requires_grad:
                    t.requires_grad_()
            saved["layer"] = tensors
            clones = tuple(t.clone() for t in tensors)
            return clones if to_input else clones[0]
        handle = (layer.register_forward_pre_hook(hook) if to_input
                  else layer.register_forward_hook(hook))
        try:
            out = model(inputs)
        finally:
            handle.remove()
        return out, saved["layer"]

    res = {}
    with torch.no_grad():
        with torch.enable_grad():
            out, (act,) = layer_eval(x, model.conv2)
            sel = out.gather(1, target[:, None])
            (g,) = torch.autograd.grad(torch.unbind(sel), act)
        res["grad_x_act"] = g * act
        res["act_requires"] = [act.requires_grad, g.requires_grad]
        with torch.enable_grad():
            out, (inp,) = layer_eval(x, model.conv1, to_input=True)
            (g_in,) = torch.autograd.grad(out[:, 0].sum(), inp)
        res["input_grad"] = g_in
        res["input_is_x"] = [inp is x, inp.requires_grad]
        n = 5
        alphas = torch.linspace(0, 1, n)
        scaled = torch.cat([a * x for a in alphas])
        with torch.enable_grad():
            out, (acts,) = layer_eval(scaled, model.relu1)
            sel = out.gather(1, target.repeat(n)[:, None])
            (layer_grads,) = torch.autograd.grad(torch.unbind(sel), acts)
        acts = acts.detach().view(n, 2, *acts.shape[1:])
        layer_grads = layer_grads.view(n, 2, *layer_grads.shape[1:])
        res["conductance"] = (layer_grads[:-1] * (acts[1:] - acts[:-1])).sum(0)
        with torch.enable_grad():
            xi = x.clone().requires_grad_()
            _, (act2,) = layer_eval(xi, model.conv2)
            (neuron_grad,) = torch.autograd.grad(act2[:, 3, 2, 2].sum(), xi)
        res["neuron_grad"] = neuron_grad
    res["hooks_left"] = [len(model.conv1._forward_pre_hooks), len(model.conv2._forward_hooks)]
    return res


PROGRAMS = [integrated_gradients_program, noise_tunnel_program, deeplift_program,
            grad_cam_program, guided_backprop_program, occlusion_program,
            layer_attribution_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 convolution / sum accumulation order
        "integrated_gradients_program": (1e-4, 1e-5),
        "noise_tunnel_program": (1e-4, 1e-5),
        "grad_cam_program": (1e-4, 1e-5),
        "occlusion_program": (1e-4, 1e-5),
        "layer_attribution_program": (1e-4, 1e-5),
    })
