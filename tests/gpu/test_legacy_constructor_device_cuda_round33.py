"""The legacy ``Tensor(...)`` constructor follows the default tensor type, not the default
device: on the CPU after ``set_default_device("cuda")`` (as PyTorch's), on the GPU after
``set_default_tensor_type`` names a CUDA type."""

import warnings

import pytest

import ember

pytestmark = pytest.mark.cuda


def test_set_default_device_leaves_the_legacy_constructor_on_the_cpu():
    ember.set_default_device("cuda")
    try:
        assert ember.zeros(2).device.type == "cuda"
        assert ember.Tensor([1.0, 2.0]).device.type == "cpu"
        assert ember.Tensor(2, 3).device.type == "cpu"
        with pytest.raises(RuntimeError, match="expects device type: cpu but device type: cuda"):
            ember.Tensor(2, device="cuda")
    finally:
        ember.set_default_device(None)


def test_a_cuda_default_tensor_type_moves_the_legacy_constructor():
    with warnings.catch_warnings():     # deprecated, and said once a process
        warnings.simplefilter("ignore")
        ember.set_default_tensor_type(ember.cuda.FloatTensor)
    try:
        assert ember.Tensor([1.0]).device.type == "cuda"
        assert ember.Tensor(2, device="cuda").device.type == "cuda"
        assert ember.zeros(2).device.type == "cuda"
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ember.set_default_tensor_type(ember.FloatTensor)
    assert ember.Tensor([1.0]).device.type == "cpu"
    assert ember.zeros(2).device.type == "cpu"
