"""RMSprop and Adagrad on float16/bfloat16 parameters step to PyTorch's bits, single-tensor
and foreach: each op computes in float32 with its scalar in float32 and rounds its result
once, as PyTorch's CPU kernels do (NumPy's 16-bit arithmetic drifted an ulp a step)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _run(lib, cls, shape, dtype, steps=4, **kw):
    rng = np.random.default_rng(sum(shape))
    p = lib.nn.Parameter(lib.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(
        getattr(lib, dtype)))
    opt = getattr(lib.optim, cls)([p], **kw)
    for i in range(steps):
        p.grad = lib.from_numpy((rng.standard_normal(shape) * (i + 1)).astype(np.float32)).to(
            getattr(lib, dtype))
        opt.step()
    return p.detach().float().numpy(), {k: v.float().numpy() for k, v in opt.state[p].items()}


def _same(cls, shape, dtype, kw, steps=4):
    ours, theirs = (_run(ember, cls, shape, dtype, steps, **dict(kw)),
                    _run(torch, cls, shape, dtype, steps, **dict(kw)))
    np.testing.assert_array_equal(ours[0], theirs[0])
    assert ours[1].keys() == theirs[1].keys()
    for key in theirs[1]:
        np.testing.assert_array_equal(ours[1][key], theirs[1][key], err_msg=key)


SHAPES = [(3, 4), (33, 17), (1237,)]


def each_16_bit_dtype_shape_and_foreach(test):
    """Run ``test`` for bfloat16/float16, each of SHAPES, single-tensor and foreach."""
    for mark in (pytest.mark.parametrize("foreach", [False, True], ids=["single", "foreach"]),
                 pytest.mark.parametrize("shape", SHAPES),
                 pytest.mark.parametrize("dtype", ["bfloat16", "float16"])):
        test = mark(test)
    return test


@each_16_bit_dtype_shape_and_foreach
@pytest.mark.parametrize("kw", [{}, {"weight_decay": 0.1, "alpha": 0.9},
                                {"centered": True, "lr": 0.003},
                                {"momentum": 0.9, "maximize": True},
                                {"momentum": 0.8, "centered": True, "weight_decay": 0.05,
                                 "eps": 1e-3}],
                         ids=["plain", "wd", "centered", "momentum", "all"])
def test_rmsprop_16_bit_steps_are_torchs_bits(dtype, shape, foreach, kw):
    _same("RMSprop", shape, dtype, dict(kw, foreach=foreach))


@each_16_bit_dtype_shape_and_foreach
@pytest.mark.parametrize("kw", [{}, {"weight_decay": 0.1, "lr_decay": 0.01},
                                {"maximize": True, "initial_accumulator_value": 0.1},
                                {"lr": 0.05, "eps": 1e-3}],
                         ids=["plain", "wd", "maximize", "eps"])
def test_adagrad_16_bit_steps_are_torchs_bits(dtype, shape, foreach, kw):
    _same("Adagrad", shape, dtype, dict(kw, foreach=foreach))


@each_16_bit_dtype_shape_and_foreach
@pytest.mark.parametrize("kw", [{}, {"weight_decay": 0.1, "momentum_decay": 0.01},
                                {"weight_decay": 0.1, "decoupled_weight_decay": True,
                                 "lr": 0.01},
                                {"maximize": True, "betas": (0.8, 0.99), "eps": 1e-3}],
                         ids=["plain", "wd", "decoupled", "maximize"])
def test_nadam_16_bit_steps_are_torchs_bits(dtype, shape, foreach, kw):
    _same("NAdam", shape, dtype, dict(kw, foreach=foreach))


@each_16_bit_dtype_shape_and_foreach
@pytest.mark.parametrize("kw", [{}, {"weight_decay": 0.1, "lr": 0.01},
                                {"weight_decay": 0.1, "decoupled_weight_decay": True,
                                 "lr": 0.01, "betas": (0.9, 0.9)},
                                {"maximize": True, "betas": (0.8, 0.5), "eps": 1e-3}],
                         ids=["plain", "wd", "decoupled", "maximize"])
def test_radam_16_bit_steps_are_torchs_bits(dtype, shape, foreach, kw):
    _same("RAdam", shape, dtype, dict(kw, foreach=foreach), steps=8)


@each_16_bit_dtype_shape_and_foreach
@pytest.mark.parametrize("cls,kw", [("Adamax", {}), ("Adamax", {"weight_decay": 0.1}),
                                    ("Adamax", {"maximize": True, "eps": 1e-3, "lr": 0.01}),
                                    ("Adadelta", {}), ("Adadelta", {"weight_decay": 0.1}),
                                    ("Adadelta", {"rho": 0.5, "eps": 1e-3, "lr": 0.5,
                                                  "maximize": True})],
                         ids=["adamax", "adamax_wd", "adamax_max", "adadelta", "adadelta_wd",
                              "adadelta_max"])
def test_adamax_adadelta_16_bit_steps_are_torchs_bits(dtype, shape, foreach, cls, kw):
    _same(cls, shape, dtype, dict(kw, foreach=foreach))


@each_16_bit_dtype_shape_and_foreach
@pytest.mark.parametrize("kw", [{}, {"etas": (0.3, 1.7), "step_sizes": (1e-3, 0.07)},
                                {"maximize": True, "lr": 0.003}],
                         ids=["plain", "etas", "maximize"])
def test_rprop_16_bit_steps_are_torchs_bits(dtype, shape, foreach, kw):
    _same("Rprop", shape, dtype, dict(kw, foreach=foreach), steps=6)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kw", [{}, {"weight_decay": 0.1, "lambd": 0.01},
                                {"maximize": True, "t0": 2, "lr": 0.05}],
                         ids=["plain", "wd", "averaging"])
def test_asgd_16_bit_single_tensor_steps_are_torchs_bits(dtype, shape, kw):
    # (foreach=True still differs by an ulp here and there, eta included)
    _same("ASGD", shape, dtype, dict(kw, foreach=False), steps=6)


# fused=True (round 30, last wave): PyTorch's CPU fused kernels run a 16-bit step in float32
# and round only what they store; (1237,) exercises the kernel's scalar tail too
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
@pytest.mark.parametrize("kw", [{"lr": 0.01}, {"amsgrad": True, "lr": 0.01},
                                {"maximize": True, "weight_decay": 0.1, "lr": 0.01},
                                {"weight_decay": 0.1, "amsgrad": True, "maximize": True,
                                 "betas": (0.3, 0.9), "eps": 1e-3, "lr": 0.05}],
                         ids=["plain", "amsgrad", "maximize_wd", "all"])
def test_fused_adam_16_bit_steps_are_torchs_bits(dtype, shape, cls, kw):
    _same(cls, shape, dtype, dict(kw, fused=True))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape", SHAPES + [(40,), (70,)])
@pytest.mark.parametrize("kw", [{}, {"weight_decay": 0.1, "lr_decay": 0.01},
                                {"maximize": True, "initial_accumulator_value": 0.1},
                                {"lr": 0.05, "eps": 1e-3}],
                         ids=["plain", "wd", "maximize", "eps"])
def test_fused_adagrad_16_bit_steps_are_torchs_bits(dtype, shape, kw):
    _same("Adagrad", shape, dtype, dict(kw, fused=True))
