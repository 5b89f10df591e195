"""The losses of ember.nn.functional composed from other ops: values against NumPy
references, float64 gradcheck, PyTorch's errors and warnings."""

import math
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(0)
REDUCTIONS = ("none", "mean", "sum")


def _reduce(loss, reduction):
    return {"none": loss, "mean": np.mean(loss), "sum": np.sum(loss)}[reduction]


def _softplus(x):
    return np.logaddexp(0, x)


def _t(a, grad=False):
    return ember.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


A, B = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
P = RNG.uniform(0.1, 0.9, (3, 4))
SIGN = np.where(RNG.random((3, 4)) < 0.5, -1.0, 1.0)
Y = np.array([1.0, -1.0, 1.0])


def _pairwise(x1, x2, p=2.0, eps=1e-6):
    return (np.abs(x1 - x2 + eps) ** p).sum(-1) ** (1 / p)


def _multi_margin(x, y, p=1, margin=1.0, w=None):
    out = []
    for row, t in zip(x, y):
        m = np.maximum(0, margin - row[t] + row) ** p
        m[t] = 0
        out.append(m.sum() * (1 if w is None else w[t]) / len(row))
    return np.array(out)


def _multilabel_margin(x, y):
    out = []
    for row, t in zip(x, y):
        listed = []
        for k in t:
            if k == -1:
                break
            listed.append(k)
        others = [i for i in range(len(row)) if i not in listed]
        out.append(sum(max(0, 1 - (row[j] - row[i])) for j in listed for i in others) / len(row))
    return np.array(out)


def _cosine(x1, x2, y, margin):
    cos = (x1 * x2).sum(-1) / np.sqrt(((x1 * x1).sum(-1) + 1e-12) * ((x2 * x2).sum(-1) + 1e-12))
    return np.where(y == 1, 1 - cos, np.maximum(0, cos - margin))


def _stirling(t):
    with np.errstate(divide="ignore", invalid="ignore"):
        s = t * np.log(t) - t + 0.5 * np.log(2 * np.pi * t)
    return np.where(t > 1, s, 0)


def _kl(x, t):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t > 0, t * (np.log(t) - x), -t * x)


# (name, args (arrays; those in `grads` positions are differentiated), kwargs, reference)
CASES = [
    ("l1_loss", (A, B), {}, lambda r: _reduce(np.abs(A - B), r)),
    ("l1_loss", (A, B), {"weight": P}, lambda r: (np.abs(A - B) * P).sum() / P.sum()
     if r == "mean" else _reduce(np.abs(A - B) * P, r)),
    ("mse_loss", (A, B), {}, lambda r: _reduce((A - B) ** 2, r)),
    ("huber_loss", (A, B), {"delta": 0.8}, lambda r: _reduce(np.where(
        np.abs(A - B) < 0.8, 0.5 * (A - B) ** 2, 0.8 * (np.abs(A - B) - 0.4)), r)),
    ("huber_loss", (A, B), {"weight": P}, lambda r: _reduce(P * np.where(
        np.abs(A - B) < 1, 0.5 * (A - B) ** 2, np.abs(A - B) - 0.5), r)),
    ("smooth_l1_loss", (A, B), {"beta": 0.5}, lambda r: _reduce(np.where(
        np.abs(A - B) < 0.5, (A - B) ** 2, np.abs(A - B) - 0.25), r)),
    ("smooth_l1_loss", (A, B), {"beta": 0.0}, lambda r: _reduce(np.abs(A - B), r)),
    ("soft_margin_loss", (A, SIGN), {}, lambda r: _reduce(_softplus(-SIGN * A), r)),
    ("binary_cross_entropy_with_logits", (A * 20, P), {"pos_weight": P[0] * 3,
                                                       "weight": P[1]},
     lambda r: _reduce(P[1] * (3 * P[0] * P * _softplus(-A * 20)
                               + (1 - P) * _softplus(A * 20)), r)),
    ("kl_div", (A, P), {}, lambda r: _reduce(_kl(A, P), r)),
    ("kl_div", (A, np.log(P)), {"log_target": True}, lambda r: _reduce(P * (np.log(P) - A), r)),
    ("poisson_nll_loss", (A, P * 4), {}, lambda r: _reduce(np.exp(A) - P * 4 * A, r)),
    ("poisson_nll_loss", (P, P * 4), {"log_input": False, "full": True},
     lambda r: _reduce(P - P * 4 * np.log(P + 1e-8) + _stirling(P * 4), r)),
    ("gaussian_nll_loss", (A, B, P), {}, lambda r: _reduce(
        0.5 * (np.log(P) + (A - B) ** 2 / P), r)),
    ("gaussian_nll_loss", (A, B, P[:, 0]), {"full": True}, lambda r: _reduce(
        0.5 * (np.log(P[:, :1]) + (A - B) ** 2 / P[:, :1] + np.log(2 * np.pi)), r)),
    ("margin_ranking_loss", (A[:, 0], B[:, 0], Y), {"margin": 0.2},
     lambda r: _reduce(np.maximum(0, -Y * (A[:, 0] - B[:, 0]) + 0.2), r)),
    ("hinge_embedding_loss", (A, SIGN), {"margin": 0.5},
     lambda r: _reduce(np.where(SIGN == 1, A, np.maximum(0, 0.5 - A)), r)),
    ("cosine_embedding_loss", (A, B, Y), {"margin": -0.2},
     lambda r: _reduce(_cosine(A, B, Y, -0.2), r)),
    ("multilabel_soft_margin_loss", (A, P), {"weight": P[0]},
     lambda r: _reduce((P[0] * (P * _softplus(-A) + (1 - P) * _softplus(A))).mean(-1), r)),
    ("multi_margin_loss", (A, np.array([0, 3, 1])), {},
     lambda r: _reduce(_multi_margin(A, [0, 3, 1]), r)),
    ("multi_margin_loss", (A, np.array([2, 2, 1])), {"p": 2, "margin": 0.7, "weight": P[0]},
     lambda r: _reduce(_multi_margin(A, [2, 2, 1], 2, 0.7, P[0]), r)),
    ("multilabel_margin_loss", (A, np.array([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 0, 0, 0]])), {},
     lambda r: _reduce(_multilabel_margin(A, [[3, 0, -1, 1], [1, 2, 3, 0], [-1, 0, 0, 0]]), r)),
    ("triplet_margin_loss", (A, B, P), {"margin": 1.5},
     lambda r: _reduce(np.maximum(0, 1.5 + _pairwise(A, B) - _pairwise(A, P)), r)),
    ("triplet_margin_loss", (A, B, P), {"p": 1, "swap": True, "eps": 0.0},
     lambda r: _reduce(np.maximum(0, 1 + _pairwise(A, B, 1, 0) - np.minimum(
         _pairwise(A, P, 1, 0), _pairwise(B, P, 1, 0))), r)),
    ("triplet_margin_with_distance_loss", (A, B, P),
     {"distance_function": lambda a, b: (a - b).abs().sum(-1), "margin": 2.0},
     lambda r: _reduce(np.maximum(0, 2 + np.abs(A - B).sum(-1) - np.abs(A - P).sum(-1)), r)),
]
_INTEGER_TARGETS = ("multi_margin_loss", "multilabel_margin_loss")
_CONSTANT_ARGS = {"soft_margin_loss": (1,), "margin_ranking_loss": (2,),
                  "hinge_embedding_loss": (1,), "cosine_embedding_loss": (2,),
                  "multi_margin_loss": (1,), "multilabel_margin_loss": (1,)}


def _args(name, args, grad):
    out = []
    for i, a in enumerate(args):
        if name in _INTEGER_TARGETS and i == 1:
            out.append(ember.tensor(a))
        else:
            out.append(_t(a, grad and i not in _CONSTANT_ARGS.get(name, ())))
    return out


def _kwargs(kwargs):
    return {k: _t(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,args,kwargs,ref", CASES, ids=[f"{c[0]}-{i}"
                                                             for i, c in enumerate(CASES)])
def test_value_matches_reference(name, args, kwargs, ref, reduction):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # kl_div's 'mean' warning is tested below
        got = getattr(F, name)(*_args(name, args, False), **_kwargs(kwargs), reduction=reduction)
    want = np.asarray(ref(reduction))
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-12)
    assert got.dtype is ember.float64


@pytest.mark.parametrize("name,args,kwargs,ref", CASES, ids=[f"{c[0]}-{i}"
                                                             for i, c in enumerate(CASES)])
def test_gradcheck(name, args, kwargs, ref):
    inputs = [a for a in _args(name, args, True) if a.requires_grad]
    fixed = _args(name, args, False)

    def f(*tensors):
        it = iter(tensors)
        full = [next(it) if a.requires_grad else b for a, b in zip(_args(name, args, True),
                                                                     fixed)]
        return getattr(F, name)(*full, **_kwargs(kwargs), reduction="sum")
    assert gradcheck(f, inputs)


def test_second_derivatives_of_smooth_losses():
    x, t = _t(A[:2, :3], True), _t(P[:2, :3], True)
    assert gradgradcheck(lambda a, b: F.binary_cross_entropy_with_logits(a, b), [x, t])
    assert gradgradcheck(lambda a, b: F.gaussian_nll_loss(a, b, _t(P[:2, :3])), [x, t])
    assert gradgradcheck(lambda a: F.kl_div(a, t.detach(), reduction="batchmean"), [x])


def test_legacy_size_average_and_reduce_map_and_warn():
    a, b = _t(A), _t(B)
    cases = [((False, None), "sum"), ((None, False), "none"), ((True, True), "mean"),
             ((False, False), "none")]
    for (size_average, reduce), reduction in cases:
        with pytest.warns(UserWarning, match=f"size_average and reduce args will be deprecated, "
                                             f"please use reduction='{reduction}' instead."):
            got = F.mse_loss(a, b, size_average=size_average, reduce=reduce)
        np.testing.assert_allclose(np.asarray(got), _reduce((A - B) ** 2, reduction))


def test_kl_div_batchmean_and_mean_warning():
    x, t = _t(A), _t(P)
    np.testing.assert_allclose(np.asarray(F.kl_div(x, t, reduction="batchmean")),
                               _kl(A, P).sum() / 3)
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F.kl_div(x, t)
    np.testing.assert_allclose(np.asarray(F.kl_div(x[0, 0], t[0, 0], reduction="batchmean")),
                               _kl(A[0, 0], P[0, 0]))


def test_target_size_warning_and_broadcast():
    with pytest.warns(UserWarning, match=r"Using a target size \(ember.Size\(\[4\]\)\) that is "
                                         r"different to the input size"):
        got = F.l1_loss(_t(A), _t(B[0]))
    np.testing.assert_allclose(np.asarray(got), np.abs(A - B[0]).mean())


def test_gaussian_nll_clamps_var_but_passes_its_gradient():
    var = _t(np.full((3, 1), 1e-9), True)
    loss = F.gaussian_nll_loss(_t(A), _t(B), var, reduction="sum")
    np.testing.assert_allclose(loss.detach().numpy(), (0.5 * (np.log(1e-6) + (A - B) ** 2 / 1e-6))
                               .sum())
    loss.backward()
    want = (0.5 * (1 / 1e-6 - (A - B) ** 2 / 1e-12)).sum(1, keepdims=True)
    np.testing.assert_allclose(np.asarray(var.grad), want, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(F.gaussian_nll_loss(_t(A), _t(B), 0.5)),
                               np.mean(0.5 * (math.log(0.5) + (A - B) ** 2 / 0.5)))


def test_stable_for_large_logits():
    x = _t([[-200.0, 200.0]])
    assert np.isfinite(np.asarray(F.binary_cross_entropy_with_logits(x, _t([[1.0, 0.0]]))))
    assert np.isfinite(np.asarray(F.soft_margin_loss(x, _t([[1.0, -1.0]]))))


ERRORS = [
    (lambda: F.mse_loss(_t(A), _t(B), reduction="avg"), ValueError,
     "avg is not a valid value for reduction"),
    (lambda: F.mse_loss(ember.ones(2, dtype=ember.int32), ember.ones(2, dtype=ember.int32)),
     NotImplementedError, "\"mse_cpu\" not implemented for 'Int'"),
    (lambda: F.l1_loss(_t(A), _t(B), weight=_t(P[0])), ValueError,
     "Weights and input must have the same size."),
    (lambda: F.huber_loss(_t(A), _t(B), delta=0.0), RuntimeError,
     "huber_loss does not support non-positive values for delta."),
    (lambda: F.smooth_l1_loss(_t(A), _t(B), beta=-1.0), RuntimeError,
     "smooth_l1_loss does not support negative values for beta."),
    (lambda: F.binary_cross_entropy_with_logits(_t(A), _t(P[0])), ValueError,
     r"Target size \(ember.Size\(\[4\]\)\) must be the same as input size"),
    (lambda: F.gaussian_nll_loss(_t(A), _t(B), _t(P[:2, :1])), ValueError,
     "var is of incorrect size"),
    (lambda: F.gaussian_nll_loss(_t(A), _t(B), _t(-P)), ValueError,
     "var has negative entry/entries"),
    (lambda: F.gaussian_nll_loss(_t(A), _t(B), _t(P), reduction="avg"), ValueError,
     "avg is not valid"),
    (lambda: F.multi_margin_loss(_t(A), ember.tensor([0, 1, 2]), p=3), ValueError,
     "only p == 1 and p == 2 supported"),
    (lambda: F.multi_margin_loss(_t(A), ember.tensor([0, 1, 4])), RuntimeError,
     "target out of range"),
    (lambda: F.multi_margin_loss(_t(A), ember.tensor([0, 1])), RuntimeError,
     r"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
     r"samples \(batch size\). Expected target size \[3\], but got \[2\]"),
    (lambda: F.multi_margin_loss(_t(A), ember.tensor([0, 1, 2]), weight=_t(P[0, :3])),
     RuntimeError, r"inconsistent weight size, expected 4 but got \[3\]"),
    (lambda: F.multilabel_margin_loss(_t(A), ember.tensor([[0, 1, 5, -1]] * 3)), RuntimeError,
     "argument #2 'target' is out of range"),
    (lambda: F.multilabel_margin_loss(_t(A), ember.tensor([[0, 1, -1]] * 3)), RuntimeError,
     r"inconsistent target size: \[3, 3\] for input of size: \[3, 4\]"),
    (lambda: F.margin_ranking_loss(_t(A[:, 0]), _t(B[:, 0]), _t(P[:, :1])), RuntimeError,
     "margin_ranking_loss : All input tensors should have same dimension"),
    (lambda: F.cosine_embedding_loss(_t(A), _t(B), _t(P)), RuntimeError,
     "0D or 1D target tensor expected, multi-target not supported"),
    (lambda: F.cosine_embedding_loss(_t(A[None]), _t(B[None]), _t(Y)), RuntimeError,
     r"1D target tensor expects 2D input tensors, but found inputs with sizes \[1, 3, 4\]"),
    (lambda: F.triplet_margin_loss(_t(A), _t(B[0]), _t(P)), RuntimeError,
     "anchor 2D, positive 1D, and negative 2D inputs"),
    (lambda: F.triplet_margin_loss(_t(A), _t(B), _t(P), margin=0.0), ValueError,
     "margin must be greater than 0, got 0.0"),
    (lambda: F.triplet_margin_with_distance_loss(_t(A), _t(B), _t(P), reduction="x"),
     ValueError, "x is not a valid value for reduction"),
]


@pytest.mark.parametrize("call,error,match", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_top_level_variants_take_the_reduction_enum():
    a, p = _t(A), _t(P)
    np.testing.assert_allclose(np.asarray(ember.kl_div(a, p)), _kl(A, P))
    np.testing.assert_allclose(np.asarray(ember.kl_div(a, p, 2)), _kl(A, P).sum())
    np.testing.assert_allclose(np.asarray(ember.hinge_embedding_loss(a, _t(SIGN), 0.5, 1)),
                               np.where(SIGN == 1, A, np.maximum(0, 0.5 - A)).mean())
    np.testing.assert_allclose(np.asarray(ember.poisson_nll_loss(a, p, True, False, 1e-8, 0)),
                               np.exp(A) - P * A)
    assert ember.nn.functional.ctc_loss.__name__ == "ctc_loss"


def test_logit_losses_have_the_sigmoid_gradient_at_exactly_zero():
    # d/dx softplus(x) = sigmoid(x) = 0.5 at 0; a max(x, 0) split of softplus gave 0 or 1
    x = ember.zeros(2, requires_grad=True)
    ember.nn.functional.binary_cross_entropy_with_logits(
        x, ember.tensor([1., 0.]), reduction="sum").backward()
    assert x.grad.tolist() == [-0.5, 0.5]
    x = ember.zeros(2, requires_grad=True)
    ember.nn.functional.soft_margin_loss(x, ember.tensor([1., -1.]), reduction="sum").backward()
    assert x.grad.tolist() == [-0.5, 0.5]


def test_ctc_loss_truncates_float_targets_to_integers():
    # PyTorch casts non-integer targets to int64 (1.7 -> 1) instead of rejecting them
    lp = ember.tensor(RNG.standard_normal((6, 1, 5))).log_softmax(2)
    lengths = (ember.tensor([6]), ember.tensor([2]))
    floats = F.ctc_loss(lp, ember.tensor([[1.7, 2.2]]), *lengths)
    ints = F.ctc_loss(lp, ember.tensor([[1, 2]]), *lengths)
    assert floats.item() == ints.item() and math.isfinite(floats.item()) and floats.item() > 0


def test_soft_margin_loss_names_input_as_tensor_a():
    with pytest.raises(RuntimeError, match=r"size of tensor a \(2\) must match the size of "
                                           r"tensor b \(3\)"):
        F.soft_margin_loss(ember.ones(2), ember.ones(3))


def test_bce_with_logits_takes_the_targets_dtype():
    # PyTorch's kernel writes the loss into a tensor of the target's dtype; weights and
    # pos_weight do not change it
    x = ember.tensor([0.0, 0.0], dtype=ember.float16, requires_grad=True)
    t = ember.tensor([1.0, 0.0])
    w = ember.tensor([1.0, 2.0], dtype=ember.float64)
    loss = F.binary_cross_entropy_with_logits(x, t.bfloat16(), weight=w, pos_weight=w)
    assert loss.dtype is ember.bfloat16 and abs(loss.item() - 1.5 * math.log(2)) < 1e-2
    loss = F.binary_cross_entropy_with_logits(x.double(), t.half(), reduction="none")
    assert loss.dtype is ember.float16
    F.binary_cross_entropy_with_logits(x, t, reduction="sum").backward()
    assert x.grad.dtype is ember.float16 and x.grad.tolist() == [-0.5, 0.5]


@pytest.mark.parametrize("input, target, error, message", [
    (ember.zeros(2), ember.zeros(2, dtype=ember.int64), RuntimeError,
     "result type Float can't be cast to the desired output type Long"),
    (ember.zeros(2, dtype=ember.float16), ember.zeros(2, dtype=ember.uint8), RuntimeError,
     "result type Half can't be cast to the desired output type Byte"),
    (ember.zeros(2), ember.zeros(2, dtype=ember.bool), RuntimeError,
     "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
     "`logical_xor()` operator instead."),
    (ember.zeros(2, dtype=ember.int64), ember.zeros(2, dtype=ember.bool), NotImplementedError,
     "\"log_sigmoid_cpu\" not implemented for 'Long'"),
    (ember.zeros(2, dtype=ember.bool), ember.zeros(2), NotImplementedError,
     "\"log_sigmoid_cpu\" not implemented for 'Bool'"),
])
def test_bce_with_logits_refuses_integer_and_bool_targets(input, target, error, message):
    with pytest.raises(error) as info:
        F.binary_cross_entropy_with_logits(input, target)
    assert str(info.value) == message


def test_hinge_embedding_loss_keeps_the_inputs_dtype():
    y = ember.tensor([-1, -1, 1])
    loss = F.hinge_embedding_loss(ember.tensor([0.0, 1.0, 2.0], dtype=ember.float16), y)
    assert loss.dtype is ember.float16 and loss.item() == 1.0
    # an integer input takes the margin truncated to its dtype, and wraps as integers do
    x = ember.tensor([0, 2, 3], dtype=ember.uint8)
    loss = F.hinge_embedding_loss(x, y, margin=1.9, reduction="none")
    assert loss.dtype is ember.uint8 and loss.tolist() == [1, 255, 3]
    loss = F.hinge_embedding_loss(x.long(), y, margin=2.5, reduction="sum")
    assert loss.dtype is ember.int64 and loss.item() == 5
    with pytest.raises(RuntimeError, match="^mean\\(\\): could not infer output dtype"):
        F.hinge_embedding_loss(x, y)
    with pytest.raises(RuntimeError) as info:
        F.hinge_embedding_loss(x, y, margin=-0.5)
    assert str(info.value) == "value cannot be converted to type uint8_t without overflow"
    with pytest.raises(RuntimeError) as info:
        F.hinge_embedding_loss(x.bool(), y)
    assert str(info.value) == ("Subtraction, the `-` operator, with two bool tensors is not "
                               "supported. Use the `^` or `logical_xor()` operator instead.")
