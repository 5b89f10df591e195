"""``opcheck``: run an op's registration checks on sample arguments, as PyTorch's does.

- ``test_schema``: the op writes only to the arguments its schema marks mutable, and its
  outputs alias neither its inputs nor each other unless the schema says so;
- ``test_autograd_registration``: an op that outputs gradient-requiring tensors has an
  autograd formula, an ``Autograd`` kernel or a ``CompositeImplicitAutograd`` one;
- ``test_faketensor``: the fake impl promises the real outputs' shapes, dtypes and devices
  (ember has no FakeTensors: the fake impl runs on copies of the real arguments);
- ``test_aot_dispatch_static`` / ``test_aot_dispatch_dynamic``: PyTorch compiles the op;
  ember runs it again on copies of the arguments, compares the outputs with the first run,
  and runs the backward pass when an output wants a gradient.
"""

import itertools

from ember._tensor import Tensor

__all__ = ["opcheck", "OpCheckError", "MetadataMismatchError"]

_DEFAULT_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor",
                  "test_aot_dispatch_dynamic")
_ALL_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor",
              "test_aot_dispatch_static", "test_aot_dispatch_dynamic")


class OpCheckError(Exception):
    """An ``opcheck`` test failed (``raise_exception=True``)."""


class MetadataMismatchError(Exception):
    """The fake impl's outputs do not match the real ones."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason

    def __repr__(self):
        return f"MetadataMismatchError(reason={self.reason!r})"


def _copy(value):
    """Arguments with every tensor replaced by a copy (same requires_grad)."""
    if isinstance(value, Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(v) for v in value)
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value


def _tensors(value):
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _aliases(a, b):
    return a is b or (a._vc is not None and a._vc is b._vc)


def _same_values(a, b):
    a, b = a.detach(), b.detach()
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return bool((a == b).all())


def _input_name(name):
    return "input" if name == "self" else name


def _test_schema(opdef, args, kwargs, **tolerances):
    args, kwargs = _copy(args), _copy(kwargs)
    values = opdef.schema.bind(args, kwargs)
    before = [[t.detach().clone() for t in _tensors(v)] for v in values]
    out = opdef(*args, **kwargs)
    outs = _tensors(out if isinstance(out, (tuple, list)) else [out])
    returns_alias = {r.alias.rstrip("!") for r in opdef.schema.returns if r.alias}
    for arg, value, saved in zip(opdef.schema.arguments, values, before):
        name = _input_name(arg.name)
        for j, o in enumerate(outs):
            for t in _tensors(value):
                if not _aliases(o, t):
                    continue
                if not arg.alias or arg.alias.rstrip("!") not in returns_alias:
                    raise RuntimeError(f"Argument {name} is not defined to alias output but "
                                       f"was aliasing")
        if any(not _same_values(a, b) for a, b in zip(saved, _tensors(value))) \
                and not arg.is_write:
            raise RuntimeError(f"Argument {name} is not defined as mutable but was mutated")
    for i, j in itertools.combinations(range(len(outs)), 2):
        if _aliases(outs[i], outs[j]):
            raise RuntimeError(f"Outputs {i} and {j} alias unexpectedly")


def _test_autograd_registration(opdef, args, kwargs, **tolerances):
    tensors = _tensors(list(args) + list(kwargs.values()))
    if not any(t.requires_grad for t in tensors):
        return
    covered = opdef.has_formula or any(
        k.startswith(("Autograd", "CompositeImplicitAutograd")) for k in opdef.kernels)
    if covered:
        return
    out = opdef(*_copy(args), **_copy(kwargs))
    if any(t.requires_grad for t in _tensors(out if isinstance(out, (tuple, list)) else [out])):
        raise AssertionError(
            f"{opdef.qualname}: at least one output of this operator has requires_grad=True "
            f"but the operator does not have an autograd kernel defined at an autograd key "
            f"(e.g. DispatchKey::Autograd). This could mean that you have incorrectly "
            f"registered an autograd kernel to a non-Autograd DispatchKey, which may lead to "
            f"silently incorrect results. If your operator consists of regular PyTorch "
            f"operations, consider not using an operator at all or registering your operator "
            f"as CompositeImplicitAutograd. If you have an autograd.Function registered to a "
            f"backend (CPU/CUDA/XPU) key, the correct location for it is the Autograd key.")


def _test_faketensor(opdef, args, kwargs, **tolerances):
    import ember
    real = opdef(*_copy(args), **_copy(kwargs))
    if opdef.fake is None:
        if not opdef.schema.returns or "CompositeImplicitAutograd" in opdef.kernels:
            return                  # trivial, or the composite decomposes into ember ops
        if opdef.custom is not None:
            from ember.library._ops import _no_fake_message
            raise RuntimeError(_no_fake_message(opdef.custom))
        raise RuntimeError(f"There was no fake impl registered for {opdef}. Please use "
                           f"`ember.library.register_fake` to add one.")
    with ember.no_grad():
        fake = opdef.fake(*_copy(args), **_copy(kwargs))
    reals = real if isinstance(real, (tuple, list)) else [real]
    fakes = fake if isinstance(fake, (tuple, list)) else [fake]
    prefix = (f"When comparing the output of {opdef} on FakeTensor and concrete Tensors, "
              f"found mismatched tensor metadata: ")
    if len(reals) != len(fakes):
        raise MetadataMismatchError(f"{prefix}{len(reals)} outputs and {len(fakes)} fake "
                                    f"outputs")
    for r, f in zip(reals, fakes):
        if not isinstance(r, Tensor):
            continue
        if not isinstance(f, Tensor):
            raise MetadataMismatchError(f"{prefix}a Tensor and a {type(f).__name__}")
        for what, a, b in (("Shapes", r.shape, f.shape), ("Dtypes", r.dtype, f.dtype),
                           ("Devices", r.device, f.device)):
            if a != b:
                raise MetadataMismatchError(f"{prefix}{what} {a} and {b} are not equal!")


def _test_aot_dispatch(opdef, args, kwargs, rtol=None, atol=None):
    import ember
    first = opdef(*_copy(args), **_copy(kwargs))
    again_args, again_kwargs = _copy(args), _copy(kwargs)
    second = opdef(*again_args, **again_kwargs)
    firsts = _tensors(first if isinstance(first, (tuple, list)) else [first])
    seconds = _tensors(second if isinstance(second, (tuple, list)) else [second])
    for a, b in zip(firsts, seconds):
        ember.testing.assert_close(b.detach(), a.detach(), rtol=rtol, atol=atol,
                                   equal_nan=True)
    wanted = [t for t in seconds if t.requires_grad]
    if wanted:
        inputs = [t for t in _tensors(list(again_args) + list(again_kwargs.values()))
                  if t.requires_grad]
        ember.autograd.grad(wanted, inputs, [ember.ones_like(t) for t in wanted],
                            allow_unused=True)


_TESTS = {"test_schema": _test_schema, "test_autograd_registration": _test_autograd_registration,
          "test_faketensor": _test_faketensor, "test_aot_dispatch_static": _test_aot_dispatch,
          "test_aot_dispatch_dynamic": _test_aot_dispatch}


def _opdef_of(op):
    from ember.library import CustomOpDef
    from ember.ops import _namespaces
    if isinstance(op, CustomOpDef):
        return op._opdef
    if isinstance(op, _namespaces.OpOverloadPacket):
        overloads = op.overloads()
        if len(overloads) != 1:
            raise ValueError(f"opcheck(op, ...): got OpOverloadPacket {op} with several "
                             f"overloads {overloads}; pass one of them, e.g. {op}.default")
        op = getattr(op, overloads[0])
    from ember.library._ops import OpDef
    if isinstance(op, _namespaces.OpOverload) and isinstance(op._call, OpDef):
        return op._call
    raise ValueError(f"opcheck(op, ...): op must be instance of torch._ops.OpOverload, e.g. "
                     f"torch.ops.aten.sin.default, got {type(op)}")


def opcheck(op, args, kwargs=None, *, test_utils=_DEFAULT_TESTS, raise_exception=True,
            atol=None, rtol=None):
    """Run the checks of ``test_utils`` on the op with these arguments: ``{test name:
    "SUCCESS" or the exception}``, or raise ``OpCheckError`` at the first failure."""
    kwargs = {} if kwargs is None else kwargs
    opdef = _opdef_of(op)
    if test_utils == "ALL":
        test_utils = _ALL_TESTS
    if isinstance(test_utils, str):
        test_utils = (test_utils,)
    if not isinstance(test_utils, (tuple, list)) or not set(test_utils) <= set(_ALL_TESTS):
        raise ValueError(f"opcheck(op, ..., test_utils={test_utils}), expected test_utils to "
                         f"be subset of {_ALL_TESTS} but it was not")
    results = {}
    for name in test_utils:
        try:
            _TESTS[name](opdef, tuple(args), kwargs, rtol=rtol, atol=atol)
            results[name] = "SUCCESS"
        except Exception as ex:     # noqa: BLE001  (each failure is a result)
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {name} failed with {ex} (scroll up "
                                   f"for stack trace)") from ex
            results[name] = ex
    return results
