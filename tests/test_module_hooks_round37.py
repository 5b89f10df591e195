"""Regression tests for the module-hook and autograd-hook bugs the round-37 module hooks fuzzer
found (values as PyTorch 2.13 gives them)."""

import pytest

import ember
from ember import nn


class _Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(ember.ones(2))

    def forward(self, x):
        return x * 3, self.w * 2


@pytest.mark.parametrize("where", ["inner", "outer", "both"])
def test_full_backward_hook_output_no_gradient_reached_stays_none(where):
    # the output hook node hands None (not zeros) on: w gets no gradient, inner hooks see None
    pair, seen = _Pair(), []
    seq = nn.Sequential(pair)

    def hook(mod, gi, go):
        seen.append((type(mod).__name__, [None if g is None else g.tolist() for g in go]))
    if where != "outer":
        pair.register_full_backward_hook(hook)
    if where != "inner":
        seq.register_full_backward_hook(hook)
    x = ember.ones(2, requires_grad=True)
    seq(x)[0].sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    assert pair.w.grad is None
    assert all(go == [[1.0, 1.0], None] for _, go in seen)
    assert len(seen) == (2 if where == "both" else 1)


def test_backward_pre_hook_alone_wraps_the_inputs():
    class Two(nn.Module):
        def forward(self, a, b):
            seen.append((type(a.grad_fn).__name__, type(b.grad_fn).__name__))
            return a * 2, b * 3

    seen, log = [], []
    m = Two()
    m.register_full_backward_pre_hook(lambda mod, go: log.append(go))
    a = ember.tensor([1.0, 1.0], requires_grad=True)
    b = ember.tensor([1.0, 1.0], requires_grad=True)
    first, _ = m(a, b)
    first.sum().backward()
    assert seen == [("BackwardHookFunctionBackward", "BackwardHookFunctionBackward")]
    assert a.grad.tolist() == [2.0, 2.0] and b.grad.tolist() == [0.0, 0.0]
    assert log[0][0].tolist() == [1.0, 1.0] and log[0][1] is None


def test_inplace_forward_with_only_a_backward_pre_hook_fails():
    m = nn.ReLU(inplace=True)
    m.register_full_backward_pre_hook(lambda mod, go: None)
    x = ember.ones(2, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="Output 0 of BackwardHookFunction is a view"):
        m(x)


@pytest.mark.parametrize("call, message", [
    (lambda x: nn.functional.dropout((x,), 0.0),
     "dropout(): argument 'input' (position 1) must be Tensor, not tuple"),
    (lambda x: nn.functional.dropout(x, 0.0, None),
     "dropout(): argument 'train' (position 3) must be bool, not NoneType"),
    (lambda x: nn.functional.dropout(x, 0.5, 1),
     "dropout(): argument 'train' (position 3) must be bool, not int"),
    (lambda x: nn.functional.dropout([1.0], 0.0, True, True),
     "dropout_(): argument 'input' (position 1) must be Tensor, not list"),
    (lambda x: nn.functional.feature_alpha_dropout(x, 0.2, "a"),
     "feature_alpha_dropout(): argument 'train' (position 3) must be bool, not str"),
    (lambda x: ember.alpha_dropout((x,), 0.1, True),
     "alpha_dropout(): argument 'input' (position 1) must be Tensor, not tuple"),
    (lambda x: nn.Dropout(0.0)((x,)),
     "dropout(): argument 'input' (position 1) must be Tensor, not tuple"),
    (lambda x: nn.ReLU(inplace=True)((x,)),
     "relu_(): argument 'input' (position 1) must be Tensor, not tuple"),
])
def test_dropout_and_relu_check_their_argument_types(call, message):
    with pytest.raises(TypeError) as info:
        call(ember.ones(2, 3))
    assert str(info.value).split("\n")[0] == message


def test_dropout_with_p_zero_still_returns_its_input():
    x = ember.ones(2, 3)
    assert nn.functional.dropout(x, 0.0, True) is x


@pytest.mark.parametrize("module", [nn.BatchNorm1d(3), nn.BatchNorm2d(3), nn.SyncBatchNorm(3),
                                    nn.InstanceNorm1d(3)])
def test_norm_modules_read_dim_of_their_input(module):
    with pytest.raises(AttributeError, match="'tuple' object has no attribute 'dim'"):
        module((ember.ones(2, 3),))


def test_batch_norm_double_backward_of_zero_cotangents_reaches_the_input():
    x = ember.arange(18.).reshape(2, 3, 3).requires_grad_()
    w = ember.arange(18.).reshape(2, 3, 3).cos()
    out = nn.functional.batch_norm(x * 0, None, None, training=True) * w
    g, = ember.autograd.grad(out.sum(), x, create_graph=True)
    h, = ember.autograd.grad((g * g).sum(), x)
    assert h is not None and h.abs().sum().item() == 0.0


def test_node_hooks_see_none_for_gradients_autograd_grad_does_not_need():
    m = nn.Conv1d(3, 3, 1)
    x = ember.ones(2, 3, 3, requires_grad=True)
    y = m(x)
    seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append([g is None for g in gi]))
    ember.autograd.grad(y.sum(), x, retain_graph=True)
    y.sum().backward(retain_graph=True)
    y.sum().backward(inputs=[m.weight])
    assert seen == [[False, True, True], [False, False, False], [True, False, True]]


def test_a_node_no_gradient_reaches_runs_its_hooks_with_none():
    # eval batch norm's double backward gives its input no gradient: the node that made that
    # input still runs, and a regular module backward hook on it sees None
    lin, seen = nn.Linear(3, 3), []
    bn = nn.BatchNorm1d(3).eval()
    with pytest.warns(FutureWarning):
        lin.register_backward_hook(lambda mod, gi, go: seen.append(
            ([g is None for g in gi], [g is None for g in go])))
        x = ember.ones(2, 3, requires_grad=True)
        out = bn(lin(x) * 1)
    g, = ember.autograd.grad((out * ember.arange(6.).reshape(2, 3)).sum(), x,
                             create_graph=True)
    # (AddmmBackward0's bias and weight gradients are not needed for x: None)
    assert seen == [([True, False, True], [False])]
    (g * g).sum().backward()
    assert seen[1:] == [([True, True, True], [True])] and x.grad is None
