"""ember.utils.data fixes of round 36 (found by tests/parity/test_parity_data_fuzz_round36.py):
a TensorDataset batch built as PyTorch's loader builds it (a subclass's ``__getitem__``,
odd indices, tensors that record their graph), NumPy scalars collated by ``as_tensor``'s
rules, a tensor handed to default_collate, and the errors of nested data that cannot be a
tensor."""

import numpy as np
import pytest

import ember
from ember.utils.data import (DataLoader, Subset, TensorDataset, default_collate)


def _batches(dataset, **options):
    return list(DataLoader(dataset, **options))


class _Doubled(TensorDataset):
    def __getitem__(self, index):
        x, = super().__getitem__(index)
        return x * 2, "tag"


def test_a_tensordataset_subclass_getitem_makes_the_batch():
    batches = _batches(_Doubled(ember.arange(4.0)), batch_size=2)
    assert [b[0].tolist() for b in batches] == [[0.0, 2.0], [4.0, 6.0]]
    assert batches[0][1] == ("tag", "tag")
    (x, tags), = _batches(Subset(_Doubled(ember.arange(4.0)), [3, 0]), batch_size=2)
    assert x.tolist() == [6.0, 0.0] and tags == ("tag", "tag")


def test_a_batch_of_a_tensor_that_requires_grad_is_stacked():
    w = ember.arange(6.0).reshape(3, 2).requires_grad_()
    (x, y), = _batches(TensorDataset(w, ember.arange(3)), batch_sampler=[[2, 0]])
    assert type(x.grad_fn).__name__ == "StackBackward0" and y.grad_fn is None
    (x * ember.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert w.grad.tolist() == [[3.0, 4.0], [0.0, 0.0], [1.0, 2.0]]
    with ember.no_grad():
        (x, _), = _batches(TensorDataset(w, ember.arange(3)), batch_sampler=[[2, 0]])
    assert x.grad_fn is None and x.tolist() == [[4.0, 5.0], [0.0, 1.0]]


@pytest.mark.parametrize("batch, values", [([-1, 0], [2.0, 0.0]),
                                           ([np.int64(1), np.int32(-3)], [1.0, 0.0]),
                                           ([ember.tensor(2), 1], [2.0, 1.0])])
def test_a_tensordataset_batch_takes_any_index_a_row_takes(batch, values):
    (x,), = _batches(TensorDataset(ember.arange(3.0)), batch_sampler=[batch])
    assert x.tolist() == values


@pytest.mark.parametrize("batch, error, message", [
    ([5, 0], IndexError, "index 5 is out of bounds for dimension 0 with size 3"),
    ([0, -4], IndexError, "index -4 is out of bounds for dimension 0 with size 3"),
    ([1.0, 0], IndexError, "only integers, slices"),
    ([True, 0], RuntimeError, "stack expects each tensor to be equal size"),
])
def test_a_tensordataset_batch_of_bad_indices_raises_the_rows_error(batch, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(")):
        _batches(TensorDataset(ember.arange(3.0)), batch_sampler=[batch])


def test_numpy_scalars_collate_as_as_tensor_reads_a_list():
    assert default_collate([np.float32(1), np.float32(2)]).dtype == ember.float32
    assert default_collate([np.bool_(True), np.bool_(False)]).dtype == ember.bool
    # a Python float among them takes the default dtype (NumPy would make float64)
    out = default_collate([np.False_, -2.0, np.True_])
    assert out.dtype == ember.float32 and out.tolist() == [0.0, -2.0, 1.0]
    out = default_collate([np.float64(1), ember.tensor([2.0], dtype=ember.float16)])
    assert out.dtype == ember.float64 and out.tolist() == [1.0, 2.0]


def test_a_tensor_is_no_batch_for_default_collate():
    with pytest.raises(TypeError, match=r"must be tuple of Tensors, not Tensor"):
        default_collate(ember.tensor([2]))
    loader = DataLoader([ember.tensor([1]), ember.tensor([2])], batch_size=None,
                        collate_fn=default_collate)
    with pytest.raises(TypeError, match=r"must be tuple of Tensors, not Tensor"):
        list(loader)


@pytest.mark.parametrize("data, error, message", [
    # an array where a number is due: NumPy's refusal of __index__ / __float__
    ([np.int64(2), np.array([7.0])], TypeError,
     "only 0-dimensional arrays can be converted to Python scalars"),
    ([2, np.array([7, 8])], TypeError,
     "only integer scalar arrays can be converted to a scalar index"),
    # the dtype is inferred (an empty list: the default one) before anything is read
    ([np.int32(7), []], TypeError, "must be real number, not list"),
    ([np.int32(1), "a"], TypeError, "new(): invalid data type 'str'"),
    ([np.int32(4), "tensor", "a"], TypeError, "new(): invalid data type 'str'"),
    (["tensor", None], RuntimeError, "Could not infer dtype of NoneType"),
    # the shape is checked before a value is refused
    ([np.int32(3), np.array([False, True])], TypeError,
     "only integer scalar arrays can be converted to a scalar index"),
])
def test_nested_data_errors(data, error, message):
    data = [ember.tensor([[8], [3]]) if isinstance(x, str) and x == "tensor" else x
            for x in data]
    with pytest.raises(error) as info:
        ember.as_tensor(data)
    assert str(info.value) == message


def test_a_numpy_bool_is_a_number_at_the_last_depth():
    assert ember.tensor([[np.True_, 1.5]]).tolist() == [[1.0, 1.5]]
    with pytest.raises(TypeError, match="only 0-dimensional arrays"):
        ember.tensor([np.True_, np.array([0.5], dtype=np.float16)])
    with pytest.raises(TypeError, match="'numpy.bool' object cannot be interpreted"):
        ember.tensor([np.True_, np.array([0.5])], dtype=ember.int64)
