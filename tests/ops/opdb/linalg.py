"""OpInfo entries for ember/ops/linalg.py: the matrix products and linalg.vander."""

import re

import numpy as np

import ember
from tests.ops.opdb.core import (ALL, COMPLEX, FLOATS, INTS, LOW, ErrorInput, OpInfo,
                                 SampleInput, make)

PRODUCT_DTYPES = FLOATS + LOW + INTS + COMPLEX        # no bool: PyTorch has no bool GEMM


def _pair_samples(shapes, noncontiguous=()):
    """Samples for a product of two tensors: (shape a, shape b) pairs, plus transposed and
    noncontiguous operands for the pairs listed in ``noncontiguous``."""
    def samples(dtype, requires_grad):
        for sa, sb in shapes:
            yield SampleInput(make(sa, dtype, requires_grad, low=-3, high=3),
                              (make(sb, dtype, requires_grad, low=-3, high=3),),
                              name=f"{list(sa)}x{list(sb)}")
        for sa, sb in noncontiguous:
            yield SampleInput(make(sa, dtype, requires_grad, low=-3, high=3, noncontiguous=True),
                              (_transposed(sb, dtype, requires_grad),),
                              name=f"noncontiguous {list(sa)}x{list(sb)}")
    return samples


def _transposed(shape, dtype, requires_grad):
    """A noncontiguous operand: a transposed view for matrices, a strided one for vectors."""
    if len(shape) < 2:
        return make(shape, dtype, requires_grad, low=-3, high=3, noncontiguous=True)
    t = make(shape[:-2] + shape[:-3:-1], dtype, low=-3, high=3).mT.detach()
    return t.requires_grad_(requires_grad and (dtype.is_floating_point or dtype.is_complex))


def _numpy_product(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.matmul(a, b)


def _no_bool(fn, kernel):
    def errors():
        yield from fn()
        t = ember.ones(2, 2, dtype=ember.bool)
        v = ember.ones(2, dtype=ember.bool)
        args = {"mm": (t, t), "mv": (t, v), "dot": (v, v), "bmm": (t[None], t[None]),
                "matmul": (t, t)}[kernel[0]]
        yield ErrorInput(SampleInput(args[0], (args[1],)), NotImplementedError,
                         f"\"{kernel[1]}\" not implemented for 'Bool'")
    return errors


def _mm_errors():
    f, d = ember.float32, ember.float64
    yield ErrorInput(SampleInput(ember.ones(4, 3), (ember.ones(5, 2),)), RuntimeError,
                     r"mat1 and mat2 shapes cannot be multiplied \(4x3 and 5x2\)")
    yield ErrorInput(SampleInput(ember.ones(2, 3, dtype=f), (ember.ones(3, 2, dtype=d),)),
                     RuntimeError, "expected m1 and m2 to have the same dtype, but got: "
                     "float != double")
    yield ErrorInput(SampleInput(ember.ones(2, 3, dtype=ember.int64), (ember.ones(3, 2),)),
                     RuntimeError, "but got: long int != float")
    yield ErrorInput(SampleInput(ember.ones(3), (ember.ones(3, 2),)), RuntimeError,
                     "self must be a matrix")
    yield ErrorInput(SampleInput(ember.ones(2, 3), (ember.ones(3),)), RuntimeError,
                     "mat2 must be a matrix")


def _bmm_errors():
    yield ErrorInput(SampleInput(ember.ones(2, 3, 4), (ember.ones(3, 4, 5),)), RuntimeError,
                     r"Expected size for first two dimensions of batch2 tensor to be: "
                     r"\[2, 4\] but got: \[3, 4\].")
    yield ErrorInput(SampleInput(ember.ones(2, 3, 4), (ember.ones(2, 5, 5),)), RuntimeError,
                     r"to be: \[2, 4\] but got: \[2, 5\].")
    yield ErrorInput(SampleInput(ember.ones(2, 3, 4), (ember.ones(4, 5),)), RuntimeError,
                     "batch2 must be a 3D tensor")
    yield ErrorInput(SampleInput(ember.ones(3, 4), (ember.ones(2, 4, 5),)), RuntimeError,
                     "batch1 must be a 3D tensor")
    yield ErrorInput(SampleInput(ember.ones(2, 3, 4), (ember.ones(2, 4, 5, dtype=ember.float64),)),
                     RuntimeError, "expected scalar type Float but found Double")


def _mv_errors():
    yield ErrorInput(SampleInput(ember.ones(3, 4), (ember.ones(5),)), RuntimeError,
                     r"size mismatch, got input \(3\), mat \(3x4\), vec \(5\)")
    yield ErrorInput(SampleInput(ember.ones(3), (ember.ones(5),)), RuntimeError,
                     "vector \\+ matrix @ vector expected, got 1, 1, 1")
    yield ErrorInput(SampleInput(ember.ones(3, 4), (ember.ones(4, 1),)), RuntimeError,
                     "vector \\+ matrix @ vector expected, got 1, 2, 2")
    yield ErrorInput(SampleInput(ember.ones(3, 4), (ember.ones(4, dtype=ember.float64),)),
                     RuntimeError, "addmv input tensors must have the same dtype, but got "
                     "Double, Float, and Double")


def _dot_errors():
    yield ErrorInput(SampleInput(ember.ones(3, 3), (ember.ones(3),)), RuntimeError,
                     "1D tensors expected, but got 2D and 1D tensors")
    yield ErrorInput(SampleInput(ember.ones(3), (ember.ones(4),)), RuntimeError,
                     r"inconsistent tensor size, expected tensor \[3\] and src \[4\] to have the "
                     r"same number of elements, but got 3 and 4 elements respectively")
    yield ErrorInput(SampleInput(ember.ones(3), (ember.ones(4, dtype=ember.float64),)),
                     RuntimeError, "dot : expected both vectors to have same dtype, but found "
                     "Float and Double")


def _outer_errors():
    yield ErrorInput(SampleInput(ember.ones(2, 2), (ember.ones(3),)), RuntimeError,
                     "outer: Expected 1-D argument self, but got 2-D")
    yield ErrorInput(SampleInput(ember.ones(3), (ember.ones(()),)), RuntimeError,
                     "outer: Expected 1-D argument vec2, but got 0-D")
    yield ErrorInput(SampleInput(ember.ones(3), (2,)), TypeError,
                     r"argument 'vec2' \(position 2\) must be Tensor, not int")


def _matmul_errors():
    one = ember.ones
    yield ErrorInput(SampleInput(ember.tensor(1.0), (one(3),)), RuntimeError,
                     "both arguments to matmul need to be at least 1D, but they are 0D and 1D")
    yield ErrorInput(SampleInput(one(3), (one(4),)), RuntimeError,
                     r"inconsistent tensor size, expected tensor \[3\] and src \[4\]")
    yield ErrorInput(SampleInput(one(2, 3), (one(4),)), RuntimeError,
                     r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)")
    yield ErrorInput(SampleInput(one(4), (one(3, 5),)), RuntimeError,
                     r"mat1 and mat2 shapes cannot be multiplied \(1x4 and 3x5\)")
    yield ErrorInput(SampleInput(one(5, 2, 3), (one(4),)), RuntimeError,
                     r"size mismatch, got input \(10\), mat \(10x3\), vec \(4\)")
    yield ErrorInput(SampleInput(one(6, 5, 2, 3), (one(4, 5),)), RuntimeError,
                     r"mat1 and mat2 shapes cannot be multiplied \(60x3 and 4x5\)")
    yield ErrorInput(SampleInput(one(5, 2, 3), (one(4, 3, 4),)), RuntimeError,
                     r"The size of tensor a \(5\) must match the size of tensor b \(4\) at "
                     r"non-singleton dimension 0")
    yield ErrorInput(SampleInput(one(2, 5, 2, 3), (one(3, 2, 3, 4),)), RuntimeError,
                     r"The size of tensor a \(5\) must match the size of tensor b \(2\) at "
                     r"non-singleton dimension 1")
    yield ErrorInput(SampleInput(one(2, 5, 2, 3), (one(5, 4, 2),)), RuntimeError,
                     r"Expected size for first two dimensions of batch2 tensor to be: "
                     r"\[10, 3\] but got: \[10, 4\].")
    yield ErrorInput(SampleInput(one(4), (one(5, 3, 2),)), RuntimeError,
                     r"to be: \[5, 4\] but got: \[5, 3\].")
    yield ErrorInput(SampleInput(one(2, 3, dtype=ember.float64), (one(3, 4),)), RuntimeError,
                     "expected m1 and m2 to have the same dtype, but got: double != float")
    yield ErrorInput(SampleInput(one(5, 2, 3), (one(5, 3, 4, dtype=ember.float64),)),
                     RuntimeError, "expected scalar type Float but found Double")
    yield ErrorInput(SampleInput(one(5, 2, 3), (one(3, dtype=ember.float64),)), RuntimeError,
                     "addmv input tensors must have the same dtype, but got Double, Float, and "
                     "Double")
    yield ErrorInput(SampleInput(one(3), (one(3, dtype=ember.float64),)), RuntimeError,
                     "dot : expected both vectors to have same dtype")
    yield ErrorInput(SampleInput(one(2, 3), (2,)), TypeError,
                     r"argument 'other' \(position 2\) must be Tensor, not int")
    b = one(2, 2, 3, dtype=ember.bool)
    yield ErrorInput(SampleInput(b, (b.mT,)), NotImplementedError,
                     "\"bmm\" not implemented for 'Bool'")
    yield ErrorInput(SampleInput(b, (one(3, dtype=ember.bool),)), NotImplementedError,
                     "\"addmv_impl_cpu\" not implemented for 'Bool'")


MATMUL_SHAPES = (((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                 ((2, 2, 3), (3,)), ((3,), (2, 3, 4)), ((2, 2, 3), (3, 4)), ((2, 3), (2, 3, 2)),
                 ((2, 1, 2, 3), (3, 3, 2)), ((2, 2, 3), (2, 3, 2)), ((0, 3), (3, 2)),
                 ((2, 0), (0, 2)), ((0,), (0,)), ((2, 0, 2, 3), (3,)), ((1, 3), (2, 0, 3, 2)))

# --- linalg.vander ----------------------------------------------------------------------------

def _vander_samples(dtype, requires_grad):
    low, high = (-2, 2) if dtype.is_floating_point or dtype.is_complex else (-3, 4)
    for shape, kw in (((3,), {}), ((4,), {"N": 6}), ((2, 3), {}), ((2, 3), {"N": 2}),
                      ((0,), {"N": 3}), ((2, 0), {"N": 3}), ((0, 2), {}), ((), {"N": 3}),
                      ((1,), {"N": 4})):
        yield SampleInput(make(shape, dtype, requires_grad, low=low, high=high), kwargs=kw,
                          name=f"{list(shape)} {kw}")
    yield SampleInput(make((2, 4), dtype, requires_grad, low=low, high=high,
                           noncontiguous=True), name="noncontiguous")
    if dtype.is_floating_point and not requires_grad:
        yield SampleInput(ember.tensor([0., 1., -1.], dtype=dtype), kwargs={"N": 4},
                          name="zero")


def _vander_ref(x, N=None):
    x = np.asarray(x)
    x = x.reshape(1) if x.ndim == 0 else x
    x = x.astype(np.int64) if x.dtype.kind in "iu" else x
    n = x.shape[-1] if N is None else N
    return x[..., None] ** np.arange(n)


def _vander_errors():
    x = ember.tensor([1., 2.])
    for dtype, name in ((ember.bool, "Bool"), (ember.float16, "Half"),
                        (ember.bfloat16, "BFloat16")):
        yield ErrorInput(SampleInput(x.to(dtype)), RuntimeError, re.escape(
            f"linalg.vander supports floating point, complex, and integer tensors, but got "
            f"{name}"))
    yield ErrorInput(SampleInput(x, kwargs={"N": 1}), RuntimeError, "N must be greater than 1.")
    yield ErrorInput(SampleInput(x, kwargs={"N": -1}), RuntimeError, "N must be greater than 1.")
    yield ErrorInput(SampleInput(ember.tensor(2.)), RuntimeError, "N must be greater than 1.")
    yield ErrorInput(SampleInput(ember.ones(0)), RuntimeError, "N must be greater than 1.")
    yield ErrorInput(SampleInput(x, kwargs={"N": 2.0}), TypeError,
                     "argument 'N' must be int, not float")
    yield ErrorInput(SampleInput(x, (3,)), TypeError, "takes 1 positional argument")


def _vander_result(dtype, sample):
    return dtype if dtype.is_floating_point or dtype.is_complex else ember.int64


def _int_mm_errors():
    a = ember.ones(2, 3, dtype=ember.int8)
    for args, match in (((a[None], a.T), "Expected self to be of dimension 2 but got 3"),
                        ((a, a), r"self.size\(1\) needs to match mat2.size\(0\) but got 3 and 2"),
                        ((a.int(), a.T), "Expected self dtype to be int8 or uint8 but got int"),
                        ((a, a.T.to(ember.uint8)),
                         "Expected mat2 dtype to be of type int8 but got unsigned char")):
        yield ErrorInput(SampleInput(args[0], args[1:]), RuntimeError, match, cpu_only=True)


def _weight_int8pack_samples(dtype, requires_grad):
    # K a multiple of 16: PyTorch 2.13's bfloat16 CPU kernel is wrong for other K (K=8 and
    # K=24 give garbage, K=1 NaN). No empty samples: their stride-0 arrays reach PyTorch as
    # tensors its kernel refuses (the round-31 quant _fixes file compares empty products).
    for m, n, k in ((3, 5, 16), (2, 3, 32), (1, 1, 16)):
        a = make((m, k), dtype, requires_grad, low=-3, high=3)
        b = make((n, k), ember.int8, low=-100, high=100)
        yield SampleInput(a, (b, make((n,), dtype, low=0.01, high=0.1)), name=f"{m}x{n}x{k}")
    a = make((3, 32), dtype, requires_grad, low=-3, high=3)[:, :16]      # rows strided
    yield SampleInput(a, (make((4, 16), ember.int8, low=-100, high=100),
                          make((4,), dtype, low=0.01, high=0.1)), name="strided_rows")


def _torch_weight_int8pack_mm(*args):
    """PyTorch's kernel on fresh copies: its bfloat16 path crashes on the 2-byte-aligned
    memory NumPy may hand ``from_numpy`` (clone keeps dense strides, so errors stay)."""
    return __import__("torch")._weight_int8pack_mm(*(t.clone() for t in args))


def _weight_int8pack_errors():
    a, b, s = ember.ones(3, 8), ember.ones(4, 8, dtype=ember.int8), ember.ones(4)
    where = "_weight_int8pack_mm_cpu : "
    for args, match in (((a.double(), b, s.double()),
                         "expect A to be either 32-bit or 16-bit float tensor."),
                        ((a[None], b, s), "expect A to be 2D tensor."),
                        ((a.t().contiguous().t(), b, s),
                         "A must be contiguous on the last dimension."),
                        ((a, b.int(), s), "expect B to be int8 tensor."),
                        ((a, b.t().contiguous().t(), s), "expect B to be contiguous."),
                        ((a, b[:, :4].contiguous(), s), r"expect B.size\(1\) == 8"),
                        ((a, b, s[:3]), "expect scales to be 1d tensor with size 4")):
        yield ErrorInput(SampleInput(args[0], args[1:]), RuntimeError, where + match,
                         cpu_only=True)
    yield ErrorInput(SampleInput(a, (b, s.bfloat16())), RuntimeError,
                     "expected scalar type Float but found BFloat16", cpu_only=True)


def _scaled_mm_samples(dtype, requires_grad):
    """float8 operands (values exact in e4m3), the result in ``dtype``."""
    def f8(shape):
        return make(shape, ember.float32, low=-4, high=4).to(ember.float8_e4m3fn)
    a, b = f8((16, 32)), f8((24, 32)).t()
    yield SampleInput(a, (b, ember.tensor(0.5), ember.tensor(2.0)), {"out_dtype": dtype},
                      name="tensorwise")
    yield SampleInput(a, (b, make((16, 1), ember.float32, low=0.5, high=2),
                          make((1, 24), ember.float32, low=0.5, high=2)),
                      {"out_dtype": dtype, "bias": make((24,), dtype, requires_grad)},
                      name="rowwise_bias")
    yield SampleInput(a[:1], (f8((16, 32)).t().contiguous(), ember.tensor([0.25]),
                              ember.tensor(4.0, dtype=ember.float64)), {"out_dtype": dtype},
                      name="row_major_mat2")


def _scaled_mm_ref(a, b, scale_a, scale_b, bias=None, out_dtype=None):
    out = (a.astype(np.float64) * scale_a.astype(np.float64).reshape(
        scale_a.shape if scale_a.size > 1 else ())) @ (
        b.astype(np.float64) * scale_b.astype(np.float64).reshape(
            scale_b.shape if scale_b.size > 1 else ()))
    return out if bias is None else out + bias


def _scaled_mm_errors():
    a = ember.ones(16, 32).to(ember.float8_e4m3fn)
    b, one = a.t(), ember.tensor(1.0)
    for args, kwargs, match in (
            ((a[0], b, one, one), {}, "mat1 must be a matrix"),
            ((a, b[:16], one, one), {}, r"mat1 and mat2 shapes cannot be multiplied "
                                        r"\(16x32 and 16x16\)"),
            ((a, b, one, one), {"bias": ember.ones(16, 16)}, "Bias must be size 16 but got 256"),
            ((a, b, one, one), {"out_dtype": ember.float64},
             "itensor_view_from_dense expects float/bfloat16/half/int8/fp8 tensor inputDouble"),
            ((a, b, one, one), {"bias": ember.ones(16, dtype=ember.int64)},
             "itensor_view_from_dense expects float/bfloat16/half/int8/fp8 tensor inputLong")):
        yield ErrorInput(SampleInput(args[0], args[1:], kwargs), RuntimeError, match,
                         cpu_only=True)
    yield ErrorInput(SampleInput(a, (b, ember.ones(16, 1), one)), ValueError,
                     r"Invalid scaling configuration.\n- For TensorWise scaling, a and b should "
                     r"be float8, scales should be float and singletons.\n- For RowWise "
                     r"scaling, a and b should be float8, scales should be float, scale_a should "
                     r"be \(16, 1\) and scale_b should be \(1, 16\), and both should be "
                     r"contiguous.\nGot mat_a.dtype\(\)=Float8_e4m3fn, scale_a.dtype\(\)=Float, "
                     r"scale_a.size\(\)=\[16, 1\], scale_a.stride\(\)=\[1, 1\], "
                     r"mat_b.dtype\(\)=Float8_e4m3fn, scale_b.dtype\(\)=Float, "
                     r"scale_b.size\(\)=\[\] and scale_b.stride\(\)=\[\]$", cpu_only=True)
    # row-wise scales must be contiguous
    yield ErrorInput(SampleInput(a, (b, ember.ones(16, 2)[:, :1], ember.ones(1, 16))), ValueError,
                     r"Invalid scaling configuration(.|\n)*scale_a.size\(\)=\[16, 1\], "
                     r"scale_a.stride\(\)=\[2, 1\]", cpu_only=True)


def _torch_scaled_mm(*args, **kwargs):
    """PyTorch's kernel on fresh copies of the matrices and bias (see
    _torch_weight_int8pack_mm); the float32 scales as given (their strides matter)."""
    args = tuple(t.clone() for t in args[:2]) + args[2:]
    kwargs = {k: v.clone() if hasattr(v, "clone") else v for k, v in kwargs.items()}
    return __import__("torch")._scaled_mm(*args, **kwargs)


OPS = [
    OpInfo("_int_mm", lambda a, b: np.matmul(a.astype(np.int32), b.astype(np.int32)),
           _pair_samples((((2, 8), (8, 3)), ((0, 8), (8, 2)), ((2, 0), (0, 3))),
                         noncontiguous=(((3, 8), (8, 4)),)),
           dtypes=(ember.int8,), result_dtype=lambda d, s: ember.int32, grad=False,
           error_inputs=_int_mm_errors),
    OpInfo("_weight_int8pack_mm",
           lambda a, b, s: (a.astype(np.float64) @ b.astype(np.float64).T) * s,
           _weight_int8pack_samples, dtypes=(ember.float32,) + LOW, grad=False,
           error_inputs=_weight_int8pack_errors, torch_op=_torch_weight_int8pack_mm),
    OpInfo("_scaled_mm", _scaled_mm_ref, _scaled_mm_samples, dtypes=(ember.float32,) + LOW,
           grad=False, error_inputs=_scaled_mm_errors, torch_op=_torch_scaled_mm,
           # float32 sums of 32 products of magnitude ~100 (order noise, near-zero results)
           parity_tol={ember.float32: (1e-5, 1e-4)}),
    OpInfo("mm", _numpy_product,
           _pair_samples((((2, 3), (3, 4)), ((0, 3), (3, 2)), ((2, 0), (0, 3)), ((1, 1), (1, 1))),
                         noncontiguous=(((3, 2), (2, 4)),)),
           dtypes=PRODUCT_DTYPES, gradgrad=True, error_inputs=_no_bool(_mm_errors,
                                                                      ("mm", "addmm_impl_cpu_"))),
    OpInfo("bmm", _numpy_product,
           _pair_samples((((2, 2, 3), (2, 3, 2)), ((0, 2, 3), (0, 3, 4)), ((2, 1, 0), (2, 0, 3))),
                         noncontiguous=(((2, 3, 2), (2, 2, 2)),)),
           dtypes=PRODUCT_DTYPES, gradgrad=True,
           error_inputs=_no_bool(_bmm_errors, ("bmm", "bmm"))),
    OpInfo("mv", _numpy_product,
           _pair_samples((((2, 3), (3,)), ((0, 3), (3,)), ((2, 0), (0,))),
                         noncontiguous=(((3, 2), (2,)),)),
           dtypes=PRODUCT_DTYPES, gradgrad=True,
           error_inputs=_no_bool(_mv_errors, ("mv", "addmv_impl_cpu"))),
    OpInfo("dot", _numpy_product, _pair_samples((((4,), (4,)), ((0,), (0,)), ((1,), (1,)))),
           dtypes=PRODUCT_DTYPES, gradgrad=True,
           error_inputs=_no_bool(_dot_errors, ("dot", "dot"))),
    OpInfo("outer", np.outer, _pair_samples((((2,), (3,)), ((0,), (3,)), ((1,), (1,))),
                                            noncontiguous=(((3,), (2,)),)),
           dtypes=ALL, gradgrad=True, error_inputs=_outer_errors),
    OpInfo("matmul", _numpy_product,
           _pair_samples(MATMUL_SHAPES, noncontiguous=(((2, 3), (3, 2)), ((2, 2, 3), (2, 3, 2)),
                                                       ((2, 3, 2), (2,)))),
           dtypes=PRODUCT_DTYPES, gradgrad=True, error_inputs=_matmul_errors),
    OpInfo("linalg.vander", _vander_ref, _vander_samples, dtypes=FLOATS + COMPLEX + INTS,
           result_dtype=_vander_result, gradgrad=True, error_inputs=_vander_errors),
]
