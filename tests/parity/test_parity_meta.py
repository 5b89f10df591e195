"""The meta device against PyTorch's: reprs, results' shapes and dtypes, the errors (type and
message), module building and checkpoints written by one library and read by the other."""

import pytest

import ember
from tests.parity._compare import dtype_name, is_tensor, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

CASES = {
    "repr": lambda t: repr(t.empty(2, 3, device="meta")),
    "repr int": lambda t: repr(t.zeros(3, dtype=t.int64, device="meta")),
    "repr grad": lambda t: repr(t.empty(2, device="meta", requires_grad=True) * 2),
    "strides": lambda t: t.empty(2, 3, device="meta").stride(),
    "matmul": lambda t: t.empty(2, 3, device="meta") @ t.empty(3, 5, device="meta"),
    "sum": lambda t: t.empty(2, 3, device="meta").sum(1),
    "promotion": lambda t: t.empty(3, dtype=t.int32, device="meta") * 1.5,
    "max": lambda t: t.empty(4, 5, device="meta").max(1).indices,
    "cpu scalar joins": lambda t: t.empty(2, device="meta") + t.tensor(1.0),
    "arange": lambda t: t.arange(0, 1, 0.25, device="meta"),
    "multinomial": lambda t: t.multinomial(t.empty(3, 6, device="meta"), 2),
    "item": lambda t: t.empty((), device="meta").item(),
    "bool": lambda t: bool(t.empty((), device="meta")),
    "cpu": lambda t: t.empty(2, device="meta").cpu(),
    "tolist": lambda t: t.empty(2, device="meta").tolist(),
    "numpy": lambda t: t.empty(2, device="meta").numpy(),
    "meta + cpu": lambda t: t.empty(2, device="meta") + t.ones(2),
    "cpu + meta": lambda t: t.ones(2) + t.empty(2, device="meta"),
    "copy into cpu": lambda t: t.ones(2).copy_(t.empty(2, device="meta")),
    "nonzero": lambda t: t.nonzero(t.empty(2, device="meta")),
}


def _outcome(lib, case):
    """A tensor's shape, dtype and device, another value, or the error's type and first
    sentence."""
    return outcome(CASES[case], lib, message=lambda text: text.split(".")[0][:40],
                   describe=_described)


def _described(r):
    """("tensor", shape, dtype name, device) of a tensor, ("value", value) of others."""
    if is_tensor(r):
        return "tensor", tuple(r.shape), dtype_name(r.dtype), str(r.device)
    return "value", r.replace("torch", "ember") if isinstance(r, str) else r


@pytest.mark.parametrize("case", sorted(CASES))
def test_meta_behaves_as_pytorch(case):
    assert _outcome(ember, case) == _outcome(torch, case)


def test_module_built_on_meta():
    def build(lib):
        with lib.device("meta"):
            model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.LayerNorm(8),
                                      lib.nn.Linear(8, 2))
        shapes = [(n, tuple(p.shape), p.is_meta) for n, p in model.named_parameters()]
        out = model(lib.empty(5, 4, device="meta"))
        model.to_empty(device="cpu")
        return shapes, tuple(out.shape), [p.device.type for p in model.parameters()]
    assert build(ember) == build(torch)


def test_checkpoints_of_meta_tensors_cross_libraries(tmp_path):
    ours, theirs = tmp_path / "ember.pt", tmp_path / "torch.pt"
    ember.save({"w": ember.empty(2, 3, device="meta", requires_grad=True)}, ours)
    torch.save({"w": torch.empty(2, 3, device="meta", requires_grad=True)}, theirs)
    for loaded in (torch.load(ours)["w"], ember.load(theirs)["w"]):
        assert loaded.is_meta and tuple(loaded.shape) == (2, 3) and loaded.requires_grad
