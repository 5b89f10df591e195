"""Round-15 indexing checked against PyTorch: errors of subscripts on 0-dim tensors and the
dim an out-of-range int names, the strides of advanced-indexing results, and the layout of
index_fill, index_put and put results on non-contiguous inputs."""

import numpy as np
import pytest

import ember
from tests.parity._compare import error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _error(fn, lib):
    """``fn(lib)``'s error as (type name, message); it must raise."""
    answer = error(fn, lib)
    assert answer is not None, "no error raised"
    return answer


_SCALAR_KEYS = {
    "zero": lambda T: 0,
    "one": lambda T: 1,
    "minus_one": lambda T: -1,
    "numpy_int": lambda T: np.int64(2),
    "slice": lambda T: slice(None),
    "negative_step": lambda T: slice(None, None, -1),
    "zero_step": lambda T: slice(None, None, 0),
    "tuple_of_int": lambda T: (0,),
    "none_then_int": lambda T: (None, 0),
    "int_tensor": lambda T: T.tensor(0),
    "float": lambda T: 1.0,
    "list": lambda T: [0],
    "ellipsis_then_int": lambda T: (Ellipsis, 0),
}


@pytest.mark.parametrize("key", _SCALAR_KEYS.values(), ids=_SCALAR_KEYS.keys())
def test_subscript_errors_of_a_0_dim_tensor(key):
    def get(T):
        return T.tensor(3.0)[key(T)]
    assert _error(get, ember) == _error(get, torch)


_COUNTED_KEYS = {
    "float_after_slice_1d": ((3,), lambda T: (slice(None), 1.0)),
    "negative_step_after_int_1d": ((3,), lambda T: (0, slice(None, None, -1))),
    "float_after_slice_2d": ((3, 2), lambda T: (slice(None), 1.0)),
    "int_after_ellipsis_and_index": ((2, 3, 2, 1), lambda T: (Ellipsis, T.tensor([1]), 1)),
    "int_after_none": ((2, 3, 2, 1), lambda T: (0, None, 0, 0, 1)),
    "int_after_ellipsis": ((2, 3, 2, 1), lambda T: (Ellipsis, 5)),
    "int_after_true": ((2, 3, 2, 1), lambda T: (Ellipsis, True, 5)),
}


@pytest.mark.parametrize("shape, key", _COUNTED_KEYS.values(), ids=_COUNTED_KEYS.keys())
def test_subscript_counts_dims_before_checking_kinds_and_names_the_ints_place(shape, key):
    def get(T):
        return T.zeros(shape)[key(T)]
    assert _error(get, ember) == _error(get, torch)


def _input(T, shape, order):
    """An arange of ``shape`` whose memory runs through its dims in ``order``."""
    laid = T.arange(float(np.prod(shape)), dtype=T.float64).reshape([shape[d] for d in order])
    return laid.permute(*np.argsort(order).tolist())


_ADVANCED = {
    "transposed_column_index": ((4, 4), (1, 0), lambda T: (slice(None), T.tensor([2, 1]))),
    "transposed_nested_index": ((4, 4), (1, 0), lambda T: (slice(None), [[2], [1]])),
    "permuted_middle": ((4, 2, 3), (1, 2, 0), lambda T: (slice(None), T.tensor([1, 0]))),
    "permuted_last": ((4, 2, 3), (1, 2, 0), lambda T: (Ellipsis, T.tensor([1, 0]))),
    "permuted_split": ((4, 2, 3), (1, 2, 0), lambda T: (T.tensor([1, 0]), slice(None),
                                                         T.tensor([2, 2]))),
    "new_dim_then_list": ((3, 1, 4), (2, 1, 0), lambda T: (None, [0, 2])),
    "size_1_dims": ((4, 1, 1), (0, 1, 2), lambda T: (slice(None), T.tensor([0]))),
    "mask_after_none": ((1, 3), (1, 0), lambda T: (None, T.tensor([True]))),
    "int32_index_after_slice": ((4, 2), (1, 0), lambda T: (slice(None, None, 2),
                                                           T.tensor([[0, 1], [1, 0]],
                                                                    dtype=T.int32))),
}


@pytest.mark.parametrize("shape, order, key", _ADVANCED.values(), ids=_ADVANCED.keys())
def test_advanced_indexing_result_strides(shape, order, key):
    ours, theirs = _input(ember, shape, order)[key(ember)], _input(torch, shape, order)[key(torch)]
    assert ours.shape == theirs.shape
    assert ours.stride() == theirs.stride()
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_transposed_column_selection_can_be_viewed_flat():
    picked = ember.arange(16.0).reshape(4, 4).t()[:, [2, 1]]
    assert picked.view(-1).tolist() == [8.0, 4.0, 9.0, 5.0, 10.0, 6.0, 11.0, 7.0]


_KEEP_LAYOUT = {
    "index_fill": lambda T, x: x.index_fill(1, T.tensor([0, 3]), -2.0),
    "index_put": lambda T, x: x.index_put((T.tensor([0, 0]), T.tensor([1, 1])),
                                          T.tensor([5.0, 6.0], dtype=T.float64)),
    "index_put_accumulate": lambda T, x: x.index_put((x > 8,), T.tensor(5.0, dtype=T.float64),
                                                     accumulate=True),
    "put": lambda T, x: x.put(T.tensor([0, 9, 0]), T.tensor([1.0, 2.0, 3.0], dtype=T.float64)),
    "put_accumulate": lambda T, x: x.put(T.tensor([0, 9, 0]),
                                         T.tensor([1.0, 2.0, 3.0], dtype=T.float64),
                                         accumulate=True),
}
_LAYOUTS = {
    "transposed": lambda T: _input(T, (4, 5), (1, 0)),
    "strided": lambda T: _input(T, (8, 5), (1, 0))[::2],
    "expanded": lambda T: T.arange(5.0, dtype=T.float64).expand(4, 5),
}


@pytest.mark.parametrize("layout", _LAYOUTS.values(), ids=_LAYOUTS.keys())
@pytest.mark.parametrize("op", _KEEP_LAYOUT.values(), ids=_KEEP_LAYOUT.keys())
def test_out_of_place_writes_keep_the_input_layout_as_torch_does(op, layout):
    ours, theirs = op(ember, layout(ember)), op(torch, layout(torch))
    assert ours.stride() == theirs.stride()
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_indexing_fuzz_values_strides_and_gradients():
    rng = np.random.default_rng(15)
    for _ in range(60):
        shape = tuple(int(n) for n in rng.integers(1, 5, rng.integers(2, 4)))
        order = tuple(int(d) for d in rng.permutation(len(shape)))
        dims = rng.choice(len(shape), rng.integers(1, 3), replace=False)
        bshape = tuple(int(n) for n in rng.integers(1, 4, rng.integers(1, 3)))
        picks = {int(d): rng.integers(-shape[d], shape[d], bshape).tolist() for d in dims}

        def key(T, picks=picks, ndim=len(shape)):
            return tuple(T.tensor(picks[d]) if d in picks else slice(None) for d in range(ndim))

        results = []
        for T in (ember, torch):
            x = _input(T, shape, order).requires_grad_()
            out = x[key(T)]
            weights = T.arange(float(out.numel()), dtype=T.float64).reshape(out.shape)
            (out * weights).sum().backward()
            results.append((tuple(out.shape), out.stride(), out.detach().numpy().tolist(),
                            x.grad.numpy().tolist()))
        assert results[0] == results[1], (shape, order, picks)
