"""CUDA tensors print their device as PyTorch's do (expected strings are PyTorch 2.13's
layout with device='cuda:0'); a strided nested tensor on the GPU showed no device."""

import warnings

import pytest

import ember

pytestmark = pytest.mark.cuda


def test_nested_tensor_on_the_gpu_shows_its_device():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n = ember.nested.nested_tensor([ember.ones(2)], device="cuda", requires_grad=True)
    assert repr(n) == ("nested_tensor([\n"
                       "  tensor([1., 1.], device='cuda:0', requires_grad=True)\n"
                       "], device='cuda:0', requires_grad=True)")


@pytest.mark.parametrize("make,expected", [
    (lambda: ember.tensor([1, 2], dtype=ember.int32, device="cuda"),
     "tensor([1, 2], device='cuda:0', dtype=ember.int32)"),
    (lambda: ember.empty(0, 3, device="cuda"), "tensor([], device='cuda:0', size=(0, 3))"),
    (lambda: ember.ones(2, device="cuda", requires_grad=True) * 2,
     "tensor([2., 2.], device='cuda:0', grad_fn=<MulBackward0>)"),
    (lambda: ember.tensor([1 + 2j], device="cuda").conj(), "tensor([1.-2.j], device='cuda:0')"),
])
def test_cuda_tensor_repr(make, expected):
    assert repr(make()) == expected


def test_cuda_0d_tensor_formats_its_value():
    assert f"{ember.tensor(2.5, device='cuda'):.2f}" == "2.50"
    assert ember.ones(1, device="cuda").type() == "ember.cuda.FloatTensor"
