"""The random programs of test_parity_autograd_hooks_fuzz_round37.py: small graphs (chains,
branches, multi-output nodes, in-place writes) with random tensor / node / post-accumulate /
multi-grad hooks, retain_grad and handle removal; random ``autograd.Function`` subclasses (ctx
or setup_context style, saving, dirty and non-differentiable outputs, materialize_grads,
once_differentiable, wrong grads, keyword, non-tensor and None inputs and outputs, no_grad,
jvp and vmap rules: see also _autograd_hooks_fuzz_round37_more.py); saved-tensor hooks
(nested, save_on_cpu, disabled). ``_program(seed, lib)`` draws every choice from the seed,
never from a result, so one program runs in both libraries; the records (hook calls in order
with their arguments, values, dtypes, shapes, requires_grad, node names, errors, warnings,
grads) must agree. ``python -m tests.parity._autograd_hooks_fuzz_round37_gen LO HI`` runs
seeds LO..HI-1 and prints the mismatches bucketed.
"""

import random
import warnings

import numpy as np

import ember
from tests.parity._autograd_fuzz_round35_a import _err, _Rec
from tests.parity._autograd_hooks_fuzz_round37_more import (_leaf, _name, _node_api, _saved,
                                                            _transforms, _transforms_more)

try:
    import torch
except ImportError:     # the test module skips
    torch = None


# --- graphs with hooks ------------------------------------------------------------------------

_STEPS = ["mul", "sin", "twice", "view", "slice", "add_leaf", "exp", "expand", "t", "inplace"]


def _step(rng, lib, x, other):
    kind = rng.choice(_STEPS)
    if kind == "mul":
        return kind, x * rng.choice([2.0, -0.5, 3.0])
    if kind == "sin":
        return kind, x.sin()
    if kind == "twice":
        return kind, x * x + x
    if kind == "view":
        return kind, x.view(-1)
    if kind == "slice":
        return kind, x.reshape(-1)[::2] if x.numel() > 1 else x.reshape(-1)
    if kind == "add_leaf":
        return kind, x + other.reshape(-1)[: 1].sum()
    if kind == "exp":
        return kind, (x * 0.3).exp()
    if kind == "expand":
        return kind, x.reshape(-1)[:1].expand(3)
    if kind == "t":
        return kind, x.reshape(-1, 1).t()
    y = x * 1.0
    y.add_(1.5)
    return kind, y


def _tensor_hook(rng, lib, rec, t, name):
    kind = rng.choice(["log", "log", "scale", "wrong_shape", "wrong_dtype", "not_tensor",
                       "remove", "twice", "retain", "post_acc", "node", "prenode", "node_ret"])
    rec.log.append(("hook", name, kind))

    def log(g, n=name):
        rec.log.append(("called", n, rec.norm(g)))

    if kind == "log":
        return rec("reg" + name, lambda: t.register_hook(log) and None)
    if kind == "scale":
        return rec("reg" + name, lambda: t.register_hook(lambda g: log(g) or g * 2.0) and None)
    if kind == "wrong_shape":
        return rec("reg" + name, lambda: t.register_hook(lambda g: g.reshape(-1)[:1]) and None)
    if kind == "wrong_dtype":
        return rec("reg" + name, lambda: t.register_hook(lambda g: g.float()) and None)
    if kind == "not_tensor":
        return rec("reg" + name, lambda: t.register_hook(lambda g: 3) and None)
    if kind == "remove":
        def reg():
            h = t.register_hook(lambda g: log(g) or g * 5.0)
            t.register_hook(log)
            h.remove()
            h.remove()
        return rec("reg" + name, reg)
    if kind == "twice":
        return rec("reg" + name, lambda: (t.register_hook(lambda g: g + 1.0),
                                          t.register_hook(log)) and None)
    if kind == "retain":
        return rec("retain" + name, lambda: (t.retain_grad(), t.retain_grad()) and None)
    if kind == "post_acc":
        return rec("post" + name, lambda: t.register_post_accumulate_grad_hook(
            lambda p, n=name: rec.log.append(("post", n, rec.norm(p.grad)))) and None)
    if t.grad_fn is None:
        return rec("nofn" + name, lambda: t.grad_fn)
    if kind == "node":
        return rec("node" + name, lambda: t.grad_fn.register_hook(
            lambda gi, go, n=name: rec.log.append(("nh", n, rec.norm(gi), rec.norm(go))))
            and None)
    if kind == "prenode":
        return rec("pre" + name, lambda: t.grad_fn.register_prehook(
            lambda go, n=name: rec.log.append(("ph", n, rec.norm(go)))) and None)
    return rec("node_ret" + name, lambda: t.grad_fn.register_hook(
        lambda gi, go: tuple(None if g is None else g * 2.0 for g in gi)) and None)


def _graph_hooks(rng, lib, rec):
    shape = rng.choice([(3,), (2, 3), (), (1,), (0,)])
    a = _leaf(lib, rng, shape)
    b = _leaf(lib, rng, (2,), rg=rng.random() < 0.8)
    tensors = [("a", a), ("b", b)]
    x = a
    for i in range(rng.randint(1, 4)):
        made = rec.run_quiet(lambda x=x: _step(rng, lib, x, b))
        if made[0] == "E":
            return
        x = made[1]
        rec.log.append(("step", made[0], rec.norm(x)))
        tensors.append((f"t{i}", x))
    for _ in range(rng.randint(1, 4)):
        name, t = rng.choice(tensors)
        _tensor_hook(rng, lib, rec, t, name)
    loss = x.sum() * 1.0 if rng.random() < 0.8 else (x * x).sum()
    how = rng.choice(["backward", "backward", "grad", "inputs", "retain_twice", "grad_out"])
    if how == "backward":
        rec("bw", lambda: loss.backward())
    elif how == "grad":
        rec("g", lambda: lib.autograd.grad(loss, [a, b], allow_unused=True))
    elif how == "inputs":
        rec("bwi", lambda: loss.backward(inputs=[t for _, t in tensors[2:3]] or [a]))
    elif how == "retain_twice":
        rec("bw1", lambda: loss.backward(retain_graph=True))
        rec("bw2", lambda: loss.backward())
    else:
        rec("bwg", lambda: x.backward(lib.ones_like(x) * 0.5))
    for name, t in tensors:
        rec("grad" + name, lambda t=t: t.grad)


# --- custom Functions -------------------------------------------------------------------------

def _make_function(rng, lib, rec):  # noqa: C901 - one branch per choice
    cfg = {
        "style": rng.choice(["ctx", "ctx", "setup"]),
        "save": rng.choice(["none", "input", "output", "both", "nontensor", "mid", "none_in"]),
        "nout": rng.choice([1, 1, 2, "nt"]),
        "ngrads": rng.choice(["right"] * 5 + ["more", "fewer", "more_none", "more_tensor"]),
        "gkind": rng.choice(["right"] * 5 + ["wrong_shape", "scalar", "none", "wrong_dtype",
                                             "int", "broadcast"]),
        "nondiff": rng.random() < 0.2,
        "materialize": rng.random() < 0.7,
        "once": rng.random() < 0.25,
        "kwarg": rng.random() < 0.3,
    }
    rec.log.append(("cfg", tuple(sorted(cfg.items()))))
    nout = cfg["nout"]

    def fwd(x, k):
        y = x * k
        if nout == 2:
            return y, x.exp()
        if nout == "nt":
            return y, 7
        return y

    def save(ctx, x, out):
        y = out[0] if isinstance(out, tuple) else out
        what = {"none": (), "input": (x,), "output": (y,), "both": (x, y),
                "nontensor": (x, 3), "mid": (x * 2.0,), "none_in": (None, x)}[cfg["save"]]
        ctx.save_for_backward(*what)
        ctx.set_materialize_grads(cfg["materialize"])
        if cfg["nondiff"]:
            ctx.mark_non_differentiable(y)
        ctx.k = 2.5

    def bwd(ctx, *gs):
        rec.log.append(("bwd", tuple(ctx.needs_input_grad), rec.norm(gs),
                        len(ctx.saved_tensors)))
        g = gs[0]
        if g is None:
            g = lib.zeros(3, dtype=lib.float64)
        gx = g * ctx.k
        if nout == 2 and gs[1] is not None:
            gx = gx + gs[1] * ctx.saved_tensors[0].exp() if cfg["save"] == "input" else gx
        gk = cfg["gkind"]
        if gk == "wrong_shape":
            gx = lib.ones(4, dtype=lib.float64)
        elif gk == "scalar":
            gx = gx.sum()
        elif gk == "none":
            gx = None
        elif gk == "wrong_dtype":
            gx = gx.float()
        elif gk == "int":
            gx = lib.ones(3, dtype=lib.int64)
        elif gk == "broadcast":
            gx = gx.reshape(1, 3)
        grads = (gx, None)
        ng = cfg["ngrads"]
        if ng == "more":
            grads = grads + (lib.ones(3),)
        elif ng == "more_none":
            grads = grads + (None,)
        elif ng == "more_tensor":
            grads = (gx, lib.ones(1))
        elif ng == "fewer":
            grads = grads[:1] if rng_fewer else ()
        return grads
    rng_fewer = rng.random() < 0.5

    if cfg["style"] == "ctx":
        class Scale(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, k=2.5):
                out = fwd(x, k)
                save(ctx, x, out)
                return out

            @staticmethod
            def backward(ctx, *gs):
                return bwd(ctx, *gs)
    else:
        class Scale(lib.autograd.Function):
            @staticmethod
            def forward(x, k=2.5):
                return fwd(x, k)

            @staticmethod
            def setup_context(ctx, inputs, output):
                save(ctx, inputs[0], output)

            @staticmethod
            def backward(ctx, *gs):
                return bwd(ctx, *gs)
    if cfg["once"]:
        Scale.backward = staticmethod(lib.autograd.function.once_differentiable(bwd))
    return Scale, cfg


def _custom(rng, lib, rec):
    Scale, cfg = _make_function(rng, lib, rec)
    where = rng.choice(["leaf", "leaf", "nonleaf", "nograd", "no_grad_mode", "view"])
    a = _leaf(lib, rng, (3,), rg=where != "nograd")
    x = {"nonleaf": lambda: a * 1.0, "view": lambda: a[:]}.get(where, lambda: a)()
    k = rng.choice([2.5, 2.5, -1.0])

    def call():
        if where == "no_grad_mode":
            with lib.no_grad():
                return Scale.apply(x, k=k) if cfg["kwarg"] else Scale.apply(x, k)
        return Scale.apply(x, k=k) if cfg["kwarg"] else Scale.apply(x, k)
    out = rec("apply", call)
    if out[0] == "E":
        return
    res = call()
    y = res[0] if isinstance(res, tuple) else res
    rec("name", lambda: (_name(y), None if y.grad_fn is None else y.grad_fn.name()))
    if rng.random() < 0.3 and y.grad_fn is not None:
        rec("nodehook", lambda: y.grad_fn.register_hook(
            lambda gi, go: rec.log.append(("nh", rec.norm(gi), rec.norm(go)))) and None)
    parts = rng.choice(["first", "both", "second"])
    create = rng.random() < 0.35

    def loss():
        terms = []
        if parts != "second" or not isinstance(res, tuple):
            terms.append((y * lib.arange(3.0, dtype=lib.float64)).sum())
        if parts != "first" and isinstance(res, tuple) and isinstance(res[1], lib.Tensor):
            terms.append(res[1].sum())
        return sum(terms[1:], terms[0]) if terms else y.sum()
    g = rec("grad", lambda: lib.autograd.grad(loss(), a, create_graph=create, allow_unused=True))
    if create and g[0] != "E":
        rec("double", lambda: lib.autograd.grad(
            lib.autograd.grad(loss(), a, create_graph=True)[0].sum(), a, allow_unused=True))
    if rng.random() < 0.3:
        rec("bw", lambda: loss().backward())
        rec("agrad", lambda: a.grad)


def _dirty(rng, lib, rec):
    ret = rng.choice(["self", "self", "clone", "view", "pair"])
    src = rng.choice(["leaf", "nonleaf", "nonleaf", "leaf_view", "nonleaf_view", "nograd"])
    nondiff = rng.random() < 0.2

    class AddOne(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1.0)
            ctx.mark_dirty(x)
            if nondiff:
                ctx.mark_non_differentiable(x)
            if ret == "clone":
                return x.clone()
            if ret == "view":
                return x.view(-1)
            if ret == "pair":
                return x, x * 2.0
            return x

        @staticmethod
        def backward(ctx, *gs):
            rec.log.append(("dbwd", rec.norm(gs)))
            return gs[0] if len(gs) == 1 or gs[1] is None else gs[0] + 2.0 * gs[1]

    a = _leaf(lib, rng, (2, 3), rg=src != "nograd")
    b = {"leaf": lambda: a, "nonleaf": lambda: a * 1.0, "leaf_view": lambda: a[0],
         "nonleaf_view": lambda: (a * 1.0)[0], "nograd": lambda: a}[src]()
    out = rec("apply", lambda: AddOne.apply(b))
    if out[0] == "E":
        return
    rec("state", lambda: (b, b._version, _name(b), a.is_leaf))
    if src == "nonleaf_view":
        rec("base", lambda: _name(b._base))
    rec("grad", lambda: lib.autograd.grad(b.sum(), a))


def _branches(rng, lib, rec):  # noqa: C901 - one branch per choice
    a = _leaf(lib, rng, (2, 3))
    w = _leaf(lib, rng, (3,), rg=rng.random() < 0.7)
    left = a * w if rng.random() < 0.5 else a.sin()
    right = (a * 2.0).sum(0) if rng.random() < 0.5 else a[0] * a[1]
    shared = left + right
    named = [("a", a), ("w", w), ("left", left), ("right", right), ("shared", shared)]
    for _ in range(rng.randint(2, 6)):
        name, t = rng.choice(named)
        kind = rng.choice(["tensor", "tensor", "pre", "post", "acc_node", "remove_in_hook",
                           "node_wrong", "pre_wrong", "retain_inplace"])
        rec.log.append(("hook", name, kind))
        if kind == "tensor":
            rec("reg" + name, lambda t=t, n=name: t.register_hook(
                lambda g: rec.log.append(("t", n, rec.norm(g)))) and None)
        elif kind == "pre" and t.grad_fn is not None:
            rec("pre" + name, lambda t=t, n=name: t.grad_fn.register_prehook(
                lambda go: rec.log.append(("p", n, rec.norm(go)))) and None)
        elif kind == "post" and t.grad_fn is not None:
            rec("post" + name, lambda t=t, n=name: t.grad_fn.register_hook(
                lambda gi, go: rec.log.append(("n", n, rec.norm(gi), rec.norm(go)))) and None)
        elif kind == "acc_node" and t.grad_fn is not None:
            def acc(t=t, n=name):
                nodes = [f for f, _ in t.grad_fn.next_functions]
                for i, f in enumerate(nodes):
                    if f is not None:
                        f.register_hook(lambda gi, go, i=i: rec.log.append(
                            ("acc", n, i, type(f).__name__, rec.norm(gi), rec.norm(go))))
                return [None if f is None else type(f).__name__ for f in nodes]
            rec("acc" + name, acc)
        elif kind == "remove_in_hook":
            def reg(t=t, n=name):
                box = []

                def once(g):
                    rec.log.append(("once", n, rec.norm(g)))
                    box[0].remove()
                box.append(t.register_hook(once))
            rec("rem" + name, reg)
        elif kind == "node_wrong" and t.grad_fn is not None:
            rec("nw" + name, lambda t=t: t.grad_fn.register_hook(
                lambda gi, go: gi + (None,)) and None)
        elif kind == "pre_wrong" and t.grad_fn is not None:
            rec("pw" + name, lambda t=t: t.grad_fn.register_prehook(
                lambda go: tuple(go) * 2) and None)
        elif kind == "retain_inplace" and t.grad_fn is not None:
            rec("ri" + name, lambda t=t: (t.retain_grad(), t.mul_(1.0)) and None)
    how = rng.choice(["backward", "grad_leaf", "grad_mid", "twice"])
    loss = (shared * shared).sum()
    if how == "backward":
        rec("bw", lambda: loss.backward())
    elif how == "grad_leaf":
        rec("g", lambda: lib.autograd.grad(loss, [w, a], allow_unused=True))
    elif how == "grad_mid":
        rec("gm", lambda: lib.autograd.grad(loss, [left], allow_unused=True))
    else:
        rec("bw1", lambda: loss.backward(retain_graph=True))
        rec("bw2", lambda: loss.backward())
    for name, t in named:
        rec("grad" + name, lambda t=t: t.grad)


def _hook_errors(rng, lib, rec):
    kind = rng.choice(["no_grad_tensor", "post_nonleaf", "post_nograd", "hook_not_callable",
                       "grad_nonleaf_warn", "retain_nograd", "hook_in_no_grad", "int_tensor"])
    a = _leaf(lib, rng, (3,), rg=kind not in ("no_grad_tensor", "post_nograd", "retain_nograd"))
    b = a * 2.0
    if kind == "no_grad_tensor":
        rec("e", lambda: a.register_hook(lambda g: g))
    elif kind == "post_nonleaf":
        rec("e", lambda: b.register_post_accumulate_grad_hook(lambda p: None))
    elif kind == "post_nograd":
        rec("e", lambda: a.register_post_accumulate_grad_hook(lambda p: None))
    elif kind == "hook_not_callable":
        rec("e", lambda: b.register_hook(3) and None)
        rec("bw", lambda: b.sum().backward())
    elif kind == "grad_nonleaf_warn":
        rec("bw", lambda: b.sum().backward())
        rec("g", lambda: b.grad)
        rec("g2", lambda: (b.retain_grad(), b.grad) and None)
    elif kind == "retain_nograd":
        rec("e", lambda: a.retain_grad())
    elif kind == "hook_in_no_grad":
        def run():
            with lib.no_grad():
                c = a * 3.0
            return c.requires_grad, c.register_hook(lambda g: g)
        rec("e", run)
    else:
        t = lib.tensor([1, 2, 3])
        rec("e", lambda: t.register_hook(lambda g: g))
        rec("e2", lambda: t.retain_grad())


def _function_more(rng, lib, rec):  # noqa: C901 - one branch per choice
    out_kind = rng.choice(["input", "view", "none_out", "int_out", "float32", "complex",
                           "two_inputs", "inference", "scalar", "empty"])
    later = rng.choice(["none", "inplace", "twice", "saved_after", "double", "hook_out"])
    once = rng.random() < 0.3

    class Odd(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y=None):
            ctx.save_for_backward(x)
            ctx.flags = tuple(ctx.needs_input_grad)
            if out_kind == "input":
                return x
            if out_kind == "view":
                return x[:2] if x.dim() else x.view(1)
            if out_kind == "none_out":
                return x * 2.0, None
            if out_kind == "int_out":
                return x * 2.0, x.long()
            if out_kind == "float32":
                return x.float() * 2.0
            if out_kind == "complex":
                return x * (1 + 2j)
            if out_kind == "two_inputs":
                return x * y
            return x * 2.0

        @staticmethod
        def backward(ctx, *gs):
            rec.log.append(("bwd", ctx.flags, rec.norm(gs)))
            (x,) = ctx.saved_tensors
            g = gs[0]
            if out_kind == "complex":
                g = (g * (1 - 2j)).real
            elif out_kind == "float32":
                g = g.double() * 2.0
            elif out_kind not in ("input", "view"):
                g = g * 2.0 if g is not None else None
            if out_kind == "view" and g is not None and x.dim():
                g = lib.cat([g, lib.zeros_like(x[2:])])
            elif out_kind == "view" and g is not None:
                g = g.reshape(())
            return g, None
    if once:
        Odd.backward = staticmethod(lib.autograd.function.once_differentiable(
            Odd.backward))
    shape = {"scalar": (), "empty": (0,)}.get(out_kind, (3,))
    x = _leaf(lib, rng, shape)
    y = _leaf(lib, rng, shape, rg=rng.random() < 0.5)

    def call():
        if out_kind == "inference":
            with lib.inference_mode():
                return Odd.apply(x)
        return Odd.apply(x, y) if out_kind == "two_inputs" else Odd.apply(x)
    got = rec("apply", call)
    if got[0] == "E":
        return
    res = call()
    o = res[0] if isinstance(res, tuple) else res
    rec("props", lambda: (_name(o), o.is_leaf, o._version, o._base is not None))
    if later == "inplace":
        rec("inplace", lambda: (o.mul_(2.0), None)[1])
        rec("after", lambda: (_name(o), lib.autograd.grad(o.abs().sum(), x)))
    elif later == "twice":
        loss = o.abs().sum()
        rec("g1", lambda: lib.autograd.grad(loss, x))
        rec("g2", lambda: lib.autograd.grad(loss, x))
    elif later == "saved_after":
        rec("bw", lambda: o.abs().sum().backward())
        rec("saved", lambda: o.grad_fn.saved_tensors if o.grad_fn is not None else None)
    elif later == "double":
        def dbl():
            (g,) = lib.autograd.grad((o.abs() ** 2).sum(), x, create_graph=True)
            return g, lib.autograd.grad(g.sum(), x, allow_unused=True)
        rec("double", dbl)
    elif later == "hook_out":
        rec("hook", lambda: o.register_hook(lambda g: rec.log.append(("oh", rec.norm(g))))
            and None)
        rec("bw", lambda: o.abs().sum().backward())
        rec("xgrad", lambda: x.grad)
    else:
        rec("bw", lambda: o.abs().sum().backward())
        rec("xgrad", lambda: (x.grad, y.grad))


def _multi_output(rng, lib, rec):
    a = _leaf(lib, rng, (3, 2))
    op = rng.choice(["unbind", "split", "chunk", "max", "sort", "svd_like", "unbind1"])
    outs = {"unbind": lambda: a.unbind(0), "split": lambda: a.split([1, 2]),
            "chunk": lambda: a.chunk(2), "max": lambda: a.max(1),
            "sort": lambda: a.sort(0), "svd_like": lambda: a.topk(1, dim=0),
            "unbind1": lambda: a.unbind(1)}[op]()
    node = outs[0].grad_fn
    rec("node", lambda: (type(node).__name__, node.name(), len(node.next_functions)))
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["pre", "post", "tensor", "pre_replace"])
        k = rng.randrange(len(outs))
        rec.log.append(("hook", kind, k))
        if kind == "pre":
            node.register_prehook(lambda go: rec.log.append(("p", rec.norm(go))))
        elif kind == "post":
            node.register_hook(lambda gi, go: rec.log.append(("n", rec.norm(gi), rec.norm(go))))
        elif kind == "pre_replace":
            node.register_prehook(lambda go: tuple(g if g is None else g * 2.0 for g in go))
        elif outs[k].requires_grad:
            outs[k].register_hook(lambda g, k=k: rec.log.append(("t", k, rec.norm(g))))
    used = [i for i in range(len(outs)) if rng.random() < 0.6 and outs[i].requires_grad]
    if not used:
        used = [0]
    loss = sum((outs[i] * (i + 1.0)).sum() for i in used)
    rec("g", lambda: lib.autograd.grad(loss, a, allow_unused=True,
                                       materialize_grads=rng.random() < 0.3))


def _hooks_and_writes(rng, lib, rec):  # noqa: C901 - one branch per choice
    a = _leaf(lib, rng, (2, 3))
    base = a * 1.5
    kind = rng.choice(["hook_then_inplace", "view_hook_base_write", "hook_writes_grad",
                       "create_graph", "leaf_twice", "hook_noncontig", "retain_view",
                       "hook_then_view_write"])
    rec.log.append(("kind", kind))

    def log(tag):
        return lambda g: rec.log.append((tag, rec.norm(g)))
    if kind == "hook_then_inplace":
        rec("reg", lambda: base.register_hook(log("before")) and None)
        rec("write", lambda: (base.mul_(2.0), None)[1])
        rec("reg2", lambda: base.register_hook(log("after")) and None)
        out = base.sin().sum()
    elif kind == "view_hook_base_write":
        v = base[0]
        rec("reg", lambda: v.register_hook(log("view")) and None)
        rec("write", lambda: (base.add_(1.0), None)[1])
        rec("name", lambda: _name(v))
        out = (v * v).sum() + base.sum()
    elif kind == "hook_then_view_write":
        rec("reg", lambda: base.register_hook(log("base")) and None)
        rec("write", lambda: (base[1].mul_(3.0), None)[1])
        rec("name", lambda: _name(base))
        out = (base * base).sum()
    elif kind == "hook_writes_grad":
        rec("reg", lambda: base.register_hook(lambda g: (g.mul_(2.0), None)[1]) and None)
        rec("reg2", lambda: a.register_hook(log("leaf")) and None)
        out = (base * 3.0).sum()
    elif kind == "create_graph":
        rec("reg", lambda: base.register_hook(log("cg")) and None)
        out = (base ** 3).sum()
        rec("g", lambda: lib.autograd.grad(out, a, create_graph=True))
        return
    elif kind == "leaf_twice":
        rec("reg", lambda: a.register_hook(log("leaf")) and None)
        rec("reg2", lambda: a.register_hook(lambda g: g * 0.5) and None)
        out = (a * a).sum() + a[0].sum()
    elif kind == "hook_noncontig":
        rec("reg", lambda: base.register_hook(lambda g: g.t().contiguous().t()) and None)
        rec("reg2", lambda: a.register_hook(lambda g: rec.log.append(
            ("strides", g.stride(), g.is_contiguous()))) and None)
        out = (base * 2.0).sum()
    else:
        v = base[:, 1]
        rec("ret", lambda: v.retain_grad())
        rec("write", lambda: (v.mul_(2.0), None)[1])
        out = (base * base).sum()
        rec("bw", lambda: out.backward())
        rec("vgrad", lambda: (v.grad, _name(v), base.grad))
        return
    rec("bw", lambda: out.backward())
    rec("agrad", lambda: a.grad)


_SCENARIOS = [_hooks_and_writes, _hooks_and_writes, _multi_output, _multi_output,
              _function_more, _function_more, _branches, _branches, _hook_errors,
              _graph_hooks, _graph_hooks, _graph_hooks, _custom, _custom, _custom, _dirty,
              _saved, _transforms, _node_api, _node_api, _transforms_more]


class _Log(_Rec):
    """The round-35 recorder, plus ``norm`` (a value's record) and ``run_quiet`` (a call whose
    error is recorded and handed back as ("E", ...))."""

    def norm(self, value):
        from tests.parity._autograd_fuzz_round35_a import _norm
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _norm(self.lib, value)

    def run_quiet(self, fn):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - the error itself is compared
            self.log.append(("error", _err(exc)))
            return _err(exc)


def _program(seed, lib):
    rng = random.Random(seed)
    rec = _Log(lib)
    scen = rng.choice(_SCENARIOS)
    rec.log.append(("scenario", scen.__name__))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scen(rng, lib, rec)
    except Exception as exc:  # noqa: BLE001 - an escaping error is compared too
        rec.log.append(("escaped", _err(exc)))
    return rec.log


def _agree(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and a.dtype == b.dtype and np.allclose(a, b, rtol=1e-6, atol=1e-7,
                                                       equal_nan=True))
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_agree, a, b))
    return a == b


def run_program(seed):
    """None when torch and ember agree, else (label, torch's record, ember's record)."""
    want, got = _program(seed, torch), _program(seed, ember)
    scen = want[0][1]
    for w, g in zip(want, got):
        if not _agree(w, g):
            return (f"seed {seed}: {scen}({w[0]})", w, g)
    if len(want) != len(got):
        return (f"seed {seed}: {scen}(length)", want[len(got):][:1], got[len(want):][:1])
    return None


if __name__ == "__main__":
    from tests.parity._fuzz_cli import main
    main(run_program, key=lambda m: m[0].split(": ")[1] + " | " + str(m[1][0])[:40], shown=3)
