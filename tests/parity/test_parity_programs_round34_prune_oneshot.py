"""One-shot pruning and sparse deployment written as their reference repositories write them in
torch, run once with `torch` bound to ember and once to PyTorch from the same NumPy weights and
data: SparseGPT (calibration Hessian accumulated by add_hook on inputs, dampening, inverse via
cholesky/cholesky_inverse and an upper Cholesky factor, blockwise OBS updates with the
w^2/d^2 mask), Wanda (|W| * ||X||_2 per input column, row-wise sort and scatter_), network
slimming (L1 on BatchNorm gammas through the sign subgradient, a global gamma threshold, a new
smaller Conv/BN/Linear built with index_select and the running stats copied), torch.sparse
inference of pruned weights (to_sparse, sparse.mm, addmm, CSR, gradients through sparse.mm), SGD
training of a sparse COO Parameter, and
masks written with nn.utils.parametrize (register, original, cached, remove with
leave_parametrized)."""

import importlib

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def sparsegpt_program(torch):
    """SparseGPT's fasterprune for one Linear: H accumulated over calibration batches from a
    forward hook, dead columns, damp, Hinv = cholesky(cholesky_inverse(cholesky(H)),
    upper=True), blocks of columns pruned by the w^2/diag(Hinv)^2 metric and the error
    propagated with addmm-style updates; compared by the layer's output error."""
    nn = torch.nn
    rng = np.random.default_rng(3421)
    res = {}
    layer = nn.Linear(16, 6, bias=False)
    fill_(torch, layer, rng)
    H = torch.zeros((16, 16))
    nsamples = [0]

    def add_batch(mod, inp, out):
        x = inp[0].detach()
        if len(x.shape) == 2:
            x = x.unsqueeze(0)
        tmp = x.shape[0]
        x = x.reshape((-1, x.shape[-1])).t()
        H.mul_(nsamples[0] / (nsamples[0] + tmp))
        nsamples[0] += tmp
        x = np.sqrt(2 / nsamples[0]) * x.float()
        H.add_(x.matmul(x.t()))

    handle = layer.register_forward_hook(add_batch)
    calib = [normal(torch, rng, 2, 5, 16) for _ in range(3)]
    with torch.no_grad():
        dense_out = [layer(x) for x in calib]
    handle.remove()
    W = layer.weight.data.clone().float()
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    Losses = torch.zeros(W.shape[0])
    Hc = H.clone()
    damp = 0.01 * torch.mean(torch.diag(Hc))
    diag = torch.arange(16)
    Hc[diag, diag] += damp
    Hc = torch.linalg.cholesky(Hc)
    Hc = torch.cholesky_inverse(Hc)
    Hc = torch.linalg.cholesky(Hc, upper=True)
    Hinv = Hc
    blocksize, sparsity = 8, 0.5
    mask = None
    for i1 in range(0, 16, blocksize):
        i2 = min(i1 + blocksize, 16)
        count = i2 - i1
        W1 = W[:, i1:i2].clone()
        Q1 = torch.zeros_like(W1)
        Err1 = torch.zeros_like(W1)
        Losses1 = torch.zeros_like(W1)
        Hinv1 = Hinv[i1:i2, i1:i2]
        tmp = W1 ** 2 / (torch.diag(Hinv1).reshape((1, -1))) ** 2
        thresh = torch.sort(tmp.flatten())[0][int(tmp.numel() * sparsity)]
        mask1 = tmp <= thresh
        for i in range(count):
            w = W1[:, i]
            d = Hinv1[i, i]
            q = w.clone()
            q[mask1[:, i]] = 0
            Q1[:, i] = q
            Losses1[:, i] = (w - q) ** 2 / d ** 2
            err1 = (w - q) / d
            W1[:, i:] -= err1.unsqueeze(1).matmul(Hinv1[i, i:].unsqueeze(0))
            Err1[:, i] = err1
        W[:, i1:i2] = Q1
        Losses += torch.sum(Losses1, 1) / 2
        W[:, i2:] -= Err1.matmul(Hinv[i1:i2, i2:])
        mask = mask1 if mask is None else torch.cat([mask, mask1], 1)
    layer.weight.data = W.reshape(layer.weight.shape).to(layer.weight.data.dtype)
    res["H"] = H
    res["Hinv"] = Hinv
    res["losses"] = Losses
    res["weight"] = layer.weight
    res["sparsity"] = float((layer.weight == 0).float().mean())
    with torch.no_grad():
        res["out_err"] = [float((layer(x) - y).pow(2).mean()) for x, y in zip(calib, dense_out)]
    return res


def wanda_program(torch):
    """Wanda (Sun et al.): the scaler row is the running mean of ||X_j||^2 over calibration
    tokens, W_metric = |W| * sqrt(scaler_row), per output row sort and zero the lowest half
    via scatter_; the variant with an N:M pattern uses topk over groups of columns."""
    nn = torch.nn
    rng = np.random.default_rng(3422)
    res = {}
    layers = nn.ModuleList([nn.Linear(12, 12), nn.Linear(12, 8)])
    fill_(torch, layers, rng)

    class WrappedGPT:
        def __init__(self, layer):
            self.layer = layer
            self.columns = layer.weight.data.shape[1]
            self.scaler_row = torch.zeros((self.columns,))
            self.nsamples = 0

        def add_batch(self, inp, out):
            if len(inp.shape) == 2:
                inp = inp.unsqueeze(0)
            tmp = inp.shape[0]
            inp = inp.reshape((-1, inp.shape[-1])).t()
            self.scaler_row *= self.nsamples / (self.nsamples + tmp)
            self.nsamples += tmp
            inp = inp.type(torch.float32)
            self.scaler_row += torch.norm(inp, p=2, dim=1) ** 2 / self.nsamples

    calib = normal(torch, rng, 4, 6, 12)
    for idx, layer in enumerate(layers):
        wrapped = WrappedGPT(layer)
        h = layer.register_forward_hook(lambda m, i, o, w=wrapped: w.add_batch(i[0].data,
                                                                               o.data))
        with torch.no_grad():
            x = calib
            for prev in layers[:idx]:
                x = torch.relu(prev(x))
            layer(x)
        h.remove()
        W_metric = torch.abs(layer.weight.data) * torch.sqrt(wrapped.scaler_row.reshape((1, -1)))
        W_mask = torch.zeros_like(W_metric) == 1
        if idx == 0:
            sort_res = torch.sort(W_metric, dim=-1, stable=True)
            indices = sort_res[1][:, :int(W_metric.shape[1] * 0.5)]
            W_mask.scatter_(1, indices, True)
        else:
            prune_n, prune_m = 2, 4
            for ii in range(W_metric.shape[1]):
                if ii % prune_m == 0:
                    tmp = W_metric[:, ii:(ii + prune_m)].float()
                    W_mask.scatter_(1, ii + torch.topk(tmp, prune_n, dim=1, largest=False)[1],
                                    True)
        layer.weight.data[W_mask] = 0
        res[f"scaler_{idx}"] = wrapped.scaler_row
        res[f"metric_{idx}"] = W_metric
        res[f"mask_{idx}"] = W_mask.float()
    res["weights"] = [m.weight for m in layers]
    with torch.no_grad():
        res["out"] = layers[1](torch.relu(layers[0](calib)))
    return res


def network_slimming_program(torch):
    """Liu et al.'s network slimming: sparsity on BN gammas added to their gradients with
    sign(), the global threshold from the sorted |gamma|s, per-layer masks, and a new
    smaller model built with index_select / np.argwhere indices (conv out, next conv in,
    BN params and running stats, the linear head's input), checked against masking."""
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(3423)
    res = {}

    def make(c1, c2):
        return nn.Sequential(nn.Conv2d(3, c1, 3, padding=1, bias=False), nn.BatchNorm2d(c1),
                             nn.ReLU(inplace=True), nn.Conv2d(c1, c2, 3, padding=1, bias=False),
                             nn.BatchNorm2d(c2), nn.ReLU(inplace=True),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c2, 5))

    model = make(8, 8)
    fill_(torch, model, rng)
    X = normal(torch, rng, 6, 3, 6, 6)
    Y = torch.from_numpy(rng.integers(0, 5, 6))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    s = 1e-2
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(model(X), Y).backward()
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.grad.data.add_(s * torch.sign(m.weight.data))
        opt.step()
    model.eval()
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    total = sum(m.weight.data.shape[0] for m in bns)
    bn = torch.zeros(total)
    index = 0
    for m in bns:
        size = m.weight.data.shape[0]
        bn[index:(index + size)] = m.weight.data.abs().clone()
        index += size
    y, i = torch.sort(bn)
    thre = y[int(total * 0.4)]
    cfg, cfg_mask = [], []
    for m in bns:
        weight_copy = m.weight.data.abs().clone()
        mask = weight_copy.gt(thre).float()
        cfg.append(int(torch.sum(mask)))
        cfg_mask.append(mask.clone())
    res["thre"] = thre
    res["cfg"] = cfg
    with torch.no_grad():
        masked = make(8, 8)
        masked.load_state_dict(model.state_dict())
        masked.eval()
        for m, mk in zip([masked[1], masked[4]], cfg_mask):
            m.weight.data.mul_(mk)
            m.bias.data.mul_(mk)
        ref = masked(X)
    newmodel = make(*cfg)
    newmodel.eval()
    idx0 = np.squeeze(np.argwhere(np.asarray(cfg_mask[0].cpu().numpy())))
    idx1 = np.squeeze(np.argwhere(np.asarray(cfg_mask[1].cpu().numpy())))
    i0 = torch.from_numpy(np.atleast_1d(idx0).astype(np.int64))
    i1 = torch.from_numpy(np.atleast_1d(idx1).astype(np.int64))
    with torch.no_grad():
        newmodel[0].weight.data = model[0].weight.data.index_select(0, i0).clone()
        for new, old, ii in ((newmodel[1], model[1], i0), (newmodel[4], model[4], i1)):
            new.weight.data = old.weight.data[ii.tolist()].clone()
            new.bias.data = old.bias.data[ii.tolist()].clone()
            new.running_mean = old.running_mean[ii].clone()
            new.running_var = old.running_var[ii].clone()
        w = model[3].weight.data[:, i0, :, :].clone()
        newmodel[3].weight.data = w[i1, :, :, :].clone()
        newmodel[8].weight.data = torch.index_select(model[8].weight.data, 1, i1).clone()
        newmodel[8].bias.data = model[8].bias.data.clone()
        out = newmodel(X)
    res["ref"] = ref
    res["pruned_out"] = out
    res["bn_shapes"] = [list(newmodel[1].running_mean.shape), list(newmodel[4].weight.shape)]
    res["n_params"] = sum(p.numel() for p in newmodel.parameters())
    res["gammas"] = [m.weight for m in bns]
    return res


def sparse_inference_program(torch):
    """Deploying pruned weights as sparse tensors: to_sparse (COO), indices/values/_nnz,
    torch.sparse.mm and torch.sparse.addmm against dense, CSR via to_sparse_csr with
    crow_indices, a sparse x dense matmul with gradient flowing to the dense input and to
    the sparse values, torch.sparse.sum and to_dense round trips."""
    prune = importlib.import_module(torch.__name__ + ".nn.utils.prune")
    nn = torch.nn
    rng = np.random.default_rng(3424)
    res = {}
    fc = nn.Linear(10, 7)
    fill_(torch, fc, rng)
    prune.l1_unstructured(fc, "weight", amount=0.6)
    prune.remove(fc, "weight")
    W = fc.weight.detach()
    Ws = W.to_sparse()
    res["nnz"] = Ws._nnz()
    res["indices"] = Ws.indices()
    res["values"] = Ws.values()
    res["coalesced"] = Ws.is_coalesced()
    x = normal(torch, rng, 10, 3)
    res["spmm"] = torch.sparse.mm(Ws, x)
    res["addmm"] = torch.sparse.addmm(fc.bias.detach().unsqueeze(1).expand(7, 3), Ws, x)
    res["dense_ref"] = W @ x + fc.bias.detach().unsqueeze(1)
    csr = W.to_sparse_csr()
    res["crow"] = csr.crow_indices()
    res["col"] = csr.col_indices()
    res["csr_mm"] = csr @ x
    res["layout"] = [Ws.layout == torch.sparse_coo, csr.layout == torch.sparse_csr]
    xg = x.clone().requires_grad_(True)
    Wg = W.to_sparse().requires_grad_(True)
    out = torch.sparse.mm(Wg, xg)
    out.pow(2).sum().backward()
    res["x_grad"] = xg.grad
    res["W_grad_dense"] = Wg.grad.to_dense()
    res["sparse_sum"] = torch.sparse.sum(Ws, dim=1).to_dense()
    res["roundtrip"] = bool(torch.equal(Ws.to_dense(), W))
    xb = normal(torch, rng, 4, 10)
    res["linear_sparse"] = torch.sparse.mm(Ws, xb.t()).t() + fc.bias.detach()
    res["linear_dense"] = fc(xb)
    return res


def sparse_parameter_training_program(torch):
    """SET-style training with the weight kept as a sparse COO Parameter (the torch.sparse
    implementations of sparse MLPs): forward through torch.sparse.mm, SGD with momentum and
    weight decay on the sparse parameter, zero_grad in both modes, and the dense bias."""
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(3426)
    res = {}
    dense = normal(torch, rng, 6, 8) * torch.from_numpy(
        (rng.random((6, 8)) < 0.4).astype(np.float32))
    W = nn.Parameter(dense.to_sparse())
    b = nn.Parameter(torch.zeros(6))
    X, Y = normal(torch, rng, 10, 8), normal(torch, rng, 10, 6)
    opt = torch.optim.SGD([W, b], lr=0.05, momentum=0.9, weight_decay=1e-3)
    losses, grads = [], []
    for step in range(4):
        opt.zero_grad(set_to_none=step % 2 == 0)
        out = torch.sparse.mm(W, X.t()).t() + b
        loss = F.mse_loss(torch.tanh(out), Y)
        loss.backward()
        grads.append(W.grad.to_dense())
        opt.step()
        losses.append(loss.item())
    res["grads"] = grads
    res["losses"] = losses
    res["W"] = W.detach().to_dense()
    res["b"] = b
    res["nnz_kept"] = bool(((W.detach().to_dense() != 0) == (dense != 0)).all())
    res["buf"] = opt.state[W]["momentum_buffer"].to_dense()
    return res


def parametrize_mask_program(torch):
    """Masks as parametrizations (torch.ao-style FakeSparsity): a module holding a mask
    buffer registered on weight, the original parameter trained, the mask read through
    state_dict (parametrizations.weight.original / .0.mask), parametrize.cached for a
    repeated forward, and remove_parametrizations with leave_parametrized True/False."""
    nn = torch.nn
    F = torch.nn.functional
    P = torch.nn.utils.parametrize
    rng = np.random.default_rng(3425)
    res = {}

    class FakeSparsity(nn.Module):
        def __init__(self, mask):
            super().__init__()
            self.register_buffer("mask", mask)

        def forward(self, x):
            assert self.mask.shape == x.shape
            return self.mask * x

        def state_dict(self, *args, **kwargs):
            return {}

    net = nn.Sequential(nn.Linear(6, 8), nn.SiLU(), nn.Linear(8, 3))
    fill_(torch, net, rng)
    for i in (0, 2):
        w = net[i].weight
        k = max(1, int(0.5 * w.numel()))
        thr = w.detach().abs().flatten().kthvalue(k).values
        P.register_parametrization(net[i], "weight", FakeSparsity((w.detach().abs() > thr)
                                                                  .float()))
    res["is_param"] = [P.is_parametrized(net[0]), P.is_parametrized(net[0], "bias")]
    res["sd_keys"] = sorted(net.state_dict().keys())
    X, Y = normal(torch, rng, 10, 6), normal(torch, rng, 10, 3)
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    for _ in range(3):
        opt.zero_grad()
        with P.cached():
            loss = F.mse_loss(net(X), Y) + 0.1 * net[0].weight.pow(2).sum()
        loss.backward()
        opt.step()
    res["loss"] = loss.detach()
    res["orig"] = net[0].parametrizations.weight.original
    res["orig_grad"] = net[0].parametrizations.weight.original.grad
    res["effective"] = net[0].weight
    res["param_names"] = sorted(n for n, _ in net.named_parameters())
    P.remove_parametrizations(net[0], "weight", leave_parametrized=True)
    P.remove_parametrizations(net[2], "weight", leave_parametrized=False)
    res["after_keys"] = sorted(net.state_dict().keys())
    res["w0"] = net[0].weight
    res["w2"] = net[2].weight
    res["zeros"] = [int((net[0].weight == 0).sum()), int((net[2].weight == 0).sum())]
    return res


PROGRAMS = [sparsegpt_program, wanda_program, network_slimming_program,
            sparse_inference_program, sparse_parameter_training_program,
            parametrize_mask_program]

# cholesky/cholesky_inverse and the OBS updates chain float32 solves (LAPACK ordering differs);
# momentum SGD with BatchNorm over three steps reassociates float32 sums
TOLERANCES = {"sparsegpt_program": (1e-4, 1e-5), "network_slimming_program": (1e-4, 1e-5),
              "sparse_parameter_training_program": (1e-4, 1e-5),
              "parametrize_mask_program": (1e-4, 1e-5)}

test_program_matches_torch, test_program_warns_like_torch = program_tests(
    PROGRAMS, ember, torch, TOLERANCES)
