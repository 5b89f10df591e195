"""Model fitting programs written as SMPLify/SMPLify-X, Levenberg-Marquardt IK solvers and
SoftRas's hand-written kernels write them in torch, run once with `torch` bound to ember and
once to PyTorch from the same NumPy weights: staged fitting that toggles requires_grad on
camera and pose, a max-mixture GMM pose prior, the Geman-McClure robustifier and the
bent-knee angle prior; Jacobians by vmap(jacrev), jacfwd and autograd.functional.jacobian
feeding a damped Gauss-Newton solve; and a soft-silhouette autograd.Function with a
once_differentiable backward that scatters face gradients to vertices."""

import numpy as np
import pytest

import ember
from tests.parity._programs import normal, program_tests
from tests.parity.test_parity_programs_round33_body import (J, NB, _lbs_functions, _smpl_class,
                                                            _smpl_data)

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _prior_classes(torch):
    class MaxMixturePrior(torch.nn.Module):
        def __init__(self, means, covs, weights, epsilon=1e-16):
            super().__init__()
            self.num_gaussians = means.shape[0]
            self.register_buffer('means', torch.tensor(means, dtype=torch.float32))
            self.register_buffer('covs', torch.tensor(covs, dtype=torch.float32))
            precisions = np.stack([np.linalg.inv(cov) for cov in covs])
            self.register_buffer('precisions', torch.tensor(precisions, dtype=torch.float32))
            sqrdets = np.array([np.sqrt(np.linalg.det(c)) for c in covs])
            const = (2 * np.pi) ** (means.shape[1] / 2.)
            nll_weights = np.asarray(weights / (const * (sqrdets / sqrdets.min())))
            self.register_buffer('nll_weights',
                                 torch.tensor(nll_weights, dtype=torch.float32).unsqueeze(0))
            self.register_buffer('pi_term', torch.log(torch.tensor(2 * np.pi,
                                                                   dtype=torch.float32)))
            cov_dets = [np.log(np.linalg.det(cov) + epsilon) for cov in covs]
            self.register_buffer('cov_dets', torch.tensor(cov_dets, dtype=torch.float32))

        def merged_log_likelihood(self, pose, betas):
            diff_from_mean = pose.unsqueeze(dim=1) - self.means
            prec_diff_prod = torch.einsum('mij,bmj->bmi', [self.precisions, diff_from_mean])
            diff_prec_quadratic = (prec_diff_prod * diff_from_mean).sum(dim=-1)
            curr_loglikelihood = 0.5 * diff_prec_quadratic - torch.log(self.nll_weights)
            min_likelihood, _ = torch.min(curr_loglikelihood, dim=1)
            return min_likelihood

        def log_likelihood(self, pose, betas):
            # the full mixture, through logsumexp
            diff = pose.unsqueeze(1) - self.means
            quad = torch.einsum('bmi,mij,bmj->bm', diff, self.precisions, diff)
            comp = -0.5 * (quad + self.cov_dets + pose.shape[1] * self.pi_term)
            return -torch.logsumexp(comp + torch.log(self.nll_weights), dim=1)

        def forward(self, pose, betas, merged=True):
            return (self.merged_log_likelihood if merged else self.log_likelihood)(pose, betas)

    class GMoF(torch.nn.Module):
        def __init__(self, rho=1):
            super().__init__()
            self.rho = rho

        def extra_repr(self):
            return 'rho = {}'.format(self.rho)

        def forward(self, residual):
            squared_res = residual ** 2
            dist = torch.div(squared_res, squared_res + self.rho ** 2)
            return self.rho ** 2 * dist
    return MaxMixturePrior, GMoF


def smplify_program(torch):
    rng = np.random.default_rng(0)
    data = _smpl_data(rng)
    model = _smpl_class(torch)(data, batch_size=1)
    MaxMixturePrior, GMoF = _prior_classes(torch)
    P = (J - 1) * 3
    A = rng.standard_normal((3, P, P)) * 0.3
    prior = MaxMixturePrior(rng.standard_normal((3, P)) * 0.2,
                            A @ A.transpose(0, 2, 1) + np.eye(P), np.array([0.2, 0.5, 0.3]))
    robust = GMoF(rho=0.5)

    def project(points, cam_t, focal=5.0):
        p = points + cam_t.unsqueeze(1)
        return focal * p[..., :2] / p[..., 2:]

    with torch.no_grad():
        gt_pose = normal(torch, rng, 1, P) * 0.3
        _, gt_joints, _ = model(body_pose=gt_pose, transl=torch.tensor([[0., 0., 6.]]))
        gt_2d = project(gt_joints, torch.zeros(1, 3))
        model.transl.copy_(torch.tensor([[0.2, -0.1, 5.0]]))
    conf = torch.from_numpy(rng.uniform(0.3, 1.0, (1, J)).astype(np.float32))
    res = {"losses": [], "repr": [repr(robust)]}

    def knee_prior(pose):
        idx = [3 * 2 + 0, 3 * 5 + 0]
        return torch.exp(pose[:, idx] * torch.tensor([1., -1.])) ** 2

    # stage 1: camera translation and global orientation only
    model.body_pose.requires_grad = False
    model.betas.requires_grad = False
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.05)
    for _ in range(3):
        _, joints, _ = model()
        loss = (conf.unsqueeze(-1) ** 2 * robust(project(joints, torch.zeros(1, 3)) - gt_2d)) \
            .sum() + 100 * (model.transl[:, 2] - 5.5).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["stage1_grads"] = [model.body_pose.grad is None, model.transl.grad is not None]
    # stage 2: everything, with the pose prior and knee prior
    model.body_pose.requires_grad_(True)
    model.betas.requires_grad_(True)
    opt = torch.optim.Adam(model.parameters(), lr=0.02, betas=(0.9, 0.999))
    for _ in range(3):
        _, joints, _ = model()
        data_term = (conf.unsqueeze(-1) ** 2
                     * robust(project(joints, torch.zeros(1, 3)) - gt_2d)).sum()
        pprior = prior(model.body_pose, model.betas).sum() * 1e-3
        loss = data_term + pprior + knee_prior(model.body_pose).sum() * 1e-2 \
            + (model.betas ** 2).sum() * 1e-2
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["pose"], res["transl"] = model.body_pose.detach(), model.transl.detach()
    res["full_nll"] = prior(model.body_pose.detach(), None, merged=False)
    res["buffers"] = sorted(k for k in prior.state_dict())
    res["state_lens"] = sorted(len(s) for s in opt.state.values())
    return res


def lm_ik_program(torch):
    rng = np.random.default_rng(1)
    data = _smpl_data(rng)
    model = _smpl_class(torch)(data, batch_size=1)
    _, lbs = _lbs_functions(torch)

    def joints_of(pose, betas):
        _, j = lbs(betas[None], pose[None], model.v_template, model.shapedirs, model.posedirs,
                   model.J_regressor, model.parents, model.lbs_weights)
        return j[0].reshape(-1)

    pose = normal(torch, rng, 3, J * 3) * 0.3
    betas = normal(torch, rng, 3, NB)
    res = {}
    res["jacrev"] = torch.func.vmap(torch.func.jacrev(joints_of), in_dims=(0, 0))(pose, betas)
    res["jacfwd_betas"] = torch.func.vmap(torch.func.jacfwd(joints_of, argnums=1))(pose, betas)
    res["jac_autograd"] = torch.autograd.functional.jacobian(
        lambda p: joints_of(p, betas[0]), pose[0], vectorize=True)
    _, tangent = torch.func.jvp(lambda p: joints_of(p, betas[0]), (pose[0],),
                                (torch.ones_like(pose[0]),))
    res["jvp"] = tangent
    target = joints_of(pose[0] * 0.5, betas[0]).detach()
    p, lam = pose[0].clone(), 1e-2
    res["residuals"] = []
    for _ in range(3):
        r = joints_of(p, betas[0]) - target
        Jm = torch.func.jacrev(joints_of)(p, betas[0])
        H = Jm.T @ Jm + lam * torch.eye(Jm.shape[1])
        step = torch.linalg.solve(H, Jm.T @ r)
        p = p - step
        res["residuals"].append(r.norm())
        lam = lam * 0.5
    res["p"] = p
    return res


def _soft_sil_function(torch):
    class SoftSilhouette(torch.autograd.Function):
        """Per-face soft coverage of each pixel and its aggregate, with a hand-written
        backward that scatters each face's gradient to its three vertices."""

        @staticmethod
        def forward(ctx, verts2d, faces, pixels, sigma):
            tri = verts2d[faces]                                   # [F, 3, 2]
            centre = tri.mean(1)                                   # [F, 2]
            d2 = ((pixels[None] - centre[:, None]) ** 2).sum(-1)  # [F, P]
            D = torch.sigmoid(-d2 / sigma)
            sil = 1 - torch.prod(1 - D, dim=0)
            ctx.save_for_backward(verts2d, faces, pixels, D, sil)
            ctx.sigma = sigma
            ctx.mark_non_differentiable(faces)
            return sil

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, grad_sil):
            verts2d, faces, pixels, D, sil = ctx.saved_tensors
            centre = verts2d[faces].mean(1)
            # d sil / d D_f = prod_{g != f} (1 - D_g) = (1 - sil) / (1 - D_f)
            dsil_dD = (1 - sil)[None] / (1 - D).clamp(min=1e-12)
            dD_dd2 = -D * (1 - D) / ctx.sigma
            g_d2 = grad_sil[None] * dsil_dD * dD_dd2               # [F, P]
            g_centre = (g_d2.unsqueeze(-1) * 2 * (centre[:, None] - pixels[None])).sum(1)
            grad_verts = torch.zeros_like(verts2d)
            idx = faces.reshape(-1, 1).expand(-1, 2)
            grad_verts.scatter_add_(0, idx, (g_centre / 3).repeat_interleave(3, dim=0))
            return (grad_verts if ctx.needs_input_grad[0] else None), None, None, None
    return SoftSilhouette


def soft_silhouette_function_program(torch):
    rng = np.random.default_rng(2)
    SoftSilhouette = _soft_sil_function(torch)
    verts = torch.nn.Parameter(normal(torch, rng, 8, 2) * 0.5)
    faces = torch.from_numpy(rng.choice(8, (6, 3)).astype(np.int64))
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, 6), torch.linspace(-1, 1, 6), indexing="xy")
    pixels = torch.stack([xs.flatten(), ys.flatten()], -1)
    target = (pixels.norm(dim=-1) < 0.6).float()
    opt = torch.optim.SGD([verts], lr=0.5)
    res = {"losses": []}
    for _ in range(3):
        sil = SoftSilhouette.apply(verts, faces, pixels, 0.1)
        loss = torch.nn.functional.binary_cross_entropy(sil.clamp(1e-6, 1 - 1e-6), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["losses"].append(loss.detach())
    res["sil"], res["verts"], res["grad"] = sil.detach(), verts.detach(), verts.grad
    res["grad_fn"] = [type(sil.grad_fn).__name__]
    v64 = verts.detach().double().requires_grad_()
    res["gradcheck"] = [torch.autograd.gradcheck(
        lambda v: SoftSilhouette.apply(v, faces, pixels.double(), 0.3), (v64,))]
    out = SoftSilhouette.apply(v64, faces, pixels.double(), 0.3)
    g, = torch.autograd.grad(out.sum(), v64, create_graph=True)
    with pytest.raises(RuntimeError) as info:
        g.sum().backward()
    res["double_backward"] = [str(info.value)]
    res["g"] = g.detach()
    return res


PROGRAMS = [smplify_program, lm_ik_program, soft_silhouette_function_program]

test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
