"""Round 30: views and func-transform leftovers against torch 2.13 -- a view copy's out= that
requires grad, linearize's view of an input that requires grad, forward_ad inside
vmap(grad), vmap(linearize) over a batched closure, closures writing an argument, polygamma_
and as_strided(_) under vmap, gumbel_softmax's fallback warning. Each program runs with ember
and with torch; values, flags, node names, warnings and error messages are compared."""

import warnings

import numpy as np
import pytest

import ember
from tests.parity._programs import plain

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

XX = [[-1.0, -0.5, 0.25], [0.5, 1.0, 2.0]]
POS = [[0.5, 1.0, 1.5], [2.0, 2.5, 3.0]]


def _outcome(lib, program):
    """``program(lib)``'s value (nested lists, flags) or error, and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = "ok", plain(program(lib))
        except Exception as e:      # (both libraries' errors are compared, named alike)
            result = type(e).__name__, str(e).replace(lib.__name__ + ".", "torch.")
    shown = sorted({str(w.message).split(" (Triggered internally")[0] for w in caught
                    if "performance drop" in str(w.message)})
    return result, shown


def _close(a, b):
    """Equal, floats within float32 rounding (the two libraries' kernels differ there)."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return _close(list(a), list(b))
    if isinstance(a, float) and isinstance(b, float):
        return bool(np.isclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True))
    return a == b


def _same(program):
    ours, theirs = _outcome(ember, program), _outcome(torch, program)
    assert _close(ours, theirs), (ours, theirs)


def _node(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


# --- 1. a view copy's out= ---------------------------------------------------------------------

def _backward_error(lib, t):
    try:
        t.sum().backward()
    except RuntimeError as e:
        return str(e)
    return "no error"


@pytest.mark.parametrize("input_grad", [False, True])
def test_transpose_copy_into_a_view_of_a_tensor_requiring_grad(input_grad):
    def program(lib):
        y = lib.zeros(2, 3, requires_grad=True).clone()
        v = y[0:1]
        x = lib.arange(3.).reshape(3, 1).requires_grad_(input_grad)
        r = lib.transpose_copy(x, 0, 1, out=v)
        return (r is v, _node(y), _node(v), y._version, y.requires_grad, v,
                _backward_error(lib, y))
    _same(program)


@pytest.mark.parametrize("fname", ["transpose_copy", "permute_copy", "t_copy"])
def test_view_copy_out_nodes(fname):
    def program(lib):
        x = lib.arange(3.).reshape(3, 1).requires_grad_()
        fn = getattr(lib, fname)
        args = {"transpose_copy": (0, 1), "permute_copy": ((1, 0),), "t_copy": ()}[fname]
        plain = lib.zeros(1, 3)
        fn(x, *args, out=plain)
        tracked = lib.zeros(1, 3, requires_grad=True).clone()
        fn(lib.ones(3, 1), *args, out=tracked)
        with lib.no_grad():
            quiet = lib.zeros(1, 3)
            fn(x, *args, out=quiet)
        return (_node(plain), plain.requires_grad, [type(n).__name__ for n, _ in
                                                    plain.grad_fn.next_functions],
                _backward_error(lib, plain), _node(tracked), _backward_error(lib, tracked),
                _node(quiet), quiet.requires_grad, plain)
    _same(program)


@pytest.mark.parametrize("case", ["leaf", "view_of_leaf", "no_grad_view"])
def test_view_copy_out_refusals(case):
    def program(lib):
        if case == "leaf":
            out = lib.zeros(1, 3, requires_grad=True)
        elif case == "view_of_leaf":
            out = lib.zeros(3, requires_grad=True).view(1, 3)
        else:
            y = lib.zeros(3, requires_grad=True).clone()
            with lib.no_grad():
                out = y.view(1, 3)
        return lib.transpose_copy(lib.ones(3, 1), 0, 1, out=out)
    _same(program)


def test_split_copy_writes_outs_requiring_grad_untracked():
    def program(lib):
        a, b = lib.zeros(2, requires_grad=True), lib.zeros(2, requires_grad=True).clone()
        x = lib.arange(4.).requires_grad_()
        r = lib.split_copy(x, 2, out=[a, b])
        return r, a, b, _node(a), _node(b), b._version
    _same(program)


@pytest.mark.parametrize("fname", ["split_copy", "unbind_copy"])
@pytest.mark.parametrize("outs", ["leaf", "nonleaf", "plain"])
def test_several_result_copies_outs_requiring_grad(fname, outs):
    # split_copy writes them untracked, unbind_copy refuses them (grad mode on)
    def program(lib):
        x = lib.arange(6.).reshape(2, 3).requires_grad_()
        args = (1,) if fname == "split_copy" else ()

        def targets():
            made = [lib.zeros((1, 3) if args else 3, requires_grad=outs != "plain")
                    for _ in range(2)]
            return [t.clone() for t in made] if outs == "nonleaf" else made
        with lib.no_grad():
            quiet = targets()
            getattr(lib, fname)(x, *args, out=quiet)
        loud = targets()
        r = getattr(lib, fname)(x, *args, out=loud)
        return r, quiet, loud, [_node(t) for t in quiet + loud]
    _same(program)


@pytest.mark.parametrize("fname", ["alias_copy", "detach_copy"])
@pytest.mark.parametrize("view_input", [False, True])
def test_alias_and_detach_copy_out_of_an_input_requiring_grad(fname, view_input):
    def program(lib):
        x = (lib.arange(3.).reshape(3, 1) if view_input else lib.arange(3.)).requires_grad_()
        out = lib.zeros(x.shape)
        getattr(lib, fname)(x, out=out)
        return (_node(out), out.requires_grad, [type(n).__name__ for n, _ in
                                                out.grad_fn.next_functions], out,
                _backward_error(lib, out))
    _same(program)


@pytest.mark.parametrize("grad_mode", [False, True])
@pytest.mark.parametrize("case", ["input", "plain_nonleaf_out", "leaf_out", "none"])
def test_frobenius_norm_out_refuses_autograd(case, grad_mode):
    def program(lib):
        x = lib.arange(6.).reshape(2, 3).requires_grad_(case == "input")
        out = (lib.zeros(2, requires_grad=True).clone() if case == "plain_nonleaf_out" else
               lib.zeros(2, requires_grad=case == "leaf_out"))
        with lib.set_grad_enabled(grad_mode):
            r = lib.frobenius_norm(x, (1,), out=out)
        return r is out, out, _node(out), out.requires_grad
    _same(program)


# --- 2. what linearize's function sees ---------------------------------------------------------

@pytest.mark.parametrize("requires_grad", [False, True])
def test_linearize_jvp_jacfwd_inputs_report_requires_grad(requires_grad):
    def program(lib):
        seen = []

        def f(x, y):
            z = x.sin() * y
            seen.append((x.requires_grad, x.is_leaf, _node(x), y.requires_grad,
                         z.requires_grad))
            return z
        x = lib.tensor([0.5, 1.0, 2.0], requires_grad=requires_grad)
        y = lib.tensor([2.0, 1.0, -1.0])
        out, jvp_fn = lib.func.linearize(f, x, y)
        lin = seen[0]
        seen.clear()
        lib.func.jvp(f, (x, y), (lib.ones(3), lib.ones(3)))
        lib.func.jacfwd(f)(x, y)
        return lin, seen, out.requires_grad, jvp_fn(lib.ones(3), lib.zeros(3))
    _same(program)


def test_linearize_refuses_writing_a_leaf_input_requiring_grad():
    _same(lambda lib: lib.func.linearize(lambda x: x.mul_(2),
                                         lib.ones(3, requires_grad=True)))


# --- 3. forward_ad inside vmap(grad) -----------------------------------------------------------

def _directional_loss(lib):
    fwAD = lib.autograd.forward_ad

    def loss(w, x, v):
        # the squared directional derivative of a small model along v, plus its value
        with fwAD.dual_level():
            d = fwAD.make_dual(x, v)
            y = (lib.tanh(d * w) * d).sum()
            primal, tangent = fwAD.unpack_dual(y)
        return tangent ** 2 + primal
    return loss


@pytest.mark.parametrize("in_dims", [(None, 0, 0), (0, 0, None), (None, None, 0)])
def test_vmap_grad_through_make_dual(in_dims):
    def program(lib):
        loss = _directional_loss(lib)
        w = lib.tensor([0.7, -0.3]) if in_dims[0] == 0 else lib.tensor(0.7)
        x = lib.tensor(XX) if in_dims[1] == 0 else lib.tensor(XX[0])
        v = lib.tensor(POS) if in_dims[2] == 0 else lib.tensor(POS[1])
        return [lib.func.vmap(lib.func.grad(loss, argnums=k), in_dims=in_dims)(w, x, v)
                for k in (0, 1)]
    _same(program)


def test_nested_vmap_grad_through_make_dual():
    def program(lib):
        loss = _directional_loss(lib)
        xs = lib.tensor([XX, POS])
        vs = lib.tensor(POS)
        inner = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, None))
        return lib.func.vmap(inner, in_dims=(None, 0, 0))(lib.tensor(0.7), xs, vs)
    _same(program)


def test_make_dual_directly_under_vmap_still_refused():
    def program(lib):
        fwAD = lib.autograd.forward_ad

        def f(x):
            with fwAD.dual_level():
                return fwAD.unpack_dual(fwAD.make_dual(x, lib.ones_like(x)) ** 2).tangent
        return lib.func.vmap(f)(lib.tensor(XX))
    _same(program)


# --- 4. vmap(linearize) and closures writing an argument ----------------------------------------

@pytest.mark.parametrize("use", ["jvp_fn", "output"])
def test_vmap_linearize_over_a_batched_closure_is_refused(use):
    def program(lib):
        x = lib.tensor([0.5, 1.0, 2.0])

        def per(c):
            out, jvp_fn = lib.func.linearize(lambda t: t.sin() * c, x)
            return jvp_fn(lib.ones(3)) if use == "jvp_fn" else out
        return lib.func.vmap(per)(lib.tensor(XX))
    _same(program)


def test_vmap_linearize_of_an_unbatched_closure_runs():
    def program(lib):
        x, c = lib.tensor([0.5, 1.0, 2.0]), lib.tensor([1.0, 2.0, 3.0])
        return lib.func.vmap(lambda t: lib.func.linearize(lambda u: u.sin() * c, x)[1](t))(
            lib.tensor(XX))
    _same(program)


@pytest.mark.parametrize("transform", ["grad", "vjp", "jvp", "jacrev"])
@pytest.mark.parametrize("write", ["mul_", "setitem"])
def test_closure_writing_the_argument_is_refused(transform, write):
    def program(lib):
        a = lib.ones(3)

        def f(x):
            if write == "mul_":
                a.mul_(2)
            else:
                a[0] = 5.0
            return (x * 3).sum()
        if transform == "grad":
            return lib.func.grad(f)(a)
        if transform == "vjp":
            return lib.func.vjp(f, a)[0]
        if transform == "jvp":
            return lib.func.jvp(f, (a,), (lib.ones(3),))
        return lib.func.jacrev(f)(a)
    _same(program)


def test_writes_that_stay_allowed():
    def program(lib):
        a = lib.ones(3)
        jvp_write = lib.func.jvp(lambda x: (x.mul_(2), (x * 3).sum())[1], (a,),
                                 (lib.ones(3),))
        b = lib.ones(3)
        given = lib.func.grad(lambda x, y: (y.mul_(2), (x * y).sum())[1])(lib.ones(3), b)
        return jvp_write, a, given, b
    _same(program)


# --- 5. polygamma_ and as_strided(_) under vmap -----------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 2])
def test_vmap_polygamma_inplace(n):
    def program(lib):
        xs = lib.tensor(POS)
        out = lib.func.vmap(lambda x: x.clone().polygamma_(n))(xs)
        written = xs.clone()
        lib.func.vmap(lambda x: x.polygamma_(n))(written)
        g = lib.func.grad(lambda t: lib.func.vmap(lambda r: r.clone().polygamma_(n))(t).sum())
        return out, written, g(xs)
    _same(program)


@pytest.mark.parametrize("case", ["clone", "input", "offset"])
def test_vmap_as_strided_inplace_leaves_the_tensor(case):
    def program(lib):
        xs = lib.tensor(POS)

        def f(x):
            y = x if case == "input" else x.clone()
            r = y.as_strided_((2,), (1,), 1) if case == "offset" else y.as_strided_((2,), (2,))
            return r is y, list(y.shape), y + 1
        flags = []

        def g(x):
            same, shape, value = f(x)
            flags.append((same, shape))
            return value
        return lib.func.vmap(g)(xs.clone()), flags
    _same(program)


@pytest.mark.parametrize("case", ["plain", "offset", "view", "in_dims1", "oob", "oob_view",
                                  "nested", "own_offset", "no_examples", "no_examples_oob",
                                  "empty_examples", "empty_result"])
def test_vmap_as_strided(case):
    def program(lib):
        xs = lib.arange(12.).reshape(2, 6)
        vmap = lib.func.vmap
        if case == "plain":
            return vmap(lambda x: x.as_strided((2,), (2,)))(xs)
        if case == "offset":
            return vmap(lambda x: x.as_strided((2, 2), (2, 1), 1))(xs)
        if case == "view":
            return vmap(lambda x: x[1:].as_strided((2,), (2,), 2))(xs)
        if case == "in_dims1":
            return vmap(lambda x: lib.as_strided(x, (2,), (2,)), in_dims=1)(
                xs.t().contiguous())
        if case == "oob":
            return vmap(lambda x: x.as_strided((4,), (2,)))(xs)
        if case == "oob_view":
            return vmap(lambda x: x[2:].as_strided((2,), (2,), 0))(xs)
        if case.startswith("no_examples"):      # (a batch of size 0)
            size = 8 if case.endswith("oob") else 2
            return vmap(lambda x: x.as_strided((size,), (1,)))(lib.zeros(0, 6))
        if case.startswith("empty"):            # (examples of no elements)
            size = 0 if case == "empty_result" else 2
            return vmap(lambda x: x.as_strided((size,), (1,)))(lib.zeros(3, 0))
        if case == "nested":
            return vmap(vmap(lambda x: x.as_strided((2,), (1,), 1)))(xs.reshape(2, 2, 3))
        return vmap(lambda x: x[2:].as_strided((2,), (1,), x[2:].storage_offset() + 1))(xs)
    _same(program)


def test_grad_and_jacrev_of_as_strided_under_vmap():
    def program(lib):
        xs = lib.arange(12.).reshape(2, 6)
        g = lib.func.vmap(lib.func.grad(lambda x: (x.as_strided((2, 2), (2, 1), 1) ** 2).sum()))
        return g(xs), lib.func.jacrev(lambda x: x.as_strided((2,), (2,), 1))(lib.arange(6.))
    _same(program)


# --- 6. gumbel_softmax under vmap --------------------------------------------------------------

@pytest.mark.parametrize("randomness", ["different", "same", "error"])
@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax_under_vmap(randomness, hard):
    def program(lib):
        lib.manual_seed(0)
        logits = lib.tensor(XX)
        y = lib.func.vmap(lambda t: lib.nn.functional.gumbel_softmax(t, tau=0.5, hard=hard),
                          randomness=randomness)(logits)
        return list(y.shape), y.sum(-1), bool(((y >= 0) & (y <= 1)).all())
    _same(program)


def test_different_randomness_draws_per_example():
    def program(lib):
        lib.manual_seed(0)
        y = lib.func.vmap(lambda t: lib.empty_like(t).exponential_(), randomness="different")(
            lib.zeros(64, 5))
        return bool((y[0] != y[1]).any()), bool((y > 0).all())
    _same(program)



@pytest.mark.parametrize("inner,where", [("same", "outer"), ("different", "outer"),
                                         ("different", "both"), ("same", "inner")])
def test_inplace_draw_in_nested_vmaps(inner, where):
    def program(lib):
        # an in-place draw into a tensor the outer vmap ("different") batches, or both do, or
        # only the inner one does
        def per(a):
            def f(t):
                return (a if where == "outer" else t).clone().normal_() + t.sum() * 0
            return lib.func.vmap(f, randomness=inner)(
                lib.zeros(2, 50) if where == "inner" else a.reshape(2, -1))
        y = lib.func.vmap(per, randomness="different")(lib.zeros(3, 50 if where == "outer"
                                                                 else 100))
        rows = y.reshape(6, 50)
        # which rows hold the same draws (0, 0, 2, 2, 4, 4: one draw per outer example)
        return list(y.shape), [next(j for j in range(6) if bool((rows[i] == rows[j]).all()))
                               for i in range(6)]
    _same(program)


# --- ops PyTorch has no batching rule for: ember's rules warn as its loop does -----------------

ROWS = [[0.3, -1.2, 2.5, 0.7, -0.4], [1.1, 0.2, -2.2, 0.9, 1.8], [-0.6, 0.4, 0.1, -1.5, 2.2]]
QS = [0.25, 0.6]


def _quantile_program(case):
    def program(lib):
        vmap, grad, vjp = lib.func.vmap, lib.func.grad, lib.func.vjp
        x = lib.tensor(ROWS, dtype=lib.float64)
        q = lib.tensor(QS, dtype=lib.float64)
        return {
            "scalar": lambda: vmap(lambda v: lib.quantile(v, 0.3))(x),
            "scalar_dim_keepdim": lambda: vmap(lambda v: v.quantile(0.3, dim=0, keepdim=True))(
                x.reshape(3, 5, 1)),
            "tensor_q": lambda: vmap(lambda v: lib.quantile(v, q, interpolation="midpoint"))(x),
            "per_example_q": lambda: vmap(lib.quantile)(x, q[:1].expand(3)),
            "nanquantile": lambda: vmap(lambda v: lib.nanquantile(v, 0.6))(x),
            "nanquantile_tensor_q": lambda: vmap(lambda v: lib.nanquantile(v, q))(x),
            "grad_linear": lambda: vmap(grad(lambda v: lib.quantile(v, 0.3)))(x),
            "grad_midpoint_tensor_q": lambda: vmap(grad(lambda v: lib.quantile(
                v, q, interpolation="midpoint").sum()))(x),
            "grad_nearest": lambda: vmap(grad(lambda v: lib.quantile(
                v, 0.3, interpolation="nearest")))(x),
            "grad_of_a_constant": lambda: vmap(grad(lambda v, c: (v * lib.nanquantile(
                c, 0.3)).sum()))(x, x),
            "vjp": lambda: vmap(lambda v: vjp(lambda u: lib.quantile(u, 0.3), v)[0])(x),
            "grad_outside": lambda: grad(lambda v: vmap(lambda r: lib.quantile(
                r, 0.3))(v).sum())(x),
            "jacrev": lambda: lib.func.jacrev(lambda v: lib.quantile(v, q))(x[0]),
            "empty_batch": lambda: vmap(lambda v: lib.quantile(v, 0.3))(x[:0]),
        }[case]()
    return program


@pytest.mark.parametrize("case", [
    "scalar", "scalar_dim_keepdim", "tensor_q", "per_example_q", "nanquantile",
    "nanquantile_tensor_q", "grad_linear", "grad_midpoint_tensor_q", "grad_nearest",
    "grad_of_a_constant", "vjp", "grad_outside", "jacrev", "empty_batch"])
def test_quantile_under_transforms_warns_like_torch(case):
    _same(_quantile_program(case))


def test_quantile_warning_names_the_overload():
    shown = _outcome(ember, _quantile_program("scalar"))[1]
    assert len(shown) == 1 and "aten::quantile.scalar" in shown[0]


@pytest.mark.parametrize("case", ["vmap", "shared_mask", "inplace", "grad_input",
                                  "grad_source", "grad_both", "jacrev_source",
                                  "jacrev_input"])
def test_masked_scatter_under_transforms_warns_like_torch(case):
    def program(lib):
        vmap, grad, jacrev = lib.func.vmap, lib.func.grad, lib.func.jacrev
        x = lib.tensor(ROWS, dtype=lib.float64)
        m = x > 0.2
        s = x.flip(-1) * 2

        def f(a, b, c):
            return a.masked_scatter(b, c).pow(2).sum()
        return {
            "vmap": lambda: vmap(lambda a, b, c: a.masked_scatter(b, c))(x, m, s),
            "shared_mask": lambda: vmap(lambda a, c: lib.masked_scatter(a, m[0], c))(x, s),
            "inplace": lambda: vmap(lambda a, b: a.clone().masked_scatter_(b, s[0]))(x, m),
            "grad_input": lambda: vmap(grad(f))(x, m, s),
            "grad_source": lambda: vmap(grad(f, argnums=2))(x, m, s),
            "grad_both": lambda: vmap(grad(f, argnums=(0, 2)))(x, m, s),
            "jacrev_source": lambda: jacrev(lambda c: x[0].masked_scatter(m[0], c))(s[0]),
            "jacrev_input": lambda: jacrev(lambda a: a.masked_scatter(m[0], s[0]))(x[0]),
        }[case]()
    _same(program)


@pytest.mark.parametrize("transform", ["hessian", "jacfwd", "jacrev", "vmap_grad",
                                       "jacfwd_grad", "jvp"])
def test_affine_grid_under_transforms_warns_like_torch(transform):
    # forward mode's tangent runs affine_grid_generator itself (under jacfwd's vmap, looped)
    def program(lib):
        F, fn = lib.nn.functional, lib.func
        theta = lib.tensor([[0.9, 0.1, 0.2], [-0.1, 1.1, 0.3]], dtype=lib.float64)

        def f(t):
            return (F.affine_grid(t.reshape(1, 2, 3), (1, 1, 3, 4), align_corners=False)
                    ** 3).sum()
        return {
            "hessian": lambda: fn.hessian(f)(theta),
            "jacfwd": lambda: fn.jacfwd(f)(theta),
            "jacrev": lambda: fn.jacrev(f)(theta),
            "vmap_grad": lambda: fn.vmap(fn.grad(f))(theta.expand(3, 2, 3)),
            "jacfwd_grad": lambda: fn.jacfwd(fn.grad(f))(theta),
            "jvp": lambda: fn.jvp(f, (theta,), (lib.ones_like(theta),)),
        }[transform]()
    _same(program)


# --- a shared sparse COO tensor times a batched dense one --------------------------------------

@pytest.mark.parametrize("case", ["scalar_left", "scalar_right", "mul", "row", "int",
                                  "float64", "in_dims_1", "uncoalesced", "hybrid"])
def test_vmap_of_a_product_with_a_shared_sparse_tensor(case):
    # PyTorch's product is a COO tensor whose first sparse dim is the batch
    def program(lib):
        a = lib.tensor([[0., 2., 0.], [3., 0., 4.]]).to_sparse()
        s = lib.tensor([1., 2., 3.])
        vmap = lib.func.vmap
        if case == "uncoalesced":
            a = lib.sparse_coo_tensor([[1, 0, 1], [2, 1, 2]], [4., 2., 1.], (2, 3))
        if case == "hybrid":
            a = lib.tensor([[0., 2., 0.], [3., 0., 4.]]).to_sparse(1)
        r = {
            "scalar_left": lambda: vmap(lambda x: x * a)(s),
            "scalar_right": lambda: vmap(lambda x: a * x)(s),
            "mul": lambda: vmap(lambda x: lib.mul(a, x))(s),
            "row": lambda: vmap(lambda x: a * x)(lib.tensor([[1., 2., 3.], [-1., 0.5, 2.]])),
            "int": lambda: vmap(lambda x: x * a)(lib.tensor([1, 2, 3])),
            "float64": lambda: vmap(lambda x: x * a)(s.double()),
            "in_dims_1": lambda: vmap(lambda x: x * a, in_dims=1)(s[None]),
            "uncoalesced": lambda: vmap(lambda x: x * a)(s),
            "hybrid": lambda: vmap(lambda x: x * a)(s),
        }[case]()
        return (str(r.layout).split(".")[1], list(r.shape), str(r.dtype).split(".")[1],
                r.is_coalesced(), r.sparse_dim(),
                r._indices(), r._values(), r.to_dense())
    _same(program)
