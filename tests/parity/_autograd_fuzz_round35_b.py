"""More scenarios of the round-35 autograd API fuzzer (see
test_parity_autograd_fuzz_round35.py and _autograd_fuzz_round35_a.py)."""

import numpy as np

from tests.parity._autograd_fuzz_round35_a import _leaf, _vals

def _function_jvp_vmap(rng, lib, rec):
    kind = rng.choice(["jvp", "jvp_missing", "vmap_rule", "vmap_static", "vmap_missing"])
    scale = rng.choice([2.0, -0.5])

    class G(lib.autograd.Function):
        generate_vmap_rule = kind == "vmap_rule"

        @staticmethod
        def forward(x):
            return x * scale

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * scale

        if kind == "jvp":
            @staticmethod
            def jvp(ctx, t):
                return t * scale
        if kind == "vmap_static":
            @staticmethod
            def vmap(info, in_dims, x):
                return x * scale, in_dims[0]
    x = lib.tensor(np.array(_vals(rng, 6), dtype=np.float32)).reshape(2, 3)
    if kind.startswith("jvp"):
        fwAD = lib.autograd.forward_ad

        def run():
            with fwAD.dual_level():
                d = fwAD.make_dual(x, lib.ones(2, 3))
                return fwAD.unpack_dual(G.apply(d)).tangent
        rec("jvp", run)
    else:
        rec("vmap", lambda: lib.func.vmap(G.apply)(x))
    a = _leaf(lib, _vals(rng, 3), (3,))
    rec("grad", lambda: lib.autograd.grad(G.apply(a).sum(), a))


def _view_outputs(rng, lib, rec):
    kind = rng.choice(["same", "view", "view_dirty", "detach", "same_no_grad_input"])

    class V(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            if kind == "same" or kind == "same_no_grad_input":
                return x
            if kind == "detach":
                return x.detach()
            if kind == "view_dirty":
                x.mul_(1.0)
                ctx.mark_dirty(x)
                return x
            return x.view(-1)

        @staticmethod
        def backward(ctx, g):
            return g.reshape(2, 3) * 2.0
    a = _leaf(lib, _vals(rng, 6), (2, 3), rg=kind != "same_no_grad_input")
    b = a * 1.0 if rng.random() < 0.6 else a
    out = rec("apply", lambda: V.apply(b))
    if out[0] == "E":
        return
    y = V.apply(b)
    rec("meta", lambda: (y is b, y._base is b, y._base is None, y.is_leaf))
    if rng.random() < 0.5:
        rec("inplace", lambda: y.add_(1.0))
    rec("bw", lambda: y.sum().backward() or a.grad)


def _misc_api(rng, lib, rec):  # noqa: C901
    a = _leaf(lib, _vals(rng, 6), (2, 3))
    kind = rng.choice(["nonscalar", "grad_tensors_shape", "int_grad", "empty_inputs",
                       "hook_no_rg", "post_acc_nonleaf", "retain_leaf", "inference_bw",
                       "metadata", "acc_node_hook", "nonleaf_grad_warn", "bw_inputs_nonrg",
                       "grad_of_detached", "leaf_inplace_no_grad", "retain_then_inplace"])
    rec("kind", lambda: kind)
    b = a * 2.0
    if kind == "nonscalar":
        rec("r", lambda: b.backward())
    elif kind == "grad_tensors_shape":
        rec("r", lambda: b.backward(lib.ones(3)))
    elif kind == "int_grad":
        rec("r", lambda: lib.ones(3, dtype=lib.int64, requires_grad=True))
    elif kind == "empty_inputs":
        rec("r", lambda: b.sum().backward(inputs=[]))
        rec("r2", lambda: lib.autograd.grad(b.sum(), []))
    elif kind == "hook_no_rg":
        rec("r", lambda: lib.ones(3).register_hook(lambda g: g))
    elif kind == "post_acc_nonleaf":
        rec("r", lambda: b.register_post_accumulate_grad_hook(lambda p: None))
    elif kind == "retain_leaf":
        rec("r", lambda: a.retain_grad() or a.retains_grad)
        rec("r2", lambda: b.retain_grad() or b.retains_grad)
        rec("bw", lambda: b.sum().backward() or (a.grad, b.grad))
    elif kind == "inference_bw":
        with lib.inference_mode():
            t = lib.ones(2, 3)
        rec("r", lambda: (a * t).sum().backward() or a.grad)
        rec("r2", lambda: t.requires_grad_())
        rec("r3", lambda: lib.autograd.grad((a * t).sum(), t))
    elif kind == "metadata":
        rec("r", lambda: (b.grad_fn.metadata, b.grad_fn.name(),
                          [(None if f is None else f.name(), i)
                           for f, i in b.grad_fn.next_functions]))
        rec("r2", lambda: type(b.grad_fn.next_functions[0][0].variable) is type(a))
    elif kind == "acc_node_hook":
        acc = b.grad_fn.next_functions[0][0]
        acc.register_prehook(lambda go: (go[0] * 10,))
        acc.register_hook(lambda gi, go: rec("acch", lambda: (gi, go)) and None)
        rec("bw", lambda: b.sum().backward() or a.grad)
    elif kind == "nonleaf_grad_warn":
        rec("r", lambda: b.grad)
        rec("r2", lambda: b.sum().backward() or b.grad)
    elif kind == "bw_inputs_nonrg":
        rec("r", lambda: b.sum().backward(inputs=[lib.ones(3)]))
    elif kind == "grad_of_detached":
        rec("r", lambda: lib.autograd.grad(b.sum(), b.detach()))
    elif kind == "leaf_inplace_no_grad":
        with lib.no_grad():
            a.mul_(2.0)
        rec("r", lambda: (a.is_leaf, a.grad_fn, a._version))
        rec("r2", lambda: (a * a).sum().backward() or a.grad)
    else:
        b.retain_grad()
        b.mul_(3.0)
        rec("r", lambda: (b.retains_grad, b.grad_fn.name()))
        rec("bw", lambda: b.sum().backward() or (b.grad, a.grad))


def _checkpoint_more(rng, lib, rec):
    import importlib
    cp = importlib.import_module(lib.__name__ + ".utils.checkpoint")
    kind = rng.choice(["omit", "nonrg_reentrant", "early_stop", "kwargs_reentrant",
                       "seq", "grad_api_reentrant", "dropout"])
    rec("kind", lambda: kind)
    a = _leaf(lib, _vals(rng, 3), (3,))

    def fn(x, scale=2.0):
        return (x.exp() * scale).sin()
    if kind == "omit":
        rec("r", lambda: cp.checkpoint(fn, a).sum().backward() or a.grad)
    elif kind == "nonrg_reentrant":
        rec("r", lambda: cp.checkpoint(fn, lib.ones(3), use_reentrant=True).requires_grad)
    elif kind == "early_stop":
        def run():
            with cp.set_checkpoint_early_stop(rng.choice([True, False])):
                y = cp.checkpoint(fn, a, use_reentrant=False)
            y.sum().backward()
            return a.grad
        rec("r", run)
    elif kind == "kwargs_reentrant":
        rec("r", lambda: cp.checkpoint(fn, a, scale=3.0, use_reentrant=True))
    elif kind == "seq":
        mods = lib.nn.Sequential(lib.nn.Tanh(), lib.nn.Sigmoid(), lib.nn.Tanh())
        rec("r", lambda: cp.checkpoint_sequential(mods, 2, a, use_reentrant=False).sum()
            .backward() or a.grad)
    elif kind == "grad_api_reentrant":
        y = cp.checkpoint(fn, a, use_reentrant=True)
        rec("r", lambda: lib.autograd.grad(y.sum(), a))
    else:
        lib.manual_seed(rng.randrange(100))
        preserve = rng.choice([True, False])

        def drop(x):
            return lib.nn.functional.dropout(x, 0.5, training=True) * 2.0
        y = cp.checkpoint(drop, a, use_reentrant=rng.choice([True, False]),
                          preserve_rng_state=preserve)
        with lib.no_grad():         # (the streams differ: whether the mask was replayed)
            kept = y.detach() != 0
        rec("r", lambda: y.sum().backward() or (
            bool(((a.grad != 0) == kept).all()) if preserve else a.grad.shape))


def _inplace_hooks(rng, lib, rec):
    a = _leaf(lib, _vals(rng, 6), (2, 3))
    b = a * 1.0
    kind = rng.choice(["hook_then_inplace", "retain_then_view_inplace", "view_hook",
                       "base_hook_view_write", "hook_remove_twice", "hook_on_view_of_leaf"])
    rec("kind", lambda: kind)
    if kind == "hook_then_inplace":
        b.register_hook(lambda g: g * 2.0)
        b.mul_(3.0)
        b.register_hook(lambda g: g + 1.0)
    elif kind == "retain_then_view_inplace":
        b.retain_grad()
        b[0].mul_(5.0)
    elif kind == "view_hook":
        v = b[1]
        v.register_hook(lambda g: g * 7.0)
        v.retain_grad()
        b.mul_(2.0)
        rec("v", lambda: (v.grad_fn.name(), v._version))
    elif kind == "base_hook_view_write":
        b.register_hook(lambda g: g * 2.0)
        b[1].add_(a[0])
    elif kind == "hook_remove_twice":
        h = b.register_hook(lambda g: g * 2.0)
        h.remove()
        h.remove()
    else:
        v = a[0]
        rec("h", lambda: v.register_hook(lambda g: g * 3.0) and None)
    rec("bw", lambda: (b * lib.arange(6.0).reshape(2, 3)).sum().backward() or (a.grad, b.grad))


def _saved_hooks_more(rng, lib, rec):
    a = _leaf(lib, _vals(rng, 3), (3,))
    kind = rng.choice(["nested", "unpack_wrong_shape", "unpack_non_tensor", "pack_inplace",
                       "hooks_then_free", "disable_then_enable", "register_hooks_raw"])
    rec("kind", lambda: kind)
    H = lib.autograd.graph.saved_tensors_hooks
    if kind == "nested":
        with H(lambda t: ("outer", t), lambda p: p[1] * 2):
            with H(lambda t: ("inner", t), lambda p: p[1] * 3):
                y = (a * a).sum()
        rec("bw", lambda: y.backward() or a.grad)
    elif kind == "unpack_wrong_shape":
        with H(lambda t: t, lambda p: lib.ones(5)):
            y = (a * a).sum()
        rec("bw", lambda: y.backward() or a.grad)
    elif kind == "unpack_non_tensor":
        with H(lambda t: t, lambda p: 3):
            y = (a * a).sum()
        rec("bw", lambda: y.backward() or a.grad)
    elif kind == "pack_inplace":
        with H(lambda t: t.mul_(2.0), lambda p: p):
            rec("fw", lambda: (a * 1.0 * (a * 1.0)).sum())
    elif kind == "hooks_then_free":
        with H(lambda t: t, lambda p: p):
            y = a.exp()
        rec("bw", lambda: y.sum().backward() or a.grad)
        rec("saved", lambda: y.grad_fn._saved_result)
    elif kind == "disable_then_enable":
        lib.autograd.graph.disable_saved_tensors_hooks("stop")
        with lib.autograd.graph.disable_saved_tensors_hooks("msg A"):
            rec("r", lambda: H(lambda t: t, lambda p: p).__enter__())
        with H(lambda t: t, lambda p: p):
            y = (a * a).sum()
        rec("bw", lambda: y.backward() or a.grad)
    else:
        y = a.exp()
        raw = y.grad_fn._raw_saved_result
        rec("r", lambda: raw.register_hooks(lambda t: t, lambda p: p))
        rec("r2", lambda: raw.register_hooks(lambda t: t, lambda p: p))
        rec("bw", lambda: y.sum().backward() or a.grad)


def _custom_function_more(rng, lib, rec):  # noqa: C901
    ret = rng.choice(["tensor_int", "single_tuple", "none_out", "int_only", "list_out",
                      "dict_out"])
    gret = rng.choice(["ok", "float64", "int_grad_for_nontensor", "grad_for_nonrg", "list",
                       "int_value", "extra_shape"])
    save = rng.choice(["tensor", "non_tensor", "twice", "after"])
    once = rng.random() < 0.3
    b_rg = rng.random() < 0.5
    rec("kinds", lambda: (ret, gret, save, once, b_rg))

    class M(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, k):
            if save == "non_tensor":
                ctx.save_for_backward(x, 3)
            else:
                ctx.save_for_backward(x, y)
            ctx.k = k
            z = x * y * k
            if ret == "tensor_int":
                return z, 7
            if ret == "single_tuple":
                return (z,)
            if ret == "none_out":
                return None
            if ret == "int_only":
                return 5
            if ret == "list_out":
                return [z, z * 2]
            return {"z": z}

        @staticmethod
        def backward(ctx, g, *rest):
            x, y = ctx.saved_tensors
            if save == "twice":
                x, y = ctx.saved_tensors
            gx, gy = g * y * ctx.k, g * x * ctx.k
            rec("needs", lambda: tuple(ctx.needs_input_grad))
            if gret == "float64":
                gx = gx.double()
            elif gret == "int_grad_for_nontensor":
                return gx, gy, lib.ones(1)
            elif gret == "grad_for_nonrg":
                return gx, lib.ones(3), None
            elif gret == "list":
                return [gx, gy, None]
            elif gret == "int_value":
                return gx, 1, None
            elif gret == "extra_shape":
                gx = gx.unsqueeze(0)
            return gx, gy, None
    if once:
        M.backward = staticmethod(lib.autograd.function.once_differentiable(M.backward))
    x = _leaf(lib, _vals(rng, 3), (3,))
    y = _leaf(lib, _vals(rng, 3), (3,), rg=b_rg)
    out = rec("apply", lambda: M.apply(x, y, 2.0))
    if out is None or out[0] == "E" or not isinstance(out, tuple) or out[0] == "T":
        if isinstance(out, tuple) and out[0] == "T":
            pass
        else:
            return
    res = M.apply(x, y, 2.0)
    z = res[0] if isinstance(res, (tuple, list)) else res
    if not isinstance(z, lib.Tensor):
        return
    create = rng.random() < 0.4
    rec("grad", lambda: lib.autograd.grad(z.sum(), [x, y] if b_rg else [x], create_graph=create,
                                          allow_unused=True))
    if save == "after":
        rec("after", lambda: z.grad_fn.saved_tensors)
    if create:
        rec("second", lambda: lib.autograd.grad(
            lib.autograd.grad(z.sum(), x, create_graph=True)[0].sum(), x, allow_unused=True))


def _forward_ad_more(rng, lib, rec):  # noqa: C901
    fwAD = lib.autograd.forward_ad
    x = lib.tensor(np.array(_vals(rng, 6), dtype=np.float32)).reshape(2, 3)
    kind = rng.choice(["bad_shape", "int_primal", "nested", "outside_level", "view_inplace",
                       "twice", "grad_and_fw", "dtype_tangent", "exit_twice", "custom_dirty",
                       "unpack_plain", "leaf_rg"])
    rec("kind", lambda: kind)

    def run():
        with fwAD.dual_level() as lvl:
            if kind == "bad_shape":
                return fwAD.make_dual(x, lib.ones(3))
            if kind == "int_primal":
                return fwAD.make_dual(lib.ones(3, dtype=lib.int64), lib.ones(3, dtype=lib.int64))
            if kind == "nested":
                with fwAD.dual_level():
                    return 1
            if kind == "view_inplace":
                base = x.clone()
                v = base[0]
                v.mul_(fwAD.make_dual(lib.ones(3), lib.ones(3) * 2))
                return fwAD.unpack_dual(base).tangent, fwAD.unpack_dual(v).tangent
            if kind == "twice":
                d = fwAD.make_dual(x, lib.ones(2, 3))
                return fwAD.make_dual(d, lib.ones(2, 3))
            if kind == "grad_and_fw":
                p = x.clone().requires_grad_()
                d = fwAD.make_dual(p, lib.ones(2, 3))
                y = (d * d).sum()
                t = fwAD.unpack_dual(y).tangent
                return t, lib.autograd.grad(y, p)
            if kind == "dtype_tangent":
                d = fwAD.make_dual(x, lib.ones(2, 3, dtype=lib.float64))
                return fwAD.unpack_dual(d).tangent.dtype
            if kind == "exit_twice":
                return lvl
            if kind == "custom_dirty":
                class D(lib.autograd.Function):
                    @staticmethod
                    def forward(ctx, a):
                        a.mul_(2.0)
                        ctx.mark_dirty(a)
                        return a

                    @staticmethod
                    def jvp(ctx, t):
                        t.mul_(2.0)
                        return t
                d = fwAD.make_dual(x.clone(), lib.ones(2, 3))
                out = D.apply(d)
                return out is d, fwAD.unpack_dual(out).tangent
            if kind == "unpack_plain":
                return fwAD.unpack_dual(x)
            if kind == "leaf_rg":
                p = x.clone().requires_grad_()
                d = fwAD.make_dual(p, lib.ones(2, 3))
                return d.is_leaf, d.requires_grad, d.grad_fn is None
            d = fwAD.make_dual(x, lib.ones(2, 3))
            return d
    rec("run", run)
    if kind == "outside_level":
        rec("r", lambda: fwAD.make_dual(x, lib.ones(2, 3)))
        rec("r2", lambda: fwAD.unpack_dual(x, level=0))


def _functional_api(rng, lib, rec):
    F = lib.autograd.functional
    x = _leaf(lib, _vals(rng, 3), (3,), rg=False)
    kind = rng.choice(["jacobian", "hessian", "vjp", "jvp", "hvp", "vhp", "jac_strict",
                       "jac_vectorize", "jac_tuple", "vjp_no_v"])
    create = rng.random() < 0.3
    rec("kind", lambda: (kind, create))

    def f(t):
        return t.sin() * t

    def g(t):
        return (t.exp() * t).sum()
    if kind == "jacobian":
        rec("r", lambda: F.jacobian(f, x, create_graph=create))
    elif kind == "hessian":
        rec("r", lambda: F.hessian(g, x, create_graph=create))
    elif kind == "vjp":
        rec("r", lambda: F.vjp(f, x, lib.ones(3), create_graph=create))
    elif kind == "jvp":
        rec("r", lambda: F.jvp(f, x, lib.ones(3), create_graph=create))
    elif kind == "hvp":
        rec("r", lambda: F.hvp(g, x, lib.ones(3)))
    elif kind == "vhp":
        rec("r", lambda: F.vhp(g, x, lib.ones(3)))
    elif kind == "jac_strict":
        rec("r", lambda: F.jacobian(lambda t: lib.ones(3), x, strict=True))
        rec("r2", lambda: F.jacobian(lambda t: lib.ones(3), x))
    elif kind == "jac_vectorize":
        rec("r", lambda: F.jacobian(f, x, vectorize=True, strategy="forward-mode"))
        rec("r2", lambda: F.jacobian(f, x, strategy="forward-mode"))
    elif kind == "jac_tuple":
        rec("r", lambda: F.jacobian(lambda a, b: (a * b, a + b), (x, x * 2)))
    else:
        rec("r", lambda: F.vjp(f, x))
        rec("r2", lambda: F.vjp(g, x))


def _graph_api(rng, lib, rec):
    G = lib.autograd.graph
    a = _leaf(lib, _vals(rng, 3), (3,))
    b = a * 2.0
    c = b.exp()
    kind = rng.choice(["edge_grad", "multi_any", "multi_all", "increment_version",
                       "allow_mutation", "saved_attrs", "edge_of_leaf", "edge_no_grad"])
    rec("kind", lambda: kind)
    if kind == "edge_grad":
        e = G.get_gradient_edge(b)
        rec("r", lambda: lib.autograd.grad(c.sum(), e))
    elif kind == "edge_of_leaf":
        rec("r", lambda: G.get_gradient_edge(a).node.name())
        rec("r2", lambda: lib.autograd.grad(c.sum(), G.get_gradient_edge(a)))
    elif kind == "edge_no_grad":
        rec("r", lambda: G.get_gradient_edge(lib.ones(3)))
    elif kind in ("multi_any", "multi_all"):
        mode = "any" if kind == "multi_any" else "all"
        u = _leaf(lib, _vals(rng, 3), (3,))
        G.register_multi_grad_hook(
            (a, u, b), lambda gs: rec("mh", lambda: gs) and None, mode=mode)
        rec("bw", lambda: c.sum().backward() or a.grad)
    elif kind == "increment_version":
        d = a * 1.0
        e = d.sin()
        lib.autograd.graph.increment_version(d)
        rec("r", lambda: (d._version, e.sum().backward()))
    elif kind == "allow_mutation":
        def run():
            with G.allow_mutation_on_saved_tensors():
                d = a * 1.0
                e = d.sin()
                d.mul_(2.0)
                e.sum().backward()
            return a.grad
        rec("r", run)
    else:
        rec("r", lambda: (c.grad_fn._saved_result, b.grad_fn._saved_other,
                          b.grad_fn._saved_self))


def _grad_modes_more(rng, lib, rec):  # noqa: C901
    a = _leaf(lib, _vals(rng, 3), (3,))
    kind = rng.choice(["generator", "set_call", "class_deco", "inference_into_grad",
                       "inference_inplace", "no_grad_in_backward", "enable_in_no_grad_fn",
                       "set_grad_enabled_deco", "inference_view", "nested_inference_false"])
    rec("kind", lambda: kind)
    if kind == "generator":
        @lib.no_grad()
        def gen():
            yield lib.is_grad_enabled()
            yield (a * 2).requires_grad
        rec("r", lambda: (list(gen()), lib.is_grad_enabled()))
    elif kind == "set_call":
        def run():
            lib.set_grad_enabled(False)
            try:
                return (a * 2).requires_grad, lib.is_grad_enabled()
            finally:
                lib.set_grad_enabled(True)
        rec("r", run)
    elif kind == "class_deco":
        rec("r", lambda: lib.no_grad()(lambda: (a * 2).requires_grad)())
        rec("r2", lambda: lib.inference_mode()(lambda: (a * 2).is_inference())())
    elif kind == "inference_into_grad":
        with lib.inference_mode():
            t = a * 2
        rec("r", lambda: (t.requires_grad, t.is_leaf, t.grad_fn))
        rec("r2", lambda: (t * a).sum().backward() or a.grad)
        rec("r3", lambda: t.requires_grad_())
    elif kind == "inference_inplace":
        with lib.inference_mode():
            t, t2 = lib.ones(3), lib.ones(3)
        rec("r", lambda: t.add_(a))     # (PyTorch writes t before refusing: not compared)
        rec("r2", lambda: a.clone().add_(t2))
    elif kind == "no_grad_in_backward":
        class N(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                with lib.no_grad():
                    r = g * 2
                return r
        y = N.apply(a).sum()
        rec("r", lambda: lib.autograd.grad(y, a, create_graph=True))
    elif kind == "enable_in_no_grad_fn":
        with lib.no_grad():
            with lib.enable_grad():
                y = a * 2
        rec("r", lambda: (y.requires_grad, y.grad_fn.name()))
    elif kind == "set_grad_enabled_deco":
        rec("r", lambda: lib.set_grad_enabled(False)(lambda: (a * 2).requires_grad)())
        rec("r2", lambda: lib.is_grad_enabled())
    elif kind == "inference_view":
        with lib.inference_mode():
            t = lib.ones(2, 3)
            v = t[0]
        rec("r", lambda: (v.is_inference(), v._base is t))
        rec("r2", lambda: v.requires_grad_(True))
    else:
        def run():
            with lib.inference_mode():
                with lib.inference_mode(False):
                    y = a * 2
                    return y.requires_grad, y.is_inference(), lib.is_inference_mode_enabled()
        rec("r", run)


def _backward_api(rng, lib, rec):
    a = _leaf(lib, _vals(rng, 6), (2, 3))
    y1 = (a * 2).sum()
    y2 = a * 3
    kind = rng.choice(["list", "len_mismatch", "grad_none_nonscalar", "scalar_grad_tensor",
                       "int_grad_tensor", "double_grad_tensor", "tensors_empty",
                       "grad_variables", "bw_twice_leaf_only", "retain_then_free"])
    rec("kind", lambda: kind)
    B = lib.autograd.backward
    if kind == "list":
        rec("r", lambda: B([y1, y2], [None, lib.ones(2, 3)]) or a.grad)
    elif kind == "len_mismatch":
        rec("r", lambda: B([y1, y2], [None]))
    elif kind == "grad_none_nonscalar":
        rec("r", lambda: B([y1, y2], [None, None]))
    elif kind == "scalar_grad_tensor":
        rec("r", lambda: B(y1, lib.tensor(2.0)) or a.grad)
    elif kind == "int_grad_tensor":
        rec("r", lambda: B(y2, lib.ones(2, 3, dtype=lib.int64)) or a.grad)
    elif kind == "double_grad_tensor":
        rec("r", lambda: B(y2, lib.ones(2, 3, dtype=lib.float64)) or a.grad)
    elif kind == "tensors_empty":
        rec("r", lambda: B([]))
    elif kind == "grad_variables":
        rec("r", lambda: B(y1, grad_variables=lib.tensor(3.0)) or a.grad)
    elif kind == "bw_twice_leaf_only":
        z = a.sum()
        rec("r", lambda: (z.backward(), z.backward(), a.grad)[2])
    else:
        rec("r", lambda: y1.backward(retain_graph=True) or a.grad.clone())
        rec("r2", lambda: y1.backward() or a.grad.clone())
        rec("r3", lambda: y1.backward())


def _edge_cases(rng, lib, rec):  # noqa: C901 - one branch per case
    a = _leaf(lib, _vals(rng, 3), (3,))
    kind = rng.choice(["hook_dtype", "grad_identity", "grad_setter_type", "grad_rg",
                       "detach_view", "no_backward", "instantiate", "nondiff_input",
                       "post_acc_order", "leaf_hook_retain_twice", "grad_on_nonleaf_set",
                       "save_output_setup", "needs_input_grad_setup", "requires_grad_view"])
    rec("kind", lambda: kind)
    if kind == "hook_dtype":
        b = a * 2
        b.register_hook(lambda g: g.double())
        rec("r", lambda: b.sum().backward())
    elif kind == "grad_identity":
        (a * 2).sum().backward()
        g = a.grad
        (a * 3).sum().backward()
        rec("r", lambda: (a.grad is g, a.grad))
    elif kind == "grad_setter_type":
        rec("r", lambda: setattr(a, "grad", 3.0))
        rec("r2", lambda: setattr(a, "grad", [1.0, 2.0, 3.0]))
    elif kind == "grad_rg":
        g = lib.ones(3, requires_grad=True)
        rec("r", lambda: setattr(a, "grad", g) or (a.grad is g, a.grad.requires_grad))
        rec("r2", lambda: (a * 2).sum().backward() or a.grad)
    elif kind == "detach_view":
        v = (a * 1.0)[1:]
        rec("r", lambda: v.detach_())
        w = a[1:]
        rec("r2", lambda: w.detach_())
    elif kind == "no_backward":
        class NB(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2
        rec("r", lambda: NB.apply(a).sum().backward())
    elif kind == "instantiate":
        class Inst(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g
        rec("r", lambda: Inst()(a))
        rec("r2", lambda: Inst.forward(None, a))
    elif kind == "nondiff_input":
        class ND(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_non_differentiable(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g
        rec("r", lambda: ND.apply(a).sum().backward() or a.grad)
    elif kind == "post_acc_order":
        order = []
        a.register_post_accumulate_grad_hook(lambda p: order.append(("p1", p.grad.tolist())))
        a.register_hook(lambda g: order.append("pre") or g * 2)
        a.register_post_accumulate_grad_hook(lambda p: order.append("p2"))
        rec("r", lambda: (a * 2).sum().backward() or (order, a.grad))
    elif kind == "leaf_hook_retain_twice":
        h = a.register_hook(lambda g: g + 1)
        y = (a * a).sum()
        rec("r", lambda: y.backward(retain_graph=True) or a.grad.clone())
        h.remove()
        rec("r2", lambda: y.backward() or a.grad)
    elif kind == "grad_on_nonleaf_set":
        b = a * 2
        rec("r", lambda: setattr(b, "grad", lib.ones(3)) or b.grad)
        rec("r2", lambda: b.sum().backward() or (b.grad, a.grad))
    elif kind in ("save_output_setup", "needs_input_grad_setup"):
        class S(lib.autograd.Function):
            @staticmethod
            def forward(x, y):
                return x.exp() * y

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(output, inputs[1])
                rec("needs_fw", lambda: ctx.needs_input_grad)

            @staticmethod
            def backward(ctx, g):
                out, y = ctx.saved_tensors
                rec("needs", lambda: ctx.needs_input_grad)
                return g * out, None
        y = _leaf(lib, _vals(rng, 3), (3,), rg=kind == "needs_input_grad_setup")
        rec("r", lambda: S.apply(a, y).sum().backward() or a.grad)
    else:
        v = a[1:]
        rec("r", lambda: v.requires_grad_(False))
        with lib.no_grad():
            w = a[1:]
        rec("r2", lambda: (w.requires_grad, w.is_leaf, w.requires_grad_(False).requires_grad))


def _func_transforms(rng, lib, rec):  # noqa: C901
    style = rng.choice(["ctx", "setup"])
    rule = rng.choice(["none", "generate", "static"])
    transform = rng.choice(["grad", "vmap", "jacrev", "jacfwd", "vjp"])
    rec("kind", lambda: (style, rule, transform))
    if style == "ctx":
        class T(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x.sin()

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * x.cos()
    else:
        class T(lib.autograd.Function):
            generate_vmap_rule = rule == "generate"

            @staticmethod
            def forward(x):
                return x.sin()

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(inputs[0])
                ctx.save_for_forward(inputs[0])

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * x.cos()

            @staticmethod
            def jvp(ctx, t):
                (x,) = ctx.saved_tensors
                return t * x.cos()

            if rule == "static":
                @staticmethod
                def vmap(info, in_dims, x):
                    return T.apply(x), in_dims[0]
    x = lib.tensor(np.array(_vals(rng, 3), dtype=np.float32))
    f = lib.func
    if transform == "grad":
        rec("r", lambda: f.grad(lambda t: T.apply(t).sum())(x))
    elif transform == "vmap":
        rec("r", lambda: f.vmap(T.apply)(x.reshape(3, 1)))
    elif transform == "jacrev":
        rec("r", lambda: f.jacrev(T.apply)(x))
    elif transform == "jacfwd":
        rec("r", lambda: f.jacfwd(T.apply)(x))
    else:
        def run():
            out, fn = f.vjp(T.apply, x)
            return out, fn(lib.ones(3))
        rec("r", run)
