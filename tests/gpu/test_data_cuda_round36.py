"""A TensorDataset of CUDA tensors (next to CPU ones) batched by the DataLoader: its one-index
shortcut indexes each tensor on the tensor's device (it used a CPU index for all: "Expected
all tensors to be on the same device")."""

import pytest

import ember
from ember.utils.data import DataLoader, TensorDataset

pytestmark = pytest.mark.cuda


def test_a_tensordataset_of_cuda_tensors_batches_on_their_devices():
    ds = TensorDataset(ember.arange(6.0, device="cuda"), ember.arange(6))
    x, y = next(iter(DataLoader(ds, batch_size=3)))
    assert x.device.type == "cuda" and y.device.type == "cpu"
    assert x.tolist() == [0.0, 1.0, 2.0] and y.tolist() == [0, 1, 2]
    (x, y), = DataLoader(ds, batch_sampler=[[-1, 2]])
    assert x.device.type == "cuda" and x.tolist() == [5.0, 2.0] and y.tolist() == [5, 2]
