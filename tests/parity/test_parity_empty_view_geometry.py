"""Views of empty slices, empty pieces of non-empty tensors and their copies have PyTorch's
strides and storage offsets (NumPy puts an empty slice at its base's first element)."""

import copy
import io
import pickle

import pytest

from tests.parity._compare import assert_same

pytest.importorskip("torch")


def _geometry(t):
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def _saved(lib, tensors):
    buffer = io.BytesIO()
    lib.save(tensors, buffer)
    buffer.seek(0)
    return lib.load(buffer)


_VIEWS = {
    "detach": lambda x: x[1:1].detach(),
    "data": lambda x: x[1:1].data,
    "view": lambda x: x[1:1].view(0, 5),
    "reshape": lambda x: x[1:1].reshape(-1),
    "unsqueeze": lambda x: x[1:1].unsqueeze(-1),
    "permute": lambda x: x[1:1].permute(2, 0, 1),
    "expand": lambda x: x[1:1].unsqueeze(0).expand(2, 0, 4, 5),
    "squeeze": lambda x: x[1:1, 1:2].squeeze(1),
    "movedim": lambda x: x[1:1].movedim(0, 2),
    "t": lambda x: x[0, 1:1].t(),
    "mT": lambda x: x[2:2:2].mT,
    "unflatten": lambda x: x[:, 1:1].unflatten(2, (1, 5)),
    "narrow": lambda x: x.narrow(1, 2, 0),
    "narrow_end": lambda x: x.narrow(0, 3, 0),
    "narrow_transposed": lambda x: x.transpose(0, 2).narrow(0, 3, 0),
    "split": lambda x: x.split([1, 0, 3], 1)[1],
    "split_of_empty": lambda x: x[1:1].split(2, 1)[1],
    "tensor_split": lambda x: x.tensor_split([2, 2], 1)[1],
    "tensor_split_end": lambda x: x.tensor_split([5], 2)[1],
    "chunk": lambda x: x[:, 2:2].chunk(2, 2)[1],
    "unbind": lambda x: x[:, 1:1].unbind(0)[1],
    "diagonal": lambda x: x[:, 1:1].diagonal(0, 0, 2),
    "unfold": lambda x: x[:, 2:2].unfold(2, 2, 1),
    "real": lambda x: x.to(x.new_zeros(()).cfloat().dtype).narrow(0, 2, 0).imag,
    "pickle": lambda x: pickle.loads(pickle.dumps(x[1:1])),
    "pickle_step": lambda x: pickle.loads(pickle.dumps(x[2:2:2])),
    "deepcopy_end": lambda x: copy.deepcopy(x[3:]),
}


@pytest.mark.parametrize("name", sorted(_VIEWS))
def test_empty_view_geometry(name):
    assert_same(lambda lib: _geometry(_VIEWS[name](lib.arange(60.0).reshape(3, 4, 5))))


def test_saved_empty_views_keep_their_place():
    def run(lib):
        x = lib.arange(60.0).reshape(3, 4, 5)
        return [_geometry(t) for t in _saved(lib, [x[1:1], x.narrow(1, 3, 0), x[3:]])]
    assert_same(run)


def test_as_strided_of_an_empty_view_reads_from_its_offset():
    def run(lib):
        x = lib.arange(60.0).reshape(3, 4, 5)
        return (x[1:1].as_strided((2,), (1,)).tolist(),
                x.narrow(2, 3, 0).as_strided((2,), (2,)).tolist())
    assert_same(run)


def test_gradient_through_an_empty_view():
    def run(lib):
        x = lib.arange(60.0).reshape(3, 4, 5).requires_grad_()
        v = x.narrow(1, 2, 0).transpose(0, 1)
        v.sum().backward()
        return x.grad.abs().sum().item(), v.storage_offset(), type(v.grad_fn).__name__
    assert_same(run)
