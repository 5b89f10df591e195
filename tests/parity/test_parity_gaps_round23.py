"""Gaps closed in round 23, compared with PyTorch: forward-mode AD refused by kernels without a
forward derivative (the CPU flash attention kernel, cdist, weight norm, ctc and margin losses,
geqrf), a grad-requiring attention mask with ``is_causal`` outside grad mode, autograd
Functions without a vmap rule under vmap and jacfwd, ``Tensor._backward_hooks`` of rebuilt
tensors and of non-leaves after assignment, views of inference tensors made outside inference
mode, and the legacy constructors' bool and size mixes."""

import copy
import io
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same, assert_same_result, error, recorded

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_RNG = np.random.default_rng(23)
_Q, _K, _V = (_RNG.standard_normal((1, 2, 3, 4)) for _ in range(3))
_X = _RNG.standard_normal((3, 4))
_LOG_PROBS = _RNG.standard_normal((3, 1, 4))
_V3 = _RNG.standard_normal((2, 3, 2))


def _t(lib, array, **kw):
    return lib.tensor(array, dtype=lib.float64, **kw)


def _floats(t):
    return [round(x, 8) for x in t.detach().reshape(-1).tolist()]


# ----- forward AD through kernels without a forward derivative -----------------------------

def _sdpa(lib, **kw):
    k, v = _t(lib, _K), _t(lib, _V)
    return lambda q: lib.nn.functional.scaled_dot_product_attention(q, k, v, **kw)


def _jvp(lib, f, x):
    return lib.func.jvp(f, (x,), (lib.ones_like(x),))[1]


def _dual(lib, f, x):
    fw = lib.autograd.forward_ad
    with fw.dual_level():
        return fw.unpack_dual(f(fw.make_dual(x, lib.ones_like(x)))).tangent


_REFUSED = {
    "sdpa jvp": lambda lib: _jvp(lib, _sdpa(lib), _t(lib, _Q)),
    "sdpa causal jvp": lambda lib: _jvp(lib, _sdpa(lib, is_causal=True), _t(lib, _Q)),
    "sdpa bool mask jvp": lambda lib: _jvp(
        lib, _sdpa(lib, attn_mask=lib.ones(3, 3, dtype=lib.bool)), _t(lib, _Q)),
    "sdpa jacfwd": lambda lib: lib.func.jacfwd(_sdpa(lib))(_t(lib, _Q)),
    "sdpa linearize": lambda lib: lib.func.linearize(_sdpa(lib), _t(lib, _Q))[1](
        lib.ones(1, 2, 3, 4, dtype=lib.float64)),
    "sdpa hessian": lambda lib: lib.func.hessian(lambda q: _sdpa(lib)(q).sum())(_t(lib, _Q)),
    "sdpa dual query": lambda lib: _dual(lib, _sdpa(lib), _t(lib, _Q)),
    "sdpa dual key": lambda lib: _dual(
        lib, lambda k: lib.nn.functional.scaled_dot_product_attention(_t(lib, _Q), k,
                                                                      _t(lib, _V)),
        _t(lib, _K)),
    "sdpa dual mask": lambda lib: _dual(
        lib, lambda m: lib.nn.functional.scaled_dot_product_attention(
            _t(lib, _Q), _t(lib, _K), _t(lib, _V), attn_mask=m),
        lib.zeros(3, 3, dtype=lib.float64)),
    "cdist jvp": lambda lib: _jvp(lib, lambda a: lib.cdist(a, _t(lib, _X[:2])), _t(lib, _X)),
    "cdist mm jvp": lambda lib: _jvp(
        lib, lambda a: lib.cdist(a, _t(lib, _X), compute_mode="use_mm_for_euclid_dist"),
        _t(lib, _X)),
    "cdist p1 dual": lambda lib: _dual(lib, lambda a: lib.cdist(a, _t(lib, _X), p=1),
                                       _t(lib, _X)),
    "weight_norm jvp": lambda lib: _jvp(
        lib, lambda v: lib._weight_norm(v, lib.ones(3, 1, dtype=lib.float64), 0),
        _t(lib, _X[:, :3])),
    "weight_norm dual g": lambda lib: _dual(
        lib, lambda g: lib._weight_norm(_t(lib, _X), g, 1), lib.ones(1, 4, dtype=lib.float64)),
    "ctc jvp": lambda lib: _jvp(
        lib, lambda lp: lib.nn.functional.ctc_loss(lp, lib.tensor([[1, 2]]), [3], [2]),
        _t(lib, _LOG_PROBS)),
    "multi_margin jvp": lambda lib: _jvp(
        lib, lambda x: lib.nn.functional.multi_margin_loss(x, lib.tensor([0, 1, 3])),
        _t(lib, _X)),
    "multi_margin weight jvp": lambda lib: _jvp(
        lib, lambda w: lib.nn.functional.multi_margin_loss(_t(lib, _X), lib.tensor([0, 1, 3]),
                                                           weight=w),
        lib.ones(4, dtype=lib.float64)),
    "multilabel_margin jvp": lambda lib: _jvp(
        lib, lambda x: lib.nn.functional.multilabel_margin_loss(
            x, lib.tensor([[0, 1, -1, 0]] * 3)), _t(lib, _X)),
    "geqrf jvp": lambda lib: _jvp(lib, lambda x: lib.geqrf(x)[0], _t(lib, _X)),
    "geqrf dual": lambda lib: _dual(lib, lambda x: lib.geqrf(x)[0], _t(lib, _X)),
}


@pytest.mark.parametrize("name", sorted(_REFUSED))
def test_forward_ad_refused_as_torch(name):
    outcome = assert_same(_REFUSED[name], quiet=True)
    assert outcome[0] == "NotImplementedError"


_COMPUTED = {            # the same calls where PyTorch takes a kernel with forward AD
    "sdpa 3-D jvp": lambda lib: _jvp(
        lib, lambda q: lib.nn.functional.scaled_dot_product_attention(
            q, _t(lib, _K[0]), _t(lib, _V[0])), _t(lib, _Q[0])),
    "sdpa 2-D jvp": lambda lib: _jvp(
        lib, lambda q: lib.nn.functional.scaled_dot_product_attention(
            q, _t(lib, _K[0, 0]), _t(lib, _V[0, 0])), _t(lib, _Q[0, 0])),
    "sdpa grouped 3-D key jvp": lambda lib: _jvp(
        lib, lambda k: lib.nn.functional.scaled_dot_product_attention(
            _t(lib, _Q[0]), k, _t(lib, _V[0]), is_causal=True), _t(lib, _K[0])),
    "weight_norm middle dim jvp": lambda lib: _jvp(
        lib, lambda v: lib._weight_norm(v, lib.ones(1, 3, 1, dtype=lib.float64), 1),
        _t(lib, _V3)),
}


@pytest.mark.parametrize("name", sorted(_COMPUTED))
def test_forward_ad_computed_where_torch_computes(name):
    ours = _COMPUTED[name](ember)
    theirs = _COMPUTED[name](torch)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)


def _double_backward_program(lib):
    q = _t(lib, _Q, requires_grad=True)
    g, = lib.autograd.grad(_sdpa(lib)(q).sum(), q, create_graph=True)
    return g.grad_fn.name(), error(lambda: lib.autograd.grad(g.sum(), q))


def test_flash_double_backward_refused_as_torch():
    assert_same_result(_double_backward_program)


def _autograd_functional_program(lib):
    af, q = lib.autograd.functional, _t(lib, _Q)
    f = _sdpa(lib)
    calls = [lambda: af.jvp(f, q, lib.ones_like(q)),                  # double backward
             lambda: af.hvp(lambda x: f(x).sum(), q, lib.ones_like(q)),
             lambda: af.hessian(lambda x: f(x).sum(), q),
             lambda: af.jacobian(f, q, strategy="forward-mode", vectorize=True)]
    return [error(c, quiet=True) for c in calls]


def test_autograd_functional_through_the_flash_kernel_as_torch():
    assert_same_result(_autograd_functional_program)


# ----- a grad-requiring attention mask with is_causal, without a graph ----------------------

def _grad_mask_program(lib):
    F = lib.nn.functional
    q, k, v = _t(lib, _Q), _t(lib, _K), _t(lib, _V)
    mask = lib.zeros(3, 3, dtype=lib.float64, requires_grad=True)
    call = lambda m=mask, **kw: F.scaled_dot_product_attention(q, k, v, attn_mask=m,   # noqa
                                                               is_causal=True, **kw)
    seen = []
    for mode in (lib.no_grad, lib.inference_mode, lib.enable_grad):
        with mode():
            seen.append(error(call))
            seen.append(error(call, mask.detach()))     # a mask without grad: flash, fine
            seen.append(error(lambda: F.scaled_dot_product_attention(
                q[0], k[0], v[0], attn_mask=mask, is_causal=True)))
    with lib.nn.attention.sdpa_kernel(lib.nn.attention.SDPBackend.FLASH_ATTENTION):
        with lib.no_grad():
            answer, warned = recorded(call)
            seen.append((answer, [(kind, text.split(" (Triggered internally")[0])
                                  for kind, text in warned]))
    with lib.no_grad():
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)     # no causal: fine
    seen.append((_floats(out), out.requires_grad))
    return seen


def test_grad_mask_with_is_causal_refused_outside_grad_mode_as_torch():
    assert_same_result(_grad_mask_program)


# ----- autograd.Function without a vmap rule ------------------------------------------------

def _functions(lib):
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            return t * 2

    class NoJvp(lib.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 3

    class Generated(Double):
        generate_vmap_rule = True

    class OwnRule(Double):
        @staticmethod
        def vmap(info, in_dims, x):
            return x * 2, in_dims[0]

    return Double, NoJvp, Generated, OwnRule


def _function_vmap_program(lib):
    Double, NoJvp, Generated, OwnRule = _functions(lib)
    x = _t(lib, _X[:3, :2])
    f = lib.func
    calls = [
        lambda: lib.vmap(Double.apply)(x),
        lambda: lib.vmap(Double.apply)(x.clone().requires_grad_()),
        lambda: lib.vmap(lambda y: Double.apply(x[0]) + y)(x),     # unbatched operands too
        lambda: f.vmap(f.grad(lambda y: Double.apply(y).sum()))(x),
        lambda: f.grad(lambda y: lib.vmap(Double.apply)(y).sum())(x),
        lambda: f.jacfwd(Double.apply)(x),
        lambda: f.jacfwd(lambda y: Double.apply(x) * y)(x),        # (f runs under vmap)
        lambda: f.hessian(lambda y: Double.apply(y).sum())(x),
        lambda: f.jacfwd(NoJvp.apply)(x),                          # vmap's refusal first
        lambda: lib.vmap(lambda y: f.jvp(NoJvp.apply, (y,), (y,)))(x),
        lambda: f.jvp(NoJvp.apply, (x,), (x,)),                    # jvp's own refusal
    ]
    seen = [error(c) for c in calls]
    with lib.no_grad():
        seen.append(error(lambda: lib.vmap(Double.apply)(x)))
    # what stays allowed: jacrev (vmap over the backward only), grad, jvp, and rules
    seen.append(_floats(f.jacrev(Double.apply)(x)))
    seen.append(_floats(f.grad(lambda y: Double.apply(y).sum())(x)))
    seen.append(_floats(f.jvp(Double.apply, (x,), (x,))[1]))
    for cls in (Generated, OwnRule):
        seen.append(_floats(lib.vmap(cls.apply)(x)))
        seen.append(_floats(f.jacfwd(cls.apply)(x)))
    return seen


def test_function_without_vmap_rule_refused_as_torch():
    assert_same_result(_function_vmap_program)


# ----- Tensor._backward_hooks ---------------------------------------------------------------

def _rebuilt_hooks_program(lib):
    x = lib.ones(2, requires_grad=True)
    x.register_hook(lib.utils.hooks.unserializable_hook(lambda g: g * 3))
    y = lib.ones(4)
    seen = [pickle.loads(pickle.dumps(x))._backward_hooks,
            pickle.loads(pickle.dumps(y))._backward_hooks,
            [t._backward_hooks for t in pickle.loads(pickle.dumps((y, y[1:3])))],
            copy.copy(x)._backward_hooks, copy.copy(y[1:3])._backward_hooks,
            copy.deepcopy(x)._backward_hooks, copy.deepcopy(y[1:3])._backward_hooks,
            pickle.loads(pickle.dumps(lib.nn.Parameter(lib.ones(2))))._backward_hooks]
    buffer = io.BytesIO()
    lib.save({"t": y, "p": lib.nn.Parameter(lib.ones(2))}, buffer)
    buffer.seek(0)
    loaded = lib.load(buffer)
    seen.append([loaded["t"]._backward_hooks, loaded["p"]._backward_hooks])
    p = pickle.loads(pickle.dumps(x))
    handle = p.register_hook(lambda g: g * 4)       # into the rebuilt (empty) dict
    seen.append(list(p._backward_hooks) == [handle.id])
    p.sum().backward()
    seen.append(_floats(p.grad))
    return seen


def test_rebuilt_tensors_backward_hooks_as_torch():
    assert_same_result(_rebuilt_hooks_program)


def _non_leaf_hooks_program(lib):
    seen = []

    def run(steps):
        a = lib.ones(2, requires_grad=True)
        b = a * 3
        ids = []
        for step in steps:
            if step == "none":
                b._backward_hooks = None
            elif step == "empty":
                b._backward_hooks = OrderedDict()
            elif step == "dict":
                b._backward_hooks = OrderedDict(k=lambda g: g * 10)
            elif step == "retain":
                b.retain_grad()
            else:
                ids.append(b.register_hook(lambda g, s=step: g * s).id)
        keys = [k if k == "k" else ids.index(k) for k in (b._backward_hooks or ())]
        b.sum().backward()
        seen.append((steps, keys, _floats(a.grad), None if b.grad is None else _floats(b.grad)))

    for steps in (["dict", 2], ["none", 2], [5, "empty", 2], [5, "none", 2], [5, "none", 2, 7],
                  ["empty", "retain", 2], [5, "dict", "none", 2]):
        run(steps)
    return seen


def test_non_leaf_backward_hooks_after_assignment_as_torch():
    assert_same_result(_non_leaf_hooks_program)


# ----- views of inference tensors made outside inference mode -------------------------------

def _inference_views_program(lib):
    with lib.inference_mode():
        x = lib.ones(2, 3, requires_grad=True)
        strided = lib.ones(3, 2).t().requires_grad_()
    views = {"view": lambda t: t.view(3, 2), "select": lambda t: t[0], "t": lambda t: t.t(),
             "reshape": lambda t: t.reshape(6), "expand": lambda t: t[None].expand(2, 2, 3),
             "view_as": lambda t: t.view_as(t), "unbind": lambda t: t.unbind(0)[0],
             "diagonal": lambda t: t.diagonal(), "mul": lambda t: t * 2}
    seen = []
    for name, make in views.items():
        v = make(x)
        seen.append((name, v.requires_grad, v.is_leaf, v.grad_fn is None, v.is_inference(),
                     v._is_view()))
    v = x.view(3, 2)
    seen.append(error(lambda: v.sum().backward()))
    seen.append(error(lambda: v.requires_grad_()))
    copied = strided.reshape(6)                     # a copy: recorded as any op's result
    seen.append((copied.requires_grad, copied.grad_fn.name(), copied.is_inference()))
    return seen


def test_views_of_grad_requiring_inference_tensors_as_torch():
    assert_same_result(_inference_views_program)


# ----- legacy constructors: bools and sizes -------------------------------------------------

_LEGACY = ["Tensor(True, False)", "Tensor(True)", "FloatTensor(True)", "FloatTensor(True, 2)",
           "Tensor(2, True)", "Tensor(0, True)", "LongTensor(True)", "Tensor([True, False])",
           "Tensor(True, False, True)", "Tensor(True, 2, 3, 4)", "DoubleTensor(False, 3)",
           "IntTensor(True, True)", "Tensor(1.5, 2)", "Tensor(None, 2)", "Tensor([1], 2)",
           "Tensor((1,), 2)", "Tensor(True, [2, 3], 1)", "Tensor(2, 3.0)", "Tensor(2, None)",
           "Tensor(2, True, 1.5)", "Tensor(2, [1.5])", "Tensor(2, (3,))",
           "ones(2).new(True, 2)", "ones(1).new(True, False, True)"]


@pytest.mark.parametrize("call", _LEGACY)
def test_legacy_constructor_bool_and_size_mixes_as_torch(call):
    def run(lib):
        t = eval(f"lib.{call}", {"lib": lib})
        values = t.tolist() if "[" in call else None         # (sizes: uninitialized)
        return str(t.dtype).split(".")[-1], tuple(t.shape), values
    assert_same(run)


def _tensor_argument_program(lib):
    t = lib.ones(2, dtype=lib.float64, requires_grad=True)
    alias = lib.Tensor(t)                           # any dtype: an alias of t
    seen = [(str(alias.dtype).split(".")[-1], alias is t, alias._is_view(),
             alias.grad_fn.name(), alias.data_ptr() == t.data_ptr())]
    f = lib.ones(2)
    seen.append((lib.FloatTensor(f) is f, lib.FloatTensor(f)._base is f, f.new(f) is f))
    seen.append(str(lib.Tensor(lib.tensor(True)).dtype).split(".")[-1])
    for call in (lambda: lib.FloatTensor(lib.tensor([1, 2])),
                 lambda: lib.ones(2).new(lib.ones(2, dtype=lib.bfloat16)),
                 lambda: lib.IntTensor(lib.ones(2, dtype=lib.bool))):
        seen.append(error(call))
    return seen


def test_legacy_constructor_of_a_tensor_as_torch():
    assert_same_result(_tensor_argument_program)


@pytest.mark.parametrize("inplace", ["fill_", "mul_"])
def test_inplace_through_as_strided_of_a_transposed_view(inplace):
    # the base's gradient arrives transposed; CopySlices must lay it out as the base before
    # replaying as_strided, which addresses memory (ember zeroed base[4, 0], not base[2, 2])
    def run(lib):
        base = lib.arange(1., 22.).reshape(7, 3).requires_grad_()
        x = (base * 1).t()
        region = x.as_strided((3,), (4,), 0)
        region.fill_(0.5) if inplace == "fill_" else region.mul_(0)
        (x * lib.arange(1., 22.).reshape(3, 7)).sum().backward()
        return base.grad.tolist(), base.grad.stride()
    assert run(ember) == run(torch)


def test_forward_ad_through_pdist_names_its_kernel():
    x = np.random.default_rng(0).standard_normal((4, 3))

    def jvp(lib):
        t = lib.from_numpy(x)
        return lib.func.jvp(lib.pdist, (t,), (t,))
    theirs = error(jvp, torch)
    assert theirs[0] == "NotImplementedError" and "_pdist_forward" in theirs[1]
    assert error(jvp, ember) == theirs
