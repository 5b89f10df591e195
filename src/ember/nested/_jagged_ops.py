"""The ``__torch_function__`` table of jagged tensors (NOTE [Jagged tensors] in _jagged.py):
elementwise ops, ``linear``/``matmul``/``bmm``, normalizations, reductions (sums, extremes
and their indices), softmaxes, ``transpose``, ``cat`` and scaled dot-product attention, each
run with ember ops on the values (or the components). Views are in _jagged_views.py."""

import ember
from ember._tensor import Tensor, _wrap_dim
from ember._values_backed import op_name, registrar
from ember.nested._jagged import JaggedTensor, components, jagged, same_raggedness

__all__ = ["dispatch", "to_padded", "from_components"]

HANDLERS = {}
_handles = registrar(HANDLERS)


def dispatch(func, args, kwargs):
    """Run ember function ``func`` on arguments among which is a jagged tensor."""
    name = op_name(func)
    handler = HANDLERS.get(name)
    if handler is None and (name.rstrip("_") in _elementwise_names() or
                            name.rstrip("_") == "masked_fill"):
        handler = _elementwise(func, name.rstrip("_"))
    if handler is None and name in _ON_VALUES:
        handler = _on_values(func, _ON_VALUES[name])
    if handler is None:
        if name in ("__get__", "__set__"):      # a mode's property access
            return func(*args, **kwargs)
        raise NotImplementedError(_unsupported(name))
    out = handler(*args, **kwargs)
    node = _NODE_NAMES.get(name)
    if node is not None:
        _name_nodes(out, node(args, kwargs) if callable(node) else node, args)
    return out


def _dim_given(args, kwargs):
    return len(args) > 1 and args[1] is not None or kwargs.get("dim") is not None


# PyTorch's names for the backward nodes of the ops that its jagged tensors run with their own
# autograd formulas (or as one composite op), where ember's ops on the values name others
_VIEW_NODE = "ViewBackwardAutogradNestedTensor0"
_NODE_NAMES = {
    "view": _VIEW_NODE, "reshape": _VIEW_NODE, "unflatten": _VIEW_NODE, "flatten": _VIEW_NODE,
    "squeeze": "SqueezeBackwardAutogradNestedTensor0",
    "split_with_sizes": "SplitWithSizesBackwardAutogradNestedTensor0",
    "split": lambda args, kwargs: "SplitWithSizesBackwardAutogradNestedTensor0" if isinstance(
        args[1] if len(args) > 1 else kwargs.get("split_size_or_sections",
                                                 kwargs.get("split_size")),
        (list, tuple)) else None,
    "chunk": "ChunkBackwardAutogradNestedTensor0",
    "select": "SelectBackwardAutogradNestedTensor0",
    "sum": lambda args, kwargs: f"SumBackwardAutogradNestedTensor{int(_dim_given(args, kwargs))}",
    "mean": lambda args, kwargs: "MeanBackward1" if _dim_given(args, kwargs) else
    "MeanBackwardAutogradNestedTensor0",
    "amax": "AmaxBackward0", "amin": "AminBackward0", "softmax": "SoftmaxBackward0",
    # (PyTorch's attention of jagged tensors ends by transposing its result back)
    "scaled_dot_product_attention": "TransposeBackward0",
    "nn.functional.scaled_dot_product_attention": "TransposeBackward0",
    "linear": "LinearBackward0", "nn.functional.linear": "LinearBackward0",
    "matmul": "MatmulBackward0", "bmm": "BmmBackward0"}


def _name_nodes(out, name, args):
    """Rename the backward nodes the op made for ``out`` (not those of its inputs it returns)."""
    from ember.ops._recording import rename_node
    if name is None:
        return
    seen = {id(a._v._grad_fn) for a in args if isinstance(a, JaggedTensor)}
    for t in out if isinstance(out, (tuple, list)) else (out,):
        t = t._v if isinstance(t, JaggedTensor) else t
        if isinstance(t, Tensor) and t._grad_fn is not None and id(t._grad_fn) not in seen:
            rename_node(t, name)


# the ATen overloads PyTorch names for the ops its jagged tensors lack, where they are not
# ``aten.<name>.default``
_ATEN_OVERLOADS = {
    "std": "std.correction", "var": "var.correction", "std_mean": "std_mean.correction",
    "var_mean": "var_mean.correction", "norm": "norm.ScalarOpt_dim",
    "linalg.norm": "linalg_vector_norm.default",
    "linalg.matrix_norm": "linalg_vector_norm.default", "_median_dim": "median.dim",
    "_nanmedian_dim": "nanmedian.dim", "argsort": "sort.default", "msort": "sort.default",
    "nanmean": "nansum.default", "quantile": "sort.default", "unique": "_unique2.default"}


def _unsupported(name):
    """PyTorch's message for the op ``name`` that jagged tensors do not support: the ATen
    overload it reached (ember's own words for a function that is not a registered op)."""
    from ember.ops._registry import REGISTRY
    overload = _ATEN_OVERLOADS.get(name)
    if overload is None and name in REGISTRY and not name.startswith("_"):
        namespace, _, short = name.rpartition(".")
        if namespace in ("", "linalg", "special"):    # fft reaches _fft_r2c, _fft_c2c...
            overload = f"{namespace}_{short}.default" if namespace else f"{name}.default"
    if overload is None:
        return f"ember.nested: {name} is not supported on a jagged nested tensor"
    return f"aten.{overload}"


def _elementwise_names():
    from ember.func._batching.elementwise import ELEMENTWISE
    return ELEMENTWISE


def from_components(parts, ragged_idx, like=None):
    """A jagged tensor of ``parts`` (components ragged in dim ``ragged_idx - 1``): new
    offsets, or ``like``'s when the lengths are its own."""
    axis = ragged_idx - 1
    values = ember.cat([p.movedim(axis, 0) for p in parts])
    if like is not None and like._lengths is None:
        return like._with_values(values, ragged_idx)
    lengths = [p.shape[axis] for p in parts]
    offsets = ember.tensor([0] + lengths, device=values.device).cumsum(0)
    return jagged(values, offsets, None, ragged_idx, min(lengths), max(lengths))


def _contiguous_values(nt, what):
    if nt._lengths is not None:
        raise RuntimeError(f"{what}: not supported for nested tensors with holes")
    return nt._v


# ----- elementwise ---------------------------------------------------------------------------

def _shape_text(t, both_jagged):
    return "(" + ", ".join(map(str, t.shape)) + ")" if both_jagged else repr(t.shape)


def _dense_on_values(nt, dense, name, first=False):
    """``dense`` (an operand of an elementwise op with ``nt``, before it when ``first``) shaped
    to the values: it may align with the dims after the ragged one (size 1 along it), or have
    all of nt's dims."""
    def mismatch():
        _mismatch(name, *((dense, nt) if first else (nt, dense)))

    if not isinstance(dense, Tensor) or dense.dim() == 0:
        return dense
    if dense.dim() > nt.dim():
        raise NotImplementedError("NYI: broadcasting NT with T with larger dim")
    if nt._ragged_idx != 1:
        raise NotImplementedError("ember.nested: a dense operand of an elementwise op with a "
                                  "transposed jagged tensor is not supported")
    lead = nt.dim() - dense.dim()
    if lead >= 2:                       # aligned with the dims after the ragged one
        return dense
    if lead == 1:
        if dense.shape[0] != 1:         # (the ragged dim)
            mismatch()
        return dense.squeeze(0)
    # as many dims as nt: one row per batch element (or one for all), and along the ragged
    # dim one entry for all or the entries of a padded batch (a component takes its first ones;
    # PyTorch wants a padded batch of them all)
    if (dense.shape[0], dense.shape[1]) == (1, 1):
        return dense.squeeze(0)
    if dense.shape[0] != nt.shape[0] or nt._lengths is not None:
        mismatch()
    lengths = nt._offsets.diff().long()
    padded = dense.expand(nt.shape[0], padded_length(nt), *dense.shape[2:])
    batch = ember.repeat_interleave(ember.arange(nt.shape[0], device=nt.device), lengths)
    position = ember.arange(batch.shape[0], device=nt.device) - nt._offsets[batch]
    return padded[batch, position]


# the aten overload PyTorch names in the message (``.Tensor`` for the ops not listed)
_OVERLOAD = dict.fromkeys(("maximum", "minimum", "fmax", "fmin", "atan2", "hypot", "logaddexp",
                           "logaddexp2", "logical_and", "logical_or", "logical_xor",
                           "nextafter", "heaviside"), "default") | {"masked_fill": "Scalar",
                                                                      "pow": "Tensor_Tensor"}


def _mismatch(name, a, b):
    both = isinstance(a, JaggedTensor) and isinstance(b, JaggedTensor)  # (worded apart)
    overload = _OVERLOAD.get(name, "Tensor")
    raise RuntimeError(f"cannot call binary pointwise function {name}.{overload} with inputs of "
                       f"shapes {_shape_text(a, both)} and {_shape_text(b, both)}")


def _elementwise(func, name):
    def run(*args, **kwargs):
        nts = [a for a in args if isinstance(a, JaggedTensor)]
        first = nts[0]
        for other in nts[1:]:
            if not same_raggedness(other, first) and name == "where":
                at = next(i for i, a in enumerate(args) if a is other)
                r = first._ragged_idx
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {other.shape[r]} at "
                    f"{r - first.dim()}! Mismatching argument at index {at} had "
                    f"{other.shape!r}; but expected shape should be broadcastable to "
                    f"{list(first.shape)}")
            if not same_raggedness(other, first):
                _mismatch(name, first, other)
        at = next(i for i, a in enumerate(args) if a is first)
        operands = [a._v if isinstance(a, JaggedTensor) else
                    _dense_on_values(first, a, name, i < at) for i, a in enumerate(args)]
        out = func(*operands, **kwargs)
        if isinstance(out, Tensor) and out is operands[0] and isinstance(args[0], JaggedTensor):
            return args[0]                                  # in place
        return first._with_values(out)
    return run


# functions that take the values for the jagged tensor at this position (the like-factories
# make jagged results; embedding's indices come second)
_ON_VALUES = dict.fromkeys(("zeros_like", "ones_like",
                            "empty_like", "full_like", "rand_like", "randn_like",
                            "randint_like", "fill_"), 0) | {"embedding": 1}


def _on_values(func, position):
    def run(*args, **kwargs):
        nt = args[position]
        if not isinstance(nt, JaggedTensor):
            raise NotImplementedError(f"ember.nested: {op_name(func)} takes a jagged tensor "
                                      f"as argument {position} only")
        args = args[:position] + (nt._v,) + args[position + 1:]
        out = func(*args, **kwargs)
        return nt if out is nt._v else nt._with_values(out)     # (in place)
    return run


@_handles("dropout", "nn.functional.dropout")
def _dropout(input, p=0.5, training=True, inplace=False):
    """Dropout of a jagged tensor's values; PyTorch's refuses to draw a mask in place (its
    jagged tensors lack ``bernoulli_``)."""
    if not isinstance(input, JaggedTensor):
        raise NotImplementedError("ember.nested: dropout takes a jagged tensor as argument 0 "
                                  "only")
    _check_no_holes("native_dropout_default(self: jt, float: any, train: any?)", "self", input)
    if inplace and training and 0 < p < 1:
        raise NotImplementedError("aten.bernoulli_.float")
    out = ember.nn.functional.dropout(input._v, p, training, inplace)
    if out is input._v and not inplace:
        # (PyTorch's jagged dropout is always native_dropout: a copy, on the graph)
        from ember.ops._recording import rename_node
        out = rename_node(input._v.clone(), "NativeDropoutBackward0")
    return input if out is input._v else input._with_values(out)


@_handles("copy_")
def _copy(input, src, non_blocking=False):
    if not isinstance(input, JaggedTensor) or not isinstance(src, JaggedTensor):
        raise ValueError("NestedTensor copy_default(self: jt_all, src: jt_all, non_blocking: "
                         "any?): expected src to be a jagged layout NestedTensor")
    input._v.copy_(src._v, non_blocking)
    return input


@_handles("cat", "concat", "concatenate")
def _cat(tensors, dim=0, **kwargs):
    first = tensors[0]
    d = _wrap_dim(dim, first.dim())
    if isinstance(first, JaggedTensor) and d in (0, first._ragged_idx):
        where = "dim=0" if d == 0 else "ragged dim"
        raise RuntimeError(f"cat(): not supported for NestedTensor on {where}")
    # (PyTorch joins the values of jagged tensors of the same total length and keeps the
    # first one's offsets, as here)
    if not all(isinstance(t, JaggedTensor) and t._ragged_idx == first._ragged_idx
               for t in tensors):
        raise NotImplementedError("ember.nested: cat of jagged tensors supports jagged "
                                  "tensors of one ragged dim only")
    values_dim = d - 1 if d > first._ragged_idx else d
    return first._with_values(ember.cat([t._v for t in tensors], values_dim, **kwargs))


# ----- products --------------------------------------------------------------------------

def _check_no_holes(signature, arg, nt):
    if nt._lengths is not None:
        raise ValueError(f"NestedTensor {signature}: expected {arg} to be a contiguous jagged "
                         f"layout NestedTensor")


def _last_dim_dense(nt, what):
    if nt._ragged_idx == nt.dim() - 1:
        raise RuntimeError(f"{what}: the last dim of a jagged input must not be the ragged one")


@_handles("linear", "nn.functional.linear")
def _linear(input, weight, bias=None):
    _check_no_holes("linear_default(input: jt, weight: t, bias: t?)", "input", input)
    if input._ragged_idx == input.dim() - 1 and input._v.shape[-1] != weight.shape[-1]:
        # (PyTorch multiplies the values and says they do not fit; where they happen to fit
        # its result is no jagged tensor's, so ember refuses below)
        ember.nn.functional.linear(input._v, weight, bias)
    _last_dim_dense(input, "linear")
    return input._with_values(ember.nn.functional.linear(input._v, weight, bias))


@_handles("bmm")
def _bmm(input, other):
    if not isinstance(input, JaggedTensor):
        raise NotImplementedError("ember.nested: bmm supports a 3-D jagged tensor times a "
                                  "3-D dense tensor only")
    if input.dim() != 3:
        raise ValueError("bmm(): input must be 3D")
    if isinstance(other, JaggedTensor):
        _matmul_refused(input, other)
    if other.dim() != 3:
        raise ValueError("bmm(): mat2 must be 3D")
    if other.shape[0] != input.shape[0]:
        raise RuntimeError(f"The size of tensor a ({input.shape[0]}) must match the size of "
                           f"tensor b ({other.shape[0]}) at non-singleton dimension 0")
    if input._ragged_idx == 1 and other.shape[1] != input.shape[2]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{input.shape[0]}, {input.shape[2]}] but got: "
                           f"[{other.shape[0]}, {other.shape[1]}].")
    return _batched_matmul(input, other)


def _batched_matmul(input, other):
    """Each component of ``input`` times its own matrix of the dense ``other``."""
    _last_dim_dense(input, "matmul")
    parts = [ember.matmul(p, w) for p, w in zip(components(input), other.unbind(0))]
    return from_components(parts, input._ragged_idx, like=input)


def _same_structure_batch(input, other):
    """Whether two jagged tensors multiply as batches of matrices (same offsets and ragged
    dim, which lies before the two matrix dims)."""
    return (isinstance(other, JaggedTensor) and same_raggedness(other, input)
            and input._ragged_idx == 1 and other.dim() == input.dim()
            and input.dim() > 3)


@_handles("matmul")
def _matmul(input, other):
    if not isinstance(input, JaggedTensor):
        raise NotImplementedError("ember.nested: matmul supports a jagged tensor on the "
                                  "left only")
    if _same_structure_batch(input, other):
        return input._with_values(ember.matmul(input._v, other._v))
    ragged_last = input._ragged_idx == input.dim() - 1
    if not isinstance(other, JaggedTensor) and other.dim() == 2 and not ragged_last:
        return input._with_values(ember.matmul(input._v, other))
    if not isinstance(other, JaggedTensor) and other.dim() == input.dim() == 3:
        return _batched_matmul(input, other)
    _matmul_refused(input, other)


def _matmul_refused(input, other):
    raise RuntimeError(f"matmul(): not supported between inputs of shapes "
                       f"{_shape_text(input, True)} and {other.shape!r}")


def _check_norm_dims(name, input, normalized_shape):
    if name == "layer_norm" and input.dim() <= 2:
        raise RuntimeError("layer_norm(): not supported for NestedTensor objects with 2 or "
                           "fewer dimensions")
    if len(normalized_shape) < input.dim() - input._ragged_idx:
        return
    if name == "rms_norm":              # (PyTorch's two functions word it apart)
        raise ValueError("rms_norm(): Normalization over the ragged dim not supported for "
                         "nested tensors")
    raise RuntimeError(f"{name}(): normalizing over ragged or batch dims is not supported "
                       f"for NestedTensor")


@_handles("native_layer_norm")
def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    _check_norm_dims("layer_norm", input, normalized_shape)
    parts = ember.native_layer_norm(input._v, normalized_shape, weight, bias, eps)
    return tuple(input._with_values(p) for p in parts)


@_handles("_fused_rms_norm")
def _rms_norm(input, normalized_shape, weight=None, eps=None):
    from ember.ops.normalization import _fused_rms_norm
    _check_norm_dims("rms_norm", input, normalized_shape)
    parts = _fused_rms_norm(input._v, normalized_shape, weight, eps)
    return tuple(input._with_values(p) for p in parts)


# ----- reductions ----------------------------------------------------------------------------

def _dims(nt, dim):
    if dim is None or dim == ():         # (amax's default: all dims)
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return sorted({_wrap_dim(d, nt.dim()) for d in dims})


def _one_or_all(reduce):
    """``reduce`` taking a list of dims (as one int when it is one: prod's dim is an int)."""
    def run(x, dims=None, **kwargs):
        if dims is None:
            return reduce(x, **kwargs)
        return reduce(x, dims[0] if len(dims) == 1 else dims, **kwargs)
    return run


def _check_ragged_reduce(name, input):
    if input._lengths is not None:
        raise RuntimeError(f"{name}(): reducing across the ragged dimension is not supported "
                           f"for non-contiguous nested tensors with holes")


def _reduce(name, input, dim, keepdim, dtype):
    reduce = _one_or_all(getattr(ember, name))
    dims = _dims(input, dim)
    r = input._ragged_idx
    extra = {} if dtype is None else {"dtype": dtype}
    if dims is None or dims == list(range(input.dim())):
        if dims is not None:
            _check_ragged_reduce(name, input)
        values = _contiguous_values(input, name)
        out = reduce(values, **extra)
        return out.reshape((1,) * input.dim()) if keepdim else out
    if 0 in dims and r not in dims:
        raise RuntimeError(f"{name}(): reducing along the batch dimension but not the ragged "
                           f"dimension is not supported for nested tensors")
    if 0 in dims:                       # batch and ragged: over the values' first dim
        rest = [d - 1 for d in dims if d not in (0, r)]
        _check_ragged_reduce(name, input)
        out = reduce(input._v, [0] + rest, keepdim=keepdim, **extra)
        return out.movedim(0, r - 1).unsqueeze(0) if keepdim else out
    if r in dims:
        if len(dims) > 1:
            raise RuntimeError(f"{name}(): reducing along a ragged and non-batch dimension is "
                               f"not supported for nested tensors")
        _check_ragged_reduce(name, input)
        parts = [reduce(p, [r - 1], keepdim=keepdim, **extra) for p in components(input)]
        return ember.stack(parts)
    value_dims = [d - 1 if d > r else d for d in dims]
    out = reduce(input._v, value_dims, keepdim=keepdim, **extra)
    return input._with_values(out, r if keepdim else r - sum(d < r for d in dims))


@_handles("sum")
def _sum(input, dim=None, keepdim=False, *, dtype=None):
    return _reduce("sum", input, dim, keepdim, dtype)


@_handles("mean")
def _mean(input, dim=None, keepdim=False, *, dtype=None):
    return _reduce("mean", input, dim, keepdim, dtype)


def _plain_reduce(name):
    def run(input, dim=None, keepdim=False, *, dtype=None):
        return _reduce(name, input, dim, keepdim, dtype)
    return run


for _name in ("amax", "amin", "prod", "any", "all"):
    HANDLERS[_name] = _plain_reduce(_name)


def _extreme(name):
    """max/min over all elements, or (``_max_dim``) along one dim with the indices."""
    def everywhere(input):
        return getattr(ember, name)(_contiguous_values(input, name))

    def along(input, dim, keepdim=False):
        return _with_indices(name, input, dim, keepdim)
    return everywhere, along


def _with_indices(name, input, dim, keepdim):
    from ember.ops import return_types
    d = _wrap_dim(dim, input.dim())
    r = input._ragged_idx
    if d == 0:
        raise RuntimeError(f"{name}(): reducing along the batch dimension but not the ragged "
                           f"dimension is not supported for nested tensors")
    fn = getattr(ember, name)
    if d == r:
        _check_ragged_reduce(name, input)
        parts = [fn(p, r - 1, keepdim=keepdim) for p in components(input)]
        if name.startswith("arg"):
            return ember.stack(parts)
        return getattr(return_types, name)(*(ember.stack(list(p)) for p in zip(*parts)))
    out = fn(input._v, d - 1 if d > r else d, keepdim=keepdim)
    r = r if keepdim or d > r else r - 1
    if name.startswith("arg"):
        return input._with_values(out, r)
    return getattr(return_types, name)(*(input._with_values(p, r) for p in out))


HANDLERS["max"], HANDLERS["_max_dim"] = _extreme("max")
HANDLERS["min"], HANDLERS["_min_dim"] = _extreme("min")


def _arg_extreme(name):
    def run(input, dim=None, keepdim=False):
        if dim is None:
            return getattr(ember, name)(_contiguous_values(input, name))
        return _with_indices(name, input, dim, keepdim)
    return run


HANDLERS["argmax"] = _arg_extreme("argmax")
HANDLERS["argmin"] = _arg_extreme("argmin")


# ----- softmax, transpose, attention --------------------------------------------------------

def _softmax_like(name):
    def run(input, dim, dtype=None, *args, **kwargs):
        fn = getattr(ember, name)
        d = _wrap_dim(dim, input.dim())
        r = input._ragged_idx
        if d == 0:
            raise RuntimeError(f"{name}(): not supported when reducing across the batch "
                               f"dimension for NestedTensor")
        if d == r and name == "log_softmax":
            raise RuntimeError("log_softmax(): not supported when reducing along the ragged "
                               "dimension for NestedTensor")
        if d == r and input._lengths is not None:
            raise RuntimeError(f"{name}(): not supported where lengths is not None if reducing "
                               f"across the ragged dimension for NestedTensor")
        if d == r:
            return from_components([fn(p, r - 1, dtype=dtype) for p in components(input)],
                                   r, like=input)
        return input._with_values(fn(input._v, d - 1 if d > r else d, dtype=dtype))
    return run


HANDLERS["softmax"] = _softmax_like("softmax")
HANDLERS["log_softmax"] = _softmax_like("log_softmax")


@_handles("transpose", "swapaxes", "swapdims")
def _transpose(input, dim0, dim1):
    d0, d1 = sorted((_wrap_dim(dim0, input.dim()), _wrap_dim(dim1, input.dim())))
    r = input._ragged_idx
    if d0 == 0 and d1 != r:
        raise RuntimeError("transpose(): not supported for NestedTensor on dim=0")
    if d0 == 0:
        raise ValueError("Transpose is not supported on the batch dimension for jagged NT")
    if r in (d0, d1):                   # the ragged dim moves (or stays): the values keep it
        from ember.ops._recording import rename_node
        from ember.ops.conversion import _alias
        return input._with_values(rename_node(_alias(input._v), "TransposeBackward0"),
                                  r if d0 == d1 else d1 if r == d0 else d0)
    v0, v1 = (d - 1 if d > r else d for d in (d0, d1))
    return input._with_values(input._v.transpose(v0, v1))


@_handles("scaled_dot_product_attention", "nn.functional.scaled_dot_product_attention")
def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
          enable_gqa=False):
    if attn_mask is not None:
        raise NotImplementedError("ember.nested: scaled_dot_product_attention of jagged "
                                  "tensors takes no attn_mask")
    if is_causal or any(t._lengths is not None for t in (query, key, value)
                        if isinstance(t, JaggedTensor)):
        # (PyTorch's math fallback for jagged inputs takes neither; its fused kernels are
        # not on the CPU)
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found.")
    sdpa = ember.nn.functional.scaled_dot_product_attention
    parts = [sdpa(q, k, v, None, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
             for q, k, v in zip(*(components(t) for t in (query, key, value)))]
    return from_components(parts, query._ragged_idx, like=query)


# ----- padding -------------------------------------------------------------------------------

def padded_length(nt):
    """The length PyTorch pads ``nt``'s ragged dim to: the ``max_seqlen`` it was given or
    found when built from components, else the values' whole length along it."""
    if nt._max_seqlen is not None:
        return int(nt._max_seqlen)
    return nt._v.shape[nt._ragged_idx - 1]


def to_padded(nt, padding, output_size=None):
    """``nt``'s components padded with ``padding`` (or cut) to one length along the ragged
    dim: ``output_size``'s entry for it, else ``padded_length``."""
    if nt._lengths is not None:
        raise RuntimeError("to_padded_tensor(): not supported for nested tensors with holes")
    r = nt._ragged_idx
    target = padded_length(nt)
    if output_size is not None and len(output_size) > r:
        target = output_size[r]
    padded = []
    for part in components(nt):
        part = part.narrow(r - 1, 0, min(target, part.shape[r - 1]))
        pad = [0, 0] * (part.dim() - r) + [0, target - part.shape[r - 1]]
        padded.append(ember.nn.functional.pad(part, pad, value=padding))
    from ember.ops._recording import rename_node
    return rename_node(ember.stack(padded), "ToPaddedTensorBackward0")

