"""Review of the round-36 setitem write routes: copy_/fill_ write in place (no temporary),
with PyTorch's casts of a 0-dim tensor value (read as a double: no ml_dtypes quirks)."""

import pytest

import ember as torch


def test_fill_low_precision_tensor_value_into_int():
    # PyTorch reads fill_'s tensor value as a double: inf/nan give INT_MIN, not 0
    for dt in (torch.bfloat16, torch.float16, torch.float8_e5m2):
        x = torch.zeros(3, dtype=torch.int64).fill_(torch.tensor(float("inf")).to(dt))
        assert x.tolist() == [-2 ** 63] * 3
        y = torch.zeros(2, 3, dtype=torch.int32)
        y[:, 1] = torch.tensor(1e10).to(dt)       # through fill_ (a 0-dim value)
        assert y.tolist() == [[0, -2 ** 31, 0]] * 2


def test_fill_e4m3_saturates_tensor_value():
    x = torch.zeros(3, dtype=torch.float8_e4m3fn).fill_(torch.tensor(1e10))
    assert x.float().tolist() == [448.0] * 3


def test_fill_value_aliasing_self():
    x = torch.arange(5.)
    x.fill_(x[2])
    assert x.tolist() == [2.0] * 5
    e = torch.zeros(1).expand(4)
    e.fill_(3.)
    assert e.tolist() == [3.0] * 4


def test_copy_in_place_casts_and_overlap():
    z = torch.zeros(3, dtype=torch.uint8)
    z.copy_(torch.tensor([-1.5, 300., 2.]))
    assert z.tolist() == [255, 44, 2]
    a = torch.arange(9.).reshape(3, 3)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        a.copy_(a.t())                          # (as PyTorch: partial overlap)
    b = torch.arange(6.)
    b[1:5] = b[0:4].flip(0)
    assert b.tolist() == [0., 3., 2., 1., 0., 5.]


def test_setitem_writes_nodes_and_values():
    leaf = torch.zeros(2, 4, requires_grad=True)
    v = torch.ones(4, requires_grad=True)
    y = leaf.clone()
    y[1] = v
    y[:, 0] = 5.
    assert type(y.grad_fn).__name__ == "CopySlices"
    y.sum().backward()
    assert leaf.grad.tolist() == [[0., 1., 1., 1.], [0., 0., 0., 0.]]
    assert v.grad.tolist() == [0., 1., 1., 1.]
    x = torch.zeros(2, 3)
    x[...] = torch.tensor([1, 2, 3])            # int value cast by copy_
    assert x.tolist() == [[1., 2., 3.]] * 2
    assert x._version == 1
