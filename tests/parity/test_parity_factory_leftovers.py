"""Small fidelity leftovers checked against PyTorch: ``Tensor.norm``'s positional dtype,
factories' ``requires_grad`` type check, saving local objects, nested tensors' copies and
padding, sparse ``sampled_addmm``'s dtypes, SparseAdam's and randint's argument errors."""

import io
import warnings

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _same(fn):
    """Assert ``fn(lib)`` gives the same value or error (library names unified) in both."""
    assert_same(fn, quiet=True, message=lambda text: text.replace("torch", "ember"))


def test_tensor_norm_takes_dtype_fourth():
    _same(lambda T: (lambda r: (r.item(), str(r.dtype)[-7:]))(
        T.tensor([3.0, 4.0]).norm(2, 0, False, T.float64)))


@pytest.mark.parametrize("factory", [
    lambda T, rg: T.zeros(2, requires_grad=rg),
    lambda T, rg: T.ones(2, requires_grad=rg),
    lambda T, rg: T.empty(2, requires_grad=rg),
    lambda T, rg: T.full((2,), 1.0, requires_grad=rg),
    lambda T, rg: T.tensor([1.0], requires_grad=rg),
    lambda T, rg: T.zeros_like(T.ones(2), requires_grad=rg),
    lambda T, rg: T.full_like(T.ones(2), 1.0, requires_grad=rg),
    lambda T, rg: T.ones(2).new_zeros(2, requires_grad=rg),
    lambda T, rg: T.ones(2).new_full((2,), 1.0, requires_grad=rg),
    lambda T, rg: T.ones(2).new_tensor([1.0], requires_grad=rg),
])
@pytest.mark.parametrize("requires_grad", [1, 0, None, np.bool_(True), 1.0, True])
def test_factory_requires_grad_must_be_bool(factory, requires_grad):
    _same(lambda T: factory(T, requires_grad).requires_grad)


@pytest.mark.parametrize("factory", [
    lambda T, rg: T.rand(2, requires_grad=rg),
    lambda T, rg: T.randint(3, (2,), dtype=T.float32, requires_grad=rg),
    lambda T, rg: T.arange(3.0, requires_grad=rg),
    lambda T, rg: T.linspace(0, 1, 3, requires_grad=rg),
    lambda T, rg: T.logspace(0, 1, 3, requires_grad=rg),
    lambda T, rg: T.eye(2, requires_grad=rg),
    lambda T, rg: T.randn_like(T.ones(2), requires_grad=rg),
])
def test_overloaded_factories_refuse_non_bool_requires_grad(factory):
    for bad in (1, np.bool_(True)):
        with pytest.raises(TypeError):
            torch_made = factory(torch, bad)      # noqa: F841 - PyTorch refuses it too
        with pytest.raises(TypeError, match="requires_grad"):
            factory(ember, bad)
    assert factory(ember, None).requires_grad is False
    assert factory(ember, True).requires_grad is True


def _local():
    return lambda x: x


def _local_class_instance():
    class Local:
        pass
    return Local()


@pytest.mark.parametrize("make", [_local, _local_class_instance])
def test_save_of_local_object_raises_attribute_error(make):
    _same(lambda T: T.save({"f": make()}, io.BytesIO()))


def test_as_nested_tensor_copies_its_components():
    def mutate(T):
        a = T.ones(2, 3)
        nt = T.nested.as_nested_tensor([a, T.ones(1, 3)])
        nt.unbind()[0].add_(5)
        b = T.ones(2, 3)
        nt2 = T.nested.as_nested_tensor([b, T.ones(1, 3)])
        b.mul_(3)
        return a.sum().item(), nt2.unbind()[0].sum().item()
    _same(mutate)


@pytest.mark.parametrize("size", [(4, 2, 3), (3, 4, 5), (1, 2, 3), (-1, 2, 3)])
def test_to_padded_tensor_pads_dim_zero(size):
    def padded(T):
        nt = T.nested.nested_tensor([T.ones(2, 3), T.ones(1, 3)])
        return T.nested.to_padded_tensor(nt, -1.0, size).tolist()
    _same(padded)


@pytest.mark.parametrize("dtypes", [("float64", "float32", "float32"),
                                    ("float32", "float64", "float32")])
def test_sampled_addmm_checks_dtypes(dtypes):
    def sampled(T):
        d = [getattr(T, n) for n in dtypes]
        inp = T.eye(3, dtype=d[0]).to_sparse_csr()
        return T.sparse.sampled_addmm(inp, T.ones(3, 3, dtype=d[1]),
                                      T.ones(3, 3, dtype=d[2])).to_dense().tolist()
    _same(sampled)


@pytest.mark.parametrize("options", [
    lambda T: dict(eps=T.tensor([1e-8, 1e-8])),
    lambda T: dict(betas=(T.tensor([0.9, 0.9]), 0.99)),
    lambda T: dict(lr=T.tensor([1e-3, 1e-3])),
    lambda T: dict(eps=T.tensor(0.0)),
])
@pytest.mark.parametrize("name", ["SparseAdam", "Adam"])
def test_optimizer_tensor_hyperparameter_errors(options, name):
    if name == "Adam" and "eps" in options(torch) and options(torch)["eps"].ndim == 0:
        pytest.skip("Adam accepts eps=0")
    _same(lambda T: getattr(T.optim, name)([T.nn.Parameter(T.ones(2))], **options(T)))


@pytest.mark.parametrize("high", [np.True_, np.float64(3.0), True])
def test_randint_bound_type_names(high):
    _same(lambda T: T.randint(high, (2,)))


def test_full_of_numpy_half_scalar_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        made = ember.full((2,), np.float16(-2.5))
    expected = torch.full((2,), np.float16(-2.5))
    assert made.tolist() == expected.tolist() and str(made.dtype)[-7:] == "float32"


@pytest.mark.parametrize("draw", [
    lambda T, g: T.multinomial(T.ones(2), 1, generator=g),
    lambda T, g: T.ones(2).uniform_(generator=g),
    lambda T, g: T.ones(2).normal_(generator=g),
    lambda T, g: T.poisson(T.ones(2), generator=g),
    lambda T, g: T.ones(2).exponential_(generator=g),
])
def test_generator_type_errors_name_the_function(draw):
    _same(lambda T: draw(T, 3))


def test_overloaded_samplers_refuse_non_generators():
    for draw in (lambda T: T.rand(2, generator=3), lambda T: T.randint(3, (2,), generator=[1])):
        with pytest.raises(TypeError):
            draw(torch)
        with pytest.raises(TypeError, match=r"^(rand|randint)\(\): argument 'generator'"):
            draw(ember)


@pytest.mark.parametrize("make", [
    lambda T: T.zeros(2, 3, layout=T.sparse_coo, dtype=T.float64),
    lambda T: T.empty(2, 3, layout=T.sparse_coo, requires_grad=True),
    lambda T: T.zeros(2, 3, layout=T.sparse_csr),
    lambda T: T.zeros_like(T.ones(2, 3), layout=T.sparse_coo),
    lambda T: T.zeros(3, layout=T.sparse_csr),
    lambda T: T.ones(2, layout=T.sparse_coo),
    lambda T: T.full((2,), 1.0, layout=T.sparse_coo),
    lambda T: T.zeros(2, layout=3),
    lambda T: T.zeros(2, layout=T.strided),
])
def test_factories_honour_sparse_layouts(make):
    _same(lambda T: repr(make(T)).replace("torch", "ember"))


@pytest.mark.parametrize("make", [
    lambda T: T.ones_like(T.ones(2, 3), layout=T.sparse_coo),
    lambda T: T.empty_like(T.ones(2, 3), layout=T.sparse_csr),
    lambda T: T.full_like(T.ones(2, 3), 2.0, layout=T.sparse_coo),
])
def test_like_factories_refuse_sparse_layouts(make):
    with pytest.raises(NotImplementedError) as expected:
        make(torch)
    with pytest.raises(NotImplementedError) as got:
        make(ember)
    assert str(expected.value).startswith(str(got.value))
