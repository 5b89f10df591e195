"""Second-order, batched and legacy corners of the neural-SDE, finance and differentiable-physics
programs, run once with `torch` bound to ember and once to PyTorch from the same NumPy data:
gradient penalties (double backward) through the simulators' ops (grid_sample, cdist, scatters,
eigh, matrix_exp, quantile, cumulative ops, FFTs); orthogonal polynomial and Bessel bases for
regression pricing and Green's functions; an ensemble of SDE drifts by stack_module_state and
vmap with its randomness modes; the errors these codes hit (vmap over in-place physics buffers,
bad grids, singular systems); DiffTaichi-era idioms (Variable, .data updates, FloatTensor)."""

import copy

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_RNG = np.random.default_rng(50)
_FIELD = _RNG.standard_normal((1, 1, 4, 4))
_GRID = _RNG.standard_normal((1, 3, 3, 2)) * 0.5
_PTS = _RNG.standard_normal((4, 2))
_SQ = _RNG.standard_normal((3, 3))
_SERIES = _RNG.standard_normal(7)
_IDX = [0, 1, 1, 2]


def _penalties(torch):
    """(name, input, loss-of-input) for each op a simulator's gradient penalty runs through."""
    f64 = torch.float64
    field, grid = torch.from_numpy(_FIELD), torch.from_numpy(_GRID)
    idx = torch.tensor(_IDX)
    ones = torch.ones(1, 1, 3, 3, dtype=f64)
    return [
        ("gs_field", field, lambda x: torch.nn.functional.grid_sample(
            x, grid, align_corners=True).pow(2).sum()),
        ("gs_grid", grid, lambda x: torch.nn.functional.grid_sample(
            field, x, padding_mode="border", align_corners=False).pow(2).sum()),
        ("cdist", torch.from_numpy(_PTS), lambda x: torch.cdist(x, x + 0.5).pow(3).sum()),
        ("pdist", torch.from_numpy(_PTS), lambda x: torch.nn.functional.pdist(x).pow(3).sum()),
        ("index_add", torch.from_numpy(_PTS), lambda x: torch.zeros(3, dtype=f64).index_add(
            0, idx, x[:, 0] ** 3).pow(2).sum()),
        ("scatter_amax", torch.from_numpy(_PTS), lambda x: torch.zeros(3, dtype=f64)
         .scatter_reduce(0, idx, x[:, 0] ** 3, "amax", include_self=False).pow(2).sum()),
        ("scatter_mean", torch.from_numpy(_PTS), lambda x: torch.zeros(3, dtype=f64)
         .scatter_reduce(0, idx, x[:, 0] ** 3, "mean").pow(2).sum()),
        ("scatter_prod", torch.from_numpy(_PTS), lambda x: torch.ones(3, dtype=f64)
         .scatter_reduce(0, idx, x[:, 0], "prod").pow(2).sum()),
        ("eigh", torch.from_numpy(_SQ), lambda x: torch.linalg.eigh(
            x @ x.T + torch.eye(3, dtype=f64))[0].pow(2).sum()),
        ("matrix_exp", torch.from_numpy(_SQ), lambda x: torch.linalg.matrix_exp(x * 0.3)
         .pow(2).sum()),
        ("det", torch.from_numpy(_SQ), lambda x: torch.linalg.det(x).pow(2)),
        ("svdvals", torch.from_numpy(_SQ), lambda x: torch.linalg.svdvals(x).pow(3).sum()),
        ("quantile", torch.from_numpy(_SERIES), lambda x: torch.quantile(x, 0.3).pow(3)),
        ("cumprod", torch.from_numpy(_SERIES), lambda x: torch.cumprod(x, 0).pow(2).sum()),
        ("cummax", torch.from_numpy(_SERIES), lambda x: torch.cummax(x, 0)[0].pow(3).sum()),
        ("logcumsumexp", torch.from_numpy(_SERIES), lambda x: torch.logcumsumexp(x, 0)
         .pow(2).sum()),
        ("sort", torch.from_numpy(_SERIES), lambda x: torch.sort(x)[0].cumsum(0).pow(2).sum()),
        ("topk", torch.from_numpy(_SERIES), lambda x: torch.topk(x, 3, largest=False)[0]
         .pow(3).sum()),
        ("unfold_std", torch.from_numpy(_SERIES), lambda x: x.unfold(0, 3, 1).std(-1)
         .pow(2).sum()),
        ("ndtr", torch.from_numpy(_SERIES), lambda x: torch.special.ndtr(x).pow(2).sum()
         + torch.special.log_ndtr(x).sum()),
        ("softplus", torch.from_numpy(_SERIES), lambda x: torch.nn.functional.softplus(
            x, beta=2.0, threshold=1.0).pow(2).sum()),
        ("normal", torch.from_numpy(_SERIES), lambda x: torch.distributions.Normal(
            x, x.exp()).log_prob(torch.zeros(7, dtype=f64)).sum() + torch.distributions.Normal(
            x, 1.0).icdf(torch.full((7,), 0.3, dtype=f64)).pow(2).sum()),
        ("trapezoid", torch.from_numpy(np.sort(_SERIES)), lambda x: torch.trapezoid(
            x ** 2, x).pow(2) + torch.cumulative_trapezoid(x ** 3).sum()),
        ("gradient", torch.from_numpy(np.sort(_SERIES)), lambda x: torch.gradient(
            x ** 3, spacing=(x.detach(),), edge_order=2)[0].pow(2).sum()),
        ("lstsq", torch.from_numpy(_PTS), lambda x:
         torch.linalg.lstsq(x, torch.ones(4, 1, dtype=f64)).solution.pow(2).sum()),
        ("circular", field, lambda x: torch.nn.functional.conv2d(
            torch.nn.functional.pad(x, (1, 1, 1, 1), mode="circular"), ones).pow(3).sum()),
        ("bicubic", field, lambda x: torch.nn.functional.interpolate(
            x, scale_factor=2, mode="bicubic", align_corners=True).pow(3).sum()),
        ("rfft2", field, lambda x: torch.fft.irfft2(torch.fft.rfft2(x) * 1j, s=(4, 4))
         .pow(3).sum()),
        ("normalize", torch.from_numpy(_PTS), lambda x: torch.nn.functional.normalize(
            x, dim=-1).pow(3).sum()),
        ("cross", torch.from_numpy(_SQ), lambda x: torch.linalg.cross(x, x.roll(1, 0))
         .pow(2).sum()),
    ]


def gradient_penalty_program(torch):
    """For each op: g = d loss / dx with create_graph, then d |g|^2 / dx (the double backward
    a gradient penalty, a Hessian-vector product or a Newton step through a simulator runs)."""
    res = {}
    for name, x, loss in _penalties(torch):
        x = x.clone().requires_grad_(True)
        g, = torch.autograd.grad(loss(x), x, create_graph=True)
        res[name] = g.detach()
        try:
            res[name + "_2"], = torch.autograd.grad((g ** 2).sum(), x)
        except NotImplementedError as e:    # cdist's backward has no derivative in PyTorch
            res[name + "_2"] = [str(e)]
    return res


def polynomial_bases_program(torch):
    """Regression and quadrature bases from torch.special: Laguerre/Hermite/Chebyshev/Legendre
    polynomials (scalar and tensor degrees), a Gauss-Hermite expectation of a call payoff by
    hermite_polynomial_h, and Bessel-function Green's functions for 2-D diffusion and waves."""
    x = torch.linspace(-1.5, 1.5, 7, dtype=torch.float64)
    res = {}
    for name in ("hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
                 "legendre_polynomial_p", "chebyshev_polynomial_t", "chebyshev_polynomial_u",
                 "shifted_chebyshev_polynomial_t"):
        f = getattr(torch.special, name)
        res[name] = f(x, 4)
        res[name + "_n"] = f(x, torch.tensor([0, 1, 2, 3, 5, 6, 7]))
        res[name + "_dtype"] = [str(f(x.float(), 3).dtype).split(".")[1],
                                str(f(torch.tensor([1, 2]), 3).dtype).split(".")[1]]
    # Gauss-Hermite nodes and weights from the Golub-Welsch eigenproblem
    n = 12
    off = torch.sqrt(torch.arange(1, n, dtype=torch.float64) / 2)
    nodes, vecs = torch.linalg.eigh(torch.diag(off, 1) + torch.diag(off, -1))
    weights = np.sqrt(np.pi) * vecs[0] ** 2
    res["nodes"], res["weights"] = nodes, weights
    h_at_nodes = torch.special.hermite_polynomial_h(nodes, n - 1)
    res["h_nodes"] = h_at_nodes.abs()
    s = 100 * torch.exp(0.2 * np.sqrt(2) * nodes - 0.02)
    res["gh_call"] = (weights * torch.relu(s - 100)).sum() / np.sqrt(np.pi)
    r = torch.tensor([0.1, 0.5, 1.0, 2.5, 10.0])
    res["green_diffusion"] = torch.special.modified_bessel_k0(r) / (2 * np.pi)
    res["green_scaled"] = torch.special.scaled_modified_bessel_k1(r)
    res["wave"] = [torch.special.bessel_j0(r), torch.special.bessel_y1(r),
                   torch.special.spherical_bessel_j0(r), torch.special.airy_ai(-r)]
    res["i0e"] = torch.special.i0e(r)
    return res


def sde_ensemble_program(torch):
    """An ensemble of neural SDE drifts (torch.func's model-ensembling recipe): parameters
    stacked by stack_module_state, a meta-device copy called by functional_call under vmap
    with NumPy Brownian increments, per-member gradients by vmap(grad); and vmap's randomness
    modes checked on shapes, ties across the batch and reproducibility only."""
    rng = np.random.default_rng(51)
    members = [torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(),
                                   torch.nn.Linear(8, 3)) for _ in range(3)]
    for m in members:
        fill_(torch, m, rng)
    params, buffers = torch.func.stack_module_state(members)
    base = copy.deepcopy(members[0]).to("meta")
    dw = torch.from_numpy((rng.standard_normal((5, 3, 4, 3)) * 0.3).astype(np.float32))

    def drift(p, b, y):
        return torch.func.functional_call(base, (p, b), (y,))

    y = torch.from_numpy(rng.standard_normal((3, 4, 3)).astype(np.float32))
    for i in range(5):
        y = y + 0.1 * torch.func.vmap(drift)(params, buffers, y) + 0.2 * dw[i]
    res = {"y": y, "keys": sorted(params), "meta": [str(next(base.parameters()).device)],
           "stacked_rg": params["0.weight"].requires_grad}

    def member_loss(p, b, y):
        return drift(p, b, y).pow(2).mean()
    per_member = torch.func.vmap(torch.func.grad(member_loss), in_dims=(0, 0, 0))(
        {k: v.detach() for k, v in params.items()}, buffers, y.detach())
    res["per_member"] = per_member["2.bias"]

    def noisy(z):
        return z + torch.randn_like(z) + torch.rand(())
    zeros = torch.zeros(4, 3)
    try:
        torch.func.vmap(noisy)(zeros)
    except RuntimeError as e:
        res["default_mode"] = [str(e)]
    torch.manual_seed(3)
    same = torch.func.vmap(noisy, randomness="same")(zeros)
    diff = torch.func.vmap(noisy, randomness="different")(zeros)
    torch.manual_seed(3)
    res["repro"] = bool(torch.equal(same, torch.func.vmap(noisy, randomness="same")(zeros)))
    res["same_tied"] = bool(torch.equal(same[0], same[3]))
    res["different_tied"] = bool(torch.equal(diff[0], diff[3]))
    res["shapes"] = [list(same.shape), list(diff.shape)]
    return res


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the program records whatever the library raises
        return [type(e).__name__, str(e)]
    return ["no error"]


def physics_errors_program(torch):
    """The errors simulator and pricing code runs into, as [type, message]: in-place scatters
    into unbatched buffers under vmap, data-dependent control flow under vmap, bad grids,
    mismatched point sets, singular and indefinite systems, bad quantiles and scatters."""
    idx = torch.tensor([0, 1, 1])
    x = torch.arange(6.0).view(2, 3)
    res = {
        "vmap_index_add_": _error(lambda: torch.func.vmap(
            lambda v: torch.zeros(2).index_add_(0, idx, v))(x)),
        "vmap_add_": _error(lambda: torch.func.vmap(lambda v: torch.zeros(3).add_(v))(x)),
        "vmap_item": _error(lambda: torch.func.vmap(lambda v: v.sum().item())(x)),
        "vmap_if": _error(lambda: torch.func.vmap(lambda v: v if v.sum() > 0 else -v)(x)),
        "vmap_nonzero": _error(lambda: torch.func.vmap(torch.nonzero)(x)),
        "vmap_in_dims": _error(lambda: torch.func.vmap(lambda v: v, in_dims=2)(x)),
        "vmap_sizes": _error(lambda: torch.func.vmap(lambda v, w: v + w)(x, torch.ones(3, 3))),
        "grid_last_dim": _error(lambda: torch.nn.functional.grid_sample(
            torch.ones(1, 1, 4, 4), torch.zeros(1, 5, 5, 3), align_corners=True)),
        "grid_batch": _error(lambda: torch.nn.functional.grid_sample(
            torch.ones(2, 1, 4, 4), torch.zeros(1, 5, 5, 2), align_corners=True)),
        "grid_bicubic_3d": _error(lambda: torch.nn.functional.grid_sample(
            torch.ones(1, 1, 4, 4, 4), torch.zeros(1, 2, 2, 2, 3), mode="bicubic",
            align_corners=True)),
        "cdist_cols": _error(lambda: torch.cdist(torch.ones(3, 2), torch.ones(4, 3))),
        "solve_singular": _error(lambda: torch.linalg.solve(torch.zeros(2, 2), torch.ones(2))),
        "cholesky": _error(lambda: torch.linalg.cholesky(torch.tensor([[1.0, 2], [2, 1]]))),
        "quantile_q": _error(lambda: torch.quantile(torch.ones(3), 1.5)),
        "quantile_int": _error(lambda: torch.quantile(torch.tensor([1, 2, 3]), 0.5)),
        "index_add_dtype": _error(lambda: torch.zeros(3).index_add_(
            0, torch.tensor([0, 1]), torch.ones(2, dtype=torch.float64))),
        "scatter_reduce": _error(lambda: torch.zeros(3).scatter_reduce(
            0, torch.tensor([0, 1]), torch.ones(2), "avg")),
        "normal_scale": _error(lambda: torch.distributions.Normal(torch.tensor(0.0),
                                                                  torch.tensor(-1.0))),
        "lstsq_rows": _error(lambda: torch.linalg.lstsq(torch.ones(3, 2), torch.ones(4, 1))),
        "cross_size": _error(lambda: torch.linalg.cross(torch.ones(3, 2), torch.ones(3, 2))),
        "unfold_size": _error(lambda: torch.ones(5).unfold(0, 7, 1)),
        "sobol_dim": _error(lambda: torch.quasirandom.SobolEngine(0)),
        "cov_aweights": _error(lambda: torch.cov(torch.ones(2, 3),
                                                 aweights=torch.tensor([1.0, -2, 3]))),
    }
    # the working forms of the vmap cases
    res["vmap_out_of_place"] = torch.func.vmap(
        lambda v: torch.zeros_like(v[:2]).index_add(0, idx, v))(x)
    res["vmap_new_zeros"] = torch.func.vmap(lambda v: v.new_zeros(2).index_add_(0, idx, v))(x)
    return res


def legacy_simulator_program(torch):
    """A 2018-era differentiable simulator: Variable, FloatTensor/DoubleTensor constructors,
    parameters updated through .data, gradients zeroed through .grad.data, .type() casts."""
    x = torch.autograd.Variable(torch.ones(3) * 2, requires_grad=True)
    w = torch.FloatTensor([1.0, 2.0, 3.0])
    traj = []
    for _ in range(4):
        y = (x * w).pow(2).sum() + torch.sin(x).sum()
        y.backward()
        x.data -= 0.05 * x.grad.data
        x.grad.data.zero_()
        traj.append(x.data.clone())
    grid = torch.Tensor(2, 3).zero_()
    vel = torch.DoubleTensor(2).fill_(1.5)
    ids = torch.LongTensor([1, 2])
    cast = x.type(torch.DoubleTensor)
    return {"x": x, "traj": traj, "grid": grid, "vel": vel, "ids": ids, "cast": cast,
            "dtypes": [str(t.dtype).split(".")[1] for t in (grid, vel, ids, cast, w)],
            "is_leaf": x.is_leaf, "grad_zero": x.grad}


def autocast_simulator_program(torch):
    """A simulator step and a pricing head under CPU autocast to bfloat16: which of the
    domain's ops run in bfloat16 and which stay float32 (the result dtypes), and the values
    of the float32 ones; gradients flowing back to float32 leaves."""
    rng = np.random.default_rng(52)
    x = torch.from_numpy(rng.standard_normal((3, 4)).astype(np.float32)).requires_grad_(True)
    field = torch.from_numpy(rng.standard_normal((1, 2, 4, 4)).astype(np.float32))
    grid = torch.from_numpy(rng.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32))
    res = {}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        gram = x @ x.T
        outs = {"mm": gram, "cdist": torch.cdist(x, x), "pdist": torch.nn.functional.pdist(x),
                "grid_sample": torch.nn.functional.grid_sample(field, grid, align_corners=True),
                "conv": torch.nn.functional.conv2d(field, torch.ones(1, 2, 3, 3)),
                "logsumexp": torch.logsumexp(gram, 0), "cumsum": torch.cumsum(gram, 0),
                "cumprod": torch.cumprod(gram, 0), "softplus": torch.nn.functional.softplus(gram),
                "ndtr": torch.special.ndtr(gram), "exp": torch.exp(gram),
                "solve": torch.linalg.solve(gram + 4 * torch.eye(3), torch.ones(3)),
                "norm": torch.linalg.vector_norm(gram), "prod": torch.prod(gram),
                "mse": torch.nn.functional.mse_loss(gram, torch.ones(3, 3)),
                "cat": torch.cat([gram, torch.ones(3, 3)]), "baddbmm": torch.baddbmm(
                    torch.ones(1, 3, 3), x[None], x.T[None]),
                "interp": torch.nn.functional.interpolate(field, scale_factor=2,
                                                          mode="bilinear")}
        loss = outs["mse"] + outs["logsumexp"].sum() + outs["cdist"].sum()
    res["dtypes"] = [f"{k}:{str(v.dtype).split('.')[1]}" for k, v in outs.items()]
    for k, v in outs.items():
        if v.dtype == torch.float32:
            res[k] = v.detach()
    loss.backward()
    res["x_grad_dtype"] = [str(x.grad.dtype).split(".")[1]]
    res["x_grad"] = x.grad
    return res


PROGRAMS = [gradient_penalty_program, polynomial_bases_program, sde_ensemble_program,
            physics_errors_program, legacy_simulator_program, autocast_simulator_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
