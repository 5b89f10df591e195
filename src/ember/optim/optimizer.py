"""Optimizer: the base of every optimizer (``torch.optim.Optimizer``).

Parameter groups, per-parameter state, zero_grad, step hooks and a state_dict in PyTorch's
layout (state keyed by integer parameter ids, groups listing those ids), so checkpoints
round-trip between ember and PyTorch. Subclasses implement ``step`` on backend arrays in
place (see ``_arrays``): an update builds no autograd graph and allocates few temporaries.
"""

import contextlib
import copy
import functools
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Iterable
from itertools import chain
from typing import Any

from ember._dtype import float32
from ember._tensor import Tensor
from ember._values_backed import ValuesBacked
from ember._warn import outside_level
from ember.autograd.graph import RemovableHandle
from ember.autograd.grad_mode import enable_grad, set_grad_enabled
from ember.backend import SEVERAL_GPUS, device_guard, gpu_elsewhere, loud_fp, quiet_fp
from ember.nn.parameter import Parameter
from ember.optim._state import nested_param, scalar_state, sparse_param
from ember.optim._state import value as _get_value  # noqa: F401  (user optimizers import it)
from ember.profiler import _recorder

__all__ = ["Optimizer", "register_optimizer_step_post_hook",
           "register_optimizer_step_pre_hook", "required"]

# What PyTorch's annotations call an optimizer's ``params`` and its state_dict.
ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]] | Iterable[tuple[str, Tensor]]
StateDict = dict[str, Any]

# PyTorch's attribute names (code outside torch.optim reads them)
_HOOK_TABLES = ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
                "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
                "_optimizer_load_state_dict_pre_hooks", "_optimizer_load_state_dict_post_hooks")
_GLOBAL_STEP_PRE_HOOKS = OrderedDict()
_GLOBAL_STEP_POST_HOOKS = OrderedDict()


class _RequiredParameter:
    """The default of an option a group must give (PyTorch's ``required``)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer:
    """Base class for optimizers: ``params`` is an iterable of tensors or of dicts (groups)."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        for table in _HOOK_TABLES:
            setattr(self, table, OrderedDict())
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {params.type()}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Add a group of parameters with its own options (defaults fill the rest)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        params = list(params)
        names = None
        if any(isinstance(p, tuple) for p in params):      # named_parameters()
            if not all(isinstance(p, tuple) for p in params):
                raise ValueError("all optimizer params should be with/without names. Some "
                                 "param names are missing")
            names = [name for name, _ in params]
            params = [p for _, p in params]
        if self.param_groups and ("param_names" in self.param_groups[0]) != (names is not None):
            which = "with" if names is not None else "without"
            raise ValueError("all optimizer param groups should be with/without names. cannot "
                             f"add param group {which} names to the optimizer")
        for p in params:
            if not isinstance(p, Tensor) and not nested_param(p):
                kind = type(p).__qualname__
                if type(p).__module__ != "builtins":
                    kind = f"{type(p).__module__}.{kind}"
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                f"{kind}")
            if not (self.defaults.get("differentiable") or p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        group = {"params": params}
        group.update((k, v) for k, v in param_group.items() if k != "params")
        if names is not None:
            group["param_names"] = names
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        if len({id(p) for p in params}) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=outside_level())
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    @staticmethod
    def _group_tensors_by_device_and_dtype(tensorlistlist, with_indices=False):
        """Parallel tensor lists grouped by device and dtype, for multi-tensor updates
        (see ember.utils._foreach_utils)."""
        from ember.utils._foreach_utils import _group_tensors_by_device_and_dtype
        return _group_tensors_by_device_and_dtype(tensorlistlist, with_indices)

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all optimized parameters (to None by default)."""
        if not _recorder._ACTIVE:
            return _zero_grads(self.param_groups, set_to_none)
        with _profiled(f"Optimizer.zero_grad#{type(self).__name__}.zero_grad"):
            return _zero_grads(self.param_groups, set_to_none)

    def step(self, closure=None):
        """Perform one optimization step; ``closure`` re-evaluates the model and returns
        the loss."""
        raise NotImplementedError

    # ----- hooks ---------------------------------------------------------------------------

    def register_step_pre_hook(self, hook):
        """Call ``hook(optimizer, args, kwargs)`` before each step; it may return new
        ``(args, kwargs)``."""
        return _add(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook):
        """Call ``hook(optimizer, args, kwargs)`` after each step."""
        return _add(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """Call ``hook(optimizer)`` before ``state_dict`` builds its result."""
        return _add(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """Call ``hook(optimizer, state_dict)`` on ``state_dict``'s result; it may return a
        new one."""
        return _add(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """Call ``hook(optimizer, state_dict)`` on a shallow copy of what ``load_state_dict``
        gets; it may return a new one to load."""
        return _add(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """Call ``hook(optimizer)`` after ``load_state_dict``."""
        return _add(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    @staticmethod
    def profile_hook_step(func):
        """``func`` (an optimizer's ``step``) running the step pre- and post-hooks around it
        (subclasses' ``step`` get it without asking)."""
        return _with_hooks(func)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _with_hooks(cls.__dict__["step"])

    # ----- state_dict --------------------------------------------------------------------------

    def state_dict(self):
        """``{'state': {id: {...}}, 'param_groups': [{..., 'params': [ids]}]}`` (PyTorch's
        layout: ids number the parameters in group order)."""
        for hook in list(self._optimizer_state_dict_pre_hooks.values()):
            hook(self)
        ids = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                ids.setdefault(id(p), len(ids))
            packed["params"] = [ids[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {}
        for p, s in self.state.items():
            if id(p) in ids:
                state[ids[id(p)]] = s
            elif not isinstance(p, Tensor) and not nested_param(p):
                state[p] = s        # (a loaded id: as it came)
        state_dict = {"state": state, "param_groups": groups}
        for hook in list(self._optimizer_state_dict_post_hooks.values()):
            state_dict = _or(hook(self, state_dict), state_dict)
        return state_dict

    def load_state_dict(self, state_dict):
        """Restore state and options from ``state_dict``.

        As in PyTorch, state tensors are shared with ``state_dict`` where they already have
        their parameter's dtype and device (others are cast to them; step counts are kept),
        so loading a checkpoint holds one copy of the state; the groups are copied."""
        state_dict = dict(state_dict)
        for hook in list(self._optimizer_load_state_dict_pre_hooks.values()):
            state_dict = _or(hook(self, state_dict), state_dict)
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for ours, theirs in zip(self.param_groups, saved_groups):
            if len(ours["params"]) != len(theirs["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in self.param_groups)))
        self.state = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in id_map:
                p = id_map[key]
                group = next((g for g in saved_groups if key in g["params"]), {})
                hosted = group.get("capturable") or group.get("fused")     # step on p's device
                self.state[p] = _cast_state(p, None, value, bool(hosted))
            else:       # state of no parameter here: kept under its id, as PyTorch does
                self.state[key] = value
        self.param_groups = [_loaded_group(ours, theirs)
                             for ours, theirs in zip(self.param_groups, saved_groups)]
        # (PyTorch loads through __setstate__: a group added later gets differentiable too)
        self.defaults.setdefault("differentiable", False)
        self._upgrade()
        for hook in list(self._optimizer_load_state_dict_post_hooks.values()):
            hook(self)

    # Group options an older PyTorch's checkpoint may lack, and the state entries it kept
    # as Python numbers: loading (or unpickling) fills the first in, makes the second tensors.
    _LEGACY_DEFAULTS = {}
    _LEGACY_SCALARS = ()
    _LEGACY_ON_DEVICE = False       # those scalars on the parameter's device whatever the group

    def _upgrade(self):
        """Bring state and groups from an older PyTorch's checkpoint up to date, as PyTorch's
        ``__setstate__`` does."""
        for group in self.param_groups:
            for name, default in self._LEGACY_DEFAULTS.items():
                group.setdefault(name, default)
            for p in group["params"]:
                state = self.state.get(p)
                hosted = (self._LEGACY_ON_DEVICE or group.get("capturable")
                          or group.get("fused"))
                for key in self._LEGACY_SCALARS if state else ():
                    if key in state and not isinstance(state[key], Tensor):
                        state[key] = scalar_state(state[key], group.get("fused"),
                                                  p if hosted else None)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for table in _HOOK_TABLES:
            self.__dict__.setdefault(table, OrderedDict())
        self.defaults.setdefault("differentiable", False)
        self._upgrade()

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            if i:
                lines.append("")
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {k}: {group[k]}" for k in sorted(group) if k != "params")
        lines.append(")")
        return "\n".join(lines)


def _loaded_group(ours, theirs):
    """Saved group ``theirs`` over our parameters (and our names, where it has none)."""
    group = dict(theirs, params=ours["params"])
    if "param_names" in ours and "param_names" not in group:
        group["param_names"] = ours["param_names"]
    return group


def _cast_state(param, key, value, hosted=False):
    """``value`` with its tensors on their parameter's device, and in its dtype where that
    is floating-point, whatever theirs (integer, bool and complex state too, as PyTorch casts
    them); step counts kept as they are, or made float32 on the parameter's device where
    ``hosted`` (a capturable or fused group's). Containers are rebuilt, a list's items cast
    as under no key (a list under ``step`` is no step count: PyTorch's rule), everything
    else as given."""
    if isinstance(value, dict):
        return {k: _cast_state(param, k, v, hosted) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_cast_state(param, None, v, hosted) for v in value)
    if isinstance(value, Tensor) and key == "step" and hosted:
        return value.to(dtype=float32, device=param.device)
    if not isinstance(value, Tensor) or key == "step":
        return value
    if param.is_floating_point():
        return value.to(dtype=param.dtype, device=param.device)
    return value.to(device=param.device)


def _zero_grads(param_groups, set_to_none):
    for group in param_groups:
        for p in group["params"]:
            if p._grad is None:
                if type(p) is not Parameter and sparse_param(p) and p.grad is not None:
                    _zero_sparse_param_grad(p, set_to_none)     # (its values hold the grad)
                continue
            if set_to_none:
                p._grad = None
            elif isinstance(p._grad, ValuesBacked) or not isinstance(p, Tensor):   # sparse, nested
                _zero_in_place(p._grad)
            else:
                g = p._grad
                if g._grad_fn is not None:
                    g.detach_()
                else:
                    g._requires_grad = False
                g._data[...] = 0
                g._bump_version()


def _zero_sparse_param_grad(p, set_to_none):
    """zero_grad of a sparse parameter: its gradient dropped, or zeroed in place (the
    parameter keeps the emptied gradient, see sparse/_leaf_grads.py)."""
    if set_to_none:
        p.grad = None
    else:
        _zero_in_place(p.grad)


def _zero_in_place(g):
    """Sparse or nested gradient ``g`` detached and zeroed in place, through its methods."""
    if g.grad_fn is not None:
        g.detach_()
    else:
        g.requires_grad_(False)
    g.zero_()


def _with_hooks(step):
    def wrapped(*args, **kwargs):
        if args and not hasattr(args[0], "_optimizer_step_pre_hooks"):
            # an optimizer that never ran Optimizer.__init__ (opacus's DPOptimizer wraps
            # another and forwards param_groups): PyTorch adds the hooks to a class's step in
            # __init__, so such a step runs bare and the wrapped optimizer's runs the hooks
            return step(*args, **kwargs)
        if not _recorder._ACTIVE:
            return _hooked_step(step, args, kwargs)
        # PyTorch's profiles show each step as this range (the hooks inside it)
        with _profiled(f"Optimizer.step#{type(args[0]).__name__}.step"):
            return _hooked_step(step, args, kwargs)
    wrapped.__name__ = step.__name__
    wrapped.__qualname__ = step.__qualname__
    wrapped.__doc__ = step.__doc__
    wrapped.__wrapped__ = step          # inspect.signature shows the step's own
    return wrapped


@contextlib.contextmanager
def _profiled(name):
    """A user-annotation range named ``name`` in the profiles recording now."""
    r = _recorder.begin(name, "user_annotation")
    try:
        yield
    finally:
        _recorder.end(r)


def _hooked_step(step, args, kwargs):
    """``step(*args, **kwargs)`` between the step pre- and post-hooks."""
    self = args[0]          # hooks see the step's arguments with the optimizer first
    for hook in [*_GLOBAL_STEP_PRE_HOOKS.values(),
                 *self._optimizer_step_pre_hooks.values()]:
        result = hook(self, args, kwargs)
        if result is not None:
            if not (isinstance(result, tuple) and len(result) == 2):
                raise RuntimeError(f"{step} must return None or a tuple of (new_args, "
                                   f"new_kwargs), but got {result}.")
            args, kwargs = result
    token = quiet_fp()      # PyTorch's updates give inf/nan silently (0/0 with eps=0)
    try:
        with device_guard(_gpu_of_parameters(self)):
            out = step(*args, **kwargs)
    finally:
        loud_fp(token)
    for hook in [*self._optimizer_step_post_hooks.values(),
                 *_GLOBAL_STEP_POST_HOOKS.values()]:
        hook(self, args, kwargs)
    return out


def _use_grad_for_differentiable(step):
    """Run ``step`` with autograd on exactly when the optimizer is ``differentiable`` (its
    update then builds a graph back to the gradients, lr and initial parameters)."""
    @functools.wraps(step)
    def wrapped(self, *args, **kwargs):
        with set_grad_enabled(bool(self.defaults.get("differentiable"))):
            return step(self, *args, **kwargs)
    return wrapped


# Helpers that optimizers written outside PyTorch import from torch.optim.optimizer.

def _disable_dynamo_if_unsupported(single_tensor_fn=None):
    """A decorator leaving an optimizer's functional form as it is (PyTorch's keeps its
    compiler away from some variants; ember has none to keep away)."""
    def decorator(func):
        return func
    return decorator


# Pieces of the docstrings PyTorch's optimizers are assembled from (copied optimizers format
# them into theirs).
_params_doc = """params (iterable): iterable of parameters or named_parameters to optimize
            or iterable of dicts defining parameter groups."""
_foreach_doc = """foreach (bool, optional): whether the multi-tensor (foreach) implementation
            is used; None picks it where every parameter is on a GPU (default: None)"""
_fused_doc = """fused (bool, optional): whether the fused implementation is used
            (default: None)"""
_capturable_doc = """capturable (bool, optional): whether this instance is safe to capture in
            a graph, keeping its step count on the parameters' device (default: False)"""
_differentiable_doc = """differentiable (bool, optional): whether autograd records the step,
            so that it can be differentiated (default: False)"""
_maximize_doc = """maximize (bool, optional): maximize the objective with respect to the
            params, instead of minimizing (default: False)"""


def _to_scalar(x):
    """A one-element tensor made 0-d; anything else as given."""
    if isinstance(x, Tensor) and x.dim() != 0:
        return x.squeeze()
    return x


def _stack_if_compiling(x):
    """``x`` itself (it is stacked only while compiling)."""
    return x


def _get_scalar_dtype(is_fused=None):
    """The dtype of step counts: float64 under a float64 default dtype, else float32."""
    from ember._dtype import float32, float64, get_default_dtype
    return float64 if get_default_dtype() is float64 and not is_fused else float32


def _view_as_real(params, *state_and_grads):
    """Replace each complex tensor in these lists (in place) by its real view."""
    from ember import view_as_real
    for i, p in enumerate(params):
        if p.is_complex():
            params[i] = view_as_real(p)
            for tensors in state_and_grads:
                tensors[i] = view_as_real(tensors[i])


def _default_to_fused_or_foreach(params, differentiable, use_fused=False):
    """``(fused, foreach)`` an optimizer picks when given neither: fused where asked and
    every parameter is floating point, foreach where every parameter is on a GPU."""
    if differentiable:
        return False, False
    fused = use_fused and all(p is None or p.is_floating_point() for p in params)
    foreach = not fused and all(p is None or p.device.type == "cuda" for p in params)
    return fused, foreach


def _gpu_of_parameters(optimizer):
    """The GPU of the optimizer's first parameter when it is not the current one (the step
    then runs there, as its array code must), else None."""
    if not SEVERAL_GPUS[0]:
        return None
    for group in optimizer.param_groups:
        for p in group["params"]:
            return gpu_elsewhere(p._data)
    return None


def register_optimizer_step_pre_hook(hook):
    """Call ``hook(optimizer, args, kwargs)`` before every optimizer's step (before the
    optimizer's own pre-hooks)."""
    return _add(_GLOBAL_STEP_PRE_HOOKS, hook)


def register_optimizer_step_post_hook(hook):
    """Call ``hook(optimizer, args, kwargs)`` after every optimizer's step."""
    return _add(_GLOBAL_STEP_POST_HOOKS, hook)


def _add(table, hook, prepend=False):
    handle = RemovableHandle(table)
    table[handle.id] = hook
    if prepend:
        table.move_to_end(handle.id, last=False)
    return handle


def _or(result, default):
    return default if result is None else result


def closure_loss(closure):
    """Evaluate a step's closure with gradients enabled (steps run under no_grad)."""
    if closure is None:
        return None
    with enable_grad():
        return closure()

