"""Helpers and the first scenarios of the round-35 autograd API fuzzer (see
test_parity_autograd_fuzz_round35.py): each scenario ``fn(rng, lib, rec)`` draws its choices
from ``rng`` (never from results) and records what it observes through ``rec``."""

import warnings

import numpy as np

def _err(exc):
    msg = str(exc).replace("ember.", "torch.").replace("ember", "torch")
    return ("E", type(exc).__name__, msg.strip().split("\n")[0])


def _norm(lib, x):
    if isinstance(x, lib.Tensor):
        fn = x.grad_fn
        with lib.no_grad():
            v = x.detach().numpy().copy()
        return ("T", str(x.dtype).split(".")[1], tuple(x.shape), x.requires_grad, x.is_leaf,
                None if fn is None else fn.name(), v)
    if isinstance(x, tuple):
        return tuple(_norm(lib, y) for y in x)
    if isinstance(x, list):
        return ("list",) + tuple(_norm(lib, y) for y in x)
    if isinstance(x, dict):
        return ("dict",) + tuple((k, _norm(lib, v)) for k, v in x.items())
    if isinstance(x, lib.dtype):
        return "dtype." + str(x).split(".")[1]
    if isinstance(x, float):
        return round(x, 4)
    return x


class _Rec:
    def __init__(self, lib):
        self.lib, self.log = lib, []

    def __call__(self, tag, fn):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = _norm(self.lib, fn())
            except Exception as exc:  # noqa: BLE001 - the error itself is compared
                out = _err(exc)
        self.log.append((tag, out))
        seen = sorted({_warning(w) for w in caught if _warning(w) is not None})
        if seen:
            self.log.append((tag + ":warned", tuple(seen)))
        return out


def _warning(w):
    if issubclass(w.category, (DeprecationWarning, ResourceWarning)):
        return None
    msg = str(w.message).replace("ember.", "torch.").replace("ember", "torch")
    return (w.category.__name__, msg.strip().split("\n")[0][:120])


def _leaf(lib, rng_vals, shape, rg=True):
    return lib.tensor(np.array(rng_vals, dtype=np.float32).reshape(shape), requires_grad=rg)


def _vals(rng, n):
    return [round(rng.uniform(-2, 2), 2) for _ in range(n)]


# --- scenarios: each draws its parameters from rng and records through rec -------------------

def _custom_function(rng, lib, rec):  # noqa: C901 - one branch per choice
    style = rng.choice(["ctx", "setup"])
    save = rng.choice(["none", "input", "output", "intermediate", "none_entry"])
    ngrads = rng.choice(["right", "right", "more", "fewer", "more_none"])
    gshape = rng.choice(["right", "right", "right", "wrong", "scalar", "none"])
    nondiff = rng.random() < 0.25
    materialize = rng.random() < 0.7
    rng.random()                    # (a draw kept: the seeds' programs stay as they were)
    nontensor = rng.random() < 0.3
    once = rng.random() < 0.3
    view_out = rng.random() < 0.2
    factor = rng.choice([2.0, -1.5, 3.0])

    def fwd_body(x, k):
        y = x * factor if k is None else x * k
        out2 = x.exp() if not view_out else x.view(-1)
        return y, out2

    def bwd_body(ctx, g1, g2):
        saved = ctx.saved_tensors
        info = [tuple(ctx.needs_input_grad), len(saved)]
        if g1 is None:
            g1 = lib.zeros(3)
        gx = g1 * factor
        if g2 is not None and not view_out:
            gx = gx + g2 * (saved[0].exp() if save == "input" else 1.0)
        elif g2 is not None:
            gx = gx + g2.view(gx.shape)
        if gshape == "wrong":
            gx = lib.ones(4)
        elif gshape == "scalar":
            gx = gx.sum()
        elif gshape == "none":
            gx = None
        grads = (gx, None) if nontensor else (gx,)
        if ngrads == "more":
            grads = grads + (lib.ones(3),)
        elif ngrads == "more_none":
            grads = grads + (None,)
        elif ngrads == "fewer" and nontensor:
            grads = grads[:1]
        elif ngrads == "fewer":
            grads = ()
        rec("bwd_info", lambda: info)
        return grads

    def do_save(ctx, x, y, mid):
        what = {"none": (), "input": (x,), "output": (y,), "intermediate": (mid,),
                "none_entry": (None, x)}[save]
        ctx.save_for_backward(*what)
        ctx.set_materialize_grads(materialize)
        if nondiff:
            ctx.mark_non_differentiable(y)

    if style == "ctx":
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, k=None):
                y, o2 = fwd_body(x, k)
                do_save(ctx, x, y, x * 0.5)
                return y, o2

            @staticmethod
            def backward(ctx, g1, g2):
                return bwd_body(ctx, g1, g2)
    else:
        class F(lib.autograd.Function):
            @staticmethod
            def forward(x, k=None):
                y, o2 = fwd_body(x, k)
                return y, o2

            @staticmethod
            def setup_context(ctx, inputs, output):
                do_save(ctx, inputs[0], output[0], inputs[0] * 0.5)

            @staticmethod
            def backward(ctx, g1, g2):
                return bwd_body(ctx, g1, g2)
    if once:
        F.backward = staticmethod(lib.autograd.function.once_differentiable(
            F.backward.__func__ if hasattr(F.backward, "__func__") else F.backward))

    x = _leaf(lib, _vals(rng, 3), (3,))
    args = (x, 1.5) if nontensor else (x,)
    out = rec("apply", lambda: F.apply(*args))
    if out[0] == "E":
        return
    y, o2 = F.apply(*args)
    rec("outs", lambda: (y, o2))
    rec("nf", lambda: [(None if f is None else f.name(), i) for f, i in y.grad_fn.next_functions]
        if y.grad_fn is not None else None)
    loss_parts = rng.choice(["first", "both", "second"])
    create = rng.random() < 0.3

    def run():
        parts = []
        if loss_parts in ("first", "both"):
            parts.append((y * lib.arange(3.0)).sum())
        if loss_parts in ("second", "both"):
            parts.append(o2.sum())
        total = parts[0] if len(parts) == 1 else parts[0] + parts[1]
        return lib.autograd.grad(total, x, create_graph=create, allow_unused=True)
    g = rec("grad", run)
    if create and g[0] != "E" and g[0] is not None:
        rec("second", lambda: lib.autograd.grad(run()[0].sum(), x, allow_unused=True))


def _dirty_function(rng, lib, rec):
    ret_other = rng.random() < 0.3
    leaf_input = rng.random() < 0.4
    via_view = rng.random() < 0.3

    class D(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2.0)
            ctx.mark_dirty(x)
            return x.clone() if ret_other else x

        @staticmethod
        def backward(ctx, g):
            return g * 2.0

    a = _leaf(lib, _vals(rng, 6), (2, 3))
    b = a if leaf_input else a * 1.0
    if via_view:
        b = b[0]
    out = rec("apply", lambda: D.apply(b))
    if out[0] == "E":
        return
    rec("state", lambda: (b, a.is_leaf, b._version))
    rec("grad", lambda: lib.autograd.grad(b.sum(), a))


def _hooks(rng, lib, rec):  # noqa: C901
    a = _leaf(lib, _vals(rng, 3), (3,))
    b = a * 2.0
    c = b.sin()
    handles, kinds = [], []
    for t, name in ((a, "a"), (b, "b"), (c, "c")):
        kind = rng.choice(["none", "none", "ret_none", "scale", "wrong_shape", "retain",
                           "post_acc", "node", "prenode", "remove"])
        rec.log.append(("kind", name + ":" + kind))
        kinds.append(kind)
        if kind == "ret_none":
            handles.append(t.register_hook(lambda g, n=name: rec("h" + n, lambda: g) and None))
        elif kind in ("scale", "remove"):
            handles.append(t.register_hook(lambda g: g * 3.0))
            if kind == "remove":
                handles[-1].remove()
        elif kind == "wrong_shape":
            t.register_hook(lambda g: g.sum())
        elif kind == "retain":
            rec("retain" + name, lambda t=t: t.retain_grad())
        elif kind == "post_acc":
            rec("post" + name, lambda t=t, n=name: t.register_post_accumulate_grad_hook(
                lambda p: rec("pah" + n, lambda: p.grad)) and None)
        elif kind == "node":
            rec("node" + name, lambda t=t: t.grad_fn.register_hook(
                lambda gi, go: rec("nh", lambda: (gi, go)) and None) and None)
        elif kind == "prenode":
            rec("pre" + name, lambda t=t: t.grad_fn.register_prehook(
                lambda go: tuple(g * 2 for g in go)) and None)
    how = rng.choice(["backward", "grad", "backward_inputs"])
    if how == "backward":
        rec("bw", lambda: c.sum().backward())
    elif how == "grad":
        # (PyTorch's captured gradient of b skips b's hooks when b's node must run for a's
        # gradient, and not when it need not: see test_a_captured_gradient_is_hooked_alike)
        inputs = [a, b] if kinds[1] not in ("scale", "wrong_shape", "ret_none") else [b]
        rec("g", lambda: lib.autograd.grad(c.sum(), inputs))
    else:
        rec("bwi", lambda: c.sum().backward(inputs=[b]))
    rec("grads", lambda: (a.grad, b.grad, c.grad))


def _grad_api(rng, lib, rec):  # noqa: C901
    a = _leaf(lib, _vals(rng, 6), (2, 3))
    u = _leaf(lib, _vals(rng, 3), (3,))
    nl = _leaf(lib, _vals(rng, 3), (3,), rg=False)
    y = (a * a).sum(0) if rng.random() < 0.7 else a.sum()
    inputs = [a]
    if rng.random() < 0.5:
        inputs.append(rng.choice([u, nl]))
    go = rng.choice(["none", "right", "wrong", "scalar", "list_none", "batched"])
    kw = {}
    if rng.random() < 0.4:
        kw["allow_unused"] = rng.choice([True, False])
    if rng.random() < 0.3 and go != "batched":     # (PyTorch's materialized zeros of a
        kw["materialize_grads"] = True              # batched grad lack the batch dimension)
    if rng.random() < 0.3:
        kw["retain_graph"] = rng.choice([True, False])
    create = rng.random() < 0.3
    if create:
        kw["create_graph"] = True

    def grad_outputs():
        if go == "right":
            return lib.ones(y.shape)
        if go == "wrong":
            return lib.ones(4)
        if go == "scalar":
            return lib.tensor(2.0)
        if go == "list_none":
            return [None]
        if go == "batched":
            return lib.ones((2,) + tuple(y.shape))
        return None
    if go == "batched":
        kw["is_grads_batched"] = True
    r = rec("grad", lambda: lib.autograd.grad(y, inputs, grad_outputs(), **kw))
    again = rng.choice(["none", "grad", "backward"])
    if again == "grad":
        rec("again", lambda: lib.autograd.grad(y, a, grad_outputs()))
    elif again == "backward":
        rec("again_bw", lambda: y.sum().backward() or a.grad)
    if create and r[0] != "E":
        rec("second", lambda: lib.autograd.grad(
            lib.autograd.grad((a * a * a).sum(), a, create_graph=True)[0].sum(), a))


def _saved_hooks(rng, lib, rec):
    a = _leaf(lib, _vals(rng, 3), (3,))
    kind = rng.choice(["pack", "save_on_cpu", "disable", "pack_none", "inplace_after"])
    if kind in ("pack", "pack_none"):
        def pack(t):
            rec("pack", lambda: tuple(t.shape))
            return None if kind == "pack_none" else t * 1.0

        def unpack(p):
            return p
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = (a * a.exp()).sum()
        rec("bw", lambda: y.backward() or a.grad)
    elif kind == "save_on_cpu":
        with lib.autograd.graph.save_on_cpu(pin_memory=False):
            y = (a.sin() * a).sum()
        rec("bw", lambda: y.backward() or a.grad)
    elif kind == "disable":
        def inner():
            with lib.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
                with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                    return (a * a).sum()
        rec("dis", inner)
    else:
        b = a * 1.0
        y = b.sin()
        b.add_(1.0)
        rec("bw", lambda: y.sum().backward())


def _anomaly(rng, lib, rec):
    check_nan = rng.random() < 0.7

    class NanGrad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")
    a = _leaf(lib, _vals(rng, 3), (3,))
    mode = rng.choice(["detect", "set", "off"])

    def run():
        y = NanGrad.apply(a).sum()
        if mode == "detect":
            with lib.autograd.detect_anomaly(check_nan=check_nan):
                y.backward()
        elif mode == "set":
            with lib.autograd.set_detect_anomaly(True, check_nan=check_nan):
                y.backward()
        else:
            y.backward()
        return a.grad
    rec("anom", run)
    rec("flag", lambda: lib.is_anomaly_enabled())


def _grad_modes(rng, lib, rec):
    a = _leaf(lib, _vals(rng, 3), (3,))
    modes = [rng.choice(["no_grad", "enable_grad", "set_true", "set_false", "inference",
                         "inference_false"]) for _ in range(rng.randint(1, 3))]
    as_deco = rng.random() < 0.4

    def ctx(m):
        return {"no_grad": lib.no_grad, "enable_grad": lib.enable_grad,
                "set_true": lambda: lib.set_grad_enabled(True),
                "set_false": lambda: lib.set_grad_enabled(False),
                "inference": lib.inference_mode,
                "inference_false": lambda: lib.inference_mode(False)}[m]()

    def body():
        y = a * 2.0
        return (y.requires_grad, y.is_inference(), lib.is_grad_enabled(),
                lib.is_inference_mode_enabled(), None if y.grad_fn is None else y.grad_fn.name())

    def nested(i):
        if i == len(modes):
            return body()
        if as_deco and modes[i] not in ("set_true", "set_false"):
            return ctx(modes[i])(lambda: nested(i + 1))()
        with ctx(modes[i]):
            return nested(i + 1)
    rec("modes", lambda: nested(0))
    rec("after", lambda: (lib.is_grad_enabled(), lib.is_inference_mode_enabled()))


def _checkpoint(rng, lib, rec):
    reentrant = rng.choice([True, False])
    preserve = rng.choice([True, False])
    extra = rng.random() < 0.4
    no_rg = rng.random() < 0.2
    a = _leaf(lib, _vals(rng, 3), (3,), rg=not no_rg)
    w = _leaf(lib, _vals(rng, 3), (3,))

    def fn(x, k=2.0, flag=False):
        z = (x * w).sin() * k
        return (z, flag) if extra else z
    args = (a, 3.0, True) if extra else (a,)
    import importlib
    cp = importlib.import_module(lib.__name__ + ".utils.checkpoint")
    out = rec("cp", lambda: cp.checkpoint(fn, *args, use_reentrant=reentrant,
                                          preserve_rng_state=preserve))
    if out[0] == "E":
        return
    res = cp.checkpoint(fn, *args, use_reentrant=reentrant, preserve_rng_state=preserve)
    z = res[0] if extra else res
    rec("bw", lambda: z.sum().backward() or (a.grad, w.grad))


def _forward_ad(rng, lib, rec):
    fwAD = lib.autograd.forward_ad
    x = lib.tensor(np.array(_vals(rng, 3), dtype=np.float32))
    t = lib.tensor(np.array(_vals(rng, 3), dtype=np.float32))
    op = rng.choice(["sin", "mul", "sum", "view", "inplace", "noprimal_exit"])

    def run():
        with fwAD.dual_level():
            d = fwAD.make_dual(x, t)
            if op == "sin":
                y = d.sin() * d
            elif op == "mul":
                y = d * x
            elif op == "sum":
                y = d.sum()
            elif op == "view":
                y = d[1:] * 2
            elif op == "inplace":
                y = x.clone()
                y.mul_(d)
            else:
                y = d
            p = fwAD.unpack_dual(y)
            return p.primal, p.tangent
    rec("fw", run)
    rec("outside", lambda: fwAD.unpack_dual(x).tangent)
    rec("err", lambda: fwAD.make_dual(x, t))


def _grad_assign(rng, lib, rec):
    a = _leaf(lib, _vals(rng, 6), (2, 3))
    kind = rng.choice(["shape", "dtype", "ok", "none", "nonleaf_rg", "leaf_inplace",
                       "rg_int", "nonleaf_grad"])
    if kind == "shape":
        rec("g", lambda: setattr(a, "grad", lib.ones(3)))
    elif kind == "dtype":
        rec("g", lambda: setattr(a, "grad", lib.ones(2, 3, dtype=lib.float64)))
    elif kind == "ok":
        rec("g", lambda: setattr(a, "grad", lib.ones(2, 3)) or a.grad)
        rec("acc", lambda: (a * 2).sum().backward() or a.grad)
    elif kind == "none":
        rec("g", lambda: setattr(a, "grad", None) or a.grad)
    elif kind == "nonleaf_rg":
        b = a * 2
        rec("rg", lambda: b.requires_grad_(False))
        rec("rg2", lambda: b.requires_grad_(True) and b.is_leaf)
    elif kind == "leaf_inplace":
        rec("inp", lambda: a.add_(1.0))
        c = a.detach()
        c.add_(lib.ones(2, 3, requires_grad=True))
        rec("leaf", lambda: (c.is_leaf, c.grad_fn.name(), c.requires_grad))
    elif kind == "rg_int":
        rec("ri", lambda: lib.ones(3, dtype=lib.int64).requires_grad_())
    else:
        b = a * 2
        rec("ng", lambda: b.grad)
        rec("ngs", lambda: setattr(b, "grad", lib.ones(2, 3)) or b.grad)


def _double_backward(rng, lib, rec):
    a = _leaf(lib, _vals(rng, 3), (3,))
    y = (a.exp() * a).sum()
    first = rng.choice(["plain", "retain", "retain_false"])
    if first == "plain":
        rec("b1", lambda: y.backward())
    else:
        rec("b1", lambda: y.backward(retain_graph=first == "retain"))
    rec("b2", lambda: y.backward() or a.grad)
    rec("nonscalar", lambda: (a * 2).backward())
    rec("noreq", lambda: lib.ones(3).sum().backward())
