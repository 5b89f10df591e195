"""Programs from scientific computing, written as such repositories write them by hand, run
once with `torch` bound to ember and once to PyTorch from the same NumPy weights and data: a
physics-informed network for Burgers' equation (float64 by default, derivatives by
autograd.grad(create_graph=True), Adam then strong-Wolfe LBFGS), a Hamiltonian network
(symplectic gradient, torch.func jacrev/jacfwd/hessian, leapfrog and RK4 rollouts) and a
Fourier neural operator (rfft2/irfft2, complex parameters, complex einsum, truncated modes
written into zeros); and the determinant gradients at singular matrices. Differentiable linear
algebra and implicit layers are in test_parity_programs_round21_science_linalg.py."""

import math

import numpy as np
import pytest

import ember
from tests.parity._compare import outcome
from tests.parity._programs import fill_, normal

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def pinn_program(torch):
    """Burgers' equation PINN: u_t + u u_x = nu u_xx, Adam then strong-Wolfe LBFGS, in
    float64 by default as PINN code sets it."""
    old_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return _pinn(torch)
    finally:
        torch.set_default_dtype(old_dtype)


def _pinn(torch):
    nn = torch.nn
    rng = np.random.default_rng(21)
    res = {}
    nu = 0.01 / math.pi

    class PINN(nn.Module):
        def __init__(self, layers):
            super().__init__()
            self.activation = nn.Tanh()
            self.linears = nn.ModuleList(
                [nn.Linear(layers[i], layers[i + 1]) for i in range(len(layers) - 1)])
            for lin in self.linears:
                nn.init.xavier_normal_(lin.weight.data, gain=1.0)
                nn.init.zeros_(lin.bias.data)

        def forward(self, x, t):
            a = torch.cat([x, t], dim=1)
            for lin in self.linears[:-1]:
                a = self.activation(lin(a))
            return self.linears[-1](a)

    model = PINN([2, 16, 16, 1])
    fill_(torch, model, rng, scale=0.5)
    x_f = torch.from_numpy(rng.uniform(-1, 1, (64, 1))).requires_grad_(True)
    t_f = torch.from_numpy(rng.uniform(0, 1, (64, 1)))
    t_f.requires_grad = True
    x_0 = torch.linspace(-1, 1, 20).unsqueeze(-1)
    t_0 = torch.zeros_like(x_0)
    u_0 = -torch.sin(math.pi * x_0)
    t_b = torch.from_numpy(rng.uniform(0, 1, (10, 1)))
    x_b = torch.cat([torch.ones(5, 1), -torch.ones(5, 1)])
    mse = nn.MSELoss()

    def residual():
        u = model(x_f, t_f)
        u_t = torch.autograd.grad(u, t_f, grad_outputs=torch.ones_like(u),
                                  retain_graph=True, create_graph=True)[0]
        u_x = torch.autograd.grad(u, x_f, grad_outputs=torch.ones_like(u),
                                  retain_graph=True, create_graph=True)[0]
        u_xx = torch.autograd.grad(u_x, x_f, grad_outputs=torch.ones_like(u_x),
                                   retain_graph=True, create_graph=True)[0]
        return u_t + u * u_x - nu * u_xx

    def loss_fn():
        f = residual()
        loss_f = mse(f, torch.zeros_like(f))
        loss_0 = mse(model(x_0, t_0), u_0)
        loss_b = torch.mean(model(x_b, t_b) ** 2)
        return loss_f + loss_0 + loss_b, (loss_f, loss_0, loss_b)

    adam = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), amsgrad=True)
    scheduler = torch.optim.lr_scheduler.StepLR(adam, step_size=2, gamma=0.5)
    adam_losses, parts = [], []
    for _ in range(4):
        adam.zero_grad(set_to_none=True)
        loss, (lf, l0, lb) = loss_fn()
        loss.backward()
        adam.step()
        scheduler.step()
        adam_losses.append(loss.item())
        parts.append([lf.item(), l0.item(), lb.item()])
    res["adam_losses"] = adam_losses
    res["parts"] = parts
    res["lr_after"] = scheduler.get_last_lr()

    lbfgs = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=8, max_eval=10,
                              history_size=5, tolerance_grad=1e-7,
                              tolerance_change=1.0 * np.finfo(float).eps,
                              line_search_fn="strong_wolfe")
    evals = []

    def closure():
        lbfgs.zero_grad()
        loss, _ = loss_fn()
        loss.backward()
        evals.append(loss.item())
        return loss

    lbfgs_losses = []
    for _ in range(2):
        lbfgs_losses.append(lbfgs.step(closure).item())
    res["lbfgs_losses"] = lbfgs_losses
    res["n_evals"] = [len(evals)]
    state = lbfgs.state[lbfgs._params[0]]
    res["lbfgs_state"] = [int(state["func_evals"]), int(state["n_iter"])]
    res["evals"] = evals
    # inference on a grid, as the plotting code of such repos does
    with torch.no_grad():
        xs = torch.linspace(-1, 1, 7)
        ts = torch.linspace(0, 1, 5)
        X, T = torch.meshgrid(xs, ts, indexing="xy")
        u_pred = model(X.flatten()[:, None], T.flatten()[:, None]).reshape(X.shape)
    res["u_grid"] = u_pred
    res["dtypes"] = [str(t.dtype).split(".")[-1] for t in (u_pred, x_0, t_b, u_0, X,
                                                           model.linears[0].weight)]
    res["u_grid_shape"] = [str(tuple(u_pred.shape))]
    res["params"] = torch.cat([p.detach().flatten() for p in model.parameters()])
    res["grad_norm"] = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1e9)
    return res


def hnn_program(torch):
    """Hamiltonian NN on a pendulum: symplectic gradient, func.jacrev/hessian, leapfrog."""
    nn = torch.nn
    functional_call, hessian = torch.func.functional_call, torch.func.hessian
    jacrev, vmap = torch.func.jacrev, torch.func.vmap
    rng = np.random.default_rng(22)
    res = {}

    class MLP(nn.Module):
        def __init__(self, input_dim, hidden_dim, output_dim):
            super().__init__()
            self.linear1 = nn.Linear(input_dim, hidden_dim)
            self.linear2 = nn.Linear(hidden_dim, hidden_dim)
            self.linear3 = nn.Linear(hidden_dim, output_dim, bias=None)
            for lin in [self.linear1, self.linear2, self.linear3]:
                torch.nn.init.orthogonal_(lin.weight)

        def forward(self, x):
            h = torch.tanh(self.linear1(x))
            h = torch.tanh(self.linear2(h))
            return self.linear3(h)

    class HNN(nn.Module):
        def __init__(self, input_dim, differentiable_model):
            super().__init__()
            self.differentiable_model = differentiable_model
            self.register_buffer("M", self.permutation_tensor(input_dim))

        def forward(self, x):
            y = self.differentiable_model(x)
            assert y.dim() == 2 and y.shape[1] == 1, "Output should have shape [batch_size, 1]"
            return y.split(1, 1)[0]

        def time_derivative(self, x):
            F2 = self.forward(x)
            dF2 = torch.autograd.grad(F2.sum(), x, create_graph=True)[0]
            return dF2 @ self.M.t()

        def permutation_tensor(self, n):
            M = torch.eye(n)
            M = torch.cat([M[n // 2:], -M[:n // 2]])
            return M

    model = HNN(2, MLP(2, 24, 1))
    fill_(torch, model.differentiable_model, rng, scale=0.4)
    # pendulum data: H = 2 m g l (1 - cos q) + l^2 p^2 / (2 m) with m = l = 1, g = 3
    q = rng.uniform(-1.5, 1.5, (48, 1))
    p = rng.uniform(-1.5, 1.5, (48, 1))
    dq = p
    dp = -6.0 * np.sin(q)
    x = torch.tensor(np.concatenate([q, p], 1), requires_grad=True, dtype=torch.float32)
    dxdt = torch.Tensor(np.concatenate([dq, dp], 1))
    optim = torch.optim.Adam(model.parameters(), 1e-3, weight_decay=1e-4)
    def L2_loss(u, v):
        return (u - v).pow(2).mean()

    losses, grad_norms = [], []
    for _ in range(5):
        dxdt_hat = model.time_derivative(x)
        loss = L2_loss(dxdt, dxdt_hat)
        loss.backward()
        grad = torch.cat([p.grad.flatten() for p in model.parameters()]).clone()
        optim.step()
        optim.zero_grad()
        losses.append(loss.item())
        grad_norms.append(grad @ grad)
    res["losses"] = losses
    res["grad_norms"] = torch.stack(grad_norms)

    # torch.func: H as a pure function of the parameters, its gradient field and Hessian
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = dict(model.named_buffers())

    def H(params, state):
        return functional_call(model, (params, buffers), (state.unsqueeze(0),)).squeeze()

    def field(params, state):
        dH = jacrev(H, argnums=1)(params, state)
        return torch.stack([dH[1], -dH[0]])

    states = x.detach()[:6]
    vector_field = vmap(field, in_dims=(None, 0))(params, states)
    res["field_func"] = vector_field
    res["field_autograd"] = model.time_derivative(states.clone().requires_grad_())
    hess = vmap(hessian(H, argnums=1), in_dims=(None, 0))(params, states)
    res["hessian"] = hess
    res["hessian_symmetry"] = (hess - hess.transpose(-1, -2)).abs().max()
    res["hess_eig"] = torch.linalg.eigvalsh(hess)
    hess_fwd = torch.func.jacfwd(torch.func.jacrev(H, argnums=1), argnums=1)(params, states[1])
    res["hessian_fwd"] = hess_fwd
    def flat_h(s):
        return H(params, s)

    res["hessian_autograd"] = torch.autograd.functional.hessian(flat_h, states[2])
    res["jacobian_autograd"] = torch.autograd.functional.jacobian(
        lambda s: torch.stack([flat_h(s), flat_h(s) ** 2]), states[3], create_graph=False)
    grad_h, value_h = torch.func.grad_and_value(H, argnums=1)(params, states[4])
    res["grad_and_value"] = [grad_h, value_h]
    param_jac = jacrev(H, argnums=0)(params, states[0])
    res["param_jac_keys"] = sorted(param_jac)
    res["param_jac"] = [param_jac[k] for k in sorted(param_jac)]

    # leapfrog rollout with the learned field, energy along the way
    def dynamics(state):
        with torch.enable_grad():
            state = state.detach().requires_grad_(True)
            return model.time_derivative(state).detach()

    dt, n_steps = 0.05, 20
    state = torch.tensor([[1.0, 0.0], [0.3, -0.5]])
    traj, energies = [state], []
    with torch.no_grad():
        for _ in range(n_steps):
            qd = state[:, :1]
            pd = state[:, 1:]
            p_half = pd + 0.5 * dt * dynamics(torch.cat([qd, pd], 1))[:, 1:]
            q_new = qd + dt * dynamics(torch.cat([qd, p_half], 1))[:, :1]
            p_new = p_half + 0.5 * dt * dynamics(torch.cat([q_new, p_half], 1))[:, 1:]
            state = torch.cat([q_new, p_new], dim=-1)
            traj.append(state)
            energies.append(model(state).squeeze(-1))
    traj = torch.stack(traj, dim=1)
    res["traj"] = traj
    res["traj_meta"] = [str(tuple(traj.shape)), str(traj.requires_grad)]
    energies = torch.stack(energies)
    res["energy_drift"] = (energies - energies[0]).abs().amax(dim=0)
    # Runge-Kutta integration of a single trajectory, as in scipy-free HNN notebooks
    def rk4(f, y, h):
        k1 = f(y)
        k2 = f(y + h / 2 * k1)
        k3 = f(y + h / 2 * k2)
        k4 = f(y + h * k3)
        return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    y = torch.tensor([[0.5, 0.5]])
    ys = []
    for _ in range(10):
        y = rk4(dynamics, y, 0.1)
        ys.append(y)
    res["rk4"] = torch.cat(ys)
    return res


def fno_program(torch):
    """Fourier neural operator (2-D) with a 1-D spectral branch: rfft2/irfft2, cfloat weights."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(23)
    res = {}

    class SpectralConv2d(nn.Module):
        def __init__(self, in_channels, out_channels, modes1, modes2):
            super().__init__()
            self.in_channels, self.out_channels = in_channels, out_channels
            self.modes1, self.modes2 = modes1, modes2
            self.scale = 1 / (in_channels * out_channels)
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

    class SpectralConv1d(nn.Module):
        """Weights stored as real pairs, viewed as complex (as neuraloperator does)."""
        def __init__(self, channels, modes):
            super().__init__()
            self.modes = modes
            self.weight = nn.Parameter(torch.empty(channels, channels, modes, 2))

        def forward(self, x):
            n = x.size(-1)
            x_ft = torch.fft.rfft(x, n=2 * n, norm="ortho")
            w = torch.view_as_complex(self.weight)
            out_ft = torch.zeros_like(x_ft)
            out_ft[..., :self.modes] = torch.einsum("bix,iox->box", x_ft[..., :self.modes], w)
            return torch.fft.irfft(out_ft, n=2 * n, norm="ortho")[..., :n]

    class FNO2d(nn.Module):
        def __init__(self, modes1, modes2, width):
            super().__init__()
            self.width = width
            self.p = nn.Linear(3, width)
            self.conv0 = SpectralConv2d(width, width, modes1, modes2)
            self.conv1 = SpectralConv2d(width, width, modes1, modes2)
            self.w0 = nn.Conv2d(width, width, 1)
            self.w1 = nn.Conv2d(width, width, 1)
            self.line = SpectralConv1d(width, 3)
            self.q = nn.Sequential(nn.Linear(width, 16), nn.GELU(), nn.Linear(16, 1))

        def get_grid(self, shape, device):
            batchsize, size_x, size_y = shape[0], shape[1], shape[2]
            gridx = torch.tensor(np.linspace(0, 1, size_x), dtype=torch.float)
            gridx = gridx.reshape(1, size_x, 1, 1).repeat([batchsize, 1, size_y, 1])
            gridy = torch.tensor(np.linspace(0, 1, size_y), dtype=torch.float)
            gridy = gridy.reshape(1, 1, size_y, 1).repeat([batchsize, size_x, 1, 1])
            return torch.cat((gridx, gridy), dim=-1).to(device)

        def forward(self, x):
            grid = self.get_grid(x.shape, x.device)
            x = torch.cat((x, grid), dim=-1)
            x = self.p(x)
            x = x.permute(0, 3, 1, 2)
            x = F.gelu(self.conv0(x) + self.w0(x))
            x = self.conv1(x) + self.w1(x)
            b, c, sx, sy = x.shape
            rows = x.permute(0, 2, 1, 3).reshape(b * sx, c, sy)
            x = x + self.line(rows).reshape(b, sx, c, sy).permute(0, 2, 1, 3)
            x = x.permute(0, 2, 3, 1)
            return self.q(x)

    model = FNO2d(3, 3, 8)
    params = list(model.parameters())
    with torch.no_grad():
        for prm in params:
            if prm.is_complex():
                real = rng.standard_normal(tuple(prm.shape) + (2,)).astype(np.float32) * 0.05
                torch.view_as_real(prm).copy_(torch.from_numpy(real))
            else:
                prm.copy_(torch.from_numpy(
                    rng.standard_normal(tuple(prm.shape)).astype(np.float32) * 0.2))
    res["param_meta"] = [f"{n}:{str(p.dtype).split('.')[-1]}:{tuple(p.shape)}"
                         for n, p in model.named_parameters()]
    res["n_params"] = [sum(p.numel() * (2 if p.is_complex() else 1) for p in params)]

    a = normal(torch, rng, 4, 12, 10, 1)
    u = torch.sin(3 * a) + 0.1 * a.cumsum(1)

    class LpLoss:
        def __init__(self, d=2, p=2, size_average=True, reduction=True):
            self.d, self.p = d, p
            self.reduction, self.size_average = reduction, size_average

        def rel(self, x, y):
            num_examples = x.size()[0]
            diff_norms = torch.norm(x.reshape(num_examples, -1) - y.reshape(num_examples, -1),
                                    self.p, 1)
            y_norms = torch.norm(y.reshape(num_examples, -1), self.p, 1)
            return torch.mean(diff_norms / y_norms) if self.size_average else torch.sum(
                diff_norms / y_norms)

        def __call__(self, x, y):
            return self.rel(x, y)

    myloss = LpLoss(size_average=False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
    losses, mses, complex_grads = [], [], []
    for ep in range(4):
        optimizer.zero_grad()
        out = model(a).reshape(4, 12, 10)
        mse = F.mse_loss(out.view(4, -1), u.view(4, -1), reduction="mean")
        l2 = myloss(out.view(4, -1), u.view(4, -1))
        l2.backward()
        complex_grads.append(model.conv0.weights1.grad.abs().sum())
        optimizer.step()
        scheduler.step()
        losses.append(l2.item())
        mses.append(mse.item())
    res["losses"] = losses
    res["mses"] = mses
    res["complex_grads"] = torch.stack(complex_grads)
    res["grad_dtype"] = [str(model.conv0.weights1.grad.dtype).split(".")[-1],
                         str(model.line.weight.grad.dtype).split(".")[-1]]
    res["w_complex"] = torch.view_as_real(model.conv1.weights2.detach())
    res["w_line"] = model.line.weight.detach()

    # spectral pieces on their own: norms, rfftfreq, energy, an fftshift spectrum
    x = normal(torch, rng, 2, 16)
    spec = torch.fft.rfft(x, norm="forward")
    res["rfft_forward"] = torch.view_as_real(spec)
    res["irfft_odd"] = torch.fft.irfft(torch.fft.rfft(x, n=15), n=15)
    res["rfft_backward_pad"] = torch.view_as_real(torch.fft.rfft(x, n=20, norm="backward"))
    res["rfftfreq"] = torch.fft.rfftfreq(16, d=0.5)
    k = torch.fft.fftfreq(16, d=1 / 16)
    deriv = torch.fft.ifft(1j * k * torch.fft.fft(torch.sin(2 * math.pi * torch.arange(16) / 16)))
    res["spectral_derivative"] = deriv.real
    res["deriv_dtype"] = [str(deriv.dtype).split(".")[-1], str(k.dtype).split(".")[-1]]
    img = normal(torch, rng, 1, 8, 8)
    power = torch.fft.fftshift(torch.fft.fft2(img, norm="ortho").abs() ** 2, dim=(-2, -1))
    res["power"] = power
    res["parseval"] = [power.sum().item(), (img ** 2).sum().item()]
    z = torch.complex(x[0], x[1])
    res["complex_ops"] = torch.view_as_real(z.conj() * z.angle().exp() / (1 + z.abs()))
    res["polar"] = torch.view_as_real(torch.polar(x[0].abs(), x[1]))
    # inference at a higher resolution: the operator is resolution invariant
    model.eval()
    with torch.no_grad():
        fine = model(normal(torch, rng, 1, 16, 14, 1))
    res["fine"] = fine
    res["fine_shape"] = [str(tuple(fine.shape))]
    return res


def values(value):
    """A tensor as a float64 NumPy array of its values at its own precision (float64 stays
    exact; a complex tensor as (real, imag) pairs); a list of tensors element by element."""
    if hasattr(value, "detach"):
        value = value.detach()
        if value.is_complex():
            return np.stack([value.real.numpy(), value.imag.numpy()], -1).astype(np.float64)
        if not value.is_floating_point() or value.dtype.itemsize < 4:
            value = value.double()
        return value.numpy().astype(np.float64)
    if isinstance(value, (list, tuple)) and value and hasattr(value[0], "detach"):
        return [values(v) for v in value]
    return value


def assert_same_results(ours, theirs, rtol, atol, looser=None):
    """Names, flags, strings and integers equal; numbers (and shapes) within the tolerances,
    or within ``looser[key]`` = (rtol, atol) for the keys it names; no NaN anywhere (a
    program that diverged would compare equal to itself)."""
    assert ours.keys() == theirs.keys()
    for key, expected in theirs.items():
        got, expected = values(ours[key]), values(expected)
        r, a = (looser or {}).get(key, (rtol, atol))
        if isinstance(expected, list) and expected and isinstance(expected[0], (str, bool, int)):
            assert got == expected, key
            continue
        if not (isinstance(expected, list) and expected and isinstance(expected[0], np.ndarray)):
            got, expected = [got], [expected]
        assert len(got) == len(expected), key
        for g, e in zip(got, expected):
            g, e = np.asarray(g, dtype=np.float64), np.asarray(e, dtype=np.float64)
            assert g.shape == e.shape, key
            np.testing.assert_allclose(g, e, rtol=r, atol=a, equal_nan=False, err_msg=key)



def test_pinn_program_matches_torch():
    # float64 throughout: LBFGS's 19 evaluations agree to rounding
    assert_same_results(pinn_program(ember), pinn_program(torch), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("program", [hnn_program, fno_program], ids=lambda f: f.__name__)
def test_float32_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=1e-5, atol=1e-6)


def _singular_batch(lib):
    """A batch of an exactly singular matrix (det -0.0 by LU) and an invertible one."""
    return lib.tensor([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 2.0], [3.0, 4.0]]], dtype=lib.float64)


@pytest.mark.parametrize("fn", ["det", "linalg.det"])
def test_det_first_order_gradient_at_a_singular_matrix_is_zero(fn):
    # PyTorch solves A^H X = g det(A) I with the LU factors: the right side is 0 for a
    # singular A; the invertible matrix of the batch keeps det(A) A^{-H}
    def grad(lib):
        a = _singular_batch(lib).requires_grad_()
        f = lib.det if fn == "det" else lib.linalg.det
        return lib.autograd.grad(f(a).sum(), a)[0]
    ours, theirs = grad(ember), grad(torch)
    np.testing.assert_array_equal(values(ours), values(theirs))
    assert values(ours)[0].tolist() == [[0.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("how", ["create_graph", "func.grad", "vmap(func.grad)", "jacrev"])
def test_det_gradient_at_a_singular_matrix_in_grad_mode_is_the_cofactor_matrix(how):
    # with grad mode on (create_graph, or any torch.func transform) PyTorch differentiates
    # through the SVD: the cofactor matrix, nonzero for a rank-1 matrix
    def grad(lib):
        a = _singular_batch(lib)
        if how == "create_graph":
            a.requires_grad_()
            return lib.autograd.grad(lib.linalg.det(a).sum(), a, create_graph=True)[0]
        if how == "func.grad":
            return lib.func.grad(lib.linalg.det)(a[0])
        if how == "vmap(func.grad)":
            return lib.func.vmap(lib.func.grad(lib.linalg.det))(a)
        return lib.func.jacrev(lib.linalg.det)(a[0])
    ours, theirs = grad(ember), grad(torch)
    np.testing.assert_allclose(values(ours), values(theirs), rtol=1e-12, atol=1e-12)
    assert np.abs(values(theirs)).sum() > 8


@pytest.mark.parametrize("matrix", ["singular", "invertible"])
def test_func_grad_of_logabsdet_solves_as_in_grad_mode(matrix):
    # inside torch.func PyTorch's slogdet derivative is the differentiable solve, which
    # refuses a singular matrix (plain first-order backward gives -inf/inf instead)
    def run(lib):
        a = _singular_batch(lib)[0 if matrix == "singular" else 1]
        return lib.func.grad(lambda m: lib.linalg.slogdet(m).logabsdet)(a)
    def describe(t):
        return values(t).tolist()

    ours = outcome(run, ember, describe=describe)
    theirs = outcome(run, torch, describe=describe)
    assert ours == theirs
    assert (theirs[0] == "_LinAlgError") == (matrix == "singular")
