"""Round 36's convolution and pooling fuzzer: random calls of conv*/conv_transpose*, the
nn.Conv* modules (with padding_mode), and the max/avg/lp/adaptive/fractional pooling and
max_unpool functionals.

Each generator draws the inputs (numpy float64 values, a dtype, a layout, whether a float64
leaf needs a gradient) and the arguments of one call; ``build`` turns them into tensors of
either library, so one description runs against ember and torch alike.
"""

import numpy as np

_FLOATS = ["float64", "float64", "float64", "float32", "float32", "bfloat16"]


class _Skip:
    def __repr__(self):
        return "-"


SKIP = _Skip()


def kw(**kwargs):
    return {k: v for k, v in kwargs.items() if v is not SKIP}


def maybe(rng, value, p=0.5):
    return value if rng.random() < p else SKIP


class Arg:
    """A tensor argument: values, dtype, layout, and whether it is a float64 leaf needing a
    gradient."""

    def __init__(self, raw, dtype, grad=False, layout="contiguous"):
        self.raw, self.dtype, self.grad = np.asarray(raw, dtype=np.float64), dtype, grad
        self.layout = layout

    def make(self, lib):
        """(the leaf, the tensor passed to the call)"""
        raw = self.raw
        if self.layout == "stepped" and raw.ndim:
            raw = np.repeat(raw, 2, axis=-1)
        if self.dtype in ("float64", "float32", "float16", "bfloat16"):
            t = lib.tensor(raw).to(getattr(lib, self.dtype))
        else:
            t = lib.tensor(raw.astype(np.int64)).to(getattr(lib, self.dtype))
        if self.layout == "channels_last" and raw.ndim in (4, 5):
            fmt = lib.channels_last if raw.ndim == 4 else lib.channels_last_3d
            t = t.contiguous(memory_format=fmt)
        leaf = t.requires_grad_(self.grad)
        x = leaf[..., ::2] if self.layout == "stepped" and raw.ndim else leaf
        return leaf, x

    def __repr__(self):
        lay = {"contiguous": "", "stepped": "~", "channels_last": "#"}[self.layout]
        return f"{self.dtype}{list(self.raw.shape)}{lay}{'g' if self.grad else ''}"


def _dtype(rng, ints=0.04):
    return "int64" if rng.random() < ints else rng.choice(_FLOATS)


def _layout(rng, nd):
    opts = ["contiguous", "contiguous", "stepped"]
    if nd in (4, 5):
        opts.append("channels_last")
    return rng.choice(opts)


def _arg(rng, npr, shape, dtype, grad_p=0.7, layout=None, ties=False):
    raw = npr.integers(-3, 4, shape).astype(np.float64) if ties else npr.standard_normal(shape)
    grad = dtype == "float64" and rng.random() < grad_p
    return Arg(raw, dtype, grad, _layout(rng, len(shape)) if layout is None else layout)


def _tup(rng, nd, lo, hi, p_int=0.5):
    """an int or a tuple of nd ints in [lo, hi]"""
    if rng.random() < p_int:
        return rng.randint(lo, hi)
    return tuple(rng.randint(lo, hi) for _ in range(nd))


def _each(v, nd):
    return list(v) if isinstance(v, (tuple, list)) else [v] * nd


def _batch(rng, nd, channels):
    """(leading dims): a batch (maybe empty) and channels, or batchless"""
    if rng.random() < 0.15:
        return [channels]
    return [rng.choice([0, 1, 1, 2, 2, 3]) if rng.random() > 0.08 else 0, channels]


# --- convolution ---------------------------------------------------------------------------

def _conv(rng, npr, transposed):
    nd = rng.choice([1, 2, 2, 3])
    groups = rng.choice([1, 1, 2, 3])
    cin = groups * rng.randint(1, 2)
    cout_per = rng.randint(1, 2)
    if rng.random() < 0.2:                      # depthwise
        groups = cin
        cout_per = rng.randint(1, 2)
    ksize = [rng.randint(1, 3) for _ in range(nd)]
    stride = _tup(rng, nd, 1, 3)
    dilation = _tup(rng, nd, 1, 2)
    lead = _batch(rng, nd, cin)
    spatial = [rng.randint(1, 7) for _ in range(nd)]
    dtype = _dtype(rng)
    wdtype = dtype if rng.random() > 0.05 else rng.choice(["float32", "float64"])
    w_in = cin // groups
    if transposed:
        wshape = [cin, cout_per] + ksize
        cout = cout_per * groups
    else:
        wshape = [cout_per * groups, w_in] + ksize
        cout = cout_per * groups
    if rng.random() < 0.05:                     # a channel mismatch
        wshape[1 if not transposed else 0] += 1
    g = groups if rng.random() > 0.04 else rng.choice([0, -1, 5])
    r = rng.random()
    kwargs = {}
    if transposed:
        kwargs["padding"] = maybe(rng, _tup(rng, nd, 0, 2), 0.7)
        op = maybe(rng, _tup(rng, nd, 0, 2), 0.4)
        kwargs["output_padding"] = op
    elif r < 0.2:
        kwargs["padding"] = rng.choice(["same", "valid"])
    else:
        kwargs["padding"] = maybe(rng, _tup(rng, nd, 0, 2), 0.7)
    kwargs["stride"] = maybe(rng, stride, 0.7)
    kwargs["dilation"] = maybe(rng, dilation, 0.6)
    kwargs["groups"] = maybe(rng, g, 0.9) if g == groups else g
    x = _arg(rng, npr, lead + spatial, dtype)
    w = _arg(rng, npr, wshape, wdtype, layout=rng.choice(["contiguous", "contiguous", "stepped"]))
    bias = None
    if rng.random() < 0.6:
        bias = _arg(rng, npr, [cout + (rng.random() < 0.03)], wdtype, layout="contiguous")
    name = ("conv_transpose" if transposed else "conv") + f"{nd}d"
    args = [x, w, bias if bias is not None else rng.choice([None, SKIP])]
    return name, args, kw(**kwargs), {}


def _conv_module(rng, npr):
    nd = rng.choice([1, 2, 3])
    transposed = rng.random() < 0.3
    groups = rng.choice([1, 1, 2])
    cin = groups * rng.randint(1, 2)
    cout = groups * rng.randint(1, 2)
    k = _tup(rng, nd, 1, 3)
    mode = rng.choice(["zeros", "reflect", "replicate", "circular"])
    if transposed:
        mode = "zeros" if rng.random() < 0.8 else mode
    stride = _tup(rng, nd, 1, 2)
    if not transposed and rng.random() < 0.25:
        padding = rng.choice(["same", "valid"])
    else:
        padding = _tup(rng, nd, 0, 2)
    dilation = _tup(rng, nd, 1, 2)
    dtype = rng.choice(["float64", "float64", "float32"])
    bias = rng.random() < 0.6
    spatial = [rng.randint(1, 6) for _ in range(nd)]
    x = _arg(rng, npr, _batch(rng, nd, cin) + spatial, dtype)
    ks = _each(k, nd)
    wshape = ([cin, cout // groups] if transposed else [cout, cin // groups]) + ks
    w = npr.standard_normal(wshape)
    b = npr.standard_normal([cout]) if bias else None
    name = ("ConvTranspose" if transposed else "Conv") + f"{nd}d"
    ctor = dict(in_channels=cin, out_channels=cout, kernel_size=k, stride=stride,
                padding=padding, dilation=dilation, groups=groups, bias=bias,
                padding_mode=mode)
    return name, [x], {}, {"module": ctor, "weight": w, "bias": b}


# --- pooling -------------------------------------------------------------------------------

def _pool_input(rng, npr, nd, grad_p=0.7, lo=1, hi=7):
    lead = _batch(rng, nd, rng.randint(1, 3))
    spatial = [rng.randint(lo, hi) for _ in range(nd)]
    dtype = _dtype(rng)
    return _arg(rng, npr, lead + spatial, dtype, grad_p=grad_p, ties=rng.random() < 0.3)


def _max_pool(rng, npr):
    nd = rng.choice([1, 2, 3])
    x = _pool_input(rng, npr, nd)
    k = _tup(rng, nd, 1, 4)
    kwargs = dict(kernel_size=k,
                  stride=maybe(rng, rng.choice([None, _tup(rng, nd, 1, 3)]), 0.6),
                  padding=maybe(rng, _tup(rng, nd, 0, 2), 0.6),
                  dilation=maybe(rng, _tup(rng, nd, 1, 2), 0.4),
                  ceil_mode=maybe(rng, rng.random() < 0.5),
                  return_indices=maybe(rng, rng.random() < 0.5))
    return f"max_pool{nd}d", [x], kw(**kwargs), {}


def _avg_pool(rng, npr):
    nd = rng.choice([1, 2, 3])
    x = _pool_input(rng, npr, nd)
    kwargs = dict(kernel_size=_tup(rng, nd, 1, 4),
                  stride=maybe(rng, rng.choice([None, _tup(rng, nd, 1, 3)]), 0.6),
                  padding=maybe(rng, _tup(rng, nd, 0, 2), 0.6),
                  ceil_mode=maybe(rng, rng.random() < 0.5),
                  count_include_pad=maybe(rng, rng.random() < 0.5))
    if nd > 1:
        kwargs["divisor_override"] = maybe(rng, rng.choice([None, 1, 3, 0]), 0.3)
    return f"avg_pool{nd}d", [x], kw(**kwargs), {}


def _lp_pool(rng, npr):
    nd = rng.choice([1, 2])
    x = _pool_input(rng, npr, nd)
    x.raw = np.abs(x.raw) + 0.1 if rng.random() < 0.7 else x.raw
    kwargs = dict(norm_type=rng.choice([1, 2, 3, 1.5, float("inf")]),
                  kernel_size=_tup(rng, nd, 1, 3, 1.0 if nd == 1 else 0.5),
                  stride=maybe(rng, rng.choice([None, _tup(rng, nd, 1, 3)]), 0.6),
                  ceil_mode=maybe(rng, rng.random() < 0.5))
    return f"lp_pool{nd}d", [x], kw(**kwargs), {}


def _adaptive(rng, npr):
    nd = rng.choice([1, 2, 3])
    kind = rng.choice(["avg", "max"])
    x = _pool_input(rng, npr, nd, lo=0 if rng.random() < 0.1 else 1)
    size = [rng.choice([1, 2, 3, 4, 5, None]) for _ in range(nd)]
    if nd == 1:
        size = size[0] or 1
    elif rng.random() < 0.3:
        size = rng.randint(1, 4)
    else:
        size = tuple(size)
    kwargs = {"output_size": size}
    if kind == "max":
        kwargs["return_indices"] = maybe(rng, rng.random() < 0.5)
    return f"adaptive_{kind}_pool{nd}d", [x], kwargs, {}


def _fractional(rng, npr):
    nd = rng.choice([2, 3])
    x = _pool_input(rng, npr, nd, lo=2, hi=7)
    k = _tup(rng, nd, 1, 3)
    spatial = list(x.raw.shape[-nd:])
    if rng.random() < 0.6:
        out = tuple(rng.randint(1, max(1, s - kk + 1)) for s, kk in zip(spatial, _each(k, nd)))
        size = dict(output_size=out if rng.random() < 0.7 else out[0])
    else:
        size = dict(output_ratio=rng.choice([(0.5,) * nd, (0.7,) * nd, (0.5, 0.9, 0.6)[:nd]]))
    n = x.raw.shape[0] if x.raw.ndim == nd + 2 else 1
    c = x.raw.shape[-nd - 1]
    samples = Arg(npr.random([n, c, nd]), x.dtype if x.dtype != "int64" else "float32")
    kwargs = dict(kernel_size=k, **size, return_indices=maybe(rng, rng.random() < 0.5))
    return f"fractional_max_pool{nd}d", [x], kwargs, {"samples": samples}


def _unpool(rng, npr):
    nd = rng.choice([1, 2, 3])
    x = _pool_input(rng, npr, nd, lo=2, hi=6)
    k = _tup(rng, nd, 1, 3)
    stride = maybe(rng, _tup(rng, nd, 1, 3), 0.6)
    padding = maybe(rng, rng.choice([0, 1]) if min(_each(k, nd)) >= 2 else 0, 0.5)
    extra = {"pool": kw(kernel_size=k, stride=stride, padding=padding)}
    kwargs = kw(kernel_size=k, stride=stride, padding=padding)
    if rng.random() < 0.3:
        extra["grow"] = [rng.choice([0, 0, 1, -1, 3]) for _ in range(nd)]
    return f"max_unpool{nd}d", [x], kwargs, extra


_MAKERS = [(lambda rng, npr: _conv(rng, npr, False), 5),
           (lambda rng, npr: _conv(rng, npr, True), 4), (_conv_module, 3), (_max_pool, 4),
           (_avg_pool, 3), (_lp_pool, 2), (_adaptive, 3), (_fractional, 1), (_unpool, 2)]


def program(rng, npr):
    makers = [m for m, w in _MAKERS for _ in range(w)]
    return rng.choice(makers)(rng, npr)


def describe(desc):
    name, args, kwargs, extra = desc
    text = f"{name}({', '.join(map(repr, args))}, {kwargs}"
    if "module" in extra:
        text += f" {extra['module']}"
    if "grow" in extra:
        text += f" grow={extra['grow']}"
    if "pool" in extra:
        text += f" pool={extra['pool']}"
    return text + ")"


def build(lib, desc):
    """(leaves needing a gradient, a function of no arguments making the call)"""
    name, args, kwargs, extra = desc
    made = [None if a is None or a is SKIP else a.make(lib) for a in args]
    leaves = [m[0] for m in made if m is not None and m[0].requires_grad]
    vals = [None if m is None else m[1] for m in made]
    vals = [v for v, a in zip(vals, args) if a is not SKIP]
    F = lib.nn.functional
    if "module" in extra:
        def module_call():
            mod = getattr(lib.nn, name)(**extra["module"]).to(vals[0].dtype)
            with lib.no_grad():
                mod.weight.copy_(lib.tensor(extra["weight"]))
                if mod.bias is not None:
                    mod.bias.copy_(lib.tensor(extra["bias"]))
            if vals[0].dtype == lib.float64:
                leaves.extend(mod.parameters())
            return mod(vals[0])
        return leaves, module_call
    if name.startswith("fractional"):
        samples = extra["samples"].make(lib)[1]
        return leaves, lambda: getattr(F, name)(vals[0], _random_samples=samples, **kwargs)
    if name.startswith("max_unpool"):
        nd = int(name[-2])

        def call():
            src, idx = getattr(F, f"max_pool{nd}d")(vals[0], return_indices=True,
                                                    **extra["pool"])
            kwargs2 = dict(kwargs)
            if "grow" in extra:
                full = list(vals[0].shape[-nd:])
                kwargs2["output_size"] = [s + g for s, g in zip(full, extra["grow"])]
            return getattr(F, name)(src, idx, **kwargs2)
        return leaves, call
    return leaves, lambda: getattr(F, name)(*vals, **kwargs)
