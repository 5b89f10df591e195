"""Round 36's subscript and index_put fixes, found by its indexing fuzzer (in tests/parity),
checked against PyTorch 2.13's observed behaviour without needing torch."""

import pytest

import ember as torch


def _grad_fn(t):
    return type(t.grad_fn).__name__


def _leaf_clone(*shape):
    return torch.zeros(shape, dtype=torch.float64, requires_grad=True).clone()


def test_index_put_names_the_values_position_of_each_form():
    x, i = torch.zeros(3), (torch.tensor([0]),)
    with pytest.raises(TypeError, match=r"index_put_\(\): argument 'values' \(position 2\) must "
                                        r"be Tensor, not int"):
        x.index_put_(i, 1)
    with pytest.raises(TypeError, match=r"index_put\(\): argument 'values' \(position 3\)"):
        torch.index_put(x, i, 1)


def test_index_put_names_a_none_index_as_the_forms_argument():
    x, i, v = torch.zeros(3, 2), torch.tensor([0]), torch.tensor(1.0)
    with pytest.raises(TypeError, match="element 1 in argument 0, but got NoneType"):
        x.index_put_((i, None), v)
    with pytest.raises(TypeError, match="element 1 in argument 1, but got NoneType"):
        torch.index_put(x, (i, None), v)


def test_index_put_counts_entries_before_expanding_masks():
    v = torch.tensor(1.0)
    with pytest.raises(IndexError, match=r"dimension 1 \(got 3\)"):     # before the dtypes
        torch.zeros(2).index_put_((torch.tensor([0.0]), torch.tensor([0]), torch.tensor([0])), v)
    with pytest.raises(IndexError, match=r"dimension 0 \(got 1\)"):
        torch.zeros(()).index_put((torch.tensor(True),), v)
    mask = torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of "
                                         r"\[-2, 1\], but got 2\)"):
        torch.zeros(2, 3).index_put_((mask, torch.tensor([7])), v)
    with pytest.raises(IndexError, match=r"range of \[-2, 1\], but got 2\)"):   # a mask past
        torch.zeros(2, 3).index_put_((torch.tensor([0]), torch.ones(3, 2, dtype=torch.bool)), v)
    with pytest.raises(IndexError, match="shape mismatch: indexing tensors could not be"):
        torch.zeros(3, 1, 5).index_put((torch.tensor([[True], [False], [True]]),
                                        torch.tensor([0, 0, 0]), torch.tensor([0, 1, 2])), v)


def test_setitem_reads_the_value_before_the_key():
    x = torch.zeros(3)
    with pytest.raises(RuntimeError, match="value cannot be converted to type float without "
                                           "overflow"):
        x[1, 2] = 2.5 + 1j
    with pytest.raises(TypeError, match="can't assign a str to a torch.FloatTensor"):
        x[5] = "a"


@pytest.mark.parametrize("write, name", [
    (lambda x: x.__setitem__(Ellipsis, torch.ones(3, dtype=torch.float64)), "CopyBackwards"),
    (lambda x: x.__setitem__(slice(0, 7), torch.ones(1, dtype=torch.float64)), "CopyBackwards"),
    (lambda x: x.__setitem__((slice(None), slice(0, 9)), 1.0), "FillBackward3"),
    (lambda x: x.__setitem__(Ellipsis, torch.tensor(2.0, dtype=torch.float64)), "FillBackward3"),
    (lambda x: x.__setitem__((torch.tensor([0]), slice(0, 7)), 1.0), "IndexPutBackward0"),
    (lambda x: x.__setitem__(slice(0, 1), 1.0), "CopySlices"),
    (lambda x: x.__setitem__(True, torch.ones(3, dtype=torch.float64)), "CopySlices"),
])
def test_setitem_of_whole_dims_writes_the_tensor_itself(write, name):
    x = _leaf_clone(2, 3)
    write(x)
    assert _grad_fn(x) == name


def test_setitem_of_a_0_dim_tensor_copies():
    x = _leaf_clone()
    x[...] = 1.0
    assert _grad_fn(x) == "CopyBackwards"


def test_setitem_refuses_a_value_in_its_own_dtype():
    x = torch.zeros(5, 2)
    with pytest.raises(RuntimeError, match=r"expand\(torch.DoubleTensor\{\[2, 2\]\}, size=\[\]\)"):
        x[-3, torch.tensor(-2, dtype=torch.int32)] = torch.ones(2, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=r"expand\(CPUComplexFloatType\{\[3, 3\]\}, size=\[2\]"):
        torch.zeros(1, 2, dtype=torch.bool)[-1] = torch.ones(3, 3, dtype=torch.complex64)
    with pytest.raises(RuntimeError, match=r"expand\(CPUBFloat16Type"):
        torch.zeros(3)[0] = torch.zeros(2, 2, dtype=torch.bfloat16)


_OVERLAP = "some elements of the input tensor and the written-to tensor refer to a single"


def test_advanced_writes_refuse_values_sharing_the_memory_written():
    x = torch.arange(4.0)
    with pytest.raises(RuntimeError, match=_OVERLAP):
        x[torch.tensor([0, 1, 2, 3])] = x
    with pytest.raises(RuntimeError, match=_OVERLAP):
        x[torch.tensor([0, 1])] = x[None, :2]
    with pytest.raises(RuntimeError, match=_OVERLAP):
        x.index_put_((torch.tensor([0]),), x[1])
    x[torch.tensor([True, False, True, False])] = x[1]     # masked_fill_ reads the value first
    assert x.tolist() == [1.0, 1.0, 1.0, 3.0]
    x[torch.tensor([0, 1])] = x[torch.tensor([2, 3])]          # a copy
    assert x.tolist() == [1.0, 3.0, 1.0, 3.0]


def test_augmented_assignment_of_a_region_writes_it_back():
    x = _leaf_clone(5, 2)
    x[-1] += torch.ones(2, dtype=torch.float64)
    x[3] += 1.5
    assert x[3:].tolist() == [[1.5, 1.5], [1.0, 1.0]]
    assert _grad_fn(x) == "CopySlices"


def test_a_broadcast_value_overlapping_its_target_is_expanded_first():
    x = torch.arange(8.0).reshape(4, 2)
    x[1:-1] = x[-2:3]
    assert x.tolist() == [[0, 1], [4, 5], [4, 5], [6, 7]]


def test_false_writes_nothing_and_true_casts_the_value():
    x = torch.zeros(2, dtype=torch.float64)
    before = x._version
    x[False] = torch.ones(5, 7)
    assert x._version == before
    x[True] = torch.ones(2, dtype=torch.float16)
    assert x.tolist() == [1.0, 1.0] and x._version == before + 1


def test_an_integer_view_written_with_a_value_needing_grad_needs_none():
    v = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    x = torch.zeros(3, dtype=torch.int64)
    x[1] = v
    x[1:].copy_(v)
    assert not x.requires_grad and x.grad_fn is None and x.tolist() == [0, 2, 2]


def test_backward_casts_a_given_gradient_to_the_outputs_dtype():
    x = torch.zeros(3, dtype=torch.float16, requires_grad=True)
    v = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    y = x.clone()
    y[...] = v
    y.backward(torch.tensor([1.001, 2.001, 3.001], dtype=torch.float64))
    assert v.grad.item() == pytest.approx(6.00390625, abs=1e-9)    # summed in float16
    assert x.grad.dtype == torch.float16


def test_filling_an_expanded_tensor_with_a_tensor_is_refused():
    x = torch.zeros(1).expand(3)
    x.fill_(1.0)                                # a number: fine
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x.fill_(torch.tensor(2.0))
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        x[1:] = 2.0
    x[0] = 3.0
    assert x.tolist() == [3.0, 3.0, 3.0]


def test_in_place_ops_check_the_shape_before_the_cast():
    a = torch.zeros((), dtype=torch.float64)
    with pytest.raises(RuntimeError, match=r"output with shape \[\] doesn't match the broadcast "
                                           r"shape \[2\]"):
        a += torch.ones(2, dtype=torch.complex64)
