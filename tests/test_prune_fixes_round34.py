"""What the round-34 pruning/sparse-training programs found: a sparse COO/CSR parameter
(``nn.Parameter(w.to_sparse())`` multiplied by ``torch.sparse.mm``) was invisible to the
optimizers, whose step left it unchanged and whose zero_grad left its gradient to accumulate;
Adagrad accepted one (PyTorch's refuses it at construction)."""

import pytest

import ember as torch


def _param(layout="coo"):
    w = torch.tensor([[0., 1., 2.], [3., 0., 0.]])
    return torch.nn.Parameter(w.to_sparse() if layout == "coo" else w.to_sparse_csr())


def _backward(p):
    x = torch.tensor([[1.], [2.], [3.]])
    (torch.sparse.mm(p, x) ** 2).sum().backward()


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sgd_steps_a_sparse_parameter(layout):
    p = _param(layout)
    _backward(p)        # grad = 2 (p @ x) x^T on the pattern
    assert p.grad.to_dense().tolist() == [[0., 32., 48.], [6., 0., 0.]]
    torch.optim.SGD([p], lr=0.1).step()
    assert p.to_dense().flatten().tolist() == pytest.approx([0., -2.2, -2.8, 2.4, 0., 0.])


def test_sgd_momentum_and_weight_decay_on_a_sparse_parameter():
    p = _param()
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.5, dampening=0.1, weight_decay=0.1)
    for i in range(3):
        opt.zero_grad(set_to_none=(i != 1))
        _backward(p)
        opt.step()
    # PyTorch 2.13 gives these values for the same loop
    assert p.to_dense().flatten().tolist() == pytest.approx(
        [0.0, -0.13668, 0.27515, 0.92187, 0.0, 0.0], abs=1e-4)


def test_zero_grad_clears_a_sparse_parameters_gradient():
    p = _param()
    opt = torch.optim.SGD([p], lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        torch.sparse.mm(p, torch.ones(3, 1)).sum().backward()
    assert p.grad.to_dense().tolist() == [[0., 1., 1.], [1., 0., 0.]]
    opt.zero_grad(set_to_none=False)
    assert p.grad.to_dense().abs().sum().item() == 0
    opt.zero_grad()
    assert p.grad is None


def test_other_optimizers_refuse_a_sparse_parameter():
    p = _param()
    _backward(p)
    with pytest.raises(RuntimeError, match="Adam does not support sparse gradients, please "
                                           "consider SparseAdam instead"):
        torch.optim.Adam([p]).step()
    with pytest.raises(RuntimeError, match="memory format option is only supported by "
                                           "strided tensors"):
        torch.optim.Adagrad([p])
