"""``ember.ops.<namespace>.<op>.<overload>``: the op objects of ``torch.ops``.

Two kinds of namespace live here:

- the namespaces of user-defined ops (``ember.library``): ``ember.ops.mylib.foo`` is an
  ``OpOverloadPacket`` and ``ember.ops.mylib.foo.default`` an ``OpOverload``; calling either
  runs the op through its schema, kernels and autograd formula;
- ``ember.ops.aten``, PyTorch's own op names mapped onto ember's functions, so code written
  against ``torch.ops.aten.mm.default`` (checkpoint policies, decompositions) runs. The names
  that exist are those of ember's op registry: every op of ``ember.<name>`` (``add``, ``mm``,
  ``addmm``, ``convolution``, ``native_layer_norm``, ...), the registry ops of
  ``ember.nn.functional`` under their short names (``gelu``, ``linear``,
  ``scaled_dot_product_attention``, ``pad``, ...), the other names of those ops
  (``absolute``), the functions of ``ember.<name>`` built from ops (``cat``, ``stack``,
  ``einsum``), and the in-place variant ``<name>_`` of each where ``Tensor.<name>_`` exists.
  Every overload name in ``ATEN_OVERLOADS`` (``default``, ``Tensor``, ``Scalar``, ...) calls
  the same ember function, which takes all of PyTorch's overloads' arguments itself.
  Creation functions (``zeros``, ``arange``) and private ops are not there.

A namespace is a module object (``<module 'ember.ops.mylib'>``), as in PyTorch; an unknown
namespace, op or overload raises AttributeError.
"""

import types

__all__ = ["OpNamespace", "OpOverloadPacket", "OpOverload", "namespace", "namespaces",
           "add_overload", "remove_overload", "ATEN_OVERLOADS"]

ATEN_OVERLOADS = ("default", "Tensor", "Scalar", "int", "dim", "dim_IntList", "out",
                  "Tensor_Scalar", "Scalar_Tensor", "Tensor_Tensor", "Tensor_mode",
                  "using_ints")

_USER = {}          # namespace -> {op name -> OpOverloadPacket}
_SPACES = {}        # namespace -> OpNamespace, built once


class OpOverload:
    """One overload of an op (``ember.ops.mylib.foo.default``): calling it runs the op."""

    def __init__(self, packet, overload_name, call, schema=None):
        self._overloadpacket = packet
        self._overloadname = overload_name
        self._call = call
        self._schema_value = schema
        self.__name__ = f"{packet.__name__}.{overload_name}"
        self.__qualname__ = packet._qualified_op_name
        self.__module__ = f"ember.ops.{packet.namespace}"

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    @property
    def _schema(self):
        if self._schema_value is None:
            raise AttributeError(f"ember's {self} has no schema: it calls an ember function")
        return self._schema_value

    @property
    def overloadpacket(self):
        """The packet (``ember.ops.mylib.foo``) this overload belongs to."""
        return self._overloadpacket

    @property
    def namespace(self):
        """The namespace (``mylib``)."""
        return self._overloadpacket.namespace

    @property
    def _opname(self):
        return self._overloadpacket.__name__

    def name(self):
        """The qualified name: ``mylib::foo`` or ``mylib::foo.out``."""
        base = self._overloadpacket._qualified_op_name
        return base if self._overloadname == "default" else f"{base}.{self._overloadname}"

    def __repr__(self):
        return (f"<OpOverload(op='{self.namespace}.{self._opname}', "
                f"overload='{self._overloadname}')>")

    def __str__(self):
        return f"{self.namespace}.{self._opname}.{self._overloadname}"


class OpOverloadPacket:
    """All overloads of one op (``ember.ops.mylib.foo``); calling it picks the overload
    whose schema takes the arguments."""

    def __init__(self, namespace, name):
        self.namespace = namespace
        self.__name__ = name
        self.__qualname__ = name
        self._qualified_op_name = f"{namespace}::{name}"
        self._overloads = {}

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        overloads = self.__dict__.get("_overloads", {})
        if name in overloads:
            return overloads[name]
        raise AttributeError(f"The underlying op of '{self}' has no overload name '{name}'")

    def overloads(self):
        """The overload names, ``default`` first when there is one."""
        return list(self._overloads)

    def __call__(self, *args, **kwargs):
        overloads = list(self._overloads.values())
        if len(overloads) == 1 or overloads[0]._schema_value is None:   # aten: one function
            return overloads[0](*args, **kwargs)
        for overload in overloads:        # the first schema the arguments fit
            try:
                overload._schema.bind(args, kwargs)
            except RuntimeError:
                continue
            return overload(*args, **kwargs)
        return overloads[0](*args, **kwargs)   # none fits: the first one's error

    def __repr__(self):
        return f"<OpOverloadPacket(op='{self}')>"

    def __str__(self):
        return f"{self.namespace}.{self.__name__}"


class OpNamespace(types.ModuleType):
    """``ember.ops.<namespace>``: its ops are attributes."""

    def __init__(self, name):
        super().__init__(f"ember.ops.{name}")
        self._namespace = name

    def __getattr__(self, name):
        if not name.startswith("__"):
            packet = _USER.get(self._namespace, {}).get(name)
            if packet is not None:
                return packet
        raise AttributeError(f"'_OpNamespace' '{self._namespace}' object has no attribute "
                             f"'{name}'")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(_USER.get(self._namespace, {})))


class AtenNamespace(OpNamespace):
    """``ember.ops.aten``: PyTorch's op names over ember's functions (see the module
    docstring for which names exist)."""

    def __init__(self):
        super().__init__("aten")
        self._packets = {}

    def __getattr__(self, name):
        packets = self.__dict__.get("_packets", {})
        if name in packets:
            return packets[name]
        function = None if name.startswith("__") else _aten_function(name)
        if function is None:
            return super().__getattr__(name)
        packet = OpOverloadPacket("aten", name)
        for overload in ATEN_OVERLOADS:
            packet._overloads[overload] = OpOverload(packet, overload, function)
        packets[name] = packet
        return packet


def _aten_function(name):
    """The ember function behind ``aten.<name>``, or None."""
    from ember._tensor import Tensor
    from ember.ops import ALIASES, PUBLIC, _registry
    registry = _registry.REGISTRY
    op = registry.get(name)
    if op is not None and op.namespace is None and not name.startswith("_"):
        return op.function
    op = registry.get(f"nn.functional.{name}")
    if op is not None:
        return op.function
    if name in ALIASES:
        return _aten_function(ALIASES[name])
    if name in PUBLIC and not name.startswith("_"):
        return PUBLIC[name]
    if name.endswith("_") and not name.endswith("__") and hasattr(Tensor, name) \
            and _aten_function(name[:-1]) is not None:
        return getattr(Tensor, name)
    return None


def namespace(name):
    """``ember.ops.<name>``: ``aten`` or a namespace with user-defined ops, else
    AttributeError as a module raises it."""
    space = _SPACES.get(name)
    if space is None:
        if name == "aten":
            space = AtenNamespace()
        elif name in _USER:
            space = OpNamespace(name)
        else:
            raise AttributeError(f"module 'ember.ops' has no attribute '{name}'")
        _SPACES[name] = space
    elif name != "aten" and name not in _USER:
        raise AttributeError(f"module 'ember.ops' has no attribute '{name}'")
    return space


def namespaces():
    """The names ``ember.ops.<name>`` resolves: ``aten`` and those with user-defined ops."""
    return ["aten", *_USER]


def add_overload(ns, name, overload_name, call, schema):
    """Make ``ember.ops.<ns>.<name>.<overload_name>`` call ``call``; returns the OpOverload."""
    packets = _USER.setdefault(ns, {})
    packet = packets.get(name)
    if packet is None:
        packet = packets[name] = OpOverloadPacket(ns, name)
    overload = OpOverload(packet, overload_name, call, schema)
    packet._overloads[overload_name] = overload
    if overload_name == "default":      # PyTorch lists the default overload first
        packet._overloads = {"default": overload,
                             **{k: v for k, v in packet._overloads.items() if k != "default"}}
    return overload


def remove_overload(ns, name, overload_name):
    """Forget an overload (its library was destroyed); empty packets and namespaces go too."""
    packets = _USER.get(ns, {})
    packet = packets.get(name)
    if packet is None:
        return
    packet._overloads.pop(overload_name, None)
    if not packet._overloads:
        del packets[name]
    if not packets:
        _USER.pop(ns, None)

