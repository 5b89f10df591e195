"""The op registry: one record per op, and the dispatcher every call goes through.

An op is declared once::

    @op("mul(input, other)", inputs=2, promote=BINARY, inplace=True)
    def mul(xp, a, b):                  # backend arrays in, a backend array out
        return xp.multiply(a, b)

    @mul.derivative
    def _(grad, a, b):                  # ember tensors in, one gradient per input out
        return grad * b.conj(), grad * a.conj()

The signature string is PyTorch's; from it the registry generates ``ember.mul``,
``Tensor.mul``, ``Tensor.mul_`` (and the ``out=`` keyword) with real Python signatures, so
argument binding costs nothing here. Forwards and derivatives take the tensor inputs first,
in ``inputs`` order, then the remaining parameters in signature order. A derivative that
names a keyword-only ``out`` parameter receives the op's output(s) as well, and one that names
a keyword-only ``needs`` parameter receives a tuple with one bool per input saying whether that
input wants a gradient (so ``x * 2`` computes no gradient for the 2). Give ``needs`` a default
of all True: other derivatives call derivatives directly.
"""

import ast
import textwrap

import numpy as np

from ember import _dtype as D
from ember._device import CPU
from ember._inference import MADE as INFERENCE_MADE, check_saved
from ember._tensor import Tensor, _make
from ember.amp._state import STATE as _AMP
from ember.amp._policy import Composite
from ember.amp.autocast_mode import cast_operands
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.graph import InputMeta, OpNode, history
from ember.autograd.saved_hooks import ACTIVE as SAVED_HOOKS_ACTIVE
from ember.autograd.saved_hooks import current_hooks as current_saved_hooks
from ember.backend import (SEVERAL_GPUS, XP_BY_ARRAY_TYPE, device_guard, device_of,
                           device_scalar, loud_fp, operands_gpu_elsewhere, quiet_fp)
from ember.backend.meta import MetaArray
from ember.ops._arg_aliases import (MISSING, UNSET, alias_arg, alias_prologue, aliases_of,
                                    missing_arg, public_signature, stand_in_defaults)
from ember.ops._meta import MetaCall
from ember.ops._op_errors import (OpValueError, broadcast_message, not_differentiable,
                                  translate_error)
from ember.ops._out import write_out
from ember.ops._out_compute import OUT_PREPARE
from ember.ops._promotion import compute_dtype
from ember.overrides import is_plain as _plain_subclass

__all__ = ["op", "Op", "REGISTRY", "call", "OpValueError", "device_mismatch", "broadcast_message",
           "translate_error"]

REGISTRY = {}
_NDARRAY = np.ndarray
D.ON_DEFAULT_CHANGE.append(lambda: [o.dtype_cache.clear() for o in REGISTRY.values()])
_SCALARS = {int: int, float: float, bool: bool, complex: complex}
_WRAP_INT = {np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.int32, np.uint16,
                                   np.uint32, np.uint64)}


class Op:
    """Everything ember knows about one op; see the module docstring."""

    def __init__(self, forward, signature, *, inputs, promote, upcast, method, inplace,
                 view, out, saves_inputs, grad_fn_name, scalars, method_varargs,
                 namedtuple, differentiable, checked_scalars, namespace):
        tree = ast.parse(f"def {signature}: pass").body[0]
        self.short_name = tree.name     # the Python name: ember.<ns>.<short_name>
        self.namespace = namespace      # None, or "linalg", "fft", "special"
        self.name = f"{namespace}.{tree.name}" if namespace else tree.name
        self.forward = forward
        self.signature = signature
        self._args = tree.args
        names = [a.arg for a in tree.args.args]
        if isinstance(inputs, int):
            inputs = tuple(names[:inputs])
        self.input_names = tuple(n.rstrip("*") for n in inputs)
        defaults = dict(zip(names[len(names) - len(tree.args.defaults):], tree.args.defaults))
        defaults.update((a.arg, d) for a, d in zip(tree.args.kwonlyargs, tree.args.kw_defaults)
                        if d is not None)
        self.optional_inputs = frozenset(        # tensor inputs that default to None
            i for i, n in enumerate(self.input_names)
            if isinstance(defaults.get(n), ast.Constant) and defaults[n].value is None)
        self.seq_inputs = tuple(i for i, n in enumerate(inputs) if n.endswith("*"))
        all_names = names + [a.arg for a in tree.args.kwonlyargs]
        if tree.args.vararg:
            all_names.insert(len(names), tree.args.vararg.arg)
        self.param_names = tuple(n for n in all_names if n not in self.input_names)
        self.promote = promote
        self.upcast = upcast
        self.view = view
        self.supports_out = out
        self.out_dtype_error = None     # set for ops whose out= must have the result's dtype
        self.out_dtype_check = None     # or a check of out's dtype (see ops/_out_dtypes.py)
        self.saves_inputs = saves_inputs
        self.scalars = scalars
        self.checked_scalars = checked_scalars
        self.namedtuple = namedtuple
        self.differentiable = differentiable
        self.method_varargs = method_varargs
        self.vjp = None
        self.autocast = None            # {device type: policy} from ember/amp/_policy.py
        self.dtype_cache = {}           # operand signature -> compute_dtype(...) result
        self.inplace_forward = None
        self.needs_output = False
        # a multi-view op whose outputs PyTorch makes one by one (tensor_split slices), so
        # that each may be modified in place; split's and unbind's may not
        self.independent_views = False
        self.saved_outputs = None       # indices of the outputs the derivative reads; None: all
        self.needs_mask = False
        self.refused_grads = None       # ((input index, name, kernel), ...): see refuse_grad
        self.input_readers = None       # per input, the inputs whose gradients read it
        self.n_diff_inputs = len(self.input_names)
        # PyTorch names backward nodes after the kernel: GeluBackward0, LinalgInvExBackward0
        node_name = self.short_name if namespace == "nn.functional" else self.name
        self.node_class = type(grad_fn_name or _grad_fn_name(node_name.replace(".", "_")),
                               (OpNode,),
                               {"__slots__": (), "op": self})
        self.node_names = None          # inputs -> node name, for ops PyTorch names by case
        # reductions that compute in out's dtype (see ops/_out_compute.py); None for most
        self.out_prepare = OUT_PREPARE.get(self.name) if out else None
        self.function = _generate(self, "function")
        self.method_name = (self.short_name if method is True else method) or None
        self.inplace = inplace
        REGISTRY[self.name] = self

    def __repr__(self):
        return f"<op {self.signature}>"

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)

    def derivative(self, fn=None, *, outputs=None):
        """Register the op's derivative (see the module docstring); returns it.

        ``outputs``: for an op with several outputs whose derivative reads only some of them
        from ``out=``, their indices (negative ones count from the end). Only those are kept
        for backward (the others reach the derivative as None), so changing the others in
        place before backward is allowed, as in PyTorch (``relu_`` after ``batch_norm``: the
        mean and invstd are kept, not ``y``).
        Use as ``@op.derivative(outputs=(1,))``."""
        if fn is None:
            return lambda f: self.derivative(f, outputs=outputs)
        import inspect
        params = inspect.signature(fn).parameters
        self.needs_output = "out" in params and params["out"].kind is params["out"].KEYWORD_ONLY
        self.saved_outputs = None if outputs is None else frozenset(outputs)
        self.needs_mask = "needs" in params and params["needs"].kind is params["needs"].KEYWORD_ONLY
        if self.needs_mask and self.seq_inputs:
            raise TypeError(f"{self.name}: 'needs' is one flag per input, and sequence inputs "
                            f"have none")
        self.vjp = fn
        return fn

    def refuse_grad(self, argument, kernel):
        """Refuse a call whose tensor input ``argument`` requires grad, when the call is
        recorded, with PyTorch's error naming ``kernel``: a kernel name, or ``fn(flat inputs)``
        returning one, or None where the call is differentiable in ``argument``
        (cross_entropy's weight is, with probability targets)."""
        assert not self.seq_inputs
        entry = (self.input_names.index(argument), argument, kernel)
        self.refused_grads = (self.refused_grads or ()) + (entry,)

    def reads_inputs(self, *readers):
        """Declare, per input, the inputs whose gradients read its values (``mul``: a's
        gradient reads b and b's reads a, so ``(1,), (0,)``). An input no gradient of this
        call reads is not checked for in-place changes at backward, as PyTorch does not save
        it: ``y = h * 2; h.relu_()`` may still backpropagate through ``y``. ``"others"``:
        every input is read by all the other inputs' gradients (einsum's operands)."""
        assert readers == ("others",) or not self.seq_inputs
        self.input_readers = readers

    def name_nodes(self, name):
        """Give the op's backward nodes the name PyTorch's have (that of the kernel PyTorch
        computes the op with: ``selu``'s is EluBackward0)."""
        self.node_class = type(name, (OpNode,), {"__slots__": (), "op": self})

    def named_by(self, fn):
        """Name an op's backward nodes per call: ``fn(flat inputs, params, outputs)``
        returns the name PyTorch's node would have (``linear`` is AddmmBackward0 on a matrix
        with a bias, MmBackward0 without; ``sum`` over dims is SumBackward1); returns
        ``fn``."""
        self.node_names = fn
        self._node_classes = {}
        return fn

    def node_class_for(self, flat, params, outputs):
        """The backward node class of a call (see ``named_by``)."""
        name = self.node_names(flat, params, outputs)
        cls = self._node_classes.get(name)
        if cls is None:
            cls = self._node_classes[name] = type(name, (OpNode,), {"__slots__": (), "op": self})
        return cls

    def inplace_variant(self, fn):
        """Register a forward ``fn(xp, dst, *arrays, *params)`` that writes into ``dst``."""
        self.inplace_forward = fn
        return fn

    # structure of sequence inputs (cat's ``tensors``): flat lists for the dispatcher
    def flatten_inputs(self, inputs):
        flat = []
        for i, x in enumerate(inputs):
            if i in self.seq_inputs:
                if isinstance(x, Tensor):
                    raise TypeError(f"{self.name}(): argument '{self.input_names[i]}' must be "
                                    f"tuple of Tensors, not Tensor")
                flat.extend(x)
            else:
                flat.append(x)
        return flat, [len(x) if i in self.seq_inputs else None for i, x in enumerate(inputs)]

    def structure(self, flat, lengths):
        if lengths is None:
            return flat
        out, pos = [], 0
        for n in lengths:
            if n is None:
                out.append(flat[pos])
                pos += 1
            else:
                out.append(list(flat[pos:pos + n]))
                pos += n
        return out

    def structure_inputs(self, node_inputs):
        flat, lengths = node_inputs
        return self.structure(flat, lengths)

    def flatten_grads(self, grads):
        if not self.seq_inputs:
            return grads
        flat = []
        for i, g in enumerate(grads):
            if i in self.seq_inputs:
                flat.extend(g)
            else:
                flat.append(g)
        return flat


def op(signature, *, inputs=1, promote=None, upcast=None, method=True, inplace=False,
       view=False, out=None, saves_inputs=True, grad_fn_name=None, scalars=None,
       method_varargs=None, namedtuple=None, differentiable=True, checked_scalars=False,
       namespace=None):
    """Register an op from its PyTorch signature and its forward on backend arrays.

    inputs: how many leading parameters (or which names) are tensors; a name ending in
        ``*`` is a sequence of tensors (``cat(tensors*)``).
    promote: a dtype Policy from ops/_promotion.py, or None to pass dtypes through.
    upcast: compute 16-bit and 8-bit floats in float32 (default: when promote is set).
    method / inplace: generate ``Tensor.<name>`` / ``Tensor.<name>_``.
    view: True if the output is always a view of input 0, "maybe" if only sometimes.
    out: accept ``out=`` (default: when promote is set).
    saves_inputs: False when the derivative needs only the inputs' shapes and dtypes.
    scalars: allow Python numbers for tensor inputs (default: several inputs and promote).
    method_varargs: parameter the method takes as ``*args`` (``x.view(2, 3)``).
    namedtuple: a named-tuple type for multiple outputs (``max(dim=...)``).
    checked_scalars: Python ints that do not fit a narrow integer dtype raise (clamp bounds)
        instead of wrapping (add); or ``fn(position, value, dtype)`` making the 0-d array
        per input (pow checks its exponent, and wraps its base).
    namespace: the op lives in ``ember.<namespace>`` ("linalg", "fft", "special") rather
        than at the top level; its registry name is "<namespace>.<name>". Such ops get no
        method unless ``method`` names one.
    """
    def register(forward):
        return Op(forward, signature,
                  inputs=inputs, promote=promote,
                  upcast=(promote is not None) if upcast is None else upcast,
                  method=(False if namespace and method is True else method),
                  inplace=inplace, view=view,
                  out=(promote is not None and not view) if out is None else out,
                  saves_inputs=saves_inputs, grad_fn_name=grad_fn_name,
                  scalars=(promote is not None) if scalars is None else scalars,
                  method_varargs=method_varargs, namedtuple=namedtuple,
                  differentiable=differentiable, checked_scalars=checked_scalars,
                  namespace=namespace)
    return register


def _grad_fn_name(name):
    return "".join(part.capitalize() for part in name.strip("_").split("_")) + "Backward0"


# --- the dispatcher ---------------------------------------------------------------------------

class _Override(Exception):
    """Raised inside preparation when an operand overrides ``__torch_function__``."""


def call(op, inputs, params, out=None):
    """Run ``op`` on ``inputs`` (tensors or numbers) with ``params``; record the graph."""
    if op.seq_inputs:
        flat, lengths = op.flatten_inputs(inputs)
    else:
        flat, lengths = inputs, None
    if op.autocast is not None and _AMP.enabled:
        flat = cast_operands(op.autocast, flat, params)
        if type(flat) is Composite:     # PyTorch composes this call of other ops
            return flat.run(inputs, params, out)
    if SEVERAL_GPUS[0]:
        elsewhere = _other_gpu(flat)
        if elsewhere is not None:       # run where the operands are, as PyTorch does
            with device_guard(elsewhere):
                return call(op, inputs, params, out)
    try:
        xp, arrays, requires_grad, casts, _ = _prepare(op, flat)
    except _Override:
        from ember.overrides import handle_op
        return handle_op(op, inputs, params, out)
    except MetaCall:
        from ember.ops._meta import meta_call
        return meta_call(op, inputs, params, out)
    if lengths is not None:
        arrays = op.structure(arrays, lengths)
    token = None if op.view else quiet_fp()     # views compute nothing to warn of
    try:
        res = op.forward(xp, *arrays, *params)
        if type(res) is _NDARRAY and casts is None:
            outputs = _make(res)
        elif type(res) is tuple:
            outputs = tuple(_wrap(r, xp, casts) for r in res)
        else:
            outputs = _wrap(res, xp, casts)
    except (ValueError, TypeError, IndexError, OverflowError) as e:
        raise translate_error(op, e, arrays) from None
    finally:
        if token is not None:
            loud_fp(token)
    if op.view:
        _mark_view(op, flat[0], params, outputs, requires_grad and not _GRAD.grad_enabled)
    if requires_grad and _GRAD.grad_enabled and op.vjp is not None:
        _record(op, flat, lengths, params, outputs)
    if out is not None:
        if out is RAW_OUTPUTS:
            return outputs
        return write_out(op, out, outputs, requires_grad, flat)
    if op.namedtuple is not None:
        return op.namedtuple(*outputs)
    return outputs


def rename_node(t, name):
    """``t``, its backward node renamed ``name``: a composite of ops standing for one of
    PyTorch's kernels (``mse_loss``'s node is MseLossBackward0) shows that kernel's name."""
    node = t._grad_fn
    if node is not None:
        key = (type(node), name)
        cls = _RENAMED.get(key)
        if cls is None:
            cls = _RENAMED[key] = type(name, (type(node),), {"__slots__": ()})
        node.__class__ = cls
    return t


_RENAMED = {}                   # (node class, name) -> the renamed subclass


RAW_OUTPUTS = object()      # call(..., out=RAW_OUTPUTS): every output, before ``namedtuple``


def _wrap(res, xp, casts):
    if type(res) not in XP_BY_ARRAY_TYPE:       # a scalar (a forward may return another
        res = xp.asarray(res)                   # backend's array: _to_copy moves devices)
    if casts is not None and res.dtype == casts[1]:
        res = res.astype(casts[0])
    return _make(res)


def _prepare(op, flat):
    """Check operands and cast them to the op's compute dtype.

    Returns (xp, arrays, requires_grad, casts, compute): casts is None, or (compute dtype,
    upcast dtype) when 16-bit floats are computed in float32 and must be rounded back;
    compute is the compute dtype (None for ops without a dtype policy).
    """
    arrays = []
    signature = []                      # see NOTE [Operand signatures] in _promotion.py
    requires_grad = False
    array_type = None
    for x in flat:
        t = type(x)
        if t is Tensor:
            a = x._data
        elif t in _SCALARS:
            if not op.scalars:
                _reject_operand(op, flat, x)
            arrays.append(x)
            signature.append(t)
            continue
        elif x is None:
            if len(arrays) not in op.optional_inputs or op.seq_inputs:
                _reject_operand(op, flat, x)
            arrays.append(None)
            continue
        elif isinstance(x, Tensor):
            if not _plain_subclass(t):
                raise _Override
            a = x._data
        else:
            x = _as_scalar(op, flat, x)
            arrays.append(x)
            signature.append(type(x))
            continue
        if x._requires_grad or x._grad_fn is not None:
            requires_grad = True
        if type(a) is not array_type:
            if array_type is None:
                array_type = type(a)
            else:
                a, array_type = _join_devices(flat, arrays, a, array_type)
        arrays.append(a)
        signature.append(a.dtype if a.ndim else (a.dtype,))
    if array_type is None:
        raise TypeError(f"{op.name}(): expected at least one Tensor argument")
    if array_type is MetaArray:
        raise MetaCall
    if op.promote is None:
        return XP_BY_ARRAY_TYPE[array_type], arrays, requires_grad, None, None
    signature = tuple(signature)
    hit = op.dtype_cache.get(signature)
    if hit is None:
        hit = op.dtype_cache[signature] = compute_dtype(op.promote, signature, op.name,
                                                        op.upcast)
    compute, casts, target = hit
    if target is not None:
        for i, a in enumerate(arrays):
            ta = type(a)
            if ta is array_type:
                if a.dtype is not target:
                    arrays[i] = a.astype(target)
            elif ta is int and target in _WRAP_INT:
                arrays[i] = _narrow_int(op, i, a, target)
                if array_type is not _NDARRAY:
                    arrays[i] = device_scalar(XP_BY_ARRAY_TYPE[array_type], arrays[i])
    return XP_BY_ARRAY_TYPE[array_type], arrays, requires_grad, casts, compute


def _narrow_int(op, position, value, dtype):
    """A Python int as a 0-d array of a narrow integer dtype: wrapped like a C cast, or
    range-checked as PyTorch does for bounds and fill values (``checked_scalars``)."""
    check = op.checked_scalars
    if check is True:
        from ember.ops._scalars import checked_scalar
        return checked_scalar(np, value, dtype)
    if check:
        return check(position, value, dtype)
    return np.array(value).astype(dtype)


def _as_scalar(op, flat, x):
    if isinstance(x, (np.bool_, np.integer, np.floating, np.complexfloating)) and op.scalars:
        return x.item()
    if hasattr(type(x), "__torch_function__"):
        raise _Override
    _reject_operand(op, flat, x)


def _reject_operand(op, flat, x):
    pos = next(i for i, y in enumerate(flat) if y is x)
    name = op.input_names[min(pos, len(op.input_names) - 1)]
    from ember._creation import _tp_name
    raise TypeError(f"{op.name}(): argument '{name}' (position {pos + 1}) must be Tensor, "
                    f"not {_tp_name(x)}")


def _join_devices(flat, arrays, a, array_type):
    """PyTorch lets CPU 0-dim tensors join an op on a GPU, as scalars: returns the operand
    and the op's array type, moving such operands over (as kernel-filled scalars: an upload
    would wait for the GPU); any other mix of devices raises."""
    if type(a) is _NDARRAY and a.ndim == 0:
        return device_scalar(XP_BY_ARRAY_TYPE[array_type], a), array_type
    if array_type is _NDARRAY and all(x.ndim == 0 for x in arrays if type(x) is _NDARRAY):
        xp = XP_BY_ARRAY_TYPE[type(a)]
        for i, x in enumerate(arrays):
            if type(x) is _NDARRAY:
                arrays[i] = device_scalar(xp, x)
        return a, type(a)
    device_mismatch(flat)


def _other_gpu(flat):
    """The GPU of a call's tensors when it is not the current one (the call then reruns
    there), else None; tensors on two GPUs raise PyTorch's error."""
    return operands_gpu_elsewhere([x._data for x in flat if isinstance(x, Tensor)],
                                  lambda: device_mismatch(flat))


def device_mismatch(flat):
    """Raise PyTorch's error for the tensors among ``flat`` lying on two devices."""
    devices = []
    for x in flat:
        if isinstance(x, Tensor) and str(x.device) not in devices:
            devices.append(str(x.device))
    if "meta" in devices:
        from ember.ops._meta import check_devices
        check_devices(flat)             # PyTorch words a meta mismatch its own way
    devices.sort(key=lambda d: d == "cpu")      # PyTorch names the GPU first: "cuda:0 and cpu"
    raise RuntimeError(f"Expected all tensors to be on the same device, but found at least "
                       f"two devices, {devices[0]} and {devices[1]}!")


# --- graph recording --------------------------------------------------------------------------

def _record(op, flat, lengths, params, outputs):
    """Attach a backward node for this call to the differentiable outputs."""
    if op.refused_grads is not None:
        _check_refused_grads(op, flat)
    edges = []
    in_meta = []            # per input: None, or (shape, NumPy dtype, ...) if it needs a gradient
    if op.saves_inputs:
        if INFERENCE_MADE[0]:
            check_saved(flat)
        saved = list(flat)
        versions = []
        for x in flat:
            if isinstance(x, Tensor):
                a = x._data
                edges.append(_edge(x))
                in_meta.append(None if edges[-1] is _NO_EDGE else (a.shape, a.dtype))
                vc = x._vc
                versions.append(vc.value if vc is not None else x._shared_version().value)
            else:
                edges.append(_NO_EDGE)
                in_meta.append(None)
                versions.append(None)
        if op.input_readers is not None:
            _skip_unread(op.input_readers, edges, versions, saved)
    else:
        saved = []
        versions = None
        for x in flat:
            if isinstance(x, Tensor):
                a = x._data
                meta = _tuple_new(InputMeta, (a.shape, a.dtype, CPU if type(a) is _NDARRAY
                                              else device_of(a)))
                saved.append(meta)
                edges.append(_edge(x))
                in_meta.append(None if edges[-1] is _NO_EDGE else meta)
            else:
                saved.append(x)
                edges.append(_NO_EDGE)
                in_meta.append(None)
    node_class = op.node_class
    if op.node_names is not None:
        node_class = op.node_class_for(flat, params, outputs)
    if type(outputs) is tuple:
        node = _record_outputs(node_class, op, edges, saved, lengths, versions, params,
                               in_meta, outputs)
    else:
        saved_out = None
        if op.needs_output:
            vc = outputs._shared_version()
            saved_out = ((outputs._data,), vc, vc.value)
        node = node_class(tuple(edges), (saved, lengths), versions, params, in_meta, saved_out)
        if outputs._data.dtype.kind in _DIFFERENTIABLE_KINDS:
            outputs._grad_fn = node
    if SAVED_HOOKS_ACTIVE[0]:
        hooks = current_saved_hooks()
        if hooks is not None:
            node._pack_saved(hooks, outputs)
    return node


def _skip_unread(readers, edges, versions, saved):
    """Keep only the metadata of inputs that no needed gradient reads, unversioned (see
    ``Op.reads_inputs``): PyTorch does not save them. einsum's operands, a sequence its
    derivative reads whole, stay saved, but unversioned."""
    others = readers == ("others",)
    if others:
        readers = [[j for j in range(len(edges)) if j != i] for i in range(len(edges))]
    for i, users in enumerate(readers):
        if versions[i] is not None:
            for j in users:
                if edges[j] is not _NO_EDGE:
                    break
            else:
                versions[i] = None
                if not others:
                    a = saved[i]._data
                    saved[i] = _tuple_new(InputMeta, (a.shape, a.dtype, CPU if type(a) is
                                                      _NDARRAY else device_of(a)))


def _check_refused_grads(op, flat):
    for index, argument, kernel in op.refused_grads:
        x = flat[index]
        if isinstance(x, Tensor) and x.requires_grad:
            if callable(kernel):
                kernel = kernel(flat)
            if kernel is not None:
                raise not_differentiable(kernel, argument)


def _record_outputs(node_class, op, edges, saved, lengths, versions, params, in_meta,
                    outputs):
    saved_out = None
    if op.needs_output:             # (arrays, counters, versions): None for outputs not kept
        kept, n = op.saved_outputs, len(outputs)
        counters = tuple(o._shared_version() if kept is None or i in kept or i - n in kept
                         else None for i, o in enumerate(outputs))
        saved_out = (tuple(None if vc is None else o._data
                           for o, vc in zip(outputs, counters)),
                     counters, tuple(None if vc is None else vc.value for vc in counters))
    node = node_class(tuple(edges), (saved, lengths), versions, params, in_meta, saved_out)
    node.n_outputs = len(outputs)
    node._out_meta = tuple((o.shape, o.dtype, o.device) for o in outputs)
    for nr, o in enumerate(outputs):
        if o._data.dtype.kind in _DIFFERENTIABLE_KINDS:
            o._grad_fn = node
            o._output_nr = nr
    return node


_DIFFERENTIABLE_KINDS = "fcV"           # V: ml_dtypes' bfloat16 and float8
_NO_EDGE = (None, 0)
_tuple_new = tuple.__new__


def _edge(x):
    """The edge through which gradient reaches tensor ``x``, or _NO_EDGE."""
    fn = x._grad_fn
    if fn is not None and x._view is None:
        return fn, x._output_nr
    if x._requires_grad or fn is not None:
        return history(x)
    return _NO_EDGE


def _mark_view(op, src, params, outputs, no_grad=False):
    """Make outputs views of ``src``'s base: shared version, and a recipe to recreate them.

    ``no_grad``: ``src`` requires grad but grad mode is off; such views may not be written to
    in place with grad mode on (see ``_inplace.check_no_grad_view``)."""
    if no_grad:     # such a view requires grad as a leaf whose gradients are dropped
        mode = "inference mode" if _GRAD.inference else "no_grad mode"
        for o in outputs if type(outputs) is tuple else (outputs,):
            o._meta = dict(o._meta or (), no_grad_view=mode)
            o._requires_grad = o._data.dtype.kind in _DIFFERENTIABLE_KINDS
    vc = src._vc
    if vc is None:
        vc = src._shared_version()
    view = src._view
    base = src if view is None else view[0]
    if type(outputs) is not tuple:
        if op.view == "maybe" and not _shares_memory(outputs._data, src._data):
            return
        outputs._vc = vc
        outputs._view = (base, src, op, params, base._grad_fn, None)
        return
    for i, o in enumerate(outputs):
        if op.view == "maybe" and not _shares_memory(o._data, src._data):
            continue
        o._vc = vc
        o._view = (base, src, op, params, base._grad_fn, i)


def _shares_memory(out, src):
    """Whether ``out`` views ``src``'s memory (NumPy records the owner as ``base``)."""
    owner = out.base
    if owner is None:
        return False
    if owner is src or owner is src.base:
        return True
    return bool(np.may_share_memory(out, src))


# --- code generation of the public functions --------------------------------------------------

def _generate(op, kind):
    """Build ``ember.<name>`` (kind "function"), ``Tensor.<name>`` ("method") or
    ``Tensor.<name>_`` ("inplace") with the op's real signature."""
    args = op._args
    pos = [a.arg for a in args.args]
    defaults = [None] * (len(pos) - len(args.defaults)) + list(args.defaults)
    fname = op.short_name if kind == "function" else (op.method_name or op.short_name)
    aliases = aliases_of(op, pos + [a.arg for a in args.kwonlyargs])
    stand_ins = stand_in_defaults(aliases, pos, defaults)
    parts = []
    for name, default in zip(pos, defaults):
        parts.append(name if default is None else f"{name}={ast.unparse(default)}")
    if args.vararg:
        parts.append(f"*{args.vararg.arg}")
    elif args.kwonlyargs or (kind == "function" and op.supports_out):
        parts.append("*")
    for a, default in zip(args.kwonlyargs, args.kw_defaults):
        parts.append(a.arg if default is None else f"{a.arg}={ast.unparse(default)}")
    if kind == "function" and op.supports_out:
        parts.append("out=None")
    prologue = ""
    if kind != "function":
        parts[0] = "self"
        if op.method_varargs:
            # x.view(2, 3), x.view((2, 3)) and x.view(size=(2, 3)) all work
            name = op.method_varargs
            idx = next(i for i, p in enumerate(parts) if p.split("=")[0] == name)
            default = parts[idx].partition("=")[2] or "_MISSING"
            parts[idx:idx + 1] = ["*_args", f"{name}=_UNSET"]
            if idx + 2 < len(parts) and parts[idx + 2] == "*":
                del parts[idx + 2]
            # x.view(2, 3), the common form, binds without a call
            prologue = (f"    if {name} is _UNSET and _args and type(_args[0]) is int:\n"
                        f"        {name} = _args\n"
                        f"    else:\n"
                        f"        {name} = _method_varargs(_args, {name}, {default}, "
                        f"'{op.method_name or op.short_name}', '{name}')\n")
    if aliases:
        prologue = alias_prologue(aliases, parts, pos, defaults, stand_ins, fname) + prologue
    if kind == "function" and op.out_prepare is not None:
        prologue += _out_prologue(op)
    if parts and parts[-1] == "*":
        parts.pop()
    inputs = ["self" if kind != "function" and n == pos[0] else n for n in op.input_names]
    call_args = f"({', '.join(inputs)},), ({''.join(p + ', ' for p in op.param_names)})"
    if kind == "inplace":
        fname += "_"
        body = f"    return _call_inplace(_op, {call_args})\n"
    else:
        out = "out" if kind == "function" and op.supports_out else "None"
        body = f"    return _call(_op, {call_args}, {out})\n"
    # _op is a closure cell; _call is a global of the kind's shared namespace (GENERATED)
    src = (f"def _bind(_op):\n    def {fname}({', '.join(parts)}):\n"
           f"{textwrap.indent(prologue + body, '    ')}    return {fname}\n")
    namespace = _generated_globals(kind)
    exec(compile(src, f"<ember op {op.name}>", "exec"), namespace)
    fn = namespace.pop("_bind")(op)
    fn.__doc__ = op.forward.__doc__
    fn.__module__ = f"ember.{op.namespace}" if op.namespace and kind == "function" else "ember"
    fn.__qualname__ = fname if kind == "function" else f"Tensor.{fname}"
    fn._ember_op = op
    if aliases:
        fn.__signature__ = public_signature(fn, aliases)
    ENTRY_KINDS[fn.__code__] = kind
    return fn



def _out_prologue(op):
    """Code that lets ``out=`` set the op's input and ``dtype=`` before the call; it runs only
    when ``out`` is given, so calls without it cost nothing more."""
    x = op.input_names[0]
    dtype = "dtype" if "dtype" in op.param_names else None
    return (f"    if out is not None:\n"
            f"        {x}, {dtype or '_'} = _op.out_prepare({x}, {dtype}, out)\n")


GENERATED = {}      # kind -> the globals all generated functions of that kind share
# the code of each public entry point into ``call`` -> its kind ("function", "method",
# "inplace", "operator", "operator_inplace"): how an override learns which entry a call came
# through (see NOTE [Entry points from frames] in ember/overrides/_entries.py)
ENTRY_KINDS = {}


def _generated_globals(kind):
    """The namespace the generated functions of ``kind`` run in: ember.overrides swaps its
    ``_call`` / ``_call_inplace`` while a torch function mode is active (none: no cost)."""
    namespace = GENERATED.get(kind)
    if namespace is None:
        from ember.ops._inplace import call_inplace
        namespace = GENERATED[kind] = {
            "_call": call, "_call_inplace": call_inplace, "_method_varargs": method_varargs,
            "_UNSET": _UNSET, "_MISSING": _MISSING, "_alias_arg": alias_arg,
            "_missing_arg": missing_arg}
    return namespace


_UNSET = UNSET             # the keyword form was not used
_MISSING = MISSING         # the parameter has no default


def method_varargs(args, keyword, default, fname, name):
    """The value of a method parameter given as varargs, as a sequence, or by keyword."""
    if args:
        if keyword is not _UNSET:
            raise TypeError(f"{fname}() got multiple values for argument '{name}'")
        return varargs(args)
    if keyword is not _UNSET:
        return keyword
    if default is _MISSING:
        raise TypeError(f"{fname}() missing 1 required positional argument: '{name}'")
    return default


def varargs(args):
    """``x.view(2, 3)`` and ``x.view((2, 3))`` both mean shape (2, 3)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return args


def attach_methods():
    """Give Tensor a method (and in-place method) for every registered op that wants one."""
    for o in REGISTRY.values():
        if o.method_name and not hasattr(Tensor, o.method_name):
            setattr(Tensor, o.method_name, _generate(o, "method"))
        name = (o.method_name or o.short_name) + "_"
        if o.inplace and not hasattr(Tensor, name):
            setattr(Tensor, name, _generate(o, "inplace"))
