"""``torch._foreach_*``: ops on lists of tensors (what optimizers and weight-EMA code call).

ember has no fused multi-tensor kernels: each function applies the matching tensor op to the
tensors one by one, so dtypes, broadcasting, autograd and errors are those of the op. The
out-of-place forms return a tuple of new tensors; the in-place ones (``_`` suffix) return the
list they were given. The second operand may be one number, a list of numbers, one 0-dim
tensor or a list of tensors (the list forms pair up element by element).
"""

import numbers

import ember
from ember._tensor_list_node import (joined, kind_of, name_inplace, node_name,
                                     not_implemented, not_implemented_inplace)
from ember.ops._inplace import call_inplace
from ember.ops._registry import REGISTRY

_UNARY = ("abs acos asin atan ceil cos cosh erf erfc exp expm1 floor frac lgamma log log10 "
          "log1p log2 neg reciprocal round rsqrt sigmoid sign sin sinh sqrt tan tanh "
          "trunc").split()
# foreach name -> tensor method (a number or a tensor as the other operand)
_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "pow": "pow",
           "clamp_min": "clamp_min", "clamp_max": "clamp_max", "maximum": "clamp_min",
           "minimum": "clamp_max"}


def _check_list(name, tensors):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"_foreach_{name}(): argument 'self' (position 1) must be tuple of "
                        f"Tensors, not {type(tensors).__name__}")
    if not tensors:
        raise RuntimeError("Tensor list must have at least one tensor.")
    for i, t in enumerate(tensors):
        if not isinstance(t, ember.Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(t).__name__}")
    return tensors


def _pair(tensors, other, position=1):
    """``other`` spread to one operand per tensor (``position``: its argument index, for
    errors)."""
    if isinstance(other, (list, tuple)):
        if any(isinstance(o, ember.Tensor) for o in other):
            # a list holding a tensor is read as a tensor list: numbers in it are an error
            for i, o in enumerate(other):
                if not isinstance(o, ember.Tensor):
                    raise TypeError(f"expected Tensor as element {i} in argument {position}, "
                                    f"but got {type(o).__name__}")
            if len(other) != len(tensors):
                raise RuntimeError(f"Tensor lists must have the same number of tensors, got "
                                   f"{len(tensors)} and {len(other)}")
        elif len(other) != len(tensors):
            raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        return list(other)
    if isinstance(other, ember.Tensor) and other.ndim != 0:
        raise RuntimeError(f"scalar tensor expected to be 0 dim but it has {other.ndim} "
                           f"dimensions and {other.numel()} elements.")
    return [other] * len(tensors)


def _unary(name):
    def out_of_place(self):
        return joined(node_name(name), lambda ts: tuple(getattr(t, name)() for t in ts),
                      _check_list(name, self))

    def in_place(self):
        for t in _check_list(name, self):
            getattr(t, name + "_")()
        return self
    return out_of_place, in_place


def _binary(name, method):
    def call(fn, o, alpha):
        return fn(o) if alpha == 1 else fn(o, alpha=alpha)

    def compute(ts, os, alpha, listed=False):
        if name in ("maximum", "minimum"):
            return tuple(_extremum(name, t, o, listed) for t, o in zip(ts, os))
        return tuple(call(getattr(t, method), o, alpha) for t, o in zip(ts, os))

    def out_of_place(self, other, *, alpha=1):
        if name == "pow" and isinstance(self, numbers.Number):
            return joined(node_name(name, "Number"), lambda ts: tuple(ember.pow(self, t)
                                                                      for t in ts),
                          _check_list(name, other))
        _check_lone_tensor(name, self, other, alpha)
        ops = _pair(_check_list(name, self), other)
        kind = kind_of(other)
        if kind != "Tensor":
            return joined(node_name(name, kind), lambda ts, os: compute(
                ts, os, alpha, kind == "List"), self, ops)
        name_kind = node_name(name, "Scalar" if name == "add" and not other.requires_grad
                              else kind)
        if not name_kind.endswith("Tensor"):    # PyTorch's parser read it as a number
            return joined(name_kind, lambda ts: compute(ts, ops, alpha), self)
        return joined(name_kind, lambda ts, o: compute(ts, [o] * len(ts), alpha), self, other)

    def in_place(self, other, *, alpha=1):
        _check_lone_tensor(name + "_", self, other, alpha)
        kind = kind_of(other)
        # (PyTorch's maximum_/minimum_ with numbers have no derivative: recorded ones refuse)
        refused = name in ("maximum", "minimum") and kind != "List" and ember.is_grad_enabled()
        for t, o in zip(self, _pair(_check_list(name, self), other)):
            if name == "mul" and t.dtype in _HALF and isinstance(o, numbers.Real):
                o = _in_dtype(o, t.dtype)
            if refused:
                not_implemented_inplace(f"_foreach_{name}_", lambda: call(
                    getattr(t, method + "_"), o, alpha), t, o)
            elif kind == "List" and name in ("maximum", "minimum"):     # (ties share grads)
                name_inplace(name, kind, call_inplace(REGISTRY[name], [t, o], ()))
            else:
                name_inplace(name, kind, call(getattr(t, method + "_"), o, alpha))
        return self
    return out_of_place, in_place


def _extremum(name, t, other, listed):
    """``_foreach_maximum``/``minimum``'s result for one tensor: PyTorch's derivative is
    ``maximum``'s for every overload (ties share the gradient, a NaN passes it on), while its
    forward with a number is clamp's (of the same value where a tensor can require grad)."""
    if listed:
        return getattr(ember, name)(t, other)
    if t.requires_grad and t.dtype.is_floating_point and ember.is_grad_enabled():
        if not isinstance(other, ember.Tensor):
            other = ember.tensor(other, dtype=t.dtype, device=t.device)
        return getattr(ember, name)(t, other)
    return getattr(t, _BINARY[name])(other)


_HALF = (ember.bfloat16, ember.float16)
# the foreach ops without an overload for one tensor: their Scalar overloads take a 0-dim
# tensor only if it reads as a number (no grad); per op, the other operand's overloads
_NUMBER_ONLY = {"sub": ("Number scalar", "tuple of Scalars scalars",
                        "tuple of Tensors other, *, Number alpha = 1"),
                "pow": ("Number exponent", "tuple of Scalars exponent",
                        "tuple of Tensors exponent")}
for _name in ("clamp_min", "clamp_max", "maximum", "minimum"):
    _NUMBER_ONLY[_name] = ("Number scalar", "tuple of Scalars scalars", "tuple of Tensors other")


def _check_lone_tensor(name, self, other, alpha):
    """PyTorch's TypeError for one tensor ``other`` (one that requires grad, or has dims)
    given to a foreach op that has no overload for it (``name``: with its ``_`` suffix)."""
    base = name.rstrip("_")
    if base not in _NUMBER_ONLY or not isinstance(other, ember.Tensor) \
            or not (other.ndim or other.requires_grad):
        return
    if alpha != 1:          # (only sub takes alpha: its Tensor-list overload)
        raise TypeError(f"_foreach_{name}(): argument 'other' (position 2) must be tuple of "
                        f"Tensors, not Tensor")
    invalid = (f"      didn't match because some of the arguments have invalid types: "
               f"(!{_described(self)}!, !Tensor!)")
    shown = [f"tuple of Tensors self, {last}" for last in _NUMBER_ONLY[base]]
    if name == "pow":
        shown.insert(0, "Number self, tuple of Tensors exponent")
    lines = [f"_foreach_{name}() received an invalid combination of arguments - got "
             f"({type(self).__name__}, Tensor), but expected one of:"]
    for sig in shown:
        lines.append(f" * ({sig})")
        if "alpha" not in sig:      # (PyTorch explains no mismatch of sub's alpha overload)
            lines.append(invalid)
    raise TypeError("\n".join(lines) + "\n")


def _in_dtype(number, dtype):
    """``number`` rounded to ``dtype``: PyTorch's in-place ``_foreach_mul_`` multiplies a
    half-precision tensor by its numbers (one or a list) rounded so, not as ``mul_`` does (a
    bfloat16 EMA by 0.99 scales by 0.98828125); the other foreach ops keep them whole."""
    return ember.tensor(number, dtype=dtype).item()


def _values(name, tensors, tensor1, tensor2, value):
    """The ``value`` of addcmul/addcdiv (``name``, with any ``_``), one number per tensor."""
    if isinstance(value, (list, tuple)) and any(isinstance(v, ember.Tensor) for v in value):
        _refuse_tensors_in_values(name, (tensors, tensor1, tensor2, value))
    if isinstance(value, ember.Tensor):
        if value.ndim != 1:
            raise RuntimeError(f"Expected packed scalar Tensor to be of dimension 1. Got "
                               f"{value.ndim} instead.")
        value = value.tolist()
    return _pair(tensors, value)


def _refuse_tensors_in_values(name, args):
    """PyTorch's TypeError for addcmul/addcdiv values given as a list holding a tensor: its
    overloads take numbers (a list or one) or one packed tensor, and its parser explains each."""
    invalid = ("      didn't match because some of the arguments have invalid types: ("
               + ", ".join(f"!{_described(a)}!" for a in args) + ")")
    lines = [f"_foreach_{name}() received an invalid combination of arguments - got "
             f"({', '.join(type(a).__name__ for a in args)}), but expected one of:"]
    for last in ("tuple of Scalars scalars", "Tensor scalars", "Number value = 1"):
        lines += [f" * (tuple of Tensors self, tuple of Tensors tensor1, tuple of Tensors "
                  f"tensor2, {last})", invalid]
    raise TypeError("\n".join(lines) + "\n")


def _pointwise(name):
    def out_of_place(self, tensor1, tensor2, value=1):
        values = _values(name, _check_list(name, self), tensor1, tensor2, value)
        pairs = _pair(self, tensor1), _pair(self, tensor2, position=2)

        def compute(ts, ones, twos):
            return tuple(getattr(t, name)(a, b, value=v)
                         for t, a, b, v in zip(ts, ones, twos, values))
        kind = kind_of(value)       # (PyTorch's Tensor-value overload has no derivative)
        if kind == "Tensor":
            return not_implemented(f"_foreach_{name}", lambda ts, os, ws, _: compute(
                ts, os, ws), self, *pairs, value)
        return joined(node_name(name, kind), compute, self, *pairs)

    def in_place(self, tensor1, tensor2, value=1):
        values = _values(name + "_", _check_list(name, self), tensor1, tensor2, value)
        for t, a, b, v in zip(self, _pair(self, tensor1), _pair(self, tensor2, position=2),
                              values):
            if isinstance(value, ember.Tensor):
                not_implemented_inplace(f"_foreach_{name}_", lambda: getattr(t, name + "_")(
                    a, b, value=v), t, a, b, value)
            else:
                getattr(t, name + "_")(a, b, value=v)
        return self
    return out_of_place, in_place


def _lerp_weights(tensors, weight):
    """One weight per tensor; a 0-dim tensor is read as PyTorch's Scalar overload reads it,
    as a number (``lerp_`` of integers then fails in the kernel, not on a cast)."""
    if isinstance(weight, ember.Tensor) and weight.ndim == 0:
        weight = weight.item()
    return _pair(tensors, weight, position=2)


def _lerp_weight(name, args, kwargs):
    """The weight of ``_foreach_lerp`` (``args``, ``kwargs``: what followed ``self`` and
    ``tensors1``), and the keyword that passed it (None: positional): ``weight`` or
    PyTorch's ``weights`` of its tensor-list overload."""
    if len(args) + len(kwargs) == 1 and (args or next(iter(kwargs)) in ("weight", "weights")):
        return (args[0], None) if args else next(iter(kwargs.items()))[::-1]
    if len(args) + len(kwargs) > 1 or args:
        raise TypeError(f"_foreach_{name}() takes 3 arguments ({2 + len(args) + len(kwargs)} "
                        f"given)")
    if kwargs:
        raise TypeError(f"_foreach_{name}() got an unexpected keyword argument "
                        f"'{next(iter(kwargs))}'")
    raise TypeError(f"_foreach_{name}() missing 1 required positional argument: 'weight'")


def _check_lerp_weight(name, self, tensors1, weight, keyword=None):
    """PyTorch's TypeError for a tensor ``weight`` that its Scalar overload cannot read as a
    number (one that requires grad, or has dims): no overload takes a lone tensor.
    ``keyword``: the keyword that passed it (None: positional)."""
    if keyword == "weights" or not isinstance(weight, ember.Tensor) \
            or not (weight.ndim or weight.requires_grad):
        return
    shown = [type(a).__name__ for a in (self, tensors1, weight)]
    marked = [_described(a) for a in (self, tensors1, weight)]
    if keyword is not None:
        shown[-1], marked[-1] = f"{keyword}={shown[-1]}", f"{keyword}={marked[-1]}"
    invalid = ("      didn't match because some of the arguments have invalid types: ("
               + ", ".join(f"!{m}!" for m in marked) + ")")
    lines = [f"_foreach_{name}() received an invalid combination of arguments - got "
             f"({', '.join(shown)}), but expected one of:"]
    for last in ("Number weight", "tuple of Scalars weight", "tuple of Tensors weights"):
        lines += [f" * (tuple of Tensors self, tuple of Tensors tensors1, {last})",
                  invalid if keyword is None or last.endswith(" weight") else
                  "      didn't match because some of the keywords were incorrect: weight"]
    raise TypeError("\n".join(lines) + "\n")


def _described(arg):
    """An argument as PyTorch's argument errors show it: ``list of [Tensor, Tensor]``."""
    names = [type(a).__name__ for a in arg] if isinstance(arg, (list, tuple)) else None
    if isinstance(arg, list):
        return f"list of [{', '.join(names)}]"
    if isinstance(arg, tuple):
        return f"tuple of ({', '.join(names)}{',' if len(names) == 1 else ''})"
    return type(arg).__name__


def _foreach_lerp(self, tensors1, *args, **kwargs):
    """``lerp`` of each tensor towards its partner by ``weight`` (or ``weights=``)."""
    weight, keyword = _lerp_weight("lerp", args, kwargs)
    _check_lerp_weight("lerp", self, tensors1, weight, keyword)
    ends = _pair(_check_list("lerp", self), tensors1)
    weights = _lerp_weights(self, weight)
    kind = "Scalar" if isinstance(weight, ember.Tensor) else kind_of(weight)
    return joined(node_name("lerp", kind), lambda ts, es, ws: tuple(
        t.lerp(e, w) for t, e, w in zip(ts, es, ws)), self, ends, weights)


def _foreach_lerp_(self, tensors1, *args, **kwargs):
    """In-place ``lerp`` of each tensor towards its partner by ``weight`` (or ``weights=``)."""
    weight, keyword = _lerp_weight("lerp_", args, kwargs)
    _check_lerp_weight("lerp_", self, tensors1, weight, keyword)
    ends = _pair(_check_list("lerp_", self), tensors1)
    for t, e, w in zip(self, ends, _lerp_weights(self, weight)):
        t.lerp_(e, w)
    return self


def _foreach_norm(self, ord=2, dtype=None):
    """The vector norm of each tensor (a tuple of 0-dim tensors)."""
    return joined(node_name("norm"), lambda ts: tuple(
        ember.linalg.vector_norm(t, ord, dtype=dtype) for t in ts), _check_list("norm", self))


def _foreach_max(self):
    """The largest element of each tensor."""
    return joined(node_name("max"), lambda ts: tuple(t.amax() for t in ts),
                  _check_list("max", self))


def _foreach_powsum(self, ord=2, dtype=None):
    """The sum of ``|x| ** ord`` over each tensor."""
    return tuple(t.abs().pow(ord).sum(dtype=dtype) for t in _check_list("powsum", self))


def _foreach_mm(self, mat2):
    """Matrix products of the paired tensors."""
    return tuple(a.mm(b) for a, b in zip(self, _pair(_check_list("mm", self), mat2)))


def _foreach_clone(self):
    """A copy of each tensor."""
    return joined(node_name("clone"), lambda ts: tuple(t.clone() for t in ts),
                  _check_list("clone", self))


def _foreach_copy_(self, src, non_blocking=False):
    """Copy each source tensor into its partner, in place."""
    for t, s in zip(self, _pair(_check_list("copy_", self), src)):
        t.copy_(s, non_blocking)
    return self


def _foreach_zero_(self):
    """Fill each tensor with zeros, in place."""
    for t in _check_list("zero_", self):
        t.zero_()
    return self


def _export(name, pair):
    for fn, suffix in zip(pair, ("", "_")):
        fn.__name__ = fn.__qualname__ = f"_foreach_{name}{suffix}"
        what = "in place, " if suffix else ""
        fn.__doc__ = f"``{name}`` of each tensor of a list, {what}as ``torch._foreach_{name}``."
        globals()[fn.__name__] = fn


for _name in _UNARY:
    _export(_name, _unary(_name))
for _name, _method in _BINARY.items():
    _export(_name, _binary(_name, _method))
for _name in ("addcmul", "addcdiv"):
    _export(_name, _pointwise(_name))

__all__ = sorted(n for n in globals() if n.startswith("_foreach_"))
