"""Classical machine learning written by hand in torch, run once with `torch` bound to ember and
once to PyTorch from the same NumPy data: k-means / k-means++ (cdist compute modes, one_hot,
scatter_add_/index_add_ centroid sums, bincount, multinomial seeding with a Generator, empty
clusters), PCA and low-rank factorisations (pca_lowrank, svd_lowrank, cov with frequency and
analytic weights, corrcoef, eigh whitening), Gaussian-mixture EM (batched MultivariateNormal,
logsumexp responsibilities, einsum covariances, cholesky_ex with jitter), kNN and kernel
methods (topk votes, torch.mode, kernel ridge via cholesky_solve, hinge-loss and
multi_margin_loss SVMs, nesterov SGD with weight decay) and t-SNE (perplexity binary search,
Student-t affinities, kl_div with log_target, early exaggeration, momentum updates by hand).
What they found is pinned in test_parity_programs_round22_classical_ml_fixes.py."""


import numpy as np
import pytest

import ember
from tests.parity._programs import normal, warnings_of
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _blobs(rng, centers, per, spread):
    """`per` points around each row of `centers`, shuffled, as float32 NumPy arrays."""
    centers = np.asarray(centers, dtype=np.float32)
    points = np.concatenate([c + spread * rng.standard_normal((per, centers.shape[1]))
                             for c in centers]).astype(np.float32)
    labels = np.repeat(np.arange(len(centers)), per)
    order = rng.permutation(len(points))
    return points[order], labels[order]


def kmeans_program(torch):
    """k-means++ seeding from a Generator, Lloyd iterations, an empty cluster, mini-batch and
    soft (differentiable) k-means."""
    F = torch.nn.functional
    rng = np.random.default_rng(220)
    res = {}
    k = 4
    points, truth = _blobs(rng, [[0, 0, 0], [12, 0, 1], [0, 12, -1], [12, 12, 0]], 30, 1.0)
    X = torch.from_numpy(points)
    n = X.shape[0]

    def kmeans_pp(X, k, generator):
        first = torch.randint(0, X.shape[0], (1,), generator=generator)
        chosen = [first.item()]
        d2 = torch.cdist(X, X[first]).squeeze(1).pow(2)
        for _ in range(1, k):
            probs = d2 / d2.sum()
            nxt = torch.multinomial(probs, 1, generator=generator).item()
            chosen.append(nxt)
            d2 = torch.minimum(d2, ((X - X[nxt]) ** 2).sum(-1))
        return X[chosen].clone(), chosen

    gen = torch.Generator().manual_seed(7)
    init_a, chosen_a = kmeans_pp(X, k, gen)
    gen.manual_seed(7)
    _, chosen_b = kmeans_pp(X, k, gen)
    res["pp_reproducible"] = [chosen_a == chosen_b, len(set(chosen_a)) == k]

    def lloyd(X, centroids, iters, mode):
        history = []
        for _ in range(iters):
            dist = torch.cdist(X, centroids, p=2.0, compute_mode=mode)
            assign = dist.argmin(dim=1)
            onehot = F.one_hot(assign, num_classes=centroids.shape[0]).to(X.dtype)
            sums = onehot.t() @ X
            counts = torch.bincount(assign, minlength=centroids.shape[0])
            new = sums / counts.clamp(min=1).unsqueeze(1).to(X.dtype)
            centroids = torch.where((counts > 0).unsqueeze(1), new, centroids)
            history.append(dist.gather(1, assign.unsqueeze(1)).pow(2).sum().item())
        return centroids, assign, history

    # seeded from the Generator: seed-independent once sorted (the blobs are far apart)
    cents, assign, _ = lloyd(X, init_a, 6, "use_mm_for_euclid_dist_if_necessary")
    order = torch.argsort(cents[:, 0] * 100 + cents[:, 1])
    res["pp_centroids"] = cents[order]
    relabel = torch.empty_like(order)
    relabel[order] = torch.arange(k)
    res["pp_labels"] = relabel[assign]
    agree = (relabel[assign].unsqueeze(1) == relabel[assign].unsqueeze(0)) == \
        (torch.from_numpy(truth).unsqueeze(1) == torch.from_numpy(truth).unsqueeze(0))
    res["pp_pair_agreement"] = agree.float().mean()

    # deterministic start with a far-away centroid that never wins a point
    start = torch.cat([X[:3], torch.full((1, 3), 100.0)])
    for mode in ["use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"]:
        cents, assign, hist = lloyd(X, start, 5, mode)
        res[f"lloyd_{mode}"] = cents
        res[f"inertia_{mode}"] = hist
        res[f"assign_{mode}"] = assign

    # the same centroid sums three more ways
    sums_sa = torch.zeros(k, 3).scatter_add_(0, assign.unsqueeze(1).expand(-1, 3), X)
    sums_ia = torch.zeros(k, 3).index_add_(0, assign, X)
    sums_ip = torch.zeros(k, 3).index_put_((assign,), X, accumulate=True)
    res["sums"] = [sums_sa, sums_ia, sums_ip]
    res["mean_reduce"] = torch.zeros(k, 3).scatter_reduce(
        0, assign.unsqueeze(1).expand(-1, 3), X, reduce="mean", include_self=False)
    uniq, counts = torch.unique(assign, return_counts=True)
    res["unique"] = [uniq, counts]
    res["meta"] = [_name(assign.dtype), _name(counts.dtype),
                   _name(torch.bincount(assign).dtype)]

    # k-medians with the L1 cdist, and the silhouette score with p=2
    med = start.clone()
    for _ in range(3):
        lab = torch.cdist(X, med, p=1).argmin(1)
        med = torch.stack([X[lab == j].median(dim=0).values if (lab == j).any() else med[j]
                           for j in range(k)])
    res["kmedians"] = med
    D = torch.cdist(X, X)
    same = assign.unsqueeze(0) == assign.unsqueeze(1)
    a = (D * same).sum(1) / (same.sum(1) - 1).clamp(min=1)
    # own and empty clusters never count as the nearest other cluster
    other = torch.stack([torch.where((assign == j) | ~(assign == j).any(), torch.inf, 0.0)
                         for j in range(k)], 1)
    b_all = torch.stack([(D * (assign == j)).sum(1) / (assign == j).sum().clamp(min=1)
                         for j in range(k)], 1) + other
    b = b_all.min(1).values
    res["silhouette"] = torch.nan_to_num((b - a) / torch.maximum(a, b), posinf=0.0).mean()

    # mini-batch k-means (Sculley): per-centre learning rate 1 / count
    mb = X[[0, 40, 80, 110]].clone()
    seen = torch.zeros(k)
    for step in range(4):
        batch = X[step * 30:(step + 1) * 30]
        lab = torch.cdist(batch, mb).argmin(1)
        for i, j in enumerate(lab.tolist()):
            seen[j] += 1
            mb[j] += (batch[i] - mb[j]) / seen[j]
    res["minibatch"] = mb
    res["seen"] = seen

    # soft k-means by gradient descent through cdist
    centres = torch.nn.Parameter(X[[1, 2, 3, 4]].clone())
    opt = torch.optim.Adam([centres], lr=0.5)
    res["soft_loss"] = []
    for _ in range(5):
        d2 = torch.cdist(X, centres).pow(2)
        loss = -torch.logsumexp(-0.5 * d2, dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["soft_loss"].append(loss.item())
    res["soft_centres"] = centres

    # spherical k-means on unit vectors, cosine similarities two ways
    U = F.normalize(X - X.mean(0), dim=1)
    sph = U[[0, 1, 2, 3]].clone()
    for _ in range(3):
        sims = U @ sph.T
        lab = sims.argmax(1)
        sph = F.normalize(torch.zeros_like(sph).index_add_(0, lab, U), dim=1, eps=1e-8)
    res["spherical"] = sph
    res["cosine"] = F.cosine_similarity(U[:, None, :], sph[None, :, :], dim=-1)[:8]

    # pdist as a square matrix through triu_indices, and a batch of two k-means problems
    iu = torch.triu_indices(n, n, offset=1)
    square = torch.zeros(n, n)
    square[iu[0], iu[1]] = torch.pdist(X)
    square = square + square.T
    # (PyTorch's cdist kernel accumulates with fused multiply-adds, its pdist does not: the
    # two differ in the last bit, so they are compared within a tolerance)
    res["squareform"] = square[:6, :6]
    res["squareform_is_cdist"] = [torch.allclose(
        square, torch.cdist(X, X, compute_mode="donot_use_mm_for_euclid_dist"), atol=1e-5)]
    res["pdist_p1"] = torch.pdist(X[:6], p=1)
    batch = torch.stack([X[:60], X[60:] * 0.5])                  # (2, 60, 3)
    cb = batch[:, :k].clone()
    for _ in range(3):
        lab = torch.cdist(batch, cb).argmin(-1)                   # (2, 60)
        onehot = F.one_hot(lab, k).float()                        # (2, 60, k)
        cb = torch.bmm(onehot.transpose(1, 2), batch) / onehot.sum(1).clamp_min(1)[..., None]
    res["batched"] = cb
    far = torch.cdist(batch, cb).gather(-1, lab.unsqueeze(-1)).squeeze(-1)
    res["farthest"] = torch.zeros(2, k).scatter_reduce(1, lab, far, reduce="amax",
                                                       include_self=False)
    res["index_reduce"] = torch.zeros(k, 3).index_reduce_(0, assign, X, "mean",
                                                          include_self=False)

    # inverse-CDF seeding with bucketize: reproducible within each library
    def inverse_cdf(seed):
        g = torch.Generator().manual_seed(seed)
        cdf = torch.cumsum(torch.cdist(X, X[:1]).squeeze(1) ** 2, 0)
        return torch.bucketize(torch.rand(5, generator=g) * cdf[-1], cdf).tolist()
    res["bucketize_reproducible"] = [inverse_cdf(3) == inverse_cdf(3)]
    return res


def _svd_flip(U, V):
    """Signs fixed as scikit-learn does: each component's largest |loading| is positive."""
    pick = V.abs().argmax(dim=0, keepdim=True)
    signs = torch_sign(V.gather(0, pick))
    return U * signs, V * signs


def torch_sign(x):
    """+1 where x >= 0, else -1 (sign() would give 0 at 0)."""
    return (x >= 0).to(x.dtype) * 2 - 1


def pca_program(torch):
    """PCA by full and randomised SVD, weighted covariances, correlation, ZCA whitening,
    kernel PCA and a gradient through the SVD."""
    rng = np.random.default_rng(221)
    res = {}
    latent = rng.standard_normal((60, 3)) * np.array([4.0, 2.0, 1.0])
    mixing = rng.standard_normal((3, 6))
    noisy = (latent @ mixing + 0.5 * rng.standard_normal((60, 6)) + 3.0).astype(np.float32)
    X = torch.from_numpy(noisy)
    exact = torch.from_numpy((latent @ mixing).astype(np.float32))

    # PCA by the thin SVD of the centred data, signs fixed, explained variance
    mean = X.mean(dim=0, keepdim=True)
    Xc = X - mean
    U, S, Vh = torch.linalg.svd(Xc, full_matrices=False)
    U, V = _svd_flip(U, Vh.mT)
    res["svd_meta"] = [str(tuple(U.shape)), str(tuple(S.shape)), str(tuple(Vh.shape)),
                       _name(S.dtype)]
    res["singular"] = S
    explained = S ** 2 / (X.shape[0] - 1)
    res["explained_ratio"] = explained / explained.sum()
    res["cum_ratio"] = torch.cumsum(explained / explained.sum(), 0)
    n_comp = int((res["cum_ratio"] < 0.999).sum().item()) + 1
    res["n_components"] = [n_comp]
    scores = Xc @ V[:, :n_comp]
    res["scores"] = scores
    res["recon_err"] = torch.linalg.norm(Xc - scores @ V[:, :n_comp].T, ord="fro")
    res["svdvals"] = torch.linalg.svdvals(Xc)
    res["full_svd_shapes"] = [str(tuple(t.shape)) for t in torch.linalg.svd(Xc)]

    # randomised: pca_lowrank with q = all features is exact, svd_lowrank on a rank-3 matrix
    torch.manual_seed(0)
    Up, Sp, Vp = torch.pca_lowrank(X, q=6, center=True, niter=3)
    res["pca_lowrank_S"] = Sp
    Up, Vp = _svd_flip(Up, Vp)
    res["pca_lowrank_scores"] = Xc @ Vp[:, :3]
    Ul, Sl, Vl = torch.svd_lowrank(exact, q=5, niter=2)
    res["svd_lowrank_S"] = Sl[:3]
    res["svd_lowrank_tail_small"] = [bool((Sl[3:] < 1e-3 * Sl[0]).all())]
    res["svd_lowrank_recon"] = Ul[:, :3] @ torch.diag(Sl[:3]) @ Vl[:, :3].T
    res["svd_lowrank_M"] = torch.svd_lowrank(exact + 1.0, q=4, M=torch.ones(1, 6))[1][:3]
    res["lowrank_meta"] = [str(tuple(Up.shape)), str(tuple(Sp.shape)), str(tuple(Vp.shape)),
                           str(tuple(Ul.shape)), str(tuple(Vl.shape))]
    Ulegacy, Slegacy, Vlegacy = torch.svd(Xc)
    res["legacy_svd_S"] = Slegacy
    # the product reproduces Xc to LAPACK's backward error, ~eps * S[0] per element: small
    # entries differ there between SVD kernels, so the check is that it reconstructs at all
    recon = Ulegacy @ torch.diag_embed(Slegacy) @ Vlegacy.t()
    res["legacy_svd_recon"] = [bool(((recon - Xc).abs().max() < 20 * 1.2e-7 * Slegacy[0]).item())]

    # covariances: plain, biased, frequency- and analytic-weighted, correlation
    fw = torch.from_numpy(rng.integers(1, 4, 60))
    aw = torch.from_numpy(rng.uniform(0.2, 1.0, 60).astype(np.float32))
    res["cov"] = torch.cov(X.T)
    res["cov_biased"] = torch.cov(X.T, correction=0)
    res["cov_fw"] = torch.cov(X.T, fweights=fw)
    res["cov_aw"] = torch.cov(X.T, aweights=aw)
    res["cov_both"] = torch.cov(X.T, correction=2, fweights=fw, aweights=aw)
    res["cov_by_hand"] = Xc.T @ Xc / (X.shape[0] - 1)
    res["corrcoef"] = torch.corrcoef(X.T)
    res["cov_vec"] = torch.cov(X[:, 0])
    res["cov_meta"] = [_name(torch.cov(X.T.double()).dtype),
                       _name(torch.cov(torch.arange(6).reshape(2, 3)).dtype),
                       _name(torch.corrcoef(torch.arange(6).reshape(2, 3)).dtype)]
    var, m = torch.var_mean(X, dim=0, correction=0)
    std, _ = torch.std_mean(X, dim=0, unbiased=True)
    res["var_mean"] = [var, m, std]

    # ZCA whitening by eigh with rsqrt, and its check
    evals, evecs = torch.linalg.eigh(torch.cov(Xc.T), UPLO="L")
    res["eigvals"] = evals
    res["eigvalsh"] = torch.linalg.eigvalsh(torch.cov(Xc.T), UPLO="U")
    eps = 1e-5
    W = evecs @ torch.diag(torch.rsqrt(evals.clamp_min(0) + eps)) @ evecs.T
    white = Xc @ W
    res["white_cov"] = torch.cov(white.T)
    res["white"] = white[:5]
    res["mahalanobis"] = (white ** 2).sum(1)[:10]
    res["matrix_rank"] = [torch.linalg.matrix_rank(exact).item(),
                          torch.linalg.matrix_rank(X, atol=1.0, rtol=0.0).item()]
    res["pinv_proj"] = torch.linalg.pinv(Xc[:, :3]) @ Xc[:, 3:]

    # kernel PCA with an RBF kernel and double centring
    sq = torch.cdist(X, X).pow(2)
    K = torch.exp(-sq / (2 * sq.median()))
    n = K.shape[0]
    one = torch.full((n, n), 1.0 / n)
    Kc = K - one @ K - K @ one + one @ K @ one
    kvals, kvecs = torch.linalg.eigh(Kc)
    kvals, kvecs = kvals.flip(0)[:3], kvecs.flip(1)[:, :3]
    kvecs = kvecs * torch_sign(kvecs.gather(0, kvecs.abs().argmax(0, keepdim=True)))
    res["kpca_vals"] = kvals
    res["kpca_proj"] = kvecs * kvals.sqrt()

    # a gradient through the SVD: nuclear norm and the top singular value of a learned map
    A = torch.nn.Parameter(torch.from_numpy(rng.standard_normal((5, 4)).astype(np.float32)))
    opt = torch.optim.SGD([A], lr=0.05)
    res["nuc"] = []
    for _ in range(3):
        s = torch.linalg.svd(A, full_matrices=False).S
        loss = torch.linalg.matrix_norm(A, ord="nuc") + (s[0] - 1.0) ** 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["nuc"].append(loss.item())
    res["nuc_A"] = A
    Ae = torch.nn.Parameter(torch.from_numpy(rng.standard_normal((4, 4)).astype(np.float32)))
    sym = Ae @ Ae.T
    vals, vecs = torch.linalg.eigh(sym)
    (vals[-1] + vecs[:, -1].abs().sum()).backward()
    res["eigh_grad"] = Ae.grad

    # Halko's randomised range finder by hand, from a fixed test matrix
    omega = torch.from_numpy(rng.standard_normal((6, 4)).astype(np.float32))
    Q, R = torch.linalg.qr(Xc @ omega)
    for _ in range(2):
        Q = torch.linalg.qr(Xc.T @ Q).Q
        Q = torch.linalg.qr(Xc @ Q).Q
    Ub, Sb, Vbh = torch.linalg.svd(Q.T @ Xc, full_matrices=False)
    res["halko_S"] = Sb[:3]
    res["halko_recon"] = (Q @ Ub[:, :3] * Sb[:3]) @ Vbh[:3]
    res["qr_r_diag_abs"] = torch.linalg.qr(Xc, mode="r").R.diagonal().abs()
    res["qr_meta"] = [str(tuple(t.shape)) for t in torch.linalg.qr(Xc, mode="complete")]

    # robust and min-max scaling, and the least-squares coordinates of a projection
    q1, q2, q3 = torch.quantile(X, torch.tensor([0.25, 0.5, 0.75]), dim=0)
    res["robust"] = ((X - q2) / (q3 - q1))[:5]
    lo, hi = torch.aminmax(X, dim=0)
    res["minmax"] = ((X - lo) / (hi - lo))[:5]
    res["nanquantile"] = torch.nanquantile(torch.where(X > 4, torch.nan, X), 0.9, dim=0,
                                           interpolation="midpoint")
    coords = torch.linalg.lstsq(V[:, :3], Xc.T).solution
    res["lstsq_coords"] = coords.T[:5]
    return res


def gmm_program(torch):
    """EM for a full-covariance Gaussian mixture: batched MultivariateNormal log-densities,
    logsumexp responsibilities, einsum covariance updates, cholesky_ex with growing jitter,
    a convergence loop on the log-likelihood; then the same model fitted by gradient."""
    D = torch.distributions
    rng = np.random.default_rng(222)
    res = {}
    k, d = 3, 2
    points, _ = _blobs(rng, [[0, 0], [5, 1], [1, 6]], 40, 1.0)
    points[:40] = points[:40] @ np.array([[1.0, 0.6], [0.0, 0.5]], dtype=np.float32)
    X = torch.from_numpy(points)
    n = X.shape[0]

    def safe_cholesky(cov, jitter=1e-6, tries=5):
        eye = torch.eye(cov.shape[-1], dtype=cov.dtype).expand_as(cov)
        for attempt in range(tries):
            L, info = torch.linalg.cholesky_ex(cov + eye * (jitter * 10 ** attempt) * (attempt > 0))
            if not info.any():
                return L, attempt
        raise RuntimeError("covariance is not positive definite")

    weights = torch.full((k,), 1.0 / k)
    means = X[[0, 50, 100]].clone()
    covs = torch.eye(d).repeat(k, 1, 1) * 2.0
    reg = 1e-4
    prev = -torch.inf
    res["loglik"], res["jitter_tries"] = [], []
    for it in range(30):
        L, tries = safe_cholesky(covs)
        res["jitter_tries"].append(tries)
        comp = D.MultivariateNormal(means, scale_tril=L)
        log_prob = comp.log_prob(X.unsqueeze(1))                     # (n, k)
        weighted = log_prob + torch.log(weights)
        log_norm = torch.logsumexp(weighted, dim=1, keepdim=True)
        resp = torch.exp(weighted - log_norm)
        loglik = log_norm.mean()
        res["loglik"].append(loglik.item())
        if loglik - prev < 1e-4:
            break
        prev = loglik
        nk = resp.sum(0) + 10 * torch.finfo(resp.dtype).eps
        weights = nk / n
        means = torch.einsum("nk,nd->kd", resp, X) / nk[:, None]
        diff = X.unsqueeze(1) - means                                # (n, k, d)
        covs = torch.einsum("nk,nki,nkj->kij", resp, diff, diff) / nk[:, None, None]
        covs = covs + reg * torch.eye(d)
    res["iterations"] = [it]
    res["weights"], res["means"], res["covs"] = weights, means, covs
    res["batch_meta"] = [str(tuple(comp.batch_shape)), str(tuple(comp.event_shape)),
                         str(tuple(log_prob.shape))]
    res["entropy"] = comp.entropy()
    res["mvn_cov"] = comp.covariance_matrix
    res["mvn_prec"] = comp.precision_matrix
    res["mvn_var"] = comp.variance
    res["labels"] = resp.argmax(1)

    # the same densities through the other parametrisations and by hand
    by_cov = D.MultivariateNormal(means, covariance_matrix=covs).log_prob(X[:, None])
    by_prec = D.MultivariateNormal(means, precision_matrix=torch.linalg.inv(covs)).log_prob(
        X[:, None])
    L = torch.linalg.cholesky(covs)
    z = torch.linalg.solve_triangular(L, (X[:, None] - means).unsqueeze(-1), upper=False)
    by_hand = (-0.5 * z.squeeze(-1).pow(2).sum(-1) - torch.log(torch.diagonal(L, dim1=-2,
               dim2=-1)).sum(-1) - 0.5 * d * np.log(2 * np.pi))
    res["log_prob"] = [by_cov, by_prec, by_hand]
    res["logdet"] = torch.logdet(covs)
    res["slogdet"] = list(torch.linalg.slogdet(covs))

    # mixture in one object, its sample shapes and the BIC
    mix = D.MixtureSameFamily(D.Categorical(probs=weights),
                              D.MultivariateNormal(means, scale_tril=L))
    res["mix_log_prob"] = mix.log_prob(X)
    res["mix_mean"], res["mix_var"] = mix.mean, mix.variance
    torch.manual_seed(0)
    res["mix_sample_shape"] = [str(tuple(mix.sample((5,)).shape))]
    n_params = (k - 1) + k * d + k * d * (d + 1) // 2
    res["bic"] = -2 * mix.log_prob(X).sum() + n_params * np.log(n)

    # a covariance just past singular is caught by cholesky_ex, then fixed by jitter; its last
    # pivot is -1e-5, clear of rounding (an exactly singular one is a coin-flip in MKL's float32
    # potrf: its AVX2 path leaves a pivot of 1e-7 and reports success)
    bad = torch.stack([torch.tensor([[1.0, 1.0], [1.0, 1.0 - 1e-5]]), torch.eye(2)])
    _, info = torch.linalg.cholesky_ex(bad)
    res["info"] = info
    res["info_meta"] = [_name(info.dtype)]
    fixed, tries = safe_cholesky(bad)
    # the fixed last pivot, sqrt(1.00001 - 1 / 1.00001), carries float32 cancellation: the
    # product L L^T and L's first column are what is well-conditioned
    res["fixed"] = [fixed @ fixed.mT, fixed[..., 0], torch.tensor(float(tries))]

    # diagonal GMM fitted by gradient through Independent(Normal) and MixtureSameFamily
    logits = torch.zeros(k, requires_grad=True)
    mu = means.clone().add_(0.5).requires_grad_()
    log_sigma = torch.zeros(k, d, requires_grad=True)
    opt = torch.optim.Adam([logits, mu, log_sigma], lr=0.05)
    res["sgd_nll"] = []
    for _ in range(5):
        gmm = D.MixtureSameFamily(D.Categorical(logits=logits),
                                  D.Independent(D.Normal(mu, log_sigma.exp()), 1))
        nll = -gmm.log_prob(X).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        res["sgd_nll"].append(nll.item())
    res["sgd_params"] = [logits, mu, log_sigma]

    # entropies of the responsibilities and of the weights; component separations
    res["resp_entropy"] = torch.special.entr(resp).sum(1).mean()
    res["resp_xlogy"] = -torch.xlogy(resp, resp).sum(1).mean()
    res["weight_entropy"] = D.Categorical(probs=weights).entropy()
    comps = D.MultivariateNormal(means, scale_tril=L)
    pair = D.kl_divergence(D.MultivariateNormal(means[:, None], scale_tril=L[:, None]),
                           D.MultivariateNormal(means[None], scale_tril=L[None]))
    res["pair_kl"] = pair
    res["pair_kl_meta"] = [str(tuple(pair.shape))]
    res["comp_stddev"] = comps.stddev

    # factor analysis: a low-rank plus diagonal Gaussian fitted by Adam
    W = torch.nn.Parameter(torch.full((d, 1), 0.5))
    log_psi = torch.nn.Parameter(torch.zeros(d))
    mu_fa = X.mean(0)
    opt = torch.optim.Adam([W, log_psi], lr=0.1)
    res["fa_nll"] = []
    for _ in range(4):
        fa = D.LowRankMultivariateNormal(mu_fa, cov_factor=W, cov_diag=log_psi.exp())
        nll = -fa.log_prob(X).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        res["fa_nll"].append(nll.item())
    res["fa_params"] = [W, log_psi]
    res["fa_cov"] = fa.covariance_matrix
    res["fa_entropy"] = fa.entropy()
    return res


def knn_kernel_program(torch):
    """kNN votes (topk, mode, bincount), kernel ridge regression with an RBF kernel
    (cholesky_solve, linalg.solve), a linear SVM on the hinge loss and a multiclass one on
    multi_margin_loss with nesterov SGD and weight decay."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(223)
    res = {}
    points, labels = _blobs(rng, [[0, 0], [3, 0], [0, 3]], 20, 0.9)
    X, y = torch.from_numpy(points), torch.from_numpy(labels)
    queries = normal(torch, rng, 10, 2) * 1.5 + 1.0

    # kNN: neighbours by cdist + topk(largest=False), votes by mode and by bincount
    k = 5
    dist = torch.cdist(queries, X)
    knn_d, knn_i = dist.topk(k, dim=1, largest=False, sorted=True)
    res["knn_d"], res["knn_i"] = knn_d, knn_i
    votes = y[knn_i]
    res["mode"] = list(torch.mode(votes, dim=1))
    counts = torch.stack([torch.bincount(v, minlength=3) for v in votes])
    res["vote_counts"] = counts
    res["vote_pred"] = counts.argmax(1)
    # distance-weighted votes with scatter_add_ and a one_hot version of the same
    w = 1.0 / (knn_d + 1e-8)
    weighted = torch.zeros(len(queries), 3).scatter_add_(1, votes, w)
    res["weighted_votes"] = weighted
    res["weighted_onehot"] = (F.one_hot(votes, 3) * w.unsqueeze(-1)).sum(1)
    res["proba"] = weighted / weighted.sum(1, keepdim=True)
    kth = torch.kthvalue(dist, k, dim=1)
    res["kthvalue"] = list(kth)
    res["sorted_idx"] = torch.sort(dist, dim=1, stable=True).indices[:, :k]
    res["argsort"] = torch.argsort(dist, dim=1, descending=True)[:, :3]
    # leave-one-out accuracy on the training set, self excluded by an inf diagonal
    dtrain = torch.cdist(X, X)
    dtrain.fill_diagonal_(float("inf"))
    loo = torch.mode(y[dtrain.topk(k, largest=False).indices], dim=1).values
    res["loo_acc"] = (loo == y).float().mean()
    res["meta"] = [_name(knn_i.dtype), _name(res["mode"][0].dtype), _name(kth.indices.dtype)]

    # kernel ridge regression with an RBF kernel: Cholesky and LU solves agree
    t = torch.linspace(0, 2 * np.pi, 40).unsqueeze(1)
    target = torch.sin(t).squeeze(1) + 0.1 * normal(torch, rng, 40)
    gamma, lam = 0.5, 1e-1

    def rbf(a, b):
        return torch.exp(-gamma * torch.cdist(a, b).pow(2))

    K = rbf(t, t)
    A = K + lam * torch.eye(len(t))
    L = torch.linalg.cholesky(A)
    alpha = torch.cholesky_solve(target.unsqueeze(1), L)
    res["alpha_chol"] = alpha
    res["alpha_solve"] = torch.linalg.solve(A, target)
    U = torch.linalg.cholesky(A, upper=True)
    res["alpha_upper"] = torch.cholesky_solve(target.unsqueeze(1), U, upper=True)
    t_test = torch.linspace(0.1, 6.0, 7).unsqueeze(1)
    res["krr_pred"] = rbf(t_test, t) @ alpha
    res["krr_train_mse"] = F.mse_loss((K @ alpha).squeeze(1), target)
    res["cholesky_inverse"] = torch.cholesky_inverse(L)[:3, :3]
    LU, piv = torch.linalg.lu_factor(A)
    res["lu_solve"] = torch.linalg.lu_solve(LU, piv, target.unsqueeze(1))
    res["piv_meta"] = [_name(piv.dtype)]
    # gradient of the marginal likelihood w.r.t. the log length scale
    log_gamma = torch.tensor(np.log(gamma), requires_grad=True)
    Kg = torch.exp(-log_gamma.exp() * torch.cdist(t, t).pow(2)) + lam * torch.eye(len(t))
    Lg = torch.linalg.cholesky(Kg)
    fit = torch.cholesky_solve(target.unsqueeze(1), Lg)
    nlml = 0.5 * (target.unsqueeze(1) * fit).sum() + torch.log(torch.diagonal(Lg)).sum()
    nlml.backward()
    res["nlml"], res["nlml_grad"] = nlml, log_gamma.grad

    # binary linear SVM on the hinge loss (labels in {-1, +1}), nesterov SGD with weight decay
    yb = torch.where(y == 0, 1.0, -1.0)
    svm = nn.Linear(2, 1)
    with torch.no_grad():
        svm.weight.copy_(torch.tensor([[0.1, -0.2]]))
        svm.bias.zero_()
    opt = torch.optim.SGD(svm.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                          weight_decay=1e-3)
    res["hinge"] = []
    for _ in range(8):
        f = svm(X).squeeze(1)
        loss = F.relu(1 - yb * f).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["hinge"].append(loss.item())
    res["svm_w"] = [svm.weight, svm.bias]
    res["support"] = ((yb * svm(X).squeeze(1)) <= 1).sum()
    res["soft_margin"] = F.soft_margin_loss(svm(X).squeeze(1), yb)
    res["hinge_embedding"] = F.hinge_embedding_loss(svm(X).squeeze(1), yb, margin=0.5)

    # multiclass (Crammer-Singer style) SVM on multi_margin_loss, squared and weighted
    clf = nn.Linear(2, 3)
    with torch.no_grad():
        clf.weight.copy_(torch.tensor([[0.1, 0.0], [0.0, 0.1], [-0.1, -0.1]]))
        clf.bias.zero_()
    opt = torch.optim.SGD(clf.parameters(), lr=0.05, momentum=0.8, nesterov=True,
                          weight_decay=5e-3, dampening=0.0)
    crit = nn.MultiMarginLoss(p=1, margin=1.0)
    res["mm"] = []
    for _ in range(8):
        scores = clf(X)
        loss = crit(scores, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["mm"].append(loss.item())
    scores = clf(X)
    res["mm_params"] = [clf.weight, clf.bias]
    res["mm_sq"] = F.multi_margin_loss(scores, y, p=2, margin=0.5,
                                       weight=torch.tensor([1.0, 2.0, 0.5]))
    res["mm_none"] = F.multi_margin_loss(scores, y, reduction="none")
    res["mm_sum"] = F.multi_margin_loss(scores[0], y[0], reduction="sum")
    mlm_target = torch.full((len(y), 3), -1, dtype=torch.long)
    mlm_target[:, 0] = y
    res["multilabel_margin"] = F.multilabel_margin_loss(scores, mlm_target)
    res["train_acc"] = (scores.argmax(1) == y).float().mean()

    # radius neighbours, Manhattan neighbours, Nadaraya-Watson and a polynomial kernel
    within = dist < 1.5
    rows, cols = within.nonzero(as_tuple=True)
    res["radius_pairs"] = [rows, cols]
    res["radius_count"] = within.sum(1)
    res["argwhere"] = torch.argwhere(within)[:5]
    res["radius_votes"] = torch.zeros(len(queries), 3, dtype=torch.long).index_put_(
        (rows, y[cols]), torch.ones_like(rows), accumulate=True)
    res["manhattan"] = torch.cdist(queries, X, p=1).topk(3, largest=False).indices
    res["chebyshev"] = torch.cdist(queries, X, p=float("inf")).min(1)
    nw = torch.softmax(-torch.cdist(t_test, t).pow(2) / 0.1, dim=1)
    res["nadaraya_watson"] = nw @ target
    poly = (X @ X.T + 1) ** 3
    res["poly_trace"] = torch.trace(poly)
    res["poly_eig"] = torch.linalg.eigvalsh(poly.double())[-3:]

    # evaluation as written by hand: confusion matrix, per-class F1, ROC AUC by trapezoid
    pred = scores.argmax(1)
    conf = torch.bincount(3 * y + pred, minlength=9).reshape(3, 3)
    tp = conf.diag().float()
    precision = tp / conf.sum(0).clamp_min(1)
    recall = tp / conf.sum(1).clamp_min(1)
    res["confusion"] = conf
    res["f1"] = torch.nan_to_num(2 * precision * recall / (precision + recall))
    margin = svm(X).squeeze(1).detach()
    order = torch.argsort(margin, descending=True, stable=True)
    hits = (yb[order] > 0).float()
    tpr = torch.cat([torch.zeros(1), hits.cumsum(0) / hits.sum()])
    fpr = torch.cat([torch.zeros(1), (1 - hits).cumsum(0) / (1 - hits).sum()])
    res["auc"] = torch.trapezoid(tpr, fpr)
    res["auc_diff"] = (torch.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2).sum()
    res["cumulative_trapezoid"] = torch.cumulative_trapezoid(tpr, fpr)[-3:]
    labels_enc, inverse = torch.unique(torch.tensor([3, 7, 3, 9, 7]), return_inverse=True)
    res["label_encoder"] = [labels_enc, inverse]
    return res


def tsne_program(torch):
    """t-SNE: per-row perplexity calibration by a vectorised binary search, symmetrised P,
    Student-t Q, the KL divergence by F.kl_div(log_target=True) and by hand, early
    exaggeration and momentum gradient descent on a leaf embedding updated under no_grad."""
    F = torch.nn.functional
    rng = np.random.default_rng(224)
    res = {}
    points, _ = _blobs(rng, [[0] * 5, [4] * 5, [0, 4, 0, 4, 0]], 10, 0.7)
    X = torch.from_numpy(points).double()
    n = X.shape[0]
    perplexity = 8.0
    target = np.log(perplexity)

    # binary search on each row's precision beta = 1 / (2 sigma^2), all rows at once
    D2 = torch.cdist(X, X, compute_mode="donot_use_mm_for_euclid_dist").pow(2)
    off = ~torch.eye(n, dtype=torch.bool)
    beta = torch.ones(n, dtype=torch.float64)
    lo = torch.full_like(beta, -torch.inf)
    hi = torch.full_like(beta, torch.inf)
    for _ in range(50):
        logits = torch.where(off, -D2 * beta[:, None], -torch.inf)
        P = torch.softmax(logits, dim=1)
        H = -(P * torch.where(P > 0, P.log(), torch.zeros_like(P))).sum(1)
        too_flat = H > target
        lo = torch.where(too_flat, beta, lo)
        hi = torch.where(too_flat, hi, beta)
        beta = torch.where(too_flat,
                           torch.where(torch.isinf(hi), beta * 2, (beta + hi) / 2),
                           torch.where(torch.isinf(lo), beta / 2, (beta + lo) / 2))
        if (H - target).abs().max() < 1e-6:
            break
    res["beta"] = beta
    res["row_entropy"] = H
    res["perplexity"] = torch.exp(H)
    P = (P + P.T) / (2 * n)
    P = P.clamp_min(1e-12).float()
    res["P_sum"] = P.sum()
    res["P"] = P

    # the embedding is a leaf that requires grad, updated by hand with momentum and gains
    Y = (normal(torch, rng, n, 2) * 1e-2).requires_grad_()
    velocity = torch.zeros_like(Y)
    gains = torch.ones_like(Y)
    lr, res["kl"], res["kl_by_hand"], res["grad_norm"] = 10.0, [], [], []
    for it in range(12):
        exaggeration = 4.0 if it < 5 else 1.0
        momentum = 0.5 if it < 5 else 0.8
        num = 1.0 / (1.0 + torch.cdist(Y, Y).pow(2))
        num = num.masked_fill(torch.eye(n, dtype=torch.bool), 0.0)
        Q = (num / num.sum()).clamp_min(1e-12)
        # kl_div(input=log Q, target=log P) is sum P (log P - log Q)
        kl = F.kl_div(Q.log(), (P * exaggeration).log(), reduction="sum", log_target=True)
        kl.backward()
        with torch.no_grad():
            grad = Y.grad
            same_sign = torch.sign(grad) == torch.sign(velocity)
            gains = torch.where(same_sign, gains * 0.8, gains + 0.2).clamp_(min=0.01)
            velocity.mul_(momentum).sub_(lr * gains * grad)
            Y += velocity
            Y.sub_(Y.mean(0))
            res["grad_norm"].append(grad.norm().item())
            Y.grad = None
        res["kl"].append(kl.item())
        res["kl_by_hand"].append((P * (P.log() - Q.log())).sum().item())
    res["embedding"] = Y
    res["gains"] = gains
    res["leaf"] = [Y.is_leaf, Y.requires_grad, Y.grad is None]

    # the same gradient in closed form: 4 sum_j (p_ij - q_ij) num_ij (y_i - y_j)
    Y.grad = None
    num = 1.0 / (1.0 + torch.cdist(Y, Y).pow(2))
    num = num * (1 - torch.eye(n))
    Q = num / num.sum()
    F.kl_div(Q.log().clamp_min(-40), P, reduction="sum").backward()
    with torch.no_grad():
        W = (P - Q) * num
        closed = 4 * (W.sum(1, keepdim=True) * Y - W @ Y)
    res["autograd_vs_closed"] = [Y.grad, closed]
    res["kl_variants"] = [F.kl_div(Q.log().clamp_min(-40), P, reduction="batchmean"),
                          F.kl_div(Q.log().clamp_min(-40), P.log(), reduction="mean",
                                   log_target=True),
                          F.kl_div(Q.log().clamp_min(-40), P, reduction="none")[:3]]

    # trustworthiness-style check: how many of each point's 5 nearest neighbours survive
    def neighbours(Z):
        d = torch.cdist(Z, Z)
        d.fill_diagonal_(float("inf"))
        return d.topk(5, largest=False).indices

    hi_nn, lo_nn = neighbours(X.float()), neighbours(Y.detach())
    kept = (hi_nn.unsqueeze(2) == lo_nn.unsqueeze(1)).any(2).float().mean()
    res["kept"] = kept
    res["entr_rows"] = torch.special.entr(P * n).sum(1)[:5]
    res["pdist_square"] = torch.pdist(Y.detach())[:10]
    return res


PROGRAMS = [kmeans_program, pca_program, gmm_program, knn_kernel_program,
            tsne_program]


# Quantities that pass through float32 LAPACK factorizations (eigh, SVD, Cholesky, LU), whose
# builds differ by a few ulps, amplified by the problem's conditioning: PCA scores of size ~10,
# eigenvalues down to ~0.25 and the whitening that divides by them; kernel ridge systems of
# condition ~140, whose solutions agree to ~1e-5 absolute.
LOOSE = {
    "pca_program": ({"scores", "pca_lowrank_scores", "eigvals", "eigvalsh", "white_cov",
                     "white", "mahalanobis"}, 1e-4, 1e-4),
    "knn_kernel_program": ({"alpha_chol", "alpha_solve", "alpha_upper", "lu_solve"}, 1e-4,
                           2e-5),
}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    ours, theirs = program(ember), program(torch)
    loose, rtol, atol = LOOSE.get(program.__name__, (set(), 0, 0))
    assert loose <= theirs.keys()
    assert_same_results({k: v for k, v in ours.items() if k not in loose},
                        {k: v for k, v in theirs.items() if k not in loose}, 1e-5, 1e-6)
    assert_same_results({k: ours[k] for k in loose}, {k: theirs[k] for k in loose}, rtol, atol)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_warns_like_torch(program):
    assert warnings_of(program, ember) == warnings_of(program, torch)
