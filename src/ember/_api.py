"""Small top-level functions of the ember namespace that are not ops."""

from ember import _dtype as D
from ember._tensor import Tensor
from ember._warn import WARN_ALWAYS
from ember.backend.cpu_kernels import check_thread_count

__all__ = ["is_tensor", "is_floating_point", "is_complex", "is_nonzero", "numel",
           "result_type", "set_printoptions", "get_printoptions", "strided", "typename",
           "is_signed", "get_device", "detach", "is_inference", "is_conj", "is_neg",
           "resolve_conj", "resolve_neg", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
           "set_anomaly_enabled", "set_warn_always", "is_warn_always_enabled", "layout",
           "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "jagged",
           "get_device_module", "is_storage", "get_num_interop_threads",
           "set_num_interop_threads", "init_num_threads", "set_flush_denormal",
           "is_distributed", "get_file_path", "compiled_with_cxx11_abi"]


class layout:  # noqa: N801  (PyTorch's name)
    """How a tensor's elements are stored (``torch.layout``): ``strided`` (dense), or the
    sparse ``sparse_coo`` and the compressed ``sparse_csr``, ``sparse_csc``, ``sparse_bsr``,
    ``sparse_bsc`` (see ember.sparse), and ``jagged`` (nested tensors, see ember.nested)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"ember.{self.name}"

    def __reduce__(self):           # pickled and copied by name: each layout stays unique
        return self.name


strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")
sparse_csc = layout("sparse_csc")
sparse_bsr = layout("sparse_bsr")
sparse_bsc = layout("sparse_bsc")
jagged = layout("jagged")
_INTEROP_THREADS = [1]


def is_tensor(obj):
    """Whether ``obj`` is an ember Tensor."""
    return isinstance(obj, Tensor)


def _require_tensor(name, input):
    if not isinstance(input, Tensor):
        from ember._from_data import _tp_name
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{_tp_name(input)}")


def is_floating_point(input):
    """Whether the tensor's dtype is a floating-point type."""
    _require_tensor("is_floating_point", input)
    return input.is_floating_point()


def is_complex(input):
    """Whether the tensor's dtype is complex."""
    _require_tensor("is_complex", input)
    return input.is_complex()


def is_nonzero(input):
    """Whether a one-element tensor is nonzero."""
    _require_tensor("is_nonzero", input)
    if input.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous"
                           if input.numel() else
                           "Boolean value of Tensor with no values is ambiguous")
    return bool(input)              # under vmap: data-dependent control flow's error


def is_distributed(input):
    """Whether the tensor is a distributed one: never in ember (``Tensor.is_distributed``)."""
    _require_tensor("is_distributed", input)
    return input.is_distributed()


def get_file_path(*path_components):
    """``path_components`` joined onto the folder that holds the ember package."""
    import os
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        *path_components)


def is_inference(input):
    """Whether the tensor was made in inference mode (or is a view of one that was)."""
    return input.is_inference()


def numel(input):
    """The number of elements of a tensor."""
    _require_tensor("numel", input)
    return input.numel()


def _operand(x):
    if isinstance(x, Tensor):
        return x.dtype, D.ZERO_DIM if x.ndim == 0 else D.DIM
    return D.scalar_dtype(x), D.SCALAR


def result_type(tensor, other):
    """The dtype an arithmetic op on the two operands produces (PyTorch's weak promotion)."""
    try:
        return D.result_type_of([_operand(tensor), _operand(other)])
    except TypeError:
        from ember._creation import _tp_name
        raise TypeError(
            f"result_type() received an invalid combination of arguments - got "
            f"({_tp_name(tensor)}, {_tp_name(other)}), but expected one of:\n"
            " * (Tensor tensor, Tensor other)\n * (Number scalar, Tensor tensor)\n"
            " * (Tensor tensor, Number other)\n * (Number scalar1, Number scalar2)\n") from None


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Set how tensors print (as ``torch.set_printoptions``)."""
    from ember._tensor_str import set_printoptions as _set
    _set(precision, threshold, edgeitems, linewidth, profile, sci_mode)


def get_printoptions():
    """The current print options as a dict."""
    from ember._tensor_str import get_printoptions as _get
    return _get()


def typename(obj):
    """A tensor's legacy type name ("ember.FloatTensor"); else the qualified name of ``obj``
    itself when it has one (a class, a function), or of its type."""
    if isinstance(obj, Tensor):
        return obj.type()
    named = obj if isinstance(getattr(obj, "__qualname__", None), str) else type(obj)
    name, module = named.__qualname__, getattr(named, "__module__", None)
    return f"{module}.{name}" if module and module != "builtins" else name


def is_signed(input):
    """Whether the tensor's dtype holds negative values."""
    return input.is_signed()


def get_device(input):
    """The GPU index of a CUDA tensor; -1 for a CPU tensor."""
    return input.get_device()


def detach(input):
    """``input`` cut from the autograd graph, sharing its memory."""
    return input.detach()


class _Kinds:
    """The tensor classes the conjugate-bit queries tell apart, imported on first use (the
    modules import this one)."""

    conj = neg = batched = dual = None

    @classmethod
    def load(cls):
        from ember._conj_view import ConjView, NegView
        from ember.autograd.forward_ad import _DualTensor
        from ember.func._batched import BatchedTensor
        cls.conj, cls.neg, cls.batched, cls.dual = ConjView, NegView, BatchedTensor, _DualTensor
        return cls


def _memory_type(input):
    """The class of the tensor whose memory ``input`` shows: inside ``vmap``, a BatchedTensor's
    values'."""
    kinds = _Kinds if _Kinds.conj is not None else _Kinds.load()
    while type(input) is kinds.batched:
        input = input._value
    return type(input)


def is_conj(input):
    """Whether the tensor is a lazily conjugated view (``x.conj()`` of a complex tensor)."""
    return _memory_type(input) is (_Kinds.conj or _Kinds.load().conj)


def is_neg(input):
    """Whether the tensor is a lazily negated view (``x.conj().imag`` of a complex tensor)."""
    return _memory_type(input) is (_Kinds.neg or _Kinds.load().neg)


def resolve_conj(input):
    """``input`` with a lazy conjugation applied: a new tensor for a conjugate view (its values
    materialised), else ``input`` itself."""
    kinds = _Kinds if _Kinds.conj is not None else _Kinds.load()
    if type(input) is kinds.dual and type(input._fw_tangent) is kinds.conj:
        # a dual tensor's primal holds its values (hold_values), but its tangent may be a
        # conjugate view (the tangent of ``dual.conj()``): PyTorch resolves both
        out = input.clone()
        out._fw_tangent = out._fw_tangent.clone()
        return out
    return input.clone() if is_conj(input) else input


def resolve_neg(input):
    """``input`` with a lazy negation applied: a new tensor for a negative view (its values
    materialised), else ``input`` itself."""
    return input.clone() if is_neg(input) else input


def _reversed(self):
    """``reversed(t)``: ``t`` flipped along dim 0 (a 0-dim tensor is itself)."""
    return self if self.ndim == 0 else self.flip(0)


def _to_dense(self, dtype=None, *, masked_grad=None):
    """This tensor as a strided (dense) one: itself, as ember has only strided tensors."""
    return self if dtype is None else self.to(dtype)


for _name in ("is_conj", "is_neg", "resolve_conj", "resolve_neg", "is_nonzero"):
    setattr(Tensor, _name, globals()[_name])
Tensor.__reversed__, Tensor.to_dense = _reversed, _to_dense


def is_anomaly_enabled():
    """Whether anomaly detection is on (``ember.autograd.detect_anomaly``)."""
    from ember.autograd import anomaly
    return anomaly.is_anomaly_enabled()


def is_anomaly_check_nan_enabled():
    """Whether anomaly detection checks gradients for NaN."""
    from ember.autograd import anomaly
    return anomaly.CHECK_NAN[0]


def set_anomaly_enabled(enabled, check_nan=True):
    """Turn anomaly detection on or off for the rest of the program."""
    from ember.autograd import anomaly
    if type(enabled) is not bool:
        raise TypeError(f"set_anomaly_enabled(): argument 'enabled' (position 1) must be bool, "
                        f"not {type(enabled).__name__}")
    anomaly.ENABLED[0], anomaly.CHECK_NAN[0] = enabled, bool(check_nan)


def set_warn_always(b):
    """Repeat every time the warnings PyTorch gives once per process."""
    if type(b) is not bool:
        from ember._from_data import _tp_name
        raise RuntimeError(f"setWarnOnlyOnce expects a bool, but got {_tp_name(b)}")
    WARN_ALWAYS[0] = b


def is_warn_always_enabled():
    """Whether ``set_warn_always(True)`` was called."""
    return WARN_ALWAYS[0]


def get_device_module(device=None):
    """The module of a device type: ``ember.cuda`` for "cuda", ``ember.cpu`` for "cpu" (and
    ``ember.mps``, ``ember.xpu``); without ``device``, the GPU's when CUDA is available, else
    the CPU's."""
    import ember
    if device is None:
        kind = "cuda" if ember.cuda.is_available() else "cpu"
    else:
        kind = device if isinstance(device, str) else ember.device(device).type
        kind = kind.split(":")[0]
    if kind not in ("cuda", "cpu", "mps", "xpu"):
        raise RuntimeError(f"Device '{kind}' does not have a corresponding module registered "
                           f"as 'ember.{kind}'.")
    return getattr(ember, kind)


def is_storage(obj):
    """Whether ``obj`` is a storage (``UntypedStorage`` or ``TypedStorage``)."""
    from ember._storage import _Storage
    return isinstance(obj, _Storage)


def get_num_interop_threads():
    """Threads for running independent ops in parallel (ember runs one op at a time: the
    value is remembered for the programs that set it)."""
    return _INTEROP_THREADS[0]


def set_num_interop_threads(num):
    """Remember the inter-op thread count (see ``get_num_interop_threads``)."""
    check_thread_count("set_num_interop_threads", num)
    _INTEROP_THREADS[0] = num


def set_flush_denormal(mode):
    """Whether flushing denormal floats to zero was switched to ``mode``: never, as NumPy
    gives no control of the CPU's denormal mode, so False (PyTorch's answer where the CPU
    cannot) and the values keep their denormals."""
    if not isinstance(mode, bool):
        raise RuntimeError(f"flush_denormal expects a bool, but got {type(mode).__name__}")
    return False


def init_num_threads():
    """Set up the intra-op threads for this thread (nothing to do in ember)."""


def _assert(condition, message):
    """Python's ``assert condition, message`` as a function (``torch._assert``)."""
    assert condition, message


def compiled_with_cxx11_abi():
    """Whether the C++ library was built with the C++11 ABI: True, as every PyTorch build is
    now (ember builds none; C++ extensions are not provided)."""
    return True
