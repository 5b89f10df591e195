"""Round 29: functorch leftovers against torch.func -- retain_grad inside transforms, what
results leaked out of a transformed function report afterwards, linearize and forward_ad
under vmap, and tensor hooks in composed transforms. Each program runs with ember and with
torch; values, flags and error messages are compared."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

X = [1.0, 2.0]
XX = [[1.0, 2.0], [3.0, -0.5]]
T = [1.0, -0.5]


def _outcome(lib, program):
    """What ``program(lib)`` gives: its value (nested lists, flags), or the error."""
    try:
        return "ok", _plain(program(lib))
    except Exception as e:      # (both libraries' errors are compared, named alike)
        return type(e).__name__, str(e).replace(lib.__name__ + ".", "torch.")


def _plain(v):
    if isinstance(v, (tuple, list)):
        return [_plain(e) for e in v]
    if hasattr(v, "tolist") and hasattr(v, "requires_grad"):
        return np.round(np.asarray(v.tolist(), dtype=float), 10).tolist()
    return v


def _same(program):
    ours, theirs = _outcome(ember, program), _outcome(torch, program)
    assert ours == theirs


def _transforms(lib, f, x):
    F = lib.func
    t = lib.ones_like(x)
    return {"grad": lambda: F.grad(f)(x), "vjp": lambda: F.vjp(f, x)[0],
            "jvp": lambda: F.jvp(f, (x,), (t,)), "jacrev": lambda: F.jacrev(f)(x),
            "jacfwd": lambda: F.jacfwd(f)(x), "hessian": lambda: F.hessian(f)(x),
            "vmap": lambda: F.vmap(f)(x.unsqueeze(0)), "linearize": lambda: F.linearize(f, x)[0]}


_NAMES = ["grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap", "linearize"]


@pytest.mark.parametrize("what", ["intermediate", "input", "outer_leaf", "outer_result",
                                  "no_grad"])
@pytest.mark.parametrize("api", _NAMES)
def test_retain_grad_inside_transforms(api, what):
    def program(lib):
        x = lib.tensor(X, dtype=lib.float64)
        w = lib.tensor(X, dtype=lib.float64, requires_grad=True)
        w2 = w * 2

        def f(x):
            y = x * 3
            target = {"intermediate": y, "input": x, "outer_leaf": w, "outer_result": w2,
                      "no_grad": lib.ones(2, dtype=lib.float64)}[what]
            target.retain_grad()
            return (y * w2).sum()
        return _transforms(lib, f, x)[api]()
    _same(program)


@pytest.mark.parametrize("closure", [False, True])
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("api", ["grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian"])
def test_leaked_results_after_the_transform(api, requires_grad, closure):
    def program(lib):
        x = lib.tensor(X, dtype=lib.float64, requires_grad=requires_grad)
        w = lib.tensor([3.0, 4.0], dtype=lib.float64, requires_grad=True)
        leak = []

        def f(x):
            y = x.exp()
            leak.extend([y, y[0], y.view(2)])
            return (y * w).sum() if closure else y.sum()
        _transforms(lib, f, x)[api]()
        return [(t.requires_grad, t.grad_fn is None, t.is_leaf, _plain(t)) for t in leak]
    _same(program)


def test_leaked_input_and_inplace_result_of_jvp():
    def program(lib):
        leak = []

        def f(x):
            z = x.exp().clone()
            z.mul_(2)
            leak.extend([x, z])
            return z.sum()
        x = lib.tensor(X, dtype=lib.float64)
        lib.func.jvp(f, (x,), (lib.ones_like(x),))
        used = leak[1] * 2
        return [(t.requires_grad, t.grad_fn is None) for t in leak + [used]]
    _same(program)


@pytest.mark.parametrize("nest", ["grad(jvp)", "jvp(grad)", "jacfwd(jacfwd)", "jacrev(jacfwd)",
                                  "vmap(jvp)"])
def test_leaked_results_of_nested_transforms(nest):
    def program(lib):
        F = lib.func
        x = lib.tensor(X, dtype=lib.float64)
        t = lib.ones_like(x)
        leak = []

        def f(x):
            y = x.exp()
            leak.append(y)
            return y.sum()
        {"grad(jvp)": lambda: F.grad(lambda x: F.jvp(f, (x,), (t,))[1])(x),
         "jvp(grad)": lambda: F.jvp(F.grad(f), (x,), (t,)),
         "jacfwd(jacfwd)": lambda: F.jacfwd(F.jacfwd(f))(x),
         "jacrev(jacfwd)": lambda: F.jacrev(F.jacfwd(f))(x),
         "vmap(jvp)": lambda: F.vmap(lambda x: F.jvp(f, (x,), (x,)))(x.unsqueeze(0))}[nest]()
        return [(y.requires_grad, y.grad_fn is None) for y in leak]
    _same(program)


@pytest.mark.parametrize("api", ["jvp", "jacfwd", "vjp"])
def test_leaked_results_keep_higher_derivatives_of_a_closure(api):
    def program(lib):
        F = lib.func
        x = lib.tensor(X, dtype=lib.float64)
        w = lib.tensor([3.0, 4.0], dtype=lib.float64, requires_grad=True)
        leak = []

        def f(x):
            y = x * w
            v = y.view(2)
            leak.extend([y, v])
            return (y * y * v).sum()
        if api == "jvp":
            out = F.jvp(f, (x,), (lib.tensor(T, dtype=lib.float64),))[1]
        elif api == "jacfwd":
            out = F.jacfwd(f)(x).sum()
        else:
            out = F.vjp(f, x)[1](lib.tensor(1.0, dtype=lib.float64))[0].sum()
        gw, = lib.autograd.grad(out, w, create_graph=True)
        ggw, = lib.autograd.grad(gw.sum(), w)
        return [gw, ggw, [(t.requires_grad, t.grad_fn is None) for t in leak]]
    _same(program)


@pytest.mark.parametrize("case", ["batched_primal", "jvp_fn", "nested", "unbatched_primal",
                                  "vmap_jvp", "vmap_jacfwd", "linearize_vmap", "vmap_hessian"])
def test_linearize_under_vmap(case):
    def program(lib):
        F = lib.func
        xs = lib.tensor(XX, dtype=lib.float64)
        c = lib.tensor(T, dtype=lib.float64)
        return {
            "batched_primal": lambda: F.vmap(lambda t: F.linearize(lib.sin, t)[0])(xs),
            "jvp_fn": lambda: F.vmap(lambda t: F.linearize(lib.sin, t)[1](t))(xs),
            "nested": lambda: F.vmap(F.vmap(lambda t: F.linearize(lib.sin, t)[0]))(xs),
            "unbatched_primal": lambda: F.vmap(lambda t: F.linearize(lib.sin, c)[1](t))(xs),
            "vmap_jvp": lambda: F.vmap(lambda t: F.jvp(lib.sin, (t,), (t,)))(xs),
            "vmap_jacfwd": lambda: F.vmap(F.jacfwd(lib.sin))(xs),
            "linearize_vmap": lambda: F.linearize(F.vmap(lib.sin), xs)[1](xs),
            "vmap_hessian": lambda: F.vmap(F.hessian(lambda z: z.sin().sum()))(xs),
        }[case]()
    _same(program)


@pytest.mark.parametrize("case", ["make_dual_primal", "make_dual_tangent", "unpack_batched",
                                  "unpack_plain", "unpack_outside_level", "unbatched_dual"])
def test_forward_ad_under_vmap(case):
    def program(lib):
        fwAD = lib.autograd.forward_ad
        xs = lib.tensor(XX, dtype=lib.float64)
        c = lib.tensor(T, dtype=lib.float64)
        vmap = lib.func.vmap
        if case == "unpack_outside_level":
            return vmap(lambda t: fwAD.unpack_dual(t).primal)(xs)
        with fwAD.dual_level():
            d = fwAD.make_dual(c, lib.ones_like(c))
            return {
                "make_dual_primal": lambda: vmap(lambda t: fwAD.make_dual(t, t))(xs),
                "make_dual_tangent": lambda: vmap(lambda t: fwAD.make_dual(c, t))(xs),
                "unpack_batched": lambda: vmap(lambda t: fwAD.unpack_dual(d * t).primal)(xs),
                "unpack_plain": lambda: vmap(lambda t: fwAD.unpack_dual(t).primal)(xs),
                "unbatched_dual": lambda: vmap(lambda t: fwAD.unpack_dual(d).primal + t)(xs),
            }[case]()
    _same(program)


_COMPOSITIONS = ["grad", "jvp(grad)", "jacfwd(grad)", "jacrev(grad)", "grad(grad)", "hessian",
                 "jacfwd(jacrev)", "jacrev(jacrev)", "vmap(grad)", "vjp", "grad(jvp(grad))",
                 "vmap(jacrev)"]


@pytest.mark.parametrize("where", ["intermediate", "input"])
@pytest.mark.parametrize("returns", ["tensor", "none"])
@pytest.mark.parametrize("nest", _COMPOSITIONS)
def test_tensor_hooks_in_composed_transforms(nest, returns, where):
    def program(lib):
        F = lib.func
        x = lib.tensor(X, dtype=lib.float64)
        t = lib.tensor(T, dtype=lib.float64)
        seen = []

        def hook(g):
            seen.append(list(g.shape))
            return g * 2 if returns == "tensor" else None

        def f(x):
            if where == "input":
                x.register_hook(hook)
            y = x * x
            if where == "intermediate":
                y.register_hook(hook)
            return (y * y.sin()).sum()
        out = {
            "grad": lambda: F.grad(f)(x),
            "jvp(grad)": lambda: F.jvp(F.grad(f), (x,), (t,)),
            "jacfwd(grad)": lambda: F.jacfwd(F.grad(f))(x),
            "jacrev(grad)": lambda: F.jacrev(F.grad(f))(x),
            "grad(grad)": lambda: F.grad(lambda x: F.grad(f)(x).sum())(x),
            "hessian": lambda: F.hessian(f)(x),
            "jacfwd(jacrev)": lambda: F.jacfwd(F.jacrev(f))(x),
            "jacrev(jacrev)": lambda: F.jacrev(F.jacrev(f))(x),
            "vmap(grad)": lambda: F.vmap(F.grad(f))(lib.stack([x, t])),
            "vjp": lambda: F.vjp(f, x)[1](lib.tensor(1.0, dtype=lib.float64)),
            "grad(jvp(grad))": lambda: F.grad(
                lambda x: F.jvp(F.grad(f), (x,), (t,))[1].sum())(x),
            "vmap(jacrev)": lambda: F.vmap(F.jacrev(f))(lib.stack([x, t])),
        }[nest]()
        return [out, seen]
    _same(program)


def test_hook_on_a_tensor_batched_inside_grad_is_refused():
    def program(lib):
        F = lib.func

        def f(x):
            y = x * x
            y.register_hook(lambda g: g * 2)
            return (y * y.sin()).sum()
        xs = lib.tensor(XX, dtype=lib.float64)
        return F.grad(lambda xs: F.vmap(f)(xs).sum())(xs)
    _same(program)


@pytest.mark.parametrize("bad", ["size", "type", "dtype"])
@pytest.mark.parametrize("nest", ["grad", "vmap(grad)"])
def test_a_bad_hook_value_inside_transforms(nest, bad):
    def program(lib):
        F = lib.func

        def hook(g):
            return {"size": lambda: g[:1], "type": lambda: 3, "dtype": lambda: g.float()}[bad]()

        def f(x):
            y = x * x
            y.register_hook(hook)
            return y.sum()
        xs = lib.tensor(XX, dtype=lib.float64)
        return F.grad(f)(xs[0]) if nest == "grad" else F.vmap(F.grad(f))(xs)
    _same(program)


@pytest.mark.parametrize("write", ["base", "view", "both"])
def test_writes_into_returned_views_of_a_cut_result_keep_their_history(write):
    # (jvp returns a view of its result and the result: the cut result's twin is their base)
    def program(lib):
        w = lib.tensor([3.0, 4.0], dtype=lib.float64, requires_grad=True)
        leak = []

        def f(x):
            h = x * w
            leak.append(h)
            return h[:1], h
        x = lib.tensor([0.3, 0.7], dtype=lib.float64)
        (p, q), t = lib.func.jvp(f, (x,), (lib.tensor(T, dtype=lib.float64),))
        if write != "view":
            q.mul_(2)
        if write != "base":
            p.mul_(5)
        (p.sum() * 3 + (q * q).sum() + t[0].sum() + t[1].sum()).backward()
        return [(y.requires_grad, y.grad_fn is None) for y in leak + [p, q]], w.grad, p, q
    _same(program)


@pytest.mark.parametrize("how", ["linearize_view", "linearize_copy", "jacfwd_given"])
def test_the_callers_tensors_written_by_a_forward_mode_function_keep_their_history(how):
    def program(lib):
        F = lib.func
        p = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        buf = p * 1
        x = lib.tensor([0.3, 0.7], dtype=lib.float64)
        if how == "linearize_view":
            F.linearize(lambda x: buf[0:1].copy_(x[0:1]) * x, x)
        elif how == "linearize_copy":     # (PyTorch's linearize runs f twice: no add_)
            F.linearize(lambda x: buf.copy_(x * 2) * x, x)
        else:
            F.jacfwd(lambda x, b: b.add_(x) * x)(x, buf)
        flags = (buf.requires_grad, type(buf.grad_fn).__name__)
        (buf * buf).sum().backward()
        return flags, buf, p.grad
    _same(program)
