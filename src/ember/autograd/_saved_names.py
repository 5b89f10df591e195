"""``grad_fn._saved_<name>`` as PyTorch names and types them, and the names ``dir(grad_fn)``
lists.

A node records its op's inputs and parameters under ember's names (see ``OpNode``); PyTorch's
nodes expose what their formula saves, under the kernel's argument names (``linear``'s
AddmmBackward0 has ``mat1`` and ``mat2``, ``mm``'s ``self``), with sizes and strides of
tensors (``self_sym_sizes``), int lists as tuples (``sum``'s ``dim``) and int64 arguments
read back as unsigned (``dim=-1`` is 2**64 - 1). ``SAVED`` lists PyTorch's names for its most
used nodes; a node not in it lists what it saved under its op's names.
"""

import math

from ember._tensor import Tensor
from ember.autograd._saved_sizes import _SELF_SIZES, saved_self_sizes

__all__ = ["SAVED", "raw_key", "raw_transposed", "read_saved", "saved_dir", "wrapped_number"]

# node name -> the names PyTorch's node of that name exposes (torch 2.13, dir(grad_fn))
SAVED = {k: tuple(v.split()) for k, v in {
    "AbsBackward0": "self", "AddBackward0": "alpha",
    "AddmmBackward0": "alpha beta mat1 mat1_sym_sizes "
        "mat1_sym_strides mat2 mat2_sym_sizes mat2_sym_strides",
    "AmaxBackward0": "dim keepdim result self", "AminBackward0": "dim keepdim result self",
    "AvgPool2DBackward0": "ceil_mode count_include_pad divisor_override "
        "kernel_size padding self stride",
    "BinaryCrossEntropyBackward0": "reduction self target weight",
    "BinaryCrossEntropyWithLogitsBackward0": "pos_weight reduction self target weight",
    "BmmBackward0": "mat2 self", "CatBackward0": "dim", "ClampBackward1": "max min self",
    "CloneBackward0": "",
    "ConvolutionBackward0": "bias_sym_sizes_opt dilation groups input "
        "output_padding padding stride transposed weight",
    "CosBackward0": "self", "CumprodBackward0": "dim result self", "CumsumBackward0": "dim",
    "DivBackward0": "other self", "DotBackward0": "self tensor",
    "EluBackward0": "alpha input_scale scale self",
    "EmbeddingBackward0": "indices padding_idx scale_grad_by_freq sparse weight_sym_argsize_0",
    "ExpBackward0": "result", "ExpandBackward0": "self_sym_sizes",
    "GatherBackward0": "dim index self sparse_grad", "GeluBackward0": "approximate self",
    "HardtanhBackward0": "max_val min_val self",
    "HuberLossBackward0": "delta reduction self target",
    "IndexBackward0": "indices self_sym_sizes",
    "IndexSelectBackward0": "dim index self_sym_sizes",
    "LeakyReluBackward0": "negative_slope self", "LerpBackward0": "weight",
    "LinalgSvdBackward0": "S S_sym_argsize_minus_1 U Vh full_matrices",
    "LinalgVectorNormBackward0": "dim keepdim ord result self", "LogBackward0": "self",
    "LogSoftmaxBackward0": "dim result", "LogsumexpBackward0": "dim keepdim result self",
    "MaskedFillBackward0": "mask", "MaxBackward0": "dim indices keepdim self_sym_sizes",
    "MaxBackward1": "result self",
    "MaxPool2DWithIndicesBackward0": "ceil_mode dilation kernel_size padding result1 self stride",
    "MaximumBackward0": "other self", "MeanBackward0": "self_sym_numel self_sym_sizes",
    "MeanBackward1": "dim keepdim self_sym_numel self_sym_sizes",
    "MmBackward0": "mat2 mat2_sym_sizes mat2_sym_strides self self_sym_sizes self_sym_strides",
    "MseLossBackward0": "reduction self target", "MulBackward0": "other self",
    "MulBackward1": "other", "AddBackward1": "", "ErfBackward0": "self",
    "MvBackward0": "self vec",
    "NativeBatchNormBackward0": "eps input result1 result2 "
        "running_mean running_var training weight",
    "NativeGroupNormBackward0": "C HxW N eps group input result1 result2 weight",
    "NativeLayerNormBackward0": "bias input normalized_shape result1 result2 weight",
    "NegBackward0": "", "NotImplemented": "",
    "NllLossBackward0": "ignore_index reduction self target total_weight weight",
    "NllLoss2DBackward0": "ignore_index reduction self target total_weight weight",
    "PermuteBackward0": "dims", "PowBackward0": "exponent self",
    "PowBackward1": "exponent result self", "PowBackward2": "exponent result self",
    "ProdBackward0": "result self", "ReciprocalBackward0": "result", "ReluBackward0": "result",
    "RepeatBackward0": "repeats self_sym_sizes", "RsqrtBackward0": "result",
    "ScatterAddBackward0": "dim index", "ScatterBackward0": "dim index",
    "SelectBackward0": "dim index self_sym_sizes", "SigmoidBackward0": "result",
    "SiluBackward0": "self", "SinBackward0": "self",
    "SliceBackward0": "dim end self_sym_sizes start step",
    "SmoothL1LossBackward0": "beta reduction self target", "SoftmaxBackward0": "dim result",
    "SoftplusBackward0": "beta self threshold", "SortBackward0": "dim indices self_sym_sizes",
    "SplitBackward0": "dim self_sym_sizes split_size", "SqrtBackward0": "result",
    "SqueezeBackward1": "dim self_sym_sizes", "StackBackward0": "dim",
    "StdBackward0": "correction dim keepdim result self", "SubBackward0": "alpha",
    "SumBackward0": "self_sym_sizes", "SumBackward1": "dim keepdim self_sym_sizes",
    "TBackward0": "", "TanhBackward0": "result", "ToCopyBackward0": "",
    "TopkBackward0": "dim indices self_sym_sizes", "TransposeBackward0": "dim0 dim1",
    "TriuBackward0": "diagonal", "UnsafeViewBackward0": "self_sym_sizes",
    "UnsqueezeBackward0": "dim", "VarBackward0": "correction dim keepdim self",
    "ViewBackward0": "self_sym_sizes", "WhereBackward0": "condition",
    # value-and-index reductions along a dim: the indices and the input's sizes
    "MinBackward0": "dim indices keepdim self_sym_sizes",
    "KthvalueBackward0": "dim indices keepdim self_sym_sizes",
    "MedianBackward1": "dim indices keepdim self_sym_sizes",
    "ModeBackward0": "dim indices keepdim self_sym_sizes",
    "DiagEmbedBackward0": "dim1 dim2 offset",
    "DiagonalBackward0": "dim1 dim2 offset self_sym_sizes",
    "DiagonalBackward0_copy": "dim1 dim2 offset self_sym_sizes",
    "TraceBackward0": "self_sym_sizes", "RollBackward0": "dims shifts",
    "IndexAddBackward0": "alpha dim index source source_dim",
    "AddcmulBackward0": "tensor1 tensor2 value", "AddcdivBackward0": "tensor1 tensor2 value",
    "BaddbmmBackward0": "alpha batch1 batch2 beta", "AddmvBackward0": "alpha beta mat vec",
    "AdaptiveMaxPool2DBackward0": "result1 self", "AdaptiveAvgPool2DBackward0": "self",
    "UpsampleNearest1DBackward0": "output_size scales self_sym_sizes",
    "UpsampleNearest2DBackward0": "output_size scales_h scales_w self_sym_sizes",
    "UpsampleBilinear2DBackward0": "align_corners output_size scales_h scales_w self_sym_sizes",
    "UpsampleBicubic2DBackward0": "align_corners output_size scales_h scales_w self_sym_sizes",
    "ConstantPadNdBackward0": "pad", "ReflectionPad1DBackward0": "padding self",
    "ReflectionPad2DBackward0": "padding self", "ReplicationPad1DBackward0": "padding self",
    "ReplicationPad2DBackward0": "padding self", "MaskedFillBackward1": "mask",
    "SplitWithSizesBackward0": "dim self_sym_sizes split_sizes",
    "GridSampler2DBackward0": "align_corners grid input interpolation_mode padding_mode",
    "GridSampler3DBackward0": "align_corners grid input interpolation_mode padding_mode",
}.items()}

_MISSING = object()
_UNSIGNED = 1 << 64
# arguments PyTorch saves as int64 (or lists of them): negative ones read back unsigned
_INT64 = frozenset({"dim", "dim0", "dim1", "dims", "start", "end", "step", "index",
                    "ignore_index", "padding_idx", "diagonal", "split_size", "repeats",
                    "dim2", "offset", "shifts", "split_sizes", "source_dim", "pad"})
# per-spatial-dim arguments PyTorch saves as lists, however they were given
_SPATIAL = frozenset({"stride", "padding", "dilation", "kernel_size", "output_padding"})
# nodes whose ``dim`` PyTorch saves as a list (an int given is a list of one)
_DIM_LISTS = frozenset({"SumBackward1", "MeanBackward1", "VarBackward0", "StdBackward0",
                        "AmaxBackward0", "AminBackward0", "LogsumexpBackward0",
                        "LinalgVectorNormBackward0"})
_TRANSPOSING = frozenset({"_linear_addmm", "_linear_mm"})     # (their mat2 is weight.t())
_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}
_INT64_MAX = (1 << 63) - 1
# arguments PyTorch's node saves as numbers (no ``_raw_saved_``) where ember's op has tensors
_NUMBER_ARGS = frozenset({("ClampBackward1", "min"), ("ClampBackward1", "max")})


def saved_dir(node):
    """``dir(node)``: its class's attributes, with the ``_saved_<name>`` PyTorch's node has."""
    names = [a for a in object.__dir__(node) if not a.startswith("_saved")]
    saved = SAVED.get(type(node).__name__)
    if saved is None:
        saved = _own_names(node)
    elif not node._released:            # (no unpack hook runs for a listing)
        # a composite's node named after PyTorch's kernel (einsum's SumBackward1) lacks
        # some of that kernel's arguments
        saved = [n for n in saved if _answers(node, n)]
    raw = ["_raw_saved_" + n for n in saved if _raw_answers(node, n)]
    return sorted(names + ["_saved_" + n for n in saved] + raw)


def raw_key(node, key):
    """The op's argument behind PyTorch's saved tensor ``key`` (``linear``'s ``mat2``: its
    ``weight``, which PyTorch saves as ``weight.t()``: see ``raw_transposed``)."""
    kind = type(node).__name__
    saved = SAVED.get(kind)
    if saved is None or key not in saved:
        return key
    return _ALIASES.get((kind, key), {}).get(node.op.name, key)


def raw_transposed(node, key):
    """Whether PyTorch's saved tensor ``key`` is the ``t()`` of the op's argument."""
    return key == "mat2" and node.op.name in _TRANSPOSING


def wrapped_number(node, key, value):
    """Whether ``value``, the op's argument ``key``, is a number PyTorch's node saves as a
    0-dim tensor (``x * 2``'s ``other``); that tensor, or None."""
    if (type(node).__name__, key) in (("MulBackward0", "other"), ("DivBackward0", "other")) \
            and node.op.name in ("mul", "div") and isinstance(value, (int, float, complex)):
        from ember import bool as bool_, complex128, float64, int64, tensor
        return tensor(value, dtype=bool_ if isinstance(value, bool) else int64 if isinstance(
            value, int) else float64 if isinstance(value, float) else complex128)
    return None


def _raw_answers(node, key):
    """Whether ``node._raw_saved_<key>`` gives a SavedTensor (a saved tensor's name)."""
    from ember.autograd._raw_saved import raw_saved
    if (type(node).__name__, key) in _NUMBER_ARGS:
        return False
    try:
        raw_saved(node, key, "_raw_saved_" + key)
    except AttributeError:
        return False
    return True


def _answers(node, key):
    """Whether ``node._saved_<key>`` gives a value (freed tensors included)."""
    try:
        read_saved(node, key, "_saved_" + key)
    except AttributeError:
        return False
    except RuntimeError:
        pass
    return True


def _own_names(node):
    """The names a node outside ``SAVED`` answers to: its saved inputs, params and outputs."""
    op = node.op
    names = []
    if op.saves_inputs and node._versions is not None:
        names += ["self" if i == 0 else n for i, n in enumerate(op.input_names)]
    names += [n for n in op.param_names if n != "out"]
    if node.keeps_output():
        n_out = node.n_outputs
        names += ["result"] if n_out == 1 else [f"result{i}" for i in range(n_out)]
    return names


def read_saved(node, key, name):
    """``node._saved_<key>`` (``name``), as PyTorch's node gives it."""
    kind = type(node).__name__
    saved = SAVED.get(kind)
    if saved is None or key not in saved:
        return _as_torch(node, kind, key, node._lookup_saved(key, name))
    special = _SPECIAL.get((kind, key))
    value = _MISSING if special is None else special(node)
    if value is _MISSING:
        value = _derived(node, key, name)
    if value is _MISSING:
        value = node._lookup_saved(_ALIASES.get((kind, key), {}).get(node.op.name, key), name)
    return _as_torch(node, kind, key, value)


def _as_torch(node, kind, key, value):
    """A saved value typed as PyTorch's node gives it (lists as tuples, int64 unsigned)."""
    if key == "indices" and type(value) is not tuple and isinstance(value, tuple):
        return tuple(value)             # (a subscript's SubscriptIndices)
    if key == "reduction" and isinstance(value, str):
        return _REDUCTIONS[value]
    if key in _SPATIAL and kind in ("ConvolutionBackward0", "AvgPool2DBackward0",
                                    "MaxPool2DWithIndicesBackward0"):
        if value is None:               # (a pooling's stride left to its kernel size)
            return ()
        if isinstance(value, int):
            value = (value,) * (len(node._in_meta[0][0]) - 2)
        return tuple(value)
    if key == "dim" and kind in _DIM_LISTS and isinstance(value, int):
        value = (value,)
    if key in ("dims", "shifts") and kind == "RollBackward0" and isinstance(value, int):
        value = (value,)
    if key in _INT64:
        if isinstance(value, int) and not isinstance(value, bool):
            return value % _UNSIGNED
        if isinstance(value, (tuple, list)):
            return tuple(v % _UNSIGNED if isinstance(v, int) else v for v in value)
    if isinstance(value, list) and key in ("normalized_shape", "dims", "repeats", "pad",
                                            "padding", "split_sizes"):
        return tuple(value)
    return value


def _derived(node, key, name):
    """``<arg>_sym_sizes``, ``_sym_strides``, ``_sym_numel``, ``_sym_argsize_<d>`` of a
    saved argument: its shape's, read from the input's metadata where the node kept it."""
    base, _, what = key.partition("_sym_")
    if not what:
        return _MISSING
    if key == "self_sym_sizes" and type(node).__name__ in _SELF_SIZES:
        sizes = saved_self_sizes(node)  # (None for a composite's node: none saved)
        return _MISSING if sizes is None else sizes
    shape = _input_shape(node, base)
    if what == "strides":
        if node._released is not True:
            t = read_saved(node, base, name)
            return tuple(t.stride()) if isinstance(t, Tensor) else _MISSING
        if shape is None:
            return _MISSING
        # freed: the strides of the row-major input (of its t() view, for a transposed one)
        if base == "mat2" and node.op.name in _TRANSPOSING:
            return _row_major(shape[::-1])[::-1]
        return _row_major(shape)
    if shape is None:
        t = read_saved(node, base, name)
        if not isinstance(t, Tensor):
            return _MISSING
        shape = tuple(t.shape)
    if what == "sizes":
        return tuple(shape)
    if what == "numel":
        return math.prod(shape)
    if what.startswith("argsize_"):       # (argsize_0, argsize_minus_1)
        return shape[int(what[8:].replace("minus_", "-"))]
    return _MISSING


def _row_major(shape):
    return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))


def _input_shape(node, key):
    """The shape of the input PyTorch's node names ``key``, from the node's metadata."""
    op = node.op
    kind = type(node).__name__
    key = _ALIASES.get((kind, key), {}).get(op.name, key)
    if key in op.input_names:
        index = op.input_names.index(key)
    elif key == "self" and op.input_names:
        index = 0
    else:
        return None
    if not node._in_meta or index >= len(node._in_meta) or node._in_meta[index] is None:
        return None
    shape = tuple(node._in_meta[index][0])
    return shape[::-1] if index in op.transposed_inputs else shape


def _transposed(key):
    """A reader of the input ``key`` as the kernel read it, through ``t()``."""
    def read(node):
        t = node._lookup_saved(key, "_saved_" + key)
        return t.t() if isinstance(t, Tensor) else t
    return read


def _number_operand(node):
    """``other`` of a product or quotient by a number: PyTorch wraps it in a 0-dim tensor."""
    value = node._lookup_saved("other", "_saved_other")
    wrapped = wrapped_number(node, "other", value)
    return value if wrapped is None else wrapped


def _masked_scale(node):
    """Dropout's ``other``: the mask times the scale, in the input's dtype."""
    mask = node._lookup_saved("mask", "_saved_other")
    from ember._dtype import FROM_NUMPY
    return mask.to(FROM_NUMPY[node._in_meta[0][1]]) * node._params[0]


def _column(node):
    """``outer``'s ``self``: its first operand as a column, as PyTorch multiplies it."""
    t = node._lookup_saved("input", "_saved_self")
    return t.unsqueeze(-1) if isinstance(t, Tensor) else t


def _selu(name):
    from ember.ops import activations_smooth
    return getattr(activations_smooth, name)


def _rms_normalized(node):
    """rms_norm's ``self``: the normalized input PyTorch's composite multiplies by the
    weight (the input times the kept reciprocal root mean square)."""
    x = node._lookup_saved("input", "_saved_self")
    rstd = node._lookup_saved("result1", "_saved_self")
    return (x * rstd).to(x.dtype)


def _correction(node):
    """var/std's ``correction``: None for a call given neither dim, unbiased nor correction
    (PyTorch's overload without them), else the correction the call used."""
    unbiased, correction = node._lookup_saved("unbiased", ""), node._lookup_saved(
        "correction", "")
    if correction is not None:
        return correction
    if unbiased is None and node._lookup_saved("dim", "") is None:
        return None
    return 0 if unbiased is False else 1


def _norm_ord(node):
    p = node._lookup_saved("p", "_saved_ord") if "p" in node.op.param_names else \
        node._lookup_saved("ord", "_saved_ord")
    return 2 if p is None or p == "fro" else p


def _slice_part(node):
    """(dim, slice or index) of a basic-indexing node's key: its one non-trivial entry."""
    key = node._params[0]
    if not isinstance(key, tuple):
        key = (key,)
    for dim, part in enumerate(key):
        if part is not Ellipsis and part != slice(None):
            return dim, part
    return 0, key[0] if key else slice(None)


def _narrow_field(node, field):
    """``narrow``'s slice as PyTorch's SliceBackward0 keeps it (its start wrapped)."""
    dim, start, length = node._params
    start = int(start)
    if start < 0:
        start += node._in_meta[0][0][dim]
    return {"dim": dim, "start": start, "stop": start + int(length), "step": 1}[field]


def _slice_field(field):
    def read(node):
        if node.op.name == "narrow":
            return _narrow_field(node, field)
        if node.op.name != "_getitem_slice":
            return _MISSING
        dim, part = _slice_part(node)
        if field == "dim":
            return dim
        value = getattr(part, field)
        return value if value is not None else {"start": 0, "stop": _INT64_MAX, "step": 1}[field]
    return read


def _select_field(field):
    def read(node):
        if node.op.name != "_getitem_select":
            return _MISSING
        dim, part = _slice_part(node)
        return dim if field == "dim" else part
    return read


def _split_size(node):
    params = dict(zip(node.op.param_names, node._params))
    if "chunks" in params:
        size = node._in_meta[0][0][params["dim"]]
        return -(-size // params["chunks"])
    return params.get("split_size_or_sections", _MISSING)


def _total_weight(node):
    """The sum of the weights of the targets counted (their number, without ``weight``); 0
    unreduced, where PyTorch's kernel sums none. The forward keeps it (the last of its kept
    values) where it could."""
    if node._kept is not None:
        return node._unpack_kept()[-1]
    target = node._lookup_saved("target", "_saved_target")
    weight = node._lookup_saved("weight", "_saved_weight")
    params = dict(zip(node.op.param_names, node._params))
    ignore = params.get("ignore_index", -100)
    counted = target != ignore
    dtype = node._in_meta[0][1]
    from ember._dtype import FROM_NUMPY
    from ember.ops._loss_common import reduction_of
    if reduction_of(params.get("size_average"), params.get("reduce"),
                    params.get("reduction", "mean"), emit_warning=False) == "none":
        from ember import zeros
        return zeros((), dtype=FROM_NUMPY[dtype] if weight is None else weight.dtype)
    if weight is None:
        return counted.sum().to(FROM_NUMPY[dtype])
    return (weight[target.clamp(min=0)] * counted).sum().detach()


def _nll_self(node):
    """nll_loss's ``self``: its input; cross_entropy's, the log-softmax PyTorch's nll_loss
    reads, from the ``exp(input - shift)`` the forward kept (NOTE [Kept values] in
    ops/_registry.py; an entry that underflowed to 0 reads -inf) or from the saved input."""
    x = node._lookup_saved("self", "_saved_self")
    if node.op.name == "nn.functional.cross_entropy":
        kept = node._unpack_kept()
        if kept is not None:
            e = kept[0]
            dim = 1 if e.ndim > 1 else 0
            x = e.log() - e.sum(dim, keepdim=True).log()
        elif isinstance(x, Tensor):
            x = x.log_softmax(1 if x.ndim > 1 else 0)
    return _as_nll2d(x, 1) if type(node).__name__ == "NllLoss2DBackward0" else x


def _as_nll2d(t, class_dims):
    """A saved input (``class_dims`` 1) or target (0) of 3 or 5+ dims as nll_loss2d reads
    it: (N, C, 1, the rest), (N, 1, the rest)."""
    if not isinstance(t, Tensor) or t.ndim - class_dims in (1, 3):
        return t
    return t.reshape(*t.shape[:1 + class_dims], 1, -1)


def _param(node, name, default=_MISSING):
    """The op's parameter ``name`` as the call gave it."""
    params = dict(zip(node.op.param_names, node._params))
    return params.get(name, default)


def _diag_field(field, dims):
    """``diag``'s node fields: its ``diagonal`` is the offset, between ``dims`` (a vector's
    DiagEmbedBackward0: the last two; a matrix's DiagonalBackward0_copy: 0 and 1)."""
    def read(node):
        if node.op.name != "diag":
            return _MISSING
        return {"offset": _param(node, "diagonal", 0), "dim1": dims[0], "dim2": dims[1]}[field]
    return read


def _upsample_sizes(node):
    """The output's spatial sizes (a ``size`` given, or the input's times each scale)."""
    shape = node._in_meta[0][0]
    n = len(shape) - 2
    size = _param(node, "size", None)
    if size is not None:
        return tuple(size) if isinstance(size, (tuple, list)) else (size,) * n
    scale = _param(node, "scale_factor", None)
    scales = tuple(scale) if isinstance(scale, (tuple, list)) else (scale,) * n
    return tuple(int(math.floor(d * float(s))) for d, s in zip(shape[2:], scales))


def _upsample_scale(axis):
    """A scale the kernel was given: the call's ``scale_factor`` unless recomputed."""
    def read(node):
        scale = _param(node, "scale_factor", None)
        if scale is None or _param(node, "recompute_scale_factor", None):
            return None
        n = len(node._in_meta[0][0]) - 2
        scales = tuple(scale) if isinstance(scale, (tuple, list)) else (scale,) * n
        return float(scales[axis])
    return read


# 1-d poolings: PyTorch pools the input unsqueezed at -2 and squeezes the result there
_POOL_1D = frozenset({"avg_pool1d", "max_pool1d_with_indices", "adaptive_avg_pool1d",
                      "adaptive_max_pool1d"})


def _pooled_2d_sizes(node):
    """A 1-d pooling's result as PyTorch's 2-d kernel gave it: a 1 inserted at -2."""
    name = node.op.short_name
    if name not in _POOL_1D:
        return _MISSING
    meta = getattr(node, "_out_meta", None) if node.n_outputs > 1 else None
    if meta is not None:
        shape = tuple(meta[0][0])
        return shape[:-1] + (1,) + shape[-1:]
    size = node._in_meta[0][0]
    if name == "adaptive_avg_pool1d":
        length = _first(_param(node, "output_size"))
    else:                               # (avg_pool1d: its output's length from its window)
        k = _first(_param(node, "kernel_size"))
        stride, pad = _first(_param(node, "stride") or k), _first(_param(node, "padding"))
        span = size[-1] + 2 * pad - k
        ceil = bool(_param(node, "ceil_mode"))
        length = (-(-span // stride) if ceil else span // stride) + 1
        if ceil and (length - 1) * stride >= size[-1] + pad:
            length -= 1
    return tuple(size[:-1]) + (1, length)


def _first(value):
    """An int given as itself or as a tuple of one."""
    return value[0] if isinstance(value, (tuple, list)) else value


_SPECIAL = {
    ("SqueezeBackward1", "dim"): lambda node: -2 if node.op.short_name in _POOL_1D
    else _MISSING,
    ("SqueezeBackward1", "self_sym_sizes"): _pooled_2d_sizes,
    ("UpsampleNearest1DBackward0", "scales"): _upsample_scale(0),
    ("UpsampleNearest2DBackward0", "scales_h"): _upsample_scale(0),
    ("UpsampleNearest2DBackward0", "scales_w"): _upsample_scale(1),
    ("UpsampleBilinear2DBackward0", "scales_h"): _upsample_scale(0),
    ("UpsampleBilinear2DBackward0", "scales_w"): _upsample_scale(1),
    ("UpsampleBicubic2DBackward0", "scales_h"): _upsample_scale(0),
    ("UpsampleBicubic2DBackward0", "scales_w"): _upsample_scale(1),
    ("UpsampleBilinear2DBackward0", "align_corners"): lambda node: bool(
        _param(node, "align_corners", False)),
    ("UpsampleBicubic2DBackward0", "align_corners"): lambda node: bool(
        _param(node, "align_corners", False)),
    ("UpsampleNearest1DBackward0", "output_size"): _upsample_sizes,
    ("UpsampleBicubic2DBackward0", "output_size"): _upsample_sizes,
    ("UpsampleBilinear2DBackward0", "output_size"): _upsample_sizes,
    ("UpsampleNearest2DBackward0", "output_size"): _upsample_sizes,
    ("ReplicationPad2DBackward0", "padding"): lambda node: tuple(_param(node, "pad")),
    ("ReplicationPad1DBackward0", "padding"): lambda node: tuple(_param(node, "pad")),
    ("ReflectionPad2DBackward0", "padding"): lambda node: tuple(_param(node, "pad")),
    ("ReflectionPad1DBackward0", "padding"): lambda node: tuple(_param(node, "pad")),
    ("PowBackward0", "exponent"): lambda node: 2 if node.op.short_name == "square"
    else _MISSING,
    ("DiagEmbedBackward0", "offset"): _diag_field("offset", (-2, -1)),
    ("DiagEmbedBackward0", "dim1"): _diag_field("dim1", (-2, -1)),
    ("DiagEmbedBackward0", "dim2"): _diag_field("dim2", (-2, -1)),
    ("DiagonalBackward0_copy", "offset"): _diag_field("offset", (0, 1)),
    ("DiagonalBackward0_copy", "dim1"): _diag_field("dim1", (0, 1)),
    ("DiagonalBackward0_copy", "dim2"): _diag_field("dim2", (0, 1)),
    ("IndexAddBackward0", "source_dim"): lambda node: len(_input_shape(node, "source")),
    ("ConstantPadNdBackward0", "pad"): lambda node: tuple(_param(node, "pad")),
    ("SplitWithSizesBackward0", "split_sizes"): lambda node: tuple(
        _param(node, "split_size_or_sections")),
    ("AddmmBackward0", "mat2"): lambda node: _transposed("weight")(node)
    if node.op.name == "_linear_addmm" else _MISSING,
    ("MmBackward0", "mat2"): lambda node: _transposed("weight")(node)
    if node.op.name == "_linear_mm" else _MISSING,
    ("AddmmBackward0", "alpha"): lambda node: 1 if node.op.name == "_linear_addmm" else _MISSING,
    ("AddmmBackward0", "beta"): lambda node: 1 if node.op.name == "_linear_addmm" else _MISSING,
    ("EluBackward0", "alpha"): lambda node: _selu("_SELU_ALPHA")
    if node.op.short_name == "selu" else _MISSING,
    ("EluBackward0", "scale"): lambda node: 1 if node.op.short_name == "elu"
    else _selu("_SELU_SCALE") if node.op.short_name == "selu" else _MISSING,
    ("EluBackward0", "input_scale"): lambda node: 1
    if node.op.short_name in ("elu", "selu") else _MISSING,
    ("MulBackward0", "other"): lambda node: _number_operand(node)
    if node.op.name == "mul" else _masked_scale(node) if node.op.name == "_masked_scale"
    else _MISSING,
    ("MulBackward0", "self"): lambda node: None if node.op.name == "_masked_scale"
    else _column(node) if node.op.name == "outer"
    else _rms_normalized(node) if node.op.name == "_fused_rms_norm" else _MISSING,
    ("DivBackward0", "other"): lambda node: _number_operand(node)
    if node.op.name == "div" else _MISSING,
    ("VarBackward0", "correction"): _correction,
    ("StdBackward0", "correction"): _correction,
    ("LinalgVectorNormBackward0", "ord"): _norm_ord,
    ("ConvolutionBackward0", "transposed"): lambda node: "transpose" in node.op.name,
    ("ConvolutionBackward0", "output_padding"): lambda node: _MISSING
    if "output_padding" in node.op.param_names else 0,
    ("ConvolutionBackward0", "bias_sym_sizes_opt"): lambda node: (0,)
    if node._in_meta[2] is None and node._inputs is not None
    and node.op.structure_inputs(node._inputs)[2] is None else _derived(
        node, "bias_sym_sizes", "_saved_bias_sym_sizes_opt"),
    ("SliceBackward0", "dim"): _slice_field("dim"),
    ("SliceBackward0", "start"): _slice_field("start"),
    ("SliceBackward0", "end"): _slice_field("stop"),
    ("SliceBackward0", "step"): _slice_field("step"),
    ("SelectBackward0", "dim"): _select_field("dim"),
    ("SelectBackward0", "index"): _select_field("index"),
    ("SplitBackward0", "split_size"): _split_size,
    ("NllLossBackward0", "total_weight"): _total_weight,
    ("NllLoss2DBackward0", "total_weight"): _total_weight,
    ("NllLossBackward0", "self"): _nll_self,
    ("NllLoss2DBackward0", "self"): _nll_self,
    ("NllLoss2DBackward0", "target"): lambda node: _as_nll2d(
        node._lookup_saved("target", "_saved_target"), 0),
}

# (node name, PyTorch's name) -> {ember op: the op's name for that argument}
_ALIASES = {
    ("MmBackward0", "mat2"): {"matmul": "other", "_linear_mm": "weight"},
    ("AddmmBackward0", "mat2"): {"_linear_addmm": "weight"},     # (read through t())
    ("AddmmBackward0", "mat1"): {"_linear_addmm": "input"},
    ("MmBackward0", "self"): {"_linear_mm": "input"},
    ("MulBackward0", "other"): {"outer": "vec2", "_fused_rms_norm": "weight"},
}
