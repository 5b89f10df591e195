"""Module: the base class of every layer and model (``torch.nn.Module``).

A module owns parameters, buffers and submodules, registered by attribute assignment, and
computes ``forward`` when called. Calling a module without hooks costs one check more than
calling ``forward``; forward errors name the failing module (see NOTE [Module error context]
in _errors.py).
"""

import warnings
from collections import OrderedDict

from ember import __future__ as _future
from ember._api import typename as _typename
from ember._tensor import Tensor
from ember.autograd.grad_mode import no_grad
from ember.nn.modules import _hooks
from ember.nn.modules._errors import ANNOTATED, annotate
from ember.nn.modules._state_dict import StateDict, _IncompatibleKeys  # noqa: F401
from ember.nn.modules._hooks import ACTIVE as _GLOBAL_HOOKS, add_hook, hooked_call
from ember.nn.modules._hooks import (  # noqa: F401  (PyTorch exposes them here)
    RemovableHandle, register_module_backward_hook, register_module_buffer_registration_hook,
    register_module_forward_hook, register_module_forward_pre_hook,
    register_module_full_backward_hook, register_module_full_backward_pre_hook,
    register_module_module_registration_hook, register_module_parameter_registration_hook)
from ember.nn.parameter import Buffer, Parameter

# PyTorch's names for the all-module hook tables (tools read them to see whether any is set)
_global_forward_pre_hooks = _hooks.forward_pre_hooks
_global_forward_hooks = _hooks.forward_hooks
_global_forward_hooks_always_called = _hooks.forward_hooks_always_called
_global_forward_hooks_with_kwargs = _hooks.forward_hooks_with_kwargs
_global_backward_pre_hooks = _hooks.backward_pre_hooks
_global_backward_hooks = _hooks.backward_hooks
_global_buffer_registration_hooks = _hooks.buffer_registration_hooks
_global_module_registration_hooks = _hooks.module_registration_hooks
_global_parameter_registration_hooks = _hooks.parameter_registration_hooks

__all__ = ["Module", "register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_pre_hook", "register_module_full_backward_hook",
           "register_module_backward_hook", "register_module_buffer_registration_hook",
           "register_module_module_registration_hook",
           "register_module_parameter_registration_hook"]

_HOOK_TABLES = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
                "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
                "_backward_pre_hooks", "_backward_hooks", "_state_dict_pre_hooks",
                "_state_dict_hooks", "_load_state_dict_pre_hooks",
                "_load_state_dict_post_hooks")


def _addindent(text, n):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


class Module(StateDict):
    """Base class for all neural network modules."""

    training: bool
    _version = 1
    dump_patches = False
    call_super_init = False

    def __init__(self, *args, **kwargs):
        if not self.call_super_init and (args or kwargs):
            if kwargs:
                raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword "
                                f"argument '{next(iter(kwargs))}'")
            raise TypeError(f"{type(self).__name__}.__init__() takes 1 positional argument "
                            f"but {len(args) + 1} were given")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_is_full_backward_hook"] = None      # which kind of backward hook it takes, once set
        for table in _HOOK_TABLES:
            d[table] = OrderedDict()
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    def forward(self, *args, **kwargs):
        """The computation of this module; subclasses define it."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  f'"forward" function')

    def __call__(self, *args, **kwargs):
        d = self.__dict__             # one attribute lookup: Module's are slow (__getattr__)
        if (d["_forward_pre_hooks"] or d["_forward_hooks"] or d["_backward_hooks"]
                or d["_backward_pre_hooks"] or _GLOBAL_HOOKS[0]):
            try:
                return hooked_call(self, args, kwargs)
            except ANNOTATED as e:
                annotate(self, e, args)
                raise
        try:
            return self.forward(*args, **kwargs)
        except ANNOTATED as e:
            annotate(self, e, args)
            raise

    _call_impl = __call__

    # ----- registration ------------------------------------------------------------------

    def register_parameter(self, name, param):
        """Add a parameter (or None) under ``name``."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name(self, name, "parameter", self._parameters)
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter "
                            f"'{name}' (torch.nn.Parameter or None required)")
        if param._grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             f"parameters must be created explicitly. To express '{name}' as "
                             f"a function of another Tensor, compute the value in the "
                             f"forward() method.")
        for hook in _hooks.parameter_registration_hooks.values():
            out = hook(self, name, param)
            if out is not None:
                param = out
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add a buffer (state that is not a parameter) under ``name``."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name(self, name, "buffer", self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            f"(torch Tensor or None required)")
        for hook in _hooks.buffer_registration_hooks.values():
            out = hook(self, name, tensor)
            if out is not None:
                tensor = out
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Add a child module (or None) under ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f"module name can't contain \".\", got: {name}")
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._put_module(name, module)

    def _put_module(self, name, module):
        # (attribute assignment registers here without add_module's name checks, as PyTorch's)
        for hook in _hooks.module_registration_hooks.values():
            out = hook(self, name, module)
            if out is not None:
                module = out
        self._modules[name] = module

    def register_module(self, name, module):
        """Alias of ``add_module``."""
        self.add_module(name, module)

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            _discard(d, name, keep="_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                f"(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if "_modules" not in d:
                raise AttributeError("cannot assign module before Module.__init__() call")
            _discard(d, name, keep="_modules")
            self._put_module(name, value)
        elif name in d.get("_modules", ()):
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                f"(torch.nn.Module or None expected)")
            self._put_module(name, value)
        elif name in d.get("_buffers", ()) or isinstance(value, Buffer):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                f"(torch.nn.Buffer, torch.Tensor or None expected)")
            if isinstance(value, Buffer):     # (a plain attribute of that name is an error)
                persistent = value.persistent
            else:
                persistent = name not in self._non_persistent_buffers_set
            self.register_buffer(name, value, persistent)
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if name in d.get(table, ()):
                del d[table][name]
                d["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = [*dir(type(self)), *self.__dict__, *self._parameters, *self._modules,
                *self._buffers]
        return sorted(k for k in keys if not k[0].isdigit())

    def __getstate__(self):
        return self.__dict__.copy()

    def __setstate__(self, state):
        self.__dict__.update(state)
        d = self.__dict__
        for table in _HOOK_TABLES:
            d.setdefault(table, OrderedDict())
        d.setdefault("_non_persistent_buffers_set", set())

    # ----- lookup --------------------------------------------------------------------------

    def get_submodule(self, target):
        """The submodule at dotted path ``target`` ("" is this module)."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target, module, strict=False):
        """Replace (or, unless ``strict``, add) the submodule at dotted path ``target``."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(parent._get_name() + " has no attribute `" + name + "`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError("`" + name + "` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target):
        """The parameter at dotted path ``target``."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        param = getattr(mod, name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        """The buffer at dotted path ``target``."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        if name not in mod._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return getattr(mod, name)

    # ----- traversal ---------------------------------------------------------------------

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """Yield ``(name, module)`` for this module and every module below it."""
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(memo, prefix + "." + name if prefix else name,
                                               remove_duplicate)

    def modules(self, remove_duplicate=True):
        """Yield this module and every module below it (shared ones once unless asked)."""
        for _, m in self.named_modules(remove_duplicate=remove_duplicate):
            yield m

    def named_children(self):
        """Yield ``(name, module)`` for the direct children."""
        memo = set()
        for name, child in self._modules.items():
            if child is not None and child not in memo:
                memo.add(child)
                yield name, child

    def children(self):
        """Yield the direct children."""
        for _, m in self.named_children():
            yield m

    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for mod_prefix, module in modules:
            for name, value in get_members(module):
                if value is None or value in memo:
                    continue
                if remove_duplicate:
                    memo.add(value)
                yield (mod_prefix + "." + name if mod_prefix else name), value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """Yield ``(name, parameter)`` pairs, names dotted from this module."""
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                       remove_duplicate)

    def parameters(self, recurse=True):
        """Yield the parameters of this module (and its submodules when ``recurse``)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """Yield ``(name, buffer)`` pairs, names dotted from this module."""
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                       remove_duplicate)

    def buffers(self, recurse=True):
        """Yield the buffers of this module (and its submodules when ``recurse``)."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ----- forward and backward hooks -----------------------------------------------------

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args)`` (or ``(module, args, kwargs)``) before forward; it may
        return new args (or ``(args, kwargs)``)."""
        flags = (self._forward_pre_hooks_with_kwargs,) if with_kwargs else ()
        return add_hook(self._forward_pre_hooks, hook, prepend, flags)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """Call ``hook(module, args, output)`` (or ``(module, args, kwargs, output)``) after
        forward; it may return a new output."""
        flags = ((self._forward_hooks_with_kwargs,) if with_kwargs else ()) + (
            (self._forward_hooks_always_called,) if always_call else ())
        return add_hook(self._forward_hooks, hook, prepend, flags)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """Call ``hook(module, grad_output)`` before the input gradients are computed."""
        return add_hook(self._backward_pre_hooks, hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """Call ``hook(module, grad_input, grad_output)`` once the input gradients exist; it
        may return new grad_input."""
        self._backward_hook_kind(True)
        return add_hook(self._backward_hooks, hook, prepend)

    def register_backward_hook(self, hook):
        """Deprecated: call ``hook(module, grad_input, grad_output)`` with the gradients of
        the autograd Node that makes the module's output (its inputs' gradients only when the
        forward is that one Node); a module takes this kind or the full kind."""
        self._backward_hook_kind(False)
        return add_hook(self._backward_hooks, hook)

    def _backward_hook_kind(self, full):
        kind = self.__dict__.get("_is_full_backward_hook")
        if kind is not None and kind != full:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks "
                               "on a single Module. Please use only one of them.")
        self.__dict__["_is_full_backward_hook"] = full

    # ----- modes and gradients ---------------------------------------------------------

    def train(self, mode=True):
        """Set training mode on this module and its submodules; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        """Set evaluation mode (``train(False)``); returns self."""
        return self.train(False)

    def compile(self, *args, **kwargs):
        """Compile this module's calls in place, as ``ember.compile`` would: ember has no
        compiler yet, so this checks the arguments and the module keeps running eagerly."""
        from ember.compiler import compile
        compile(lambda: None, *args, **kwargs)

    def requires_grad_(self, requires_grad=True):
        """Set ``requires_grad`` on every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of every parameter (to None, or to zeros)."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if p.grad.grad_fn is not None:
                    p.grad.detach_()
                else:
                    p.grad.requires_grad_(False)
                p.grad.zero_()

    def share_memory(self):
        """Move every parameter, gradient and buffer into shared memory; returns self."""
        for p in self.parameters():
            p.share_memory_()
            if p.grad is not None:
                p.grad.share_memory_()
        for b in self.buffers():
            b.share_memory_()
        return self

    def apply(self, fn):
        """Call ``fn`` on every submodule (children first) and then on self; returns self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ----- conversion (in place, so optimizers keep their references) -----------------

    def _apply(self, fn, recurse=True):
        if recurse:
            for module in self.children():
                module._apply(fn)
        for name, param in self._parameters.items():
            if param is None:
                continue
            with no_grad():
                new = fn(param)
                new_grad = None if param._grad is None else fn(param._grad)
            if _future.get_overwrite_module_params_on_conversion() \
                    or _future.get_swap_module_params_on_conversion():
                replacement = Parameter(new, param.requires_grad)
                replacement._grad = new_grad
                if _future.get_swap_module_params_on_conversion():
                    from ember.utils._swap import swap_tensors
                    swap_tensors(param, replacement)
                else:
                    self._parameters[name] = replacement
                continue
            param._data = new._data
            if type(new_grad) is not Tensor and new_grad is not None:
                param._grad = new_grad      # a sparse gradient (Embedding(sparse=True)'s)
            elif new_grad is not None:
                param._grad._data = new_grad._data
        for name, buf in self._buffers.items():
            if buf is not None:
                self._buffers[name] = fn(buf)
        return self

    def to(self, *args, **kwargs):
        """Move and/or cast parameters and buffers in place: ``to(device)``, ``to(dtype)``,
        ``to(device, dtype)``, ``to(tensor)``; only floating/complex tensors change dtype;
        ``memory_format=`` lays out the 4-D and 5-D ones."""
        from ember.ops.conversion import _parse_to_all
        dtype, device, _, _, layout = _parse_to_all(args, dict(kwargs))
        if dtype is not None:
            if not (dtype.is_floating_point or dtype.is_complex):
                raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, "
                                f"but got desired dtype={dtype}")
            if dtype.is_complex:
                warnings.warn("Complex modules are a new feature under active development "
                              "whose design may change, and some modules might not work as "
                              "expected when using complex tensors as parameters or buffers. "
                              "Please file an issue at https://github.com/pytorch/pytorch/issues/"
                              "new?template=bug-report.yml if a complex module does not work as "
                              "expected.", stacklevel=2)

        def convert(t):
            keep = not (t.is_floating_point() or t.is_complex())
            if layout is not None and t.ndim in (4, 5):     # memory_format=channels_last
                return t.to(device=device, dtype=None if keep else dtype, memory_format=layout)
            return t.to(device=device, dtype=None if keep else dtype)
        return self._apply(convert)

    def cuda(self, device=None):
        """Move every parameter and buffer to a CUDA device (in place)."""
        return self._apply(lambda t: t.cuda(device))

    def xpu(self, device=None):
        """Move every parameter and buffer to an XPU (ember runs on none: a module holding
        tensors raises as PyTorch built without XPU does)."""
        return self._apply(lambda t: _unbuilt_device("xpu"))

    def ipu(self, device=None):
        """Move every parameter and buffer to an IPU (ember runs on none: see ``xpu``)."""
        return self._apply(lambda t: _unbuilt_device("ipu"))

    def mtia(self, device=None):
        """Move every parameter and buffer to an MTIA device (ember runs on none: see
        ``xpu``)."""
        return self._apply(lambda t: _unbuilt_device("mtia"))

    def cpu(self):
        """Move every parameter and buffer to host memory (in place)."""
        return self._apply(lambda t: t.cpu())

    def type(self, dst_type):
        """Cast every parameter and buffer to ``dst_type`` (in place)."""
        return self._apply(lambda t: t.type(dst_type))

    def float(self):
        """Cast floating-point parameters and buffers to float32 (in place)."""
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        """Cast floating-point parameters and buffers to float64 (in place)."""
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self):
        """Cast floating-point parameters and buffers to float16 (in place)."""
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self):
        """Cast floating-point parameters and buffers to bfloat16 (in place)."""
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    def to_empty(self, *, device, recurse=True):
        """Give every parameter and buffer fresh (uninitialized) memory on ``device``."""
        from ember._creation import empty_like
        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    # ----- printing ------------------------------------------------------------------------

    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The configuration shown inside this module's repr; subclasses override it."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _addindent(repr(child), 2)
                       for name, child in self._modules.items()]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"


def _check_name(module, name, kind, table):
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
    if "." in name:
        raise KeyError(f"{kind} name can't contain \".\"")
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if hasattr(module, name) and name not in table:
        raise KeyError(f"attribute '{name}' already exists")


def _discard(d, name, keep):
    """Forget ``name`` in every table but ``keep`` (where it keeps its position) before it is
    registered there."""
    d.pop(name, None)
    for table in ("_parameters", "_buffers", "_modules"):
        if table != keep:
            d.get(table, {}).pop(name, None)
    d.get("_non_persistent_buffers_set", set()).discard(name)


# what PyTorch built without these devices raises when a tensor is moved to one
_UNBUILT = {"xpu": (AssertionError, "Torch not compiled with XPU enabled"),
            "ipu": (RuntimeError, "PyTorch is not linked with support for ipu devices"),
            "mtia": (AssertionError, "Torch not compiled with MTIA enabled. Ensure you have "
                     "`import mtia.host_runtime.torch_mtia.dynamic_library` in your python src "
                     "file and include `//mtia/host_runtime/torch_mtia:torch_mtia` as your "
                     "target dependency!")}


def _unbuilt_device(kind):
    error, message = _UNBUILT[kind]
    raise error(message)
