"""Round 36 leftovers: deepcopy keeps strides, storage offsets and shared memory; nonzero's
and argwhere's results are laid out by columns (also when empty); view/reshape of an empty
stepped slice keep its strides for a -1 they infer."""
import copy

import pytest

import ember as torch


def _geometry(t):
    return tuple(t.shape), t.stride(), t.storage_offset(), t.untyped_storage().nbytes()


def _channels_last():
    return torch.arange(120.).reshape(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("make, geometry", [
    (lambda: _channels_last(), ((2, 3, 4, 5), (60, 1, 15, 3), 0, 480)),
    (lambda: _channels_last()[1:, :, 1:], ((1, 3, 3, 5), (60, 1, 15, 3), 75, 480)),
    (lambda: torch.arange(12.).reshape(3, 4).t() + 1, ((4, 3), (1, 4), 0, 48)),
    (lambda: (torch.ones(3, 4, requires_grad=True) * 2).detach()[1:, 1:],
     ((2, 3), (4, 1), 5, 48)),
    (lambda: (torch.ones(3, 4, requires_grad=True) * 2).detach().t(), ((4, 3), (1, 4), 0, 48)),
    (lambda: torch.arange(24.).reshape(4, 6)[1:3, 2:5], ((2, 3), (6, 1), 8, 96)),
    (lambda: torch.arange(3.).expand(4, 3), ((4, 3), (0, 1), 0, 12)),
])
def test_deepcopy_keeps_the_layout(make, geometry):
    t = make()
    assert _geometry(t) == geometry
    new = copy.deepcopy(t)
    assert _geometry(new) == geometry
    assert torch.equal(new, t)
    assert new.data_ptr() != t.data_ptr()


def test_deepcopy_keeps_views_of_a_channels_last_tensor_sharing_its_copy():
    t = _channels_last()
    a, b = copy.deepcopy((t[0], t[1]))
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    assert _geometry(a) == ((3, 4, 5), (1, 15, 3), 0, 480)
    assert _geometry(b) == ((3, 4, 5), (1, 15, 3), 60, 480)
    b[0, 0, 0] = -1.
    assert a[0, 0, 0].item() == 0. and t[1, 0, 0, 0].item() == 60.


def test_deepcopy_of_views_of_a_detached_graph_tensor_share_one_copy():
    y = torch.arange(12., requires_grad=True).reshape(3, 4) * 2
    z = y.detach()
    a, b = copy.deepcopy((z[0], z[1:]))
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    assert _geometry(a) == ((4,), (1,), 0, 48)
    assert _geometry(b) == ((2, 4), (4, 1), 4, 48)
    assert b.tolist() == [[8., 10., 12., 14.], [16., 18., 20., 22.]]
    assert not a.requires_grad and a.is_leaf
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(y)


@pytest.mark.parametrize("x, shape, strides", [
    (torch.zeros(0), (0, 1), (1, 0)),
    (torch.zeros(3, 0), (0, 2), (1, 0)),
    (torch.zeros(2, 3), (0, 2), (1, 0)),
    (torch.tensor(1.), (1, 0), (1, 1)),
    (torch.tensor(0.), (0, 0), (1, 0)),
    (torch.tensor([0., 1, 2]), (2, 1), (1, 2)),
    (torch.ones(2, 3, 4), (24, 3), (1, 24)),
])
def test_nonzero_and_argwhere_are_laid_out_by_columns(x, shape, strides):
    for r in (torch.nonzero(x), torch.argwhere(x), x.nonzero()):
        assert tuple(r.shape) == shape and r.stride() == strides
        assert r.dtype == torch.int64
    assert torch.nonzero(torch.tensor([[1., 0], [0, 2]])).tolist() == [[0, 0], [1, 1]]


def test_nonzero_as_tuple_and_static_layouts():
    parts = torch.nonzero(torch.zeros(3, 0), as_tuple=True)
    assert [(tuple(p.shape), p.stride()) for p in parts] == [((0,), (1,)), ((0,), (1,))]
    parts = torch.nonzero(torch.tensor([[1., 0], [0, 2]]), as_tuple=True)
    assert [p.tolist() for p in parts] == [[0, 1], [0, 1]]
    static = torch.nonzero_static(torch.ones(2, 3, 4), size=4)
    assert static.stride() == (3, 1) and static.tolist()[3] == [0, 0, 3]
    static = torch.nonzero_static(torch.tensor([[1., 0], [0, 2]]), size=2)
    assert static.stride() == (2, 1) and static.tolist() == [[0, 0], [1, 1]]
    static = torch.nonzero_static(torch.tensor([[1., 0], [0, 2]]), size=3)  # (padded)
    assert static.stride() == (2, 1) and static.tolist() == [[0, 0], [1, 1], [-1, -1]]
    static = torch.nonzero_static(torch.tensor([0., 1, 2]), size=2)
    assert static.stride() == (1, 1) and static.tolist() == [[1], [2]]


@pytest.mark.parametrize("make, shape, strides, offset", [
    (lambda x: x[::2][:0].view(-1), (0,), (2,), 0),
    (lambda x: x[::2][:0].reshape(-1), (0,), (2,), 0),
    (lambda x: x[::2][:0].view((-1,)), (0,), (2,), 0),
    (lambda x: torch.reshape(x[::2][:0], (-1,)), (0,), (2,), 0),
    (lambda x: x[1::2][:0].view(-1), (0,), (2,), 1),
    (lambda x: x.reshape(4, 6)[:, ::2][:0].view(-1, 3), (0, 3), (6, 2), 0),
    (lambda x: x.reshape(4, 6)[::2, :0].view(2, -1), (2, 0), (12, 1), 0),
    (lambda x: x[::2][:0].view(0, -1 + 4), (0, 3), (3, 1), 0),
    (lambda x: x.reshape(4, 6)[:, ::2][:0].reshape(-1), (0,), (1,), 0),
])
def test_an_inferred_size_keeps_an_empty_stepped_slice_strides(make, shape, strides, offset):
    r = make(torch.arange(24.))
    assert (tuple(r.shape), r.stride(), r.storage_offset()) == (shape, strides, offset)


def test_inferring_a_size_of_an_empty_tensor_still_checks_it():
    z = torch.zeros(0, 3)
    with pytest.raises(RuntimeError, match="can be any value and is ambiguous"):
        z.view(0, -1)
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        z.reshape(-1, -1)
    with pytest.raises(RuntimeError, match=r"shape '\[3\]' is invalid for input of size 0"):
        z.view(3)
    assert z.view(2, -1).shape == (2, 0) and z.view(2, -1).stride() == (1, 1)
