"""``ember.library`` (``torch.library``): operators defined by the user.

A custom op is a type-annotated function with a name; ember infers its schema, dispatches
each call to the kernel for the device of its tensor arguments, and differentiates it with the
backward formula you register (written with ember ops, so higher-order gradients work)::

    import ember as torch
    from ember import Tensor

    @torch.library.custom_op("mylib::scale", mutates_args=())
    def scale(x: Tensor, factor: float) -> Tensor:
        return x * factor

    @scale.register_fake
    def _(x, factor):
        return torch.empty_like(x)

    def setup_context(ctx, inputs, output):
        ctx.factor = inputs[1]

    scale.register_autograd(lambda ctx, grad: (grad * ctx.factor, None),
                            setup_context=setup_context)

    y = torch.ops.mylib.scale(torch.ones(3, requires_grad=True), 2.0)   # or scale(...)

The older API defines schemas and kernels separately::

    lib = torch.library.Library("mylib", "FRAGMENT")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CPU")

Where ember differs from PyTorch: there are no FakeTensors, so a fake impl runs on meta
tensors (as PyTorch's does too) and under ``opcheck`` (on real tensors, checking the shapes,
dtypes and devices it promises);
``with_keyset`` kernels, ``register_vmap``, ``register_torch_dispatch``, ``register_autocast``
and ``get_ctx`` are not provided; ``triton_op`` is ``custom_op`` and ``wrap_triton`` returns
the kernel, which runs as is.
"""

import contextlib
import os
import re
import sys
import warnings
import weakref

from ember.library import _ops
from ember.library._infer import infer_schema
from ember.library._opcheck import OpCheckError, opcheck
from ember.library._schema import _Tokens, parse_name, parse_schema
from ember.ops import _namespaces

__all__ = ["Library", "custom_op", "CustomOpDef", "define", "impl", "register_kernel",
           "register_fake", "register_autograd", "impl_abstract", "infer_schema", "opcheck",
           "OpCheckError", "triton_op", "wrap_triton", "fallthrough_kernel"]

_RESERVED_NAMESPACES = ("prim",)
_KINDS = {"DEF": "TORCH_LIBRARY", "FRAGMENT": "TORCH_LIBRARY_FRAGMENT",
          "IMPL": "TORCH_LIBRARY_IMPL"}
DISPATCH_KEYS = frozenset((
    "CPU", "CUDA", "HIP", "XLA", "MPS", "IPU", "XPU", "HPU", "VE", "Lazy", "MTIA", "MAIA",
    "PrivateUse1", "Meta", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional", "Autograd", "AutogradCPU", "AutogradCUDA",
    "AutogradOther", "AutogradXLA", "AutogradMPS", "AutogradXPU", "AutogradHPU",
    "AutogradLazy", "AutogradMeta", "AutogradPrivateUse1", "BackendSelect", "Python",
    "ADInplaceOrView", "Functionalize", "AutocastCPU", "AutocastCUDA", "FuncTorchBatched",
    "Batched", "SparseCPU", "SparseCUDA"))
DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip",
                "ve", "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
                "privateuseone")
_DEVICE_KEYS = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta", "lazy": "Lazy",
                "privateuseone": "PrivateUse1"}
_DEF_LOCATIONS = {}          # namespace -> where its live DEF library was made
_KEEP_ALIVE = []             # libraries made by define/impl/register_* without ``lib``
_OPDEFS = {}                 # qualname -> CustomOpDef
_HERE = os.path.dirname(os.path.abspath(__file__))


def _caller():
    """``file:line`` of the user code that called into this package."""
    frame = sys._getframe(1)
    while frame is not None and os.path.dirname(os.path.abspath(
            frame.f_code.co_filename)) == _HERE:
        frame = frame.f_back
    return "<unknown>" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def fallthrough_kernel():
    """A marker kernel: registering it for a dispatch key removes that key's kernel."""
    raise NotImplementedError("fallthrough_kernel() should never be called.")


def _device_key(device_type):
    """The dispatch key of a device type (``"cuda"`` -> ``CUDA``), with PyTorch's error."""
    base = device_type.split(":")[0] if isinstance(device_type, str) else device_type
    if base not in DEVICE_TYPES:
        raise RuntimeError(f"Expected one of {', '.join(DEVICE_TYPES)} device type at start "
                           f"of device string: {device_type}")
    return _DEVICE_KEYS.get(base, base.upper())


def _release(defs, impls, ns, location):
    """Undo what a library registered (it was destroyed or collected)."""
    for opdef, key, fn in impls:
        if key == "Meta":
            if opdef.fake is fn:
                opdef.fake = None
        elif opdef.kernels.get(key) is fn:
            del opdef.kernels[key]
    for opdef in defs:
        if opdef.schema is not None:
            opdef.undefine()
    defs.clear()
    impls.clear()
    if location is not None and _DEF_LOCATIONS.get(ns) == location:
        del _DEF_LOCATIONS[ns]


class Library:
    """A set of op definitions (``DEF``, ``FRAGMENT``) or kernels (``IMPL``) for one
    namespace; what it registered goes away with it."""

    def __init__(self, ns, kind, dispatch_key=""):
        if kind not in _KINDS:
            raise ValueError(f"Unsupported kind: {kind}")
        if ns in _RESERVED_NAMESPACES and kind in ("DEF", "FRAGMENT"):
            raise ValueError(f"{ns} is a reserved namespace. Please try creating a library "
                             f"with another name.")
        self.ns = ns
        self.kind = kind
        self.dispatch_key = dispatch_key
        self._location = _caller()
        if kind == "DEF":
            if ns in _DEF_LOCATIONS:
                raise RuntimeError(
                    f"Only a single TORCH_LIBRARY can be used to register the namespace {ns}; "
                    f"please put all of your definitions in a single TORCH_LIBRARY block.  If "
                    f"you were trying to specify implementations, consider using "
                    f"TORCH_LIBRARY_IMPL (which can be duplicated).  If you really intended "
                    f"to define operators for a single namespace in a distributed way, you "
                    f"can use TORCH_LIBRARY_FRAGMENT to explicitly indicate this.  Previous "
                    f"registration of TORCH_LIBRARY was registered at {_DEF_LOCATIONS[ns]}; "
                    f"latest registration was registered at {self._location}")
            _DEF_LOCATIONS[ns] = self._location
        self._defs, self._impls = [], []
        self._finalizer = weakref.finalize(self, _release, self._defs, self._impls, ns,
                                           self._location if kind == "DEF" else None)

    def __repr__(self):
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})>"

    def _block(self):
        return f"{_KINDS[self.kind]} block at {self._location}"

    def _destroy(self):
        """Unregister everything this library registered."""
        self._finalizer()

    def define(self, schema, alias_analysis="", *, tags=()):
        """Define an op from a schema string (``"foo(Tensor x) -> Tensor"``); returns its
        name."""
        if alias_analysis not in ("", "FROM_SCHEMA", "CONSERVATIVE"):
            raise RuntimeError(f"Invalid alias_analysis type {alias_analysis}")
        parsed = parse_schema(schema)
        ns, _, name = parsed.name.rpartition("::")
        if self.kind == "IMPL":
            raise RuntimeError(f'def("{parsed.name}"): Cannot define an operator inside of a '
                               f"TORCH_LIBRARY_IMPL block.  All def()s should be placed in the "
                               f"(unique) TORCH_LIBRARY block for their namespace.  (Error "
                               f"occurred while processing {self._block()})")
        if ns and ns != self.ns:
            raise RuntimeError(f"Explicitly provided namespace ({ns}) in schema string does "
                               f"not match namespace of enclosing {_KINDS[self.kind]} block "
                               f"({self.ns}).  Move this definition to the (unique) "
                               f"TORCH_LIBRARY block corresponding to this namespace (and "
                               f"consider deleting the namespace from your schema string.)  "
                               f"(Error occurred while processing {self._block()})")
        _check_qualname(f"{self.ns}::{name}")
        opdef = _ops.entry(self.ns, name, parsed.overload_name)
        here = _caller()
        if opdef.schema is not None:
            raise RuntimeError(
                f"Tried to register an operator ({parsed.with_name(opdef.schema.name)}) with "
                f"the same name and overload name multiple times. Each overload's schema "
                f"should only be registered with a single call to def(). Duplicate "
                f"registration: registered at {here}. Original registration: registered at "
                f"{opdef.location}")
        opdef.define(parsed)
        opdef.location = here
        self._defs.append(opdef)
        return parsed.name

    def impl(self, op_name, fn, dispatch_key="", *, with_keyset=False, allow_override=True):
        """Register ``fn`` as the op's kernel for a dispatch key (``CPU``, ``CUDA``,
        ``CompositeImplicitAutograd`` when none is given, ``Autograd``, ``Meta``)."""
        if not callable(fn):
            raise TypeError(f"Input function is required to be a callable but found type "
                            f"{type(fn)}")
        if with_keyset:
            raise NotImplementedError("ember has no dispatch key sets: register the kernel "
                                      "without with_keyset")
        ns, name, overload = self._resolve(op_name)
        if dispatch_key == "":
            dispatch_key = self.dispatch_key
        elif self.kind == "IMPL" and self.dispatch_key and dispatch_key != self.dispatch_key:
            raise RuntimeError(
                f'impl("{op_name}", ...): Explicitly provided dispatch key ({dispatch_key}) is '
                f"inconsistent with the dispatch key of the enclosing TORCH_LIBRARY_IMPL "
                f"block ({self.dispatch_key}).  Please declare a separate TORCH_LIBRARY_IMPL "
                f"block for this dispatch key and move your impl() there.  (Error occurred "
                f"while processing {self._block()})")
        key = dispatch_key or "CompositeImplicitAutograd"
        if key not in DISPATCH_KEYS:
            raise RuntimeError(f"could not parse dispatch key: {key}")
        opdef = _ops.entry(ns, name, overload)
        if not allow_override and (key in opdef.kernels or (key == "Meta" and opdef.fake)):
            raise RuntimeError(f"This is not allowed since there's already a kernel "
                               f"registered from python overriding {name}'s behavior for "
                               f"{key} dispatch key and {self.ns} namespace.")
        if fn is fallthrough_kernel:
            opdef.kernels.pop(key, None)
        elif key == "Meta":
            opdef.fake = fn
        else:
            opdef.kernels[key] = fn
        self._impls.append((opdef, key, fn))

    def _resolve(self, op_name):
        """(namespace, name, overload) of an op given by name or OpOverload."""
        if isinstance(op_name, _namespaces.OpOverload):
            overload = "" if op_name._overloadname == "default" else op_name._overloadname
            return op_name.namespace, op_name._opname, overload
        ns, _, rest = op_name.rpartition("::")
        if ns and ns != self.ns:
            raise RuntimeError(f'impl("{op_name}", ...): Explicitly provided namespace ({ns}) '
                               f"in operator name does not match namespace of enclosing "
                               f"{_KINDS[self.kind]} block ({self.ns}).  Move this definition "
                               f"to the {_KINDS[self.kind]} block corresponding to this "
                               f"namespace (and consider deleting the namespace from your "
                               f"schema string.)  (Error occurred while processing "
                               f"{self._block()})")
        name, _, overload = rest.partition(".")
        return self.ns, name, "" if overload == "default" else overload


def _check_qualname(qualname):
    """PyTorch's parse error for a malformed ``namespace::name``."""
    tokens = _Tokens(qualname)
    parse_name(tokens)
    tokens.expect("eof")


def _split_qualname(qualname):
    """(namespace, name) of ``"namespace::name"``, with PyTorch's error otherwise."""
    parts = qualname.split("::")
    if len(parts) != 2:
        raise ValueError(f'Expected `qualname` to be of the form "namespace::name", but got '
                         f"{qualname}. The qualname passed to the torch.library APIs must "
                         f"consist of a namespace and a name, e.g. aten::sin")
    return parts[0], parts[1]


def _library_for(ns, lib):
    if lib is not None:
        return lib
    lib = Library(ns, "FRAGMENT")
    _KEEP_ALIVE.append(lib)
    return lib


# --- custom_op -----------------------------------------------------------------------------

def _is_functional(schema):
    if schema.is_mutable:
        return False
    if any(r.alias and not r.alias.endswith("!") for r in schema.returns):
        return True                     # a view op
    return bool(schema.returns)


class CustomOpDef:
    """A custom op made by ``custom_op``: call it like the function, register its kernels,
    fake impl and autograd formula with its methods."""

    def __init__(self, namespace, name, schema, fn, tags=None):
        self._namespace = namespace
        self._name = name
        self._schema = schema
        self._init_fn = fn
        self._disabled_kernel = set()
        qualname = f"{namespace}::{name}"
        previous = _OPDEFS.pop(qualname, None)
        if previous is not None:
            previous._lib._destroy()
        text = name + schema
        parsed = parse_schema(text)
        if any(a.kwarg_only and a.base == "Tensor" for a in parsed.arguments):
            raise NotImplementedError(f"custom_op with kwarg-only Tensor args. Please make "
                                      f"your tensors not kwarg-only. Got: {text}")
        self._lib = Library(namespace, "FRAGMENT")
        self._lib.define(text)
        self._opdef = _ops.find(namespace, parsed.name, parsed.overload_name)
        self._opdef.custom = self
        _OPDEFS[qualname] = self

    @property
    def _qualname(self):
        return f"{self._namespace}::{self._name}"

    @property
    def _opoverload(self):
        return self._opdef.opoverload

    def __repr__(self):
        return f"<CustomOpDef({self._qualname})>"

    def __call__(self, *args, **kwargs):
        return self._opdef(*args, **kwargs)

    @contextlib.contextmanager
    def set_kernel_enabled(self, device_type, enabled=True):
        """Within the block, the kernel for ``device_type`` is on (or off: the function
        given to ``custom_op`` runs instead)."""
        was_enabled = device_type not in self._disabled_kernel
        if enabled:
            self._disabled_kernel.discard(device_type)
        else:
            self._disabled_kernel.add(device_type)
        try:
            yield
        finally:
            if was_enabled:
                self._disabled_kernel.discard(device_type)
            else:
                self._disabled_kernel.add(device_type)

    def register_kernel(self, device_types, fn=None, /):
        """Register ``fn`` as the kernel for ``device_types`` ("cpu", "cuda", a sequence of
        them, or None for every device); usable as a decorator."""
        def inner(fn):
            types = [device_types] if device_types is None or isinstance(device_types, str) \
                else list(device_types)
            for device_type in types:
                key = "CompositeExplicitAutograd" if device_type is None \
                    else _device_key(device_type)
                self._lib.impl(self._name, self._kernel(device_type, fn), key)
            return fn

        if device_types is not None and not any(
                a.base == "Tensor" for a in self._opdef.schema.arguments) and not any(
                a.base == "Device" for a in self._opdef.schema.arguments):
            raise ValueError("Functions without tensor inputs are required to have a "
                             "`device: torch.device` argument")
        return inner if fn is None else inner(fn)

    def _kernel(self, device_type, fn):
        def kernel(*args, **kwargs):
            chosen = self._init_fn if device_type in self._disabled_kernel else fn
            return chosen(*args, **kwargs)
        kernel.__wrapped__ = fn
        return kernel

    def register_fake(self, fn, /):
        """Register the fake impl: what the op returns (shapes, dtypes, devices) without
        computing it. ember runs it only under ``opcheck``."""
        self._lib.impl(self._name, fn, "Meta")
        return fn

    def register_autograd(self, backward, /, *, setup_context=None):
        """Register the backward formula, ``backward(ctx, *grads)``, and optionally
        ``setup_context(ctx, inputs, output)`` to save what it needs."""
        schema = self._opdef.schema
        if not _is_functional(schema):
            raise RuntimeError(f"Cannot register autograd formula for non-functional "
                               f"operator {self} with schema {schema}. Please create a "
                               f"functional operator and register an autograd formula for "
                               f"that.")
        self._opdef.backward = backward
        self._opdef.setup_context = setup_context


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None, tags=None):
    """Make a type-annotated function an op named ``"namespace::name"`` (also reached as
    ``ember.ops.namespace.name``); usable as a decorator."""
    def inner(fn):
        schema_str = infer_schema(fn, mutates_args=mutates_args) if schema is None else schema
        namespace, opname = name.split("::")
        if schema is not None:
            expected = {a.name for a in parse_schema(opname + schema).arguments if a.is_write}
            if expected != set(mutates_args):
                raise ValueError(f"Attempted to create a custom op with `mutates_args="
                                 f"{mutates_args}` and `schema={schema}. The schema suggests "
                                 f"that the op mutates {expected}which is different from what "
                                 f"was provided to us in `mutates_args`. Please make these "
                                 f"consistent.")
        result = CustomOpDef(namespace, opname, schema_str, fn, tags)
        result.register_kernel(device_types)(fn)
        return result

    return inner if fn is None else inner(fn)


def triton_op(name, fn=None, /, *, mutates_args, schema=None):
    """``custom_op`` for functions that launch Triton kernels: in ember they run as is."""
    return custom_op(name, fn, mutates_args=mutates_args, schema=schema)


def wrap_triton(triton_kernel, /):
    """The Triton kernel itself (PyTorch wraps it for tracing; ember runs it eagerly)."""
    if not type(triton_kernel).__module__.startswith("triton"):
        raise RuntimeError("wrap_triton only works on functions annotated with triton.jit or "
                           "triton.autotune")
    return triton_kernel


# --- the functional API ----------------------------------------------------------------------

def define(qualname, schema, *args, lib=None, tags=()):
    """Define the op ``"namespace::name"`` from a schema without a name
    (``"(Tensor x) -> Tensor"``). ``define(lib, schema)`` is the legacy decorator form."""
    if isinstance(qualname, Library):
        def wrap(f):
            name = qualname.define(schema, *args)
            qualname.impl(name, f)
            return f
        return wrap
    if not isinstance(qualname, str):
        raise ValueError(f"define(qualname, schema): expected qualname to be instance of str, "
                         f"got {type(qualname)}")
    ns, name = _split_qualname(qualname)
    if not re.fullmatch(r"\(.*\) -> .*", schema):
        raise ValueError(f'define(qualname, schema, ...): expected schema to look like e.g. '
                         f'"(Tensor x) -> Tensor" but got "{schema}"')
    _library_for(ns, lib).define(name + schema, tags=tags)


def impl(qualname, types, func=None, *, lib=None):
    """Register ``func`` as the op's kernel for device types ("cpu", "cuda", "default") or
    dispatch keys; usable as a decorator. ``impl(lib, name, key)`` is the legacy form."""
    if isinstance(qualname, Library):
        def wrap(f):
            qualname.impl(types, f, func or "")
            return f
        return wrap
    keys = []
    for kind in ((types,) if isinstance(types, str) else types):
        if kind in DISPATCH_KEYS:
            keys.append(kind)
        elif kind == "default":
            keys.append("CompositeExplicitAutograd")
        else:
            keys.append(_device_key(kind))
    ns, _ = _split_qualname(qualname)

    def register(func):
        use = _library_for(ns, lib)
        for key in keys:
            use.impl(qualname, func, key)

    if func is None:
        return register
    register(func)
    return None


def _resolve(op, registration):
    """(CustomOpDef or None, qualname) for an op given as a string, OpOverload or
    CustomOpDef."""
    if isinstance(op, CustomOpDef):
        return op, op._qualname
    if isinstance(op, _namespaces.OpOverload):
        op = op.name()
    if not isinstance(op, str):
        raise ValueError(f"{registration}({op}): got unexpected type for op: {type(op)}")
    _split_qualname(op)
    custom = _OPDEFS.get(op)
    return custom, op


def _lookup(qualname):
    """The defined OpDef of ``ns::name[.overload]``, or None."""
    ns, rest = _split_qualname(qualname)
    name, _, overload = rest.partition(".")
    return _ops.find(ns, name, "" if overload == "default" else overload)


def register_kernel(op, device_types, func=None, /, *, lib=None):
    """Register a kernel of the op for device types; usable as a decorator."""
    custom, qualname = _resolve(op, "register_kernel")
    if custom is not None:
        return custom.register_kernel(device_types, func)
    return impl(qualname, "default" if device_types is None else device_types, func, lib=lib)


def register_fake(op, func=None, /, *, lib=None, _stacklevel=1, allow_override=True):
    """Register the op's fake impl (see ``CustomOpDef.register_fake``); usable as a
    decorator."""
    custom, qualname = _resolve(op, "register_fake")

    def register(func):
        if custom is not None:
            return custom.register_fake(func)
        if _lookup(qualname) is None:
            raise RuntimeError(f"operator {qualname} does not exist")
        ns, _ = _split_qualname(qualname)
        _library_for(ns, lib).impl(qualname, func, "Meta", allow_override=allow_override)
        return func

    return register if func is None else register(func)


def impl_abstract(qualname, func=None, *, lib=None, _stacklevel=1):
    """The old name of ``register_fake``."""
    warnings.warn("`torch.library.impl_abstract` was renamed to `torch.library.register_fake`. "
                  "Please use that instead; we will remove `torch.library.impl_abstract` in a "
                  "future version of PyTorch.", FutureWarning, stacklevel=2)
    return register_fake(qualname, func, lib=lib)


def register_autograd(op, backward, /, *, setup_context=None, lib=None):
    """Register the op's backward formula (see ``CustomOpDef.register_autograd``)."""
    if isinstance(op, _namespaces.OpOverloadPacket):
        raise ValueError(f"register_autograd({op}): got unexpected type for op: {type(op)}")
    custom, qualname = _resolve(op, "register_autograd")
    if custom is not None:
        return custom.register_autograd(backward, setup_context=setup_context)
    opdef = _lookup(qualname)
    if opdef is None:
        ns, rest = _split_qualname(qualname)
        getattr(_namespaces.namespace(ns), rest.partition(".")[0])   # PyTorch's error
        raise RuntimeError(f"operator {qualname} does not exist")
    if not _is_functional(opdef.schema):
        raise RuntimeError(f"Cannot register autograd formula for non-functional operator "
                           f"{opdef} with schema {opdef.schema}. Please create a functional "
                           f"operator and register an autograd formula for that.")
    opdef.backward = backward
    opdef.setup_context = setup_context
