"""dtype objects, PyTorch's type promotion, finfo/iinfo and the default dtype."""

import ml_dtypes
import numpy as np

__all__ = [
    "dtype", "finfo", "iinfo", "promote_types", "can_cast",
    "get_default_dtype", "set_default_dtype",
]

# Promotion categories, in PyTorch's order: a higher category wins over a weak operand.
BOOL, INTEGRAL, FLOATING, COMPLEX = 0, 1, 2, 3


class dtype:
    """A tensor element type: ``ember.float32`` and friends (``torch.dtype``)."""

    __slots__ = ("name", "np", "category", "itemsize", "is_signed", "_torch_name", "_legacy")

    def __init__(self, name, np_dtype, category, torch_name, legacy):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category
        self.itemsize = self.np.itemsize
        self.is_signed = category != BOOL and not name.startswith("uint")
        self._torch_name = torch_name          # PyTorch's ScalarType name, used in messages
        self._legacy = legacy                  # legacy tensor-type name, e.g. "FloatTensor"

    @property
    def is_floating_point(self):
        return self.category == FLOATING

    @property
    def is_complex(self):
        return self.category == COMPLEX

    def to_real(self):
        """The real counterpart of a complex dtype (itself otherwise)."""
        return _REAL_OF.get(self, self)

    def to_complex(self):
        """The complex counterpart of a floating dtype (itself if already complex)."""
        if self.category == COMPLEX:
            return self
        if self not in _COMPLEX_OF:
            # (a PromotionError: an operand's shape check comes first, as in PyTorch)
            raise PromotionError(f"Unknown Complex ScalarType for {self._torch_name}")
        return _COMPLEX_OF[self]

    def __repr__(self):
        return f"ember.{self.name}"

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))


def _dtype_by_name(name):
    return _BY_NAME[name]


bool_ = dtype("bool", np.bool_, BOOL, "Bool", "BoolTensor")
uint8 = dtype("uint8", np.uint8, INTEGRAL, "Byte", "ByteTensor")
int8 = dtype("int8", np.int8, INTEGRAL, "Char", "CharTensor")
int16 = dtype("int16", np.int16, INTEGRAL, "Short", "ShortTensor")
int32 = dtype("int32", np.int32, INTEGRAL, "Int", "IntTensor")
int64 = dtype("int64", np.int64, INTEGRAL, "Long", "LongTensor")
# the wide unsigned types: storage, conversion and arithmetic among themselves; PyTorch
# refuses to promote them with other integral types
uint16 = dtype("uint16", np.uint16, INTEGRAL, "UInt16", "UInt16Tensor")
uint32 = dtype("uint32", np.uint32, INTEGRAL, "UInt32", "UInt32Tensor")
uint64 = dtype("uint64", np.uint64, INTEGRAL, "UInt64", "UInt64Tensor")
float8_e4m3fn = dtype("float8_e4m3fn", ml_dtypes.float8_e4m3fn, FLOATING,
                      "Float8_e4m3fn", "Float8_e4m3fnTensor")
float8_e5m2 = dtype("float8_e5m2", ml_dtypes.float8_e5m2, FLOATING,
                    "Float8_e5m2", "Float8_e5m2Tensor")
float16 = dtype("float16", np.float16, FLOATING, "Half", "HalfTensor")
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, FLOATING, "BFloat16", "BFloat16Tensor")
float32 = dtype("float32", np.float32, FLOATING, "Float", "FloatTensor")
float64 = dtype("float64", np.float64, FLOATING, "Double", "DoubleTensor")
complex64 = dtype("complex64", np.complex64, COMPLEX, "ComplexFloat", "ComplexFloatTensor")
complex128 = dtype("complex128", np.complex128, COMPLEX, "ComplexDouble", "ComplexDoubleTensor")

ALL_DTYPES = (bool_, uint8, int8, int16, int32, int64, uint16, uint32, uint64, float8_e4m3fn,
              float8_e5m2, float16, bfloat16, float32, float64, complex64, complex128)
_BY_NAME = {d.name: d for d in ALL_DTYPES}
FLOAT8 = (float8_e4m3fn, float8_e5m2)
LOW_PRECISION = (float16, bfloat16, float8_e4m3fn, float8_e5m2)
# NumPy dtypes of the low-precision floats, for `a.dtype in ...` tests on backend arrays
# (np.dtype hashes by type): the 16-bit pair, which PyTorch's CPU kernels widen to float32,
# and that pair with the float8 types.
HALF_NP = frozenset({float16.np, bfloat16.np})
LOW_PRECISION_NP = frozenset(d.np for d in LOW_PRECISION)
WIDE_UNSIGNED = (uint16, uint32, uint64)

# numpy dtype -> ember dtype. Keyed by np.dtype objects, which hash by type.
FROM_NUMPY = {d.np: d for d in ALL_DTYPES}

# the Python types PyTorch takes for dtypes
PYTHON_DTYPES = {bool: bool_, int: int64, float: float64, complex: complex128}
_REAL_OF = {complex64: float32, complex128: float64}
# float16 pairs with complex32 in PyTorch; ember has no complex32 (nor has NumPy)
_COMPLEX_OF = {float16: complex64, bfloat16: complex64, float32: complex64,
               float64: complex128}

# Integral dtypes by (signedness, size): promotion of two integers is the smallest type
# holding both ranges; uint8 with a signed type goes signed (uint16+ do not promote).
_INT_RANK = {bool_: 0, uint8: 1, int8: 1, int16: 2, int32: 3, int64: 4}
_SIGNED_BY_RANK = {1: int8, 2: int16, 3: int32, 4: int64}
_FLOAT_RANK = {float16: 1, bfloat16: 1, float32: 2, float64: 3}


class PromotionError(RuntimeError):
    """PyTorch's refusal to promote two dtypes (raised after its checks of operand shapes)."""

    def __reduce__(self):               # (pickled as the plain RuntimeError it shows as)
        return RuntimeError, self.args


# tracebacks show PyTorch's plain "RuntimeError: ..."
PromotionError.__name__ = PromotionError.__qualname__ = "RuntimeError"
PromotionError.__module__ = "builtins"


def _promote(a, b):
    if a is b:
        return a
    if a in FLOAT8 or b in FLOAT8:
        raise PromotionError(
            f"Promotion for Float8 Types is not supported, attempted to promote "
            f"{a._torch_name} and {b._torch_name}")
    if (a in WIDE_UNSIGNED or b in WIDE_UNSIGNED) and FLOATING not in (a.category, b.category):
        # only a real float promotes with uint16/32/64 (complex does not)
        raise PromotionError(
            f"Promotion for uint16, uint32, uint64 types is not supported, attempted to "
            f"promote {a._torch_name} and {b._torch_name}")
    if a.category < b.category:
        a, b = b, a                     # a now has the higher (or equal) category
    if a.category == COMPLEX:
        if b.category == COMPLEX:
            return a if a.itemsize >= b.itemsize else b
        if b is float64:
            return complex128
        return a
    if a.category == FLOATING:
        if b.category == FLOATING:
            ra, rb = _FLOAT_RANK[a], _FLOAT_RANK[b]
            if ra == rb:                # float16 with bfloat16
                return float32
            return a if ra > rb else b
        return a
    if b is bool_:
        return a
    # two distinct integral types
    if a is uint8 or b is uint8:
        other = b if a is uint8 else a
        return int16 if other is int8 else other
    return a if _INT_RANK[a] > _INT_RANK[b] else b


def _dtype_arg(fn, name, position, value):
    """``value`` as a dtype argument of ``fn``: Python's bool, int, float and complex stand
    for bool, int64, float64 and complex128, as in PyTorch; anything else is a TypeError."""
    found = PYTHON_DTYPES.get(value) if isinstance(value, type) else None
    if found is None:
        raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be torch.dtype, "
                        f"not {type(value).__name__}")
    return found


def promote_types(type1, type2):
    """The smallest dtype to which both may be cast (``torch.promote_types``)."""
    if type(type1) is not dtype:
        type1 = _dtype_arg("promote_types", "type1", 1, type1)
    if type(type2) is not dtype:
        type2 = _dtype_arg("promote_types", "type2", 2, type2)
    return _promote(type1, type2)


def can_cast(from_, to):
    """Whether a cast is allowed under PyTorch's casting rules (``torch.can_cast``)."""
    if type(from_) is not dtype:
        from_ = _dtype_arg("can_cast", "from_", 1, from_)
    if type(to) is not dtype:
        to = _dtype_arg("can_cast", "to", 2, to)
    if from_.category == COMPLEX and to.category != COMPLEX:
        return False
    if from_.category == FLOATING and to.category < FLOATING:
        return False
    if from_ is not bool_ and to is bool_:
        return False
    return True


# --- the default dtype ------------------------------------------------------------------------

_default = [float32]
ON_DEFAULT_CHANGE = []          # callbacks; caches that depend on the default dtype register here


def get_default_dtype():
    """The dtype of new floating-point tensors (float32 unless changed)."""
    return _default[0]


def set_default_dtype(d):
    """Set the dtype of new floating-point tensors; only floating dtypes are allowed."""
    if not isinstance(d, dtype):
        raise TypeError("invalid dtype object: only floating-point types are supported as the "
                        "default type")
    if d.category != FLOATING or d in FLOAT8:
        raise TypeError("only floating-point types are supported as the default type")
    _default[0] = d
    for callback in ON_DEFAULT_CHANGE:
        callback()


def default_complex_dtype():
    """The complex dtype matching the default float dtype."""
    return complex128 if _default[0] is float64 else complex64


# --- weak promotion: PyTorch's result_type over tensors, 0-dim tensors and scalars ------------

DIM, ZERO_DIM, SCALAR = 0, 1, 2


def _combine(higher, lower):
    """Merge the result of a stronger operand group with a weaker one (None = absent)."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.category == COMPLEX:
        return higher
    if lower.category == COMPLEX:
        # a float operand keeps its precision: float64 tensor * 1j -> complex128
        return higher.to_complex() if higher.category == FLOATING else lower
    if higher.category == FLOATING:
        return higher
    if higher is bool_ or lower.category == FLOATING:
        return _promote(higher, lower)
    return higher


def result_type_of(operands):
    """Promote ``(dtype, kind)`` pairs, kind being DIM, ZERO_DIM or SCALAR."""
    groups = [None, None, None]
    for d, kind in operands:
        if kind == SCALAR:
            if d.category == FLOATING:
                d = _default[0]
            elif d.category == COMPLEX:
                d = default_complex_dtype()
        g = groups[kind]
        groups[kind] = d if g is None else _promote(g, d)
    return _combine(groups[DIM], _combine(groups[ZERO_DIM], groups[SCALAR]))


def scalar_dtype(value):
    """The dtype PyTorch wraps a Python scalar in (before weak promotion)."""
    t = type(value)
    if t is bool or isinstance(value, (bool, np.bool_)):
        return bool_
    if t is int or isinstance(value, (int, np.integer)):
        return int64
    if t is float or isinstance(value, (float, np.floating)):
        return float64
    if isinstance(value, (complex, np.complexfloating)):
        return complex128
    raise TypeError(f"expected a number, got {type(value).__name__}")


# --- finfo / iinfo ----------------------------------------------------------------------------

_DEFAULT_TYPE = object()         # finfo() without an argument (an explicit None is an error)


class finfo:
    """Machine limits of a floating dtype (``torch.finfo``)."""

    def __init__(self, type=_DEFAULT_TYPE):
        if type is _DEFAULT_TYPE:
            type = get_default_dtype()
        elif type.__class__ is not dtype:
            type = _dtype_arg("finfo", "type", 1, type)
        if type.category not in (FLOATING, COMPLEX):
            raise TypeError("torch.finfo() requires a floating point input type. Use "
                            "torch.iinfo to handle 'torch.finfo'")
        real = type.to_real()
        info = ml_dtypes.finfo(real.np) if real in LOW_PRECISION else np.finfo(real.np)
        self.dtype = real.name
        self.bits = info.bits
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = float(info.tiny)
        self.smallest_normal = self.tiny
        # 10 ** -precision, precision being the decimal digits eps allows (a Python float,
        # not the nearest value of the dtype as NumPy's resolution is)
        self.resolution = 10.0 ** -int(-np.log10(self.eps))

    def __eq__(self, other):
        return isinstance(other, finfo) and self.dtype == other.dtype

    __hash__ = None             # (PyTorch's finfo and iinfo compare equal but do not hash)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:
    """Machine limits of an integral dtype (``torch.iinfo``)."""

    def __init__(self, type):
        if type.__class__ is not dtype:
            type = _dtype_arg("iinfo", "type", 1, type)
        if type is bool_:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if type.category != INTEGRAL:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo "
                            "to handle 'torch.iinfo'")
        info = np.iinfo(type.np)
        self.bits, self.min, self.max = info.bits, int(info.min), int(info.max)
        self.dtype = type.name

    def __eq__(self, other):
        return isinstance(other, iinfo) and self.dtype == other.dtype

    __hash__ = None

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
