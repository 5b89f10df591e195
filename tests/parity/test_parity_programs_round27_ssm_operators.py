"""Operator-learning and physics-structured networks written as their reference repositories
write them in torch, run once with `torch` bound to ember and once to PyTorch from the same
NumPy data: neuraloperator's FNO 1-d and 2-d (rfft/rfft2, complex weights drawn with
torch.rand(dtype=cfloat) and used in einsum on the truncated modes, out_ft zero-filled then
written by slices, irfft2 with s=, F.pad of the domain, an LpLoss and a UnitGaussianNormalizer,
Adam with weight decay on complex parameters, StepLR, count_params over complex sizes), a
DeepONet (branch and trunk nets, einsum readout, per-group lr), Greydanus' Hamiltonian neural
network (autograd.grad with create_graph inside the loss, a symplectic permutation matrix) and
a Lagrangian neural network (the Euler-Lagrange acceleration from autograd.functional's
hessian and jacobian and from torch.func.vmap over hessian/jacrev). Siblings: _ssm,
_ssm_retention."""

import functools
import operator

import numpy as np
import pytest

import ember
from tests.parity._programs import normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _fill_all(torch, model, rng, scale=0.3):
    with torch.no_grad():
        for p in model.parameters():
            value = rng.standard_normal(tuple(p.shape) + ((2,) if p.is_complex() else ()))
            value = np.asarray(value.astype(np.float32) * scale)
            if p.is_complex():
                p.copy_(torch.view_as_complex(torch.from_numpy(value)))
            else:
                p.copy_(torch.from_numpy(value))


def _count_params(model):
    c = 0
    for p in list(model.parameters()):
        c += functools.reduce(operator.mul, list(p.size() + (2,) if p.is_complex()
                                                 else p.size()))
    return c


class _LpLoss:
    """neuraloperator's utilities3.LpLoss (relative L2 by default)."""

    def __init__(self, torch, d=2, p=2, size_average=True, reduction=True):
        self.torch, self.d, self.p = torch, d, p
        self.reduction, self.size_average = reduction, size_average

    def abs(self, x, y):
        num_examples = x.size()[0]
        h = 1.0 / (x.size()[1] - 1.0)
        all_norms = (h ** (self.d / self.p)) * self.torch.norm(
            x.view(num_examples, -1) - y.view(num_examples, -1), self.p, 1)
        return self.torch.mean(all_norms) if self.size_average else self.torch.sum(all_norms)

    def rel(self, x, y):
        num_examples = x.size()[0]
        diff_norms = self.torch.norm(x.reshape(num_examples, -1) - y.reshape(num_examples, -1),
                                     self.p, 1)
        y_norms = self.torch.norm(y.reshape(num_examples, -1), self.p, 1)
        if self.reduction:
            if self.size_average:
                return self.torch.mean(diff_norms / y_norms)
            return self.torch.sum(diff_norms / y_norms)
        return diff_norms / y_norms

    def __call__(self, x, y):
        return self.rel(x, y)


class _UnitGaussianNormalizer:
    def __init__(self, torch, x, eps=0.00001):
        self.mean = torch.mean(x, 0)
        self.std = torch.std(x, 0)
        self.eps = eps

    def encode(self, x):
        return (x - self.mean) / (self.std + self.eps)

    def decode(self, x, sample_idx=None):
        return (x * (self.std + self.eps)) + self.mean


def _fno1d(torch, modes, width):
    nn, F = torch.nn, torch.nn.functional

    class SpectralConv1d(nn.Module):
        def __init__(self, in_channels, out_channels, modes1):
            super().__init__()
            self.in_channels, self.out_channels, self.modes1 = in_channels, out_channels, modes1
            self.scale = (1 / (in_channels * out_channels))
            self.weights1 = nn.Parameter(self.scale * torch.rand(
                in_channels, out_channels, self.modes1, dtype=torch.cfloat))

        def compl_mul1d(self, input, weights):
            return torch.einsum("bix,iox->box", input, weights)

        def forward(self, x):
            batchsize = x.shape[0]
            x_ft = torch.fft.rfft(x)
            out_ft = torch.zeros(batchsize, self.out_channels, x.size(-1) // 2 + 1,
                                 device=x.device, dtype=torch.cfloat)
            out_ft[:, :, :self.modes1] = self.compl_mul1d(x_ft[:, :, :self.modes1],
                                                          self.weights1)
            return torch.fft.irfft(out_ft, n=x.size(-1))

    class FNO1d(nn.Module):
        def __init__(self):
            super().__init__()
            self.padding = 2
            self.fc0 = nn.Linear(2, width)
            self.conv0 = SpectralConv1d(width, width, modes)
            self.conv1 = SpectralConv1d(width, width, modes)
            self.w0 = nn.Conv1d(width, width, 1)
            self.w1 = nn.Conv1d(width, width, 1)
            self.fc1 = nn.Linear(width, 8)
            self.fc2 = nn.Linear(8, 1)

        def forward(self, x):
            grid = self.get_grid(x.shape, x.device)
            x = torch.cat((x, grid), dim=-1)
            x = self.fc0(x)
            x = x.permute(0, 2, 1)
            x = F.pad(x, [0, self.padding])
            x = F.gelu(self.conv0(x) + self.w0(x))
            x = self.conv1(x) + self.w1(x)
            x = x[..., :-self.padding]
            x = x.permute(0, 2, 1)
            x = F.gelu(self.fc1(x))
            return self.fc2(x)

        def get_grid(self, shape, device):
            batchsize, size_x = shape[0], shape[1]
            gridx = torch.tensor(np.linspace(0, 1, size_x), dtype=torch.float)
            gridx = gridx.reshape(1, size_x, 1).repeat([batchsize, 1, 1])
            return gridx.to(device)

    return FNO1d


def fno1d_program(torch):
    """neuraloperator's fourier_1d.py (Burgers): FNO1d trained with Adam(weight_decay) on
    complex spectral weights, StepLR, LpLoss; MSE reported as the script does."""
    rng = np.random.default_rng(2721)
    ntrain, s, batch_size = 4, 16, 2
    model = _fno1d(torch, modes=4, width=6)()
    _fill_all(torch, model, rng)
    x_train = normal(torch, rng, ntrain, s, 1)
    y_train = torch.sin(x_train * 2).squeeze(-1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_train, y_train),
                                         batch_size=batch_size, shuffle=False)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    myloss = _LpLoss(torch, size_average=False)
    res = {"count": [_count_params(model)],
           "complex": [p.is_complex() for p in model.parameters()]}
    mses, l2s = [], []
    for ep in range(2):
        model.train()
        train_mse = train_l2 = 0
        for x, y in loader:
            optimizer.zero_grad()
            out = model(x)
            mse = torch.nn.functional.mse_loss(out.view(batch_size, -1), y.view(batch_size, -1),
                                               reduction='mean')
            l2 = myloss(out.view(batch_size, -1), y.view(batch_size, -1))
            l2.backward()
            optimizer.step()
            train_mse += mse.item()
            train_l2 += l2.item()
        scheduler.step()
        mses.append(train_mse / len(loader))
        l2s.append(train_l2 / ntrain)
    res["mses"], res["l2s"] = mses, l2s
    res["params"] = list(model.parameters())
    st = optimizer.state[model.conv0.weights1]
    res["state"] = [torch.view_as_real(st["exp_avg"]), torch.view_as_real(st["exp_avg_sq"])]
    res["state_dtype"] = [str(st["exp_avg_sq"].dtype).rsplit(".", 1)[-1]]
    model.eval()
    with torch.no_grad():
        res["pred"] = model(x_train[:1])
    return res


def _fno2d(torch, modes1, modes2, width):
    nn, F = torch.nn, torch.nn.functional

    class SpectralConv2d(nn.Module):
        def __init__(self, in_channels, out_channels, modes1, modes2):
            super().__init__()
            self.in_channels, self.out_channels = in_channels, out_channels
            self.modes1, self.modes2 = modes1, modes2
            self.scale = (1 / (in_channels * out_channels))
            self.weights1 = nn.Parameter(self.scale * torch.rand(
                in_channels, out_channels, self.modes1, self.modes2, dtype=torch.cfloat))
            self.weights2 = nn.Parameter(self.scale * torch.rand(
                in_channels, out_channels, self.modes1, self.modes2, dtype=torch.cfloat))

        def compl_mul2d(self, input, weights):
            return torch.einsum("bixy,ioxy->boxy", input, weights)

        def forward(self, x):
            batchsize = x.shape[0]
            x_ft = torch.fft.rfft2(x)
            out_ft = torch.zeros(batchsize, self.out_channels, x.size(-2), x.size(-1) // 2 + 1,
                                 dtype=torch.cfloat, device=x.device)
            out_ft[:, :, :self.modes1, :self.modes2] = self.compl_mul2d(
                x_ft[:, :, :self.modes1, :self.modes2], self.weights1)
            out_ft[:, :, -self.modes1:, :self.modes2] = self.compl_mul2d(
                x_ft[:, :, -self.modes1:, :self.modes2], self.weights2)
            return torch.fft.irfft2(out_ft, s=(x.size(-2), x.size(-1)))

    class FNO2d(nn.Module):
        def __init__(self):
            super().__init__()
            self.padding = 3
            self.fc0 = nn.Linear(3, width)
            self.conv0 = SpectralConv2d(width, width, modes1, modes2)
            self.conv1 = SpectralConv2d(width, width, modes1, modes2)
            self.w0 = nn.Conv2d(width, width, 1)
            self.w1 = nn.Conv2d(width, width, 1)
            self.fc1 = nn.Linear(width, 8)
            self.fc2 = nn.Linear(8, 1)

        def forward(self, x):
            grid = self.get_grid(x.shape, x.device)
            x = torch.cat((x, grid), dim=-1)
            x = self.fc0(x)
            x = x.permute(0, 3, 1, 2)
            x = F.pad(x, [0, self.padding, 0, self.padding])
            x = F.gelu(self.conv0(x) + self.w0(x))
            x = self.conv1(x) + self.w1(x)
            x = x[..., :-self.padding, :-self.padding]
            x = x.permute(0, 2, 3, 1)
            x = F.gelu(self.fc1(x))
            return self.fc2(x)

        def get_grid(self, shape, device):
            batchsize, size_x, size_y = shape[0], shape[1], shape[2]
            gridx = torch.tensor(np.linspace(0, 1, size_x), dtype=torch.float)
            gridx = gridx.reshape(1, size_x, 1, 1).repeat([batchsize, 1, size_y, 1])
            gridy = torch.tensor(np.linspace(0, 1, size_y), dtype=torch.float)
            gridy = gridy.reshape(1, 1, size_y, 1).repeat([batchsize, size_x, 1, 1])
            return torch.cat((gridx, gridy), dim=-1).to(device)

    return FNO2d


def fno2d_program(torch):
    """neuraloperator's fourier_2d.py (Darcy): normalisers on inputs and outputs, y decoded
    before the relative loss, AdamW with a complex-aware param split, a OneCycle-free
    CosineAnnealingLR, and a zero-shot super-resolution evaluation on a finer grid."""
    rng = np.random.default_rng(2722)
    ntrain, S, B = 4, 8, 2
    model = _fno2d(torch, 3, 3, 5)()
    _fill_all(torch, model, rng)
    x_train = normal(torch, rng, ntrain, S, S, 1)
    y_train = torch.tanh(x_train[..., 0]) + 0.1 * x_train[..., 0] ** 2
    x_normalizer = _UnitGaussianNormalizer(torch, x_train)
    x_train = x_normalizer.encode(x_train)
    y_normalizer = _UnitGaussianNormalizer(torch, y_train)
    y_train = y_normalizer.encode(y_train)
    spectral = [p for p in model.parameters() if p.is_complex()]
    real = [p for p in model.parameters() if not p.is_complex()]
    optimizer = torch.optim.AdamW([{"params": real},
                                   {"params": spectral, "lr": 5e-3, "weight_decay": 0.0}],
                                  lr=1e-2, weight_decay=1e-4, amsgrad=True)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=4)
    myloss = _LpLoss(torch, size_average=False)
    res = {"count": [_count_params(model)], "n_complex": [len(spectral)]}
    losses = []
    for ep in range(2):
        for i in range(0, ntrain, B):
            x, y = x_train[i:i + B], y_train[i:i + B]
            optimizer.zero_grad()
            out = model(x).reshape(B, S, S)
            out = y_normalizer.decode(out)
            y = y_normalizer.decode(y)
            loss = myloss(out.view(B, -1), y.view(B, -1))
            loss.backward()
            if ep == 0 and i == 0:
                res["spectral_grads"] = [torch.view_as_real(p.grad) for p in spectral]
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
    res["losses"], res["params"] = losses, list(model.parameters())
    with torch.no_grad():
        fine = normal(torch, rng, 1, 2 * S, 2 * S, 1)
        res["superres"] = model(fine)
    return res


def deeponet_program(torch):
    """DeepONet (Lu et al.) on an antiderivative operator: a branch net on sensor values, a
    trunk net on query points, the einsum readout plus a scalar bias, Adam with a lower lr for
    the trunk group, ReduceLROnPlateau."""
    nn = torch.nn
    rng = np.random.default_rng(2723)
    m, p_dim, n_q, B = 10, 6, 7, 4

    class DeepONet(nn.Module):
        def __init__(self):
            super().__init__()
            self.branch = nn.Sequential(nn.Linear(m, 16), nn.Tanh(), nn.Linear(16, p_dim))
            self.trunk = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, p_dim),
                                       nn.Tanh())
            self.b = nn.Parameter(torch.tensor(0.0))

        def forward(self, u, y):
            b = self.branch(u)
            t = self.trunk(y)
            return torch.einsum("bi,bni->bn", b, t) + self.b

    model = DeepONet()
    _fill_all(torch, model, rng)
    opt = torch.optim.Adam([{"params": model.branch.parameters()},
                            {"params": model.trunk.parameters(), "lr": 5e-3},
                            {"params": [model.b]}], lr=1e-2)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5,
                                                         patience=0, threshold=1e-2)
    xs = torch.linspace(0, 1, m)
    res, losses, lrs = {}, [], []
    for step in range(4):
        coef = normal(torch, rng, B, 3)
        u = (coef[:, :1] * torch.sin(3 * xs) + coef[:, 1:2] * xs + coef[:, 2:]).float()
        y = torch.from_numpy(rng.random((B, n_q, 1)).astype(np.float32))
        yy = y.squeeze(-1)
        target = (coef[:, :1] * (1 - torch.cos(3 * yy)) / 3 + coef[:, 1:2] * yy ** 2 / 2
                  + coef[:, 2:] * yy)
        loss = torch.mean((model(u, y) - target) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        plateau.step(loss.item() if step != 2 else 10.0)
        losses.append(loss.item())
        lrs.append([g["lr"] for g in opt.param_groups])
    res["losses"], res["lrs"], res["params"] = losses, lrs, list(model.parameters())
    res["last_lr"] = plateau.get_last_lr()
    return res


def _mlp(torch, sizes, act):
    nn = torch.nn
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1], bias=i < len(sizes) - 2))
        if i < len(sizes) - 2:
            layers.append(act())
    return nn.Sequential(*layers)


def hnn_program(torch):
    """greydanus/hamiltonian-nn: an MLP outputs two scalar fields, the time derivative is
    dF2/dx @ M.t() from autograd.grad(create_graph=True), trained on a spring's (q, p) with
    Adam(weight_decay); then a few leapfrog-free Euler steps of the learnt field, with the
    per-step gradient norm taken from torch.cat of flattened grads."""
    rng = np.random.default_rng(2724)
    nn = torch.nn

    class HNN(nn.Module):
        def __init__(self, input_dim, differentiable_model, field_type="solenoidal"):
            super().__init__()
            self.differentiable_model = differentiable_model
            self.M = self.permutation_tensor(input_dim)
            self.field_type = field_type

        def forward(self, x):
            y = self.differentiable_model(x)
            assert y.dim() == 2 and y.shape[1] == 2, \
                "Output tensor should have shape [batch_size, 2]"
            return y.split(1, 1)

        def time_derivative(self, x, t=None):
            F1, F2 = self.forward(x)
            conservative_field = torch.zeros_like(x)
            solenoidal_field = torch.zeros_like(x)
            if self.field_type != "solenoidal":
                dF1 = torch.autograd.grad(F1.sum(), x, create_graph=True)[0]
                conservative_field = dF1 @ torch.eye(*self.M.shape)
            if self.field_type != "conservative":
                dF2 = torch.autograd.grad(F2.sum(), x, create_graph=True)[0]
                solenoidal_field = dF2 @ self.M.t()
            return conservative_field + solenoidal_field

        def permutation_tensor(self, n):
            M = torch.eye(n)
            return torch.cat([M[n // 2:], -M[:n // 2]])

    res = {}
    for field_type in ("solenoidal", "both"):
        model = HNN(2, _mlp(torch, [2, 12, 12, 2], nn.Tanh), field_type)
        _fill_all(torch, model, rng)
        optim = torch.optim.Adam(model.parameters(), 1e-2, weight_decay=1e-4)
        q = rng.uniform(-1, 1, (16, 2)).astype(np.float32)
        dxdt = np.stack([q[:, 1], -q[:, 0]], 1).astype(np.float32)
        x = torch.tensor(q, requires_grad=True, dtype=torch.float32)
        dxdt = torch.Tensor(dxdt)
        losses, grad_norms = [], []
        for step in range(3):
            dxdt_hat = model.time_derivative(x)
            loss = (dxdt - dxdt_hat).pow(2).mean()
            loss.backward()
            grad = torch.cat([p.grad.flatten() for p in model.parameters()]).clone()
            optim.step()
            optim.zero_grad()
            losses.append(loss.item())
            grad_norms.append(grad @ grad)
        res[field_type + "_losses"], res[field_type + "_gnorm"] = losses, grad_norms
        res[field_type + "_params"] = list(model.parameters())
        res[field_type + "_xgrad"] = x.grad
        state = torch.tensor([[1.0, 0.0]], requires_grad=True)
        traj = []
        for _ in range(4):
            d = model.time_derivative(state)
            state = (state + 0.1 * d).detach().requires_grad_(True)
            traj.append(state)
        res[field_type + "_traj"] = traj
    return res


def lnn_program(torch):
    """A Lagrangian neural network (Cranmer et al., in a torch port): L(q, qd) from an MLP with
    softplus; the acceleration qdd = pinv(d2L/dqd2) (dL/dq - d2L/dqd dq qd) from
    autograd.functional's hessian and jacobian with create_graph=True, batched with
    torch.func.vmap over hessian and jacrev, trained on a double spring."""
    rng = np.random.default_rng(2725)
    nn, F = torch.nn, torch.nn.functional
    net = nn.Sequential(nn.Linear(4, 16), nn.Softplus(), nn.Linear(16, 16), nn.Softplus(),
                        nn.Linear(16, 1))
    _fill_all(torch, net, rng)

    def lagrangian(q, qd):
        return net(torch.cat([q, qd], -1)).squeeze(-1)

    def accel_functional(q, qd):
        H = torch.autograd.functional.hessian(lagrangian, (q, qd), create_graph=True)
        J = torch.autograd.functional.jacobian(lagrangian, (q, qd), create_graph=True)
        return torch.linalg.pinv(H[1][1]) @ (J[0] - H[1][0] @ qd)

    def accel_func(state):
        qd = state[2:]

        def L(s):
            return lagrangian(s[:2], s[2:])
        H = torch.func.hessian(L)(state)
        J = torch.func.jacrev(L)(state)
        return torch.linalg.solve(H[2:, 2:], J[:2] - H[2:, :2] @ qd)

    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    res, losses = {}, []
    for step in range(2):
        states = normal(torch, rng, 3, 4)
        target = -states[:, :2] * torch.tensor([1.0, 2.0])
        first = torch.stack([accel_functional(s[:2], s[2:]) for s in states])
        batched = torch.func.vmap(accel_func)(states)
        loss = F.mse_loss(batched, target) + 0.0 * F.mse_loss(first, target)
        opt.zero_grad()
        loss.backward()
        if step == 0:
            res["first"], res["batched"] = first, batched
            # the last bias is a constant of L: no path to the acceleration, grad None
            res["grads"] = [p.grad for p in net.parameters() if p.grad is not None]
            res["no_grad"] = [p.grad is None for p in net.parameters()]
        opt.step()
        losses.append(loss.item())
    res["losses"], res["params"] = losses, list(net.parameters())
    return res


PROGRAMS = [fno1d_program, fno2d_program, deeponet_program, hnn_program, lnn_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch,
    # pinv/solve of a 2x2 Hessian amplify float32 rounding of second derivatives
    {"lnn_program": (1e-4, 1e-5)})
