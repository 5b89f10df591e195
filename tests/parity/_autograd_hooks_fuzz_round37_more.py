"""Scenarios of the round-37 autograd hooks fuzzer (_autograd_hooks_fuzz_round37_gen.py):
saved-tensor hooks, forward AD and vmap rules of Functions, and their shared helpers."""

import numpy as np

from tests.parity._autograd_fuzz_round35_a import _vals


def _leaf(lib, rng, shape, dtype="float64", rg=True):
    n = int(np.prod(shape)) if shape else 1
    vals = np.array(_vals(rng, n), dtype=np.float64).reshape(shape)
    return lib.tensor(vals, dtype=getattr(lib, dtype), requires_grad=rg)


def _name(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


# --- saved tensors hooks ----------------------------------------------------------------------

def _saved(rng, lib, rec):  # noqa: C901 - one branch per choice
    kind = rng.choice(["log", "log", "nested", "cpu", "disable", "disable_inner", "unpack_bad",
                       "pack_error", "function"])
    a = _leaf(lib, rng, (3,))
    graph = lib.autograd.graph

    def pack(t):
        rec.log.append(("pack", rec.norm(t)))
        return t * 1.0 if kind == "nested" else t

    def unpack(t):
        rec.log.append(("unpack", tuple(t.shape)))
        if kind == "unpack_bad":
            return t.reshape(-1)[:1]
        return t

    def body():
        return (a * a).sin() * a.exp()

    if kind in ("log", "unpack_bad"):
        with graph.saved_tensors_hooks(pack, unpack):
            y = rec.run_quiet(body)
    elif kind == "nested":
        with graph.saved_tensors_hooks(pack, unpack):
            with graph.saved_tensors_hooks(lambda t: ("p", t), lambda p: p[1]):
                y = rec.run_quiet(body)
    elif kind == "cpu":
        with graph.save_on_cpu(pin_memory=rng.random() < 0.5):
            y = rec.run_quiet(body)
    elif kind == "pack_error":
        def bad(t):
            raise ValueError("no packing")
        with graph.saved_tensors_hooks(bad, unpack):
            y = rec.run_quiet(body)
    elif kind == "function":
        class Sq(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, x * 2.0)
                return x * x

            @staticmethod
            def backward(ctx, g):
                x, x2 = ctx.saved_tensors
                return g * x2
        with graph.saved_tensors_hooks(pack, unpack):
            y = rec.run_quiet(lambda: Sq.apply(a))
    else:
        msg = "no hooks here" if rng.random() < 0.5 else "x"
        with graph.disable_saved_tensors_hooks(msg):
            if kind == "disable_inner":
                def inner():
                    with graph.saved_tensors_hooks(pack, unpack):
                        return body()
                y = rec.run_quiet(inner)
            else:
                y = rec.run_quiet(body)
            def inner_hooks():
                with graph.save_on_cpu():
                    return None
            rec("inner", inner_hooks)
    rec.log.append(("y", rec.norm(y)))
    if isinstance(y, tuple) and y and y[0] == "E":
        return
    rec("grad", lambda: lib.autograd.grad(y.sum(), a))


# --- forward AD and vmap rules of Functions ---------------------------------------------------

def _transforms(rng, lib, rec):  # noqa: C901 - one branch per choice
    has_jvp = rng.random() < 0.7
    vmap_rule = rng.choice(["none", "staticmethod", "generate"])
    setup = rng.random() < 0.8 or vmap_rule != "none"
    jvp_bad = rng.choice([None, None, "shape", "count", "int"])

    class Cube(lib.autograd.Function):
        generate_vmap_rule = vmap_rule == "generate"

        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

        if has_jvp:
            @staticmethod
            def jvp(ctx, t):
                (x,) = ctx.saved_tensors
                if jvp_bad == "shape":
                    return t.sum()
                if jvp_bad == "int":
                    return 3
                if jvp_bad == "count":
                    return t, t
                return 3 * x * x * t

        if vmap_rule == "staticmethod":
            @staticmethod
            def vmap(info, in_dims, x):
                rec.log.append(("vmap", info.batch_size, tuple(d is None for d in in_dims)))
                return x ** 3, in_dims[0]

    if not setup:
        class Cube(lib.autograd.Function):  # noqa: F811 - the ctx-style variant
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                return 3 * ctx.saved_tensors[0] ** 2 * g

    x = _leaf(lib, rng, (2, 3), rg=False)
    what = rng.choice(["jvp", "vmap", "vmap", "grad_vmap"])
    if what == "jvp":
        def run():
            fw = lib.autograd.forward_ad
            with fw.dual_level():
                d = fw.make_dual(x, lib.ones_like(x) * 0.5)
                out = Cube.apply(d)
                return out, fw.unpack_dual(out).tangent
        rec("jvp", run)
    elif what == "vmap":
        in_dims = rng.choice([0, 1, -1])
        rec("vmap", lambda: lib.func.vmap(Cube.apply, in_dims=in_dims)(x))
    else:
        rec("gvmap", lambda: lib.func.vmap(lib.func.grad(lambda v: Cube.apply(v).sum()))(x))


# --- the graph's nodes and multi-gradient hooks -----------------------------------------------

def _node_api(rng, lib, rec):  # noqa: C901 - one branch per choice
    a = _leaf(lib, rng, (3,))
    b = _leaf(lib, rng, (3,), rg=rng.random() < 0.7)

    class Mix(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, y):
            return x * k + y, x - y

        @staticmethod
        def backward(ctx, g1, g2):
            rec.log.append(("mix", rec.norm((g1, g2))))
            return (None if g1 is None else g1 * 2.0), None, g2

    kind = rng.choice(["multi_all", "multi_any", "next", "metadata", "remove_node_hook",
                       "node_hook_create_graph"])
    rec.log.append(("kind", kind))
    out1, out2 = Mix.apply(a, 2.0, b)
    node = out1.grad_fn
    rec("node", lambda: (node.name(), [(None if f is None else type(f).__name__, i)
                                       for f, i in node.next_functions]))
    parts = rng.choice([(out1,), (out2,), (out1, out2)])
    if kind in ("multi_all", "multi_any"):
        tensors = [t for t in (a, b, out1, out2) if t.requires_grad][:rng.randint(1, 4)]
        mode = "all" if kind == "multi_all" else "any"

        def hook(arg):
            rec.log.append(("multi", rec.norm(arg)))
        rec("reg", lambda: lib.autograd.graph.register_multi_grad_hook(
            tensors, hook, mode=mode) and None)
    elif kind == "metadata":
        rec("meta", lambda: (node.metadata, node.metadata.setdefault("k", 1), node.metadata))
    elif kind == "remove_node_hook":
        def reg():
            h = node.register_hook(lambda gi, go: rec.log.append(("n", rec.norm(gi))))
            p = node.register_prehook(lambda go: rec.log.append(("p", rec.norm(go))))
            (h if rng.random() < 0.5 else p).remove()
        rec("reg", reg)
    elif kind == "node_hook_create_graph":
        rec("reg", lambda: node.register_hook(
            lambda gi, go: tuple(None if g is None else g * g for g in gi)) and None)
    loss = sum((p * p).sum() for p in parts)
    rec("g", lambda: lib.autograd.grad(loss, [a, b] if b.requires_grad else [a],
                                       allow_unused=True,
                                       create_graph=kind == "node_hook_create_graph"))


def _transforms_more(rng, lib, rec):
    kind = rng.choice(["bad_out_dims", "not_tuple", "ctx_generate", "no_rule", "under_grad",
                       "out_dims_none"])

    class Sq(lib.autograd.Function):
        generate_vmap_rule = kind == "ctx_generate"

        @staticmethod
        def forward(*args):
            x = args[-1]
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            return 2 * ctx.saved_tensors[0] * g

        if kind in ("bad_out_dims", "not_tuple", "out_dims_none"):
            @staticmethod
            def vmap(info, in_dims, x):
                if kind == "not_tuple":
                    return x * x
                return x * x, ((0, 0) if kind == "bad_out_dims" else None)

    if kind == "ctx_generate":
        class Sq(lib.autograd.Function):  # noqa: F811 - the ctx-style variant
            generate_vmap_rule = True

            @staticmethod
            def forward(ctx, x):
                return x * x

            @staticmethod
            def backward(ctx, g):
                return g
    x = _leaf(lib, rng, (2, 3), rg=False)
    if kind == "under_grad":
        rec("grad", lambda: lib.func.grad(lambda v: Sq.apply(v).sum())(x[0]))
    else:
        rec("vmap", lambda: lib.func.vmap(Sq.apply)(x))
