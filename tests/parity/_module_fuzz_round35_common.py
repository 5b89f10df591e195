"""Shared pieces of the nn.Module fuzzer (test_parity_module_fuzz_round35.py): the module
classes and values both libraries build, and the library-free summaries that are compared."""

import numpy as np


def _err(exc):
    msg = str(exc).replace("ember.", "torch.").replace("ember", "torch")
    msg = msg.split(" Please file an issue")[0]    # (ember's do not send users to PyTorch)
    if isinstance(exc, RecursionError):     # (the two word it differently)
        msg = "maximum recursion depth exceeded"
    # (ember names the failing module in forward errors: see NOTE [Module error context])
    return ("error", type(exc).__name__, msg.split("\n  in model")[0])


class _Approx:
    """Float values compared with a tolerance (the two libraries round differently)."""

    def __init__(self, a, tol=1e-3):
        self.a = np.asarray(a, dtype=np.float64) if not np.iscomplexobj(a) else np.asarray(a)
        self.tol = tol

    def __eq__(self, other):
        tol = max(self.tol, other.tol) if isinstance(other, _Approx) else 0
        return isinstance(other, _Approx) and self.a.shape == other.a.shape and np.allclose(
            self.a, other.a, rtol=tol, atol=tol, equal_nan=True)

    def __repr__(self):
        return repr(self.a.tolist())


_CLASSES = {}


def _classes(lib):
    """Per-library module classes used by the programs."""
    if lib in _CLASSES:
        return _CLASSES[lib]
    nn = lib.nn

    def run(m, x):
        if m is None:
            return x
        if isinstance(m, (nn.ModuleList, nn.ModuleDict)):
            for c in (m.values() if isinstance(m, nn.ModuleDict) else m):
                x = run(c, x)
            return x
        if isinstance(m, (nn.ParameterList, nn.ParameterDict)):
            for p in (m.values() if isinstance(m, nn.ParameterDict) else m):
                if p is not None and tuple(p.shape) == (3,) and p.dtype == x.dtype:
                    x = x * p
            return x
        return m(x)

    class Custom(nn.Module):
        def __init__(self, k=0):
            super().__init__()
            self.k = k
            self.note = "attr"

        def forward(self, x):
            for m in self._modules.values():
                x = run(m, x)
            for p in self._parameters.values():
                if p is not None and tuple(p.shape) == (3,) and p.dtype == x.dtype:
                    x = x * p
            return x

        def extra_repr(self):
            return f"k={self.k}"

    class Extra(Custom):
        def get_extra_state(self):
            return {"k": self.k}

        def set_extra_state(self, state):
            self.k = state["k"]

    _CLASSES[lib] = (Custom, Extra, run)
    return _CLASSES[lib]


# --- values that both libraries build from the same numbers ---------------------------------

def _tensor(lib, rng, shape=(3,), dtype="float32"):
    data = np.array([rng.choice([-1.5, 0.5, 1.0, 2.0, 0.25]) for _ in range(int(np.prod(shape)))],
                    dtype=np.float64).reshape(shape)
    return lib.tensor(data, dtype=getattr(lib, dtype))


def _linear(lib, rng, bias=True):
    m = lib.nn.Linear(3, 3, bias=bias)
    with lib.no_grad():
        m.weight.copy_(_tensor(lib, rng, (3, 3)))
        if bias:
            m.bias.copy_(_tensor(lib, rng))
    return m


# --- what one library shows, in library-free form ------------------------------------------

def _arr(t):
    t = t.detach()
    tol = 2e-2 if t.dtype.itemsize == 2 and t.is_floating_point() else 1e-3
    if str(t.dtype).endswith("bfloat16"):
        t = t.float()
    return _Approx(t.cpu().numpy(), tol)


def _tstate(t, params):
    if t is None:
        return None
    grad = t.grad
    return (type(t).__name__, tuple(t.shape), str(t.dtype).split(".")[-1], t.requires_grad,
            t.is_leaf, next((i for i, p in enumerate(params) if p is t), -1),
            None if grad is None else (str(grad.dtype).split(".")[-1], _arr(grad)),
            _arr(t))


def _norm(lib, value, root):
    """A library-free summary of a step's result."""
    if isinstance(value, lib.Tensor):
        return ("tensor", _tstate(value, list(root.parameters())))
    if isinstance(value, lib.nn.Module):
        found = [n for n, m in root.named_modules(remove_duplicate=False) if m is value]
        return ("module", type(value).__name__, found[:1])
    if isinstance(value, (list, tuple)):
        return tuple(_norm(lib, v, root) for v in value)
    if isinstance(value, dict):
        return tuple((k, _norm(lib, v, root)) for k, v in value.items())
    if isinstance(value, str):
        return value.replace("ember", "torch")
    if isinstance(value, (int, float, bool, type(None))):
        return value
    if hasattr(value, "remove"):
        return "handle"
    return type(value).__name__
