"""Round 30, pinned without PyTorch (tests/parity/test_parity_saved_round30.py compares):
ops without a derivative record NotImplemented, out= with inputs requiring grad (a
composite's CopyBackwards, a kernel's NotImplemented), linear's saved weight.t(), and the
strides of pointwise results with size-1 dims."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F

FORWARD_AD = "Trying to use forward AD with aten::{} that does not support it."


def _x(grad=True):
    a = np.random.default_rng(0).standard_normal((3, 3))
    return ember.tensor(a, dtype=ember.float64, requires_grad=grad)


CASES = {
    "floor_divide": lambda x: x // 0.7,
    "heaviside": lambda x: ember.heaviside(x, ember.ones(3, 3, dtype=ember.float64)),
    "linalg_ldl_factor_ex": lambda x: ember.linalg.ldl_factor(x + x.mT).LD,
}


@pytest.mark.parametrize("kernel", sorted(CASES))
def test_no_derivative_records_not_implemented(kernel):
    x = _x()
    y = CASES[kernel](x)
    assert type(y.grad_fn).__name__ == "NotImplemented" and y.requires_grad
    assert len(y.grad_fn.next_functions) == 1         # only the input requiring grad
    assert not [a for a in dir(y.grad_fn) if a.startswith("_saved_")]
    with pytest.raises(RuntimeError, match=f"^derivative for aten::{kernel} is not "
                                           f"implemented$"):
        y.sum().backward()
    fwAD = ember.autograd.forward_ad
    with fwAD.dual_level():
        d = fwAD.make_dual(_x(False), ember.ones(3, 3, dtype=ember.float64))
        with pytest.raises(NotImplementedError) as info:
            CASES[kernel](d)
    assert str(info.value) == FORWARD_AD.format(kernel)
    with pytest.raises(NotImplementedError) as info:
        ember.func.jvp(CASES[kernel], (_x(False),), (ember.ones(3, 3, dtype=ember.float64),))
    assert str(info.value) == FORWARD_AD.format(kernel)


def test_no_derivative_untracked_without_grad():
    x = _x()
    with ember.no_grad():
        y = x // 2
    assert y.grad_fn is None and not y.requires_grad
    assert ember.equal(ember.floor_divide(x.detach(), 2), y)


def test_out_of_composite_copies_recorded_result():
    """tensordot(x, y, out=o) with x requiring grad: o gets CopyBackwards over tensordot's
    node, version 1, and the gradient of x @ y."""
    x = _x()
    b = np.arange(9.).reshape(3, 3)
    o = ember.empty(0, dtype=ember.float64)
    res = ember.tensordot(x, ember.tensor(b), 1, out=o)
    assert res is o and o._version == 1 and o.shape == (3, 3)
    assert type(o.grad_fn).__name__ == "CopyBackwards"
    assert o.grad_fn.next_functions[0] == (None, 0)
    w = np.linspace(-1, 1, 9).reshape(3, 3)
    g, = ember.autograd.grad(o, x, ember.tensor(w))
    np.testing.assert_allclose(np.asarray(g), w @ b.T)
    np.testing.assert_allclose(np.asarray(o.detach()), np.asarray(x.detach()) @ b)


def test_out_of_kernel_without_derivative_records_not_implemented():
    x = _x()
    o = ember.softmax(x, 1, out=ember.empty(0, dtype=ember.float64))
    assert type(o.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError, match="^derivative for aten::softmax is not implemented$"):
        o.sum().backward()
    o = ember.diag(x[0], out=ember.empty(0, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="aten::diag_embed is not implemented"):
        o.sum().backward()
    r = ember.linalg.matrix_rank(x, out=ember.empty(0, dtype=ember.int64))
    assert r.grad_fn is None and int(r) == 3
    with pytest.raises(RuntimeError, match=r"^aten::floor_divide\(\): functions with out="):
        ember.floor_divide(x, 2, out=ember.empty(0, dtype=ember.float64, requires_grad=True))


@pytest.mark.parametrize("bias", [True, False])
def test_linear_packs_weight_t(bias):
    x = ember.arange(12.).reshape(4, 3).requires_grad_()
    w = (ember.arange(6.).reshape(2, 3) - 2).requires_grad_()
    b = ember.tensor([1., -1.], requires_grad=True) if bias else None
    packed = []

    def pack(t):
        packed.append((tuple(t.shape), t.stride(), type(t.grad_fn).__name__))
        return t * 2

    with ember.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = F.linear(x, w, b)
    mat2 = ((3, 2), (1, 3), "TBackward0")
    mat1 = ((4, 3), (3, 1), "NoneType")
    assert packed == ([mat1, mat2] if bias else [mat2, mat1])
    gy = np.arange(8.).reshape(4, 2)
    gx, gw = ember.autograd.grad(y, (x, w), ember.tensor(gy, dtype=ember.float32))
    np.testing.assert_allclose(np.asarray(gx), gy @ (2 * np.asarray(w.detach())))
    np.testing.assert_allclose(np.asarray(gw), gy.T @ (2 * np.asarray(x.detach())))


# (operand, result strides) as PyTorch 2.13 gives them
STRIDES = [
    (lambda: ember.arange(3.).reshape(3, 1).t() + 1, (1, 1)),
    (lambda: ember.arange(3.).reshape(1, 3).t() + 1, (1, 3)),
    (lambda: ember.ones(3) + ember.arange(3.).reshape(3, 1).t(), (1, 1)),
    (lambda: ember.arange(12.).reshape(3, 1, 4).permute(1, 0, 2) + 1, (4, 4, 1)),
    (lambda: ember.arange(4.).reshape(2, 1, 1, 2)
     + ember.arange(4.).reshape(2, 1, 1, 2).permute(3, 2, 1, 0), (2, 4, 4, 1)),
    (lambda: ember.arange(8.).reshape(2, 4, 1).permute(0, 2, 1) + ember.ones(1).expand(2, 1, 4),
     (4, 1, 1)),
]


@pytest.mark.parametrize("index", range(len(STRIDES)))
def test_pointwise_strides_of_size_one_dims(index):
    make, strides = STRIDES[index]
    assert make().stride() == strides


def test_cross_entropy_label_smoothing_packs_mask_and_count():
    x = ember.tensor(np.linspace(-2, 2, 12).reshape(4, 3), dtype=ember.float32,
                     requires_grad=True)
    packed = []
    with ember.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        loss = F.cross_entropy(x, ember.tensor([0, 1, 2, 1]), ignore_index=1, label_smoothing=0.1)
    assert [(tuple(t.shape), t.dtype) for t in packed[-2:]] == [((4,), ember.bool),
                                                               ((), ember.int64)]
    assert packed[-2].tolist() == [False, True, False, True] and int(packed[-1]) == 2
    g, = ember.autograd.grad(loss, x)
    assert g.shape == (4, 3) and float(g[1].abs().sum()) == 0.0
