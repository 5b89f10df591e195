"""Regression tests from the review of the round-37 module hooks fixes (values as PyTorch 2.13
gives them): nodes no gradient reaches, hooks under autograd.grad, conv's gradgrad."""

import warnings

import numpy as np
import pytest

import ember
from ember import nn


class _Block(ember.autograd.Function):
    """Passes its second input's gradient on; its first input gets none."""

    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        return None, g


def test_cat_hook_under_autograd_grad_sees_every_gradient_of_its_list():
    # a sequence input's gradients are computed together: the hook sees both, not None
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    w = ember.tensor([3.0, 4.0], requires_grad=True)
    y = ember.cat([x, w]) * 1
    seen = []
    y.grad_fn.next_functions[0][0].register_hook(
        lambda gi, go: seen.append([None if g is None else g.tolist() for g in gi]))
    g, = ember.autograd.grad(y.sum(), w)
    assert g.tolist() == [1.0, 1.0]
    assert seen == [[[1.0, 1.0], [1.0, 1.0]]]


def test_mul_hook_under_autograd_grad_sees_none_for_the_unneeded_input():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    w = ember.tensor([3.0, 4.0], requires_grad=True)
    y = x * w
    seen = []
    y.grad_fn.register_hook(
        lambda gi, go: seen.append([None if g is None else g.tolist() for g in gi]))
    ember.autograd.grad(y.sum(), w)
    assert seen == [[None, [1.0, 2.0]]]


def test_a_node_no_gradient_reaches_runs_its_hooks_and_is_freed():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    w = ember.tensor([3.0, 4.0], requires_grad=True)
    y = x.exp()
    log = []
    y.grad_fn.register_prehook(lambda go: log.append(("pre", go)))
    y.grad_fn.register_hook(lambda gi, go: log.append(("post", gi, go)))
    _Block.apply(y, w).sum().backward()
    assert log == [("pre", (None,)), ("post", (None,), (None,))]
    assert x.grad is None and w.grad.tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.grad_fn._saved_result


@pytest.mark.parametrize("materialize", [True, False])
def test_a_custom_function_no_gradient_reaches_is_still_called(materialize):
    calls = []

    class Ident(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.set_materialize_grads(materialize)
            return a * 1

        @staticmethod
        def backward(ctx, g):
            calls.append(None if g is None else g.tolist())
            return g

    x = ember.tensor([1.0, 2.0], requires_grad=True)
    u = ember.ones(2, requires_grad=True)
    _Block.apply(Ident.apply(x), u).sum().backward()
    assert calls == [[0.0, 0.0] if materialize else None]
    assert (x.grad.tolist() if materialize else x.grad) == ([0.0, 0.0] if materialize else None)


class _Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(ember.ones(2))

    def forward(self, x):
        return x * self.w, x * 2


@pytest.mark.parametrize("kind", ["full", "pre", "both"])
def test_module_hooks_run_when_no_gradient_reaches_the_module(kind):
    pair, seen = _Pair(), []
    if kind != "pre":
        pair.register_full_backward_hook(lambda m, gi, go: seen.append(
            ("full", [g.tolist() for g in gi], go)))
    if kind != "full":
        pair.register_full_backward_pre_hook(lambda m, go: seen.append(("pre", go)))
    x = ember.ones(2, requires_grad=True)
    u = ember.ones(2, requires_grad=True)
    a, b = pair(x)
    _Block.apply(a + b, u).sum().backward()
    expected = {"full": [("full", [[0.0, 0.0]], (None, None))],
                "pre": [("pre", (None, None))]}
    assert seen == expected.get(kind, expected["pre"] + expected["full"])
    assert x.grad.tolist() == [0.0, 0.0] and pair.w.grad is None
    assert u.grad.tolist() == [1.0, 1.0]


def test_conv_double_backward_still_computes_gradgrad():
    x = ember.randn(2, 3, 5, dtype=ember.float64, requires_grad=True)
    w = ember.randn(4, 3, 2, dtype=ember.float64, requires_grad=True)
    b = ember.randn(4, dtype=ember.float64, requires_grad=True)
    fn = lambda x, w, b: nn.functional.conv1d(x, w, b, stride=2, padding=1)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ember.autograd.gradgradcheck(fn, (x, w, b))


@pytest.mark.parametrize("call, message", [
    (lambda x: nn.functional.dropout(x, 0.0, np.bool_(True)),
     "dropout(): argument 'train' (position 3) must be bool, not numpy.bool"),
    (lambda x: ember.dropout(np.ones(2), 0.0, True),
     "dropout(): argument 'input' (position 1) must be Tensor, not numpy.ndarray"),
    (lambda x: nn.functional.relu_([1.0]),
     "relu_(): argument 'input' (position 1) must be Tensor, not list"),
    (lambda x: ember.relu_(np.ones(2)),
     "relu_(): argument 'input' (position 1) must be Tensor, not numpy.ndarray"),
    (lambda x: nn.functional.relu(3.0, inplace=True),
     "relu_(): argument 'input' (position 1) must be Tensor, not float"),
])
def test_dropout_and_relu_name_types_as_pytorch_does(call, message):
    with pytest.raises(TypeError) as info:
        call(ember.ones(2, 3))
    assert str(info.value).split("\n")[0] == message


def test_relu_inplace_still_writes_its_input():
    x = ember.tensor([-1.0, 2.0])
    assert nn.functional.relu(x, inplace=True) is x and x.tolist() == [0.0, 2.0]
