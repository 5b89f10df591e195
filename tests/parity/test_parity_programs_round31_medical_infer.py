"""More medical and weather programs of round 31: MONAI's MetaTensor (a torch.Tensor subclass
carrying an affine and an op trace through __torch_function__) flowing through transforms, a
network and a loss; nnU-Net's mixed-precision step (autocast to bfloat16 on CPU, GradScaler,
unscale_ and clipping) with a checkpointed block and inference-mode evaluation; GraphCast's
grid-to-mesh encoder with haversine edge features, a sparse adjacency product, segment softmax
by scatter_reduce('amax') and mean aggregation with include_self=False, and a latitude-weighted
anomaly correlation. Sibling of test_parity_programs_round31_medical."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal, program_tests

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _meta_tensor_class(torch):
    class MetaTensor(torch.Tensor):
        @staticmethod
        def __new__(cls, x, affine=None, *args, **kwargs):
            return torch.as_tensor(x, *args, **kwargs).as_subclass(cls)

        def __init__(self, x, affine=None):
            self.affine = torch.eye(4) if affine is None else affine
            self.applied = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            ret = super().__torch_function__(func, types, args, kwargs or {})
            src = next((a for a in args if isinstance(a, MetaTensor)), None)
            if src is None and args and isinstance(args[0], (list, tuple)):
                src = next((a for a in args[0] if isinstance(a, MetaTensor)), None)

            def carry(r):
                if isinstance(r, MetaTensor) and src is not None and r is not src:
                    r.affine = src.affine
                    r.applied = src.applied + [getattr(func, "__name__", str(func))]
                return r
            if isinstance(ret, tuple) and not hasattr(ret, "_fields"):
                return tuple(carry(r) for r in ret)
            if isinstance(ret, list):
                return [carry(r) for r in ret]
            return carry(ret)

        def as_tensor(self):
            return self.as_subclass(torch.Tensor)
    return MetaTensor


def monai_metatensor_program(torch):
    """Transforms on a MetaTensor (flip with an affine update, intensity scaling, crop by
    slicing, spacing-style scale via interpolate), collate by stack, a Conv3d forward and a
    Dice loss backward; the subclass, its trace and its affine are compared."""
    rng = np.random.default_rng(5)
    F = torch.nn.functional
    MetaTensor = _meta_tensor_class(torch)
    affine = torch.diag(torch.tensor([1.5, 1.5, 2.0, 1.0], dtype=torch.float64))
    img = MetaTensor(rng.standard_normal((1, 6, 6, 4)).astype(np.float32), affine=affine)
    res = {"type0": [type(img).__name__], "is_tensor": [torch.is_tensor(img)]}
    flipped = torch.flip(img, dims=(1,))
    flip_aff = torch.eye(4, dtype=torch.float64)
    flip_aff[0, 0], flip_aff[0, 3] = -1, (img.shape[1] - 1)
    flipped.affine = flipped.affine @ flip_aff
    lo, hi = torch.quantile(flipped.flatten(), torch.tensor([0.05, 0.95]))
    scaled = ((flipped - lo) / (hi - lo)).clamp(0, 1)
    cropped = scaled[:, 1:5, 1:5, :]
    resized = F.interpolate(cropped.unsqueeze(0), scale_factor=(1.0, 1.0, 1.5),
                            mode="trilinear", align_corners=False)[0]
    res["types"] = [type(v).__name__ for v in (flipped, scaled, cropped, resized)]
    res["trace"] = [",".join(resized.applied)]
    res["affine"] = resized.affine
    res["resized"] = resized.as_tensor()
    batch = torch.stack([resized, resized * 0.5])
    res["batch_type"] = [type(batch).__name__, str(batch.shape)]
    conv = torch.nn.Conv3d(1, 2, 3, padding=1)
    fill_(torch, conv, rng, 0.3)
    logits = conv(batch)
    res["logit_type"] = [type(logits).__name__]
    label = torch.from_numpy(rng.integers(0, 2, (2, 1, 4, 4, 6)))
    onehot = torch.zeros_like(logits).scatter_(1, label, 1.0)
    p = logits.softmax(1)
    inter = (p * onehot).sum((2, 3, 4))
    dice = 1 - (2 * inter + 1e-5) / (p.sum((2, 3, 4)) + onehot.sum((2, 3, 4)) + 1e-5)
    loss = dice.mean()
    loss.backward()
    res["loss_type"] = [type(loss).__name__, loss.grad_fn.name(),
                        loss.grad_fn.next_functions[0][0].name(), logits._is_view()]
    res["loss"] = loss.as_subclass(torch.Tensor).detach()
    res["grad"] = conv.weight.grad
    res["grad_type"] = [type(conv.weight.grad).__name__]
    return res


def nnunet_amp_program(torch):
    """One nnU-Net-style block under autocast(cpu, bfloat16) with a checkpointed inner block
    (use_reentrant=False), GradScaler scale/unscale_/clip/step/update over two steps, then
    evaluation in inference_mode with mirroring; dtypes, scale and parameters compared."""
    rng = np.random.default_rng(6)
    F = torch.nn.functional
    from importlib import import_module
    checkpoint = import_module(torch.__name__ + ".utils.checkpoint").checkpoint
    stem = torch.nn.Conv3d(1, 4, 3, padding=1)
    block = torch.nn.Sequential(torch.nn.Conv3d(4, 4, 3, padding=1),
                                torch.nn.InstanceNorm3d(4, affine=True),
                                torch.nn.LeakyReLU(0.01, inplace=True))
    head = torch.nn.Conv3d(4, 2, 1)
    mods = torch.nn.ModuleList([stem, block, head])
    fill_(torch, mods, rng, 0.25)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=1)
    opt = torch.optim.SGD(mods.parameters(), lr=1e-2, momentum=0.99, nesterov=True)
    x = normal(torch, rng, 2, 1, 6, 6, 6)
    y = torch.from_numpy(rng.integers(0, 2, (2, 6, 6, 6)))
    res = {"dtypes": [], "loss": [], "scale": [], "gn": []}
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = stem(x)
            h = checkpoint(block, h, use_reentrant=False)
            out = head(h)
            loss = F.cross_entropy(out, y)
        res["dtypes"] += [str(h.dtype).split(".")[-1], str(out.dtype).split(".")[-1],
                          str(loss.dtype).split(".")[-1]]
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        res["gn"].append(torch.nn.utils.clip_grad_norm_(mods.parameters(), 12.0))
        scaler.step(opt)
        scaler.update()
        res["loss"].append(loss.detach().float())
        res["scale"].append(scaler.get_scale())
    with torch.inference_mode():
        pred = torch.softmax(head(block(stem(x))), 1)
        pred = pred + torch.flip(torch.softmax(head(block(stem(torch.flip(x, (4,))))), 1), (4,))
        res["inference"] = [torch.is_inference(pred), pred.requires_grad]
    res["pred"] = pred / 2
    res["params"] = [p.detach() for p in mods.parameters()]
    return res


def graphcast_encoder_program(torch):
    """Grid-to-mesh encoder: lat/lon to unit vectors, haversine distances as edge features,
    a sparse COO adjacency product for a smoothing pass, attention-weighted messages with a
    segment softmax (scatter_reduce amax, exp, scatter_add), mean aggregation with
    include_self=False, and a latitude-weighted ACC / RMSE loss over two Adam steps."""
    rng = np.random.default_rng(7)
    Nlat, Nlon, M, H, V = 5, 6, 7, 6, 2
    lat = torch.linspace(-60.0, 60.0, Nlat)
    lon = torch.arange(Nlon) * (360.0 / Nlon)
    glat, glon = torch.meshgrid(torch.deg2rad(lat), torch.deg2rad(lon), indexing="ij")
    grid_xyz = torch.stack([torch.cos(glat) * torch.cos(glon), torch.cos(glat) * torch.sin(glon),
                            torch.sin(glat)], -1).reshape(-1, 3)
    mesh_xyz = torch.nn.functional.normalize(normal(torch, rng, M, 3), dim=-1)
    n_grid = Nlat * Nlon
    dots = grid_xyz @ mesh_xyz.T
    nearest = dots.topk(2, dim=1).indices
    senders = torch.arange(n_grid).repeat_interleave(2)
    receivers = nearest.reshape(-1)
    d = (grid_xyz[senders] - mesh_xyz[receivers]).norm(dim=-1)
    hav = 2 * torch.arcsin((d / 2).clamp(max=1.0))
    edge_feat = torch.cat([hav[:, None], grid_xyz[senders] - mesh_xyz[receivers]], -1)
    res = {"senders": senders, "receivers": receivers, "hav": hav}
    adj = torch.sparse_coo_tensor(torch.stack([receivers, senders]),
                                  torch.ones(senders.shape[0]), (M, n_grid)).coalesce()
    deg = torch.sparse.sum(adj, dim=1).to_dense()
    res["deg"] = deg
    enc_node = torch.nn.Linear(V + 3, H)
    enc_edge = torch.nn.Linear(4, H)
    att = torch.nn.Linear(2 * H, 1)
    dec = torch.nn.Linear(H, V)
    mods = torch.nn.ModuleList([enc_node, enc_edge, att, dec])
    fill_(torch, mods, rng, 0.3)
    opt = torch.optim.Adam(mods.parameters(), lr=3e-3)
    x = normal(torch, rng, n_grid, V)
    target = normal(torch, rng, M, V)
    clim = normal(torch, rng, M, V) * 0.1
    mlat = torch.arcsin(mesh_xyz[:, 2].clamp(-1, 1))
    w = torch.cos(mlat) / torch.cos(mlat).mean()
    res["loss"], res["acc"] = [], []
    for _ in range(2):
        opt.zero_grad()
        h = torch.nn.functional.silu(enc_node(torch.cat([x, grid_xyz], -1)))
        e = torch.nn.functional.silu(enc_edge(edge_feat))
        msg = h[senders] + e
        score = att(torch.cat([msg, torch.zeros(M, H).index_select(0, receivers)], -1))[:, 0]
        smax = torch.full((M,), -1e9).scatter_reduce(0, receivers, score, "amax",
                                                     include_self=False)
        ex = torch.exp(score - smax[receivers])
        den = torch.zeros(M).scatter_add(0, receivers, ex)
        alpha = ex / den[receivers]
        agg = torch.zeros(M, H).index_add(0, receivers, alpha[:, None] * msg)
        mean = torch.zeros(M, H).scatter_reduce(
            0, receivers[:, None].expand(-1, H), msg, "mean", include_self=False)
        smooth = torch.sparse.mm(adj, h) / deg.clamp(min=1)[:, None]
        pred = dec(agg + mean + 0.5 * smooth)
        fa, oa = pred - clim, target - clim
        acc = (w[:, None] * fa * oa).sum(0) / torch.sqrt(
            (w[:, None] * fa ** 2).sum(0) * (w[:, None] * oa ** 2).sum(0))
        rmse = torch.sqrt((w[:, None] * (pred - target) ** 2).mean(0))
        loss = rmse.mean() - 0.1 * acc.mean()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
        res["acc"].append(acc.detach())
    res["grads"] = [p.grad for p in mods.parameters()]
    return res


PROGRAMS = [monai_metatensor_program, nnunet_amp_program, graphcast_encoder_program]


test_program_matches_torch, test_program_warns_like_torch = program_tests(PROGRAMS, ember, torch)
