"""func.jvp refuses a custom Function without jvp (or setup_context), as PyTorch does:
ember's reverse-mode jvp would otherwise push tangents through its backward."""

import pytest

import ember


class _NoJvp(ember.autograd.Function):
    @staticmethod
    def forward(x):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g * 2


class _WithCtx(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_jvp_of_a_function_without_jvp_raises():
    with pytest.raises(NotImplementedError, match="You must implement the jvp function"):
        ember.func.jvp(_NoJvp.apply, (ember.ones(2),), (ember.ones(2),))


def test_jvp_of_a_function_without_setup_context_raises():
    with pytest.raises(RuntimeError, match="must override the setup_context staticmethod"):
        ember.func.jvp(_WithCtx.apply, (ember.ones(2),), (ember.ones(2),))


def test_jvp_through_a_function_applied_to_a_constant_runs():
    out, tangent = ember.func.jvp(lambda x: x + _NoJvp.apply(ember.ones(2)),
                                  (ember.ones(2),), (ember.ones(2),))
    assert out.tolist() == [3.0, 3.0] and tangent.tolist() == [1.0, 1.0]
    # and the Function still works outside the transform, through its backward
    x = ember.ones(2, requires_grad=True)
    _NoJvp.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


class _SinWithJvp(ember.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x.sin()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        return g * ctx.saved_tensors[0].cos()

    @staticmethod
    def jvp(ctx, t):
        return t * ctx.saved_tensors[0].cos()


def test_a_complete_function_runs_under_vmap_of_jvp_and_jvp_of_vmap():
    # vmap runs the Function through a generated one, which func.jvp must not refuse
    x = ember.tensor([[0.5, 1.0], [2.0, 3.0]])
    inner = ember.func.vmap(lambda y: ember.func.jvp(_SinWithJvp.apply, (y,),
                                                      (ember.ones_like(y),))[1])(x)
    outer = ember.func.jvp(ember.func.vmap(_SinWithJvp.apply), (x,), (ember.ones_like(x),))[1]
    assert ember.allclose(inner, x.cos()) and ember.allclose(outer, x.cos())
