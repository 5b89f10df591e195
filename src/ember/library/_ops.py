"""One user-defined op overload (``OpDef``): its schema, kernels by dispatch key, fake impl
and autograd formula, and the path every call takes.

A call binds its arguments to the schema, offers itself to ``__torch_function__``
overrides, then picks a kernel by the device of its tensor arguments: an ``Autograd`` or
``CompositeImplicitAutograd`` kernel runs as is (its ember ops record the graph); a device
kernel (``CPU``, ``CUDA``) or the ``CompositeExplicitAutograd`` one runs below autograd,
wrapped in an ``ember.autograd.Function`` when the op has an autograd formula (always, for
``custom_op`` ops) and an input wants a gradient. Ops defined through ``Library`` without a
formula run their kernel as is, which is what PyTorch's autograd fallback amounts to.
Arguments the schema marks as written (``Tensor(a!)``) have their version bumped.
"""

import inspect

from ember._tensor import Tensor
from ember.autograd.function import Function
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.grad_mode import no_grad
from ember.ops import _namespaces
from ember.overrides import handle_torch_function, has_torch_function

__all__ = ["OpDef", "entry", "find"]

_DEFS = {}                  # (namespace, name, overload) -> OpDef
_DEVICE_KEYS = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta"}
_AS_IS = ("Autograd", "CompositeImplicitAutograd")
_ALIAS_MESSAGE = (
    "The output of this custom operator (1) must not also be an input to this custom "
    "operator and (2) may not alias any inputs to this custom operator or other returns. The "
    "most common way to trigger this error is if we have y = custom_op(x) and y and x are the "
    "same Tensor. Please instead return a clone of the offending output tensor(s) (e.g. "
    "return x.clone()) or refactor the custom operator to not return y.")


def entry(ns, name, overload):
    """The OpDef of ``ns::name.overload``, made empty on first mention (kernels may come
    before the definition, as in PyTorch)."""
    key = (ns, name, overload)
    found = _DEFS.get(key)
    if found is None:
        found = _DEFS[key] = OpDef(ns, name, overload)
    return found


def find(ns, name, overload):
    """The defined OpDef of that name, or None."""
    found = _DEFS.get((ns, name, overload))
    return found if found is not None and found.schema is not None else None


def _flat(values):
    out = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.extend(v)
        else:
            out.append(v)
    return out


def _aliases(a, b):
    """Whether two tensors share memory (ember views share their base's version counter)."""
    return a is b or (a._vc is not None and a._vc is b._vc)


def _same_as_default(value, default):
    if isinstance(value, Tensor) or isinstance(default, Tensor):
        return value is default
    try:
        return bool(value == default)
    except Exception:       # noqa: BLE001  (an odd __eq__ only means "not the default")
        return False


class OpDef:
    """Everything registered for one op overload; calling it runs the op."""

    def __init__(self, ns, name, overload):
        self.ns = ns
        self.name = name
        self.overload = overload          # "" for the default overload
        self.schema = None                # a FunctionSchema once defined
        self.kernels = {}                 # dispatch key -> function
        self.fake = None
        self.backward = None
        self.setup_context = None
        self.custom = None                # the CustomOpDef, for custom_op ops
        self.opoverload = None
        self.location = None              # where it was defined, for PyTorch's messages
        self._function = None

    @property
    def qualname(self):
        """``ns::name`` or ``ns::name.overload``."""
        base = f"{self.ns}::{self.name}"
        return f"{base}.{self.overload}" if self.overload else base

    @property
    def overload_attr(self):
        """The overload's attribute name: ``default`` for the unnamed one."""
        return self.overload or "default"

    def __str__(self):
        return f"{self.ns}.{self.name}.{self.overload_attr}"

    @property
    def has_formula(self):
        """Whether autograd goes through a generated Function (custom ops always do)."""
        return self.custom is not None or self.backward is not None

    # --- definition ----------------------------------------------------------------------

    def define(self, schema):
        """Give the op its schema and its ``ember.ops`` entry."""
        self.schema = schema.with_name(f"{self.ns}::{self.name}")
        self.opoverload = _namespaces.add_overload(self.ns, self.name, self.overload_attr,
                                                   self, self.schema)

    def undefine(self):
        """Forget the schema (its library went away); kernels stay with their libraries."""
        _namespaces.remove_overload(self.ns, self.name, self.overload_attr)
        self.schema = None
        self.opoverload = None
        self.custom = None
        self.backward = self.setup_context = None

    # --- calling -------------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        if self.schema is None:
            raise RuntimeError(f"operator {self.qualname} does not exist")
        flat = _flat(args) + _flat(kwargs.values())
        if has_torch_function(flat):       # a mode, or a subclass: offered the OpOverload
            return handle_torch_function(self.opoverload, flat, *args, **kwargs)
        values = self.schema.bind(args, kwargs)
        tensors = [t for t in _flat(values) if isinstance(t, Tensor)]
        key, kernel = self._pick(self._device_type(values, tensors), tensors)
        if key.startswith(_AS_IS) or not self.has_formula:
            return self.run(kernel, values)
        if _GRAD.grad_enabled and any(t.requires_grad for t in tensors):
            return self._apply_autograd(kernel, values)
        with no_grad():
            return self.run(kernel, values)

    def _device_type(self, values, tensors):
        if tensors:
            types = {t.device.type for t in tensors}
            return "cuda" if "cuda" in types else "meta" if "meta" in types else "cpu"
        for arg, value in zip(self.schema.arguments, values):
            if arg.base == "Device" and value is not None:
                from ember._device import device
                return device(value).type
        return None

    def _pick(self, device_type, tensors):
        """(dispatch key, kernel) for a call on ``device_type`` (None: no device known)."""
        backend = _DEVICE_KEYS.get(device_type, "CPU")
        if backend == "Meta":               # meta tensors run the fake impl
            for key in ("AutogradMeta", "Autograd", "CompositeImplicitAutograd"):
                if key in self.kernels:
                    return key, self.kernels[key]
            if self.fake is not None:
                return "Meta", self.fake
            if self.custom is not None:
                raise RuntimeError(_no_fake_message(self.custom))
        for key in (f"Autograd{backend}", "Autograd", "CompositeImplicitAutograd", backend,
                    "CompositeExplicitAutograd"):
            if key in self.kernels:
                return key, self.kernels[key]
        if not tensors and device_type is not None and self.custom is not None:
            raise RuntimeError(f"{self.name} does not have a kernel registered for "
                               f"{device_type}. Please use register_kernel to do so.")
        available = list(self.kernels) + (["Meta"] if self.fake is not None else [])
        raise NotImplementedError(
            f"Could not run '{self.qualname}' with arguments from the '{backend}' backend. "
            f"This could be because the operator doesn't exist for this backend, or was "
            f"omitted during the selective/custom build process (if using custom build). "
            f"'{self.qualname}' is only available for these backends: "
            f"[{', '.join(available)}].")

    def kernel_args(self, values):
        """The kernel's positional and keyword arguments: as PyTorch's dispatcher, trailing
        positional arguments and keyword-only ones equal to their defaults are left out."""
        args = self.schema.arguments
        positional = [(a, v) for a, v in zip(args, values) if not a.kwarg_only]
        while positional and positional[-1][0].has_default \
                and _same_as_default(positional[-1][1], positional[-1][0].default):
            positional.pop()
        keywords = {a.name: v for a, v in zip(args, values) if a.kwarg_only
                    and not (a.has_default and _same_as_default(v, a.default))}
        return [v for _, v in positional], keywords

    def run(self, kernel, values):
        """Run one kernel on bound values: bump written arguments, check a custom op's
        result."""
        args, kwargs = self.kernel_args(values)
        out = kernel(*args, **kwargs)
        for arg, value in zip(self.schema.arguments, values):
            if arg.is_write:
                for t in (value if isinstance(value, list) else [value]):
                    if isinstance(t, Tensor):
                        t._bump_version()
        if self.custom is not None:
            self._check_result(kernel, values, out)
        return out

    def _check_result(self, kernel, values, out):
        schema = self.schema
        if schema.returns_tuple and schema.returns:
            if not isinstance(out, (tuple, list)):
                raise TypeError(f"Object of type '{type(out).__name__}' is not an instance "
                                f"of 'sequence'")
        elif len(schema.returns) == 1 and schema.returns[0].type == "Tensor" \
                and not isinstance(out, Tensor):
            raise RuntimeError(f"Unable to cast {out!r} to Tensor")
        outs = [t for t in _flat(out if isinstance(out, (tuple, list)) else [out])
                if isinstance(t, Tensor)]
        inputs = [t for t in _flat(values) if isinstance(t, Tensor)]
        for i, o in enumerate(outs):
            if any(_aliases(o, t) for t in inputs) or any(_aliases(o, p) for p in outs[:i]):
                module = inspect.getmodule(inspect.unwrap(kernel))
                raise RuntimeError(f"{self.name} (with implementation in {module}): "
                                   f"{_ALIAS_MESSAGE}")

    # --- autograd ------------------------------------------------------------------------

    def _apply_autograd(self, kernel, values):
        plan = _Plan(self, kernel, values)
        out = self._autograd_function().apply(plan, *plan.flat_inputs())
        return list(out) if plan.out_is_list else out

    def _autograd_function(self):
        if self._function is None:
            name = f"GeneratedBackwardFor_{self.ns}_{self.name}_{self.overload_attr}"
            self._function = type(name, (Function,), {"forward": staticmethod(_forward),
                                                      "backward": staticmethod(_backward)})
        return self._function


def _no_fake_message(custom):
    return (f"There was no fake impl registered for {custom}. This is necessary for "
            f"torch.compile/export/fx tracing to work. Please use "
            f"`{custom._init_fn.__name__}.register_fake` to add an fake impl.")


def _spread(arg):
    """Whether an argument gives the autograd Function one input per element."""
    return arg.is_list and arg.base == "Tensor"


class _Plan:
    """One autograd call: the bound values, and how positional inputs flatten into the
    Function's inputs (a ``Tensor[]`` argument gives one input per element)."""

    def __init__(self, opdef, kernel, values):
        self.opdef = opdef
        self.kernel = kernel
        self.values = values
        self.positional = [(a, v) for a, v in zip(opdef.schema.arguments, values)
                           if not a.kwarg_only]
        self.keyword_only = {a.name: v for a, v in zip(opdef.schema.arguments, values)
                             if a.kwarg_only}
        self.out_is_list = False

    def flat_inputs(self):
        """The Function's inputs: positional arguments, tensor lists spread out."""
        return _flat((v or []) if _spread(a) else [v] for a, v in self.positional)

    def structure(self, flat):
        """Per positional argument, its items of ``flat`` (a list for a list argument)."""
        out, i = [], 0
        for arg, value in self.positional:
            if _spread(arg):
                n = len(value or ())
                out.append(list(flat[i:i + n]))
                i += n
            else:
                out.append(flat[i])
                i += 1
        return tuple(out)

    def flatten(self, grads):
        """Per-argument gradients as the Function's flat ones."""
        flat = []
        for (arg, value), g in zip(self.positional, grads):
            if _spread(arg):
                flat.extend(g if g is not None else [None] * len(value or ()))
            else:
                flat.append(g)
        return flat


def _forward(ctx, plan, *flat):
    opdef = plan.opdef
    out = opdef.run(plan.kernel, plan.values)
    ctx._library_plan = plan
    if opdef.setup_context is not None:
        inputs = tuple(v for _, v in plan.positional)
        if plan.keyword_only:
            opdef.setup_context(ctx=ctx, inputs=inputs, keyword_only_inputs=plan.keyword_only,
                                output=out)
        else:
            opdef.setup_context(ctx=ctx, inputs=inputs, output=out)
    if isinstance(out, list):
        plan.out_is_list = True
        return tuple(out)
    return out


def _backward(ctx, *grads):
    plan = ctx._library_plan
    opdef = plan.opdef
    if opdef.backward is None:
        raise RuntimeError(f"Trying to backward through {opdef} but no autograd formula was "
                           f"registered. Please use register_autograd to add one.")
    if plan.out_is_list:
        grads = (list(grads),)
    needs = ctx.needs_input_grad
    ctx.needs_input_grad = plan.structure(needs[1:])
    try:
        result = opdef.backward(ctx, *grads)
    finally:
        ctx.needs_input_grad = needs
    if not isinstance(result, tuple):
        result = (result,)
    n = len(plan.positional)
    if len(result) < n:
        raise RuntimeError(f"function {ctx.name()} returned an incorrect number of gradients "
                           f"(expected {n}, got {len(result)})")
    for position, extra in enumerate(result[n:], n + 1):
        if extra is not None:
            raise RuntimeError(f"function {ctx.name()} returned a gradient different than None "
                               f"at position {position}, but the corresponding forward input "
                               f"was not a Variable")
    return (None, *plan.flatten(result[:n]))
