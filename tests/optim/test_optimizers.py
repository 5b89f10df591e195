"""Every optimizer and option against a NumPy transcription of PyTorch's documented rule."""

import re

import ml_dtypes
import numpy as np
import pytest

import ember
from ember import nn, optim
from tests.optim import trajectories as T

CASES = [
    (optim.SGD, T.sgd, dict(lr=0.1)),
    (optim.SGD, T.sgd, dict(lr=0.1, momentum=0.9)),
    (optim.SGD, T.sgd, dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.1)),
    (optim.SGD, T.sgd, dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    (optim.Adam, T.adam, dict(lr=0.05)),
    (optim.Adam, T.adam, dict(lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    (optim.Adam, T.adam, dict(lr=0.05, amsgrad=True, maximize=True)),
    (optim.Adam, T.adam, dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    (optim.AdamW, T.adam, dict(lr=0.05, weight_decay=0.1, amsgrad=True)),
    (optim.Adamax, T.adamax, dict(lr=0.05)),
    (optim.Adamax, T.adamax, dict(lr=0.05, betas=(0.8, 0.9), weight_decay=0.1, maximize=True)),
    (optim.NAdam, T.nadam, dict(lr=0.05)),
    (optim.NAdam, T.nadam, dict(lr=0.05, momentum_decay=0.1, weight_decay=0.1)),
    (optim.NAdam, T.nadam, dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True,
                                maximize=True)),
    (optim.RAdam, T.radam, dict(lr=0.05)),
    (optim.RAdam, T.radam, dict(lr=0.05, betas=(0.5, 0.6), weight_decay=0.1)),
    (optim.RAdam, T.radam, dict(lr=0.05, betas=(0.5, 0.6), weight_decay=0.1,
                                decoupled_weight_decay=True, maximize=True)),
    (optim.Adagrad, T.adagrad, dict(lr=0.1)),
    (optim.Adagrad, T.adagrad, dict(lr=0.1, lr_decay=0.2, weight_decay=0.1,
                                    initial_accumulator_value=0.5, eps=1e-6, maximize=True)),
    (optim.Adadelta, T.adadelta, dict()),
    (optim.Adadelta, T.adadelta, dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1,
                                      maximize=True)),
    (optim.RMSprop, T.rmsprop, dict()),
    (optim.RMSprop, T.rmsprop, dict(alpha=0.9, weight_decay=0.1, momentum=0.5)),
    (optim.RMSprop, T.rmsprop, dict(centered=True, momentum=0.5, maximize=True)),
    (optim.Rprop, T.rprop, dict()),
    (optim.Rprop, T.rprop, dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(0.01, 0.2),
                                maximize=True)),
    (optim.ASGD, T.asgd, dict(lr=0.1)),
    (optim.ASGD, T.asgd, dict(lr=0.1, lambd=0.01, alpha=0.5, t0=2, weight_decay=0.1,
                              maximize=True)),
    (optim.SparseAdam, T.sparse_adam, dict(lr=0.05)),
    (optim.SparseAdam, T.sparse_adam, dict(lr=0.05, betas=(0.8, 0.9), maximize=True)),
    (optim.Muon, T.muon, dict(lr=0.05)),
    (optim.Muon, T.muon, dict(lr=0.05, weight_decay=0.01, momentum=0.5, nesterov=False,
                              adjust_lr_fn="match_rms_adamw")),
    (optim.Muon, T.muon, dict(lr=0.05, ns_coefficients=(2.0, -1.5, 0.5), eps=1e-3, ns_steps=3,
                              adjust_lr_fn="original")),
    (optim.Adafactor, T.adafactor, dict()),
    (optim.Adafactor, T.adafactor, dict(lr=0.3, beta2_decay=-0.5, eps=(1e-3, 1e-2), d=1.5,
                                        weight_decay=0.1, maximize=True)),
]

# parameter shapes other than trajectories.SHAPES: Muon takes matrices only; Adafactor
# factors every parameter of 2 or more dims over its last two
SHAPES = {optim.Muon: ((3, 4), (5, 2), (4, 4)), optim.Adafactor: T.SHAPES + ((2, 3, 4),)}

# PyTorch keeps some scalar state in float32 (NAdam's mu_product, ASGD's eta and mu), so
# float64 trajectories agree with the exact rule to float32 precision only.
FLOAT32_STATE = (optim.NAdam, optim.ASGD)


def _ids(case):
    cls, _, options = case
    return cls.__name__ + "-" + "-".join(f"{k}={v}" for k, v in options.items())


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_trajectory_matches_the_documented_rule(case):
    cls, rule, options = case
    shapes = SHAPES.get(cls, T.SHAPES)
    grads = T.gradient_sequence(shapes=shapes, sparse=cls is optim.SparseAdam)
    params0 = T.initial_params(shapes=shapes)
    ours, _ = T.run_ember(lambda ps: cls(ps, **options), params0, grads,
                          sparse=cls is optim.SparseAdam)
    tol = 1e-6 if cls in FLOAT32_STATE else 1e-12
    ref_options = dict(options)
    if cls is optim.AdamW:
        ref_options.update(decoupled_weight_decay=True)
    want = T.run_reference(rule, params0, grads, **ref_options)
    for got_step, want_step in zip(ours, want):
        for got, expected in zip(got_step, want_step):
            np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("cls", sorted({c[0] for c in CASES}, key=lambda c: c.__name__))
def test_float32_trajectory_is_the_float64_one_rounded(cls):
    shapes = SHAPES.get(cls, T.SHAPES)
    grads, params0 = T.gradient_sequence(shapes=shapes), T.initial_params(shapes=shapes)
    sparse = cls is optim.SparseAdam
    wide, _ = T.run_ember(lambda ps: cls(ps, lr=0.05), params0, grads, sparse)
    narrow, _ = T.run_ember(lambda ps: cls(ps, lr=0.05),
                            [p.astype(np.float32) for p in params0],
                            [[g.astype(np.float32) for g in gs] for gs in grads], sparse)
    for w, n in zip(wide[-1], narrow[-1]):
        assert n.dtype == np.float32
        np.testing.assert_allclose(n, w, rtol=2e-5, atol=2e-6)


# ----- Muon and Adafactor: their checks, state and edge cases ---------------------------------

def _matrix(*shape, dtype=None):
    return nn.Parameter(ember.randn(shape, dtype=dtype))


@pytest.mark.parametrize("options, message", [
    (dict(lr=-1), "Learning rate should be >= 0 but is: -1"),
    (dict(momentum=-0.5, weight_decay=-1), "momentum should be >= 0 but is: -0.5"),
    (dict(weight_decay=-1, adjust_lr_fn="x"), "weight decay should be >= 0 but is: -1"),
    (dict(adjust_lr_fn="x"), "Adjust learning rate function x is not supported"),
])
def test_muon_checks_its_options_as_pytorch_words_them(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        optim.Muon([_matrix(3, 4)], **options)


def test_muon_takes_matrices_only():
    bias = nn.Parameter(ember.zeros(3))
    for params in ([bias], [{"params": [_matrix(3, 4)]}, {"params": [bias]}],
                   [("w", _matrix(2, 2)), ("b", bias)], [nn.Parameter(ember.ones(2, 2, 2))]):
        with pytest.raises(ValueError, match=r"Muon only supports 2D parameters whereas we "
                                             r"found a parameter with size: ember\.Size\(\["):
            optim.Muon(params)
    z = nn.Parameter(ember.ones(2, 2, dtype=ember.complex64))
    opt = optim.Muon([z])
    z.grad = ember.ones(2, 2, dtype=ember.complex64)
    with pytest.raises(RuntimeError, match="Muon does not support complex parameters"):
        opt.step()


def test_muon_state_and_defaults_are_pytorchs():
    w = _matrix(3, 4)
    opt = optim.Muon([w], lr=ember.tensor(0.02))
    assert opt.defaults == dict(lr=opt.defaults["lr"], weight_decay=0.1, momentum=0.95,
                                nesterov=True, ns_coefficients=(3.4445, -4.775, 2.0315),
                                eps=1e-7, ns_steps=5, adjust_lr_fn=None)
    w.grad = ember.ones(3, 4)
    opt.step()
    assert list(opt.state[w]) == ["momentum_buffer"]       # a moving average; no step count
    np.testing.assert_allclose(opt.state[w]["momentum_buffer"].numpy(), 0.05, rtol=1e-6)


def test_muon_orthogonalizes_the_update():
    # a rank-one gradient gives a rank-one update whose singular value is the quintic's five
    # steps from 1 (0.685, as in PyTorch), whatever the gradient's scale
    for scale in (1e-3, 1.0, 1e3):
        w = nn.Parameter(ember.zeros(4, 8))
        opt = optim.Muon([w], lr=1.0, weight_decay=0, momentum=0)
        w.grad = ember.full((4, 8), scale)
        opt.step()
        s = ember.linalg.svdvals(-w.detach())
        assert abs(s[0].item() - 0.68501) < 1e-5 and s[1:].abs().max().item() < 1e-6


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16, ember.float32])
def test_low_precision_parameters_keep_their_dtype(dtype):
    for cls, shape in ((optim.Muon, (3, 4)), (optim.Adafactor, (3, 4)), (optim.Adafactor, (5,))):
        p = nn.Parameter(ember.randn(shape).to(dtype))
        before = p.detach().float().clone()
        opt = cls([p], lr=0.1, weight_decay=0.1)
        for _ in range(2):
            p.grad = ember.randn(shape).to(dtype)
            opt.step()
        assert p.dtype is dtype and ember.isfinite(p.float()).all()
        assert not ember.equal(p.detach().float(), before)
        assert all(v.dtype is (ember.float32 if k == "step" else dtype)
                   for k, v in opt.state[p].items())


def test_muon_leaves_its_momentum_buffer_alone_in_bfloat16():
    # PyTorch 2.13 normalizes a bfloat16 buffer in place when nesterov=False (its cast to
    # bfloat16 aliases it); ember keeps the documented moving average
    w = nn.Parameter(ember.zeros(3, 4, dtype=ember.bfloat16))
    opt = optim.Muon([w], nesterov=False)
    w.grad = ember.full((3, 4), 2.0, dtype=ember.bfloat16)
    opt.step()
    np.testing.assert_allclose(opt.state[w]["momentum_buffer"].float().numpy(), 0.1, rtol=1e-2)


@pytest.mark.parametrize("options, message", [
    (dict(lr=-1, d=0), "Learning rate should be >= 0 but is: -1"),
    (dict(beta2_decay=0.5, eps=(-1, 1)), "beta2_decay should be <= 0 but is: 0.5"),
    (dict(eps=(-1, -1)), "epsilon1 should be >= 0 but is: -1"),
    (dict(eps=(None, -1)), "epsilon2 should be >= 0 but is: -1"),
    (dict(d=0.5, weight_decay=-1), "Clipping threshold d should be >= 1 but is: 0.5"),
    (dict(weight_decay=-1), "weight_decay should be >= 0 but is: -1"),
])
def test_adafactor_checks_its_options_as_pytorch_words_them(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        optim.Adafactor([_matrix(3, 4)], **options)


def test_adafactor_state_is_factored_over_the_last_two_dims():
    shapes = [(), (3,), (3, 4), (2, 3, 4)]
    params = [nn.Parameter(ember.randn(s)) for s in shapes]
    opt = optim.Adafactor(params)
    assert opt.defaults == dict(lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                                weight_decay=0.0, foreach=None, maximize=False)
    for p in params:
        p.grad = ember.randn(p.shape)
    opt.step()
    layout = [{k: tuple(v.shape) for k, v in opt.state[p].items()} for p in params]
    assert layout == [{"step": (), "variance": ()}, {"step": (), "variance": (3,)},
                      {"step": (), "row_var": (3, 1), "col_var": (1, 4)},
                      {"step": (), "row_var": (2, 3, 1), "col_var": (2, 1, 4)}]
    z = nn.Parameter(ember.ones(2, dtype=ember.complex64))
    opt = optim.Adafactor([z])
    z.grad = ember.ones(2, dtype=ember.complex64)
    with pytest.raises(RuntimeError, match="Adafactor does not support complex parameters"):
        opt.step()


def test_adafactor_steps_past_empty_parameters():
    p, q = nn.Parameter(ember.zeros(0, 4)), nn.Parameter(ember.ones(2))
    opt = optim.Adafactor([p, q])
    p.grad, q.grad = ember.zeros(0, 4), ember.ones(2)
    opt.step()
    assert opt.state[p]["step"].item() == 1 and opt.state[p]["col_var"].abs().sum() == 0
    assert (q.detach() < 1).all()


def test_decoupled_weight_decay_of_16_bit_parameters_rounds_once():
    values = np.linspace(-2, 2, 64, dtype=np.float32)
    p = ember.nn.Parameter(ember.tensor(values).to(ember.bfloat16))
    opt = ember.optim.AdamW([p], lr=0.03, weight_decay=0.1)
    expected = np.asarray(p.detach().float())
    for _ in range(10):
        p.grad = ember.zeros_like(p)
        opt.step()
        # the factor in float32, the product rounded to bfloat16: 0.997 would round to 0.996
        expected = (expected * np.float32(1 - 0.03 * 0.1)).astype(ml_dtypes.bfloat16)
        expected = expected.astype(np.float32)
    np.testing.assert_array_equal(np.asarray(p.detach().float()), expected)


def test_rprop_steps_both_parts_of_a_complex_parameter_by_lr():
    # PyTorch treats a complex parameter as pairs of reals: each part starts at step size lr
    z = nn.Parameter(ember.tensor([1.0 + 1.0j, -2.0 + 0.5j]))
    opt = optim.Rprop([z], lr=0.1)
    for g in ([1 + 1j, 1 - 1j], [1 + 1j, -1 - 1j], [-1 + 1j, 1 + 1j]):
        z.grad = ember.tensor(g)
        opt.step()
    np.testing.assert_allclose(z.detach().numpy(), [0.78 + 0.636j, -2.15 + 0.72j], rtol=1e-6)
    np.testing.assert_allclose(opt.state[z]["step_size"].numpy(), [0.06 + 0.144j, 0.05 + 0.06j],
                               rtol=1e-6)


@pytest.mark.parametrize("betas, options, message", [
    ((0.9, ember.tensor(0.99)), {}, "betas must be either both floats or both Tensors"),
    ((ember.tensor(0.9), 0.99), {}, "betas must be either both floats or both Tensors"),
    ((ember.tensor(0.9), ember.tensor(0.99)), {"foreach": True},
     r"betas\[0\] as a Tensor is not supported for capturable=False and foreach=True"),
])
def test_adam_checks_tensor_betas_as_pytorch_words_them(betas, options, message):
    with pytest.raises(ValueError, match=message):
        optim.Adam([nn.Parameter(ember.ones(2))], betas=betas, **options)


def test_adam_takes_one_element_tensor_betas_as_0_dim():
    p = nn.Parameter(ember.tensor([1.0, -2.0]))
    opt = optim.AdamW([p], lr=0.1, betas=(ember.tensor([0.8]), ember.tensor(0.9)))
    beta1, beta2 = opt.defaults["betas"]
    assert beta1.shape == () and beta2.shape == ()
    p.grad = ember.tensor([0.5, -1.0])
    opt.step()
    assert p.tolist() == pytest.approx([0.899, -1.898], rel=1e-6)


def test_adagrad_share_memory_moves_its_sums_to_shared_memory():
    p = nn.Parameter(ember.ones(2))
    opt = optim.Adagrad([p], lr=0.1, initial_accumulator_value=0.3)
    opt.share_memory()
    total = opt.state[p]["sum"]
    assert total.is_shared() and total.tolist() == pytest.approx([0.3, 0.3])
    p.grad = ember.tensor([1.0, 2.0])
    opt.step()
    assert opt.state[p]["sum"] is total and total.tolist() == pytest.approx([1.3, 4.3])


def test_adagrad_fills_both_parts_of_a_complex_sum():
    """A complex parameter steps as (real, imag) pairs, so both parts of ``sum`` start at
    initial_accumulator_value (PyTorch's values)."""
    p = nn.Parameter(ember.tensor([1 + 2j, -1 + 0.5j], dtype=ember.complex128))
    opt = optim.Adagrad([p], lr=0.1, initial_accumulator_value=0.5)
    assert opt.state[p]["sum"].tolist() == [0.5 + 0.5j, 0.5 + 0.5j]
    p.grad = ember.tensor([0.5 - 1j, 2 + 0.25j], dtype=ember.complex128)
    opt.step()
    assert opt.state[p]["sum"].tolist() == [0.75 + 1.5j, 4.5 + 0.5625j]
    got = ember.view_as_real(p.detach()).tolist()
    np.testing.assert_allclose(got, [[0.9422649730877041, 2.081649658086106],
                                     [-1.094280904153762, 0.4666666666711111]], rtol=1e-12)


def test_adagrad_makes_state_for_a_group_added_later():
    p, q = nn.Parameter(ember.ones(2)), nn.Parameter(ember.ones(2))
    opt = optim.Adagrad([p], lr=0.1, initial_accumulator_value=0.5)
    opt.add_param_group({"params": [q]})
    p.grad, q.grad = ember.ones(2), ember.ones(2)
    opt.step()
    assert opt.state[q]["step"].item() == 1.0
    assert opt.state[q]["sum"].tolist() == [1.5, 1.5]
    assert q.tolist() == pytest.approx([0.918350338935852] * 2)


@pytest.mark.parametrize("cls, options", [
    (optim.NAdam, {"betas": [0.8, 0.9]}), (optim.RAdam, {"betas": [0.8, 0.9]}),
    (optim.Adamax, {"betas": [0.8, 0.9]}), (optim.SparseAdam, {"betas": [0.8, 0.9]}),
    (optim.Rprop, {"etas": [0.4, 1.3], "step_sizes": [1e-5, 10]}),
])
def test_sequence_options_are_kept_as_given(cls, options):
    """As PyTorch: a list stays a list in the groups (and so in repr and state_dict)."""
    opt = cls([nn.Parameter(ember.ones(2))], **options)
    assert {k: opt.param_groups[0][k] for k in options} == options
    assert all(type(opt.defaults[k]) is list for k in options)


def test_sparse_adam_refuses_complex_and_sparse_parameters():
    c = ember.zeros(2, dtype=ember.complex64, requires_grad=True)
    with pytest.raises(ValueError, match=re.escape(
            "Complex params at indices [[0, 0], [0, 2]]: SparseAdam does not support complex "
            "parameters")):
        optim.SparseAdam([c, ember.zeros(2), ember.zeros(1, dtype=ember.complex128)])
    with pytest.raises(ValueError, match=re.escape(
            "Sparse params at indices [[1, 0]]: SparseAdam requires dense parameter tensors")):
        optim.SparseAdam([{"params": [ember.zeros(2)]}, {"params": [c.detach().to_sparse()]}])
