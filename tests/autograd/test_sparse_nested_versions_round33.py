"""Version counters of sparse and nested tensors (round 33; the values are PyTorch 2.13's):
a sparse tensor has one counter, shared with its values and indices and bumped by every
in-place op, which autograd checks for the tensors it saved; a nested tensor has one counter
for all its components."""

import warnings

import numpy as np
import pytest

import ember

_DENSE = [[1.0, 0.0, 3.0], [0.0, 2.0, 0.0]]
_HINT = " Hint:"


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _coo():
    return ember.tensor(_DENSE).to_sparse()


def test_in_place_ops_bump_a_coo_tensor_and_the_parts_it_handed_out():
    s = _coo()
    values, indices = s.values(), s.indices()
    assert (s._version, values._version, indices._version) == (0, 0, 0)
    s.mul_(2)
    assert (s._version, values._version, indices._version) == (1, 1, 1)
    s.add_(s)
    s.sub_(ember.tensor(_DENSE).to_sparse())
    s.div_(2)
    s.neg_()
    assert (s._version, values._version, indices._version) == (5, 5, 5)
    s.zero_()
    s.copy_(_coo())
    assert s._version == 7 and s._values()._version == 7


def test_writes_through_parts_bump_the_sparse_tensor():
    s = _coo()
    s.values().mul_(3)
    assert s._version == 1
    s.values()[0:1].add_(1)                     # a view of the values
    assert s._version == 2
    s._indices().add_(0)
    assert s._version == 3
    s.detach().mul_(2)          # detach shares the counter (but mul_ gives it new values)
    assert s._version == 4
    s.requires_grad_()
    assert s._version == 4
    assert s.clone()._version == 0
    np.testing.assert_array_equal(s.to_dense().detach().numpy(), [[4, 0, 9], [0, 6, 0]])


def test_csr_counter_is_shared_with_its_index_parts():
    r = ember.tensor(_DENSE).to_sparse_csr()
    crow, col = r.crow_indices(), r.col_indices()
    r.mul_(2)
    assert (r._version, crow._version, col._version, r.values()._version) == (1, 1, 1, 1)
    r.fill_(3)
    r.zero_()
    assert r._version == 3 and crow._version == 3


def test_constructor_values_keep_a_counter_of_their_own():
    v = ember.tensor([1.0, 2.0, 3.0])
    i = ember.tensor([[0, 1, 0], [1, 0, 1]])
    s = ember.sparse_coo_tensor(i, v, (2, 2))
    s.mul_(2)
    assert (s._version, v._version, i._version) == (1, 0, 0)
    assert ember.sparse_coo_tensor(i, v, (2, 2))._version == 0
    assert s.coalesce()._version == 0           # not in place on an uncoalesced tensor


def _saved_error(layout, dtype, write, use="mul"):
    d = ember.tensor(_DENSE, dtype=dtype)
    s = (d.to_sparse() if layout == "coo" else d.to_sparse_csr()).requires_grad_() * 1.0
    other = ember.ones(2, 3, dtype=dtype, requires_grad=True)
    out = {"mul": lambda: s * other, "to_dense": lambda: s.to_dense() * other,
           "mm": lambda: ember.sparse.mm(s, ember.ones(3, 2, dtype=dtype))}[use]().sum()
    with ember.no_grad():
        write(s)
    with pytest.raises(RuntimeError) as info:
        (out.abs() if out.is_complex() else out).backward()
    return str(info.value).split(_HINT)[0]


_PREFIX = "one of the variables needed for gradient computation has been modified by an " \
          "inplace operation: "


@pytest.mark.parametrize("layout, dtype, name", [
    ("coo", ember.float32, "ember.sparse.FloatTensor"),
    ("coo", ember.float64, "ember.sparse.DoubleTensor"),
    ("coo", ember.float16, "ember.sparse.HalfTensor"),
    ("coo", ember.complex64, "SparseCPUComplexFloatType"),
    ("coo", ember.bfloat16, "SparseCPUBFloat16Type"),
    ("csr", ember.float32, "SparseCsrember.FloatTensor"),
    ("csr", ember.float64, "SparseCsrember.DoubleTensor"),
    ("csr", ember.complex64, "SparseCsrCPUComplexFloatType"),
])
def test_saved_sparse_tensor_error_names_it_as_pytorch(layout, dtype, name):
    got = _saved_error(layout, dtype, lambda s: s.mul_(2))
    assert got == (f"{_PREFIX}[{name} [2, 3]], which is output 0 of Mul, is at version 1; "
                   f"expected version 0 instead.")


@pytest.mark.parametrize("use", ["to_dense", "mm"])
@pytest.mark.parametrize("write", [lambda s: s._values().mul_(2), lambda s: s.zero_(),
                                   lambda s: s.add_(s), lambda s: s.copy_(s.clone())])
def test_every_kind_of_write_is_caught(use, write):
    got = _saved_error("coo", ember.float32, write, use)
    assert got.startswith(f"{_PREFIX}[ember.sparse.FloatTensor [2, 3]]")
    assert got.endswith("is at version 1; expected version 0 instead.")


def test_an_unchanged_sparse_tensor_still_differentiates():
    s = _coo().requires_grad_()
    w = ember.ones(3, 2, requires_grad=True)
    ember.sparse.mm(s, w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[1, 1], [2, 2], [3, 3]])


# ----- nested tensors ---------------------------------------------------------------------------

@pytest.mark.parametrize("layout", [ember.strided, ember.jagged])
def test_a_nested_tensor_has_one_counter(layout):
    nt = ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(3, 3)], layout=layout)
    assert nt._version == 0
    nt.mul_(2)
    assert nt._version == 1                     # one bump for all components
    u = nt.unbind()
    assert (u[0]._version, u[1]._version) == (1, 1)
    u[0].add_(1)
    assert (nt._version, u[1]._version) == (2, 2)
    nt[1].add_(1)
    assert nt._version == 3
    nt.zero_()
    nt.copy_(nt.clone())
    assert nt._version == 5
    d = nt.detach()
    nt.neg_()
    assert (nt._version, d._version, nt.clone()._version) == (6, 6, 0)


def test_saved_strided_nested_error_prints_its_sizes():
    a = ember.nested.nested_tensor([ember.ones(2, 13), ember.ones(10, 3)], requires_grad=True)
    b = a * 1.0
    out = b * b
    b.mul_(2)
    with pytest.raises(RuntimeError) as info:
        ember.nested.to_padded_tensor(out, 0.0).sum().backward()
    assert str(info.value).split(_HINT)[0] == (
        f"{_PREFIX}[ember.FloatTensor   2  13\n 10   3\n[ ember.LongTensor{{2,2}} ]], which is "
        f"output 0 of Mul, is at version 1; expected version 0 instead.")


def test_in_place_nested_op_under_autograd_still_differentiates():
    x = ember.nested.nested_tensor([ember.tensor([[-1.0, 2.0]]), ember.tensor([[3.0, -4.0]])],
                                   requires_grad=True)
    out = (x * 1).relu_()
    assert out._version == 1
    ember.nested.to_padded_tensor(out, 0.0).sum().backward()
    assert [g.tolist() for g in x.grad.unbind()] == [[[0.0, 1.0]], [[1.0, 0.0]]]


# ----- review fixes (round 33) ------------------------------------------------------------------

def test_coo_mul_by_a_scalar_leaves_the_given_values_and_old_parts_alone():
    v = ember.tensor([1.0, 2.0, 3.0])
    s = ember.sparse_coo_tensor(ember.tensor([[0, 1, 0], [1, 0, 1]]), v, (2, 2))
    old = s._values()
    s.mul_(2)
    s.mul_(ember.tensor(2.0))
    assert v.tolist() == [1.0, 2.0, 3.0] and old.tolist() == [1.0, 2.0, 3.0]
    assert s._values().tolist() == [4.0, 8.0, 12.0] and (s._version, old._version) == (2, 2)
    s.div_(2)                                   # (div_ scales the values in place, as PyTorch's)
    assert s._values().tolist() == [2.0, 4.0, 6.0]


def test_csr_mul_by_a_scalar_writes_the_given_values():
    v = ember.tensor([1.0, 3.0, 2.0])
    r = ember.sparse_csr_tensor(ember.tensor([0, 2, 3]), ember.tensor([0, 2, 1]), v, (2, 3))
    r.mul_(2)
    assert v.tolist() == [2.0, 6.0, 4.0] and r._version == 1


@pytest.mark.parametrize("values, other, message", [
    ([1, 2], 2.5, "dtype of values (Float) must match dtype of sparse tensor (Long)"),
    ([True, False], 2, "dtype of values (Long) must match dtype of sparse tensor (Bool)"),
    ([1.0, 2.0], 1j, "dtype of values (ComplexFloat) must match dtype of sparse tensor (Float)"),
])
def test_coo_mul_by_a_scalar_of_another_dtype_is_refused(values, other, message):
    s = ember.sparse_coo_tensor(ember.tensor([[0, 1], [1, 0]]), ember.tensor(values), (2, 2))
    with pytest.raises(RuntimeError) as info:
        s.mul_(other)
    assert str(info.value) == message and s._version == 0


def test_data_has_a_counter_of_its_own_but_a_compressed_ones_shares():
    s = _coo()
    d = s.data
    d._values().mul_(2)
    assert (s._version, d._version) == (0, 1)
    assert s._values().tolist() == [2.0, 6.0, 4.0]     # (the same memory)
    r = ember.tensor(_DENSE).to_sparse_csr()
    r.data.mul_(2)
    assert r._version == 1


@pytest.mark.parametrize("layout", [ember.strided, ember.jagged])
def test_nested_data_has_a_counter_of_its_own(layout):
    nt = ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(3, 3)], layout=layout)
    d = nt.data
    d.mul_(2)
    assert (nt._version, d._version) == (0, 1)
    assert [u.sum().item() for u in nt.unbind()] == [12.0, 18.0]


def test_marking_coalesced_is_an_in_place_op():
    s = _coo()
    s._coalesced_(False)
    assert s._version == 1


@pytest.mark.parametrize("write", [
    lambda nt: ember.nn.functional.relu(nt, inplace=True),
    lambda nt: ember.nn.ReLU(inplace=True)(nt),
    lambda nt: ember.nn.functional.silu(nt, inplace=True),
    lambda nt: ember.nn.functional.dropout(nt, 1.0, True, True),
], ids=["relu", "ReLU", "silu", "dropout_p1"])
def test_functional_in_place_on_a_nested_tensor_bumps_it_once(write):
    nt = ember.nested.nested_tensor([-ember.ones(2, 3), ember.ones(3, 3)])
    assert write(nt) is nt
    assert nt._version == 1 and nt.unbind()[1]._version == 1
    assert nt.unbind()[0].max().item() <= 0.0


def test_dropout_that_writes_nothing_leaves_the_nested_version():
    nt = ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(3, 3)])
    ember.nn.functional.dropout(nt, 0.0, True, True)
    assert nt._version == 0


def test_saved_views_of_handed_out_parts_are_named_as_themselves():
    s = _coo()
    w = ember.ones(3, requires_grad=True)
    out = (s._values().unsqueeze(1)[:, 0] * w).sum()
    s.mul_(2)
    with pytest.raises(RuntimeError) as info:
        out.backward()
    assert str(info.value).startswith(f"{_PREFIX}[ember.FloatTensor [3]]")
    nt = ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(3, 3)])
    w = ember.ones(6, requires_grad=True)
    out = (nt.unbind()[0].reshape(-1) * w).sum()
    nt.mul_(2)
    with pytest.raises(RuntimeError) as info:
        out.backward()
    assert str(info.value).startswith(f"{_PREFIX}[ember.FloatTensor [6]]")
