"""Parity (round 28): what a forward-mode transform's function computes from its inputs
(or from anything) reports ``requires_grad=False``, no ``grad_fn`` and ``is_leaf`` as
PyTorch's dual tensors do, with what follows from it (``autograd.grad``/``backward``/hooks
inside the function refuse, ``detach_`` runs, ``.data =`` and a nested ``linearize``
refuse); tangents are unchanged, a write into a jvp input reaches the caller's tangent."""

import re

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

LIBS = (ember, torch)


def _np(x):
    return x.detach().cpu().numpy()


def _flags(t):
    return t.requires_grad, None if t.grad_fn is None else type(t.grad_fn).__name__, t.is_leaf


def _x(lib):
    return lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64)


def _t(lib):
    return lib.tensor([1.0, 2.0, -0.5], dtype=lib.float64)


def _transform(lib, api, f):
    """Run ``f`` under ``api`` on ``_x``; ``f``'s record of what it saw."""
    F = lib.func
    if api == "jvp":
        return F.jvp(f, (_x(lib),), (_t(lib),))
    if api == "linearize":
        out, fn = F.linearize(f, _x(lib))
        return out, fn(_t(lib))
    return F.jacfwd(f)(_x(lib))


def _computed(lib, rec, w):
    def f(x):
        y = x * 2
        rec["mul"] = _flags(y)
        rec["sum"] = _flags(y.sum())
        rec["view"] = _flags(x[1:])
        e = x * 3
        e.add_(1)
        rec["inplace"] = _flags(e)
        c = lib.zeros(3, dtype=lib.float64)
        c.add_(x)
        rec["into_plain"] = _flags(c)
        rec["closure"] = _flags(x * w)
        rec["closure_only"] = _flags(w * 2)
        y.requires_grad = False         # (a no-op on a tensor reporting False)
        rec["set_false"] = _flags(y)
        d = y.detach()
        rec["detach"] = _flags(d)
        y.detach_()
        rec["detach_"] = _flags(y)
        return (e * x).sin() + c
    return f


@pytest.mark.parametrize("api", ["jvp", "linearize", "jacfwd"])
def test_results_report_no_grad(api):
    seen = []
    for lib in LIBS:
        rec = {}
        w = lib.tensor([1.0, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
        out = _transform(lib, api, _computed(lib, rec, w))
        seen.append((rec, out))
    (ours, o_out), (theirs, t_out) = seen
    assert ours == theirs
    # (linearize's are forward_ad's dual tensors: one computed from a tensor that requires
    # grad does too)
    assert all(v == (False, None, True) for k, v in ours.items()
               if api != "linearize" or not k.startswith("closure"))
    for a, b in zip(o_out if isinstance(o_out, tuple) else (o_out,),
                    t_out if isinstance(t_out, tuple) else (t_out,)):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12)


def _raises(lib, body):
    try:
        lib.func.jvp(body, (_x(lib),), (_t(lib),))
    except RuntimeError as e:
        return str(e)
    return None


def _dual_inside(lib, x):
    fw = lib.autograd.forward_ad
    with fw.dual_level():
        return fw.unpack_dual(fw.make_dual(x * 2, lib.ones(3, dtype=lib.float64))).tangent


_BODIES = {
    "backward": lambda lib: lambda x: (x * x).sum().backward(),
    "grad_of_result": lambda lib: lambda x: lib.autograd.grad((x * x).sum(), x),
    "grad_wrt_result": lambda lib: lambda x: lib.autograd.grad((x * 2).sum(), x * 2),
    "data_set": lambda lib: lambda x: setattr(x * 2, "data", lib.zeros(3, dtype=lib.float64)),
    "retain_grad": lambda lib: lambda x: (x * 2).retain_grad(),
    "register_hook": lambda lib: lambda x: (x * 2).register_hook(lambda g: g),
    "requires_grad_": lambda lib: lambda x: (x * 2).requires_grad_(),
    "nested_linearize": lambda lib: lambda x: lib.func.linearize(lib.sin, x * 2)[0],
    "nested_linearize_const": lambda lib: lambda x: x * lib.func.linearize(
        lib.sin, lib.ones(3, dtype=lib.float64))[0],
    "dual_level_inside": lambda lib: lambda x: _dual_inside(lib, x),
    "class_weight_closure": lambda lib: lambda x: lib.nn.functional.cross_entropy(
        lib.ones(2, 3, dtype=lib.float64), lib.tensor([0, 2]),
        weight=x.abs() + lib.ones(3, dtype=lib.float64, requires_grad=True)),
}


@pytest.mark.parametrize("name", sorted(_BODIES))
def test_refusals_inside_jvp(name):
    ours, theirs = (_raises(lib, _BODIES[name](lib)) for lib in LIBS)
    assert theirs is not None
    assert ours in (theirs, re.sub(r"\btorch\.", "ember.", theirs))


def test_backward_inside_reverse_transforms():
    for api in ("grad", "vjp"):
        msgs = []
        for lib in LIBS:
            def f(x):
                (x * x).sum().backward()
                return (x * 2).sum()
            try:
                getattr(lib.func, api)(f, _x(lib)) if api == "vjp" else lib.func.grad(f)(_x(lib))
            except RuntimeError as e:
                msgs.append(str(e))
        assert len(msgs) == 2 and msgs[0] == msgs[1]


def test_class_weight_from_input_only_runs():
    outs = []
    for lib in LIBS:
        def f(x):
            return lib.nn.functional.cross_entropy(
                lib.tensor([[0.1, 0.2, 0.3], [1.0, -1.0, 0.5]], dtype=lib.float64),
                lib.tensor([0, 2]), weight=x.abs() + 1)
        outs.append(lib.func.jvp(f, (_x(lib),), (_t(lib),)))
    for a, b in zip(*outs):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12)


@pytest.mark.parametrize("write", ["mul_", "add_", "view_mul_", "sin_"])
def test_write_into_input_reaches_callers_tangent(write):
    seen = []
    for lib in LIBS:
        x, t = _x(lib), _t(lib)
        body = {"mul_": lambda a: a.mul_(3), "add_": lambda a: a.add_(1),
                "view_mul_": lambda a: a[1:].mul_(3), "sin_": lambda a: a.sin_() * a}[write]
        p, tangent = lib.func.jvp(body, (x,), (t,))
        seen.append([_np(v) for v in (p, tangent, x, t)])
    for a, b in zip(*seen):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def _layouts(lib, name):
    """A primal and a tangent laid out as ``name`` says, with the memory of each."""
    big_p, big_t = lib.ones(8, dtype=lib.float64), lib.arange(8, dtype=lib.float64)
    if name == "same_views":
        return big_p, big_t, big_p[1:4], big_t[1:4]
    if name == "other_offset":
        return big_p, big_t, big_p[1:4], big_t[2:5]
    if name == "primal_view":
        t = lib.arange(3, dtype=lib.float64)
        return big_p, t, big_p[1:4], t
    base = lib.arange(6, dtype=lib.float64)
    if name == "transposed":
        return big_p, base, lib.ones(2, 3, dtype=lib.float64), base.reshape(3, 2).t()
    if name == "expanded":
        return big_p, base, lib.ones(2, 3, dtype=lib.float64), base[:3].expand(2, 3)
    if name == "size_one_strides":      # (strides of a dimension of size 1 may differ)
        t = lib.arange(3, dtype=lib.float64)
        return big_p, t, lib.ones(3, 1, dtype=lib.float64), t.reshape(1, 3).t()
    return big_p, base, lib.ones(3, 2, dtype=lib.float64).t(), base.reshape(3, 2).t()


@pytest.mark.parametrize("name", ["same_views", "other_offset", "primal_view", "transposed",
                                  "expanded", "size_one_strides", "both_transposed"])
def test_write_into_input_reaches_only_an_aliased_tangent(name):
    # PyTorch's jvp uses the tangent itself only where its layout is the primal's; else a
    # copy, which a write into the primal leaves the caller's tangent as it was
    seen = []
    for lib in LIBS:
        _, memory, p, t = _layouts(lib, name)
        out = lib.func.jvp(lambda a: a.mul_(3), (p,), (t,))
        seen.append([_np(v) for v in (*out, t, memory)])
    for a, b in zip(*seen):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def _nested(lib, name):
    F = lib.func
    x, t = _x(lib), _t(lib)
    rec = {}

    def f(a):
        rec["in"] = _flags(a)[0]
        y = a.sin() * a
        rec["y"] = _flags(y)[:2]
        return y

    if name == "jvp_of_grad":
        out = F.jvp(F.grad(lambda a: f(a).sum()), (x,), (t,))
    elif name == "grad_of_jvp":
        out = F.grad(lambda a: F.jvp(f, (a,), (t,))[1].sum())(x)
    elif name == "jacfwd_of_jacrev":
        out = F.jacfwd(F.jacrev(f))(x)
    elif name == "vmap_of_jvp":
        out = F.vmap(lambda a: F.jvp(f, (a,), (lib.ones((), dtype=lib.float64),))[1])(x)
    else:
        out = F.jvp(F.vmap(f), (x,), (t,))
    return out, rec


@pytest.mark.parametrize("name", ["jvp_of_grad", "grad_of_jvp", "jacfwd_of_jacrev",
                                  "vmap_of_jvp", "jvp_of_vmap"])
def test_nested_transforms(name):
    (o_out, ours), (t_out, theirs) = (_nested(lib, name) for lib in LIBS)
    assert ours == theirs
    for a, b in zip(o_out if isinstance(o_out, tuple) else (o_out,),
                    t_out if isinstance(t_out, tuple) else (t_out,)):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12)


def test_dual_level_results():
    seen = []
    for lib in LIBS:
        fw = lib.autograd.forward_ad
        w = lib.tensor([1.0, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
        with fw.dual_level():
            d = fw.make_dual(_x(lib), _t(lib))
            y = d * 2
            y.add_(1)
            z = y * w
            seen.append((_flags(d), _flags(y), _flags(z), _np(fw.unpack_dual(z).tangent)))
    assert seen[0][:3] == seen[1][:3]
    np.testing.assert_allclose(seen[0][3], seen[1][3], rtol=1e-12)


@pytest.mark.parametrize("api", ["jvp", "linearize", "jacfwd"])
def test_transforms_inside_dual_level_refuse(api):
    msgs = []
    for lib in LIBS:
        fw = lib.autograd.forward_ad
        with pytest.raises(RuntimeError) as info:
            with fw.dual_level():
                _transform(lib, api, lib.sin)
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1] == "Nested forward mode AD is not supported at the moment"


def test_nested_transforms_results_inside_jvp():
    seen = []
    for lib in LIBS:
        F, t, rec = lib.func, _t(lib), {}

        def f(a):
            p, tt = F.jvp(lib.sin, (a * 2,), (t,))
            g = F.grad(lambda b: (b * a).sum())(a)
            v = F.vmap(lambda b: b * 3)(a)
            rec.update(p=_flags(p), t=_flags(tt), g=_flags(g), v=_flags(v))
            return p * tt + g * v
        seen.append((rec, [_np(o) for o in F.jvp(f, (_x(lib),), (t,))]))
    assert seen[0][0] == seen[1][0]
    for a, b in zip(seen[0][1], seen[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_views_and_bases():
    seen = []
    for lib in LIBS:
        w = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        captured = w * 1
        rec = {}

        def f(a):
            c = lib.zeros(3, dtype=lib.float64)
            c[1:].add_(a[1:])           # (written through a view: the base is the function's)
            rec["base"] = _flags(c)
            rec["view_of_captured"] = _flags(captured[1:])
            rec["captured"] = _flags(captured)
            return c * a
        seen.append((rec, [_np(o) for o in lib.func.jvp(f, (_x(lib),), (_t(lib),))]))
    assert seen[0][0] == seen[1][0]
    for a, b in zip(seen[0][1], seen[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def _raised(fn):
    try:
        fn()
    except RuntimeError as e:
        return str(e)
    return None


def test_backward_inside_vmap_refuses_autograd_grad_runs():
    seen = []
    for lib in LIBS:
        w = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        xs = lib.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], dtype=lib.float64)

        def calls_backward(x):
            (w * w).sum().backward()
            return x

        def calls_grad(x):
            g, = lib.autograd.grad((w * w * w).sum(), w, create_graph=True)
            return g * x
        seen.append((_raised(lambda: lib.func.vmap(calls_backward)(xs)), w.grad,
                     _np(lib.func.vmap(calls_grad)(xs))))
    assert seen[0][0] == seen[1][0] and "backward() called inside a functorch" in seen[0][0]
    assert seen[0][1] is None and seen[1][1] is None
    np.testing.assert_allclose(seen[0][2], seen[1][2], rtol=1e-12)


_REVERSE_INPUTS = {
    "grad_of_requires_grad": lambda lib, f, x: lib.func.grad(f)(x.requires_grad_()),
    "vjp_of_requires_grad": lambda lib, f, x: lib.func.vjp(f, x.requires_grad_()),
    "grad_grad": lambda lib, f, x: lib.func.grad(lambda a: lib.func.grad(f)(a).sum())(x),
    "jacrev_jacrev": lambda lib, f, x: lib.func.jacrev(lib.func.jacrev(f))(x),
    "jvp_grad": lambda lib, f, x: lib.func.jvp(lib.func.grad(f), (x,), (_t(lib),)),
    "jacfwd_jacrev": lambda lib, f, x: lib.func.jacfwd(lib.func.jacrev(f))(x),
}


@pytest.mark.parametrize("name", sorted(_REVERSE_INPUTS))
def test_reverse_transform_inputs_are_leaves(name):
    seen = []
    for lib in LIBS:
        rec = []

        def f(a):
            rec.append((_flags(a), a.grad, _raised(lambda: a.add_(1))))
            with lib.no_grad():
                a.mul_(1)               # (under no_grad the write runs)
            return (a * a * a).sum()
        out = _REVERSE_INPUTS[name](lib, f, _x(lib))
        seen.append((rec, [_np(o) for o in lib.utils._pytree.tree_flatten(out)[0]
                           if isinstance(o, lib.Tensor)]))
    assert seen[0][0] == seen[1][0]
    assert seen[0][0][-1][0] == (True, None, True)
    for a, b in zip(seen[0][1], seen[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_jvp_primal_output_is_an_alias():
    seen = []
    for lib in LIBS:
        w = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        rec = []
        for f in (lambda a: a * w, lambda a: a + w, lambda a: (a * w).exp(), lambda a: a * 2,
                  lambda a: (a * w)[1:]):
            p, t = lib.func.jvp(f, (_x(lib),), (_t(lib),))
            rec.append((_flags(p), p._is_view(), _np(p), _np(t)))
        p, t, aux = lib.func.jvp(lambda a: (a * w, a * w), (_x(lib),), (_t(lib),), has_aux=True)
        rec.append((_flags(aux), aux._is_view()))
        p, _ = lib.func.linearize(lambda a: a * w, _x(lib))
        rec.append(_flags(p))
        p, _ = lib.func.jvp(lambda a: a * w * w, (_x(lib),), (_t(lib),))
        p.sum().backward()
        rec.append(_np(w.grad))
        seen.append(rec)
    for a, b in zip(seen[0], seen[1]):
        if isinstance(a, np.ndarray):
            np.testing.assert_allclose(a, b, rtol=1e-12)
        elif len(a) == 4:
            assert a[:2] == b[:2]
            np.testing.assert_allclose(a[2], b[2], rtol=1e-12)
            np.testing.assert_allclose(a[3], b[3], rtol=1e-12)
        else:
            assert a == b
    assert seen[0][0][0] == (True, "AliasBackward0", False)
