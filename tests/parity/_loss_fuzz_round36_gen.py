"""Round 36's loss fuzzer: random calls of every loss in nn.functional (or its nn.Module form).

Each generator below draws the inputs (numpy float64 values, a dtype, whether a float64 leaf
needs a gradient) and the arguments of one call; ``build`` turns them into tensors of either
library, so one description runs against ember and torch alike.
"""

import numpy as np

_FLOATS = ["float64", "float64", "float64", "float32", "float32", "float16", "bfloat16"]
_INTS = ["int64", "int64", "int64", "int32", "uint8"]
_RED = ["mean", "mean", "sum", "none", "none", "avg", None]


class _Skip:
    def __repr__(self):
        return "-"


SKIP = _Skip()


def kw(**kwargs):
    return {k: v for k, v in kwargs.items() if v is not SKIP}


def maybe(rng, value, p=0.5):
    return value if rng.random() < p else SKIP


class Arg:
    """A tensor argument: values, dtype, and whether it is a float64 leaf needing a gradient."""

    def __init__(self, raw, dtype, grad=False):
        self.raw, self.dtype, self.grad = np.asarray(raw, dtype=np.float64), dtype, grad

    def make(self, lib):
        if self.dtype in ("float64", "float32", "float16", "bfloat16"):
            t = lib.tensor(self.raw).to(getattr(lib, self.dtype))
        else:
            t = lib.tensor(self.raw.astype(np.int64)).to(getattr(lib, self.dtype))
        return t.requires_grad_(self.grad)

    def __repr__(self):
        return f"{self.dtype}{list(self.raw.shape)}{'g' if self.grad else ''}"


def _fdtype(rng):
    return rng.choice(_FLOATS)


def _grad(rng, dtype):
    return dtype == "float64" and rng.random() < 0.7


def _red(rng, extra=()):
    r = rng.choice(_RED + list(extra))
    if r is None:
        return SKIP
    return r


def _legacy(rng, kwargs):
    """The deprecated size_average/reduce arguments, sometimes."""
    if rng.random() < 0.1:
        kwargs.pop("reduction", None)
        if rng.random() < 0.6:
            kwargs["size_average"] = rng.choice([True, False, None])
        if rng.random() < 0.6:
            kwargs["reduce"] = rng.choice([True, False, None])
    return kwargs


def _shape(rng, nd=None):
    if nd is None:
        nd = rng.choice([0, 1, 1, 2, 2, 3])
    sizes = [rng.choice([1, 2, 3, 4]) for _ in range(nd)]
    if nd and rng.random() < 0.1:
        sizes[0] = 0
    return tuple(sizes)


def _other_shape(rng, shape):
    """The same shape, mostly; else one that broadcasts or does not."""
    r = rng.random()
    if r < 0.85:
        return shape
    if r < 0.93 and shape:
        return shape[1:]
    if r < 0.97:
        return shape + (1,) if rng.random() < 0.5 else (1,) + shape
    return tuple(s + 1 for s in shape) or (2,)


def _values(rng, npr, shape, kind="normal"):
    if kind == "normal":
        a = npr.standard_normal(shape)
    elif kind == "prob":
        a = npr.random(shape)
        if a.size and rng.random() < 0.3:
            a.reshape(-1)[rng.randrange(a.size)] = rng.choice([0.0, 1.0])
    elif kind == "pos":
        a = npr.random(shape) * 3 + 0.05
        if a.size and rng.random() < 0.2:
            a.reshape(-1)[rng.randrange(a.size)] = 0.0
    elif kind == "pm1":
        a = np.where(npr.random(shape) < 0.5, -1.0, 1.0)
        if a.size and rng.random() < 0.08:
            a.reshape(-1)[0] = 0.0
    elif kind == "01":
        a = (npr.random(shape) < 0.5).astype(np.float64)
    if a.size and kind == "normal" and rng.random() < 0.08:
        a.reshape(-1)[rng.randrange(a.size)] = rng.choice([np.nan, np.inf, -np.inf])
    return a


def _float_arg(rng, npr, shape, kind="normal", dtype=None, grad=None):
    dtype = dtype or _fdtype(rng)
    g = _grad(rng, dtype) if grad is None else grad and dtype == "float64"
    return Arg(_values(rng, npr, shape, kind), dtype, g)


# --- the generators: each returns (name, args dict of Arg/values, kwargs, module ctor kwargs) --

def pointwise(rng, npr):
    name = rng.choice(["l1_loss", "mse_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss",
                       "poisson_nll_loss", "kl_div", "binary_cross_entropy",
                       "binary_cross_entropy_with_logits", "hinge_embedding_loss"])
    shape = _shape(rng)
    dtype = _fdtype(rng)
    tdtype = dtype if rng.random() < 0.85 else _fdtype(rng)
    tshape = _other_shape(rng, shape)
    kinds = {"soft_margin_loss": ("normal", "pm1"), "poisson_nll_loss": ("normal", "pos"),
             "kl_div": ("normal", "prob"), "binary_cross_entropy": ("prob", "prob"),
             "binary_cross_entropy_with_logits": ("normal", "prob"),
             "hinge_embedding_loss": ("normal", "pm1")}.get(name, ("normal", "normal"))
    x = _float_arg(rng, npr, shape, kinds[0], dtype)
    t = _float_arg(rng, npr, tshape, kinds[1], tdtype)
    if rng.random() < 0.05:
        t = Arg(t.raw.round(), rng.choice(_INTS))
    extra = {}
    kwargs = kw(reduction=_red(rng, ["batchmean"] if name == "kl_div" else []))
    if name == "smooth_l1_loss":
        kwargs.update(kw(beta=maybe(rng, rng.choice([0.0, 0.5, 1.0, 2.0, -1.0]))))
    elif name == "huber_loss":
        kwargs.update(kw(delta=maybe(rng, rng.choice([0.5, 1.0, 2.0, 0.0, -1.0]))))
    elif name == "poisson_nll_loss":
        kwargs.update(kw(log_input=maybe(rng, rng.random() < 0.5), full=maybe(rng, True),
                         eps=maybe(rng, rng.choice([1e-8, 0.1]))))
        if kwargs.get("log_input") is False:
            x.raw = np.abs(x.raw)
    elif name == "kl_div":
        kwargs.update(kw(log_target=maybe(rng, rng.random() < 0.5)))
        if kwargs.get("log_target"):
            t.raw = np.log(t.raw + 0.01)
    elif name == "hinge_embedding_loss":
        kwargs.update(kw(margin=maybe(rng, rng.choice([0.0, 0.5, 2.0]))))
    elif name in ("binary_cross_entropy", "binary_cross_entropy_with_logits"):
        if rng.random() < 0.4:
            wshape = rng.choice([shape, shape[-1:], (1,) * len(shape), (5,)])
            extra["weight"] = _float_arg(rng, npr, wshape, "pos",
                                         dtype if rng.random() < 0.9 else None)
        if name.endswith("logits") and rng.random() < 0.4:
            pshape = rng.choice([shape[-1:], shape, (1,), (5,)])
            extra["pos_weight"] = _float_arg(rng, npr, pshape, "pos",
                                             dtype if rng.random() < 0.9 else None)
    return name, [x, t], {**extra, **_legacy(rng, kwargs)}


def gaussian(rng, npr):
    shape = _shape(rng, rng.choice([1, 2, 2, 3]))
    dtype = _fdtype(rng)
    x = _float_arg(rng, npr, shape, "normal", dtype)
    t = _float_arg(rng, npr, _other_shape(rng, shape), "normal", dtype)
    vshape = rng.choice([shape, shape, shape[:-1] + (1,), shape[:-1], (7,)])
    v = _float_arg(rng, npr, vshape, "pos", dtype)
    if rng.random() < 0.1:
        v.raw = -v.raw
    kwargs = kw(full=maybe(rng, True), eps=maybe(rng, rng.choice([1e-6, 0.5])),
                reduction=_red(rng))
    return "gaussian_nll_loss", [x, t, v], kwargs


def _class_target(rng, npr, shape, c, ignore):
    t = npr.integers(0, max(c, 1), shape).astype(np.float64)
    if t.size and rng.random() < 0.3:
        flat = t.reshape(-1)
        for _ in range(rng.randrange(1, 3)):
            flat[rng.randrange(t.size)] = ignore
    if t.size and rng.random() < 0.12:
        t.reshape(-1)[0] = rng.choice([c, -1, c + 3])
    if t.size and rng.random() < 0.08:
        t[...] = ignore
    return t


def classification(rng, npr):
    name = rng.choice(["cross_entropy", "cross_entropy", "nll_loss"])
    c = rng.choice([1, 2, 3, 4])
    form = rng.choice(["nc", "nc", "c", "nd"])
    n = rng.choice([0, 1, 2, 3, 3])
    shape = {"nc": (n, c), "c": (c,), "nd": (n, c) + _shape(rng, rng.choice([1, 2]))}[form]
    dtype = _fdtype(rng)
    x = _float_arg(rng, npr, shape, "normal", dtype)
    if name == "nll_loss" and rng.random() < 0.5:
        x.raw = -np.abs(x.raw)
    kwargs = {}
    ignore = maybe(rng, rng.choice([-100, 0, 1, -1]), 0.35)
    if ignore is not SKIP:
        kwargs["ignore_index"] = ignore
    probs = name == "cross_entropy" and rng.random() < 0.3
    tshape = shape[:1] + shape[2:] if form != "c" else ()
    if rng.random() < 0.06:
        tshape = tshape + (2,) if rng.random() < 0.5 else tshape[1:]
    if probs:
        p = npr.random(shape if rng.random() < 0.9 else tshape)
        p = p / np.maximum(p.sum(axis=min(1, p.ndim - 1) if p.ndim else None, keepdims=True),
                           1e-9) if p.ndim else p
        t = Arg(p, dtype if rng.random() < 0.9 else _fdtype(rng), _grad(rng, dtype))
    else:
        t = Arg(_class_target(rng, npr, tshape, c, -100 if ignore is SKIP else ignore),
                rng.choice(_INTS + ["float32"] * (rng.random() < 0.08)))
    if rng.random() < 0.35:
        wshape = (c,) if rng.random() < 0.9 else (c + 1,)
        kwargs["weight"] = _float_arg(rng, npr, wshape, "pos", dtype if rng.random() < 0.9 else
                                      None)
    if name == "cross_entropy" and rng.random() < 0.35:
        kwargs["label_smoothing"] = rng.choice([0.0, 0.1, 0.5, 1.0, -0.1])
    kwargs.update(kw(reduction=_red(rng)))
    return name, [x, t], _legacy(rng, kwargs)


def margin(rng, npr):
    name = rng.choice(["margin_ranking_loss", "multilabel_margin_loss", "multi_margin_loss",
                       "multilabel_soft_margin_loss", "cosine_embedding_loss"])
    dtype = _fdtype(rng) if rng.random() < 0.7 else "float64"
    kwargs = kw(reduction=_red(rng))
    if name == "margin_ranking_loss":
        shape = _shape(rng, rng.choice([0, 1, 1, 2]))
        args = [_float_arg(rng, npr, shape, "normal", dtype),
                _float_arg(rng, npr, _other_shape(rng, shape), "normal", dtype),
                _float_arg(rng, npr, _other_shape(rng, shape), "pm1", dtype, grad=False)]
        kwargs.update(kw(margin=maybe(rng, rng.choice([0.0, 0.3, -0.5]))))
        return name, args, _legacy(rng, kwargs)
    c = rng.choice([1, 2, 3, 4])
    n = rng.choice([0, 1, 2, 3])
    shape = rng.choice([(n, c), (n, c), (c,)])
    x = _float_arg(rng, npr, shape, "normal", dtype)
    if name == "multilabel_margin_loss":
        t = npr.integers(-1, c, shape).astype(np.float64)
        if t.size and rng.random() < 0.1:
            t.reshape(-1)[0] = c
        args = [x, Arg(t, rng.choice(_INTS + ["float32"] * (rng.random() < 0.1)))]
    elif name == "multi_margin_loss":
        t = npr.integers(0, c, shape[:-1]).astype(np.float64)
        if t.size and rng.random() < 0.1:
            t.reshape(-1)[0] = rng.choice([c, -1])
        args = [x, Arg(t, rng.choice(_INTS))]
        kwargs.update(kw(p=maybe(rng, rng.choice([1, 2, 2, 3])),
                         margin=maybe(rng, rng.choice([0.5, 1.0, 2.0]))))
        if rng.random() < 0.3:
            kwargs["weight"] = _float_arg(rng, npr, (c,) if rng.random() < 0.9 else (c + 1,),
                                          "pos", dtype)
    elif name == "multilabel_soft_margin_loss":
        args = [x, _float_arg(rng, npr, _other_shape(rng, shape), "01", dtype, grad=False)]
        if rng.random() < 0.3:
            kwargs["weight"] = _float_arg(rng, npr, (c,) if rng.random() < 0.9 else shape,
                                          "pos", dtype)
    else:       # cosine_embedding_loss
        d = shape[-1]
        shape = rng.choice([(n, d), (n, d), (d,)])
        x = _float_arg(rng, npr, shape, "normal", dtype)
        args = [x, _float_arg(rng, npr, _other_shape(rng, shape), "normal", dtype),
                _float_arg(rng, npr, shape[:-1] if rng.random() < 0.9 else shape, "pm1",
                           dtype, grad=False)]
        kwargs.update(kw(margin=maybe(rng, rng.choice([0.0, 0.3, -0.5]))))
    return name, args, _legacy(rng, kwargs)


def triplet(rng, npr):
    name = rng.choice(["triplet_margin_loss", "triplet_margin_with_distance_loss"])
    dtype = _fdtype(rng) if rng.random() < 0.6 else "float64"
    d = rng.choice([1, 2, 3])
    n = rng.choice([0, 1, 2, 3])
    shape = rng.choice([(n, d), (n, d), (d,)])
    args = [_float_arg(rng, npr, shape, "normal", dtype),
            _float_arg(rng, npr, _other_shape(rng, shape), "normal", dtype),
            _float_arg(rng, npr, shape, "normal", dtype)]
    kwargs = kw(margin=maybe(rng, rng.choice([0.0, 1.0, 0.3])), swap=maybe(rng, True),
                reduction=_red(rng))
    if name == "triplet_margin_loss":
        kwargs.update(kw(p=maybe(rng, rng.choice([1.0, 2.0, 3.0])),
                         eps=maybe(rng, rng.choice([1e-6, 0.1]))))
        kwargs = _legacy(rng, kwargs)
    else:
        kwargs.update(kw(distance_function=maybe(rng, rng.choice(["pairwise", "cosine"]))))
    return name, args, kwargs


def ctc(rng, npr):
    t_len, c, n = rng.choice([1, 3, 5, 6]), rng.choice([2, 3, 4]), rng.choice([1, 2, 3])
    batched = rng.random() < 0.8
    s = rng.choice([0, 1, 2, 3])
    dtype = rng.choice(["float64", "float64", "float32"])
    lp = npr.standard_normal((t_len, n, c) if batched else (t_len, c))
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    x = Arg(lp, dtype, _grad(rng, dtype))
    blank = maybe(rng, rng.choice([0, c - 1]), 0.3)
    b = 0 if blank is SKIP else blank
    labels = [k for k in range(c) if k != b] or [0]
    nb = n if batched else 1
    tlens = [rng.randrange(0, s + 1) for _ in range(nb)]
    ilens = [rng.randrange(max(1, t_len - 2), t_len + 1) for _ in range(nb)]
    if rng.random() < 0.08:
        ilens[0] = t_len + 1
    form = rng.choice(["padded", "padded", "concat"]) if batched else "padded"
    if form == "padded":
        tg = np.array([[rng.choice(labels) for _ in range(s)] for _ in range(nb)],
                      dtype=np.float64).reshape(nb, s)
        if not batched:
            tg = tg[0]
            tlens = tlens[0]
            ilens = ilens[0]
    else:
        tg = np.array([rng.choice(labels) for _ in range(sum(tlens))], dtype=np.float64)
    targets = Arg(tg, rng.choice(["int64", "int64", "int32"]))
    lens_form = rng.choice(["list", "tensor", "tensor"])
    if lens_form == "tensor":
        ilens = Arg(ilens, rng.choice(["int64", "int32"]))
        tlens = Arg(tlens, rng.choice(["int64", "int32"]))
    elif not batched:
        ilens, tlens = [ilens], [tlens]
    kwargs = kw(blank=blank, reduction=_red(rng), zero_infinity=maybe(rng, True))
    return "ctc_loss", [x, targets, ilens, tlens], kwargs


GENERATORS = [pointwise, pointwise, pointwise, gaussian, classification, classification,
              classification, margin, margin, triplet, ctc]

MODULES = {"l1_loss": "L1Loss", "mse_loss": "MSELoss", "smooth_l1_loss": "SmoothL1Loss",
           "huber_loss": "HuberLoss", "soft_margin_loss": "SoftMarginLoss",
           "poisson_nll_loss": "PoissonNLLLoss", "kl_div": "KLDivLoss",
           "binary_cross_entropy": "BCELoss",
           "binary_cross_entropy_with_logits": "BCEWithLogitsLoss",
           "hinge_embedding_loss": "HingeEmbeddingLoss", "gaussian_nll_loss": "GaussianNLLLoss",
           "cross_entropy": "CrossEntropyLoss", "nll_loss": "NLLLoss",
           "margin_ranking_loss": "MarginRankingLoss",
           "multilabel_margin_loss": "MultiLabelMarginLoss",
           "multi_margin_loss": "MultiMarginLoss",
           "multilabel_soft_margin_loss": "MultiLabelSoftMarginLoss",
           "cosine_embedding_loss": "CosineEmbeddingLoss",
           "triplet_margin_loss": "TripletMarginLoss",
           "triplet_margin_with_distance_loss": "TripletMarginWithDistanceLoss",
           "ctc_loss": "CTCLoss"}


def materialize(lib, value):
    if isinstance(value, Arg):
        return value.make(lib)
    if isinstance(value, str) and value in ("pairwise", "cosine"):
        if value == "pairwise":
            return lib.nn.functional.pairwise_distance
        return lambda a, b: 1.0 - lib.nn.functional.cosine_similarity(a, b)
    return value


def build(lib, desc):
    """(leaves needing gradients, call()) for a description (name, args, kwargs, module)."""
    name, args, kwargs, module = desc
    targs = [materialize(lib, a) for a in args]
    tkw = {k: materialize(lib, v) for k, v in kwargs.items()}
    leaves = [t for t in list(targs) + list(tkw.values())
              if isinstance(t, lib.Tensor) and t.requires_grad]
    if not module:
        fn = getattr(lib.nn.functional, name)
        return leaves, lambda: fn(*targs, **tkw)
    cls = getattr(lib.nn, MODULES[name])

    def call():
        m = cls(**tkw)
        return m(*targs)
    return leaves, call


def describe(desc):
    name, args, kwargs, module = desc
    head = f"nn.{MODULES[name]}" if module else name
    items = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return f"{head}({', '.join(map(repr, args))}; {items})"


def program(rng, npr):
    gen = rng.choice(GENERATORS)
    name, args, kwargs = gen(rng, npr)
    module = rng.random() < 0.25
    if module and any(not isinstance(v, (int, float, bool, str, Arg, type(None)))
                      for v in kwargs.values()):
        module = False
    return name, args, kwargs, module

