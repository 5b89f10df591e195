"""Review of the round-34 view/in-place fixes: the strides of size-1 dims in view, reshape and
unflatten (values from PyTorch 2.13), ``restrided``'s cheaper NumPy route, a saved tensor
detached in place (readable by ``_saved_*``, refused in backward only), and ``resize_`` of
an inference tensor to its own shape (allowed, as PyTorch's)."""

import warnings

import numpy as np
import pytest

import ember
from ember._memory_format import restrided


@pytest.mark.parametrize("make,shape,strides", [
    # NumPy keeps the strides of a view to the same shape; PyTorch computes them anew
    (lambda: ember.ones(2, 5)[1:2, 1:4], (1, 3), (3, 1)),
    (lambda: ember.ones(3, 4).t()[1:2], (1, 3), (12, 4)),
    # trailing size-1 dims take the input's last stride (here a size-1 dim's own)
    (lambda: ember.ones(2, 5)[:, 1:2], (1, 2, 1, 1), (10, 5, 1, 1)),
    (lambda: ember.ones(1, 3).t(), (3, 1, 1), (1, 3, 3)),
    (lambda: ember.ones(3, 1).expand(3, 4), (1, 3, 1, 4, 1), (3, 1, 0, 0, 0)),
    (lambda: ember.arange(30.).as_strided((3, 1), (2, 7)), (1, 3, 1), (6, 2, 7)),
    (lambda: ember.arange(30.).as_strided((2, 1, 1), (3, 5, 11)), (2, 1), (3, 11)),
    (lambda: ember.tensor(3.), (1, 1), (1, 1)),
])
def test_view_and_reshape_strides_of_size_one_dims(make, shape, strides):
    x = make()
    assert x.view(shape).stride() == strides
    y = x.reshape(shape)
    assert y.stride() == strides and y.data_ptr() == x.data_ptr()
    assert x.view(shape).tolist() == np.asarray(x.tolist()).reshape(shape).tolist()


def test_unflatten_of_a_slice_has_the_view_strides():
    x = ember.ones(2, 5)[:, 1:2]
    assert x.unflatten(0, (1, 2, 1)).stride() == (10, 5, 1, 1)
    assert x.t().unflatten(1, (2, 1)).stride() == (10, 5, 5)


@pytest.mark.parametrize("dtype", ["float32", "bool", "complex64", "bfloat16", "float16",
                                   "float8_e5m2", "int8"])
def test_restrided_views_keep_dtype_memory_and_writes(dtype):
    a = ember.zeros(2, 5, dtype=getattr(ember, dtype))
    v = a[:, 1:2].view(1, 2, 1, 1)
    assert v.stride() == (10, 5, 1, 1) and v.dtype == a.dtype
    v.fill_(1)
    assert a.to(ember.float32).sum().item() == 2 and a[1, 1].item() == 1


def test_restrided_numpy_route_matches_as_strided():
    base = np.arange(20, dtype=np.float32).reshape(4, 5)
    for arr in (base, base[:, 1:2], base[::2, ::-1]):
        for ro in (False, True):
            arr = arr.copy() if ro else arr
            arr.flags.writeable = not ro
            out = restrided(np, arr, (2, 1), (arr.itemsize * 5, 4))
            ref = np.lib.stride_tricks.as_strided(arr, (2, 1), (arr.itemsize * 5, 4))
            assert out.strides == ref.strides and out.flags.writeable == (not ro)
            assert np.shares_memory(out, arr) and (out == ref).all()


def test_a_saved_tensor_detached_in_place_is_readable_but_refused_in_backward():
    a = ember.ones(3, requires_grad=True)
    c = a * 2
    y = c * c
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (itertools.count.__reduce__ warns from 3.12)
        c.detach_()
    assert y.grad_fn._saved_self.requires_grad is False        # as PyTorch's
    with pytest.raises(RuntimeError, match="detached in-place, i.e. with .detach_"):
        y.sum().backward()
    c.requires_grad_()
    z = (c * c).sum()       # made after detach_(): saves c afresh
    z.backward()
    assert c.grad.tolist() == [4.0, 4.0, 4.0]


def test_resize_of_an_inference_tensor_to_its_shape_is_allowed():
    with ember.inference_mode():
        a = ember.ones(2, 3, 4, 5)
        b = ember.ones(6)
    assert a.resize_(2, 3, 4, 5, memory_format=ember.channels_last).stride() == (60, 1, 15, 3)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside"):
        b.resize_(2, 3, memory_format=ember.contiguous_format)
    assert b.shape == (6,)
