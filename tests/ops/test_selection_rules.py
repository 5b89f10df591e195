"""Sorting, searching and selection details found by the round-6 audit: out= dtype checks,
backward node names, PyTorch's structseq behaviour of the named results, and argument types.
Expected values come from PyTorch 2.13."""

import pickle

import pytest

import ember


# --- out= dtypes ----------------------------------------------------------------------------------

_SEARCH = ("torch.searchsorted(): output tensor's dtype is wrong, it can only be Int(int32) or "
           "Long(int64) depending on whether out_int32 flag is True, but we got output tensor's "
           "dtype {} and out_int32 flag is {}")


@pytest.mark.parametrize("call", [
    lambda b, v, **kw: ember.searchsorted(b, v, **kw),
    lambda b, v, **kw: ember.bucketize(v, b, **kw)])
def test_search_out_must_have_the_index_dtype(call):
    b, v = ember.tensor([1., 3., 5.]), ember.tensor([0., 3., 6.])
    with pytest.raises(RuntimeError) as info:
        call(b, v, out=ember.empty(0))
    assert str(info.value) == _SEARCH.format("Float", False)
    with pytest.raises(RuntimeError) as info:
        call(b, v, out_int32=True, out=ember.empty(0, dtype=ember.int64))
    assert str(info.value) == _SEARCH.format("Long", True)
    with pytest.raises(RuntimeError) as info:
        call(b, v, out=ember.empty(0, dtype=ember.int32))
    assert str(info.value) == _SEARCH.format("Int", False)
    out = ember.empty(0, dtype=ember.int32)
    call(b, v, out_int32=True, out=out)
    assert out.tolist() == [0, 1, 3]


def test_isin_out_must_be_bool():
    with pytest.raises(RuntimeError, match="^Expected out tensor to have dtype bool, but got "
                                           "long int instead$"):
        ember.isin(ember.tensor([1, 2]), ember.tensor([1]), out=ember.empty(0, dtype=ember.long))


# --- backward node names --------------------------------------------------------------------------

def test_sort_node_names_follow_pytorchs_overloads():
    x = ember.tensor([3., 1., 2.], requires_grad=True)
    assert ember.sort(x).values.grad_fn.name() == "SortBackward0"
    assert ember.sort(x, 0, True).values.grad_fn.name() == "SortBackward0"
    assert ember.sort(x, stable=False).values.grad_fn.name() == "SortBackward1"
    assert x.sort(stable=True).values.grad_fn.name() == "SortBackward1"
    assert ember.msort(x).grad_fn.name() == "SortBackward0"


def test_unique_node_names():
    x = ember.tensor([1., 1., 2.], requires_grad=True)
    assert ember.unique(x).grad_fn.name() == "Unique2Backward0"
    assert ember.unique(x, sorted=False, return_counts=True)[0].grad_fn.name() == \
        "Unique2Backward0"
    assert ember.unique(x, dim=0).grad_fn.name() == "UniqueDimBackward0"
    assert ember.unique_consecutive(x, dim=0).grad_fn.name() == "UniqueConsecutiveBackward0"


# --- named results as PyTorch's structseqs --------------------------------------------------------

def test_named_results_build_from_one_sequence():
    v, i = ember.tensor([1., 2.]), ember.tensor([0, 1])
    for seq in ((v, i), [v, i]):
        r = ember.return_types.sort(seq)
        assert type(r) is ember.return_types.sort and r.values is v and r.indices is i
    assert ember.return_types.topk(v, i).indices is i          # the fields, as a namedtuple
    with pytest.raises(TypeError, match=r"sort\(\) takes a 2-sequence \(3-sequence given\)"):
        ember.return_types.sort((v, i, i))
    with pytest.raises(TypeError, match="constructor requires a sequence"):
        ember.return_types.sort(5)
    assert ember.return_types.max.n_fields == ember.return_types.max.n_sequence_fields == 2
    assert ember.return_types.linalg_svd.n_fields == 3
    assert ember.return_types.kthvalue.n_unnamed_fields == 0


def test_out_calls_return_the_out_types():
    x = ember.tensor([[3., 1.], [0., 2.]])
    r = ember.sort(x, out=(ember.empty(0), ember.empty(0, dtype=ember.long)))
    assert type(r).__name__ == "sort_out" and type(r) is ember.return_types.sort_out
    assert not isinstance(r, ember.return_types.sort)
    assert repr(r).startswith("ember.return_types.sort_out(\nvalues=")
    back = pickle.loads(pickle.dumps(r))
    assert type(back) is ember.return_types.sort_out and back.indices.tolist() == [[1, 0], [0, 1]]
    r = ember.max(x, 1, out=(ember.empty(0), ember.empty(0, dtype=ember.long)))
    assert type(r) is ember.return_types.max_out and r.values.tolist() == [3., 2.]
    assert type(ember.sort(x)) is ember.return_types.sort
    assert not hasattr(ember.return_types, "histogramdd_out")


# --- argument types ------------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda x: ember.sort(x, True), lambda x: x.argsort(True), lambda x: ember.topk(x, 1, True),
    lambda x: ember.kthvalue(x, 1, True), lambda x: ember.count_nonzero(x, True),
    lambda x: ember.unique(x, dim=True), lambda x: x.sum(True), lambda x: x.softmax(False)])
def test_bool_dims_are_refused(call):
    # PyTorch's parser: the argument named, or no overload taking a bool (sort, sum)
    with pytest.raises(TypeError, match=r"argument 'dim' (\(position \d\) )?must be int, not "
                                        r"bool|invalid combination of arguments - got "
                                        r"\((Tensor, )?bool\)"):
        call(ember.ones(2, 3))


def test_k_must_be_an_int():
    x = ember.tensor([3., 1., 2.])
    for fn in (ember.topk, ember.kthvalue):
        for k, kind in ((1.0, "float"), (True, "bool")):
            with pytest.raises(TypeError, match=rf"^{fn.__name__}\(\): argument 'k' \(position "
                                                rf"2\) must be int, not {kind}$"):
                fn(x, k)
    assert ember.kthvalue(x, ember.tensor(2)).values.item() == 2.0
    assert ember.topk(x, ember.tensor(1)).indices.tolist() == [0]


def test_isin_takes_its_number_overloads_keywords():
    x = ember.tensor([[1, 2], [3, 1]])
    assert ember.isin(elements=x, test_element=1).tolist() == [[True, False], [False, True]]
    assert ember.isin(element=3, test_elements=x).item() is True
    with pytest.raises(TypeError, match="unexpected keyword argument 'test_element'"):
        ember.isin(x, x, test_element=1)
