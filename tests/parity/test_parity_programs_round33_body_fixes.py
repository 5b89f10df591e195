"""What the round-33 body-model programs found, pinned against PyTorch. Run with the default
device set (as the programs were, to exercise the CUDA path on the stand-in), the legacy
constructor ``Tensor(...)`` (ACT's and older SMPL code's ``torch.Tensor(table)``) stays on
the default tensor type's device, the CPU, as PyTorch's does: ``set_default_device`` and
``with device(...)`` move the factory functions only. (Before, ember put it on the default
device.) The meta device stands in for CUDA, which this PyTorch build lacks."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

FORMS = {
    "list": lambda lib: lib.Tensor([1.0, 2.0]),
    "sizes": lambda lib: lib.Tensor(2, 3),
    "size": lambda lib: lib.Tensor(lib.Size([2])),
    "empty": lambda lib: lib.Tensor(),
    "ndarray": lambda lib: lib.Tensor(np.ones(2)),
    "parameter": lambda lib: lib.nn.Parameter(lib.Tensor(2, 2)),
    "typed": lambda lib: lib.FloatTensor([1.0]),
    "factory": lambda lib: lib.zeros(2),
    "tensor": lambda lib: lib.tensor([1.0]),
    "explicit": lambda lib: lib.Tensor([1.0], device="cpu"),
}


def _devices(lib, enter):
    out = {}
    for name, make in FORMS.items():
        with enter(lib):
            t = make(lib)
        out[name] = (t.device.type, str(t.dtype).split(".")[-1], tuple(t.shape))
    return out


class _DefaultDevice:
    def __init__(self, lib):
        self.lib = lib

    def __enter__(self):
        self.lib.set_default_device("meta")

    def __exit__(self, *exc):
        self.lib.set_default_device(None)


@pytest.mark.parametrize("enter", [_DefaultDevice, lambda lib: lib.device("meta")],
                         ids=["set_default_device", "device_context"])
def test_legacy_tensor_constructor_ignores_the_default_device_like_torch(enter):
    got, expected = _devices(ember, enter), _devices(torch, enter)
    assert got == expected
    assert got["list"][0] == "cpu" and got["factory"][0] == "meta"


ERRORS = {
    "other_type": lambda lib: lib.Tensor([1.0], device="meta"),
    "sizes_other_type": lambda lib: lib.Tensor(2, device=lib.device("meta")),
    "typed_other_type": lambda lib: lib.FloatTensor(2, device="meta"),
    "new_other_type": lambda lib: lib.ones(2).new(2, device="meta"),
    "new_meta_to_cpu": lambda lib: lib.ones(2, device="meta").new(2, device="cpu"),
    "tensor_with_device": lambda lib: lib.Tensor(lib.ones(2), device="cpu"),
    "typed_tensor_with_device": lambda lib: lib.FloatTensor(lib.ones(2), device="cpu"),
    "new_tensor_with_device": lambda lib: lib.ones(2).new(lib.ones(2), device="cpu"),
}


def _error(lib, make):
    with pytest.raises(Exception) as info:
        make(lib)
    return type(info.value).__name__, str(info.value)


@pytest.mark.parametrize("name", ERRORS)
def test_legacy_constructor_device_errors_like_torch(name):
    assert _error(ember, ERRORS[name]) == _error(torch, ERRORS[name])


def test_legacy_constructor_with_its_own_device_type():
    for lib in (ember, torch):
        assert lib.Tensor(2, device="cpu").device.type == "cpu"
        assert lib.ones(2, device="meta").new(3).device.type == "meta"
        assert lib.ones(2, device="meta").new([1.0], device="meta").shape == (1,)
