"""Parametrizations: a parameter computed from other tensors on every access
(``register_parametrization``), kept under ``module.parametrizations[name].original``."""

import copy
from collections.abc import Sequence
from contextlib import contextmanager

from ember._tensor import Tensor
from ember.autograd.grad_mode import no_grad
from ember.nn.modules.container import ModuleDict, ModuleList
from ember.nn.parameter import Parameter

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations",
           "transfer_parametrizations_and_params"]

_cache_enabled = 0
_cache = {}


@contextmanager
def cached():
    """Within this block each parametrized tensor is computed once, on first access."""
    global _cache_enabled, _cache
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register_parameter_or_buffer(module, name, t):
    if isinstance(t, Parameter):
        module.register_parameter(name, t)
    else:
        module.register_buffer(name, t)


def _maybe_set(dest, src):
    """Make ``dest`` hold ``src``'s values (same object, so optimizers keep it)."""
    dest._data = src._data
    dest._bump_version()


def _check_registered(value, original):
    """The one tensor ``right_inverse`` gave at registration keeps ``original``'s dtype."""
    if value.dtype != original.dtype:
        raise ValueError(f"When `right_inverse` outputs one tensor, it may not change the dtype."
                         f"\noriginal.dtype: {original.dtype}\n"
                         f"right_inverse(original).dtype: {value.dtype}")


def _check_assigned(value, original):
    """What ``right_inverse`` gave for an assigned value is a tensor of ``original``'s dtype."""
    if not isinstance(value, Tensor):
        raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
    if value.dtype != original.dtype:
        raise ValueError(f"The tensor returned by `right_inverse` has dtype {value.dtype} while "
                         f"`original` has dtype {original.dtype}")


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order to ``original`` (or
    ``original0, original1, ...`` when ``right_inverse`` returns several tensors)."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = original.shape, original.dtype
        with no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (Tensor, Sequence)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            _check_registered(new, original)
            with no_grad():
                _maybe_set(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, t in enumerate(new):
                if not isinstance(t, Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                     f"tensors (list, tuple...). Got element {i} of the "
                                     f"sequence with type {type(t).__name__}.")
                if isinstance(original, Parameter):
                    t = Parameter(t, original.requires_grad)
                t.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", t)
        if not self.unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(z).__name__}.")
            if z.dtype != dtype:
                raise ValueError("Registering a parametrization may not change the dtype of "
                                 "the tensor, unless `unsafe` flag is enabled.\n"
                                 f"unparametrized dtype: {dtype}\nparametrized dtype: {z.dtype}")
            if z.shape != shape:
                raise ValueError("Registering a parametrization may not change the shape of "
                                 "the tensor, unless `unsafe` flag is enabled.\n"
                                 f"unparametrized shape: {shape}\nparametrized shape: {z.shape}")

    def right_inverse(self, value):
        """Set the originals so that the parametrized tensor equals ``value``."""
        with no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not "
                                       f"implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                _check_assigned(value, self.original)
                _maybe_set(self.original, value)
            else:
                if not isinstance(value, Sequence) or len(value) != self.ntensors:
                    raise ValueError(f"'right_inverse' must return a sequence of tensors of "
                                     f"length {self.ntensors}.")
                for i, t in enumerate(value):
                    _maybe_set(getattr(self, f"original{i}"), t)

    def forward(self):
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in list(self)[1:]:
            x = module(x)
        return x


def _getstate(self):
    raise RuntimeError("Serialization of parametrized modules is only supported through "
                       "state_dict(). See:\nhttps://pytorch.org/tutorials/beginner/"
                       "saving_loading_models.html#saving-loading-a-general-checkpoint-for-"
                       "inference-and-or-resuming-training")


def _deepcopy(self, memo):
    if id(self) in memo:
        return memo[id(self)]
    replica = type(self).__new__(type(self))
    memo[id(self)] = replica
    replica.__dict__ = copy.deepcopy(self.__dict__, memo)
    return replica


def _inject_new_class(module):
    cls = type(module)
    body = {"__getstate__": _getstate}
    if not hasattr(cls, "__deepcopy__"):
        body["__deepcopy__"] = _deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), body)


def _inject_property(module, name):
    def get(self):
        parametrization = self.parametrizations[name]
        if not _cache_enabled:
            return parametrization()
        key = (id(self), name)
        if key not in _cache:
            _cache[key] = parametrization()
        return _cache[key]

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)

    setattr(type(module), name, property(get, set_))


def _check_same(x, y, message):
    """``x`` has ``y``'s dtype and shape, else ValueError from ``message``'s template."""
    for what in ("dtype", "shape"):
        if getattr(x, what) != getattr(y, what):
            text = message.replace("{}", what, 1)
            raise ValueError(text.format(what, getattr(y, what), getattr(x, what)))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Make ``module.<tensor_name>`` the output of ``parametrization`` applied to the original
    tensor (now ``module.parametrizations[tensor_name].original``); returns ``module``."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(x).__name__}.")
            _check_same(x, y, "Registering a parametrization may not change the {} of the "
                        "tensor, unless the `unsafe` flag is enabled.\n"
                        f"module.{tensor_name}.{{0}}: {{1}}\n"
                        f"parametrization(module.{tensor_name}).{{0}}: {{2}}")
            if hasattr(parametrization, "right_inverse"):
                try:
                    z = parametrization.right_inverse(x)
                except NotImplementedError:
                    z = y               # (right_inverse is taken to be the identity)
                if not isinstance(z, Tensor):
                    raise ValueError(f"parametrization.right_inverse must return a tensor. "
                                     f"Got: {type(z).__name__}")
                _check_same(z, y, "The tensor returned by parametrization.right_inverse must "
                            "have the same {} as module." + tensor_name + ", unless the "
                            "`unsafe` flag is enabled.\n"
                            f"module.{tensor_name}.{{0}}: {{1}}\nreturned {{0}}: {{2}}")
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def is_parametrized(module, tensor_name=None):
    """Whether ``module`` (or its ``tensor_name``) has a parametrization."""
    plists = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(plists, ModuleDict):
        return False
    return len(plists) > 0 if tensor_name is None else tensor_name in plists


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Undo ``register_parametrization``: ``tensor_name`` becomes a plain parameter again,
    holding the parametrized value (or the original when ``leave_parametrized=False``)."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                _maybe_set(original, getattr(module, tensor_name))
    elif leave_parametrized:
        t = getattr(module, tensor_name)
        original = Parameter(t.detach(), t.requires_grad) if t.requires_grad else t.detach()
    else:
        raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                         "that is parametrized in terms of a sequence of tensors.")
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module


def type_before_parametrizations(module):
    """The module's class before parametrizations replaced it."""
    return type(module).__bases__[0] if is_parametrized(module) else type(module)


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Register ``from_module``'s parametrizations of ``tensor_name`` (default: all) on
    ``to_module`` as well, sharing the parametrization modules and the original tensors
    (created on ``to_module`` first where it lacks them); returns ``to_module``."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        source = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        for parametrization in source:
            register_parametrization(to_module, name, parametrization, unsafe=source.unsafe)
        target = to_module.parametrizations[name]
        for table in (source._parameters, source._buffers):
            for key, original in table.items():
                if key.startswith("original"):
                    setattr(target, key, original)
    return to_module
