"""Circuit analysis, Shapley attribution and activation steering written as TransformerLens,
Captum, ROME and representation-engineering code write them in torch, run once with `torch`
bound to ember and once to PyTorch from the same NumPy weights and data: OV/QK circuits as
factored matrices (eigenvalues by ``linalg.eig``, copying scores, singular values, composition
scores by Frobenius norms), exact Shapley values over all permutations and KernelSHAP by a
weighted least-squares fit over every coalition, ROME's causal tracing (noise added to subject
embeddings by a hook, each hidden state restored in turn) and steering vectors added by forward
hooks, a geometric-median b_dec init by Weiszfeld iterations, and neuron max-activating
examples gathered with topk, unique and bincount."""

import itertools
import math

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def circuits_program(torch):
    """TransformerLens's FactoredMatrix-style analysis of a toy attention layer: the OV circuit
    ``W_E W_V W_O W_U`` and QK circuit, eigenvalues of each head's OV matrix from
    ``torch.linalg.eig`` (complex), the copying score ``sum(eig) .real / sum(|eig|)``, the
    singular values by ``svdvals`` and by ``svd`` of the factored form (``A = U_a S_a V_a^H``,
    then the small core's SVD), Frobenius composition scores between the heads of two layers,
    and the full OV matrix's top-1 token map."""
    rng = np.random.default_rng(2931)
    d_vocab, d_model, n_heads, d_head = 7, 6, 2, 3
    W_E = normal(torch, rng, d_vocab, d_model)
    W_U = normal(torch, rng, d_model, d_vocab)
    W_V = normal(torch, rng, 2, n_heads, d_model, d_head) * 0.5
    W_O = normal(torch, rng, 2, n_heads, d_head, d_model) * 0.5
    W_Q = normal(torch, rng, 2, n_heads, d_model, d_head) * 0.5
    W_K = normal(torch, rng, 2, n_heads, d_model, d_head) * 0.5
    res = {}
    ov = W_V[0] @ W_O[0]                                     # (heads, d_model, d_model)
    eig = torch.linalg.eigvals(ov)
    res["eig_sorted_abs"] = eig.abs().sort(dim=-1).values
    res["eig_dtype"] = [str(eig.dtype).rsplit(".", 1)[-1]]
    res["copying"] = eig.sum(-1).real / eig.abs().sum(-1)
    full_ov = W_E @ ov @ W_U
    res["full_ov_top1"] = full_ov.argmax(-1).flatten().tolist()
    res["svdvals"] = torch.linalg.svdvals(ov)
    # FactoredMatrix(A, B).svd(): SVD of each factor, then of the small core
    U_a, S_a, Vh_a = torch.linalg.svd(W_V[0], full_matrices=False)
    U_b, S_b, Vh_b = torch.linalg.svd(W_O[0], full_matrices=False)
    core = S_a[..., :, None] * (Vh_a @ U_b) * S_b[..., None, :]
    _, S, _ = torch.linalg.svd(core)
    res["factored_S"] = S
    res["factored_norm"] = S.pow(2).sum(-1).sqrt()
    res["fro"] = torch.linalg.matrix_norm(ov)
    qk = W_Q[1] @ W_K[1].transpose(-1, -2)                   # (heads, d_model, d_model)

    def composition_score(left, right):
        num = torch.linalg.matrix_norm(left[:, None] @ right[None], ord="fro")
        return num / (torch.linalg.matrix_norm(left)[:, None]
                      * torch.linalg.matrix_norm(right)[None])
    res["q_comp"] = composition_score(ov, qk)
    res["k_comp"] = composition_score(ov, qk.transpose(-1, -2))
    res["v_comp"] = composition_score(ov, W_V[1] @ W_O[1])
    eigvals, eigvecs = torch.linalg.eig(ov[0])
    recon = (eigvecs @ torch.diag_embed(eigvals) @ torch.linalg.inv(eigvecs)).real
    res["eig_recon"] = recon
    res["eigh"] = torch.linalg.eigvalsh(qk[0] + qk[0].T)
    return res


def shapley_program(torch):
    """Exact Shapley values of a 4-feature model by iterating every permutation
    (itertools.permutations, Captum's ShapleyValues with ``perturbations_per_eval``: the
    perturbed inputs batched by ``torch.stack``), and KernelSHAP's weighted linear fit over
    every coalition: Shapley kernel weights from math.comb, the two end coalitions heavily
    weighted, ``torch.linalg.lstsq`` on ``sqrt(w) * X``; the efficiency check against
    ``f(x) - f(baseline)``; Lime's exponential-kernel similarity on cosine distance."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2932)
    model = nn.Sequential(nn.Linear(4, 5), nn.Softplus(), nn.Linear(5, 1))
    fill_(torch, model, rng, scale=0.8)
    x = normal(torch, rng, 2, 4)
    baseline = torch.full((4,), 0.2)
    M = 4
    res = {}
    with torch.no_grad():
        shap = torch.zeros(2, M)
        perms = list(itertools.permutations(range(M)))
        for perm in perms:
            current = baseline.expand(2, M).clone()
            steps = [current.clone()]
            for f in perm:
                current[:, f] = x[:, f]
                steps.append(current.clone())
            outs = model(torch.stack(steps, 1).view(-1, M)).view(2, M + 1)
            for i, f in enumerate(perm):
                shap[:, f] += outs[:, i + 1] - outs[:, i]
        shap /= len(perms)
        res["shapley"] = shap
        res["efficiency"] = shap.sum(1) - (model(x) - model(baseline[None])).squeeze(1)

        coalitions = torch.tensor(list(itertools.product([0, 1], repeat=M)), dtype=torch.float32)
        sizes = coalitions.sum(1).long()
        weights = torch.tensor([1e6 if s in (0, M) else (M - 1) / (math.comb(M, s) * s * (M - s))
                                for s in sizes.tolist()])
        X = torch.cat([torch.ones(len(coalitions), 1), coalitions], 1)
        kernel = []
        for i in range(2):
            inputs = coalitions * x[i] + (1 - coalitions) * baseline
            y = model(inputs)
            # the interpretable model is fit in float64, as Captum's sklearn-backed one is
            # (the 1e6 end weights make a float32 fit depend on the LAPACK path)
            sw = weights.double().sqrt()[:, None]
            sol = torch.linalg.lstsq(X.double() * sw, y.double() * sw).solution
            kernel.append(sol[1:, 0].float())
        res["kernel_shap"] = torch.stack(kernel)
        distances = 1 - F.cosine_similarity(coalitions * x[0] + (1 - coalitions) * baseline,
                                            x[0:1], dim=1)
        res["lime_weights"] = torch.exp(-1 * (distances ** 2) / (2 * (0.75 ** 2)))
    return res


def causal_tracing_program(torch):
    """ROME's causal tracing on a toy residual MLP stack: a forward hook on the embedding adds
    NumPy noise to the subject tokens of every batch row but the first, hooks on each layer
    restore the clean hidden state (taken from the first row) at one token, and the indirect
    effect per (layer, token) is the restored probability of the answer; then a steering vector
    (difference of mean activations on two prompt sets) added by a forward hook returning
    ``output + alpha * v`` at one layer, and the hook removed again."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2933)
    d, vocab, n_layers, T = 6, 9, 3, 5

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.mix = nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 12), nn.GELU(approximate="tanh"),
                                     nn.Linear(12, d))

        def forward(self, h):
            counts = torch.arange(1, h.shape[1] + 1, dtype=h.dtype)[:, None]
            h = h + self.mix(torch.cumsum(h, dim=1) / counts)      # causal token mixing
            return h + self.mlp(self.ln(h))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.layers = nn.ModuleList([Layer() for _ in range(n_layers)])
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, tokens):
            h = self.wte(tokens)
            for layer in self.layers:
                h = layer(h)
            return self.head(h)

    model = LM()
    fill_(torch, model, rng, scale=0.6)
    model.eval()
    prompt = torch.tensor([[1, 4, 6, 2, 3]])
    subject = (1, 3)
    answer = 7
    n_noisy = 3
    noise = normal(torch, rng, n_noisy, subject[1] - subject[0], d) * 0.5
    batch = prompt.repeat(n_noisy + 1, 1)

    def noise_hook(module, inputs, output):
        output[1:, subject[0]:subject[1]] += noise
        return output

    def trace(layer=None, token=None):
        handles = [model.wte.register_forward_hook(noise_hook)]
        if layer is not None:
            def restore(module, inputs, output):
                output[1:, token] = output[0, token]
                return output
            handles.append(model.layers[layer].register_forward_hook(restore))
        try:
            with torch.no_grad():
                probs = F.softmax(model(batch)[1:, -1], dim=-1).mean(0)
        finally:
            for h in handles:
                h.remove()
        return probs[answer]

    res = {"low": trace()}
    with torch.no_grad():
        res["high"] = F.softmax(model(prompt)[0, -1], -1)[answer]
    res["effects"] = torch.stack([torch.stack([trace(layer, t) for t in range(T)])
                                  for layer in range(n_layers)])
    res["best"] = [int(v) for v in divmod(int(res["effects"].argmax()), T)]

    acts = {}
    h = model.layers[1].register_forward_hook(lambda m, i, o: acts.__setitem__("h", o.detach()))
    pos = torch.from_numpy(rng.integers(0, vocab, (4, T)))
    neg = torch.from_numpy(rng.integers(0, vocab, (4, T)))
    with torch.no_grad():
        model(pos)
        mean_pos = acts["h"][:, -1].mean(0)
        model(neg)
        steer = mean_pos - acts["h"][:, -1].mean(0)
    h.remove()
    handle = model.layers[1].register_forward_hook(lambda m, i, o: o + 4.0 * steer)
    with torch.no_grad():
        steered = F.log_softmax(model(prompt)[0, -1], -1)
    handle.remove()
    with torch.no_grad():
        plain = F.log_softmax(model(prompt)[0, -1], -1)
    res["steered"] = steered
    res["plain"] = plain
    res["kl"] = F.kl_div(steered, plain, log_target=True, reduction="sum")
    return res


def neuron_stats_program(torch):
    """Dataset-level neuron statistics and SAELens's geometric-median b_dec init: activations of
    a hooked MLP over a token dataset, max-activating examples per neuron by ``topk`` over the
    flattened (batch, position) axis and ``unravel``-by-division indices, the token frequency of
    each neuron's top activations by ``unique(return_counts=True)`` and ``bincount``, firing
    frequencies with ``log10`` feature density, and Weiszfeld iterations for the geometric median
    with ``torch.norm`` weights clamped below."""
    nn = torch.nn
    rng = np.random.default_rng(2934)
    emb = nn.Embedding(10, 5)
    mlp = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 5))
    fill_(torch, emb, rng)
    fill_(torch, mlp, rng)
    tokens = torch.from_numpy(rng.integers(0, 10, (6, 7)))
    store = []
    handle = mlp[1].register_forward_hook(lambda m, i, o: store.append(o.detach().clone()))
    jitter = normal(torch, rng, 6, 7, 5) * 0.1         # repeated tokens would tie in topk
    with torch.no_grad():
        for chunk, extra in zip(tokens.split(2), jitter.split(2)):
            mlp(emb(chunk) + extra)
    handle.remove()
    acts = torch.cat(store)                                  # (6, 7, 8)
    flat = acts.reshape(-1, acts.shape[-1])
    vals, idx = flat.topk(3, dim=0)
    rows, cols = idx // tokens.shape[1], idx % tokens.shape[1]
    fired = vals > 0                                   # zero activations tie: dropped
    top_tokens = tokens[rows, cols][fired]
    res = {"top_vals": vals, "top_rows": rows.masked_fill(~fired, -1).flatten().tolist(),
           "top_tokens": top_tokens.tolist()}
    uniq, counts = torch.unique(top_tokens, return_counts=True)
    res["unique"] = uniq.tolist()
    res["counts"] = counts.tolist()
    res["bincount"] = torch.bincount(top_tokens, minlength=10).tolist()
    freq = (flat > 0).float().mean(0)
    res["log_density"] = torch.log10(freq + 1e-10)
    res["dead"] = (freq == 0).tolist()

    points = normal(torch, rng, 20, 5) + torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0])
    weights = torch.ones(len(points))
    median = points.mean(0)
    objective = []
    for _ in range(10):
        prev = median
        weights = 1 / torch.clamp(torch.norm(points - median, dim=1), min=1e-6)
        weights /= weights.sum()
        median = (weights[:, None] * points).sum(0)
        objective.append(torch.norm(points - median, dim=1).sum().item())
        if torch.norm(prev - median) < 1e-5:
            break
    res["median"] = median
    res["objective"] = objective
    return res


PROGRAMS = [circuits_program, shapley_program, causal_tracing_program, neuron_stats_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, {
        # float32 eig/svd (LAPACK driver differences); float32 softplus/linear sums
        "circuits_program": (1e-4, 1e-5),
        "shapley_program": (1e-4, 1e-5),
        "causal_tracing_program": (1e-4, 1e-5),
    })
