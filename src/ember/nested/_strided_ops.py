"""Ops on strided nested tensors (``ember.nested.NestedTensor``): the ``__torch_function__``
table that runs each supported op on the components with the registered ember op, and
PyTorch's errors for the ops and arguments its strided nested tensors refuse.

Nested dim ``d >= 1`` is component dim ``d - 1``; dim 0 is the batch. Each component's
result records its own node, so gradients reach the components (and a leaf's ``.grad``
gathers theirs); where PyTorch's nested kernel records a node it cannot differentiate
(tanh, sgn, chunk, select), those nodes raise its error when a backward reaches them."""

from functools import partial

import ember
from ember._tensor import Tensor
from ember._values_backed import op_name, registrar
from ember.ops._recording import rename_node
from ember.nested import NO_SIZES
from ember.nested._strided_grad import refusing
from ember.nested._versions import write_once

__all__ = ["dispatch", "unsupported", "refused", "tracks", "each", "wrap", "check_inplace",
           "inplace_method", "split_with_sizes", "install"]

HANDLERS = {}
_handles = registrar(HANDLERS)

# the unary ops PyTorch 2.13 runs on strided nested tensors (others: "Could not run ...")
UNARY = frozenset((
    "relu", "gelu", "silu", "tanh", "abs", "neg", "sgn", "sqrt", "sin", "cos", "logical_not",
    "isnan", "isinf", "isposinf", "isneginf", "isreal", "positive", "conj", "clone",
    "contiguous"))
# their in-place forms, and the binary ones, PyTorch runs
INPLACE = frozenset(("relu_", "tanh_", "neg_", "abs_", "sgn_", "logical_not_", "add_", "mul_",
                     "fill_", "zero_"))
BINARY = frozenset(("add", "sub", "mul", "div"))
_COMPARE_SCALAR = frozenset(("gt", "ge", "eq"))
# the ATen overload PyTorch names for a refused op, where it is not ``aten::<name>``
_OVERLOADS = {
    "square": "pow.Tensor_Scalar", "rsub": "rsub.Scalar", "log_softmax": "_log_softmax",
    "split": "split.Tensor", "sub_": "sub_.Tensor", "div_": "div_.Tensor",
    "var": "var.correction", "std": "std.correction", "clamp_min": "clamp", "clamp_max": "clamp",
    "norm": "linalg_vector_norm", "masked_fill": "masked_fill.Tensor", "where": "where.self",
    "remainder": "remainder.Tensor", "fmod": "fmod.Tensor", "pow_": "pow_.Scalar",
    "square_": "pow_.Scalar", "masked_fill_": "masked_fill_.Scalar", "_max_dim": "max.dim",
    "_min_dim": "min.dim", "_median_dim": "median.dim", "_unfold": "unfold", "_repeat": "repeat",
    "movedim": "permute", "tensor_split": "slice.Tensor",
    "unsafe_split": "unsafe_split.Tensor", "conv1d": "convolution", "conv2d": "convolution",
    "conv3d": "convolution"}
# the refused ops whose autograd kernel reads the sizes before the nested kernel is looked
# for: with grad mode on and an input that requires grad, PyTorch's error is that read's
_SIZES_FIRST = frozenset(("split.Tensor", "expand", "mean.dim", "max.dim", "min.dim",
                          "median.dim", "slice.Tensor", "repeat", "unsafe_split.Tensor",
                          "diagonal", "index_select", "addmm", "mm", "sort", "topk", "kthvalue",
                          "unfold"))
# the ops that ask for the sizes whatever the inputs
_NO_SIZES = frozenset(("flatten", "unflatten", "expand_as", "view_as", "mse_loss", "l1_loss",
                       "cross_entropy", "interpolate", "repeat_interleave"))


def unsupported(name, nt=None, overload=None):
    """PyTorch's NotImplementedError for an op its strided nested tensors lack."""
    device = "CUDA" if nt is not None and nt.device.type == "cuda" else "CPU"
    op = overload or _OVERLOADS.get(name, name.replace("special.", "special_").replace(
        "linalg.", "linalg_"))
    return NotImplementedError(
        f"Could not run 'aten::{op}' with arguments from the 'NestedTensor{device}' backend. "
        f"This could be because the operator doesn't exist for this backend, or was omitted "
        f"during the selective/custom build process (if using custom build).")


def _nested_type():
    from ember.nested import NestedTensor
    return NestedTensor


def _is_nested(x):
    return isinstance(x, _nested_type())


def each(nt, fn, *, leaf=None, node=None):
    """A nested tensor of ``fn`` applied to each of ``nt``'s components."""
    out = [fn(t) for t in nt._components]
    return wrap(out, leaf, node)


def wrap(out, leaf=None, node=None):
    """A nested tensor of the tensors ``out`` (a leaf when none requires grad); ``node``
    names their backward nodes as PyTorch names its nested kernel's."""
    if node is not None:
        out = [rename_node(t, node) for t in out]
    grad = any(t.requires_grad for t in out)
    return _nested_type()(out, is_leaf=(not grad) if leaf is None else leaf, quiet=True)


def _first_nested(args):
    for a in args:
        if _is_nested(a):
            return a
        if isinstance(a, (list, tuple)):
            found = _first_nested(a)
            if found is not None:
                return found
    return None


def dispatch(func, args, kwargs):
    """Run ember function ``func`` on arguments among which is a strided nested tensor."""
    name = op_name(func).removeprefix("nn.functional.")
    handler = HANDLERS.get(name)
    if handler is not None:
        return handler(func, *args, **kwargs)
    if name in UNARY:
        rest = args[1:]
        if kwargs.get("inplace"):           # (``F.relu(nt, inplace=True)``: nt written)
            write_once(args[0], (partial(func, t, *rest, **kwargs) for t in args[0]._components))
            return _no_backward(name, args[0], args[0])
        return _no_backward(name, each(args[0], lambda t: func(t, *rest, **kwargs)), args[0])
    if name in BINARY:
        return _binary(func, name, *args, **kwargs)
    if name in _COMPARE_SCALAR:
        return _compare(func, name, *args, **kwargs)
    if name in ("__get__", "__set__"):
        return func(*args, **kwargs)
    if name.endswith("_") and not name.startswith("_") and args and _is_nested(args[0]):
        # ``ember.neg_(nt)``, ``Tensor.add_(nt, 1)``: the nested tensor's own method, or refused
        return inplace_method(args[0], name)(*args[1:], **kwargs)
    if name in _NO_SIZES:
        raise RuntimeError(NO_SIZES)
    raise refused(_refused_name(name, args, kwargs), (*args, *kwargs.values()))


def refused(op, args):
    """PyTorch's error for refused op ``op`` (its ATen name) called with ``args``."""
    if _OVERLOADS.get(op, op) in _SIZES_FIRST and tracks(args):
        return RuntimeError(NO_SIZES)
    return unsupported(op, _first_nested(args))


def tracks(args):
    """Whether grad mode is on and a tensor (nested or not) among ``args`` requires grad:
    PyTorch's autograd kernel of the op then records a node."""
    if not ember.is_grad_enabled():
        return False
    for a in args:
        if isinstance(a, (list, tuple)):
            if tracks(a):
                return True
        elif (isinstance(a, Tensor) or _is_nested(a)) and a.requires_grad:
            return True
    return False


def _refused_name(name, args, kwargs):
    if name in ("lt", "le", "ne"):
        tensor = isinstance(args[1], Tensor) or _is_nested(args[1])
        return f"{name}.{'Tensor' if tensor else 'Scalar'}"
    if name in ("max", "min") and len(args) > 1 and (isinstance(args[1], Tensor)
                                                     or _is_nested(args[1])):
        return f"{name}imum"                    # (max(a, b) is maximum)
    if name in ("mean", "sum", "max", "min") and (len(args) > 1 or "dim" in kwargs):
        return f"{name}.dim"
    if name == "prod" and (len(args) > 1 or "dim" in kwargs):
        return "prod.dim_int"
    if name in ("pow", "__pow__"):
        other = args[1]
        return "pow.Tensor_Tensor" if isinstance(other, Tensor) or _is_nested(other) \
            else "pow.Tensor_Scalar"
    return name.strip("_") if name.startswith("__") else name


# the ops whose nested kernels PyTorch records a node for and cannot differentiate: the
# error a backward reaching that node raises
_BACKWARD_ERRORS = {
    "tanh": lambda nt: unsupported("tanh_backward", nt),
    "sgn": lambda nt: RuntimeError(NO_SIZES),
    "chunk": lambda nt: RuntimeError(
        'self.layout() == c10::kJagged INTERNAL ASSERT FAILED at "/__w/pytorch/pytorch/torch/'
        'csrc/autograd/FunctionsManual.cpp":2202, please report a bug to PyTorch. Nested '
        "Strided Tensor doesn't support chunk backward."),
    "select": lambda nt: RuntimeError("NestedTensor must be contiguous to get buffer.")}


def _no_backward(name, out, nt):
    """``out`` (a nested tensor, or a tuple of them), its nodes refusing to run as PyTorch's
    node for op ``name`` on ``nt`` does, where it does."""
    make = _BACKWARD_ERRORS.get(name.rstrip("_"))
    if make is not None:
        device = nt.device.type
        for o in out if isinstance(out, tuple) else (out,):
            refusing(o._components, lambda: make(_Device(device)))
    return out


class _Device:
    # (what ``unsupported`` reads of a nested tensor, kept by a node in its place)
    def __init__(self, device):
        self.device = ember.device(device)


def check_inplace(name):
    """PyTorch's error for an in-place op its strided nested tensors lack."""
    if name not in INPLACE:
        raise unsupported(name)


def inplace_method(nt, name):
    """``nt``'s in-place method ``name`` (an alias taken by its op's name): NestedTensor's own,
    or one that raises PyTorch's error for it."""
    base = ember.ops.ALIASES.get(name[:-1], name[:-1]) + "_"
    own = getattr(type(nt), base, None)
    if own is not None:
        return own.__get__(nt)

    def refuse(*args, **kwargs):
        raise unsupported(base, nt)
    return refuse


# ----- elementwise ---------------------------------------------------------------------------

def _dense_error(a, b):
    raise RuntimeError(f"Expected both self and other to be nested, but got a "
                       f"{'' if _is_nested(a) else 'non-'}nested self and "
                       f"{'' if _is_nested(b) else 'non-'}nested other")


def _operand_parts(name, a, b):
    """The per-component operands of a binary op of ``a`` and ``b``: both nested with the
    same sizes, or one nested and the other a number or a 0-dim tensor."""
    nt = a if _is_nested(a) else b
    n = len(nt._components)
    parts = []
    for x in (a, b):
        if _is_nested(x):
            parts.append(x._components)
        elif isinstance(x, Tensor) and x.dim() > 0:
            _dense_error(a, b)
        else:
            parts.append([x] * n)
    if _is_nested(a) and _is_nested(b) and (
            len(a._components) != len(b._components) or
            any(s.shape != o.shape for s, o in zip(a._components, b._components))):
        raise RuntimeError(f"{name} does not support broadcasting when given a NestedTensor")
    return parts


def _binary(func, name, a, b, **kwargs):
    if kwargs.get("rounding_mode") is not None:
        raise unsupported("div.Tensor_mode", a if _is_nested(a) else b)
    left, right = _operand_parts(name, a, b)
    return wrap([func(x, y, **kwargs) for x, y in zip(left, right)])


def _compare(func, name, a, b):
    if _is_nested(b):
        if name == "eq":
            raise RuntimeError("eq does not support nested tensor as other value.")
        raise unsupported(f"{name}.Tensor", a)
    if isinstance(b, Tensor) and b.dim() > 0:
        _dense_error(a, b)
    return each(a, lambda t: func(t, b))


@_handles("masked_fill")
def _masked_fill(func, nt, mask, value):
    if isinstance(value, Tensor) or _is_nested(value):
        raise unsupported("masked_fill.Tensor", nt)
    _, masks = _operand_parts("masked_fill", nt, mask)
    return wrap([func(t, m, value) for t, m in zip(nt._components, masks)])


@_handles("where")
def _where(func, *args, **kwargs):
    names = ("input", "condition", "other") if func is Tensor.where else \
        ("condition", "input", "other")         # (the method: ``self.where(condition, other)``)
    bound = dict(zip(names, args), **kwargs)
    condition, input, other = (bound.get(n) for n in ("condition", "input", "other"))
    if input is None and other is None:
        raise unsupported("nonzero", condition)
    if not _is_nested(condition):
        raise RuntimeError("condition must be nested")
    if not _is_nested(other):
        raise RuntimeError("other must be nested")
    if _is_nested(input):
        raise RuntimeError("self must not be nested")
    return wrap([ember.where(c, input, o)
                 for c, o in zip(condition._components, other._components)])


@_handles("dropout", "alpha_dropout", "feature_alpha_dropout")
def _dropout(func, nt, p=0.5, training=None, inplace=False):
    name = op_name(func).removeprefix("nn.functional.")
    if training is None:                    # (the alpha dropouts default to eval)
        training = name == "dropout"
    masked = training and 0 < p < 1         # (drawing a mask: bernoulli_, which nested lack)
    if name == "alpha_dropout":
        if masked:
            raise unsupported("bernoulli_.float", nt)
        if not training:
            return nt
    elif name == "feature_alpha_dropout" and training:
        raise RuntimeError(NO_SIZES)
    elif name == "dropout" and inplace and masked:
        raise unsupported("bernoulli_.float", nt)

    if inplace:                             # (the components written: the nested tensor back)
        write_once(nt, (partial(func, t, p, training, True) for t in nt._components))
        nt._is_leaf = nt._is_leaf and not nt.requires_grad
        return nt

    def run(t):
        out = func(t, p, training, inplace)
        # (a dense dropout that changes nothing returns its input: a nested one never does)
        return out.clone() if out is t else out
    native = name == "dropout" and not inplace      # (in place, the dense op's node)
    return each(nt, run, node="NativeDropoutBackward0" if native else None)


@_handles("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like")
def _like(func, nt, *args, **kwargs):
    return each(nt, lambda t: func(t, *args, **kwargs), leaf=True)


# ----- products ------------------------------------------------------------------------------

@_handles("linear")
def _linear(func, nt, weight, bias=None):
    if not _is_nested(nt):
        raise unsupported("linear", weight)
    if nt.dim() != 3 or weight.dim() != 2:
        raise RuntimeError(f"Linear requires nested_tensor.dim == 3 and dense_matrix.dim == 2. "
                           f"Nested tensor dim: {nt.dim()}. Dense tensor dim: {weight.dim()}")
    last = _last_size(nt)
    if last != weight.shape[1]:
        raise RuntimeError(f"Shape mismatch for NestedTensor Linear: Expected input's (a nested "
                           f"tensor) 'last_dim' to equal 'weight.size(1), but got: last_dim = "
                           f"{last}, and weight.size(1) = {weight.shape[1]}")
    return each(nt, lambda t: func(t, weight, bias), node="LinearBackward0")


def _long_text(values):
    return "\n ".join(map(str, values)) + f"\n[ torch.LongTensor{{{len(values)}}} ]"


def _dense_projection(nt, other):
    """Whether ``nt @ other`` is PyTorch's product of a 4-D nested tensor, regular but in
    its first component dim, and a dense matrix that fits its last dim."""
    parts = nt._components
    return (isinstance(other, Tensor) and nt.dim() == 4 and other.dim() == 2 and bool(parts)
            and all(t.shape[1:] == parts[0].shape[1:] for t in parts)
            and parts[0].shape[-1] == other.shape[0])


def _last_size(nt):
    """The size of ``nt``'s last dim, which all its components must share."""
    sizes = [t.shape[-1] for t in nt._components]
    if len(set(sizes)) > 1:
        raise RuntimeError(f"Expected all tensors in nested tensor to have the same trailing "
                           f"dimension, instead last dimension equals:  {_long_text(sizes)}")
    return nt.size(-1)


@_handles("matmul")
def _matmul(func, a, b):
    if _is_nested(a) and _dense_projection(a, b):     # (PyTorch's one nested-dense case)
        return wrap([func(t, b) for t in a._components], node="MatmulBackward0")
    if not (_is_nested(a) and _is_nested(b)):
        raise RuntimeError(f"Expected both to be nested, but got a "
                           f"{'' if _is_nested(a) else 'non-'}nested self and "
                           f"{'' if _is_nested(b) else 'non-'}nested other")
    for which, x in (("1st", a), ("2nd", b)):
        if x.dim() < 3:
            raise RuntimeError(f"matmul: For nested tensors, only inputs with >= 3 dims are "
                               f"currently supported. {which} input has rank: {x.dim()}")
    if a.dim() != b.dim():
        raise RuntimeError("matmul: both inputs must have the same rank")
    if len(a._components) != len(b._components):
        raise RuntimeError(f"matmul: Expected size for the 1st dimension of 2nd input tensor to "
                           f"be: {len(a._components)} but got: {len(b._components)}.")
    left = [t.shape[-1] for t in a._components]
    right = [t.shape[-2] for t in b._components]
    if left != right:
        raise RuntimeError(f"matmul: Nested tensors cannot be matrix multiplied, last dimension "
                           f"of self has sizes {_long_text(left)}second last dimension of mat2 "
                           f"has sizes {_long_text(right)}")
    return wrap([func(x, y) for x, y in zip(a._components, b._components)],
                node="MatmulBackward0")


@_handles("bmm")
def _bmm(func, a, b):
    for which, x in (("batch1", a), ("batch2", b)):
        if x.dim() != 3:
            raise RuntimeError(f"{which} must be a 3D tensor")
    left = a._components if _is_nested(a) else list(a.unbind(0))
    right = b._components if _is_nested(b) else list(b.unbind(0))
    if len(right) != len(left):
        raise RuntimeError(f"Expected size for the 1st dimension of batch2 tensor to be: "
                           f"{len(left)} but got: {len(right)}.")
    for i, (x, y) in enumerate(zip(left, right)):
        if x.shape[1] != y.shape[0]:
            raise RuntimeError(f"{i}-th nested matrices in batch cannot be multiplied "
                               f"({x.shape[0]}x{x.shape[1]} and {y.shape[0]}x{y.shape[1]})")
    # each pair is one matrix product (PyTorch's node for them all is BmmBackward0)
    return wrap([ember.mm(x, y) for x, y in zip(left, right)], node="BmmBackward0")


@_handles("scaled_dot_product_attention")
def _sdpa(func, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
          enable_gqa=False):
    if min(query.dim(), key.dim(), value.dim()) < 2:
        raise RuntimeError(f"Expected query, key, and value to all be  at least 2 dimensional, "
                           f"but got query.dim: {query.dim()} key.dim: {key.dim()} and "
                           f"value.dim: {value.dim()} instead.")
    for x, y in ((query, key), (key, value)):
        if _is_nested(x) != _is_nested(y):
            raise RuntimeError(f"Expected both to be nested, but got a "
                               f"{'' if _is_nested(x) else 'non-'}nested self and "
                               f"{'' if _is_nested(y) else 'non-'}nested other")
    if is_causal:
        raise RuntimeError("_scaled_dot_product_attention: Nested tensors for query / key are "
                           "not supported when is_causal=True")
    if attn_mask is not None:
        raise unsupported("_scaled_dot_product_attention_math", query,
                          "_scaled_dot_product_attention_math")
    # (PyTorch's math: query @ key.transpose(-2, -1), which take nested inputs of >= 3 dims)
    if _is_nested(key) and key.dim() < 3:
        raise RuntimeError("Nested tensor dimension 0 cannot be transposed")
    if _is_nested(query) and query.dim() < 3:
        raise RuntimeError(f"matmul: For nested tensors, only inputs with >= 3 dims are "
                           f"currently supported. 1st input has rank: {query.dim()}")
    return wrap([func(q, k, v, dropout_p=dropout_p, scale=scale, enable_gqa=enable_gqa)
                  for q, k, v in zip(query._components, key._components, value._components)],
                node="MatmulBackward0")


# ----- normalizations and reductions ---------------------------------------------------------

def _dim(nt, dim):
    ndim = nt.dim()
    if not -ndim <= dim < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                         f"{ndim - 1}], but got {dim})")
    return dim % ndim


@_handles("softmax")
def _softmax(func, nt, dim=None, dtype=None, *args, **kwargs):
    dtype = kwargs.get("dtype", dtype if not isinstance(dtype, int) else None)  # (_stacklevel)
    if not nt._components:          # (PyTorch checks no dim of an empty one)
        return wrap([])
    dim = _dim(nt, dim)
    if dim == 0:
        raise RuntimeError("Cannot apply softmax across nested dimension 0")
    return each(nt, lambda t: ember.softmax(t, dim - 1, dtype=dtype))


@_handles("layer_norm")
def _layer_norm(func, nt, normalized_shape, weight=None, bias=None, eps=1e-5):
    if weight is None or bias is None:
        raise ValueError("NestedTensor layer_norm requires weight and bias")
    shape = tuple([normalized_shape] if isinstance(normalized_shape, int) else normalized_shape)
    if not nt._components:
        raise RuntimeError("The shape at dimension 0of normalized_shape doesn't match the input")
    k = len(shape)
    if k >= nt.dim() or len({tuple(t.shape[-k:]) for t in nt._components}) > 1:
        raise RuntimeError("normalized_shape extends into irregular dimensions for the nested "
                           "tensor")
    for i, (want, have) in enumerate(zip(shape, nt._components[0].shape[-k:])):
        if want != have:
            raise RuntimeError(f"The shape at dimension {i}of normalized_shape doesn't match "
                               f"the input")
    return each(nt, lambda t: func(t, shape, weight, bias, eps))


@_handles("sum")
def _sum(func, nt, dim=None, keepdim=False, *, dtype=None):
    if dim is None:
        raise unsupported("sum", nt)
    dims = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    if len(dims) != 1:
        raise RuntimeError("NestedTensor only allows reduction of a single dimension for now.")
    d = _dim(nt, dims[0])
    if d != nt.dim() - 1:
        raise RuntimeError(f"NestedTensor can only be reduced across the last dimension for now "
                           f"got dimension {d} instead.")
    if not keepdim:
        raise RuntimeError("NestedTensor always requires keepdim=True for now.")
    if dtype is not None:
        raise RuntimeError("NestedTensor does not support dtype argument for now.")
    if nt.dtype == ember.bool:
        raise NotImplementedError('"nested_sum_dim_cpu" not implemented for \'Bool\'')
    return each(nt, lambda t: func(t, d - 1, keepdim=True),
                node="SumBackwardAutogradNestedTensor1")


# ----- shapes --------------------------------------------------------------------------------

@_handles("transpose", "swapaxes", "swapdims")
def _transpose(func, nt, dim0, dim1):
    d0, d1 = _dim(nt, dim0), _dim(nt, dim1)
    if d0 == 0 or d1 == 0:
        raise RuntimeError("Nested tensor dimension 0 cannot be transposed")
    return each(nt, lambda t: t.transpose(d0 - 1, d1 - 1))


def _reshape_like(verb, nt, shape):
    if not nt._components:
        raise RuntimeError("empty nested tensor cannot be reshaped")
    shape = list(shape[0] if len(shape) == 1 and isinstance(shape[0], (list, tuple))
                 else shape)
    if not shape or shape[0] != len(nt._components):
        raise RuntimeError(f"{verb}: For now nested {verb} cannot change or infer the implicit "
                           f"batch dimension")
    _check_inferred(shape[1:], nt.dim() - 1)
    out = []
    for t in nt._components:
        # -1 keeps the component's own size along that dim (how irregular dims carry over)
        sizes = [t.shape[i] if s == -1 else s for i, s in enumerate(shape[1:])]
        try:
            out.append(getattr(t, verb)(sizes))
        except RuntimeError as e:
            if "is invalid for input of size" not in str(e):
                raise
            raise RuntimeError(f"shape '{shape}' is invalid for input of size "
                               f"{t.numel()}") from None
    return wrap(out, node="ViewBackwardAutogradNestedTensor0")


def _check_inferred(sizes, ndim):
    """PyTorch's errors for a -1 that is not a dim the components have (nested shapes are
    never inferred), or that follows another -1 when the components gain dims."""
    seen = False
    for i, s in enumerate(sizes):
        if s != -1:
            continue
        if i >= ndim:
            raise RuntimeError("nested tensor does not infer shape")
        if seen and len(sizes) > ndim:
            raise RuntimeError("only one dimension can be inferred")
        seen = True


@_handles("reshape")
def _reshape(func, nt, *shape):
    return _reshape_like("reshape", nt, shape)


@_handles("view")
def _view(func, nt, *shape):
    return _reshape_like("view", nt, shape)


@_handles("unsqueeze")
def _unsqueeze(func, nt, dim):
    ndim = nt.dim() + 1
    if not -ndim <= dim < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                         f"{ndim - 1}], but got {dim})")
    dim %= ndim
    if dim == 0:
        raise RuntimeError("unsqueeze(): For nested tensors, unsqueezing dimension 0 is not "
                           "supported at the moment if you need this feature, please open an "
                           "issue on github describing your use case.")
    if not nt._components:
        raise IndexError(f"Dimension specified as {dim - 1} but tensor has no dimensions")
    return each(nt, lambda t: t.unsqueeze(dim - 1))


@_handles("squeeze")
def _squeeze(func, nt, dim=None):
    if dim is None and tracks((nt,)):
        raise RuntimeError(NO_SIZES)
    if dim is None:
        raise RuntimeError("squeeze(): For nested tensors, squeeze without the dim argument is "
                           "not supported at the moment, however you can use squeeze(Tensor "
                           "self, int dim) instead if you need this feature, please open an "
                           "issue on github describing your use case.")
    dim = _dim(nt, dim)
    if dim == 0:
        raise RuntimeError("squeeze(): For nested tensors, squeezing dimension 0 is not "
                           "supported at the moment if you need this feature, please open an "
                           "issue on github describing your use case.")
    # (a dim of size 1 in some components only is no dim of size 1: all keep it)
    ones = all(t.shape[dim - 1] == 1 for t in nt._components)
    return each(nt, lambda t: t.squeeze(dim - 1) if ones else t.view(t.shape),
                node="SqueezeBackwardAutogradNestedTensor0")


@_handles("flatten")
def _flatten(func, nt, start_dim=0, end_dim=-1):
    start, end = _dim(nt, start_dim), _dim(nt, end_dim)
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if start == end:        # (PyTorch's flatten of one dim is the input itself)
        return nt
    raise RuntimeError(NO_SIZES)


@_handles("unflatten")
def _unflatten(func, nt, dim, sizes):
    # (PyTorch's checks the sizes against the dim's, then cannot view a nested tensor)
    d = _dim(nt, dim)
    try:
        n = nt.size(d)
    except RuntimeError as e:
        raise RuntimeError(f"unflatten got an unexpected error:\n{e}") from None
    ember.empty([1] * d + [n]).unflatten(d, sizes)
    raise RuntimeError(NO_SIZES)


@_handles("chunk")
def _chunk(func, nt, chunks, dim=0):
    d = _dim(nt, dim)
    if d != nt.dim() - 1:
        raise RuntimeError("Chunk for nested tensors is currently only supported for the last "
                           "dimension.")
    if not nt._components:
        raise IndexError("Dimension specified as 1 but tensor has no dimensions")
    size = _last_size(nt)
    if size % chunks:
        raise RuntimeError(f"Chunk for nested tensors is only supported for nested tensors with "
                           f"trailing dimension divisible by chunks, got: {size} % {chunks} != 0")
    return _no_backward("chunk", _zip_parts([t.chunk(chunks, d - 1) for t in nt._components],
                                            "ChunkBackwardAutogradNestedTensor0"), nt)


def split_with_sizes(nt, split_sizes, dim=0):
    """Split ``nt`` along its last dim into nested tensors of ``split_sizes`` there."""
    d = _dim(nt, dim)
    if d != nt.dim() - 1:
        raise RuntimeError("split_with_sizes for nested tensors is currently only supported for "
                           "the last dimension.")
    size = _last_size(nt)
    if sum(split_sizes) != size:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} (input "
                           f"tensor's size at dimension {d}), but got split_sizes="
                           f"{list(split_sizes)}")
    return _zip_parts([t.split_with_sizes(list(split_sizes), d - 1) for t in nt._components],
                      "SplitWithSizesBackwardAutogradNestedTensor0")


def _zip_parts(per_component, node):
    return tuple(wrap(list(parts), node=node) for parts in zip(*per_component))


@_handles("split_with_sizes")
def _split_with_sizes(func, nt, split_sizes, dim=0):
    return split_with_sizes(nt, split_sizes, dim)


@_handles("split")
def _split(func, nt, *args, **kwargs):
    # (a list of sizes is PyTorch's split_with_sizes, which nested tensors have; an int size
    # is split.Tensor, which they lack)
    sizes = args[0] if args else kwargs.get("split_size", kwargs.get("split_size_or_sections"))
    if isinstance(sizes, (list, tuple)):
        return split_with_sizes(nt, sizes, args[1] if len(args) > 1 else kwargs.get("dim", 0))
    raise refused("split.Tensor", (nt,))


@_handles("select")
def _select(func, nt, dim, index):
    d = _dim(nt, dim)
    if not nt._components:
        raise IndexError("You can only select when the NT is not empty.")
    if d == 0:
        return nt[index]
    out = []
    for i, t in enumerate(nt._components):
        size = t.shape[d - 1]
        if not -size <= index < size:
            raise IndexError(f"index {index} is out of bounds for dimension {d - 1} of the "
                             f"{i}th constituent tensor with size {size}")
        out.append(t.select(d - 1, index))
    return _no_backward("select", wrap(out, node="SelectBackwardAutogradNestedTensor0"), nt)


@_handles("real", "imag")
def _real_imag(func, nt):
    return getattr(nt, op_name(func))


@_handles("narrow")
def _narrow(func, nt, dim, start, length):
    if dim != 0:
        raise RuntimeError(f"narrow(): only dim=0 supported for nested tensors, but got: {dim}")
    from ember.nested import narrow_view
    return narrow_view(nt, start, length)


@_handles("unbind")
def _unbind(func, nt, dim=0):
    return nt.unbind(dim)


@_handles("cat", "concat", "concatenate")
def _cat(func, tensors, dim=0):
    tensors = list(tensors)
    if tracks(tensors):
        raise RuntimeError(NO_SIZES)
    if not all(_is_nested(t) for t in tensors):
        raise RuntimeError("Expected each tensor in given list to be nested." if dim == 0 else
                           "cat(): expected each tensor in given list to be nested")
    if not tensors[0]._components:
        raise RuntimeError(NO_SIZES)
    for i, t in enumerate(tensors):
        if not t._components:       # (PyTorch takes an empty one for a 0-dim tensor)
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be "
                               f"concatenated")
    d = _dim(tensors[0], dim)
    if d == 0:
        return wrap([c.clone() for t in tensors for c in t._components])   # (a new buffer)
    if any(c.shape[1:] != t._components[0].shape[1:] for t in tensors for c in t._components):
        raise RuntimeError("cat(): only nested tensors with a single ragged dim next to the "
                           "batch dim are supported")
    return wrap([func(list(parts), d - 1) for parts in zip(*(t._components for t in tensors))])


# ----- the NestedTensor methods these ops give -----------------------------------------------

def _inplace(name):
    def run(self, *args, **kwargs):
        check_inplace(name)
        parts = _operand_parts(name, self, args[0]) if args and (
            _is_nested(args[0]) or isinstance(args[0], Tensor)) else None
        def write(i, t):
            rest = (parts[1][i], *args[1:]) if parts else args
            return partial(getattr(t, name), *rest, **kwargs)
        write_once(self, (write(i, t) for i, t in enumerate(self._components)))
        return _no_backward(name, self, self)
    run.__name__ = name
    return run


def _copy_(self, src, non_blocking=False):
    if not _is_nested(src):
        raise RuntimeError("get_nested_tensor_impl requires a NestedTensor.")
    if len(src._components) != len(self._components) or any(
            s.shape != t.shape for s, t in zip(src._components, self._components)):
        raise RuntimeError("copy_ only supports tensors that are the same size for Nested "
                           "implementations")
    write_once(self, (partial(t.copy_, s, non_blocking)
                      for t, s in zip(self._components, src._components)))
    if self.requires_grad:          # (now on the graph: no longer a leaf)
        self._is_leaf = False
        for t in self._components:
            rename_node(t, "CopyBackwards")
    return self


def _refuse(overload):
    def run(self, *args, **kwargs):
        raise unsupported(overload, self)
    return run


def _call(name, swap=False):
    # (ember's namespace is still loading when this module is imported)
    if swap:
        return lambda self, other: getattr(ember, name)(other, self)
    return lambda self, *other: getattr(ember, name)(self, *other)


def install(cls):
    """Give ``cls`` (NestedTensor) Python's operators and the in-place methods PyTorch's
    strided nested tensors run; other methods reach the table through ``__getattr__``."""
    for op in ("add", "sub", "mul", "matmul", "gt", "ge", "lt", "le", "ne", "eq", "neg",
               "abs"):
        setattr(cls, f"__{op}__", _call(op))
    cls.__truediv__ = _call("div")
    for op in ("add", "mul", "matmul"):
        setattr(cls, f"__r{op}__", _call(op, swap=True))
    cls.__rsub__ = _refuse("rsub.Scalar")
    cls.__rtruediv__ = _refuse("reciprocal")
    cls.__pow__ = _refuse("pow.Tensor_Scalar")
    for name in ("dense_dim", "sparse_dim", "new_zeros", "new_ones", "new_empty", "new_full"):
        setattr(cls, name, _refuse(name))
    cls.__hash__ = object.__hash__
    cls.__pos__ = _call("positive")
    for name in INPLACE | {"sub_", "div_"}:      # (``-=`` and ``/=`` are refused by name)
        setattr(cls, name, _inplace(name))
    cls.__iadd__, cls.__imul__ = cls.add_, cls.mul_
    cls.__isub__, cls.__itruediv__ = cls.sub_, cls.div_
    cls.copy_ = _copy_
    cls.split_with_sizes = split_with_sizes
