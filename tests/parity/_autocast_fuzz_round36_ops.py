"""The op table of round 36's CPU autocast fuzzer (test_parity_autocast_fuzz_round36.py).

``build_op(rng)`` picks one call (an op of the whole float registry: products, convolutions,
recurrent cells, norms, losses, reductions, scans, pointwise and linear-algebra ops, padding,
pooling, concatenation, in-place and ``out=`` forms) with operands of random dtypes (float32,
float64, bfloat16, float16, int64, bool, 0-d tensors and Python numbers), and returns
``(label, fn)``: ``fn(lib, mk)`` makes the call in ``lib`` (ember or torch), with ``mk(shape,
dtype, grad, kind)`` making its inputs, so one program runs in both libraries.
"""

import numpy as np

FL = ["float32", "float32", "float32", "float64", "bfloat16", "float16"]


def make_tensor(lib, rng_np, shape, dt, grad=False, kind="normal"):
    if dt == "int64":
        a = rng_np.integers(0, 3, shape)
        return lib.tensor(a, dtype=lib.int64)
    if dt == "bool":
        return lib.tensor(rng_np.random(shape) < 0.5)
    a = rng_np.standard_normal(shape)
    if kind == "pos":
        a = np.abs(a) + 0.1
    if kind == "prob":
        a = rng_np.random(shape) * 0.8 + 0.1
    t = lib.tensor(a).to(getattr(lib, dt))
    if grad:
        t.requires_grad_(True)
    return t


def F(lib):
    return lib.nn.functional


def build_op(rng):
    """Returns (label, fn(lib, mk) -> output). mk(shape, dt=None, kind=...) makes an input."""
    def d():
        return rng.choice(FL)

    name = rng.choice(
        [
            "mm",
            "matmul",
            "bmm",
            "addmm",
            "baddbmm",
            "addbmm",
            "linear",
            "conv1d",
            "conv2d",
            "conv3d",
            "conv_transpose1d",
            "conv_transpose2d",
            "prelu",
            "softmax",
            "log_softmax",
            "layer_norm",
            "group_norm",
            "batch_norm",
            "mse_loss",
            "l1_loss",
            "cross_entropy",
            "nll_loss",
            "bce_logits",
            "bce",
            "sum",
            "mean",
            "prod",
            "cumsum",
            "pow",
            "exp",
            "log",
            "cat",
            "stack",
            "index_put",
            "where",
            "addcmul",
            "addcdiv",
            "scatter_add",
            "lstm_cell",
            "gru_cell",
            "rnn_tanh_cell",
            "add",
            "mul",
            "sub",
            "div",
            "relu",
            "gelu",
            "sigmoid",
            "tanh",
            "norm",
            "dist",
            "cdist",
            "kl_div",
            "smooth_l1",
            "huber",
            "max",
            "mv",
            "dot",
            "addmv",
            "addr",
            "einsum",
            "tensordot",
            "sdpa",
            "softplus",
            "logsumexp",
            "atan2",
            "cross",
            "index_copy",
            "layer_norm_w",
            "rms_norm",
            "cosine_similarity",
            "normalize",
            "interp",
            "avg_pool2d",
            "max_pool2d",
            "adaptive_avg_pool2d",
            "embedding",
            "dropout",
            "silu",
            "clamp",
            "var",
            "std",
            "mean_dim",
            "topk",
            "sort",
            "bilinear",
            "pdist",
            "triplet",
            "margin",
            "poisson",
            "matmul_1d",
            "chain_matmul",
            "outer",
            "vdot",
            "inner",
            "lerp",
            "sum_dtype",
            "to",
            "baddbmm_s",
            "addmm_s",
            "linear_nobias",
            "fill",
            "masked_fill",
            "rsqrt",
            "reciprocal",
            "acos",
            "cosh",
            "erfinv",
            "expm1",
            "log1p",
            "sinh",
            "tan",
            "cumprod",
            "renorm",
            "softmin",
            "frac",
            "floor_divide",
            "remainder",
        ]
        + EXTRA_NAMES
    )
    if name in EXTRA_NAMES:
        return extra_op(name, rng, d, F)
    if name in ("mm", "matmul"):
        a, b = d(), d()
        return f"{name}({a},{b})", lambda lib, mk: getattr(lib, name)(mk((3, 4), a), mk((4, 5), b))
    if name == "matmul_1d":
        a, b = d(), d()
        sa, sb = rng.choice(
            [((4,), (4,)), ((4,), (4, 2)), ((2, 3, 4), (4,)), ((2, 3, 4), (2, 4, 5))]
        )
        return f"matmul({a}{sa},{b}{sb})", lambda lib, mk: lib.matmul(mk(sa, a), mk(sb, b))
    if name == "bmm":
        a, b = d(), d()
        return f"bmm({a},{b})", lambda lib, mk: lib.bmm(mk((2, 3, 4), a), mk((2, 4, 5), b))
    if name in ("addmm", "addmm_s"):
        a, b, c = d(), d(), d()
        bs = rng.choice([(3, 5), (5,), (1, 5), ()])
        kw = (
            dict(beta=rng.choice([1, 0.5, 0]), alpha=rng.choice([1, 2.0]))
            if name == "addmm_s"
            else {}
        )
        return f"addmm({c}{bs},{a},{b},{kw})", lambda lib, mk: lib.addmm(
            mk(bs, c), mk((3, 4), a), mk((4, 5), b), **kw
        )
    if name in ("baddbmm", "baddbmm_s"):
        a, b, c = d(), d(), d()
        kw = dict(beta=0.5, alpha=2) if name == "baddbmm_s" else {}
        return f"baddbmm({c},{a},{b},{kw})", lambda lib, mk: lib.baddbmm(
            mk((2, 3, 5), c), mk((2, 3, 4), a), mk((2, 4, 5), b), **kw
        )
    if name == "addbmm":
        a, b, c = d(), d(), d()
        return f"addbmm({c},{a},{b})", lambda lib, mk: lib.addbmm(
            mk((3, 5), c), mk((2, 3, 4), a), mk((2, 4, 5), b)
        )
    if name in ("linear", "linear_nobias"):
        a, b, c = d(), d(), d()
        sh = rng.choice([(3, 4), (4,), (2, 3, 4)])
        nb = name == "linear_nobias"
        return f"linear({a}{sh},{b},{None if nb else c})", lambda lib, mk: F(lib).linear(
            mk(sh, a), mk((5, 4), b), None if nb else mk((5,), c)
        )
    if name.startswith("conv") and not name.startswith("conv_t"):
        n = int(name[4])
        a, b, c = d(), d(), d()
        sp = (5,) * n
        bias = rng.random() < 0.6
        return f"{name}({a},{b},{c if bias else None})", lambda lib, mk: getattr(F(lib), name)(
            mk((1, 2) + sp, a), mk((3, 2) + (3,) * n, b), mk((3,), c) if bias else None, padding=1
        )
    if name.startswith("conv_transpose"):
        n = int(name[-2])
        a, b, c = d(), d(), d()
        sp = (4,) * n
        return f"{name}({a},{b},{c})", lambda lib, mk: getattr(F(lib), name)(
            mk((1, 2) + sp, a), mk((2, 3) + (2,) * n, b), mk((3,), c), stride=2
        )
    if name == "prelu":
        a, b = d(), d()
        return f"prelu({a},{b})", lambda lib, mk: F(lib).prelu(mk((2, 3, 4), a), mk((3,), b))
    if name in ("softmax", "log_softmax", "softmin"):
        a = d()
        dt = rng.choice([None, None, "float64", "float32", "float16"])
        dim = rng.choice([0, 1, -1])
        return f"{name}({a},dim={dim},dtype={dt})", lambda lib, mk: getattr(F(lib), name)(
            mk((3, 4), a), dim=dim, **({} if dt is None else {"dtype": getattr(lib, dt)})
        )
    if name in ("layer_norm", "layer_norm_w"):
        a, b, c = d(), d(), d()
        w = name == "layer_norm_w"
        return f"layer_norm({a},{b if w else None},{c if w else None})", lambda lib, mk: F(
            lib
        ).layer_norm(mk((3, 4), a), (4,), mk((4,), b) if w else None, mk((4,), c) if w else None)
    if name == "rms_norm":
        a, b = d(), d()
        return f"rms_norm({a},{b})", lambda lib, mk: F(lib).rms_norm(
            mk((3, 4), a), (4,), mk((4,), b)
        )
    if name == "group_norm":
        a, b, c = d(), d(), d()
        return f"group_norm({a},{b},{c})", lambda lib, mk: F(lib).group_norm(
            mk((2, 4, 3), a), 2, mk((4,), b), mk((4,), c)
        )
    if name == "batch_norm":
        a, b, c = d(), d(), d()
        tr = rng.random() < 0.5
        return f"batch_norm({a},{b},{c},training={tr})", lambda lib, mk: F(lib).batch_norm(
            mk((3, 4), a),
            mk((4,), "float32", False),
            mk((4,), "float32", False, kind="pos"),
            mk((4,), b),
            mk((4,), c),
            training=tr,
        )
    if name in ("mse_loss", "l1_loss", "smooth_l1", "huber", "kl_div", "poisson"):
        a, b = d(), d()
        fn = {
            "smooth_l1": "smooth_l1_loss",
            "huber": "huber_loss",
            "poisson": "poisson_nll_loss",
        }.get(name, name)
        red = rng.choice(["mean", "sum", "none"])
        return f"{fn}({a},{b},{red})", lambda lib, mk: getattr(F(lib), fn)(
            mk((3, 4), a), mk((3, 4), b), reduction=red
        )
    if name == "cross_entropy":
        a = d()
        prob = rng.random() < 0.3
        b = d()
        return f"cross_entropy({a},prob={prob}{b})", lambda lib, mk: F(lib).cross_entropy(
            mk((3, 4), a), mk((3, 4), b, kind="prob") if prob else lib.tensor([0, 3, 1])
        )
    if name == "nll_loss":
        a = d()
        w = rng.random() < 0.4
        b = d()
        return f"nll_loss({a},w={w}{b})", lambda lib, mk: F(lib).nll_loss(
            mk((3, 4), a), lib.tensor([0, 3, 1]), weight=mk((4,), b, kind="pos") if w else None
        )
    if name == "bce_logits":
        a, b = d(), d()
        pw = rng.random() < 0.3
        c = d()
        return f"bce_logits({a},{b},pw={pw}{c})", lambda lib, mk: F(
            lib
        ).binary_cross_entropy_with_logits(
            mk((3, 4), a),
            mk((3, 4), b, kind="prob"),
            pos_weight=mk((4,), c, kind="pos") if pw else None,
        )
    if name == "bce":
        a, b = d(), d()
        return f"bce({a},{b})", lambda lib, mk: F(lib).binary_cross_entropy(
            mk((3, 4), a, kind="prob"), mk((3, 4), b, kind="prob")
        )
    if name in ("sum", "mean", "prod", "logsumexp", "var", "std", "mean_dim"):
        a = d()
        if name == "logsumexp":
            return f"logsumexp({a})", lambda lib, mk: lib.logsumexp(mk((3, 4), a), 1)
        if name == "mean_dim":
            return f"mean({a},1)", lambda lib, mk: lib.mean(mk((3, 4), a), 1)
        return f"{name}({a})", lambda lib, mk: getattr(lib, name)(mk((3, 4), a))
    if name == "sum_dtype":
        a = d()
        dt = rng.choice(["float64", "float16", "bfloat16", "float32"])
        return f"sum({a},dtype={dt})", lambda lib, mk: lib.sum(
            mk((3, 4), a), dtype=getattr(lib, dt)
        )
    if name in ("cumsum", "cumprod"):
        a = d()
        return f"{name}({a})", lambda lib, mk: getattr(lib, name)(mk((3, 4), a), 1)
    if name == "pow":
        a = d()
        form = rng.choice(["tt", "ts", "st", "t0"])
        b = d()
        if form == "tt":
            return f"pow({a},{b})", lambda lib, mk: lib.pow(
                mk((3, 4), a, kind="pos"), mk((3, 4), b)
            )
        if form == "ts":
            return f"pow({a},2.5)", lambda lib, mk: lib.pow(mk((3, 4), a, kind="pos"), 2.5)
        if form == "st":
            return f"pow(2,{a})", lambda lib, mk: lib.pow(2, mk((3, 4), a))
        return f"pow({a},0d {b})", lambda lib, mk: lib.pow(mk((3, 4), a, kind="pos"), mk((), b))
    if name in (
        "exp",
        "log",
        "relu",
        "gelu",
        "sigmoid",
        "tanh",
        "silu",
        "softplus",
        "rsqrt",
        "reciprocal",
        "acos",
        "cosh",
        "erfinv",
        "expm1",
        "log1p",
        "sinh",
        "tan",
        "frac",
    ):
        a = d()
        kind = (
            "prob"
            if name in ("acos", "erfinv")
            else "pos"
            if name in ("log", "rsqrt")
            else "normal"
        )
        if name in ("gelu", "silu", "softplus"):
            return f"{name}({a})", lambda lib, mk: getattr(F(lib), name)(mk((3, 4), a, kind=kind))
        return f"{name}({a})", lambda lib, mk: getattr(lib, name)(mk((3, 4), a, kind=kind))
    if name in ("cat", "stack"):
        dts = [rng.choice(FL + ["int64", "bool"]) for _ in range(rng.randint(1, 3))]
        return f"{name}({dts})", lambda lib, mk: getattr(lib, name)([mk((2, 3), t) for t in dts])
    if name == "index_put":
        a, b = d(), d()
        acc = rng.random() < 0.5
        return f"index_put({a},{b},acc={acc})", lambda lib, mk: lib.index_put(
            mk((4, 3), a), (lib.tensor([0, 2]),), mk((2, 3), b), accumulate=acc
        )
    if name == "index_copy":
        a, b = d(), d()
        return f"index_copy({a},{b})", lambda lib, mk: lib.index_copy(
            mk((4, 3), a), 0, lib.tensor([0, 2]), mk((2, 3), b)
        )
    if name == "where":
        a, b = rng.choice(FL + ["scalar"]), rng.choice(FL + ["scalar"])

        def f(lib, mk):
            x = 1.5 if a == "scalar" else mk((3, 4), a)
            y = -2 if b == "scalar" else mk((3, 4), b)
            return lib.where(mk((3, 4), "bool"), x, y)

        return f"where({a},{b})", f
    if name in ("addcmul", "addcdiv"):
        a, b, c = d(), d(), d()
        return f"{name}({a},{b},{c})", lambda lib, mk: getattr(lib, name)(
            mk((3, 4), a), mk((3, 4), b), mk((3, 4), c, kind="pos"), value=0.5
        )
    if name == "scatter_add":
        a, b = d(), d()
        return f"scatter_add({a},{b})", lambda lib, mk: lib.scatter_add(
            mk((3, 4), a), 1, mk((3, 2), "int64"), mk((3, 2), b)
        )
    if name in ("lstm_cell", "gru_cell", "rnn_tanh_cell"):
        a, b = d(), d()
        bias = rng.random() < 0.7

        def f(lib, mk):
            cls = {
                "lstm_cell": lib.nn.LSTMCell,
                "gru_cell": lib.nn.GRUCell,
                "rnn_tanh_cell": lib.nn.RNNCell,
            }[name]
            lib.manual_seed(0)
            m = cls(3, 2, bias=bias)
            with lib.no_grad():
                for p in m.parameters():
                    p.copy_(mk(tuple(p.shape), "float64", False))
            m = m.to(getattr(lib, b))
            x = mk((2, 3), a)
            return m(x)

        return f"{name}({a},{b},bias={bias})", f
    if name in ("add", "mul", "sub", "div", "atan2", "floor_divide", "remainder", "lerp"):
        a = rng.choice(FL + ["int64", "scalar", "0d"])
        b = rng.choice(FL + ["int64", "scalar", "0d"])

        def f(lib, mk):
            def g(t):
                if t == "scalar":
                    return 1.5
                if t == "0d":
                    return mk((), "float64")
                return mk((3, 4), t)

            x, y = g(a), g(b)
            if not isinstance(x, lib.Tensor):
                x = mk((3, 4), "float32")
            if name == "lerp":
                return lib.lerp(x, g(b) if b != "int64" else 0.3, 0.3)
            return getattr(lib, name)(x, y)

        return f"{name}({a},{b})", f
    if name in ("norm", "dist"):
        a, b = d(), d()
        if name == "norm":
            p = rng.choice([2, 1, "fro"])
            return f"norm({a},{p})", lambda lib, mk: lib.norm(mk((3, 4), a), p)
        return f"dist({a},{b})", lambda lib, mk: lib.dist(mk((3, 4), a), mk((3, 4), b))
    if name == "cdist":
        a, b = d(), d()
        return f"cdist({a},{b})", lambda lib, mk: lib.cdist(mk((3, 4), a), mk((2, 4), b))
    if name == "pdist":
        a = d()
        return f"pdist({a})", lambda lib, mk: F(lib).pdist(mk((3, 4), a))
    if name == "max":
        a = d()
        dim = rng.random() < 0.5
        return (
            f"max({a},dim={dim})",
            lambda lib, mk: lib.max(mk((3, 4), a), 1) if dim else lib.max(mk((3, 4), a)),
        )
    if name in ("topk", "sort"):
        a = d()
        return (
            f"{name}({a})",
            lambda lib, mk: (
                lib.topk(mk((3, 4), a), 2) if name == "topk" else lib.sort(mk((3, 4), a))
            ),
        )
    if name in ("mv", "dot", "addmv", "addr", "outer", "vdot", "inner"):
        a, b, c = d(), d(), d()

        def f(lib, mk):
            if name == "mv":
                return lib.mv(mk((3, 4), a), mk((4,), b))
            if name in ("dot", "vdot"):
                return getattr(lib, name)(mk((4,), a), mk((4,), b))
            if name == "addmv":
                return lib.addmv(mk((3,), c), mk((3, 4), a), mk((4,), b))
            if name == "addr":
                return lib.addr(mk((3, 4), c), mk((3,), a), mk((4,), b))
            if name == "inner":
                return lib.inner(mk((3, 4), a), mk((2, 4), b))
            return lib.outer(mk((3,), a), mk((4,), b))

        return f"{name}({a},{b},{c})", f
    if name == "chain_matmul":
        a, b = d(), d()
        return f"linalg.multi_dot({a},{b})", lambda lib, mk: lib.linalg.multi_dot(
            [mk((3, 4), a), mk((4, 2), b), mk((2, 2), a)]
        )
    if name == "einsum":
        a, b = d(), d()
        return f"einsum({a},{b})", lambda lib, mk: lib.einsum(
            "ij,jk->ik", mk((3, 4), a), mk((4, 5), b)
        )
    if name == "tensordot":
        a, b = d(), d()
        return f"tensordot({a},{b})", lambda lib, mk: lib.tensordot(mk((3, 4), a), mk((4, 5), b), 1)
    if name == "sdpa":
        a, b, c = d(), d(), d()
        return f"sdpa({a},{b},{c})", lambda lib, mk: F(lib).scaled_dot_product_attention(
            mk((1, 2, 3, 4), a), mk((1, 2, 3, 4), b), mk((1, 2, 3, 4), c)
        )
    if name == "cross":
        a, b = d(), d()
        return f"cross({a},{b})", lambda lib, mk: lib.linalg.cross(mk((2, 3), a), mk((2, 3), b))
    if name in ("cosine_similarity", "normalize"):
        a, b = d(), d()
        if name == "normalize":
            return f"normalize({a})", lambda lib, mk: F(lib).normalize(mk((3, 4), a))
        return f"cosine_similarity({a},{b})", lambda lib, mk: F(lib).cosine_similarity(
            mk((3, 4), a), mk((3, 4), b)
        )
    if name == "interp":
        a = d()
        mode = rng.choice(["nearest", "bilinear", "bicubic", "area"])
        return f"interpolate({a},{mode})", lambda lib, mk: F(lib).interpolate(
            mk((1, 2, 3, 3), a), scale_factor=2, mode=mode
        )
    if name in ("avg_pool2d", "max_pool2d", "adaptive_avg_pool2d"):
        a = d()
        arg = 2
        return f"{name}({a})", lambda lib, mk: getattr(F(lib), name)(mk((1, 2, 4, 4), a), arg)
    if name == "embedding":
        a = d()
        return f"embedding({a})", lambda lib, mk: F(lib).embedding(
            lib.tensor([0, 2, 1]), mk((4, 3), a)
        )
    if name == "dropout":
        a = d()
        return f"dropout({a},p=0)", lambda lib, mk: F(lib).dropout(mk((3, 4), a), 0.0)
    if name == "clamp":
        a = d()
        return f"clamp({a})", lambda lib, mk: lib.clamp(mk((3, 4), a), -0.5, 0.5)
    if name == "bilinear":
        a, b, c = d(), d(), d()
        return f"bilinear({a},{b},{c})", lambda lib, mk: F(lib).bilinear(
            mk((2, 3), a), mk((2, 4), b), mk((5, 3, 4), c), mk((5,), c)
        )
    if name == "triplet":
        a, b = d(), d()
        return f"triplet({a},{b})", lambda lib, mk: F(lib).triplet_margin_loss(
            mk((3, 4), a), mk((3, 4), b), mk((3, 4), a)
        )
    if name == "margin":
        a, b = d(), d()
        return f"margin_ranking({a},{b})", lambda lib, mk: F(lib).margin_ranking_loss(
            mk((3,), a), mk((3,), b), lib.tensor([1.0, -1.0, 1.0])
        )
    if name == "to":
        a = d()
        t = rng.choice(FL)
        return f"to({a}->{t})", lambda lib, mk: mk((3, 4), a).to(getattr(lib, t))
    if name == "fill":
        a = d()
        return f"zeros_like+add({a})", lambda lib, mk: lib.zeros_like(mk((3, 4), a)) + mk((3, 4), a)
    if name == "masked_fill":
        a = d()
        return f"masked_fill({a})", lambda lib, mk: mk((3, 4), a).masked_fill(
            mk((3, 4), "bool"), 2.0
        )
    if name == "renorm":
        a = d()
        return f"renorm({a})", lambda lib, mk: lib.renorm(mk((3, 4), a), 2, 0, 1.0)
    raise AssertionError(name)


EXTRA_NAMES = [
    "polar",
    "stft",
    "quantile",
    "trace",
    "fft",
    "rfft",
    "inv",
    "solve",
    "nll2d",
    "max_pool3d",
    "avg_pool3d",
    "adaptive_max_pool3d",
    "pad_reflect",
    "pad_replicate",
    "pad_const",
    "matrix_power",
    "pinv",
    "grid_sample",
    "unfold",
    "embedding_bag",
    "conv_groups",
    "inplace_mul",
    "inplace_addmm",
    "out_mm",
    "chain",
    "cosine_embedding",
    "multilabel",
    "ctc",
    "mv_out",
    "linalg_vecdot",
    "cholesky",
    "eigvalsh",
    "svd",
    "qr",
    "det",
    "slogdet",
    "logdet",
    "vector_norm",
    "matrix_norm",
    "addmm_int",
    "bmm_0",
    "einsum3",
    "conv_tbc",
    "index_put_acc",
    "scatter_reduce",
    "gelu_tanh",
    "nan_to_num",
    "histc",
    "interp_lin",
    "upsample_nearest",
    "hardswish",
    "layer_norm_0",
    "fused_chain",
]


def extra_op(name, rng, d, F):
    a, b, c = d(), d(), d()
    L = f"{name}({a},{b},{c})"

    def mat(lib, mk, dt):
        return mk((3, 3), dt) + lib.eye(3, dtype=getattr(lib, dt)) * 3

    def spd(lib, mk, dt):
        m = mk((3, 3), dt)
        return m @ m.mT + lib.eye(3, dtype=getattr(lib, dt)) * 3

    table = {
        "polar": lambda lib, mk: lib.polar(mk((3,), a, kind="pos"), mk((3,), b)),
        "stft": lambda lib, mk: lib.stft(mk((16,), a), 8, return_complex=True, window=None),
        "quantile": lambda lib, mk: lib.quantile(mk((3, 4), a), 0.3, dim=1),
        "trace": lambda lib, mk: lib.trace(mk((3, 4), a)),
        "fft": lambda lib, mk: lib.fft.fft(mk((8,), a)),
        "rfft": lambda lib, mk: lib.fft.rfft(mk((8,), a)),
        "inv": lambda lib, mk: lib.linalg.inv(mat(lib, mk, a)),
        "solve": lambda lib, mk: lib.linalg.solve(mat(lib, mk, a), mk((3, 2), b)),
        "nll2d": lambda lib, mk: F(lib).nll_loss(
            mk((2, 3, 2, 2), a), lib.zeros(2, 2, 2, dtype=lib.int64)
        ),
        "max_pool3d": lambda lib, mk: F(lib).max_pool3d(mk((1, 1, 4, 4, 4), a), 2),
        "avg_pool3d": lambda lib, mk: F(lib).avg_pool3d(mk((1, 1, 4, 4, 4), a), 2),
        "adaptive_max_pool3d": lambda lib, mk: F(lib).adaptive_max_pool3d(
            mk((1, 1, 4, 4, 4), a), 2
        ),
        "pad_reflect": lambda lib, mk: F(lib).pad(mk((1, 2, 4), a), (1, 1), mode="reflect"),
        "pad_replicate": lambda lib, mk: F(lib).pad(
            mk((1, 2, 4, 4), a), (1, 1, 1, 1), mode="replicate"
        ),
        "pad_const": lambda lib, mk: F(lib).pad(mk((1, 2, 4), a), (1, 1), value=0.5),
        "matrix_power": lambda lib, mk: lib.linalg.matrix_power(mat(lib, mk, a), rng_choice[0]),
        "pinv": lambda lib, mk: lib.linalg.pinv(mk((3, 2), a)),
        "grid_sample": lambda lib, mk: F(lib).grid_sample(
            mk((1, 2, 4, 4), a), mk((1, 3, 3, 2), b) * 0.5, align_corners=False
        ),
        "unfold": lambda lib, mk: F(lib).unfold(mk((1, 2, 4, 4), a), 2),
        "embedding_bag": lambda lib, mk: F(lib).embedding_bag(
            lib.tensor([0, 2, 1, 3]), mk((4, 3), a), lib.tensor([0, 2]), mode="mean"
        ),
        "conv_groups": lambda lib, mk: F(lib).conv2d(
            mk((1, 4, 4, 4), a), mk((4, 2, 3, 3), b), mk((4,), c), groups=2
        ),
        "inplace_mul": lambda lib, mk: (
            mk((3, 4), a, False).mul_(mk((3, 4), b, False)) if True else None
        ),
        "inplace_addmm": lambda lib, mk: mk((3, 5), a, False).addmm_(
            mk((3, 4), b, False), mk((4, 5), c, False)
        ),
        "out_mm": lambda lib, mk: lib.mm(
            mk((3, 4), a, False), mk((4, 5), b, False), out=lib.empty(3, 5, dtype=getattr(lib, c))
        ),
        "chain": lambda lib, mk: (
            lib.softmax(lib.mm(mk((3, 4), a), mk((4, 5), b)), 1) * mk((3, 5), c)
        ),
        "fused_chain": lambda lib, mk: (
            F(lib)
            .layer_norm(F(lib).gelu(F(lib).linear(mk((3, 4), a), mk((5, 4), b), mk((5,), c))), (5,))
            .log_softmax(-1)
            .sum()
        ),
        "cosine_embedding": lambda lib, mk: F(lib).cosine_embedding_loss(
            mk((3, 4), a), mk((3, 4), b), lib.tensor([1, -1, 1])
        ),
        "multilabel": lambda lib, mk: F(lib).multilabel_soft_margin_loss(
            mk((3, 4), a), mk((3, 4), b, kind="prob")
        ),
        "ctc": lambda lib, mk: F(lib).ctc_loss(
            mk((6, 2, 4), a).log_softmax(2),
            lib.tensor([[1, 2], [1, 3]]),
            lib.tensor([6, 6]),
            lib.tensor([2, 2]),
        ),
        "mv_out": lambda lib, mk: lib.mv(mk((3, 4), a), mk((4,), b)),
        "linalg_vecdot": lambda lib, mk: lib.linalg.vecdot(mk((3, 4), a), mk((3, 4), b)),
        "cholesky": lambda lib, mk: lib.linalg.cholesky(spd(lib, mk, a)),
        "eigvalsh": lambda lib, mk: lib.linalg.eigvalsh(spd(lib, mk, a)),
        "svd": lambda lib, mk: lib.linalg.svdvals(mk((3, 2), a)),
        "qr": lambda lib, mk: lib.linalg.qr(mk((3, 2), a))[1].abs(),
        "det": lambda lib, mk: lib.linalg.det(mat(lib, mk, a)),
        "slogdet": lambda lib, mk: lib.linalg.slogdet(mat(lib, mk, a)),
        "logdet": lambda lib, mk: lib.logdet(spd(lib, mk, a)),
        "vector_norm": lambda lib, mk: lib.linalg.vector_norm(mk((3, 4), a)),
        "matrix_norm": lambda lib, mk: lib.linalg.matrix_norm(mk((3, 4), a)),
        "addmm_int": lambda lib, mk: lib.addmm(mk((3, 5), "int64"), mk((3, 4), a), mk((4, 5), b)),
        "bmm_0": lambda lib, mk: lib.bmm(mk((0, 3, 4), a), mk((0, 4, 5), b)),
        "einsum3": lambda lib, mk: lib.einsum(
            "bij,bjk,k->bi", mk((2, 3, 4), a), mk((2, 4, 5), b), mk((5,), c)
        ),
        "conv_tbc": lambda lib, mk: lib.conv_tbc(mk((5, 2, 3), a), mk((3, 3, 4), b), mk((4,), c)),
        "index_put_acc": lambda lib, mk: mk((4, 3), a).index_put(
            (lib.tensor([0, 0]),), mk((2, 3), b), accumulate=True
        ),
        "scatter_reduce": lambda lib, mk: mk((3, 4), a).scatter_reduce(
            1, lib.tensor([[0, 1], [1, 1], [2, 0]]), mk((3, 2), b), "amax"
        ),
        "gelu_tanh": lambda lib, mk: F(lib).gelu(mk((3, 4), a), approximate="tanh"),
        "nan_to_num": lambda lib, mk: lib.nan_to_num(mk((3, 4), a)),
        "histc": lambda lib, mk: lib.histc(mk((3, 4), a, False), 4),
        "interp_lin": lambda lib, mk: F(lib).interpolate(
            mk((1, 2, 4), a), scale_factor=2, mode="linear"
        ),
        "upsample_nearest": lambda lib, mk: F(lib).interpolate(
            mk((1, 2, 4, 4, 4), a), scale_factor=2, mode="trilinear"
        ),
        "hardswish": lambda lib, mk: F(lib).hardswish(mk((3, 4), a)),
        "layer_norm_0": lambda lib, mk: F(lib).layer_norm(mk((0, 4), a), (4,)),
    }
    rng_choice = [rng.choice([2, 3, -1, -2, 0, 1])]
    if name == "matrix_power":
        L += f"n={rng_choice[0]}"
    return L, table[name]
