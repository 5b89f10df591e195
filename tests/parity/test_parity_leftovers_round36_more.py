"""Round 36 leftovers against PyTorch: deepcopy's layout and shared memory, nonzero's and
argwhere's layout, view/reshape of empty stepped slices with an inferred size."""
import copy

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _geometry(t):
    return tuple(t.shape), t.stride(), t.storage_offset(), t.untyped_storage().nbytes()


_COPIED = {
    "channels_last": lambda T: T.arange(120.).reshape(2, 3, 4, 5).contiguous(
        memory_format=T.channels_last),
    "channels_last slice": lambda T: T.arange(120.).reshape(2, 3, 4, 5).contiguous(
        memory_format=T.channels_last)[1:, :, 1:],
    "transposed sum": lambda T: T.arange(12.).reshape(3, 4).t() + 1,
    "detached slice": lambda T: (T.ones(3, 4, requires_grad=True) * 2).detach()[1:, 1:],
    "detached t": lambda T: (T.ones(3, 4, requires_grad=True) * 2).detach().t(),
    "transposed": lambda T: T.arange(24.).reshape(4, 6).t(),
    "offset slice": lambda T: T.arange(24.).reshape(4, 6)[1:3, 2:5],
    "expanded": lambda T: T.arange(3.).expand(4, 3),
    "stepped": lambda T: T.arange(24.).reshape(4, 6)[::2, ::3],
    "diagonal": lambda T: T.arange(9.).reshape(3, 3).diagonal(),
    "complex t slice": lambda T: T.ones(3, 4, dtype=T.complex64).t()[1:],
    "as_strided": lambda T: T.arange(10.).as_strided((3, 2), (2, 1), 1),
}


@pytest.mark.parametrize("name", sorted(_COPIED))
def test_deepcopy_layout(name):
    mine, theirs = copy.deepcopy(_COPIED[name](ember)), copy.deepcopy(_COPIED[name](torch))
    assert _geometry(mine) == _geometry(theirs)
    assert mine.tolist() == theirs.tolist()


@pytest.mark.parametrize("parts", [
    lambda t: (t[0], t[1]), lambda t: (t[::2], t[1:]), lambda t: (t.transpose(0, 1), t[1:], t)])
@pytest.mark.parametrize("make", [
    lambda T: T.arange(120.).reshape(2, 3, 4, 5).contiguous(memory_format=T.channels_last),
    lambda T: (T.arange(24., requires_grad=True).reshape(4, 6) * 2).detach(),
    lambda T: T.arange(24.).reshape(4, 6)], ids=["channels_last", "detached", "plain"])
def test_deepcopy_shares_memory_in_one_memo(make, parts):
    for T in (ember, torch):
        base = make(T)
        copies = copy.deepcopy(parts(base))
        pointers = {c.untyped_storage().data_ptr() for c in copies}
        geometries = [_geometry(c) for c in copies]
        if T is ember:
            expected = pointers, geometries
        else:
            assert len(pointers) == len(expected[0]) == 1
            assert geometries == expected[1]


_NONZERO_INPUTS = [lambda T: T.zeros(0), lambda T: T.zeros(3, 0), lambda T: T.zeros(2, 3),
                   lambda T: T.tensor([[1., 0], [0, 2]]), lambda T: T.tensor(1.),
                   lambda T: T.tensor(0.), lambda T: T.tensor([0., 1, 2]),
                   lambda T: T.ones(2, 3, 4)]


@pytest.mark.parametrize("make", _NONZERO_INPUTS)
def test_nonzero_layout(make):
    statics = [lambda T, x, n=n: T.nonzero_static(x, size=n) for n in range(6)]
    for f in [lambda T, x: T.nonzero(x), lambda T, x: T.argwhere(x)] + statics:
        mine, theirs = f(ember, make(ember)), f(torch, make(torch))
        assert (tuple(mine.shape), mine.stride()) == (tuple(theirs.shape), theirs.stride())
        assert mine.tolist() == theirs.tolist()
    mine = ember.nonzero(make(ember), as_tuple=True)
    theirs = torch.nonzero(make(torch), as_tuple=True)
    assert [(p.tolist(), p.stride()) for p in mine] == [(p.tolist(), p.stride()) for p in theirs]


_VIEWS = [lambda x: x[::2][:0].view(-1), lambda x: x[::2][:0].reshape(-1),
          lambda x: x[1::2][:0].view(-1), lambda x: x[::3][2:2].reshape(-1, 1),
          lambda x: x.reshape(4, 6)[:, ::2][:0].view(-1, 3),
          lambda x: x.reshape(4, 6)[:, ::2][:0].reshape(-1),
          lambda x: x.reshape(4, 6)[::2, :0].view(2, -1),
          lambda x: x.reshape(4, 6)[::2, :0].reshape(1, -1, 2),
          lambda x: x.reshape(4, 6).t()[::2][:0].view(-1, 4),
          lambda x: x[::2][:0].view(0, 3), lambda x: x[::2][:0].view(0)]


@pytest.mark.parametrize("index", range(len(_VIEWS)))
def test_empty_stepped_views(index):
    mine, theirs = _VIEWS[index](ember.arange(24.)), _VIEWS[index](torch.arange(24.))
    assert (tuple(mine.shape), mine.stride(), mine.storage_offset()) == \
        (tuple(theirs.shape), theirs.stride(), theirs.storage_offset())


_ZERO_DIM = {"expand(size=())": lambda t: t.expand(size=()), "permute(())": lambda t: t.permute(()),
             "permute(dims=())": lambda t: t.permute(dims=()), "view(())": lambda t: t.view(()),
             "reshape(())": lambda t: t.reshape(()), "repeat(())": lambda t: t.repeat(()),
             "tile(())": lambda t: t.tile(()), "expand()": lambda t: t.expand(),
             "permute()": lambda t: t.permute(), "reshape()": lambda t: t.reshape()}


@pytest.mark.parametrize("name", sorted(_ZERO_DIM))
def test_zero_dim_shape_calls_with_no_sizes(name):
    # torch 2.13 raises TypeError for expand()/permute()/reshape() with no sizes at all
    results = []
    for T in (ember, torch):
        x = T.tensor(3.)
        try:
            r = _ZERO_DIM[name](x)
        except TypeError as e:
            results.append(("TypeError", str(e).replace("torch.", "").replace("ember.", "")))
        else:
            results.append((tuple(r.shape), r.stride(), r.data_ptr() == x.data_ptr(), r.item()))
    assert results[0] == results[1]
