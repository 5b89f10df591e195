"""expand's views: strides as PyTorch's (0 along the dims repeated), memory shared with the
input, values of every dtype, and gradients (round 35: a row-major input is viewed
directly rather than through NumPy's broadcast_to)."""

import numpy as np
import pytest

import ember as torch


@pytest.mark.parametrize("shape,size,strides", [
    ((8, 8), (2, 8, 8), (0, 8, 1)),
    ((8, 1), (3, 8, 4), (0, 1, 0)),
    ((1, 8), (5, -1), (0, 1)),
    ((1, 1), (1, 1), (1, 1)),
    ((2, 1, 3), (4, 2, 1, 3), (0, 3, 3, 1)),
    ((3,), (0, 3), (0, 1)),
    ((), (2, 3), (0, 0)),
    ((3,), (1, 1, 3), (3, 3, 1)),       # a new dim of size 1: the next dim's extent
    ((3,), (1, 2, 3), (0, 0, 1)),
    ((3, 1), (1, 3, 4), (3, 1, 0)),
    ((), (1, 1), (0, 0)),
])
def test_strides_and_shared_memory(shape, size, strides):
    x = torch.arange(float(np.prod(shape, dtype=int))).reshape(shape).clone()
    e = x.expand(*size)
    assert e.stride() == strides
    want = np.broadcast_to(x.numpy(), tuple(s if s != -1 else n for s, n in
                                             zip(size, (1,) * (len(size) - len(shape))
                                                 + shape))).copy()
    assert e.tolist() == want.tolist()
    assert e.data_ptr() == (x.data_ptr() if want.size else 0)     # (PyTorch's: 0 if empty)
    assert e._base is x
    x.add_(1)                           # an in-place write shows through, bumps the version
    assert e._version == x._version == 1
    if want.size:
        assert e.reshape(-1)[-1].item() == want.reshape(-1)[-1] + 1


def test_non_contiguous_inputs():
    x = torch.arange(12.0).reshape(3, 4)
    e = x.t().expand(2, 4, 3)
    assert e.stride() == (0, 1, 4)
    assert e[1].tolist() == x.t().tolist()
    s = x[:, ::2]
    e = s.expand(2, 3, 2)
    assert e.stride() == (0, 4, 2)
    assert e[0].tolist() == [[0.0, 2.0], [4.0, 6.0], [8.0, 10.0]]
    col = x[:, 1:2]                     # (3, 1) of strides (4, 1)
    assert col.expand(3, 5).stride() == (4, 0)
    assert x.t().expand(1, 4, 3).stride() == (4, 1, 4)
    assert s.expand(1, 3, 2).stride() == (12, 4, 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64,
                                   torch.bool, torch.complex64, torch.uint8])
def test_dtypes(dtype):
    x = torch.tensor([[1], [0]]).to(dtype)
    e = x.expand(3, 2, 2)
    assert e.dtype == dtype and e.stride() == (0, 1, 0)
    assert e.to(torch.float32).tolist() == [[[1.0, 1.0], [0.0, 0.0]]] * 3


def test_expand_of_view_with_offset():
    x = torch.arange(10.0)
    v = x[4:7]
    e = v.expand(2, 3)
    assert e.tolist() == [[4.0, 5.0, 6.0]] * 2
    assert e.storage_offset() == 4 and e.stride() == (0, 1)
    x[5] = -1.0
    assert e[1, 1].item() == -1.0


def test_gradient():
    x = torch.ones(3, 1, requires_grad=True)
    e = x.expand(2, 3, 4)
    assert e.grad_fn.name() == "ExpandBackward0"
    (e * torch.arange(24.0).reshape(2, 3, 4)).sum().backward()
    assert x.grad.tolist() == [[sum(range(0, 4)) + sum(range(12, 16))],
                               [sum(range(4, 8)) + sum(range(16, 20))],
                               [sum(range(8, 12)) + sum(range(20, 24))]]


def test_errors_unchanged():
    x = torch.ones(2, 3)
    with pytest.raises(RuntimeError, match="must match the existing size"):
        x.expand(2, 4)
    with pytest.raises(RuntimeError, match="number of sizes provided"):
        x.expand(3)
    with pytest.raises(TypeError):
        x.expand(2, 3.0)
