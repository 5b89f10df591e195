"""The OpInfo record: what the generic op tests need to know about one registered op.

An entry gives sample inputs (including broadcasting, empty, 0-dim and non-contiguous cases),
a NumPy/SciPy reference, the dtypes the op supports, the dtype its result must have, and the
errors bad inputs must raise. ``tests/ops/test_opinfo.py`` runs every check from these.
"""

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import ember
from ember._host_values import host_values
from ember.testing import make_tensor

FLOATS = (ember.float32, ember.float64)
LOW = (ember.float16, ember.bfloat16)
INTS = (ember.uint8, ember.int8, ember.int16, ember.int32, ember.int64)
COMPLEX = (ember.complex64, ember.complex128)
ALL_REAL = FLOATS + LOW + INTS + (ember.bool,)
ALL = ALL_REAL + COMPLEX


@dataclass
class SampleInput:
    """One call: ``fn(input, *args, **kwargs)``; ``input`` may be a list (``cat``)."""

    input: Any
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    name: str = ""

    def __repr__(self):
        def show(x):
            if isinstance(x, ember.Tensor):
                extra = "" if x.is_contiguous() else ", noncontiguous"
                return f"T{list(x.shape)}:{x.dtype.name}{extra}"
            if isinstance(x, (list, tuple)):
                return "[" + ", ".join(show(y) for y in x) + "]"
            return repr(x)
        parts = [show(self.input)] + [show(a) for a in self.args]
        parts += [f"{k}={show(v)}" for k, v in self.kwargs.items()]
        return f"{self.name or 'sample'}({', '.join(parts)})"


@dataclass
class ErrorInput:
    """A call that must raise ``error_type`` with a message matching ``match``."""

    sample: SampleInput
    error_type: type
    match: str
    # ember does not support this call yet; PyTorch does (the parity tests check that)
    unsupported: bool = False
    # PyTorch (and ember) refuse the call on the CPU only: its CUDA kernel takes it
    cpu_only: bool = False


@dataclass
class OpInfo:
    """Test data for one registered op (``name`` is its registry name)."""

    name: str
    # ref(*numpy args, **kwargs) -> ndarray or tuple; None skips the value check
    ref: Callable | None
    # sample_inputs(dtype, requires_grad) -> iterable of SampleInput
    sample_inputs: Callable
    dtypes: tuple = FLOATS
    # "same" (input dtype), "float" (ints/bool -> default float), "bool", "int64",
    # or a callable(input dtype, sample) -> dtype
    result_dtype: Any = "same"
    # the callable under test; default: the op's public function
    op: Callable | None = None
    grad: bool = True                       # float64 gradcheck (when float64 is in dtypes)
    grad_samples: Callable | None = None    # samples for the gradient checks, if not the above
    gradgrad: bool = False                  # also gradgradcheck
    error_inputs: Callable | None = None    # () -> iterable of ErrorInput
    tol: dict = field(default_factory=dict)  # dtype -> (rtol, atol) for the forward check
    skips: tuple = ()                       # names of generic tests that do not apply
    torch_name: str | None = None           # name in torch, for the parity tests
    torch_op: Callable | None = None        # or a callable taking torch tensors
    # dtype -> (rtol, atol) against torch (tests/parity), where torch rounds less exactly
    parity_tol: dict = field(default_factory=dict)

    def function(self):
        return self.op or ember.ops._registry.REGISTRY[self.name].function

    def expected_dtype(self, dtype, sample=None):
        rule = self.result_dtype
        if callable(rule):
            return rule(dtype, sample)
        if rule == "same":
            return dtype
        if rule == "float":
            return dtype if dtype.is_floating_point or dtype.is_complex else \
                ember.get_default_dtype()
        if rule == "bool":
            return ember.bool
        if rule == "int64":
            return ember.int64
        raise ValueError(rule)


def to_numpy(x):
    """Sample values for the reference: tensors become arrays (16-bit floats as float32)."""
    if isinstance(x, ember.Tensor):
        arr = host_values(x)
        if x.dtype in (ember.bfloat16, ember.float16, ember.float8_e4m3fn, ember.float8_e5m2):
            arr = arr.astype(np.float32)
        return arr
    if isinstance(x, (list, tuple)):
        return type(x)(to_numpy(y) for y in x)
    if isinstance(x, dict):
        return {k: to_numpy(v) for k, v in x.items()}
    return x


def tensor_args(sample):
    """The tensors of a sample, in order (what gradcheck differentiates)."""
    found = []

    def walk(x):
        if isinstance(x, ember.Tensor):
            found.append(x)
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
    walk(sample.input)
    for a in sample.args:
        walk(a)
    for v in sample.kwargs.values():
        walk(v)
    return found


def replace_tensors(sample, new):
    """The sample with its tensors replaced, in order, by ``new``."""
    it = iter(new)

    def walk(x):
        if isinstance(x, ember.Tensor):
            return next(it)
        if isinstance(x, (list, tuple)):
            return type(x)(walk(y) for y in x)
        return x
    return SampleInput(walk(sample.input), tuple(walk(a) for a in sample.args),
                       {k: walk(v) for k, v in sample.kwargs.items()}, sample.name)


def make(shape, dtype, requires_grad=False, **kw):
    """make_tensor with requires_grad only for dtypes that can have it."""
    rg = requires_grad and (dtype.is_floating_point or dtype.is_complex)
    return make_tensor(shape, dtype=dtype, requires_grad=rg, **kw)


# Shapes most elementwise samples use: plain, 0-dim, empty, and a larger 3-D case.
UNARY_SHAPES = ((5,), (), (0,), (2, 3, 4))


def unary_samples(low=None, high=None, exclude_zero=False, shapes=UNARY_SHAPES):
    """A sample_inputs function for one-input elementwise ops, noncontiguous case included."""
    def samples(dtype, requires_grad):
        for shape in shapes:
            yield SampleInput(make(shape, dtype, requires_grad, low=low, high=high,
                                   exclude_zero=exclude_zero), name=f"shape{list(shape)}")
        yield SampleInput(make((3, 4), dtype, requires_grad, low=low, high=high,
                               exclude_zero=exclude_zero, noncontiguous=True),
                          name="noncontiguous")
    return samples


BINARY_SHAPES = (((5,), (5,)), ((), ()), ((2, 3), (3,)), ((4, 1), (1, 5)), ((0, 3), (3,)),
                 ((2, 3), ()))


def binary_samples(low=None, high=None, rhs_low=None, rhs_high=None, exclude_zero=False,
                   scalars=(2, 0.5), shapes=BINARY_SHAPES):
    """Samples for two-input elementwise ops: broadcasting, 0-dim, empty, scalar operands."""
    def samples(dtype, requires_grad):
        lo2 = low if rhs_low is None else rhs_low
        hi2 = high if rhs_high is None else rhs_high
        for sa, sb in shapes:
            yield SampleInput(make(sa, dtype, requires_grad, low=low, high=high),
                              (make(sb, dtype, requires_grad, low=lo2, high=hi2,
                                    exclude_zero=exclude_zero),),
                              name=f"{list(sa)}x{list(sb)}")
        yield SampleInput(make((3, 4), dtype, requires_grad, low=low, high=high,
                               noncontiguous=True),
                          (make((3, 4), dtype, requires_grad, low=lo2, high=hi2,
                                exclude_zero=exclude_zero, noncontiguous=True),),
                          name="noncontiguous")
        for s in scalars:
            if isinstance(s, float) and not (dtype.is_floating_point or dtype.is_complex):
                continue
            if dtype is ember.bool or (s < 0 and dtype is ember.uint8):
                continue            # a number of a higher category changes the result dtype
            yield SampleInput(make((2, 3), dtype, requires_grad, low=low, high=high), (s,),
                              name=f"scalar_{s}")
    return samples
