"""The public faces of the reductions beyond what OpInfo covers: max/min/median overloads, named
results, out=, warnings, accumulation dtypes and grad_fn names."""

import pickle

import numpy as np
import pytest

import ember
from ember.ops._registry import REGISTRY
from ember.testing import assert_close


class _Recorder:
    """Stands in for a registry op so dispatch can be observed."""

    def __init__(self):
        self.calls = []

    def function(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return "pairwise"


@pytest.mark.parametrize("name,pairwise", [("max", "maximum"), ("min", "minimum")])
def test_max_of_two_tensors_is_the_pairwise_op(monkeypatch, name, pairwise):
    recorder = _Recorder()
    monkeypatch.setitem(REGISTRY, pairwise, recorder)
    a, b = ember.ones(2), ember.zeros(2)
    assert getattr(ember, name)(a, b) == "pairwise"
    assert getattr(ember, name)(a, other=b) == "pairwise"
    assert getattr(a, name)(b) == "pairwise"
    assert [call[0] for call in recorder.calls] == [(a, b)] * 3


@pytest.mark.parametrize("name", ["max", "min", "median", "nanmedian"])
def test_whole_and_along_dim_forms(name):
    x = ember.tensor([[1., 5., 2.], [4., 0., 3.]])
    whole = getattr(ember, name)(x)
    assert whole.shape == () and isinstance(whole, ember.Tensor)
    values, indices = getattr(x, name)(1, keepdim=True)
    assert values.shape == (2, 1) and indices.dtype is ember.int64
    result = getattr(ember, name)(x, dim=0)
    assert type(result).__name__ == name
    assert str(type(result)) == f"<class 'ember.return_types.{name}'>"    # PyTorch's path
    assert result.values is result[0] and result.indices is result[1]
    assert repr(result).startswith(f"ember.return_types.{name}(\nvalues=tensor(")
    assert pickle.loads(pickle.dumps(result)).indices.tolist() == result.indices.tolist()
    with pytest.raises(TypeError, match="dim"):     # (median: "missing ... "dim"")
        getattr(ember, name)(x, keepdim=True)


def test_max_along_dim_out():
    x = ember.tensor([[1., 5., 2.], [4., 0., 3.]])
    values, indices = ember.empty(0), ember.empty(0, dtype=ember.int64)
    ember.max(x, 1, out=(values, indices))
    assert values.tolist() == [5., 4.] and indices.tolist() == [1, 0]
    whole = ember.empty(0)
    ember.max(x, out=whole)         # (median(x, out=) misses its dim, as in PyTorch)
    assert whole.item() == 5.


def test_cummax_names():
    result = ember.tensor([1., 3., 2.]).cummax(0)
    assert type(result).__name__ == "cummax"
    assert result.indices.tolist() == [0, 1, 1]


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin_of_a_scalar_take_only_dims_0_and_minus_1(name):
    s = ember.tensor(2.5)
    assert [t.item() for t in getattr(s, name)(-1)] == [2.5, 0]
    with pytest.raises(IndexError, match=f"^{name}\\(\\): Expected reduction dim -1 or 0 for "
                       "scalar but got 1$"):
        getattr(s, name)(1)


@pytest.mark.parametrize("call,kind", [
    (lambda x: x.std(0, correction=2), "std"), (lambda x: x.var(0), "var"),
    (lambda x: ember.std_mean(ember.ones(0)), "std_mean"),
])
def test_no_degrees_of_freedom_warns(call, kind):
    with pytest.warns(UserWarning, match=rf"{kind}\(\): degrees of freedom is <= 0"):
        call(ember.ones(1, 3))


def test_correction_and_unbiased_are_exclusive():
    with pytest.raises((TypeError, RuntimeError), match="unbiased"):
        ember.std(ember.ones(3), unbiased=True, correction=0)
    with pytest.raises(TypeError, match=r"^var_mean\(\)"):
        ember.var_mean(ember.ones(3), unbiased=True, correction=0)


def test_complex_to_real_dtype_warns_and_takes_real_part():
    z = ember.tensor([1 + 2j, 3 - 1j])
    with pytest.warns(UserWarning, match="Casting complex values to real discards"):
        out = ember.sum(z, dtype=ember.float32)
    assert out.dtype is ember.float32 and out.item() == 4.


def test_low_precision_accumulates_in_float32():
    x = ember.ones(2049, dtype=ember.float16)
    assert ember.sum(x, dtype=ember.float32).item() == 2049.
    assert ember.sum(x).dtype is ember.float16
    assert ember.cumsum(x, 0, dtype=ember.float32).max().item() == 2049.
    assert ember.mean(ember.full((4096,), 0.1, dtype=ember.bfloat16), dtype=ember.float32) \
        .item() == pytest.approx(0.1, rel=1e-2)


def test_float32_scans_accumulate_in_float64_on_cpu():
    # PyTorch's CPU scans keep their running value in double: no 1% drift over 10**6 steps
    x = ember.full((10**6,), 0.1)
    assert ember.cumsum(x, 0)[-1].item() == 100000.0
    assert ember.cumulative_trapezoid(x)[-1].item() == pytest.approx(99999.9, abs=0.01)
    y = ember.full((100000,), -10.)
    assert ember.logcumsumexp(y, 0)[-1].item() == pytest.approx(1.5129255, abs=2e-7)
    z = ember.full((2,), 0.1, dtype=ember.complex64)
    assert ember.cumsum(z, 0).dtype is ember.complex64
    assert ember.cumprod(ember.full((3,), 2.), 0).tolist() == [2., 4., 8.]


def test_float32_moments_accumulate_in_float64_on_cpu():
    # the variance overflows float32, its square root does not
    x = ember.tensor([3e19, -3e19])
    assert x.std().item() == pytest.approx(4.2426407e19, rel=1e-6)
    assert x.var().item() == float("inf") and x.var().dtype is ember.float32
    std, mean = ember.std_mean(x)
    assert std.dtype is ember.float32 and mean.dtype is ember.float32
    assert std.item() == pytest.approx(4.2426407e19, rel=1e-6) and mean.item() == 0
    v, m = ember.var_mean(ember.tensor([1 + 1j, 3 - 1j]))
    assert v.dtype is ember.float32 and m.dtype is ember.complex64
    assert v.item() == 4.0 and m.item() == 2


def test_empty_reductions():
    e = ember.ones(0, 3)
    assert ember.sum(e).item() == 0 and ember.prod(e).item() == 1
    assert np.isnan(np.asarray(ember.mean(e, 0))).all()
    assert ember.logsumexp(e, 0).tolist() == [float("-inf")] * 3
    assert ember.norm(e).item() == 0
    assert ember.all(e).item() is True and ember.any(e).item() is False


@pytest.mark.parametrize("call,name", [
    (lambda x: x.sum(), "SumBackward0"), (lambda x: x.max(), "MaxBackward1"),
    (lambda x: x.max(0)[0], "MaxBackward0"), (lambda x: x.min(), "MinBackward1"),
    (lambda x: x.median(0)[0], "MedianBackward1"),
    (lambda x: x.norm(), "LinalgVectorNormBackward0"),
    (lambda x: ember.std_mean(x)[0], "StdMeanBackward0"),
    (lambda x: x.cummax(0)[0], "CummaxBackward0"),
    (lambda x: x.logsumexp(0), "LogsumexpBackward0"), (lambda x: x.amax(), "AmaxBackward0"),
])
def test_grad_fn_names(call, name):
    x = ember.ones(3, requires_grad=True)
    assert call(x).grad_fn.name() == name


@pytest.mark.parametrize("call,name", [
    (lambda x: x.prod(), "ProdBackward0"), (lambda x: x.prod(1), "ProdBackward1"),
    (lambda x: x.nanmean(1), "DivBackward0"),
    (lambda x: ember.quantile(x, 0.5, dim=1, keepdim=True), "SqueezeBackward4"),
    (lambda x: ember.nanquantile(x, ember.tensor([0.5])), "SqueezeBackward4"),
    (lambda x: ember.linalg.matrix_norm(x), "LinalgVectorNormBackward0"),
    (lambda x: ember.linalg.matrix_norm(x, "nuc"), "SumBackward1"),
    (lambda x: ember.linalg.matrix_norm(x, 2, keepdim=True), "PermuteBackward0"),
    (lambda x: ember.linalg.matrix_norm(x, -2), "AminBackward0"),
    (lambda x: ember.linalg.matrix_norm(x, float("inf"), keepdim=True), "AmaxBackward0"),
    (lambda x: ember.linalg.norm(x, -1), "AminBackward0"),
    (lambda x: ember.linalg.norm(x, dim=1), "LinalgVectorNormBackward0"),
    (lambda x: ember.norm(x, "nuc"), "SumBackward1"),
    (lambda x: ember.bincount(ember.tensor([0, 1]), x[0, :2]),
     "torch::autograd::NotImplemented"),
    (lambda x: ember.histogram(x, 2).hist, "torch::autograd::NotImplemented"),
    (lambda x: ember.diff(x, n=0), "torch::autograd::CopyBackwards"),
    (lambda x: ember.diff(x), "SubBackward0"),
])
def test_grad_fn_names_of_composite_reductions(call, name):
    # the node PyTorch's composite implementation ends in
    x = ember.tensor([[1., 5., 2.], [4., 0.5, 3.]], requires_grad=True)
    assert call(x).grad_fn.name() == name


def test_indices_and_flags_do_not_require_grad():
    x = ember.tensor([[1., 2.], [3., 0.]], requires_grad=True)
    assert not x.max(0).indices.requires_grad
    assert not x.argmax().requires_grad
    assert not x.all().requires_grad and not x.count_nonzero().requires_grad


def test_in_place_cumulative_ops_keep_dtype():
    x = ember.tensor([1, 2, 3], dtype=ember.int8)
    assert x.cumsum_(0) is x and x.dtype is ember.int8 and x.tolist() == [1, 3, 6]
    y = ember.tensor([1., 2., 3.])
    assert_close(y.cumprod_(0), ember.tensor([1., 2., 6.]))


@pytest.mark.parametrize("call", [lambda x: x.prod(1, (0, 1)), lambda x: x.argmax((0,)),
                                  lambda x: x.cumsum(None)])
def test_dim_that_must_be_an_int(call):
    with pytest.raises(TypeError, match="must be int|must be bool"):
        call(ember.ones(2, 3))


def test_prod_given_a_tuple_lists_its_overloads():
    # one argument fits both of PyTorch's signatures: its parser lists them
    with pytest.raises(TypeError) as caught:
        ember.ones(2, 3).prod((0, 1))
    assert str(caught.value) == (
        "prod() received an invalid combination of arguments - got (tuple), but expected one "
        "of:\n * (*, ember.dtype dtype = None)\n"
        " * (int dim, bool keepdim = False, *, ember.dtype dtype = None)\n")


def test_hash_tensor_xors_the_widened_bits():
    a = ember.tensor([[1.1918, -1.1813, 0.3373], [0.5, 2.0, -0.0]])
    h = ember.hash_tensor(a)
    assert h.dtype is ember.uint64 and h.item() == 4626429733842714624
    assert a.hash_tensor(1).tolist() == [13822780172933267456, 18437736874454810624]
    assert ember.hash_tensor(a, 0, keepdim=True).shape == (1, 3)
    assert ember.hash_tensor(ember.tensor([-1], dtype=ember.int8)).item() == 2 ** 64 - 1
    assert ember.hash_tensor(ember.tensor([True, False])).item() == 1
    assert ember.hash_tensor(ember.tensor([1.5], dtype=ember.float16)).item() == \
        4609434218613702656                     # the bits of 1.5 as a float64
    assert ember.hash_tensor(ember.ones(0, 3), 1).tolist() == []
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        ember.hash_tensor(ember.ones(0, 3), 0)


def test_correction_may_be_a_0_dim_tensor_as_in_pytorch():
    x = ember.arange(5.0, requires_grad=True)
    assert x.var(correction=ember.tensor(1.5)).item() == pytest.approx(10 / 3.5)
    x.std(dim=0, correction=ember.tensor(1)).backward()
    assert x.grad is not None
    with pytest.raises(TypeError, match="(?s)var\\(\\) received an invalid combination.*"
                       "keywords were incorrect: correction"):     # PyTorch's parser's words
        x.var(correction=ember.tensor([1]))
