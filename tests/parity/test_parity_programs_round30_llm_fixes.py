"""What the LLM programs of round 30 (test_parity_programs_round30_llm.py and its _optim
sibling) found, each pinned against PyTorch: torch.optim.Adafactor on bfloat16 and float16
parameters computed its whole step in float32 and rounded once, where PyTorch rounds each op's
result to the parameter's dtype (the row/column norms, their squares and means, the outer
product, rsqrt, the update), rounds the root before inverting it in its scalar tail loop, and
in its foreach form rounds scalar factors (weight decay, the step size) to the dtype; states
and parameters drifted by an ulp a step. Adam and AdamW on 16-bit parameters did their
arithmetic in NumPy's 16-bit types, rounding the step size, the bias corrections and each
partial product to the dtype (PyTorch keeps scalars in float32 and rounds each op's result,
fuses addcmul's multiply-add, and in its CPU foreach form rounds ``_foreach_mul_``'s factor
and fuses lerp); a bfloat16 AdamW drifted an ulp in the moments. SGD's foreach form on 16-bit
parameters scaled its momentum buffer by 0.9 where PyTorch's CPU ``_foreach_mul_`` scales by
0.9 rounded to bfloat16 (0.8984375). Now they are PyTorch's bits, foreach or not."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _adafactor(lib, shape, dtype, steps=4, **kw):
    rng = np.random.default_rng(sum(shape))
    p = lib.nn.Parameter(lib.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(
        getattr(lib, dtype)))
    opt = lib.optim.Adafactor([p], **kw)
    for i in range(steps):
        p.grad = lib.from_numpy((rng.standard_normal(shape) * (i + 1)).astype(np.float32)).to(
            getattr(lib, dtype))
        opt.step()
    state = {k: v.float().numpy() for k, v in opt.state[p].items()}
    return p.detach().float().numpy(), state


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(3, 4), (33, 17), (7, 300), (100,), (2, 3, 40)])
@pytest.mark.parametrize("kw", [{}, {"foreach": True}, {"weight_decay": 0.2},
                                {"weight_decay": 0.2, "foreach": True},
                                {"maximize": True, "lr": 0.05, "d": 2.0}],
                         ids=["single", "foreach", "wd", "wd_foreach", "maximize"])
def test_adafactor_16_bit_steps_are_torchs_bits(dtype, shape, kw):
    ours, theirs = _adafactor(ember, shape, dtype, **kw), _adafactor(torch, shape, dtype, **kw)
    np.testing.assert_array_equal(ours[0], theirs[0])
    assert ours[1].keys() == theirs[1].keys()
    for key in theirs[1]:
        np.testing.assert_array_equal(ours[1][key], theirs[1][key], err_msg=key)


def test_adafactor_float32_still_matches():
    for kw in ({}, {"foreach": True, "weight_decay": 0.1}):
        ours, theirs = (_adafactor(ember, (9, 13), "float32", **kw),
                        _adafactor(torch, (9, 13), "float32", **kw))
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6, atol=1e-7)
        for key in theirs[1]:
            np.testing.assert_allclose(ours[1][key], theirs[1][key], rtol=1e-5, atol=1e-8)


def _adam(lib, cls, shape, dtype, steps=4, **kw):
    rng = np.random.default_rng(sum(shape))
    p = lib.nn.Parameter(lib.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(
        getattr(lib, dtype)))
    if kw.get("lr") == "tensor":
        kw["lr"] = lib.tensor(0.003)
    opt = getattr(lib.optim, cls)([p], **kw)
    for i in range(steps):
        p.grad = lib.from_numpy((rng.standard_normal(shape) * (i + 1)).astype(np.float32)).to(
            getattr(lib, dtype))
        opt.step()
    return p.detach().float().numpy(), {k: v.float().numpy() for k, v in opt.state[p].items()}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
@pytest.mark.parametrize("shape", [(3, 4), (33, 17), (1237,)])
@pytest.mark.parametrize("kw", [{}, {"foreach": True}, {"weight_decay": 0.1, "amsgrad": True},
                                {"maximize": True, "lr": 0.01, "eps": 1e-3}, {"lr": "tensor"},
                                {"betas": (0.8, 0.99), "foreach": True, "weight_decay": 0.3}],
                         ids=["single", "foreach", "amsgrad", "maximize", "tensor_lr",
                              "foreach_betas"])
def test_adam_16_bit_steps_are_torchs_bits(dtype, cls, shape, kw):
    ours, theirs = (_adam(ember, cls, shape, dtype, **dict(kw)),
                    _adam(torch, cls, shape, dtype, **dict(kw)))
    np.testing.assert_array_equal(ours[0], theirs[0])
    assert ours[1].keys() == theirs[1].keys()
    for key in theirs[1]:
        np.testing.assert_array_equal(ours[1][key], theirs[1][key], err_msg=key)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(3, 4), (1237,)])
@pytest.mark.parametrize("kw", [{"momentum": 0.9}, {"momentum": 0.9, "foreach": True},
                                {"momentum": 0.9, "nesterov": True, "weight_decay": 0.01,
                                 "foreach": True},
                                {"momentum": 0.7, "dampening": 0.3, "foreach": True,
                                 "maximize": True}],
                         ids=["single", "foreach", "nesterov", "dampening"])
def test_sgd_16_bit_foreach_momentum_is_torchs(dtype, shape, kw):
    def run(lib):
        rng = np.random.default_rng(sum(shape))
        p = lib.nn.Parameter(lib.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(
            getattr(lib, dtype)))
        opt = lib.optim.SGD([p], lr=0.1, **kw)
        for i in range(4):
            p.grad = lib.from_numpy((rng.standard_normal(shape) * (i + 1)).astype(
                np.float32)).to(getattr(lib, dtype))
            opt.step()
        return p.detach().float().numpy(), opt.state[p]["momentum_buffer"].float().numpy()
    for ours, theirs in zip(run(ember), run(torch)):
        np.testing.assert_array_equal(ours, theirs)
