"""PyTorch's beginner tutorials as programs, run once with `torch` bound to ember and once to
PyTorch from the same NumPy weights and data: the 60-minute blitz (tensor basics and the NumPy
bridge, Q = 3a^3 - b^2, LeNet, checkpointing), the quickstart's Dataset/DataLoader loops, hand
written backprop, DynamicNet, autograd mechanics (retain_grad,
backward(gradient=), hooks, autograd.functional), saved-tensor hooks, torch.func
(jacobians and hessians by composition, the neural tangent kernel), and fusing convolution
with batch norm in custom Functions over torch.nn.grad. The model tutorials are in
test_parity_programs_tutorial_models.py; "What is torch.nn really?" is round 7's."""

import io
import math
import random
import warnings

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def name_of(dtype):
    """`float32` for torch.float32 and ember.float32 alike."""
    return str(dtype).split(".")[-1]


def blitz_program(torch):
    """Tensor basics and the NumPy bridge, Q = 3a^3 - b^2, LeNet trained by SGD, a checkpoint
    of model and optimizer through torch.save/torch.load."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(10)
    res = {}
    x_data = torch.tensor([[1, 2], [3, 4]])
    x_np = torch.from_numpy(np.array([[1, 2], [3, 4]]))
    t = torch.ones(4, 4)
    t[:, 1] = 0
    y1, y2 = t @ t.T, t.matmul(t.T)
    y3 = torch.rand_like(y1)
    torch.matmul(t, t.T, out=y3)
    z3 = torch.rand_like(t)
    torch.mul(t, t, out=z3)
    agg = t.sum()
    t.add_(5)
    n = t.numpy()
    t.add_(1)
    np.add(n, 1, out=n)     # the array shares the tensor's memory
    res["flags"] = [x_np.dtype == torch.int64, torch.cat([t, t, t], dim=1).shape[1],
                    type(agg.item()).__name__, name_of(t.dtype)]
    res["basics"] = [torch.ones_like(x_data), y1, y2, y3, z3, t, agg]
    a = torch.tensor([2., 3.], requires_grad=True)
    b = torch.tensor([6., 4.], requires_grad=True)
    Q = 3 * a ** 3 - b ** 2
    Q.backward(gradient=torch.tensor([1., 1.]))
    res["ab"] = [a.grad, b.grad]
    res["ab_eq"] = [*(9 * a ** 2 == a.grad).tolist(), *(-2 * b == b.grad).tolist()]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = nn.Conv2d(1, 6, 5), nn.Conv2d(6, 16, 5)
            self.fc1, self.fc2 = nn.Linear(16 * 5 * 5, 120), nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = x.view(-1, self.num_flat_features(x))
            return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))

        def num_flat_features(self, x):
            num = 1
            for s in x.size()[1:]:
                num *= s
            return num

    net = Net()
    fill_(torch, net, rng, 0.1)
    params = list(net.parameters())
    res["nparams"] = [len(params), tuple(params[0].size()) == (6, 1, 5, 5)]
    inp = normal(torch, rng, 2, 1, 32, 32)
    out = net(inp)
    net.zero_grad()
    out.backward(normal(torch, rng, 2, 10))
    res["conv1_bias_grad"] = net.conv1.bias.grad
    target = normal(torch, rng, 10).view(1, -1)
    crit = nn.MSELoss()
    loss = crit(net(inp[:1]), target)
    res["fns"] = [type(loss.grad_fn).__name__, type(loss.grad_fn.next_functions[0][0]).__name__]
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    res["loss"] = []
    for _ in range(3):
        opt.zero_grad()
        loss = crit(net(inp[:1]), target)
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["out"] = net(inp)
    buf = io.BytesIO()
    torch.save({"model": net.state_dict(), "opt": opt.state_dict(), "epoch": 3}, buf)
    buf.seek(0)
    checkpoint = torch.load(buf, weights_only=True)
    net2 = Net()
    net2.load_state_dict(checkpoint["model"])
    opt2 = torch.optim.SGD(net2.parameters(), lr=0.5)
    opt2.load_state_dict(checkpoint["opt"])
    res["checkpoint"] = [checkpoint["epoch"], opt2.param_groups[0]["lr"],
                         *checkpoint["opt"]["param_groups"][0]["params"]]
    res["reloaded"] = net2(inp)
    return res


def quickstart_program(torch):
    """Quickstart: a custom Dataset with a one-hot target transform (scatter_ with value=),
    NeuralNetwork with nn.Flatten, Softmax(dim=1) prediction, train_loop and test_loop."""
    nn = torch.nn
    Dataset, DataLoader = torch.utils.data.Dataset, torch.utils.data.DataLoader
    rng = np.random.default_rng(20)
    images = rng.random((30, 6, 6)).astype(np.float32)
    labels = rng.integers(0, 4, 30)

    class ImageDataset(Dataset):
        def __init__(self, transform=None, target_transform=None):
            self.transform, self.target_transform = transform, target_transform

        def __len__(self):
            return len(labels)

        def __getitem__(self, idx):
            image, label = torch.from_numpy(images[idx]), int(labels[idx])
            if self.transform:
                image = self.transform(image)
            if self.target_transform:
                label = self.target_transform(label)
            return image, label

    def one_hot(y):
        return torch.zeros(4, dtype=torch.float).scatter_(0, torch.tensor(y), value=1)

    class NeuralNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.linear_relu_stack = nn.Sequential(
                nn.Linear(36, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))

        def forward(self, x):
            return self.linear_relu_stack(self.flatten(x))

    model = NeuralNetwork()
    fill_(torch, model, rng)
    pred_probab = nn.Softmax(dim=1)(model(normal(torch, rng, 1, 6, 6)))
    train_dl = DataLoader(ImageDataset(), batch_size=8)
    test_dl = DataLoader(ImageDataset(transform=lambda x: x * 0.5), batch_size=16)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    res = {"target": ImageDataset(target_transform=one_hot)[3][1], "probs": pred_probab,
           "y_pred": pred_probab.argmax(1).tolist(),
           "params": [f"{n} {list(p.size())}" for n, p in model.named_parameters()],
           "train": [], "test": [], "correct": []}
    for _ in range(2):
        model.train()
        for x, y in train_dl:
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            res["train"].append(loss.item())
        model.eval()
        test_loss, correct = 0, 0
        with torch.no_grad():
            for x, y in test_dl:
                pred = model(x)
                test_loss += loss_fn(pred, y).item()
                correct += (pred.argmax(1) == y).type(torch.float).sum().item()
        res["test"].append(test_loss / len(test_dl))
        res["correct"].append(correct / len(test_dl.dataset))
    return res


def manual_backprop_program(torch):
    """A two-layer net with hand-written backprop on tensors (clamp, mm, clone, boolean-mask
    assignment, in-place updates), then the same net through autograd under no_grad updates."""
    rng = np.random.default_rng(21)
    x, y = normal(torch, rng, 16, 10), normal(torch, rng, 16, 3)
    w1, w2 = normal(torch, rng, 10, 12), normal(torch, rng, 12, 3)
    lr, manual = 1e-4, []
    for _ in range(5):
        h = x.mm(w1)
        h_relu = h.clamp(min=0)
        y_pred = h_relu.mm(w2)
        manual.append((y_pred - y).pow(2).sum().item())
        grad_y_pred = 2.0 * (y_pred - y)
        grad_w2 = h_relu.t().mm(grad_y_pred)
        grad_h = grad_y_pred.mm(w2.t()).clone()
        grad_h[h < 0] = 0
        w1 -= lr * x.t().mm(grad_h)
        w2 -= lr * grad_w2
    a1, a2 = w1.clone().requires_grad_(True), w2.clone().requires_grad_(True)
    auto = []
    for _ in range(5):
        loss = (x.mm(a1).clamp(min=0).mm(a2) - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            a1 -= lr * a1.grad
            a2 -= lr * a2.grad
            a1.grad.zero_()
            a2.grad.zero_()
        auto.append(loss.item())
    return {"manual": manual, "auto": auto, "w1": w1, "a1": a1}


def dynamic_net_program(torch):
    """DynamicNet: 0-dim Parameters, a random depth reusing one weight, SGD with momentum;
    the polynomial as Linear + Flatten(0, 1) over x.unsqueeze(-1).pow(tensor); a float64 fit
    with gradients by hand."""
    random.seed(0)
    rng = np.random.default_rng(1)

    class DynamicNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c, self.d, self.e = (torch.nn.Parameter(torch.randn(()))
                                                      for _ in range(5))

        def forward(self, x):
            y = self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3
            for exp in range(4, random.randint(4, 6)):
                y = y + self.e * x ** exp
            return y

    x = torch.linspace(-math.pi, math.pi, 200)
    y = torch.sin(x)
    model = DynamicNet()
    fill_(torch, model, rng, 0.1)
    crit = torch.nn.MSELoss(reduction="sum")
    opt = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
    res = {"loss": [], "linear": []}
    for _ in range(20):
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    xx = x.unsqueeze(-1).pow(torch.tensor([1, 2, 3]))
    linear = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    fill_(torch, linear, rng, 0.1)
    opt = torch.optim.RMSprop(linear.parameters(), lr=1e-3)
    for _ in range(10):
        loss = torch.nn.functional.mse_loss(linear(xx), y, reduction="sum")
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["linear"].append(loss.item())
    a, b, c, d = (torch.tensor(v, dtype=torch.float64) for v in rng.standard_normal(4) * 0.1)
    xd, yd = x.double(), y.double()
    for _ in range(5):
        grad = 2.0 * (a + b * xd + c * xd ** 2 + d * xd ** 3 - yd)
        a -= 1e-6 * grad.sum()
        b -= 1e-6 * (grad * xd).sum()
        c -= 1e-6 * (grad * xd ** 2).sum()
        d -= 1e-6 * (grad * xd ** 3).sum()
    res.update(xx=xx, xx_dtype=[name_of(xx.dtype)], abcd=[a.item(), b.item(), c.item(), d.item()],
               w=linear[0].weight, params=[model.a, model.e])
    return res


def autograd_mechanics_program(torch):
    """retain_grad, backward(gradient=v) of a vector, tensor hooks that change the gradient,
    full backward (pre) hooks on modules, autograd.functional's jacobian in each strategy,
    hessian, vjp, jvp, hvp, vhp, and an hvp differentiated again."""
    nn, AF = torch.nn, torch.autograd.functional
    rng = np.random.default_rng(3)
    res = {}
    x = normal(torch, rng, 3).requires_grad_()
    y = x * 2
    y.retain_grad()
    while y.data.norm() < 100:
        y = y * 2
    y.backward(torch.tensor([0.1, 1.0, 0.0001], dtype=torch.float))
    res["xgrad"], res["y"] = x.grad, y
    a = normal(torch, rng, 4).requires_grad_()
    b = a * a
    b.retain_grad()
    seen = []
    handle = b.register_hook(lambda g: seen.append(g.clone()) or g * 3)
    c = (b.sin() * 2).sum()
    c.backward(retain_graph=True)
    res["agrad"], res["bgrad"], res["seen"] = a.grad.clone(), b.grad, seen[0]
    handle.remove()
    a.grad = None
    c.backward()
    res["agrad2"] = a.grad
    res["flags"] = [b.is_leaf, a.is_leaf, b.requires_grad, c.grad_fn.name(),
                    type(b.grad_fn.next_functions[0][0]).__name__]
    lin = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    fill_(torch, lin, rng)
    grads = []
    handle = lin[1].register_full_backward_hook(
        lambda m, gi, go: grads.append((gi[0].clone(), go[0].clone())))
    pre = lin[2].register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))
    lin(normal(torch, rng, 5, 3)).sum().backward()
    (res["gi"], res["go"]), res["w0grad"] = grads[0], lin[0].weight.grad
    handle.remove()
    pre.remove()

    def f(x, y):
        return (x.exp() * y.sin()).sum(0) + x @ y

    inputs = (normal(torch, rng, 3, 3), normal(torch, rng, 3, 3))
    res["jac"] = list(AF.jacobian(f, inputs))
    res["jac_vectorized"] = list(AF.jacobian(f, inputs, vectorize=True))
    res["jac_forward"] = list(AF.jacobian(f, inputs, vectorize=True, strategy="forward-mode"))

    def g(x):
        return (x.pow(3) * x.roll(1)).sum()

    x0, v = normal(torch, rng, 4), normal(torch, rng, 4)
    res["hessian"] = AF.hessian(g, x0)
    for name, fn in (("vjp", AF.vjp), ("jvp", AF.jvp), ("hvp", AF.hvp), ("vhp", AF.vhp)):
        res[name] = list(fn(g, x0, v) if name != "vjp" else fn(g, x0))
    xg = x0.clone().requires_grad_()
    AF.hvp(g, xg, v, create_graph=True)[1].sum().backward()
    res["hvp_grad"] = xg.grad
    return res


def saved_tensors_program(torch):
    """Hooks for saved tensors: _saved_self/_saved_other/_saved_result, pack/unpack hooks that
    transform what is saved, save_on_cpu, Node pre/post hooks, register_multi_grad_hook."""
    rng = np.random.default_rng(60)
    res = {}
    a = normal(torch, rng, 5).requires_grad_()
    y = a.pow(2)
    res["saved"] = [y.grad_fn._saved_self is a, torch.equal(a, y.grad_fn._saved_self),
                    y.grad_fn._saved_exponent]
    y = a.exp()
    res["saved_result"] = [y.grad_fn._saved_result is y, torch.equal(y, y.grad_fn._saved_result)]
    x = normal(torch, rng, 5).requires_grad_()
    y = a * x
    res["other"] = [y.grad_fn._saved_other is a, y.grad_fn._saved_self is x]
    packed, unpacked = [], []

    def pack_hook(t):
        packed.append(tuple(t.shape))
        return t * 2

    def unpack_hook(t):
        unpacked.append(tuple(t.shape))
        return t / 2

    with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = (a * x).sin()
    y.sum().backward()
    res["a_grad"], res["counts"] = a.grad, [len(packed), len(unpacked)]
    a.grad = None
    with torch.autograd.graph.save_on_cpu(pin_memory=False):
        z = (a.exp() * x).tanh().sum()
    z.backward()
    res["cpu_grad"], seen = a.grad, []
    w = a.cos()
    w.grad_fn.register_prehook(lambda go: seen.append("pre") or (go[0] * 3,))
    w.grad_fn.register_hook(lambda gi, go: seen.append("post"))
    a.grad = None
    w.sum().backward()
    res["seen"], res["hooked"], grads = seen, a.grad, {}
    p, q = normal(torch, rng, 3).requires_grad_(), normal(torch, rng, 3).requires_grad_()
    torch.autograd.graph.register_multi_grad_hook(
        (p, q), lambda gs: grads.setdefault("n", sum(g is not None for g in gs)))
    (p * q).sum().backward()
    res["multi"] = [grads["n"]]
    return res


def func_jacobians_program(torch):
    """Composing torch.func transforms: jacrev over argnums and in chunks, batch jacobians by
    vmap and by the sum trick, jacrev(jacrev), hessian, hvp as jvp(grad) and vjp(grad),
    jacfwd with has_aux, linearize, grad_and_value."""
    F, func = torch.nn.functional, torch.func
    rng = np.random.default_rng(30)
    weight, bias, x = normal(torch, rng, 4, 4), normal(torch, rng, 4), normal(torch, rng, 4)

    def predict(weight, bias, x):
        return F.linear(x, weight, bias).tanh()

    res = {"jr_x": func.jacrev(predict, argnums=2)(weight, bias, x),
           "jr_wb": list(func.jacrev(predict, argnums=(0, 1))(weight, bias, x)),
           "jf_x": func.jacfwd(predict, argnums=2)(weight, bias, x),
           "chunked": func.jacrev(predict, argnums=2, chunk_size=1)(weight, bias, x),
           "hessian": func.hessian(predict, argnums=2)(weight, bias, x),
           "revrev": func.jacrev(func.jacrev(predict, argnums=2), argnums=2)(weight, bias, x)}
    batch = normal(torch, rng, 3, 4)
    res["batch"] = func.vmap(func.jacrev(predict, argnums=2), in_dims=(None, None, 0))(
        weight, bias, batch)
    res["sum_trick"] = func.jacrev(lambda x: predict(weight, bias, x).sum(0))(batch).movedim(1, 0)

    def f(x):
        return x.sin().sum() * x.cos().prod()

    tangent = normal(torch, rng, 4)
    res["hvp_fwdrev"] = func.jvp(func.grad(f), (x,), (tangent,))[1]
    res["hvp_revrev"] = func.vjp(func.grad(f), x)[1](tangent)[0]

    def with_aux(x):
        y = x.exp()
        return y * 2, {"mean": y.mean()}

    jac, aux = func.jacfwd(with_aux, has_aux=True)(x)
    res["aux_jac"], res["aux"] = jac, aux["mean"]
    with warnings.catch_warnings():    # PyTorch's tracer warns about its own constants
        warnings.simplefilter("ignore")
        value, jvp_fn = func.linearize(lambda x: x.sin() * x, x)
    res["lin_value"], res["lin"] = value, jvp_fn(tangent)
    res["g"], res["v"] = func.grad_and_value(lambda w: predict(w, bias, x).pow(2).sum())(weight)
    return res


def ntk_program(torch):
    """The neural tangent kernel tutorial: jacrev of functional_call under vmap contracted by
    einsum (full and trace), and the same kernel from vjp/jvp products under nested vmap."""
    nn, F, func = torch.nn, torch.nn.functional, torch.func
    rng = np.random.default_rng(5)

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = nn.Conv2d(2, 4, 3), nn.Conv2d(4, 4, 3)
            self.fc = nn.Linear(16, 3)

        def forward(self, x):
            return self.fc(F.relu(self.conv2(F.relu(self.conv1(x)))).flatten(1))

    net = CNN()
    fill_(torch, net, rng)
    x1, x2 = normal(torch, rng, 3, 2, 6, 6), normal(torch, rng, 2, 2, 6, 6)
    params = {k: v.detach() for k, v in net.named_parameters()}

    def fnet_single(params, x):
        return func.functional_call(net, params, (x.unsqueeze(0),)).squeeze(0)

    def jacobians(x):
        jac = func.vmap(func.jacrev(fnet_single), (None, 0))(params, x)
        return [j.flatten(2) for j in jac.values()]

    j1, j2 = jacobians(x1), jacobians(x2)
    full = torch.stack([torch.einsum("Naf,Mbf->NMab", a, b) for a, b in zip(j1, j2)]).sum(0)
    trace = torch.stack([torch.einsum("Naf,Maf->NM", a, b) for a, b in zip(j1, j2)]).sum(0)

    def ntk_vps(x1, x2):
        def get_ntk_slice(vec):
            vjps = func.vjp(lambda p: fnet_single(p, x2), params)[1](vec)
            return func.jvp(lambda p: fnet_single(p, x1), (params,), vjps)[1]

        return func.vmap(get_ntk_slice)(torch.eye(3, dtype=x1.dtype).view(3, -1))

    vps = func.vmap(func.vmap(ntk_vps, (None, 0)), (0, None))(x1, x2)
    return {"full": full, "trace": trace, "vps": vps}


def fused_conv_bn_program(torch):
    """Fusing convolution and batch norm tutorial: custom Functions whose backward calls
    torch.nn.grad.conv2d_input / conv2d_weight, checked by gradcheck in float64."""
    F = torch.nn.functional
    rng = np.random.default_rng(80)

    class Conv2D(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, weight):
            ctx.save_for_backward(X, weight)
            return F.conv2d(X, weight)

        @staticmethod
        def backward(ctx, grad_out):
            X, weight = ctx.saved_tensors
            return (torch.nn.grad.conv2d_input(X.shape, weight, grad_out),
                    torch.nn.grad.conv2d_weight(X, weight.shape, grad_out))

    def unsqueeze_all(t):
        return t[None, :, None, None]

    class FusedConvBN(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, conv_weight, eps=1e-3):
            ctx.save_for_backward(X, conv_weight)
            X = F.conv2d(X, conv_weight)
            sum = X.sum(dim=(0, 2, 3))
            var = X.var(unbiased=True, dim=(0, 2, 3))
            N = X.numel() / X.size(1)
            sqrt_var = torch.sqrt(var)
            ctx.eps, ctx.sum, ctx.N, ctx.sqrt_var = eps, sum, N, sqrt_var
            mean = sum / N
            denom = sqrt_var + eps
            return (X - unsqueeze_all(mean)) / unsqueeze_all(denom)

        @staticmethod
        def backward(ctx, grad_out):
            X, conv_weight = ctx.saved_tensors
            X_conv_out = F.conv2d(X, conv_weight)
            sqrt_var, sum, N, eps = ctx.sqrt_var, ctx.sum, ctx.N, ctx.eps
            grad_out = grad_out.contiguous()
            X_conv_out = X_conv_out.contiguous()
            mean = sum / N
            # the tutorial's batch norm backward, written out
            tmp = ((X_conv_out - unsqueeze_all(mean)) * grad_out).sum(dim=(0, 2, 3))
            tmp *= -1
            d_denom = tmp / (sqrt_var + eps) ** 2
            d_var = d_denom / (2 * sqrt_var)
            d_mean_dx = grad_out / unsqueeze_all(sqrt_var + eps)
            d_mean_dx = unsqueeze_all(-d_mean_dx.sum(dim=(0, 2, 3)) / N)
            grad_input = X_conv_out * unsqueeze_all(d_var * N)
            grad_input += unsqueeze_all(-d_var * sum)
            grad_input *= 2 / ((N - 1) * N)
            grad_input += d_mean_dx
            grad_input *= unsqueeze_all(sqrt_var + eps)
            grad_input += grad_out
            grad_input /= unsqueeze_all(sqrt_var + eps)
            X_grad = torch.nn.grad.conv2d_input(X.shape, conv_weight, grad_input)
            weight_grad = torch.nn.grad.conv2d_weight(X, conv_weight.shape, grad_input)
            return X_grad, weight_grad, None

    X = normal(torch, rng, 2, 3, 6, 6).double().requires_grad_()
    W = normal(torch, rng, 4, 3, 3, 3).double().requires_grad_()
    checks = [torch.autograd.gradcheck(Conv2D.apply, (X, W)),
              torch.autograd.gradcheck(FusedConvBN.apply, (X, W))]
    out = FusedConvBN.apply(X, W)
    (out * normal(torch, rng, *out.shape).double()).sum().backward()
    gi = torch.nn.grad.conv2d_input((2, 3, 7, 7), W.detach(),
                                    normal(torch, rng, 2, 4, 4, 4).double(), stride=2, padding=1)
    gw = torch.nn.grad.conv1d_weight(normal(torch, rng, 2, 3, 9).double(), (4, 3, 3),
                                     normal(torch, rng, 2, 4, 4).double(), stride=2, dilation=1)
    return {"checks": checks, "out": out, "xg": X.grad, "wg": W.grad, "gi": gi, "gw": gw}


PROGRAMS = [blitz_program, quickstart_program, manual_backprop_program, dynamic_net_program,
            autograd_mechanics_program, saved_tensors_program,
            func_jacobians_program, ntk_program, fused_conv_bn_program]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=1e-5, atol=1e-6)
