"""Views of empty tensors against torch's: PyTorch gives them the strides of the input
(row-major for a fresh empty tensor), where NumPy 2 gives fresh empty arrays zero strides."""

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

VIEWS = {
    "diagonal": lambda t: t.diagonal(0, 1, 2),
    "diagonal_default": lambda t: t.permute(1, 2, 0).diagonal(),
    "slice": lambda t: t[:, 1:2],
    "slice_last": lambda t: t[..., 1:3],
    "int_index": lambda t: t[:, 0],
    "narrow": lambda t: t.narrow(2, 1, 2),
    "select": lambda t: t.select(1, 0),
    "unfold": lambda t: t.unfold(2, 2, 1),
    "unbind": lambda t: t.unbind(1)[0],
    "split": lambda t: t.split(2, dim=2)[1],
    "chunk": lambda t: t.chunk(3, dim=1)[0],
    "reshape": lambda t: t.reshape(3, 0, 4),
    "view": lambda t: t.view(0, 12),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_of_empty_tensor_has_torch_strides(name):
    view = VIEWS[name]
    assert view(ember.zeros(0, 3, 4)).stride() == view(torch.zeros(0, 3, 4)).stride()
