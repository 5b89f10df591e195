"""The random calls of test_parity_nn_functional_fuzz_round36: one input and one call of an
nn.functional normalisation, dropout, embedding, padding, activation or distance function with
random arguments, written once against a library argument ``lib`` (ember or torch)."""

import numpy as np


class Skip:
    def __repr__(self):
        return "-"


SKIP = Skip()


def kw(**kwargs):
    return {k: v for k, v in kwargs.items() if v is not SKIP}


def maybe(rng, value, p=0.5):
    return value if rng.random() < p else SKIP


DTYPES = ["float32", "float64", "float64", "float64", "float16", "bfloat16", "int64"]


def shape(rng):
    nd = rng.choice([0, 1, 2, 2, 3, 3, 4, 4, 5])
    sizes = [rng.choice([1, 2, 3, 4]) for _ in range(nd)]
    if nd and rng.random() < 0.1:
        sizes[rng.randrange(nd)] = 0
    return tuple(sizes)


def raw(rng, npr, shp, dtype):
    if dtype.startswith("int"):
        return npr.integers(-3, 4, shp).astype(np.float64)
    a = npr.standard_normal(shp) * rng.choice([1, 1, 3])
    if a.size and rng.random() < 0.15:
        a.reshape(-1)[rng.randrange(a.size)] = rng.choice([np.nan, np.inf, -0.0, 0.0])
    return a


def spec(rng, npr):
    dtype = rng.choice(DTYPES)
    shp = shape(rng)
    layout = rng.choice(["contiguous", "contiguous", "transposed", "stepped"])
    grad = dtype == "float64" and rng.random() < 0.6
    return dtype, shp, layout, raw(rng, npr, shp, dtype), grad


def fresh(a):
    out = np.empty(a.shape, a.dtype)
    out[...] = a
    return out


def make_input(lib, sp):
    dtype, shp, layout, r, grad = sp
    if layout == "transposed" and len(shp) >= 2:
        leaf = lib.tensor(fresh(np.swapaxes(r, 0, -1))).to(getattr(lib, dtype))
        leaf.requires_grad_(grad)
        return leaf, leaf.transpose(0, -1)
    if layout == "stepped" and len(shp) >= 1:
        leaf = lib.tensor(np.repeat(r, 2, axis=-1)).to(getattr(lib, dtype)).requires_grad_(grad)
        return leaf, leaf[..., ::2]
    leaf = lib.tensor(r).to(getattr(lib, dtype)).requires_grad_(grad)
    return leaf, leaf


def _dim(rng, nd):
    if rng.random() < 0.05:
        return max(nd, 1) + 1
    return rng.randrange(-max(nd, 1), max(nd, 1))


def _param(lib, n, seed, dtype, grad):
    w = lib.tensor(np.cos(np.arange(n) + seed) + 1.5).to(dtype)
    return w.requires_grad_(grad) if dtype.is_floating_point else w


NAMES = [
    "layer_norm", "group_norm", "instance_norm", "local_response_norm", "rms_norm", "normalize",
    "batch_norm", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
    "feature_alpha_dropout", "embedding", "embedding_bag", "one_hot", "pad", "elu", "celu",
    "selu", "hardtanh", "relu6", "threshold", "softplus", "leaky_relu", "rrelu", "glu",
    "hardshrink", "softshrink", "logsigmoid", "softmin", "softmax", "log_softmax",
    "gumbel_softmax", "mish", "hardswish", "silu", "gelu", "pdist", "cdist",
    "cosine_similarity", "pairwise_distance", "tanhshrink", "softsign", "hardsigmoid",
    "relu", "triplet_margin_loss", "triplet_margin_with_distance_loss"]

INPLACE = ("elu", "celu", "selu", "hardtanh", "relu6", "threshold", "leaky_relu", "rrelu",
           "mish", "hardswish", "silu", "relu", "hardsigmoid", "dropout", "dropout1d",
           "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")

# RNG-dependent results: only metadata is compared
RANDOM = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
          "feature_alpha_dropout", "rrelu", "gumbel_softmax")


def op(rng, sp):  # noqa: C901 - one branch per function
    dtype, shp, _, _, grad = sp
    nd = len(shp)
    name = rng.choice(NAMES)
    seed = rng.randrange(5)
    if name == "layer_norm":
        k = rng.randrange(0, nd + 1) if nd else 0
        ns = list(shp[nd - k:])
        if rng.random() < 0.1:
            ns = [s + 1 for s in ns] or [2]
        form = rng.choice(["list", "tuple", "int", "size"])
        aff = rng.choice(["wb", "w", "b", "none"])
        eps = maybe(rng, rng.choice([1e-5, 0.0, 1.0]), 0.3)
        pdt = rng.choice(["same", "same", "float32", "float64"])

        def call(lib, x):
            shape_ = tuple(ns) if form == "tuple" else lib.Size(ns) if form == "size" else \
                (ns[0] if form == "int" and len(ns) == 1 else ns)
            n = int(np.prod(ns)) if ns else 1
            dt = x.dtype if pdt == "same" else getattr(lib, pdt)
            w = _param(lib, n, seed, dt, grad).reshape(ns) if "w" in aff else None
            b = _param(lib, n, seed + 1, dt, grad).reshape(ns) if "b" in aff else None
            return lib.nn.functional.layer_norm(x, shape_, w, b, **kw(eps=eps))
        return f"layer_norm({ns}, {form}, {aff}, eps={eps}, pdt={pdt})", call
    if name == "rms_norm":
        k = rng.randrange(0, nd + 1) if nd else 0
        ns = list(shp[nd - k:])
        if rng.random() < 0.1:
            ns = [s + 1 for s in ns] or [2]
        aff = rng.random() < 0.5
        eps = maybe(rng, rng.choice([None, 1e-5, 0.0, 1.0]), 0.5)

        def call(lib, x):
            n = int(np.prod(ns)) if ns else 1
            w = _param(lib, n, seed, x.dtype, grad).reshape(ns) if aff else None
            return lib.nn.functional.rms_norm(x, ns, w, **kw(eps=eps))
        return f"rms_norm({ns}, w={aff}, eps={eps})", call
    if name == "group_norm":
        c = shp[1] if nd >= 2 else 1
        g = rng.choice([1, c, 2, 3]) or 1
        aff = rng.random() < 0.6
        eps = maybe(rng, rng.choice([1e-5, 0.1]), 0.3)

        def call(lib, x):
            w = _param(lib, c, seed, x.dtype, grad) if aff else None
            b = _param(lib, c, seed + 2, x.dtype, grad) if aff else None
            return lib.nn.functional.group_norm(x, g, w, b, **kw(eps=eps))
        return f"group_norm(g={g}, aff={aff}, eps={eps})", call
    if name in ("instance_norm", "batch_norm"):
        c = shp[1] if nd >= 2 else (shp[0] if nd else 1)
        running = rng.random() < 0.6
        aff = rng.random() < 0.5
        training = rng.random() < 0.5
        momentum = maybe(rng, rng.choice([0.1, None, 0.5]), 0.5)
        eps = maybe(rng, rng.choice([1e-5, 0.1]), 0.3)
        uis = maybe(rng, rng.random() < 0.5, 0.5)

        def call(lib, x):
            rm = lib.zeros(c, dtype=lib.float32 if x.dtype.itemsize < 4 else x.dtype) \
                if running else None
            rv = lib.ones(c, dtype=rm.dtype) if running else None
            w = _param(lib, c, seed, x.dtype, grad) if aff else None
            b = _param(lib, c, seed + 2, x.dtype, grad) if aff else None
            if name == "batch_norm":
                out = lib.nn.functional.batch_norm(
                    x, rm, rv, w, b, training, **kw(momentum=momentum, eps=eps))
            else:
                out = lib.nn.functional.instance_norm(
                    x, rm, rv, w, b, **kw(use_input_stats=uis, momentum=momentum, eps=eps))
            return (out, rm, rv) if running else out
        return f"{name}(running={running}, aff={aff}, training={training}, " \
            f"momentum={momentum}, eps={eps}, uis={uis})", call
    if name == "local_response_norm":
        size = rng.choice([1, 2, 3, 5])
        extra = kw(alpha=maybe(rng, rng.choice([1e-4, 0.5]), 0.4),
                   beta=maybe(rng, rng.choice([0.75, 1.0]), 0.4),
                   k=maybe(rng, rng.choice([1.0, 2.0]), 0.4))
        return f"local_response_norm({size}, {extra})", lambda lib, x: \
            lib.nn.functional.local_response_norm(x, size, **extra)
    if name == "normalize":
        p = maybe(rng, rng.choice([2.0, 1, 3, 0.5, float("inf"), 0]), 0.6)
        d = maybe(rng, _dim(rng, nd), 0.7)
        eps = maybe(rng, rng.choice([1e-12, 0.0, 10.0]), 0.3)
        return f"normalize(p={p}, dim={d}, eps={eps})", lambda lib, x: \
            lib.nn.functional.normalize(x, **kw(p=p, dim=d, eps=eps))
    if name in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                "feature_alpha_dropout"):
        p = maybe(rng, rng.choice([0.0, 1.0, 0.5, 1.5, -0.1]), 0.8)
        tr = maybe(rng, rng.random() < 0.6, 0.7)
        inplace = maybe(rng, rng.random() < 0.4, 0.6)
        return f"{name}(p={p}, training={tr}, inplace={inplace})", _inplace_call(
            name, kw(p=p, training=tr, inplace=inplace))
    if name == "embedding":
        return _embedding(rng, sp, seed)
    if name == "embedding_bag":
        return _embedding_bag(rng, sp, seed)
    if name == "one_hot":
        nc = maybe(rng, rng.choice([-1, 0, 3, 5]), 0.7)
        vals = rng.choice([[0, 2, 1], [[0, 1], [3, 2]], [], [-1, 2], 4, [7]])
        idt = rng.choice(["int64", "int64", "int32", "float32"])

        def call(lib, x):
            t = lib.tensor(vals, dtype=getattr(lib, idt))
            return lib.nn.functional.one_hot(t, **kw(num_classes=nc))
        return f"one_hot({vals}, {idt}, nc={nc})", call
    if name == "pad":
        mode = maybe(rng, rng.choice(["constant", "reflect", "replicate", "circular"]), 0.8)
        npad = rng.choice([1, 2, 2, 4, 4, 6, 3])
        pads = [rng.choice([0, 1, 2, -1, 3]) for _ in range(npad)]
        value = maybe(rng, rng.choice([0.0, 1.5, None]), 0.3) if mode in ("constant", SKIP) \
            else SKIP
        form = rng.random() < 0.8
        return f"pad({pads}, mode={mode}, value={value}, tuple={form})", lambda lib, x: \
            lib.nn.functional.pad(x, tuple(pads) if form else pads, **kw(mode=mode, value=value))
    return _activation(rng, sp, name)


def _inplace_call(name, kwargs):
    def call(lib, x):
        fn = getattr(lib.nn.functional, name)
        if kwargs.get("inplace") is True:
            x = x.clone() if rng_clone(x) else x
            v0 = x._version
            out = fn(x, **kwargs)
            return out, out is x, x._version - v0
        return fn(x, **kwargs)
    return call


def rng_clone(x):
    # a leaf that requires grad stays a leaf (an error there); anything else is cloned so the
    # input stays unchanged for the gradient
    return not (x.is_leaf and x.requires_grad)


def _activation(rng, sp, name):  # noqa: C901 - one branch per function
    dtype, shp, _, _, _ = sp
    nd = len(shp)
    args = {}
    if name in ("elu", "celu"):
        args = kw(alpha=maybe(rng, rng.choice([1.0, 0.5, 2.0, 0.0]), 0.6))
    elif name == "hardtanh":
        args = kw(min_val=maybe(rng, rng.choice([-1.0, -2.0, 0.5, 2]), 0.6),
                  max_val=maybe(rng, rng.choice([1.0, 2.0, 0.0, -2]), 0.6))
    elif name == "threshold":
        args = dict(threshold=rng.choice([0.0, 0.5, -1]), value=rng.choice([0.0, -3.0, 2]))
    elif name == "softplus":
        args = kw(beta=maybe(rng, rng.choice([1.0, 2.0, 0.5, -1.0]), 0.6),
                  threshold=maybe(rng, rng.choice([20.0, 1.0, 0.0]), 0.6))
    elif name == "leaky_relu":
        args = kw(negative_slope=maybe(rng, rng.choice([0.01, 0.2, -0.5, 0]), 0.6))
    elif name == "rrelu":
        args = kw(lower=maybe(rng, rng.choice([0.125, 0.1, 0.3]), 0.5),
                  upper=maybe(rng, rng.choice([1 / 3, 0.2, 0.05]), 0.5),
                  training=maybe(rng, rng.random() < 0.3, 0.7))
    elif name in ("hardshrink", "softshrink"):
        args = kw(lambd=maybe(rng, rng.choice([0.5, 0.0, 1.0, -0.5]), 0.6))
    elif name in ("softmin", "softmax", "log_softmax"):
        args = kw(dim=maybe(rng, _dim(rng, nd), 0.85),
                  dtype=maybe(rng, rng.choice(["float32", "float64", "float16", "int64"]), 0.3))
    elif name == "glu":
        args = kw(dim=maybe(rng, _dim(rng, nd), 0.7))
    elif name == "gumbel_softmax":
        args = kw(tau=maybe(rng, rng.choice([1.0, 0.5]), 0.4),
                  hard=maybe(rng, rng.random() < 0.5, 0.6), dim=maybe(rng, _dim(rng, nd), 0.5))
    elif name == "gelu":
        args = kw(approximate=maybe(rng, rng.choice(["none", "tanh", "bad"]), 0.6))
    elif name == "pdist" and 0 in shp:
        name = "relu"       # (PyTorch's pdist of an empty strided input crashes the process)
    elif name == "pdist":
        args = kw(p=maybe(rng, rng.choice([2.0, 1.0, 0.0, 3.0, float("inf"), -1.0]), 0.6))
    elif name in ("cdist", "pairwise_distance", "cosine_similarity", "triplet_margin_loss",
                  "triplet_margin_with_distance_loss"):
        return _distance(rng, sp, name)
    if name in INPLACE and rng.random() < 0.35:
        args["inplace"] = rng.random() < 0.7
    if name == "softmin" or name == "softmax" or name == "log_softmax":
        dt = args.pop("dtype", SKIP)
        label = f"{name}({args}, dtype={dt})"
        return label, lambda lib, x: getattr(lib.nn.functional, name)(
            x, **args, **kw(dtype=SKIP if dt is SKIP else getattr(lib, dt)))
    return f"{name}({args})", _inplace_call(name, args)


def _distance(rng, sp, name):
    dtype, shp, _, _, _ = sp
    # a second operand: same shape, broadcast from a smaller one, or a different last dim
    kind = rng.choice(["same", "same", "bcast", "last", "row"])
    if kind == "bcast" and shp:
        oshape = (1,) + tuple(shp[1:])
    elif kind == "last" and shp:
        oshape = tuple(shp[:-1]) + (shp[-1] + 1,)
    elif kind == "row" and len(shp) >= 2:
        oshape = tuple(shp[:-2]) + (rng.choice([1, 2, 3]), shp[-1])
    else:
        oshape = shp
    other = np.sin(np.arange(int(np.prod(oshape))) * 1.3).reshape(oshape)
    args = {}
    if name == "cdist":
        args = kw(p=maybe(rng, rng.choice([2.0, 1.0, 0.0, 3.0, float("inf"), -1.0]), 0.6),
                  compute_mode=maybe(rng, rng.choice([
                      "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                      "donot_use_mm_for_euclid_dist", "bad"]), 0.4))
    elif name == "pairwise_distance":
        args = kw(p=maybe(rng, rng.choice([2.0, 1.0, 0.0, 3.0, float("inf")]), 0.6),
                  eps=maybe(rng, rng.choice([1e-6, 0.0, 1.0]), 0.3),
                  keepdim=maybe(rng, rng.random() < 0.5, 0.6))
    elif name == "cosine_similarity":
        args = kw(dim=maybe(rng, _dim(rng, len(shp)), 0.7),
                  eps=maybe(rng, rng.choice([1e-8, 0.0, 10.0]), 0.3))
    elif name == "triplet_margin_loss":
        args = kw(margin=maybe(rng, rng.choice([1.0, 0.0, 2.0]), 0.5),
                  p=maybe(rng, rng.choice([2.0, 1.0, 3.0]), 0.5),
                  swap=maybe(rng, rng.random() < 0.5, 0.5),
                  reduction=maybe(rng, rng.choice(["mean", "sum", "none"]), 0.5))
    else:
        args = kw(margin=maybe(rng, rng.choice([1.0, 0.0]), 0.5),
                  swap=maybe(rng, rng.random() < 0.5, 0.5),
                  reduction=maybe(rng, rng.choice(["mean", "sum", "none"]), 0.5))

    def call(lib, x):
        y = lib.tensor(other).to(x.dtype)
        fn = getattr(lib.nn.functional, name)
        if name.startswith("triplet"):
            return fn(x, y, y * 0.5 + 0.25, **args)
        return fn(x, y, **args)
    return f"{name}(other={oshape}, {args})", call


def _embedding(rng, sp, seed):
    n, d = rng.choice([(5, 3), (4, 2), (1, 1), (6, 4)])
    idx = rng.choice([[0, 2, 2, 4], [[1, 0], [3, 3]], [], [5], [-1], 3, [[0]]])
    pidx = maybe(rng, rng.choice([0, 2, -1, -n, n, -n - 1]), 0.4)
    max_norm = maybe(rng, rng.choice([1.0, 0.5, None]), 0.3)
    norm_type = maybe(rng, rng.choice([2.0, 1.0, 3.0]), 0.3)
    sgf = maybe(rng, rng.random() < 0.5, 0.3)
    sparse = maybe(rng, rng.random() < 0.5, 0.3)
    idt = rng.choice(["int64", "int64", "int32", "float32"])
    wdt = rng.choice(["float64", "float64", "float32"])

    def call(lib, x):
        w = lib.tensor(np.cos(np.arange(n * d) * 0.7 + seed).reshape(n, d) * 2,
                       dtype=getattr(lib, wdt)).requires_grad_(True)
        i = lib.tensor(idx, dtype=getattr(lib, idt))
        out = lib.nn.functional.embedding(i, w, **kw(
            padding_idx=pidx, max_norm=max_norm, norm_type=norm_type,
            scale_grad_by_freq=sgf, sparse=sparse))
        res = [out, w.detach().clone()]
        if out.requires_grad and out.numel():
            (out * lib.arange(out.numel()).reshape(out.shape).to(out.dtype)).sum().backward()
            g = w.grad
            res.append(g.to_dense() if g.is_sparse else g)
            res.append(g.is_sparse)
        return tuple(res)
    return f"embedding(n={n}, d={d}, idx={idx} {idt}, w={wdt}, pidx={pidx}, max_norm=" \
        f"{max_norm}, norm_type={norm_type}, sgf={sgf}, sparse={sparse})", call


def _embedding_bag(rng, sp, seed):
    n, d = rng.choice([(5, 3), (4, 2), (6, 4)])
    two_d = rng.random() < 0.35
    idx = [[0, 2], [1, 1], [4, 3]] if two_d else rng.choice([[0, 2, 2, 4, 1], [3], [], [1, 0]])
    offsets = SKIP if two_d and rng.random() < 0.8 else rng.choice(
        [[0], [0, 2], [0, 2, 2], [1, 2], [0, 9]])
    mode = maybe(rng, rng.choice(["mean", "sum", "max", "bad"]), 0.8)
    psw = rng.random() < 0.3
    ilo = maybe(rng, rng.random() < 0.4, 0.5)
    if offsets in ([0],) and ilo is True:
        ilo = False     # (PyTorch crashes there: no bags, one offset)
    pidx = maybe(rng, rng.choice([0, 2, -1, n]), 0.3)
    max_norm = maybe(rng, rng.choice([1.0, None]), 0.2)
    idt = rng.choice(["int64", "int64", "int32"])

    def call(lib, x):
        w = lib.tensor(np.cos(np.arange(n * d) * 0.7 + seed).reshape(n, d) * 2,
                       dtype=lib.float64).requires_grad_(True)
        i = lib.tensor(idx, dtype=getattr(lib, idt))
        o = SKIP if offsets is SKIP else lib.tensor(offsets, dtype=getattr(lib, idt))
        ps = lib.linspace(0.5, 2, i.numel(), dtype=lib.float64).reshape(i.shape) \
            if psw else SKIP
        out = lib.nn.functional.embedding_bag(i, w, **kw(
            offsets=o, mode=mode, per_sample_weights=ps, include_last_offset=ilo,
            padding_idx=pidx, max_norm=max_norm))
        res = [out]
        if out.requires_grad and out.numel():
            (out * lib.arange(out.numel()).reshape(out.shape).to(out.dtype)).sum().backward()
            res.append(w.grad)
        return tuple(res)
    return f"embedding_bag(n={n}, idx={idx} {idt}, offsets={offsets}, mode={mode}, psw={psw}" \
        f", ilo={ilo}, pidx={pidx}, max_norm={max_norm})", call
