"""Tensor networks and tensor decompositions written as quimb/tensornetwork-style torch code and
TensorLy's torch backend write them, run once with `torch` bound to ember and once to PyTorch
from the same NumPy data: MPS left/right canonicalisation by linalg.qr, two-site SVD truncation
with gauge-fixed signs, TT-SVD, CP-ALS (Khatri-Rao products, lstsq/pinv/solve), Tucker/HOSVD by
mode-n unfolding with movedim, randomized SVD against the truncated SVD, and a TT-linear layer
trained a few steps with gradients through svd/qr."""

import numpy as np
import pytest

import ember
from tests.parity._programs import program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _fix_signs(torch, U, Vh):
    """Make the largest-|.| entry of each left singular vector positive (svd_flip)."""
    idx = U.abs().argmax(dim=0)
    signs = torch.sign(U.gather(0, idx.unsqueeze(0))).squeeze(0)
    return U * signs, Vh * signs.unsqueeze(-1)


def mps_program(torch):
    """A random 6-site MPS (bond 4, physical 2) in float64: norm by transfer-matrix contraction,
    left-canonicalisation with QR (R absorbed right), right-canonicalisation with QR of the
    transpose, an orthogonality check per site, then SVD compression to bond 2 sweeping left to
    right, with the truncation error and the overlap <psi|psi_trunc>, and its gradient with
    respect to the tensors of the original state."""
    rng = np.random.default_rng(0)
    L, d, D = 6, 2, 4
    dims = [1] + [min(D, d ** min(i, L - i)) for i in range(1, L)] + [1]
    tensors = [torch.from_numpy(rng.standard_normal((dims[i], d, dims[i + 1])))
               .requires_grad_() for i in range(L)]

    def overlap(A, B):
        env = torch.ones(1, 1, dtype=torch.float64)
        for a, b in zip(A, B):
            env = torch.einsum("ab,asc,bsd->cd", env, a.conj(), b)
        return env.squeeze()

    res = {"norm2": overlap(tensors, tensors).detach()}
    left = [t for t in tensors]
    for i in range(L - 1):
        Dl, dd, Dr = left[i].shape
        Q, R = torch.linalg.qr(left[i].reshape(Dl * dd, Dr))
        left[i] = Q.reshape(Dl, dd, -1)
        left[i + 1] = torch.tensordot(R, left[i + 1], dims=1)
    res["left_iso"] = [torch.dist(torch.einsum("asb,asc->bc", t, t),
                                  torch.eye(t.shape[-1], dtype=t.dtype)) < 1e-10
                       for t in left[:-1]]
    res["left_norm"] = torch.linalg.norm(left[-1]).detach()
    right = [t for t in tensors]
    for i in range(L - 1, 0, -1):
        Dl, dd, Dr = right[i].shape
        Q, R = torch.linalg.qr(right[i].reshape(Dl, dd * Dr).T)
        right[i] = Q.T.reshape(-1, dd, Dr)
        right[i - 1] = torch.einsum("asb,cb->asc", right[i - 1], R)
    res["right_norm"] = torch.linalg.norm(right[0]).detach()
    chi = 2
    trunc = [t for t in left]
    errs = []
    for i in range(L - 1, 0, -1):
        Dl, dd, Dr = trunc[i].shape
        U, S, Vh = torch.linalg.svd(trunc[i].reshape(Dl, dd * Dr), full_matrices=False)
        U, Vh = _fix_signs(torch, U, Vh)
        errs.append((S[chi:] ** 2).sum())
        k = min(chi, S.shape[0])
        trunc[i] = Vh[:k].reshape(k, dd, Dr)
        trunc[i - 1] = torch.einsum("asb,bc->asc", trunc[i - 1], U[:, :k] * S[:k])
    res["svals_last"] = S.detach()
    res["trunc_err"] = torch.stack(errs).detach()
    ov = overlap(tensors, trunc) / overlap(tensors, tensors).sqrt()
    ov.backward()
    res["overlap"] = ov.detach()
    res["grads"] = [t.grad for t in tensors]
    res["shapes"] = [list(t.shape) for t in trunc]
    return res


def tt_svd_program(torch):
    """TensorLy's tensor_train: sequential reshape + truncated SVD (rank 3) of a 4-way
    float32 tensor, the reconstruction by tl.tt_to_tensor-style tensordot chain, its relative
    error, and TT-rounding of the sum of two TT tensors (cores concatenated block-diagonally
    with torch.block_diag/cat) back to rank 3."""
    rng = np.random.default_rng(1)
    shape, rank = (3, 4, 5, 3), 3
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))

    def tt_svd(t, r):
        cores, unfold, prev = [], t, 1
        for n in range(t.ndim - 1):
            unfold = unfold.reshape(prev * t.shape[n], -1)
            U, S, Vh = torch.linalg.svd(unfold, full_matrices=False)
            U, Vh = _fix_signs(torch, U, Vh)
            k = min(r, S.numel())
            cores.append(U[:, :k].reshape(prev, t.shape[n], k))
            unfold = S[:k, None] * Vh[:k]
            prev = k
        cores.append(unfold.reshape(prev, t.shape[-1], 1))
        return cores

    def tt_to_tensor(cores):
        full = cores[0]
        for c in cores[1:]:
            full = torch.tensordot(full, c, dims=([-1], [0]))
        return full.squeeze(0).squeeze(-1)

    cores = tt_svd(x, rank)
    rec = tt_to_tensor(cores)
    res = {"ranks": [c.shape[-1] for c in cores], "rec": rec,
           "rel_err": (torch.linalg.norm(rec - x) / torch.linalg.norm(x))}
    y = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    cores_y = tt_svd(y, 2)
    summed = []
    for n, (a, b) in enumerate(zip(cores, cores_y)):
        if n == 0:
            summed.append(torch.cat([a, b], dim=2))
        elif n == len(cores) - 1:
            summed.append(torch.cat([a, b], dim=0))
        else:
            summed.append(torch.stack([torch.block_diag(a[:, j], b[:, j])
                                       for j in range(a.shape[1])], dim=1))
    full_sum = tt_to_tensor(summed)
    res["sum_ranks"] = [c.shape[-1] for c in summed]
    res["sum_err"] = torch.linalg.norm(full_sum - tt_to_tensor(cores) - tt_to_tensor(cores_y))
    rounded = tt_svd(full_sum, 3)
    res["round_err"] = torch.linalg.norm(tt_to_tensor(rounded) - full_sum) / \
        torch.linalg.norm(full_sum)
    res["round_ranks"] = [c.shape[-1] for c in rounded]
    return res


def _unfold(torch, t, mode):
    """TensorLy's unfold: mode to the front, then reshape (C order)."""
    return torch.reshape(torch.moveaxis(t, mode, 0), (t.shape[mode], -1))


def _fold(torch, m, mode, shape):
    full = list(shape)
    mode_dim = full.pop(mode)
    full.insert(0, mode_dim)
    return torch.moveaxis(torch.reshape(m, full), 0, mode)


def _khatri_rao(torch, mats):
    """Column-wise Kronecker product, TensorLy's order (first matrix varies slowest)."""
    out = mats[0]
    for m in mats[1:]:
        out = torch.einsum("ir,jr->ijr", out, m).reshape(-1, out.shape[1])
    return out


def cp_als_program(torch):
    """CP-ALS (rank 3) on a noisy rank-3 tensor in float64: factor updates by three solvers
    (lstsq on the Khatri-Rao system, pinv of the Hadamard Gram, linalg.solve of the transposed
    normal equations), column normalisation with weights, fit per iteration, and the final
    reconstruction from weights and factors by einsum."""
    rng = np.random.default_rng(2)
    shape, R = (4, 5, 3), 3
    true = [rng.standard_normal((s, R)) for s in shape]
    data = np.einsum("ir,jr,kr->ijk", *true) + 0.01 * rng.standard_normal(shape)
    X = torch.from_numpy(data)
    factors = [torch.from_numpy(rng.standard_normal((s, R))) for s in shape]
    res = {"fit": []}
    norm_x = torch.linalg.norm(X)
    for it in range(6):
        for mode in range(3):
            others = [factors[m] for m in range(3) if m != mode]
            kr = _khatri_rao(torch, others)
            unf = _unfold(torch, X, mode)
            if it % 3 == 0:
                factors[mode] = torch.linalg.lstsq(kr, unf.T).solution.T
            elif it % 3 == 1:
                gram = torch.ones(R, R, dtype=X.dtype)
                for f in others:
                    gram = gram * (f.T @ f)
                factors[mode] = unf @ kr @ torch.linalg.pinv(gram)
            else:
                gram = torch.ones(R, R, dtype=X.dtype)
                for f in others:
                    gram *= f.T @ f
                factors[mode] = torch.linalg.solve(gram, (unf @ kr).T).T
        weights = torch.ones(R, dtype=X.dtype)
        for m in range(3):
            n = torch.linalg.norm(factors[m], dim=0)
            weights = weights * n
            factors[m] = factors[m] / n
        rec = torch.einsum("r,ir,jr,kr->ijk", weights, *factors)
        res["fit"].append(1 - torch.linalg.norm(X - rec) / norm_x)
        factors[0] = factors[0] * weights
    res["rec"] = rec
    res["sorted_weights"] = torch.sort(weights, descending=True).values
    return res


def tucker_program(torch):
    """HOSVD then two HOOI sweeps for a (5, 4, 6) float32 tensor at ranks (2, 3, 2): factors
    from the leading left singular vectors of each unfolding (sign-fixed), the core by
    tl.tenalg.multi_mode_dot (n-mode products via tensordot + movedim), reconstruction error
    per sweep, and the core's all-orthogonality (Gram of its unfoldings is diagonal)."""
    rng = np.random.default_rng(3)
    shape, ranks = (5, 4, 6), (2, 3, 2)
    X = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))

    def mode_dot(t, m, mode, transpose=False):
        m = m.T if transpose else m
        out = torch.tensordot(m, t, dims=([1], [mode]))
        return torch.movedim(out, 0, mode)

    def multi_mode_dot(t, mats, transpose=False):
        for mode, m in enumerate(mats):
            t = mode_dot(t, m, mode, transpose)
        return t

    factors = []
    for mode in range(3):
        U, _, Vh = torch.linalg.svd(_unfold(torch, X, mode), full_matrices=False)
        U, _ = _fix_signs(torch, U, Vh)
        factors.append(U[:, :ranks[mode]])
    core = multi_mode_dot(X, factors, transpose=True)
    res = {"err": [torch.linalg.norm(X - multi_mode_dot(core, factors)) / torch.linalg.norm(X)]}
    for _ in range(2):
        for mode in range(3):
            others = [f if m != mode else torch.eye(shape[m]) for m, f in enumerate(factors)]
            proj = multi_mode_dot(X, others, transpose=True)
            U, _, Vh = torch.linalg.svd(_unfold(torch, proj, mode), full_matrices=False)
            U, _ = _fix_signs(torch, U, Vh)
            factors[mode] = U[:, :ranks[mode]]
        core = multi_mode_dot(X, factors, transpose=True)
        res["err"].append(torch.linalg.norm(X - multi_mode_dot(core, factors))
                          / torch.linalg.norm(X))
    grams = [_unfold(torch, core, m) @ _unfold(torch, core, m).T for m in range(3)]
    res["offdiag"] = [float((g - torch.diag(torch.diagonal(g))).abs().max()) < 1e-4
                      for g in grams]
    res["core_abs"] = core.abs()
    res["fold_roundtrip"] = torch.equal(_fold(torch, _unfold(torch, X, 1), 1, shape), X)
    return res


def rsvd_program(torch):
    """Halko's randomized SVD (oversampling 4, two power iterations with QR re-orthonormalising)
    of a float64 rank-5-plus-noise matrix, from a NumPy Gaussian test matrix: singular values
    against linalg.svdvals, the subspace angle between top-3 left subspaces, and the
    approximation error against the Eckart-Young bound."""
    rng = np.random.default_rng(4)
    m, n, k, p = 30, 20, 5, 4
    A = torch.from_numpy(rng.standard_normal((m, k)) @ rng.standard_normal((k, n))
                         + 0.01 * rng.standard_normal((m, n)))
    omega = torch.from_numpy(rng.standard_normal((n, k + p)))
    Y = A @ omega
    Q, _ = torch.linalg.qr(Y)
    for _ in range(2):
        Q, _ = torch.linalg.qr(A.T @ Q)
        Q, _ = torch.linalg.qr(A @ Q)
    B = Q.T @ A
    Ub, S, Vh = torch.linalg.svd(B, full_matrices=False)
    U = Q @ Ub
    exact = torch.linalg.svdvals(A)
    _, S_ex, _ = torch.linalg.svd(A)
    cos = torch.linalg.svdvals(U[:, :3].T @ torch.linalg.svd(A)[0][:, :3])
    approx = U[:, :k] @ torch.diag(S[:k]) @ Vh[:k]
    res = {"S": S[:k], "exact": exact[:k], "same_svals": torch.allclose(exact, S_ex),
           "cos": cos, "err": torch.linalg.matrix_norm(A - approx, ord=2),
           "bound": exact[k], "shapes": [list(U.shape), list(Vh.shape)]}
    return res


def tt_linear_program(torch):
    """A TT-linear layer (t3nn style) mapping 4*4*2 -> 3*2*2 through three cores of rank 2,
    contracted with einsum on the input reshaped to (B, 4, 4, 2), inside a small classifier
    trained 4 steps with SGD momentum; then the cores are TT-rounded by QR + SVD inside
    no_grad and the layer's output after rounding is compared."""
    rng = np.random.default_rng(5)
    nn = torch.nn
    in_modes, out_modes, r = (4, 4, 2), (3, 2, 2), 2

    class TTLinear(nn.Module):
        def __init__(self):
            super().__init__()
            ranks = [1, r, r, 1]
            self.cores = nn.ParameterList([
                nn.Parameter(torch.from_numpy(
                    (0.5 * rng.standard_normal((ranks[i], in_modes[i], out_modes[i],
                                                ranks[i + 1]))).astype(np.float32)))
                for i in range(3)])
            self.bias = nn.Parameter(torch.zeros(int(np.prod(out_modes))))

        def forward(self, x):
            h = x.view(x.shape[0], *in_modes)
            h = torch.einsum("bijk,aipq->bjkpq", h, self.cores[0])
            h = torch.einsum("bjkpq,qjsr->bkpsr", h, self.cores[1])
            h = torch.einsum("bkpsr,rktu->bpstu", h, self.cores[2])
            return h.flatten(1).squeeze(-1) + self.bias

    layer = TTLinear()
    head = nn.Linear(12, 3)
    with torch.no_grad():
        head.weight.copy_(torch.from_numpy(rng.standard_normal((3, 12)).astype(np.float32)
                                           * 0.3))
        head.bias.zero_()
    model = nn.Sequential(layer, nn.Tanh(), head)
    x = torch.from_numpy(rng.standard_normal((6, 32)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 3, 6))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    res = {"loss": []}
    for _ in range(4):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["core_grads"] = [c.grad for c in layer.cores]
    before = model(x).detach()
    with torch.no_grad():
        cores = [c.clone() for c in layer.cores]
        for i in range(2):
            a, m, n, b = cores[i].shape
            Q, R = torch.linalg.qr(cores[i].reshape(a * m * n, b))
            cores[i] = Q.reshape(a, m, n, -1)
            cores[i + 1] = torch.einsum("xy,ymnz->xmnz", R, cores[i + 1])
        for i, c in enumerate(cores):
            layer.cores[i].copy_(c)
    res["after_round"] = model(x).detach()
    res["before"] = before
    res["n_params"] = sum(p.numel() for p in model.parameters())
    res["names"] = [n for n, _ in model.named_parameters()]
    return res


PROGRAMS = [mps_program, tt_svd_program, cp_als_program, tucker_program, rsvd_program,
            tt_linear_program]
TOLERANCES = {
    # float32 SVD/QR (LAPACK in both, different blocking) then 4-way reconstructions
    "tt_svd_program": (1e-4, 1e-5),
    "tucker_program": (1e-4, 1e-5),
}
test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
