"""Sparse tensors on CUDA: the same values and gradients as on the CPU, parts kept on the GPU,
and the device in errors and printing."""

import numpy as np
import pytest

import ember
from ember.testing import assert_close

pytestmark = pytest.mark.cuda

ROWS, COLS = [0, 1, 1, 3, 0], [2, 0, 2, 1, 2]
VALS = [3.0, 4.0, 5.0, -1.0, 0.5]
SHAPE = (4, 3)


def pair(dtype=ember.float32):
    cpu = ember.sparse_coo_tensor([ROWS, COLS], VALS, SHAPE, dtype=dtype)
    return cpu, cpu.cuda()


def test_parts_live_on_the_gpu():
    cpu, gpu = pair()
    assert gpu.is_cuda and gpu.device.type == "cuda" and gpu.layout is ember.sparse_coo
    assert gpu._indices().is_cuda and gpu._values().is_cuda
    made = ember.sparse_coo_tensor([ROWS, COLS], VALS, SHAPE, device="cuda")
    assert made._indices().is_cuda and made.is_cuda
    assert gpu.cpu().device.type == "cpu"
    assert_close(gpu.to_dense().cpu(), cpu.to_dense())
    assert_close(gpu.coalesce().to_dense().cpu(), cpu.to_dense())
    c = gpu.to_sparse_csr()
    assert c.crow_indices().is_cuda and c.crow_indices().tolist() == \
        cpu.to_sparse_csr().crow_indices().tolist()
    dense = ember.randn(4, 3)
    assert_close(dense.cuda().to_sparse().to_dense().cpu(), dense)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16])
@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_mm_matches_cpu(dtype, layout):
    cpu, gpu = pair(dtype)
    if layout == "csr":
        cpu, gpu = cpu.to_sparse_csr(), gpu.to_sparse_csr()
    d = ember.randn(3, 5).to(dtype)
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype is ember.float16 else {}
    out = ember.sparse.mm(gpu, d.cuda())
    assert out.is_cuda and out.dtype is dtype
    if dtype is ember.float16:      # (PyTorch's CPU kernels have no half CSR product)
        cpu, d = cpu.to(ember.float32), d.to(ember.float32)
    assert_close(out.cpu().to(d.dtype), ember.sparse.mm(cpu, d), **tol)
    assert_close((gpu @ d[:, 0].to(dtype).cuda()).cpu().to(d.dtype), cpu @ d[:, 0], **tol)


def test_gradients_match_cpu():
    grads = []
    for device in ("cpu", "cuda"):
        v = ember.tensor(VALS, dtype=ember.float64, device=device, requires_grad=True)
        d = ember.tensor(np.arange(6.0).reshape(3, 2), device=device, requires_grad=True)
        s = ember.sparse_coo_tensor(ember.tensor([ROWS, COLS], device=device), v, SHAPE)
        out = ember.sparse.mm(s, d)
        (out * out).sum().backward()
        sm = ember.sparse.softmax(s, 1)._values().sum()
        grads.append((v.grad.cpu(), d.grad.cpu(), sm.cpu()))
    for a, b in zip(*grads):
        assert_close(a, b)


def test_leaf_gradients_on_gpu():
    cpu, gpu = pair(ember.float64)
    d = ember.randn(3, 2, dtype=ember.float64)
    for s, dense in ((cpu.requires_grad_(), d), (gpu.requires_grad_(), d.cuda())):
        (ember.sparse.mm(s, dense).sum() + (s @ dense).sum()).backward()
    assert gpu.grad.is_cuda and gpu.grad.layout is ember.strided
    assert_close(gpu.grad.cpu(), cpu.grad)


def test_sum_elementwise_and_softmax_on_gpu():
    cpu, gpu = pair()
    assert_close(ember.sparse.sum(gpu, 0).to_dense().cpu(), ember.sparse.sum(cpu, 0).to_dense())
    assert_close((gpu * gpu + gpu * 2).to_dense().cpu(), (cpu * cpu + cpu * 2).to_dense())
    assert_close(ember.sparse.softmax(gpu, 1).to_dense().cpu(),
                 ember.sparse.softmax(cpu, 1).to_dense())


def test_printing_and_errors_name_the_gpu():
    _, gpu = pair()
    text = repr(gpu)
    assert "device='cuda:0', size=(4, 3), nnz=5, layout=ember.sparse_coo)" in text
    with pytest.raises(NotImplementedError, match="'SparseCUDA' backend"):
        ember.exp(gpu)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        ember.sparse.mm(gpu, ember.ones(3, 2))


def test_sum_concatenates_on_gpu():
    # PyTorch's CUDA kernel concatenates both entry lists (its CPU kernel merges them), and
    # coalesces only once that holds more entries than the tensor has elements
    a = ember.sparse_coo_tensor([[1, 0, 1], [1, 0, 1]], [1., 2, 3], (2, 2), device="cuda")
    c = a.coalesce().add(a.coalesce(), alpha=2)
    assert c.is_cuda and not c.is_coalesced()
    assert c._indices().tolist() == [[0, 1, 0, 1], [0, 1, 0, 1]]
    assert c._values().tolist() == [2., 4., 4., 8.]
    d = a + a                                       # 6 entries in 4 elements: coalesced
    assert d._indices().tolist() == [[0, 1], [0, 1]] and d._values().tolist() == [4., 8.]
    v = ember.tensor([1., 2, 3], device="cuda", requires_grad=True)
    s = ember.sparse_coo_tensor(a._indices(), v * 1, (2, 2))
    (s + s.t()).to_dense().pow(2).sum().backward()
    assert v.grad.tolist() == [32., 16., 32.]
