"""OpInfo entries for the registered ops of ember/ops/odds.py: dist and cdist (distances.py),
aminmax (moments.py) and block_diag (arrange.py). The compositions there are tested in
tests/ops/test_odds.py."""

import math

import numpy as np

import ember
from ember import _dtype as D
from tests.ops.opdb.core import (ALL, ALL_REAL, COMPLEX, FLOATS, LOW, ErrorInput, OpInfo,
                                 SampleInput, make)


def _s(x, *args, name="", **kwargs):
    return SampleInput(x, args, kwargs, name=name)


def _err(x, args, error, match, **kwargs):
    return ErrorInput(SampleInput(x, args, kwargs), error, match)


# --- dist -------------------------------------------------------------------------------------

def _dist_ref(a, b, p=2):
    diff = np.abs(np.asarray(a) - np.asarray(b)).astype(np.float64).reshape(-1)
    p = float(p)
    if p == 0:
        out = (diff != 0).sum()
    elif p == math.inf:
        out = diff.max()
    elif p == -math.inf:
        out = diff.min()
    else:
        with np.errstate(divide="ignore"):      # 0 ** -p is inf, and the norm 0
            out = (diff ** p).sum() ** (1 / p)
    return np.asarray(out)


DIST_P = (2, 1, 0, 3, 0.5, 1.5, math.inf, -math.inf, -1, -0.5)


def _dist_samples(dtype, rg):
    def mk(*shape, **kw):
        return make(shape, dtype, rg, low=-2, high=2, **kw)
    for p in DIST_P:
        yield _s(mk(2, 3), mk(2, 3), p, name=f"p={p}")
    yield _s(mk(2, 3), mk(3), name="broadcast")
    yield _s(mk(4, 1), mk(1, 3), p=3, name="broadcast_both")
    yield _s(mk(), mk(), name="0dim")
    yield _s(mk(3, 4, noncontiguous=True), mk(4, 3).t(), 1.5, name="noncontiguous")
    yield _s(mk(2, 3), make((), ember.float64, rg, low=-2, high=2), name="float64_0dim")
    if not rg:
        for p in (0, 2, 1):
            yield _s(mk(0, 3), mk(3), p, name=f"empty_p={p}")
        x = mk(2, 3)
        yield _s(x, x.clone(), name="zero_difference")
        yield _s(x, x.clone(), -1, name="zero_difference_p=-1")


def _dist_grad_samples(dtype, rg):
    # PyTorch's backward fails for p=0 (ember's gradient is 0): not compared
    yield from (s for s in _dist_samples(dtype, rg) if s.name != "p=0")
    # PyTorch's subgradient 0 where a difference (or the distance) is 0; 13 elements, so that
    # gradgradcheck skips these points, where the gradient jumps
    x = ember.arange(13, dtype=dtype) / 4
    step = ember.tensor([0.] + [1.] * 12, dtype=dtype)
    for p in (2, 1, 3, 0.5, 1.5, -1):
        yield _s(x.clone().requires_grad_(), (x + step).requires_grad_(), p,
                 name=f"one_zero_p={p}")
    yield _s(x.clone().requires_grad_(), x.clone().requires_grad_(), name="all_zero")


def _dist_dtype(dtype, sample):
    return dtype.to_real() if dtype.is_complex else dtype


def _dist_errors():
    f = ember.ones
    yield _err(f(3, dtype=ember.int64), (f(3, dtype=ember.int64),), RuntimeError,
               r"norm\(\): input dtype should be either floating point or complex. Got Long "
               r"instead.")
    yield _err(f(3, dtype=ember.int32), (f(3, dtype=ember.int8),), RuntimeError,
               "Got Int instead.")
    yield _err(f(3, dtype=ember.bool), (f(3, dtype=ember.bool),), RuntimeError,
               "with two bool tensors is not supported")
    yield _err(f(3, dtype=ember.bool), (f(3),), RuntimeError, "with a bool tensor is not supported")
    yield _err(f(3), (f(3),), RuntimeError,
               "linalg.vector_norm: Expected a non-complex scalar as the order of norm.", p=1j)
    yield _err(f(3), (f(3), "fro"), TypeError,
               r"dist\(\): argument 'p' \(position 3\) must be Number, not str")
    yield _err(f(3), (1.0,), TypeError,
               r"dist\(\): argument 'other' \(position 2\) must be Tensor, not float")
    yield _err(f(2), (f(3),), RuntimeError,
               r"The size of tensor a \(2\) must match the size of tensor b \(3\)")
    yield _err(f(0), (f(0),), RuntimeError,
               "linalg.vector_norm cannot compute the inf norm on an empty tensor because the "
               "operation does not have an identity", p=math.inf)
    yield _err(f(0, 3), (f(3),), RuntimeError,
               "linalg.vector_norm cannot compute the -1 norm on an empty tensor", p=-1)


# --- cdist ------------------------------------------------------------------------------------

def _cdist_ref(a, b, p=2.0, compute_mode=None):
    diff = np.abs(a[..., :, None, :] - b[..., None, :, :]).astype(np.float64)
    if p == 0:
        out = (diff != 0).sum(-1)
    elif math.isinf(p):
        out = diff.max(-1, initial=0)
    else:
        out = (diff ** p).sum(-1) ** (1 / p)
    return out.astype(a.dtype)


P_VALUES = (2.0, 1, 0, float("inf"), 3, 0.5)


def _pdist_ref(x, p=2):
    rows, cols = np.triu_indices(x.shape[0], 1)
    return _cdist_ref(x, x, p)[rows, cols]


def _pdist_samples(dtype, rg):
    for p in P_VALUES:
        yield _s(make((4, 3), dtype, rg, low=-2, high=2), p, name=f"p={p}")
    yield _s(make((3, 4), dtype, rg, low=-2, high=2, noncontiguous=True), name="noncontiguous")
    yield _s(make((1, 3), dtype, rg), name="one_row")
MM = "use_mm_for_euclid_dist"


def _cdist_samples(dtype, rg):
    def mk(*shape, **kw):
        return make(shape, dtype, rg, low=-2, high=2, **kw)
    for p in P_VALUES:
        yield _s(mk(2, 3), mk(3, 3), p=p, name=f"p={p}")
    yield _s(mk(2, 2, 3), mk(2, 3, 3), name="batched")
    yield _s(mk(2, 1, 2, 3), mk(3, 4, 3), 1, name="broadcast_batch")
    yield _s(mk(2, 3), mk(2, 3, 3), float("inf"), name="2d_with_3d")
    yield _s(mk(2, 3, noncontiguous=True), mk(3, 4).t(), 3, name="noncontiguous")
    yield _s(mk(2, 3), mk(3, 3), compute_mode=MM, name="mm")
    yield _s(mk(2, 2, 3), mk(1, 3, 3), 2, MM, name="mm_batched")
    if not rg:                          # (no gradients at zero distances: see test_odds.py)
        # more than 25 rows: "if necessary" takes the matrix-product path, "donot" does not
        yield _s(mk(30, 3), mk(4, 3), name="mm_if_necessary")
        yield _s(mk(4, 3), mk(30, 3), compute_mode="donot_use_mm_for_euclid_dist",
                 name="no_mm")
        for p in (2, 1, float("inf")):
            yield _s(mk(0, 3), mk(4, 3), p=p, name=f"empty_rows_p={p}")
            yield _s(mk(2, 0), mk(4, 0), p=p, name=f"no_columns_p={p}")
        yield _s(mk(0, 2, 3), mk(0, 4, 3), name="empty_batch")
        same = ember.tensor([[0., 0], [1, 2], [1, 1]], dtype=dtype)
        for p in (2, 1, float("inf"), 0.5):
            yield _s(same, same[[2, 1]], p=p, name=f"zero_distances_p={p}")


def _cdist_errors():
    f = ember.ones
    yield _err(f(3), (f(2, 3),), RuntimeError,
               "cdist only supports at least 2D tensors, X1 got: 1D")
    yield _err(f(2, 3), (f(3),), RuntimeError,
               "cdist only supports at least 2D tensors, X2 got: 1D")
    yield _err(f(3, 3), (f(3, 4),), RuntimeError,
               "X1 and X2 must have the same number of columns. X1: 3 X2: 4")
    yield _err(f(2, 3, dtype=ember.int32), (f(2, 3),), RuntimeError,
               "cdist only supports floating-point dtypes, X1 got: Int")
    yield _err(f(2, 3), (f(2, 3, dtype=ember.complex64),), RuntimeError,
               "cdist only supports floating-point dtypes, X2 got: ComplexFloat")
    yield _err(f(2, 3), (f(2, 3),), RuntimeError, "cdist only supports non-negative p values",
               p=-1)
    yield _err(f(2, 3), (f(2, 3),), RuntimeError, "cdist only supports non-negative p values",
               p=float("nan"))
    yield _err(f(2, 2, 3), (f(3, 2, 3),), RuntimeError,
               r"The size of tensor a \(2\) must match the size of tensor b \(3\) at "
               r"non-singleton dimension 0")
    yield _err(f(2, 3), (f(2, 3, dtype=ember.float64),), RuntimeError,
               "expected scalar type Float but found Double")
    yield _err(f(2, 3, dtype=ember.float64), (f(2, 3),), RuntimeError,
               "expected m1 and m2 to have the same dtype, but got: double != float",
               compute_mode=MM)
    yield _err(f(2, 3, dtype=ember.float16), (f(2, 3, dtype=ember.float16),),
               NotImplementedError, "\"cdist\" not implemented for 'Half'")
    yield _err(f(2, 3), (f(2, 3),), ValueError, "foo is not a valid value for compute_mode",
               compute_mode="foo")
    yield _err(f(2, 3), (f(2, 3),), TypeError, "must be float, not complex", p=1j)


# --- aminmax ----------------------------------------------------------------------------------

def _aminmax_ref(x, dim=None, keepdim=False):
    axis = None if dim is None or x.ndim == 0 else dim % x.ndim
    return np.min(x, axis=axis, keepdims=keepdim), np.max(x, axis=axis, keepdims=keepdim)


def _aminmax_samples(dtype, rg):
    def mk(*shape, **kw):
        return make(shape, dtype, rg, **kw)
    yield _s(mk(2, 3, 2), name="all")
    yield _s(mk(2, 3, 2), keepdim=True, name="all_keepdim")
    yield _s(mk(2, 3, 2), dim=1, name="dim")
    yield _s(mk(2, 3, 2), dim=-1, keepdim=True, name="dim_keepdim")
    yield _s(mk(), name="0d")
    yield _s(mk(), dim=0, keepdim=True, name="0d_dim")
    yield _s(mk(3, 4, noncontiguous=True), dim=0, name="noncontiguous")
    yield _s(mk(0, 3), dim=1, name="empty_output")
    if not rg:
        ties = ember.tensor([[1, 3, 3, 0], [2, 2, 1, 2], [0, 0, 0, 0]]).to(dtype)
        yield _s(ties, dim=1, name="ties")
        yield _s(ties, name="ties_all")
        if dtype.is_floating_point:
            nan = mk(3, 4)
            nan[0, 1] = float("nan")
            yield _s(nan, dim=1, name="nan")
            yield _s(nan, name="nan_all")


def _aminmax_errors():
    yield _err(ember.ones(0, 3), (), RuntimeError,
               r"aminmax\(\): cannot compute aminmax over an empty dimension as the operation "
               r"has no identity.")
    yield _err(ember.ones(0, 3), (), IndexError,
               "aminmax: Expected reduction dim 0 to have non-zero size.", dim=0)
    yield _err(ember.ones(2, dtype=ember.complex64), (), NotImplementedError,
               "\"aminmax_cpu\" not implemented for 'ComplexFloat'")
    yield _err(ember.ones(2, 3), (), TypeError, r"aminmax\(\): argument 'dim' must be int, not "
               r"tuple", dim=(0, 1))
    yield _err(ember.ones(2, 3), (), IndexError,
               r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)",
               dim=2)


# --- block_diag -------------------------------------------------------------------------------

def _block_diag_ref(*arrays):
    blocks = [np.atleast_2d(a) for a in arrays]
    out = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)),
                   np.result_type(*arrays))
    r = c = 0
    for b in blocks:
        out[r:r + b.shape[0], c:c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    return out


def _block_diag_samples(dtype, rg):
    def mk(*shape, **kw):
        return make(shape, dtype, rg, **kw)
    yield _s(mk(2, 2), mk(1, 3), name="matrices")
    yield _s(mk(2, 2), mk(), mk(2), name="0d_and_1d")
    yield _s(mk(3, 2), name="single")
    yield _s(mk(0, 3), mk(2, 2), mk(0), mk(3, 0), name="empty_blocks")
    yield _s(mk(3, 4, noncontiguous=True), mk(2, 3).t(), name="noncontiguous")
    if dtype is not ember.float64:
        yield _s(mk(2, 2), make((2,), ember.float64), name="promotes")
        yield _s(make((), ember.float64), mk(2, 2), name="0d_is_weak")


def _block_diag_dtype(dtype, sample):
    operands = [(t.dtype, D.ZERO_DIM if t.ndim == 0 else D.DIM)
                for t in (sample.input,) + sample.args]
    return D.result_type_of(operands)


def _block_diag_errors():
    yield _err(ember.ones(2, 2), (ember.ones(2, 2, 2),), RuntimeError,
               "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input 1 has 3 "
               "dimensions")
    yield _err(ember.ones(2, 2), (3,), TypeError, "Tensor")


OPS = [
    OpInfo("dist", _dist_ref, _dist_samples, dtypes=FLOATS + LOW + COMPLEX,
           result_dtype=_dist_dtype, grad_samples=_dist_grad_samples, gradgrad=True,
           error_inputs=_dist_errors, skips=("grad_complex",)),   # real grad samples only
    # the public cdist checks compute_mode before the op runs (a ValueError, as in PyTorch)
    # no gradgradcheck: as PyTorch's, the direct kernel's gradients refuse double backward
    # (the matrix-product form's are checked against torch in
    # tests/parity/test_parity_programs_round23_geometry_fixes.py)
    OpInfo("cdist", _cdist_ref, _cdist_samples, dtypes=FLOATS,
           error_inputs=_cdist_errors, op=ember.cdist),
    # pdist's kernel; no gradgradcheck: PyTorch's _pdist_backward refuses double backward
    OpInfo("_pdist_forward", _pdist_ref, _pdist_samples, dtypes=FLOATS,
           torch_name="nn.functional.pdist"),
    OpInfo("aminmax", _aminmax_ref, _aminmax_samples, dtypes=ALL_REAL, gradgrad=True,
           error_inputs=_aminmax_errors),
    OpInfo("block_diag", _block_diag_ref, _block_diag_samples, dtypes=ALL,
           result_dtype=_block_diag_dtype, gradgrad=True, error_inputs=_block_diag_errors),
]
