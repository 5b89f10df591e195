"""``torch.segment_reduce``, ``torch.norm_except_dim`` and ``torch.resize_as_``: same values,
gradients and errors as PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_DATA = [1.0, -2.0, 3.0, 4.0, 5.0, 0.5]


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "max", "min"])
@pytest.mark.parametrize("initial", [None, 2.5])
def test_segment_reduce_values_and_grads(reduce, initial):
    results = []
    for lib in (ember, torch):
        x = lib.tensor(_DATA, requires_grad=True)
        out = lib.segment_reduce(x, reduce, lengths=lib.tensor([2, 0, 3, 1]), initial=initial)
        lib.where(lib.isfinite(out), out, lib.zeros(())).sum().backward()
        results.append((out.detach().numpy(), x.grad.numpy(), type(out.grad_fn).__name__))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
    assert results[0][2] == results[1][2]


def test_segment_reduce_offsets_axis_and_2d_lengths():
    def calls(lib):
        x = lib.arange(24.0).reshape(4, 6)
        return [lib.segment_reduce(x, "sum", offsets=lib.tensor([0, 1, 4])),
                lib.segment_reduce(x, "max", lengths=lib.tensor([[2, 4]] * 4), axis=1),
                lib.segment_reduce(x, "mean", offsets=lib.tensor([[0, 3, 6]] * 4), axis=-1)]
    for a, b in zip(calls(ember), calls(torch)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_segment_reduce_errors():
    for lib in (ember, torch):
        x = lib.ones(4)
        with pytest.raises(RuntimeError, match="rows of lengths along axis to sum"):
            lib.segment_reduce(x, "sum", lengths=lib.tensor([1, 2]))
        with pytest.raises(RuntimeError, match="must be either sum, prod, mean, amax or amin"):
            lib.segment_reduce(x, "foo", lengths=lib.tensor([4]))
        with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
            lib.segment_reduce(lib.ones(4, dtype=lib.int64), "sum", lengths=lib.tensor([4]))


@pytest.mark.parametrize("args", [(2, 0), (2, -1), (1, 1), (3, 2)])
def test_norm_except_dim(args):
    values = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4) - 7
    ours = ember.norm_except_dim(ember.tensor(values), *args)
    theirs = torch.norm_except_dim(torch.tensor(values), *args)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


def test_resize_as_at_top_level():
    for lib in (ember, torch):
        a = lib.zeros(2)
        assert lib.resize_as_(a, lib.ones(2, 3)) is a and tuple(a.shape) == (2, 3)


def test_unsafe_lengths_short_of_the_axis_reduce_the_leading_rows():
    results = [m.segment_reduce(m.arange(4.0), "sum", lengths=m.tensor([1, 1]), unsafe=True)
               for m in (ember, torch)]
    assert results[0].tolist() == results[1].tolist() == [0.0, 1.0]


def test_multi_margin_margin_is_a_number():
    for m in (ember, torch):
        x, y = m.zeros(3, 4), m.tensor([0, 1, 2])
        with pytest.raises(TypeError, match="'margin' \\(position 4\\) must be Number"):
            m.nn.functional.multi_margin_loss(x, y, margin=m.tensor(0.5, requires_grad=True))
        with pytest.raises(RuntimeError, match="cannot be converted to type float"):
            m.nn.functional.multi_margin_loss(x, y, margin=1j)
