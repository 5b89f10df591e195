"""What every optimizer's step does to reach arrays: read lr, fetch gradients, make state.

Updates run on backend arrays in place (no graph, few temporaries). Complex parameters
and their state are updated as pairs of reals, as PyTorch does (``view_as_real``).
"""

import numpy as np

from ember._dtype import float64, get_default_dtype
from ember._tensor import Tensor, _make
from ember._values_backed import ValuesBacked
from ember.nn.parameter import Parameter
from ember.backend import SEVERAL_GPUS, device_guard, device_kernel, gpu_elsewhere, xp_of
from ember.ops._op_errors import broadcast_message
from ember.ops.complex_ops import view_as_real

__all__ = ["value", "grads_of", "real", "state_like", "new_step", "step_like", "step_count",
           "scalar_state", "scalar_dtype", "apply_updates", "scale_", "lr_of", "number_lr", "slot",
           "root_plus", "real_view", "check_shapes", "stale_in", "uncounter",
           "complex_message", "descend_", "plain_rate"]


def scale_(x, factor):
    """``x *= factor`` in place; a 16-bit ``x`` is multiplied in float32 and rounded once,
    as PyTorch's ops on it are (NumPy would round ``factor`` itself to 16 bits first: a
    decay of 0.997 became 0.996 in bfloat16)."""
    if factor == 1:
        return
    if isinstance(x, Tensor):       # differentiable=True: recorded by autograd
        x.mul_(factor)
    elif x.dtype.itemsize < 4 and x.dtype.kind in "fV":
        x[...] = x.astype(np.float32) * factor
    else:
        x *= factor


def value(x):
    """A hyperparameter as a Python number (``lr`` may be a 0-d tensor)."""
    return x.item() if isinstance(x, Tensor) else x


def descend_(x, u, rate, refuse=None):
    """``x -= rate * u`` in place. A tensor ``x`` (``differentiable=True``) steps as PyTorch's
    do, which the graph names: ``add_(u, alpha=-rate)`` (AddBackward0), or for a learnable
    ``rate`` (a tensor that requires grad) ``addcmul_(u, rate, value=-1)``, unless the step
    passes its rate as a Python scalar (``refuse``: the op's argument, whose TypeError it
    raises)."""
    if not isinstance(x, Tensor):
        x -= u if rate == 1 else rate * u
    elif isinstance(rate, Tensor) and rate.requires_grad and refuse is None:
        x.addcmul_(u, rate, value=-1)
    else:
        x.add_(u, alpha=-plain_rate(rate, refuse or "add_(): argument 'alpha'"))


def plain_rate(rate, where):
    """``rate`` as the Python scalar a step passes to an op's argument ``where``
    (``"addcdiv_(): argument 'value'"``): a learnable rate (a tensor that requires grad)
    raises PyTorch's TypeError there, before the op's in-place checks."""
    if isinstance(rate, Tensor):
        if rate.requires_grad:
            raise TypeError(f"{where} must be Number, not Tensor")
        return rate.item()
    return rate


def root_plus(v, eps):
    """``sqrt(v) + eps``, fresh: for a tensor ``v`` out of place, so that autograd saves
    nothing a later step modifies."""
    if isinstance(v, Tensor):
        return v.sqrt() + eps
    root = v ** 0.5
    root += eps
    return root


def lr_of(group):
    """The group's ``lr``: as given under ``differentiable=True`` (a tensor's graph is kept),
    else a Python number."""
    return group["lr"] if group.get("differentiable") else number_lr(group)


def number_lr(group):
    """The group's ``lr`` as a number: a floating-point tensor's as a NumPy scalar of its
    dtype, so that what an update derives from it rounds as PyTorch's tensor arithmetic
    does (a float32 lr over a bias correction stays float32)."""
    lr = group["lr"]
    if isinstance(lr, Tensor) and lr.dtype.is_floating_point and lr.dtype.itemsize < 8:
        return lr.dtype.np.type(lr.item())      # on the host, whatever lr's device
    return value(lr)


def lr_quotient(lr, divisor):
    """``lr / divisor`` as PyTorch's tensor arithmetic gives it: a 16-bit lr (a NumPy scalar,
    see ``number_lr``) divides in float32 with the Python number unrounded and rounds to its
    dtype once (NumPy's 16-bit scalars round the number to 16 bits first)."""
    if isinstance(lr, np.generic) and lr.dtype.itemsize < 4:
        return type(lr)(np.float32(lr) / np.float32(divisor))
    return lr / divisor


def lr_product(lr, factor):
    """``lr * factor`` as PyTorch's tensor arithmetic gives it (see ``lr_quotient``)."""
    if isinstance(lr, np.generic) and lr.dtype.itemsize < 4:
        return type(lr)(np.float32(lr) * np.float32(factor))
    return lr * factor


def slot(state_tensor, group):
    """What an update works on for a state tensor: the tensor itself under
    ``differentiable=True`` (its in-place ops are recorded), else its (real) array."""
    if group.get("differentiable"):
        return real_view(state_tensor)
    return real(state_tensor._data)


def real(a):
    """``a`` itself, or for a complex array a real view of its (re, im) pairs."""
    if a.dtype.kind != "c":
        return a
    return a.reshape(*a.shape, 1).view(a.real.dtype)


def real_view(t):
    """Tensor ``t`` itself, or for a complex tensor its ``view_as_real`` view: a
    differentiable update works on (re, im) pairs as the array path does, its in-place ops
    reaching ``t`` through the view."""
    return view_as_real(t) if t.is_complex() else t


def grads_of(group, maximize=False, name=None, takes_sparse=False, graph=False, nested=None):
    """``(param, param array, grad array)`` for each parameter of ``group`` with a gradient,
    its GPU current while the caller's loop body runs (state made there lands beside it, as
    CuPy allocates on the current GPU). A sparse gradient (``Embedding(sparse=True)``'s)
    comes dense to an optimizer that ``takes_sparse`` (its update of the entries the
    gradient leaves out is nil), and raises PyTorch's error naming optimizer ``name`` in the
    others. With ``graph`` (an optimizer's ``differentiable=True`` step) the parameter and
    gradient come as tensors, so that the update's in-place ops build a graph. A nested
    parameter raises PyTorch's error, or (SGD's) is appended to list ``nested`` instead."""
    if group.get("foreach") and group.get("differentiable") and name in _FOREACH_NO_GRAPH:
        _refuse_foreach_graph(group, name)
    first = True
    for p in group["params"]:
        g = p._grad
        if g is None:
            if type(p) is Parameter or not sparse_param(p):
                continue
            g = p.grad      # a sparse parameter's gradient lives on its values
            if g is None:
                continue
        if not isinstance(p, Tensor) and nested_param(p):
            from ember.nested._strided_optim import refuse
            refuse(p, name, group)      # (PyTorch's error, but for SGD's: it steps it itself)
            if nested is not None:
                nested.append(p)
            continue
        if group.get("capturable") and not group.get("fused") and p.device.type != "cuda":
            table = _CAPTURABLE_FOREACH if group.get("foreach") else {}
            what, devices = table.get(name) or _CAPTURABLE.get(name, ("params and state_steps",
                                                                      _DEVICES))
            raise AssertionError(f"If capturable=True, {what} must be on supported devices: "
                                 f"{devices}.")
        sparse = g.is_sparse or g.is_sparse_csr
        if sparse and not takes_sparse:
            raise RuntimeError(f"{name} does not support sparse gradients"
                               f"{_SPARSE_HINTS.get(name, '')}")
        if group.get("fused"):
            _check_fused(p, sparse, name, first)
        first = False
        if type(p) is not Parameter and sparse_param(p):    # (SGD's) steps with sparse ops
            yield p, None, g
            continue
        if sparse:
            g = g.to_dense()
        if graph:
            yield p, real_view(p), real_view(-g if maximize else g)
            continue
        with device_guard(gpu_elsewhere(p._data)):
            ga = real(g._data)
            yield p, real(p._data), -ga if maximize else ga


def _refuse_foreach_graph(group, name):
    """``foreach=True`` with ``differentiable=True``: PyTorch's multi-tensor steps assert at
    ``step`` that they build no graph (not SGD's, Adafactor's, Muon's). Adagrad and Adamax
    assert even with no gradient, Adagrad before a sparse one's error too; the others' sparse
    gradient errors and Adam's capturable device check come first (``grads_of`` raises them)."""
    with_grad = [p for p in group["params"] if p._grad is not None]
    if name != "Adagrad" and any(getattr(p._grad, "is_sparse", False)
                                 or getattr(p._grad, "is_sparse_csr", False) for p in with_grad):
        return
    if not with_grad and name not in ("Adagrad", "Adamax"):
        return
    if name == "Adam" and group.get("capturable") and any(p.device.type != "cuda"
                                                          for p in with_grad):
        return
    raise AssertionError("_foreach ops don't support autograd")


_FOREACH_NO_GRAPH = {"Adadelta", "Adagrad", "Adam", "Adamax", "ASGD", "NAdam", "RAdam",
                     "RMSprop", "Rprop"}


def _check_fused(p, sparse, name, first=True):
    """``fused=True`` takes floating-point parameters only, and dense gradients. SGD's and
    Adagrad's steps check only the ``first`` parameter with a gradient so; a later complex
    one reaches SGD's kernel (NotImplementedError) or Adagrad's own check."""
    if not first and p.is_complex() and name in ("SGD", "Adagrad"):
        if name == "SGD":
            raise NotImplementedError("\"fused_sgd_kernel\" not implemented for "
                                      f"'{p.dtype._torch_name}'")
        raise RuntimeError(_FUSED_SPARSE[name])
    if not p.is_floating_point():
        raise RuntimeError("`fused=True` requires all the params to be floating point Tensors "
                           f"of supported devices: {_FUSED_DEVICES} but {p.dtype} and "
                           f"{p.device.type}")
    if sparse:
        raise RuntimeError(_FUSED_SPARSE.get(name, "`fused` does not support sparse grad"))


_FUSED_DEVICES = ["mps", "cuda", "xpu", "hpu", "cpu", "mtia", "privateuseone"]
_FUSED_SPARSE = {"SGD": "`_fused_sgd` does not support sparse gradients",
                 "Adagrad": "`fused` does not support sparse grad or complex param"}
_SPARSE_HINTS = {"Adam": ", please consider SparseAdam instead"}
_DEVICES = ["cuda", "xpu", "hpu", "privateuseone", "xla"]
_CAPTURABLE = {"NAdam": ("params, mu_products and state_steps", _DEVICES),
               "ASGD": ("params, mus, etas, and state_steps", _DEVICES),
               "Adadelta": ("params and state_steps", _DEVICES[:-1])}
# foreach=True's multi-tensor updates word it a little differently (and leave out xla)
_CAPTURABLE_FOREACH = {"Adam": ("params and state_steps", _DEVICES[:-1]),
                       "Adamax": ("params and state_steps", _DEVICES[:-1]),
                       "RAdam": ("params and state_steps", _DEVICES[:-1]),
                       "NAdam": ("params, mu_products, and state_steps", _DEVICES[:-1]),
                       "ASGD": ("params, mus, etas, and state_steps", _DEVICES[:-1])}


def sparse_param(p):
    """Whether parameter ``p`` is a sparse tensor (its ``.grad`` lives on its values)."""
    return isinstance(p, ValuesBacked) and (p.is_sparse or p.is_sparse_csr)


def nested_param(p):
    """Whether parameter ``p`` (asked only when not a Tensor) is a strided nested tensor: SGD
    steps one, the other optimizers refuse it as PyTorch's do (ember.nested._strided_optim)."""
    from ember.nested import by_components
    return by_components(p)


def state_like(p, fill=0.0):
    """A state tensor shaped and typed like parameter ``p``, filled with ``fill``, on its
    device (whichever GPU is current)."""
    if not isinstance(p, Tensor) and nested_param(p):     # (Adagrad's, for a nested one)
        from ember.nested._strided_ops import unsupported
        raise unsupported("full_like", p)
    with device_guard(gpu_elsewhere(p._data)):
        a = p._data.copy()
        a[...] = fill
    return _make(a)


def scalar_dtype(fused=False):
    """The NumPy dtype of step counts and scalar state: float64 while the default dtype is
    float64 (and the optimizer is not fused), else float32, as PyTorch chooses."""
    wide = not fused and get_default_dtype() is float64
    return np.float64 if wide else np.float32


def new_step(fused=False, like=None):
    """A step counter: a 0-d tensor, float32 (float64 under a float64 default dtype unless
    ``fused``), on the host, or on parameter ``like``'s device where PyTorch keeps it there."""
    return scalar_state(0.0, fused, like)


def step_like(p, group):
    """A new step counter for parameter ``p``: on its device under ``capturable`` or ``fused``
    (where PyTorch keeps it), else on the host."""
    on_device = group.get("capturable") or group.get("fused")
    return new_step(bool(group.get("fused")), p if on_device else None)


STEPS_MSG = "`state_steps` argument must contain a list of singleton tensors"


def step_count(state, numbers=False, message="API has changed, " + STEPS_MSG):
    """Increment and return the state's step counter: a 0-d or one-element tensor (A3C's shared
    optimizers set ``state["step"] = torch.zeros(1)``); a number raises PyTorch's error, or
    with ``numbers`` (ASGD) counts on a copy and leaves the state as it was, as PyTorch does."""
    step = state["step"]
    if not isinstance(step, Tensor):
        if numbers:
            return float(step) + 1
        raise RuntimeError(message)
    step._data += 1
    return float(step._data.reshape(-1)[0])


def scalar_state(fill, fused=False, like=None):
    """A 0-d state tensor in the step count's dtype (PyTorch keeps scalar state such as
    NAdam's mu_product in it whatever the parameter dtype), on the host, or on parameter
    ``like``'s device (ASGD's eta and mu, NAdam's mu_product, capturable steps)."""
    if like is None or like.device.type == "cpu":
        return _make(np.full((), float(fill), scalar_dtype(fused)))
    with device_guard(gpu_elsewhere(like._data)):
        return _make(xp_of(like._data).full((), float(fill), scalar_dtype(fused)))


def apply_updates(kernel, params, updates, update, *, differentiable=False, undo=None,
                  whole=False, **hyper):
    """Apply each parameter's update (its arrays in ``updates``): on a GPU all at once
    through the fused ``kernel`` (``backend.device_kernel``), which may leave some; the rest,
    and everything on the CPU, through ``update(*arrays, **hyper)``. Parameters on several
    GPUs update GPU by GPU, each made current. Then bump each parameter's version.
    ``differentiable`` updates hold tensors: their in-place ops record a graph and bump
    versions themselves. Where an update fails, ``undo(p)`` (a single-tensor step's) is called
    for each parameter ``p`` after it: PyTorch counts a parameter's step just before its update
    (``uncounter``), ember counted them all first. A complex parameter's error names its
    shapes, not its real view's, where PyTorch's update works on it ``whole`` (SGD's), or
    where the op that failed was the parameter's own (an error marked ``on_param``)."""
    if differentiable:
        for i, arrays in enumerate(updates):
            try:
                update(*arrays, **hyper)
            except Exception:
                _undo_after(undo, params, i)
                raise
        return
    gpus = _by_gpu(updates)
    for n, (elsewhere, chosen) in enumerate(gpus):
        with device_guard(elsewhere):
            fused = device_kernel(chosen[0][0], kernel)
            left = None if fused is None else fused(chosen, **hyper)
            for i in range(len(chosen)) if left is None else left:
                try:
                    update(*chosen[i], **hyper)
                except ValueError as error:     # (stale state: the kernel took none)
                    k = _index(updates, chosen[i])
                    _undo_after(undo, params, k, {id(u) for _, c in gpus[:n] for u in c},
                                updates)
                    stale = _stale_state_error(error, chosen[i])
                    if params[k].is_complex() and (whole or getattr(error, "on_param", 0)):
                        stale = complex_message(stale)
                    raise stale from None
    for p in params:
        p._bump_version()


def uncounter(states, group, keep=None):
    """``apply_updates``' ``undo`` for a single-tensor step (None under ``foreach``, whose
    list op counts every step first, as PyTorch's): a parameter's step count taken back, and
    the state entries it changed before its update put back as ``keep[p]`` holds them
    (NAdam's mu_product)."""
    if group.get("foreach") or group.get("fused"):
        return None

    def undo(p):
        state = states[p]
        state["step"]._data -= 1
        for key, old in (keep or {}).get(p, {}).items():
            state[key]._data[...] = old
    return undo


def complex_message(error):
    """PyTorch's error for an in-place op on a complex tensor from the one on its real view
    (``output with shape [3, 2] ...`` names ``[3]``): other messages read alike either way."""
    text = str(error)
    head, sep, tail = text.partition("] doesn't match the broadcast shape [")
    if not (sep and text.startswith("output with shape [") and head.endswith("2")
            and tail.endswith("2]")):
        return error
    out, wide = head[len("output with shape ["):], tail[:-1]
    out, wide = (", ".join(s.split(", ")[:-1]) for s in (out, wide))
    return RuntimeError(f"output with shape [{out}] doesn't match the broadcast shape [{wide}]")


def _undo_after(undo, params, i, done=(), updates=None):
    """``undo`` each parameter after the ``i``-th, whose update failed, but those whose
    update (by id in ``done``) went through on another GPU before it."""
    if undo is not None:
        for k in range(i + 1, len(params)):
            if not done or id(updates[k]) not in done:
                undo(params[k])


def _index(updates, arrays):
    """Where ``arrays`` lies in ``updates`` (by identity)."""
    return next(i for i, u in enumerate(updates) if u is arrays)


def _stale_state_error(error, arrays):
    """PyTorch's RuntimeError for NumPy's broadcast ValueError in an update: state kept from
    before the parameter changed shape (TensoRF and DVGO upsample grids by ``p.data = ...``
    without a fresh optimizer); any other ValueError as it was."""
    text = str(error)
    if "broadcast" not in text:
        return error
    new = tuple(arrays[0].shape)
    shapes = [tuple(a.shape) for a in arrays[1:] if getattr(a, "ndim", 0)]
    stale = [s for s in shapes if s != new]
    if not stale:
        return RuntimeError(text)
    message = broadcast_message([stale[0], new])
    if message.startswith("shapes "):   # broadcastable: the first in-place write that cannot
        wide = np.broadcast_shapes(stale[0], new)   # (into the state, else the parameter)
        out = stale[0] if wide != stale[0] else new
        message = f"output with shape {list(out)} doesn't match the broadcast shape {list(wide)}"
    return RuntimeError(message)


def check_shapes(out, *shapes):
    """The broadcast shape of ``shapes``, or PyTorch's RuntimeError where they do not
    broadcast or (``out`` given: an in-place op's output shape, first operand) the result
    would not fit ``out``: for state kept from before its parameter changed shape."""
    shapes = [tuple(s) for s in ((out,) if out is not None else ()) + shapes]
    message = broadcast_message(shapes)
    if not message.startswith("shapes "):
        raise RuntimeError(message)
    wide = np.broadcast_shapes(*shapes)
    if out is not None and wide != shapes[0]:
        raise RuntimeError(f"output with shape {list(out)} doesn't match the broadcast shape "
                           f"{list(wide)}")
    return wide


def stale_in(state, group, keys):
    """Whether some parameter of ``group`` with a gradient has state under one of ``keys``
    kept from before it changed shape (``p.data = ...``)."""
    for p in group["params"]:
        kept = state.get(p) if p._grad is not None and isinstance(p, Tensor) else None
        if kept and any(kept[key].shape != p.shape for key in keys):
            return True
    return False


def _by_gpu(updates):
    """``updates`` as (the GPU to make current or None, its updates) pairs: one pair unless
    the parameters lie on several GPUs."""
    if not updates:
        return []
    if not SEVERAL_GPUS[0]:
        return [(None, updates)]
    groups = {}
    for u in updates:
        groups.setdefault(gpu_elsewhere(u[0]), []).append(u)
    return list(groups.items())
