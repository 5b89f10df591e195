"""The compositions of ember/ops/odds.py (meshgrid, cartesian_prod, combinations, tril/triu_indices,
vander, atleast_*, rot90, h/v/dsplit, column_stack, row_stack, diagflat, type_as, cov, corrcoef,
pdist, block_diag's front end), the subgradients of cdist and aminmax that finite differences
cannot check, and the PyTorch functions this family relies on that already existed."""

import itertools
import warnings

import numpy as np
import pytest
import scipy.spatial.distance

import ember
from ember.autograd import gradcheck, gradgradcheck


def _np(t):
    return np.asarray(t.detach())


def _same(a, b, exact=True):
    assert tuple(a.shape) == np.shape(b), (a.shape, np.shape(b))
    if exact:
        np.testing.assert_array_equal(_np(a), b)
    else:
        np.testing.assert_allclose(_np(a), b, rtol=1e-6, atol=1e-9)


def _x(*shape, dtype=ember.float64, requires_grad=False, seed=0):
    ember.manual_seed(seed)
    return ember.randn(shape, dtype=dtype, requires_grad=requires_grad)


def _t(data, dtype=ember.float64, requires_grad=False):
    return ember.tensor(data, dtype=dtype, requires_grad=requires_grad)


def _grad(fn, *inputs):
    out = fn(*inputs)
    weights = ember.arange(1., out.numel() + 1, dtype=out.dtype).reshape(out.shape)
    return ember.autograd.grad((out * weights).sum(), inputs)


# --- meshgrid, cartesian_prod, combinations ------------------------------------------------------

@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_matches_numpy(indexing):
    a, b, c = _x(3), _x(2, seed=1), _x(4, seed=2)
    for tensors in [(a,), (a, b), (a, b, c), (_t(5.), b), (a, ember.ones(0, dtype=a.dtype))]:
        grids = ember.meshgrid(*tensors, indexing=indexing)
        want = np.meshgrid(*[np.atleast_1d(_np(t)) for t in tensors], indexing=indexing)
        assert isinstance(grids, tuple) and len(grids) == len(want)
        for g, w in zip(grids, want):
            _same(g, w)
    lists = ember.meshgrid([a, b], indexing=indexing)
    for g, w in zip(lists, ember.meshgrid(a, b, indexing=indexing)):
        _same(g, _np(w))


def test_meshgrid_outputs_are_expanded_views():
    a, b = _x(3), _x(2, seed=1)
    x, y = ember.meshgrid(a, b, indexing="xy")
    assert x._base is a and y._base is b
    assert x.stride() == (0, 1) and y.stride() == (1, 0)


def test_meshgrid_warns_without_indexing():
    a, b = _x(3), _x(2, seed=1)
    with pytest.warns(UserWarning, match="it will be required to pass the indexing argument"):
        grids = ember.meshgrid(a, b)
    for g, w in zip(grids, ember.meshgrid(a, b, indexing="ij")):
        _same(g, _np(w))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.meshgrid(a, b, indexing="ij")


@pytest.mark.parametrize("call,error,match", [
    (lambda: ember.meshgrid(indexing="ij"), RuntimeError, "expects a non-empty TensorList"),
    (lambda: ember.meshgrid(ember.ones(2), ember.ones(2, dtype=ember.int64), indexing="ij"),
     RuntimeError, "meshgrid expects all tensors to have the same dtype"),
    (lambda: ember.meshgrid(ember.ones(2), ember.ones(2, 2), indexing="ij"), RuntimeError,
     "Expected 0D or 1D tensor in the tensor list"),
    (lambda: ember.meshgrid(ember.ones(2), ember.ones(2, 2), indexing="foo"), RuntimeError,
     "indexing must be one of \"xy\" or \"ij\", but received: foo"),
    (lambda: ember.meshgrid(ember.ones(2), indexing=3), TypeError, "must be str, not int"),
    (lambda: ember.meshgrid(ember.ones(2), 3, indexing="ij"), TypeError,
     "expected Tensor as element 1 in argument 0, but got int"),
])
def test_meshgrid_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_meshgrid_gradients():
    a, b = _x(3, requires_grad=True), _x(2, requires_grad=True, seed=1)
    assert gradcheck(lambda a, b: ember.meshgrid(a, b, indexing="xy"), (a, b))
    assert gradgradcheck(lambda a, b: ember.meshgrid(a, b, indexing="ij"), (a, b))


def test_cartesian_prod_matches_itertools():
    a, b, c = _t([1, 2, 3], ember.int64), _t([4, 5], ember.int64), _t([6, 7], ember.int64)
    _same(ember.cartesian_prod(a, b), np.array(list(itertools.product([1, 2, 3], [4, 5]))))
    _same(ember.cartesian_prod(a, b, c),
          np.array(list(itertools.product([1, 2, 3], [4, 5], [6, 7]))))
    assert ember.cartesian_prod(a) is a
    assert ember.cartesian_prod(a, ember.ones(0, dtype=ember.int64)).shape == (0, 2)
    with pytest.raises(RuntimeError, match=r"Expect a 1D vector, but got shape \[\]"):
        ember.cartesian_prod(ember.tensor(1), a)
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.cartesian_prod(a, b.double())
    with pytest.raises(RuntimeError, match="non-empty TensorList"):
        ember.cartesian_prod()
    with pytest.raises(TypeError, match="but got list"):
        ember.cartesian_prod([a, b])
    x, y = _x(3, requires_grad=True), _x(2, requires_grad=True, seed=1)
    assert gradcheck(ember.cartesian_prod, (x, y))


@pytest.mark.parametrize("r", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("with_replacement", [False, True])
def test_combinations_match_itertools(r, with_replacement):
    values = [1.5, 2.5, 3.5, 4.5]
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    got = ember.combinations(_t(values), r, with_replacement)
    if r == 0:
        assert got.shape == (0,) and got.dtype is ember.float64
        return
    _same(got, np.array(list(pick(values, r))).reshape(-1, r))


def test_combinations_edge_cases():
    assert ember.combinations(ember.ones(0)).shape == (0, 2)
    assert ember.combinations(ember.ones(0), 1).shape == (0, 1)
    assert ember.combinations(ember.tensor([True, False])).dtype is ember.bool
    _same(ember.combinations(ember.arange(6.)[::2]), np.array([[0., 2], [0, 4], [2, 4]],
                                                               np.float32))
    with pytest.raises(RuntimeError, match="Expect a non-negative number, but got -1"):
        ember.combinations(ember.ones(3), -1)
    with pytest.raises(RuntimeError, match=r"Expect a 1D vector, but got shape \[2, 2\]"):
        ember.combinations(ember.ones(2, 2))
    with pytest.raises(TypeError, match="argument 'r' \\(position 2\\) must be int, not float"):
        ember.combinations(ember.ones(3), 2.0)
    x = _x(4, requires_grad=True)
    assert gradcheck(lambda x: ember.combinations(x, 3, True), (x,))


# --- tril_indices, triu_indices, vander ----------------------------------------------------------

@pytest.mark.parametrize("row,col,offset", [(3, 3, 0), (3, 4, 1), (3, 4, -1), (4, 3, 2),
                                            (3, 4, -5), (3, 4, 10), (0, 4, 0), (3, 0, 0)])
def test_triangle_indices_match_numpy(row, col, offset):
    lower = ember.tril_indices(row, col, offset)
    upper = ember.triu_indices(row, col, offset)
    assert lower.dtype is ember.int64 and upper.dtype is ember.int64
    _same(lower, np.array(np.tril_indices(row, offset, col)).reshape(2, -1))
    _same(upper, np.array(np.triu_indices(row, offset, col)).reshape(2, -1))


def test_triangle_indices_options_and_errors():
    assert ember.tril_indices(3, 3, dtype=ember.int32).dtype is ember.int32
    _same(ember.triu_indices(row=2, col=3, offset=1), np.array([[0, 0, 1], [1, 2, 2]]))
    with pytest.raises(RuntimeError, match="row must be non-negative, got-1"):
        ember.tril_indices(-1, 2)
    with pytest.raises(RuntimeError, match="col must be non-negative, got-2"):
        ember.triu_indices(2, -2)
    with pytest.raises(NotImplementedError, match="\"tril_indices\" not implemented for 'Float'"):
        ember.tril_indices(3, 3, dtype=ember.float32)
    with pytest.raises(TypeError, match="argument 'offset' \\(position 3\\) must be int"):
        ember.triu_indices(3, 3, 1.5)
    with pytest.raises(TypeError, match="argument 'row' \\(position 1\\) must be int"):
        ember.tril_indices(True, 3)


@pytest.mark.parametrize("kwargs", [{}, {"N": 2}, {"N": 5}, {"increasing": True},
                                    {"N": 4, "increasing": True}])
def test_vander_matches_numpy(kwargs):
    values = [1, 2, -3, 0]
    _same(ember.vander(ember.tensor(values), **kwargs), np.vander(values, **kwargs))
    _same(ember.vander(_t([0.5, -2, 0]), **kwargs), np.vander([0.5, -2, 0], **kwargs))


@pytest.mark.parametrize("dtype,result", [
    (ember.bool, ember.int64), (ember.uint8, ember.int64), (ember.int32, ember.int64),
    (ember.float16, ember.float16), (ember.float32, ember.float32),
    (ember.complex64, ember.complex64)])
def test_vander_dtypes(dtype, result):
    assert ember.vander(ember.tensor([1, 2, 3]).to(dtype)).dtype is result


def test_vander_edge_cases():
    assert ember.vander(ember.ones(0)).shape == (0, 0)
    assert ember.vander(ember.ones(0), N=2).shape == (0, 2)
    _same(ember.vander(ember.tensor([2, 3]), N=0), np.zeros((2, 0), np.int64))
    x = _x(3, requires_grad=True)
    assert not ember.vander(x, N=1).requires_grad       # all ones, as in PyTorch
    assert ember.vander(x, N=2).requires_grad
    with pytest.raises(RuntimeError, match="x must be a one-dimensional tensor."):
        ember.vander(ember.tensor(2.))
    with pytest.raises(RuntimeError, match="N must be non-negative."):
        ember.vander(ember.ones(2), N=-1)
    with pytest.raises(TypeError, match="argument 'N' must be int, not float"):
        ember.vander(ember.ones(2), N=2.0)


def test_vander_gradients_through_zero():
    # PyTorch 2.13's vander cannot run backward at all; ember's goes through cumprod
    x = _t([0., 1.5, -2.], requires_grad=True)
    (g,) = _grad(ember.vander, x)
    # row i is (x^2, x, 1) weighted by (3i+1, 3i+2, 3i+3): d/dx = 2x (3i+1) + (3i+2)
    want = [2 * v * (3 * i + 1) + (3 * i + 2) for i, v in enumerate([0., 1.5, -2.])]
    np.testing.assert_allclose(_np(g), want)
    assert gradcheck(lambda x: ember.vander(x, 4, True), (x,))
    assert gradgradcheck(ember.vander, (x,))


# --- atleast_*, rot90, splits, stacks, diagflat, type_as ----------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 4), (0,), (2, 0)])
def test_atleast_matches_numpy(n, shape):
    fn, ref = getattr(ember, f"atleast_{n}d"), getattr(np, f"atleast_{n}d")
    x = ember.arange(float(np.prod(shape))).reshape(shape).clone()
    out = fn(x)
    _same(out, ref(_np(x)))
    if x.ndim >= n:
        assert out is x
    else:
        assert out._base is x


def test_atleast_sequences():
    a, b = ember.tensor(1.), ember.tensor([1., 2.])
    for n in (1, 2, 3):
        fn = getattr(ember, f"atleast_{n}d")
        for result in (fn(a, b), fn([a, b]), fn((a, b))):
            assert isinstance(result, tuple) and len(result) == 2
            assert [r.ndim for r in result] == [n, max(n, 1)]
        assert fn() == () and fn([]) == ()
        assert isinstance(fn([a]), tuple)
        with pytest.raises(TypeError, match="expected Tensor as element 1"):
            fn(a, 1)


@pytest.mark.parametrize("k", range(-5, 6))
def test_rot90_matches_numpy(k):
    x = ember.arange(24).reshape(2, 3, 4)
    _same(ember.rot90(x, k, (0, 1)), np.rot90(_np(x), k, (0, 1)))
    _same(x.rot90(k, [2, 0]), np.rot90(_np(x), k, (2, 0)))
    _same(ember.rot90(x, k, (-1, 1)), np.rot90(_np(x), k, (2, 1)))


def test_rot90_copies_and_differentiates():
    x = _x(2, 3, requires_grad=True)
    assert ember.rot90(x, 0).data_ptr() != x.data_ptr()
    assert ember.rot90(x, 4).is_contiguous()
    assert ember.rot90(x).stride() == (1, 3)         # flip, then a transposed view
    assert ember.rot90(ember.ones(0, 3)).shape == (3, 0)
    for k in (1, 2, 3):
        assert gradcheck(lambda x, k=k: ember.rot90(x, k), (x,))


@pytest.mark.parametrize("call,error,match", [
    (lambda x: ember.rot90(x, 1, (0,)), RuntimeError,
     "expected total rotation dims == 2, but got dims = 1"),
    (lambda x: ember.rot90(x[0], 1), RuntimeError, "expected total dims >= 2, but got total "
     "dims = 1"),
    (lambda x: ember.rot90(x, 1, (0, -2)), RuntimeError,
     "expected rotation dims to be different, but got dim0 = 0 and dim1 = -2"),
    (lambda x: ember.rot90(x, 1, (0, 2)), IndexError, "Dimension out of range"),
    (lambda x: ember.rot90(x, 1.5), TypeError, "argument 'k' \\(position 2\\) must be int"),
    (lambda x: ember.rot90(x, 1, 0), TypeError, "must be tuple of ints, not int"),
])
def test_rot90_errors(call, error, match):
    with pytest.raises(error, match=match):
        call(ember.ones(2, 3))


@pytest.mark.parametrize("name,shape,arg", [
    ("hsplit", (3, 4), 2), ("hsplit", (3, 4), [1, 2]), ("hsplit", (4,), 2),
    ("hsplit", (2, 4, 6), (1, 5)), ("vsplit", (4, 3), 2), ("vsplit", (2, 4, 6), [1]),
    ("dsplit", (2, 4, 6), 3), ("dsplit", (2, 4, 6), [1, 4]), ("hsplit", (3, 4), [])])
def test_directional_splits_match_numpy(name, shape, arg):
    x = ember.arange(float(np.prod(shape))).reshape(shape).clone()
    got = getattr(ember, name)(x, arg)
    want = getattr(np, name)(_np(x), arg)
    assert isinstance(got, tuple) and len(got) == len(want)
    for g, w in zip(got, want):
        _same(g, w)
        assert g._base is x
    by_method = getattr(x, name)(*arg) if isinstance(arg, list) and len(arg) > 1 else \
        getattr(x, name)(arg)
    for g, w in zip(by_method, want):
        _same(g, w)


@pytest.mark.parametrize("call,error,match", [
    (lambda: ember.hsplit(ember.ones(3, 4), 3), RuntimeError,
     "torch.hsplit attempted to split along dimension 1, but the size of the dimension 4 is "
     "not divisible by the split_size 3!"),
    (lambda: ember.vsplit(ember.ones(3, 4), 0), RuntimeError, "not divisible by the split_size 0"),
    (lambda: ember.dsplit(ember.ones(2, 2, 4), -1), RuntimeError,
     "number of sections must be larger than 0, got -1"),
    (lambda: ember.hsplit(ember.tensor(1.), 1), RuntimeError,
     "torch.hsplit requires a tensor with at least 1 dimension, but got a tensor with 0 "
     "dimensions!"),
    (lambda: ember.vsplit(ember.ones(4), 2), RuntimeError, "at least 2 dimension"),
    (lambda: ember.dsplit(ember.ones(2, 4), 2), RuntimeError, "at least 3 dimension"),
    (lambda: ember.hsplit(ember.ones(2, 4), 2.0), TypeError,
     r"hsplit\(\) received an invalid combination of arguments - got \(Tensor, float\)"),
])
def test_directional_split_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_directional_split_sections_from_a_tensor_and_gradient():
    x = _x(2, 4, 6, requires_grad=True)
    for g, w in zip(ember.hsplit(x, ember.tensor(2)), ember.hsplit(x, 2)):
        _same(g, _np(w))
    assert gradcheck(lambda x: ember.dsplit(x, [1, 4]), (x,))


def test_column_stack_and_row_stack_match_numpy():
    a, b = ember.tensor([1, 2, 3]), ember.tensor([4., 5, 6])
    _same(ember.column_stack([a, b]), np.column_stack([_np(a), _np(b)]).astype(np.float32))
    _same(ember.column_stack([ember.tensor(1.), ember.tensor(2.)]), np.array([[1., 2]],
                                                                             np.float32))
    m = ember.arange(6.).reshape(3, 2)
    _same(ember.column_stack((m, b)), np.column_stack([_np(m), _np(b)]))
    _same(ember.column_stack([ember.arange(6.)[::2], m.t().t()]),
          np.column_stack([[0., 2, 4], _np(m)]))
    out = ember.empty(0)
    assert ember.column_stack([b], out=out) is out and out.shape == (3, 1)
    assert ember.row_stack is not ember.vstack      # as in torch: errors name row_stack
    _same(ember.row_stack([a, b]), np.vstack([_np(a), _np(b)]).astype(np.float32))
    with pytest.raises(RuntimeError, match="column_stack expects a non-empty TensorList"):
        ember.column_stack([])
    with pytest.raises(TypeError, match="must be tuple of Tensors, not Tensor"):
        ember.column_stack(b)
    with pytest.raises(TypeError, match="expected Tensor as element 1"):
        ember.column_stack([b, 1])
    x, y = _x(3, requires_grad=True), _x(3, 2, requires_grad=True, seed=1)
    assert gradcheck(lambda x, y: ember.column_stack([x, y]), (x, y))


@pytest.mark.parametrize("shape", [(3,), (2, 2), (), (0,), (2, 3, 2)])
@pytest.mark.parametrize("offset", [0, 1, -2])
def test_diagflat_matches_numpy(shape, offset):
    x = ember.arange(1., float(np.prod(shape)) + 1).reshape(shape)
    _same(ember.diagflat(x, offset), np.diagflat(_np(x), offset))
    _same(x.diagflat(offset=offset), np.diagflat(_np(x), offset))


def test_diagflat_details():
    _same(ember.diagflat(ember.arange(4.).reshape(2, 2).t()), np.diag([0., 2, 1, 3]))
    assert ember.diagflat(ember.tensor([True, False])).dtype is ember.bool
    with pytest.raises(TypeError, match="argument 'offset' \\(position 2\\) must be int"):
        ember.diagflat(ember.ones(2), 1.5)
    x = _x(2, 2, requires_grad=True)
    assert gradcheck(lambda x: ember.diagflat(x, -1), (x,))


def test_type_as():
    x = ember.tensor([1.5, -2.5])
    y = x.type_as(ember.ones(1, dtype=ember.int32))
    assert y.dtype is ember.int32 and y.tolist() == [1, -2]
    assert x.type_as(ember.ones(1)) is x
    with pytest.raises(TypeError, match="argument 'other' \\(position 1\\) must be Tensor, not "
                                        "int"):
        x.type_as(3)
    w = _x(3, dtype=ember.float32, requires_grad=True)
    (g,) = ember.autograd.grad((w.type_as(ember.ones(1, dtype=ember.float64)) ** 2).sum(), w)
    assert g.dtype is ember.float32
    np.testing.assert_allclose(_np(g), 2 * _np(w), rtol=1e-6)


# --- block_diag's front end -----------------------------------------------------------------------

def test_block_diag_front_end():
    empty = ember.block_diag()
    assert empty.shape == (1, 0) and empty.dtype is ember.float32
    _same(ember.block_diag(ember.ones(2, 2), ember.tensor(3.), ember.tensor([1., 2])),
          np.array([[1., 1, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 3, 0, 0], [0, 0, 0, 1, 2]],
                   np.float32))
    with pytest.raises(TypeError, match="expected Tensor as element 0 in argument 0, but got "
                                        "list"):
        ember.block_diag([ember.ones(2)])
    with pytest.raises(TypeError, match="expected Tensor as element 1 in argument 0, but got "
                                        "int"):
        ember.block_diag(ember.ones(2), 3)


# --- cov, corrcoef --------------------------------------------------------------------------------

def test_cov_matches_numpy():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((3, 6))
    fw, aw = np.array([1, 2, 1, 3, 1, 2]), rng.random(6)
    x = ember.tensor(data)
    for correction in (0, 1, 2):
        _same(ember.cov(x, correction=correction), np.cov(data, ddof=correction), exact=False)
        _same(ember.cov(x, correction=correction, fweights=ember.tensor(fw),
                        aweights=ember.tensor(aw)),
              np.cov(data, ddof=correction, fweights=fw, aweights=aw), exact=False)
    _same(ember.cov(x, aweights=ember.tensor(aw)), np.cov(data, aweights=aw), exact=False)
    _same(ember.cov(x, fweights=ember.tensor(fw)), np.cov(data, fweights=fw), exact=False)
    _same(x.cov(correction=0), np.cov(data, ddof=0), exact=False)
    _same(ember.cov(x[0]), np.cov(data[0]), exact=False)              # one variable: 0-d
    _same(ember.cov(ember.tensor(data[:1])), np.cov(data[:1]), exact=False)
    c = data + 1j * rng.standard_normal((3, 6))
    _same(ember.cov(ember.tensor(c)), np.cov(c), exact=False)


@pytest.mark.parametrize("dtype,aweights,result", [
    (ember.int64, None, ember.float32), (ember.uint8, None, ember.float32),
    (ember.float16, None, ember.float16), (ember.float64, None, ember.float64),
    (ember.int32, ember.float64, ember.float64), (ember.float32, ember.float64, ember.float64),
    (ember.float16, ember.float32, ember.float32), (ember.complex64, ember.float32,
                                                    ember.complex64)])
def test_cov_dtypes(dtype, aweights, result):
    x = ember.tensor([[0, 1, 2], [2, 1, 5]]).to(dtype)
    w = None if aweights is None else ember.tensor([0.5, 1., 2.], dtype=aweights)
    assert ember.cov(x, aweights=w).dtype is result
    assert ember.corrcoef(x).dtype is (result if aweights is None else ember.cov(x).dtype)


@pytest.mark.parametrize("shape,result", [((2, 0), np.full((2, 2), np.nan)), ((0,), np.nan),
                                          ((), np.nan), ((3, 1), np.full((3, 3), np.nan))])
def test_cov_warns_when_no_degrees_of_freedom(shape, result):
    with pytest.warns(UserWarning, match="cov\\(\\): degrees of freedom is <= 0"):
        out = ember.cov(ember.ones(shape))
    _same(out, np.asarray(result, np.float32))


def test_cov_too_large_a_correction_divides_by_zero():
    x = ember.tensor([[0., 1, 2], [2, 1, 0]])
    with pytest.warns(UserWarning, match="degrees of freedom"):
        out = ember.cov(x, correction=5, fweights=ember.tensor([1, 2, 1]),
                        aweights=ember.tensor([0.5, 1., 2.]))
    _same(out, np.array([[np.inf, -np.inf], [-np.inf, np.inf]], np.float32))
    assert ember.cov(ember.ones(0, 3)).shape == (0, 0)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"fweights": [[1, 2, 3]]}, RuntimeError,
     "expected fweights to have one or fewer dimensions but got fweights with 2 dimensions"),
    ({"fweights": [1., 2, 3]}, RuntimeError,
     "expected fweights to have integral dtype but got fweights with Float dtype"),
    ({"fweights": [1, 2]}, RuntimeError, "expected fweights to have the same numel as there are "
     "observations in the input but got 2 != 3"),
    ({"fweights": [-1, 1, 1]}, RuntimeError, "fweights cannot be negative"),
    ({"aweights": [1, 2, 3]}, RuntimeError,
     "expected aweights to have floating point dtype but got aweights with Long dtype"),
    ({"aweights": [1., float("nan"), 1]}, RuntimeError, "aweights cannot be negative"),
    ({"aweights": [0., 0, 0]}, RuntimeError, "weights sum to zero, can't be normalized"),
    ({"correction": 0.5}, TypeError, "argument 'correction' must be int, not float"),
])
def test_cov_errors(kwargs, error, match):
    kwargs = {k: ember.tensor(v) if k.endswith("weights") else v for k, v in kwargs.items()}
    with pytest.raises(error, match=match):
        ember.cov(ember.ones(2, 3), **kwargs)


def test_cov_and_corrcoef_input_errors():
    with pytest.raises(RuntimeError, match="cov\\(\\): expected input to have two or fewer "
                                           "dimensions but got an input with 3 dimensions"):
        ember.cov(ember.ones(2, 2, 2))
    with pytest.raises(RuntimeError, match="corrcoef\\(\\): expected input to have two or "
                                           "fewer dimensions"):
        ember.corrcoef(ember.ones(2, 2, 2))
    with pytest.raises(RuntimeError, match="bool dtype is not supported for input"):
        ember.corrcoef(ember.ones(2, 2, dtype=ember.bool))


def test_corrcoef_matches_numpy():
    rng = np.random.default_rng(1)
    data = rng.standard_normal((3, 5))
    _same(ember.corrcoef(ember.tensor(data)), np.corrcoef(data), exact=False)
    _same(ember.tensor(data).corrcoef(), np.corrcoef(data), exact=False)
    c = data + 1j * rng.standard_normal((3, 5))
    _same(ember.corrcoef(ember.tensor(c)), np.corrcoef(c), exact=False)
    # clipped to [-1, 1]; a constant variable gives NaN; one variable gives 1 (or NaN)
    _same(ember.corrcoef(ember.tensor([[1., 2, 3], [3, 2, 1.000001]])),
          np.array([[1., -1], [-1, 1]], np.float32))
    out = ember.corrcoef(ember.tensor([[1., 2, 3], [1, 1, 1]]))
    assert out[0, 0] == 1 and bool(out[1].isnan().all())
    assert float(ember.corrcoef(ember.tensor([1., 2, 4]))) == 1


def test_cov_and_corrcoef_gradients():
    x = _x(3, 5, requires_grad=True)
    w = ember.rand(5, dtype=ember.float64, requires_grad=True)
    f = ember.tensor([1, 2, 1, 3, 1])
    assert gradcheck(lambda x, w: ember.cov(x, correction=2, fweights=f, aweights=w), (x, w))
    assert gradgradcheck(lambda x, w: ember.cov(x, aweights=w), (x, w))
    assert gradcheck(ember.corrcoef, (x,))
    assert gradgradcheck(ember.corrcoef, (x,))


# --- pdist; subgradients of cdist -----------------------------------------------------------------

@pytest.mark.parametrize("p,metric", [(2, "euclidean"), (1, "cityblock"), (3, "minkowski"),
                                      (0.5, "minkowski"), (float("inf"), "chebyshev")])
def test_pdist_matches_scipy(p, metric):
    data = np.random.default_rng(2).standard_normal((5, 3))
    kwargs = {"p": p} if metric == "minkowski" else {}
    _same(ember.pdist(ember.tensor(data), p), scipy.spatial.distance.pdist(data, metric,
                                                                          **kwargs), exact=False)
    _same(ember.pdist(ember.tensor(data.T).t(), p),
          scipy.spatial.distance.pdist(data, metric, **kwargs), exact=False)


def test_pdist_edge_cases():
    x = ember.tensor([[0., 0], [1, 2], [1, 2], [0, 1]])
    _same(ember.pdist(x, 0), np.array([2., 2, 1, 0, 2, 2], np.float32))
    assert ember.pdist(ember.ones(1, 3)).shape == (0,)
    assert ember.pdist(ember.ones(0, 3)).shape == (0,)
    _same(ember.pdist(ember.ones(3, 0)), np.zeros(3, np.float32))
    assert ember.pdist(ember.ones(1, 3, dtype=ember.float16)).dtype is ember.float16
    # never the matrix-product shortcut: identical rows are exactly 0 apart
    assert float(ember.pdist(ember.ones(30, 3) * 100 + ember.arange(3.)).max()) == 0


@pytest.mark.parametrize("call,error,match", [
    (lambda: ember.pdist(ember.ones(3)), RuntimeError, "pdist only supports 2D tensors, got: 1D"),
    (lambda: ember.pdist(ember.ones(2, 3, 3)), RuntimeError, "got: 3D"),
    (lambda: ember.pdist(ember.ones(3, 3), -1), RuntimeError,
     "pdist only supports non-negative p values"),
    (lambda: ember.pdist(ember.ones(3, 3, dtype=ember.int32)), RuntimeError,
     "pdist only supports floating-point dtypes"),
    (lambda: ember.pdist(ember.ones(3, 3, dtype=ember.complex64)), RuntimeError,
     "pdist only supports floating-point dtypes"),
    (lambda: ember.pdist(ember.ones(3, 3, dtype=ember.float16)), NotImplementedError,
     "\"pdist\" not implemented for 'Half'"),
])
def test_pdist_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


# PyTorch 2.13's gradients of sum(cdist(x, y, p)) with zero distances and ties (recorded)
_X = [[0., 0], [1, 2], [1, 1]]
_Y = [[0., 0], [1, 2.5], [1, 2]]
CDIST_SUBGRADIENTS = {
    0: ([[0, 0], [0, 0], [0, 0]], [[0, 0], [0, 0], [0, 0]]),
    1: ([[-2, -2], [1, 0], [1, -1]], [[-2, -2], [1, 3], [1, 2]]),
    2: ([[-0.8186042718540616, -1.8229038818851753], [0.4472135954999579, -0.10557280900008414],
         [0.7071067811865475, -1.2928932188134525]],
        [[-1.1543203766865053, -1.6015339721864632], [0.3713906763541037, 2.9284766908852595],
         [0.4472135954999579, 1.8944271909999157]]),
    0.5: ([[-4.995352392457285, -3.339562313220224], [2.414213562373095, 0.7071067811865472],
           [2.0, 0.0]],
          [[-4.414213562373095, -3.7071067811865475], [2.58113883008419, 3.6324555320336764],
           [2.414213562373095, 2.7071067811865475]]),
    1.5: ([[-1.22588754525664, -1.831594091228923], [0.6392340078652324, -0.09598659654687847],
           [0.7937005259840997, -1.2062994740159003]],
          [[-1.4329345338493322, -1.6977139294372212], [0.5866535373914076, 2.9275806877758015],
           [0.6392340078652324, 1.9040134034531215]]),
    float("inf"): ([[0, -2], [0, 0], [1, -1]], [[-1, -2], [0, 3], [0, 2]]),
}


@pytest.mark.parametrize("p", list(CDIST_SUBGRADIENTS))
def test_cdist_subgradients_at_zero_distance(p):
    x, y = _t(_X, requires_grad=True), _t(_Y, requires_grad=True)
    gx, gy = ember.autograd.grad(ember.cdist(x, y, p).sum(), (x, y))
    np.testing.assert_allclose(_np(gx), CDIST_SUBGRADIENTS[p][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_np(gy), CDIST_SUBGRADIENTS[p][1], rtol=1e-12, atol=1e-12)


def test_cdist_inf_norm_ties_each_get_the_gradient():
    x, y = _t([[0., 0]], requires_grad=True), _t([[1., -1]], requires_grad=True)
    gx, gy = ember.autograd.grad(ember.cdist(x, y, float("inf")).sum(), (x, y))
    assert gx.tolist() == [[-1., 1.]] and gy.tolist() == [[1., -1.]]


def test_cdist_matrix_product_path():
    # above 25 rows the default mode takes |x|^2 + |y|^2 - 2 x.y, as PyTorch does: a row is
    # then not exactly 0 away from itself in float32 (PyTorch 2.13 gives the same 0.0884)
    x = ember.ones(26, 3) * 100 + ember.arange(3.) * 0.1 + ember.arange(26.).reshape(26, 1) * 0.37
    assert float(ember.cdist(x, x).diagonal().max()) == pytest.approx(0.0883883461356163)
    assert float(ember.cdist(x[:25], x[:25]).diagonal().max()) == 0
    exact = ember.cdist(x, x, compute_mode="donot_use_mm_for_euclid_dist")
    assert float(exact.diagonal().max()) == 0
    z = _t([[1., 2]], requires_grad=True)
    (g,) = ember.autograd.grad(ember.cdist(z, z.detach(), compute_mode="use_mm_for_euclid_dist")
                               .sum(), z)
    assert g.tolist() == [[0., 0.]]


def test_pdist_gradients():
    x = _x(5, 3, requires_grad=True)
    for p in (2, 1, 3, float("inf")):
        assert gradcheck(lambda x, p=p: ember.pdist(x, p), (x,))
    # as in PyTorch, whose _pdist_backward has no derivative
    with pytest.raises(NotImplementedError,
                       match="^the derivative for '_pdist_backward' is not implemented.$"):
        gradgradcheck(ember.pdist, (x,))
    dup = _t([[0., 0], [1, 2], [1, 2], [0, 1]], requires_grad=True)
    (g,) = ember.autograd.grad(ember.pdist(dup).sum(), dup)     # PyTorch 2.13's values
    np.testing.assert_allclose(_np(g), [[-0.8944271909999159, -2.7888543819998315],
                                        [1.1543203766865053, 1.6015339721864632],
                                        [1.1543203766865053, 1.6015339721864632],
                                        [-1.414213562373095, -0.4142135623730949]], rtol=1e-12)


# --- aminmax: the named tuple, and gradients at ties ----------------------------------------------

def test_aminmax_named_tuple():
    r = ember.aminmax(ember.tensor([[1., 5, 3], [4, 2, 6]]), dim=1)
    assert type(r) is ember.return_types.aminmax and r._fields == ("min", "max")
    assert r.min is r[0] and r.max.tolist() == [5., 6.]
    assert repr(r).startswith("ember.return_types.aminmax(\nmin=tensor([1., 2.]),\nmax=")
    assert ember.Tensor.aminmax(ember.tensor([2, 7]), dim=0).min.item() == 2
    mins, maxs = ember.empty(0), ember.empty(0)
    ember.aminmax(ember.tensor([[1., 5], [4, 2]]), dim=0, out=(mins, maxs))
    assert mins.tolist() == [1., 2.] and maxs.tolist() == [4., 5.]


@pytest.mark.parametrize("kwargs,want", [
    ({}, [[0.5, 0, 0], [0.5, 0, 2]]),
    ({"dim": 1}, [[1, 1, 1], [1, 0, 2]]),
    ({"dim": 0}, [[1.5, 2, 1], [1.5, 1, 2]]),
])
def test_aminmax_ties_share_the_gradient(kwargs, want):
    x = _t([[1., 5, 5], [1, 2, 6]], requires_grad=True)
    r = ember.aminmax(x, **kwargs)
    (g,) = ember.autograd.grad(r.min.sum() + 2 * r.max.sum(), x)     # PyTorch 2.13's values
    assert g.tolist() == want


# --- functions of this family that already existed ------------------------------------------------

def test_std_var_correction_keyword():
    data = np.arange(12.).reshape(3, 4) ** 2
    x = ember.tensor(data)
    for correction in (0, 1, 2):
        _same(ember.var(x, 1, correction=correction), np.var(data, 1, ddof=correction),
              exact=False)
        _same(x.std(dim=0, correction=correction, keepdim=True),
              np.std(data, 0, ddof=correction, keepdims=True), exact=False)
    _same(ember.var(x, correction=0.5), np.var(data, ddof=0.5), exact=False)
    var, mean = ember.var_mean(x, 1, correction=0)
    _same(var, np.var(data, 1), exact=False)
    _same(mean, np.mean(data, 1), exact=False)


def test_count_nonzero_forms():
    x = ember.tensor([[0, 1.5, 0], [2, 0, 3]])
    assert ember.count_nonzero(x).item() == 3
    assert ember.count_nonzero(x, dim=(0, 1)).item() == 3
    assert x.count_nonzero(-1).tolist() == [1, 2]
    assert ember.count_nonzero(ember.tensor([1j, 0])).item() == 1
    assert ember.count_nonzero(ember.tensor([float("nan"), 0.])).item() == 1
    assert ember.count_nonzero(ember.ones(0, 3), dim=0).tolist() == [0, 0, 0]
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times"):
        ember.count_nonzero(x, dim=(0, 0))


def test_new_factories_keep_dtype():
    x = ember.ones(2, dtype=ember.float64)
    for name in ("new_zeros", "new_ones", "new_empty"):
        y = getattr(x, name)((2, 3))
        assert y.shape == (2, 3) and y.dtype is ember.float64
        assert getattr(x, name)(2, 3, dtype=ember.int32).dtype is ember.int32
    assert x.new_full((2,), 7).tolist() == [7., 7.]
    assert ember.ones(1, dtype=ember.int16).new_full((2,), 7.5).tolist() == [7, 7]
    assert ember.ones(1, dtype=ember.int32).new_tensor([1.5, 2]).dtype is ember.int32


def test_cdist_computes_large_inputs_in_row_blocks(monkeypatch):
    from ember.ops import distances
    a, b = _x(2, 30, 4), _x(1, 20, 4, seed=1)
    whole = _np(ember.cdist(a, b, 1))
    np.testing.assert_allclose(whole, np.abs(_np(a)[..., :, None, :] - _np(b)[..., None, :, :])
                               .sum(-1), rtol=1e-12)
    monkeypatch.setattr(distances, "_BLOCK", 500)      # 30 rows x 20 x 4 x 2 in 7 blocks
    _same(ember.cdist(a, b, 1), whole)


@pytest.mark.parametrize("name,args", [
    ("combinations", ()), ("vander", ()), ("rot90", ()), ("hsplit", (2,)), ("vsplit", (2,)),
    ("dsplit", (2,)), ("diagflat", ()), ("cov", ()), ("corrcoef", ()), ("pdist", ()),
    ("cdist", (ember.ones(2, 2),)), ("atleast_2d", ())])
def test_compositions_reject_a_list_for_a_tensor(name, args):
    # (h/v/dsplit: PyTorch's two overloads refuse it as an "invalid combination")
    with pytest.raises(TypeError, match=r"must be Tensor, not list|expected Tensor|invalid "
                                        r"combination of arguments - got \(list, int\)"):
        getattr(ember, name)([1., 2.], *args)
