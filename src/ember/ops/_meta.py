"""Ops on meta tensors: results with shapes and dtypes, and no values.

The dispatcher sends a call here when its operands live on the meta device (``_prepare``
raises ``MetaCall``). The op's forward then runs on stand-ins (backend/meta.py): read-only
NumPy arrays of the operands' shapes and dtypes over one element each, and the results keep
only their shapes and dtypes. Elementwise ops, whose result shape is the broadcast of their
operands', run on one-element stand-ins instead, so they cost the same at any size; so do
in-place ops among them, which is what initializing a module built on the meta device does.

The graph is recorded as usual, so ``backward`` on meta tensors gives meta gradients of the
right shapes. Ops whose result shape depends on the values (``nonzero``, ``unique``, boolean
masks) raise, as in PyTorch.
"""

import numpy as np

from ember._dtype import bool_
from ember._tensor import Tensor, _make
from ember.autograd.grad_mode import STATE as _GRAD
from ember.autograd.grad_mode import no_grad
from ember.backend.meta import NO_DATA, MetaArray, stand_in

__all__ = ["MetaCall", "meta_call", "meta_inplace", "check_devices"]

# ops whose result's shape depends on the operands' values
_VALUE_SHAPED = {"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive",
                 "bincount", "repeat_interleave"}
_SHAPE_ONLY_INPLACE = {"copy_", "fill_"}    # write every element; no other shape rule
_NOT_BROADCAST = {"isin"}                   # in an elementwise module, but not elementwise
# ops computed as others of the same shapes
_LAYOUT_FREE = {"view": "reshape", "_unsafe_view": "reshape"}
# modules of the ops given identity matrices and counting pivots (ones are singular, and
# some results' shapes depend on the rank)
_FACTORIZATIONS = {"linalg", "lu", "ldl", "factorizations", "solvers", "least_squares",
                   "householder", "singular", "decompositions"}
_ELEMENTWISE = []                           # filled on first use (func imports the ops)


class MetaCall(Exception):
    """Raised inside preparation when an op's operands live on the meta device."""


def _elementwise():
    if not _ELEMENTWISE:
        from ember.func._batching.elementwise import ELEMENTWISE
        _ELEMENTWISE.append(ELEMENTWISE)
    return _ELEMENTWISE[0]


def meta_call(op, inputs, params, out=None):
    """``call(op, inputs, params, out)`` for operands on the meta device."""
    from ember.ops._recording import _mark_view, _record
    flat, lengths = _flatten(op, inputs)
    check_devices(flat)
    _refuse_value_shaped(op, flat, params)
    if op.name == "_to_copy" and params[1] is not None and params[1].type != "meta":
        raise NotImplementedError(NO_DATA)
    shrink = op.name in _elementwise() and op.name not in _NOT_BROADCAST
    outputs = _view_on_probe(op, inputs, params, flat[0]) if op.view and not shrink else None
    if outputs is None:
        outputs = _results(op, inputs, params, flat, shrink)
        if op.view:
            outputs = _laid_out_views(op, inputs, params, flat[0], outputs)
    if op.view:
        _mark_view(op, flat[0], params, outputs)
    elif type(outputs) is not tuple:
        _lay_out_result(op, inputs, flat, params, outputs, shrink)
    requires_grad = any(isinstance(x, Tensor) and (x._requires_grad or x._grad_fn is not None)
                        for x in flat)
    if requires_grad and _GRAD.grad_enabled and op.vjp is not None:
        node = _record(op, flat, lengths, params, outputs)
        node.__class__ = _meta_node_class(type(node))
    if out is not None:
        return _write_out(op, out, outputs, requires_grad, flat)
    if op.namedtuple is not None:
        return op.namedtuple(*outputs)
    return outputs


def _results(op, inputs, params, flat, shrink):
    """The op's meta results (row-major), computed on stand-ins of its meta operands."""
    shape = _broadcast(op, flat) if shrink else None
    product = _product(op, inputs, params, flat) if op.name in _PRODUCT_SHAPES else None
    if product is not None:
        res, shape = product
    elif op.name == "index_put" and _has_meta_mask(params[0]):
        res = _make(stand_in(flat[0]._data))    # the shape of self; nothing to check against
    else:
        factorization = op.forward.__module__.rsplit(".", 1)[-1] in _FACTORIZATIONS
        try:
            res = _on_stand_ins(op, inputs, params, shrink, identity=factorization)
        except RuntimeError:            # refusing the all-ones stand-ins (a singular matrix)
            if shrink or factorization:
                raise
            res = _on_stand_ins(op, inputs, params, False, identity=True)
    if type(res) is tuple:
        return tuple(_meta_result(r, shape) for r in res)
    return _meta_result(res, shape)


def meta_inplace(op, self, inputs, params):
    """``call_inplace`` for operands on the meta device: checks the result's shape and dtype
    against ``self``'s and writes nothing (there is nothing to write)."""
    from ember.ops._inplace import _check_cast, _inplace_view, _shape_mismatch
    if op.view:
        return _inplace_view(op, self, params)
    flat, _ = _flatten(op, inputs)
    check_devices(flat, expected=self)
    _refuse_value_shaped(op, flat, params)
    if op.name == "index_put" and _has_meta_mask(params[0]):
        shape, dtype = self.shape, self.dtype
    elif (op.name in _elementwise() and op.name not in _NOT_BROADCAST
            or op.name in _SHAPE_ONLY_INPLACE):
        shape = _broadcast(op, flat)
        if op.name in _SHAPE_ONLY_INPLACE:
            dtype = self.dtype
        else:
            dtype = _on_stand_ins(op, inputs, params, True).dtype
    else:
        res = _on_stand_ins(op, inputs, params, False)
        shape, dtype = res.shape, res.dtype
    _check_cast(dtype, self.dtype)
    if tuple(shape) != self.shape:
        _shape_mismatch(self, shape)
    self._bump_version()
    return self


class MetaBackward:
    """The backward of an op on meta tensors: gradients are meta tensors of the inputs' shapes
    and dtypes, so no derivative runs (many read their saved values)."""

    __slots__ = ()

    def apply(self, grads):
        out = [None if meta is None else _make(MetaArray(meta[0], meta[1]))
               for meta in self._in_meta]
        op = self.op
        return out if op.dropped_inputs is None else op.kept_edges(out, *self._inputs)


def _meta_node_class(base):
    """Backward node class ``base`` (its PyTorch name) with ``MetaBackward``'s apply."""
    cls = _META_NODES.get(base)
    if cls is None:
        cls = _META_NODES[base] = type(base.__name__, (MetaBackward, base), {"__slots__": ()})
    return cls


_META_NODES = {}                # node class -> its meta counterpart


def _matmul(a, b):
    """Probe shapes (contracted dims kept, others 1) and the result's shape of ``a @ b``."""
    if not a or not b:
        return None
    batch = np.broadcast_shapes(a[:-2], b[:-2])     # (raises ValueError on a mismatch)
    probe_a = (a[-1],) if len(a) == 1 else (1,) * (len(a) - 1) + (a[-1],)
    probe_b = (b[0],) if len(b) == 1 else (1,) * (len(b) - 2) + (b[-2], 1)
    result = batch + a[-2:-1] * (len(a) > 1) + b[-1:] * (len(b) > 1)
    return [probe_a, probe_b], result


def _mm(a, b):
    return [(1, a[-1]), (b[0], 1)], (a[0], b[1])


def _bmm(a, b):
    return [(a[0], 1, a[-1]), (b[0], b[1], 1)], (a[0], a[1], b[2])


def _linear(x, w, bias=None):
    if len(w) != 2 or bias not in (None, (), (1,), (w[0],)):
        return None
    probes = [(1,) * (len(x) - 1) + (x[-1],), (1, w[1])] + ([()] if bias is not None else [])
    return probes, x[:-1] + (w[0],)


def _added(product):
    def rule(c, a, b):
        probes, result = product(a, b)
        if np.broadcast_shapes(c, result) != result:
            return None
        return [()] + probes, result
    return rule


# matrix products, whose shapes are known without computing one on stand-ins (as costly as
# on real arrays): each rule gives the probe stand-ins' shapes (with the contracted dims,
# which are checked by running the op on them) and the result's shape
_PRODUCT_SHAPES = {"matmul": _matmul, "mm": _mm, "bmm": _bmm, "nn.functional.linear": _linear,
                   "addmm": _added(_mm), "baddbmm": _added(_bmm)}


def _product(op, inputs, params, flat):
    """(result on probes, the result's real shape) of a matrix product, or None when the
    rule does not apply or the probe fails (the full stand-ins then give the op's error)."""
    shapes = [tuple(x.shape) if isinstance(x, Tensor) else None for x in flat]
    if any(type(x._data) is not MetaArray for x in flat if isinstance(x, Tensor)):
        return None
    try:
        rule = _PRODUCT_SHAPES[op.name](*shapes)
        if rule is None:
            return None
        probes, result = rule
        return _on_stand_ins(op, inputs, params, probes), result
    except (ValueError, TypeError, IndexError, RuntimeError):
        return None


def _flatten(op, inputs):
    return op.flatten_inputs(inputs) if op.seq_inputs else (inputs, None)


def _write_out(op, out, outputs, requires_grad, inputs):
    """``out=`` for a meta result: the out tensors take its shape (they must be meta too)."""
    from ember.ops._out import write_out as write_values
    targets = out if isinstance(out, (tuple, list)) else (out,)
    if any(isinstance(t, Tensor) and not t.is_meta for t in targets):
        return write_values(op, out, outputs, requires_grad, inputs)  # raises: no values
    results = outputs if type(outputs) is tuple else (outputs,)
    for dst, res in zip(targets, results):
        dst._data = MetaArray(res.shape, dst._data.dtype)
        dst._bump_version()
    return out


def _on_stand_ins(op, inputs, params, shrink, identity=False):
    """The op's result on NumPy stand-ins of its meta operands, without a graph; one-element
    stand-ins when ``shrink`` is True (an elementwise op: each keeps its rank, for type
    promotion), of the shapes it lists when a list (one per meta tensor, in order); identity
    matrices when ``identity``."""
    from ember.ops._registry import RAW_OUTPUTS, REGISTRY, call

    shapes = iter(shrink) if type(shrink) is list else None

    def swap(x):
        if isinstance(x, Tensor) and type(x._data) is MetaArray:
            a = x._data
            shape = next(shapes) if shapes is not None else (1,) * a.ndim if shrink else None
            return _make(stand_in(a, shape, identity))
        if isinstance(x, (list, tuple)):        # index tensors ride in params, in tuples
            swapped = (swap(y) for y in x)
            return type(x)(*swapped) if hasattr(x, "_fields") else type(x)(swapped)
        return x
    if op.name in _LAYOUT_FREE:         # stand-ins are not laid out as meta tensors claim
        op = REGISTRY[_LAYOUT_FREE[op.name]]
    with no_grad():
        return call(op, swap(tuple(inputs)), swap(tuple(params)), RAW_OUTPUTS)


# view ops whose result is laid out as their input (their forward would read the stand-in)
_SAME_LAYOUT = {"conj", "_neg_view", "positive", "_kernel_input", "_alias"}
# view ops that copy where no view will do: tried as ``view`` (which never copies) first
_MAYBE_COPY = {"reshape", "flatten", "unflatten", "view", "_unsafe_view"}


def _probe(meta):
    """A read-only NumPy array of meta array ``meta``'s shape and strides over one element
    (a view op reads none of them), and its address."""
    from ember._memory_format import restrided
    from ember._storage_place import _address
    probe = restrided(np, np.zeros(1, meta.dtype), meta.shape, meta.strides)
    probe.flags.writeable = False
    return probe, _address(probe)


def _view_on_probe(op, inputs, params, x):
    """The results of view op ``op`` on meta tensor ``x``, laid out as PyTorch's meta views
    are, from one run of the op on a probe of ``x`` (``_probe``): the view itself gives their
    shapes, dtypes, strides and offsets. None where a probe cannot stand in: an op that reads
    its input (``_SAME_LAYOUT``), a reshape that may copy (a non-contiguous input), a probe
    the op refuses (the stand-ins then give its error, or a row-major result as before)."""
    if not isinstance(x, Tensor) or type(x._data) is not MetaArray or op.name in _SAME_LAYOUT:
        return None
    meta = x._data
    if op.name in _MAYBE_COPY and op.name != "view" and meta.layout is not None \
            and not meta._c_contiguous():   # (NumPy's flag: the probe's)
        return None
    probe, start = _probe(meta)
    from ember.ops._registry import RAW_OUTPUTS, call
    swapped = tuple(_make(probe) if i is x else i for i in inputs)
    try:
        with no_grad():
            res = call(op, swapped, params, RAW_OUTPUTS)
    except Exception:                   # noqa: BLE001 - (the stand-ins give its error)
        return None
    arrays = [r._data for r in res] if type(res) is tuple else [res._data]
    if any(type(a) is not np.ndarray for a in arrays):
        return None
    if op.name == "flatten" and arrays[0] is not probe:     # (as ``view``'s size-1 dims)
        from ember.ops.shape import _unit_strides
        arrays[0] = _unit_strides(np, probe, arrays[0])
    from ember._storage_place import _address
    out = tuple(_make(MetaArray(a.shape, a.dtype, (a.strides, meta.offset + _address(a) - start)))
                for a in arrays)
    return out if type(res) is tuple else out[0]


def _laid_out_views(op, inputs, params, x, outputs):
    """The results of view op ``op`` on meta tensor ``x`` with the strides and storage offset
    PyTorch's meta views have, where ``_view_on_probe`` did not give them: the op runs on a
    probe (``_probe``) and its results' layouts are read off. Row-major results stay so (a
    reshape that copies; an op the probe fails)."""
    if not isinstance(x, Tensor) or type(x._data) is not MetaArray:
        return outputs
    meta = x._data
    if op.name in _SAME_LAYOUT:
        return _with_layout(outputs, meta.strides, meta.offset) if type(outputs) is not tuple \
            else outputs
    from ember._storage_place import _address
    probe, start = _probe(meta)
    if op.name in _MAYBE_COPY:
        if type(outputs) is tuple:
            return outputs
        from ember.ops.shape import view
        try:
            res = view.forward(np, probe, outputs.shape)
        except RuntimeError:
            if op.name == "view":
                raise
            return outputs              # a reshape that copies: row-major
        return _with_layout(outputs, res.strides, meta.offset + _address(res) - start)
    from ember.ops._registry import RAW_OUTPUTS, call
    swapped = tuple(_make(probe) if i is x else i for i in inputs)
    try:
        with no_grad():
            res = call(op, swapped, params, RAW_OUTPUTS)
    except Exception:                   # noqa: BLE001 - (the stand-ins' result stands)
        return outputs
    if type(outputs) is tuple:
        return tuple(o if type(r._data) is not np.ndarray else _with_layout(
            o, r._data.strides, meta.offset + _address(r._data) - start)
            for o, r in zip(outputs, res))
    if type(res._data) is not np.ndarray:
        return outputs
    return _with_layout(outputs, res._data.strides,
                        meta.offset + _address(res._data) - start)


# ops whose copy keeps the input's layout when they are given no memory format
_PRESERVING = {"clone", "_to_copy"}


def _lay_out_result(op, inputs, flat, params, out, elementwise):
    """Lay a fresh meta result out as PyTorch's would be: in the memory format a parameter
    names (``clone``, ``to``, ``contiguous``: preserve lays it as ``laid_like`` does, the
    CPU's copy), for a pointwise op as TensorIterator does (``_pointwise_layout``, as the
    dispatcher's), for another elementwise op in the order of its first operand of the
    result's shape (NumPy's order-K result on the CPU). Row-major otherwise."""
    from ember import _memory_format as M
    fmt = next((p for p in params if type(p) is M.memory_format), None)
    if fmt is None and not elementwise:
        return
    if fmt is None and op.name in _PRESERVING:
        fmt = M.preserve_format
    a = out._data
    if fmt is not None and fmt is not M.preserve_format:
        order = M.memory_order(fmt, a.ndim)
        if order is not None:
            _with_layout(out, M._order_strides(a.shape, order, a.itemsize), 0, False)
        return
    if all(type(t._data) is not MetaArray or t._data.layout is None
           for t in flat if isinstance(t, Tensor)):
        return                          # (row-major operands: a row-major result)
    if fmt is None and op.pointwise:
        from ember.ops._pointwise_layout import result_layout
        arrays = [i._data if isinstance(i, Tensor) else i for i in inputs]
        strides = result_layout(a.shape, a.itemsize, arrays, MetaArray, op.pointwise)
        if strides is not None:
            _with_layout(out, strides, 0, False)
        return
    x = next((t for t in flat if isinstance(t, Tensor) and type(t._data) is MetaArray
              and t._data.shape == a.shape), None)
    if x is None or x._data.layout is None:
        return
    if fmt is not None:
        strides = M.preserved_strides(x._data, a.itemsize)
        if strides is not None:
            _with_layout(out, strides, 0, False)
        return
    if not a.size:
        return
    order = M._stride_order(a.shape, x._data.strides)
    if order != tuple(range(a.ndim)):
        _with_layout(out, M._order_strides(a.shape, order, a.itemsize), 0, False)


def _with_layout(t, strides, offset, view=True):
    """Meta tensor ``t`` with byte ``strides`` and byte ``offset``: a view's layout (which
    also tells a reshape's view from its copy), or a fresh result's (row-major: none)."""
    a = t._data
    if not view and tuple(strides) == a.strides and offset == 0:
        return t
    a.layout = (tuple(strides), offset)
    return t


def _meta_result(t, shape):
    return _make(MetaArray(t.shape if shape is None else shape, t._data.dtype))


def _broadcast(op, flat):
    shapes = [x.shape for x in flat if isinstance(x, Tensor)]
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        from ember.ops._registry import broadcast_message
        raise RuntimeError(broadcast_message(shapes)) from None


def check_devices(flat, expected=None):
    """PyTorch's error for a meta tensor meeting a tensor of another device (CPU 0-dim ones
    join, as scalars, as they join GPU ops)."""
    tensors = [x for x in flat if isinstance(x, Tensor)]
    if expected is None:
        expected = next((x for x in tensors if x.ndim or x.is_meta), tensors[0])
    want = expected.device
    for x in tensors:
        if x.device != want and not (x.device.type == "cpu" and x.ndim == 0):
            raise RuntimeError(f"Tensor on device {x.device} is not on the expected device "
                               f"{want}!")


def _has_meta_mask(indices):
    return any(isinstance(i, Tensor) and i.is_meta and i.dtype is bool_ for i in indices)


def _refuse_value_shaped(op, inputs, params):
    """Raise PyTorch's NotImplementedError for an op whose result's shape depends on values."""
    nonzero = op.name in ("nonzero", "argwhere") or op.name == "where" and inputs[1] is None \
        or op.name == "_index" and _has_meta_mask(params[0])
    if nonzero:
        raise NotImplementedError(
            "The register_meta function for torch.nonzero() raises unimplemented by default, "
            "as a correct data-independent implementation does not exist.")
    if op.name in _VALUE_SHAPED or op.name == "nn.functional.one_hot" and params[0] == -1:
        raise NotImplementedError(
            f"aten::{op.name}: attempted to run this operator with Meta tensors, but the shape "
            f"of its result depends on the values, which meta tensors do not have")
