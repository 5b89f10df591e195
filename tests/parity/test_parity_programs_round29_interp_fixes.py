"""What the interpretability programs of round 29 (test_parity_programs_round29_interp.py and its
_mech, _sae and _circuits siblings) found, each pinned against PyTorch: a full backward hook on
a module none of whose inputs requires grad (a Grad-CAM or guided-backprop hook on the first
layer) sees one None per argument (none for a module called without arguments) and may return
None or a tuple of Nones, anything else raising PyTorch's error; and full backward hooks under
functorch transforms: refused under grad, vjp and jacrev (PyTorch's hook node is a Python
Function without setup_context), skipped where a vmap is the innermost transform (its batched
tensors report no requires_grad, so no hook node is recorded), hooks then not firing."""

import warnings

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _param_module(lib):
    """A module whose output depends on its parameter only."""
    class P(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = lib.nn.Parameter(lib.ones(2))

        def forward(self, *args):
            return self.w * 2
    return P()


def _no_input_grad(lib, n_args, returned):
    """What a full backward hook returning ``returned`` sees (None per grad_input entry) on a
    module called with ``n_args`` arguments none requiring grad, and the parameter's grad; or
    the error."""
    m = _param_module(lib)
    seen = []

    def hook(module, grad_input, grad_output):
        seen.append([g is None for g in grad_input])
        return returned(lib) if callable(returned) else returned
    m.register_full_backward_hook(hook)
    args = [lib.ones(2), 3][:n_args]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            m(*args).sum().backward()
        except RuntimeError as e:
            return "error", str(e)
    return seen, m.w.grad.tolist()


@pytest.mark.parametrize("n_args", [0, 1, 2])
@pytest.mark.parametrize("returned", ["none", "empty", "nones", "two_nones", "list", "tensor"])
def test_full_hook_without_input_grads_like_torch(n_args, returned):
    value = {"none": None, "empty": (), "nones": (None,), "two_nones": (None, None),
             "list": [None], "tensor": lambda lib: (lib.ones(2),)}[returned]
    ours, theirs = _no_input_grad(ember, n_args, value), _no_input_grad(torch, n_args, value)
    assert ours == theirs
    assert (theirs[0] == "error") == (returned in ("list", "tensor"))


def _hooked(lib, log):
    m = lib.nn.Sequential(lib.nn.Linear(3, 3), lib.nn.Tanh())
    with lib.no_grad():
        m[0].weight.copy_(lib.eye(3) * 0.5)
        m[0].bias.fill_(0.1)
    m[1].register_full_backward_hook(lambda *a: log.append("backward"))
    m[1].register_forward_hook(lambda *a: log.append("forward"))
    return m


def _transformed(lib, how):
    """The result (summed) and hook calls of a hooked model under a functorch transform, or
    the error."""
    log = []
    m = _hooked(lib, log)
    x = lib.tensor([[0.2, -0.4, 0.6], [1.0, 0.5, -1.5]])
    params = {k: v.detach() for k, v in m.named_parameters()}
    f = lib.func
    calls = {
        "grad_params": lambda: f.grad(
            lambda p: f.functional_call(m, p, (x,)).sum())(params)["0.weight"],
        "vjp": lambda: f.vjp(m, x)[0],
        "jacrev": lambda: f.jacrev(m)(x[0]),
        "vmap_grad": lambda: f.vmap(f.grad(lambda r: m(r).sum()))(x),
        "vmap": lambda: f.vmap(m)(x),
        "vmap_requires_grad": lambda: f.vmap(m)(x.clone().requires_grad_()),
        "grad_of_vmap": lambda: f.grad(lambda r: f.vmap(m)(r).sum())(x),
        "jvp": lambda: f.jvp(m, (x,), (lib.ones_like(x),))[1],
        "jacfwd": lambda: f.jacfwd(m)(x[0]),
        # the module sees no tensor of the innermost transform's: no hook node, no refusal
        "grad_constant": lambda: f.grad(lambda s: (m(x) * s).sum())(lib.tensor(2.0)),
        "grad_detached": lambda: f.grad(lambda r: m(r.detach()).sum() + r.sum())(x),
        "vmap_grad_constant": lambda: f.vmap(
            lambda s: f.grad(lambda t: (m(x) * t).sum())(s))(lib.tensor([1.0, 2.0])),
    }
    try:
        out = calls[how]()
    except RuntimeError as e:     # (ember's message adds a line naming the module)
        return "error", str(e).split("\n")[0], log
    return round(float(out.sum()), 5), log


@pytest.mark.parametrize("how", ["grad_params", "vjp", "jacrev", "vmap_grad", "vmap",
                                 "vmap_requires_grad", "grad_of_vmap", "jvp", "jacfwd",
                                 "grad_constant", "grad_detached", "vmap_grad_constant"])
def test_full_backward_hooks_under_transforms_like_torch(how):
    ours, theirs = _transformed(ember, how), _transformed(torch, how)
    assert ours == theirs
    assert (theirs[0] == "error") == (how in ("grad_params", "vjp", "jacrev", "vmap_grad"))


def test_vmapped_hooked_module_backward_outside_like_torch():
    def run(lib):
        log = []
        m = _hooked(lib, log)
        x = lib.tensor([[0.2, -0.4, 0.6], [1.0, 0.5, -1.5]], requires_grad=True)
        lib.func.vmap(m)(x).pow(2).sum().backward()
        return x.grad.tolist(), m[0].weight.grad.tolist(), log
    ours, theirs = run(ember), run(torch)
    assert ours[2] == theirs[2] == ["forward"]
    for a, b in zip(ours[:2], theirs[:2]):
        assert sum(a, []) == pytest.approx(sum(b, []), rel=1e-6)


def _functions(lib):
    """Custom Functions returning views: an input as-is, a view of it, two views, a view and
    another differentiable output, a view and an int."""
    F = lib.autograd.Function

    def fn(name, forward):
        return type(name, (F,), {"forward": staticmethod(lambda ctx, x: forward(x)),
                                 "backward": staticmethod(lambda ctx, *g: g[0])})
    return {"as_is": fn("Id", lambda x: x), "view": fn("IdView", lambda x: x.view_as(x)),
            "two_views": fn("Two", lambda x: (x[0], x[1])),
            "view_and_product": fn("Mixed", lambda x: (x[0], x * 2)),
            "view_and_int": fn("MixedInt", lambda x: (x[0], 3))}


# how the view is written: the output itself, a view of it, a view of a view, its base
WRITES = {
    "whole": lambda lib, y: y.add_(1),
    "select": lambda lib, y: y[:, 0].add_(1) if y.ndim > 1 else y[0].add_(1),
    "setitem": lambda lib, y: y.__setitem__(0, 5.0),
    "view_of_view": lambda lib, y: y[0:1][..., 1:].mul_(2),
    "under_no_grad": lambda lib, y: _no_grad_write(lib, y),
}


def _no_grad_write(lib, y):
    with lib.no_grad():
        y[0].add_(1)
    return y.sum()


def _write_outcome(lib, function, write, leaf):
    w = lib.ones(2, 3, requires_grad=True)
    out = _functions(lib)[function].apply(w if leaf else w * 1)
    y = out[0] if isinstance(out, tuple) else out
    try:
        WRITES[write](lib, y)
    except RuntimeError as e:
        return str(e)
    return "ok"


@pytest.mark.parametrize("leaf", [False, True], ids=["non_leaf", "leaf"])
@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("function", ["as_is", "view", "two_views", "view_and_product",
                                      "view_and_int"])
def test_writing_a_custom_function_view_like_torch(function, write, leaf):
    # a forward hook writing into a full-backward-hooked module's output is this case
    ours, theirs = (_write_outcome(ember, function, write, leaf),
                    _write_outcome(torch, function, write, leaf))
    assert ours == theirs


def test_hooks_run_once_under_double_backward_like_torch():
    def run(lib):
        log = []
        m = _hooked(lib, log)
        x = lib.tensor([[0.2, -0.4, 0.6]], requires_grad=True)
        h = lib.autograd.functional.hessian(lambda v: m(v).sum(), x[0])
        g, = lib.autograd.grad(m(x * 1).sum(), x, create_graph=True)
        (g * g).sum().backward()
        return h.flatten().tolist(), x.grad.flatten().tolist(), log
    ours, theirs = run(ember), run(torch)
    assert ours[2] == theirs[2] == ["forward", "backward"] * 2
    for a, b in zip(ours[:2], theirs[:2]):
        assert a == pytest.approx(b, rel=1e-5, abs=1e-7)
