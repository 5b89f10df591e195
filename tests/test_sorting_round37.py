"""Regression tests for the bugs the round-37 sorting/searching fuzzer found (torch-free)."""

import warnings

import pytest

import ember
import ember.autograd.forward_ad as fw


def _dual(values):
    x = ember.tensor(values, dtype=ember.float64)
    return fw.make_dual(x, ember.ones_like(x))


@pytest.mark.parametrize("call, kernel", [
    (lambda x: ember.unique(x), "_unique2"),
    (lambda x: ember.unique(x, dim=0), "unique_dim"),
    (lambda x: ember.unique_consecutive(x), "unique_consecutive"),
    (lambda x: ember.histogram(x, 2), "aten::histogram"),
    (lambda x: ember.bincount(ember.tensor([0, 1, 1]), x), "aten::bincount"),
])
def test_forward_ad_refused_in_pytorch_words(call, kernel):
    with fw.dual_level(), pytest.raises(NotImplementedError,
                                        match=f"^Trying to use forward AD with {kernel} "):
        call(_dual([1.0, 2.0, 2.0]))


def test_topk_and_kthvalue_check_k_before_the_dtype():
    flags = ember.zeros(5, dtype=ember.bool)
    with pytest.raises(RuntimeError, match="^selected index k out of range$"):
        ember.topk(flags, 6)
    with pytest.raises(RuntimeError, match="selected number k out of range for dimension 0"):
        ember.kthvalue(flags, 6)
    with pytest.raises(RuntimeError, match="^selected index k out of range$"):
        ember.topk(ember.zeros(3, dtype=ember.complex64), 4)
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        ember.kthvalue(ember.zeros(0, dtype=ember.bool), 1)
    # in range, the dtype is refused as before; a 0-d input returns first
    with pytest.raises(RuntimeError, match="topk does not support bool dtypes on CPU"):
        ember.topk(flags, 2)
    with pytest.raises(NotImplementedError, match="\"kthvalue_cpu\" not implemented for 'Bool'"):
        ember.kthvalue(flags, 2)
    values, indices = ember.kthvalue(ember.tensor(True), 1)
    assert values.item() is True and indices.item() == 0


def test_searchsorted_checks_side_and_sorter_first_and_bool_only_with_values():
    seq, none = ember.tensor([False, True]), ember.zeros(0, dtype=ember.bool)
    assert ember.searchsorted(seq, none).tolist() == []
    assert ember.bucketize(none, ember.tensor([True])).tolist() == []
    with pytest.raises(NotImplementedError, match="'Bool'"):
        ember.searchsorted(seq, ember.tensor([True]))
    with pytest.raises(RuntimeError, match="side can only be 'left' or 'right' but got mid"):
        ember.searchsorted(ember.ones(2, 2), 1.0, side="mid")
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        ember.searchsorted(ember.ones(2, 2), ember.ones(3, 3), side="left", right=True)
    with pytest.raises(RuntimeError, match="boundary and sorter must have the same size"):
        ember.searchsorted(ember.ones(2, 2), ember.ones(3, 3), sorter=ember.tensor([0]))


def test_bucketize_casts_boundaries_silently():
    x = ember.tensor([1.0, 0.0, 3.0, 0.0]).half()[::2]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.filterwarnings("ignore", "torch.searchsorted", UserWarning)
        found = ember.bucketize(x, ember.tensor([0, 2, 2 ** 62]))
    assert found.tolist() == [1, 2]


@pytest.mark.parametrize("call, message", [
    (lambda o: ember.topk(ember.ones(3), 1, out=o[:1]), "^expected tuple of 2 elements but got 1$"),
    (lambda o: ember.sort(ember.ones(3), out=o + o[:1]),
     "^expected tuple of 2 elements but got 3$"),
    (lambda o: ember.cummax(ember.ones(3), 0, out=list(o) * 2),
     "^expected tuple of 2 elements but got 4$"),
    (lambda o: ember.topk(ember.ones(3), 1, out=o[0]),
     "^topk\\(\\): argument 'out' must be tuple of Tensors, not Tensor$"),
    (lambda o: ember.aminmax(ember.ones(3), out=o[0]),
     "^aminmax\\(\\): argument 'out' must be tuple of Tensors, not Tensor$"),
    (lambda o: ember.neg(ember.ones(3), out=o[:1]), "^neg\\(\\): argument 'out' must be Tensor, "
                                                    "not tuple$"),
    (lambda o: ember.amin(ember.ones(3), 0, out=list(o)), "^amin\\(\\): argument 'out' must be "
                                                          "Tensor, not list$"),
    (lambda o: ember.max(ember.ones(3), 0, out=o[0]),
     "^max\\(\\) received an invalid combination of arguments - got \\(Tensor, int, "
     "out=Tensor\\)"),
])
def test_out_of_another_count_in_the_parsers_words(call, message):
    outs = (ember.empty(0), ember.empty(0, dtype=ember.int64))
    with pytest.raises(TypeError, match=message):
        call(outs)


def test_isin_takes_a_number_by_its_singular_keyword_only():
    x = ember.tensor([1.0, 2.5])
    with pytest.raises(TypeError, match="isin\\(\\) received an invalid combination of "
                                        "arguments - got \\(Tensor, test_elements=float\\)"):
        ember.isin(x, test_elements=2.5)
    with pytest.raises(TypeError, match="got \\(Tensor, test_elements=bool\\)"):
        ember.isin(x, test_elements=True)
    assert ember.isin(x, test_element=2.5).tolist() == [False, True]
    assert ember.isin(x, 2.5, invert=True).tolist() == [True, False]
    assert ember.isin(element=1, test_elements=x).item() is True


def test_histc_names_bins_by_its_position_as_called():
    x = ember.ones(3)
    with pytest.raises(TypeError, match="^histc\\(\\): argument 'bins' \\(position 1\\) must be "
                                        "int, not NoneType$"):
        x.histc(None)
    with pytest.raises(TypeError, match="^histc\\(\\): argument 'bins' must be int, not float$"):
        ember.histc(x, bins=1.5)
    with pytest.raises(TypeError, match="\\(position 2\\) must be int, not bool"):
        ember.histc(x, True)
    assert ember.histc(x, ember.tensor(2), 0, 2).tolist() == [0.0, 3.0]


def test_cummax_of_an_empty_input_reads_neither_dim_nor_dtype():
    values, indices = ember.cummax(ember.ones(3, 0), dim=5)
    assert values.shape == (3, 0) and indices.dtype is ember.int64
    values, indices = ember.cummin(ember.ones(0, dtype=ember.complex64), dim=2)
    assert values.shape == (0,) and values.dtype is ember.complex64
    assert ember.cummax(ember.tensor(1 + 2j), 0).values.item() == 1 + 2j
    with pytest.raises(IndexError, match="Dimension out of range"):
        ember.cummax(ember.ones(2, dtype=ember.complex64), dim=2)
    with pytest.raises(NotImplementedError, match="\"cummax_cpu\" not implemented for "
                                                  "'ComplexFloat'"):
        ember.cummax(ember.ones(2, dtype=ember.complex64), dim=0)


def test_sort_mode_median_check_the_dim_before_the_dtype():
    c = ember.ones(2, dtype=ember.complex64)
    for call in (lambda: ember.sort(c, dim=2), lambda: ember.argsort(c, 2),
                 lambda: ember.mode(c, 3), lambda: ember.median(c, 3),
                 lambda: ember.nanmedian(c, -2)):
        with pytest.raises(IndexError, match="Dimension out of range"):
            call()
    with pytest.raises(RuntimeError, match="Sort does not support complex dtypes on CPU"):
        ember.sort(ember.ones((), dtype=ember.complex64))
    with pytest.raises(IndexError, match="median\\(\\): Expected reduction dim 0 to have "
                                         "non-zero size"):
        ember.median(ember.ones(0, dtype=ember.bool), 0)
    with pytest.raises(NotImplementedError, match="\"median_out\" not implemented for 'Bool'"):
        ember.median(ember.ones(0, 2, dtype=ember.bool), 1)
    # mode returns a 0-d input, and an empty one, before it reads the dtype
    assert ember.mode(ember.tensor(1 + 1j)).values.item() == 1 + 1j
    assert ember.mode(ember.ones(2, 0, dtype=ember.complex64), 0).values.shape == (0,)
    with pytest.raises(NotImplementedError, match="\"mode_cpu\" not implemented for "
                                                  "'ComplexFloat'"):
        ember.mode(c, 0)
