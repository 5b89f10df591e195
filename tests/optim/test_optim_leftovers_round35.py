"""Leftovers of round 35's optimizer fuzzer (no PyTorch needed): a group's tensor betas
under foreach=True refused at step (Adam/AdamW), and the rounding of float32 tensor learning
rates on float64 parameters in the foreach steps of NAdam, Adamax and RAdam, RAdam's
decoupled weight decay and fused Adagrad, as PyTorch rounds them."""

import numpy as np
import pytest

import ember

X = [[0.3, -0.7], [1.1, 0.2]]
G = [[0.5, -0.25], [0.125, 1.5]]
LR32 = float(np.float32(0.0123))     # what a float32 tensor lr of 0.0123 holds


def _steps(name, lr, n=3, **kw):
    """The flattened float64 parameter after ``n`` steps of ``name`` with learning rate
    ``lr`` (a float, or a float32 tensor of it when ``lr`` is the string "tensor")."""
    p = ember.nn.Parameter(ember.tensor(X, dtype=ember.float64))
    rate = ember.tensor(0.0123) if lr == "tensor" else lr
    opt = getattr(ember.optim, name)([p], lr=rate, **kw)
    for k in range(n):
        p.grad = ember.tensor(G, dtype=ember.float64) * (k + 1)
        opt.step()
    return p.detach().flatten().tolist()


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@pytest.mark.parametrize("how", ["group", "add_param_group"])
def test_foreach_refuses_a_groups_tensor_betas_at_step(name, how):
    """Only the defaults' betas are checked at construction: a group's own tensor betas are
    refused by the foreach step, after its states are made and before any step is counted
    (the other group has stepped already)."""
    p = ember.nn.Parameter(ember.tensor([1.0, 2.0], dtype=ember.float64))
    q = ember.nn.Parameter(ember.tensor([3.0], dtype=ember.float64))
    betas = (ember.tensor(0.9), ember.tensor(0.99))
    cls = getattr(ember.optim, name)
    if how == "group":
        opt = cls([{"params": [p]}, {"params": [q], "betas": betas}], foreach=True)
    else:
        opt = cls([p], foreach=True)
        opt.add_param_group({"params": [q], "betas": betas})
    p.grad, q.grad = ember.ones_like(p), ember.ones_like(q)
    with pytest.raises(ValueError, match=r"^beta1 as a Tensor is not supported for "
                                         r"capturable=False and foreach=True$"):
        opt.step()
    assert p.tolist() != [1.0, 2.0] and opt.state[p]["step"].item() == 1.0
    assert q.tolist() == [3.0]
    assert opt.state[q]["step"].item() == 0.0
    assert opt.state[q]["exp_avg"].tolist() == [0.0]
    q.grad = None       # a group without gradients steps (nothing to refuse)
    opt.step()
    assert opt.state[p]["step"].item() == 2.0


def test_foreach_group_tensor_betas_without_foreach_still_step():
    q = ember.nn.Parameter(ember.tensor([3.0], dtype=ember.float64))
    opt = ember.optim.Adam([{"params": [q], "betas": (ember.tensor(0.9), ember.tensor(0.99))}],
                           foreach=False)
    q.grad = ember.ones_like(q)
    opt.step()
    assert q.item() == pytest.approx(3.0 - 1e-3, rel=1e-6)


@pytest.mark.parametrize("name,kw", [("Adamax", {}), ("Adamax", {"weight_decay": 0.1}),
                                     ("NAdam", {}), ("NAdam", {"weight_decay": 0.1})])
def test_foreach_takes_a_tensor_lr_as_its_item(name, kw):
    """PyTorch's foreach steps compute their step sizes from ``lr.item()`` in double: a
    float32 tensor lr steps exactly as the Python float it holds (the single-tensor steps
    compute them in float32, ember's foreach did too: ~1e-9 relative off)."""
    got = _steps(name, "tensor", foreach=True, **kw)
    assert got == _steps(name, LR32, foreach=True, **kw)


def test_adamax_foreach_tensor_lr_first_step_value():
    got = _steps("Adamax", "tensor", n=1, foreach=True, betas=(0.7, 0.999))
    x, g = np.array(X).ravel(), np.array(G).ravel()
    want = x - (LR32 / (1 - 0.7)) * ((1 - 0.7) * g) / (np.abs(g) + 1e-8)
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)


def test_fused_adagrad_takes_a_tensor_lr_as_its_item():
    """PyTorch's fused kernel takes a tensor lr as a double: its decayed rate is computed
    in double, not in float32."""
    kw = dict(fused=True, lr_decay=0.1, weight_decay=0.1, eps=1e-3)
    assert _steps("Adagrad", "tensor", n=4, **kw) == _steps("Adagrad", LR32, n=4, **kw)


def test_radam_foreach_tensor_lr_step_size_in_float32():
    """Unrectified first step: x - m * lr / (1 - beta1) with the step size a float32
    tensor's (lr, 1 - beta1 rounded to float32, divided in float32; ember's was double)."""
    got = _steps("RAdam", "tensor", n=1, foreach=True, betas=(0.7, 0.999))
    x, g = np.array(X).ravel(), np.array(G).ravel()
    size = float(np.float32(LR32) / np.float32(1 - 0.7))
    np.testing.assert_allclose(got, x - ((1 - 0.7) * g) * size, rtol=1e-15, atol=0)
    assert abs(size / (LR32 / (1 - 0.7)) - 1) > 1e-9


@pytest.mark.parametrize("foreach", [False, True])
def test_radam_decoupled_decay_of_a_float32_lr_is_float32(foreach):
    """1 - lr * weight_decay with a float32 tensor lr is a float32 tensor (the decay off
    by ~1e-8 relative when computed in double)."""
    got = _steps("RAdam", "tensor", n=1, foreach=foreach, weight_decay=0.1,
                 decoupled_weight_decay=True)
    x, g = np.array(X).ravel(), np.array(G).ravel()
    decay = float(np.float32(1) - np.float32(LR32) * np.float32(0.1))
    size = float(np.float32(LR32) / np.float32(1 - 0.9)) if foreach else LR32 / (1 - 0.9)
    np.testing.assert_allclose(got, x * decay - (0.1 * g) * size, rtol=1e-15, atol=0)
    assert decay != 1 - LR32 * 0.1
