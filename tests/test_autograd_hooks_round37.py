"""Regression tests for the autograd hook and custom Function bugs the round-37 fuzzer found
(tests/parity/test_parity_autograd_hooks_fuzz_round37.py); expected values are PyTorch's."""

import pytest

import ember


def _scale_function(seen):
    class Scale(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x, k=2.5, w=None):
            seen.append(ctx.needs_input_grad)
            return x * k

        @staticmethod
        def backward(ctx, g):
            return (g * 2.0,) + (None,) * (len(ctx.needs_input_grad) - 1)
    return Scale


def test_a_ctx_functions_keywords_become_inputs():
    seen = []
    Scale = _scale_function(seen)
    x = ember.ones(3, requires_grad=True)
    y = Scale.apply(x, k=2.0)
    assert seen == [(True, False)]
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    Scale.apply(x)
    assert seen[-1] == (True,)


@pytest.mark.parametrize("args, kwargs, message", [
    ((), {"w": None}, "forward() missing required argument: 'x' (position 0)"),
    ((1,), {"w": None}, "forward() missing required argument: 'k' (position 1)"),
    ((1, 2.0), {"k": 3}, "forward() got multiple values for argument 'k'"),
    ((1,), {"q": 3, "k": 2}, "forward() got an unexpected keyword argument 'q'"),
])
def test_a_ctx_functions_bad_keywords_are_refused(args, kwargs, message):
    Scale = _scale_function([])
    args = tuple(ember.ones(3, requires_grad=True) if a == 1 else a for a in args)
    with pytest.raises(TypeError) as info:
        Scale.apply(*args, **kwargs)
    assert str(info.value) == message


def test_a_gradient_for_a_keyword_number_is_refused():
    class Scale(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x, k=2.5):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g, g
    x = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="returned a gradient different than None at "
                                           "position 2, but the corresponding forward input"):
        Scale.apply(x, k=2.0).sum().backward()


class _SavesANumber(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x, 3)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g


def test_saving_a_non_tensor_is_refused_only_when_the_call_records():
    assert _SavesANumber.apply(ember.ones(2)).tolist() == [2.0, 2.0]
    x = ember.ones(2, requires_grad=True)
    with ember.no_grad():
        assert not _SavesANumber.apply(x).requires_grad
    with pytest.raises(TypeError, match="save_for_backward can only save variables, but "
                                        "argument 1 is of type int"):
        _SavesANumber.apply(x)


def _packed_sums(fn, *inputs):
    log = []

    def pack(t):
        log.append(("pack", float(t.sum())))
        return t

    def unpack(t):
        log.append(("unpack", float(t.sum())))
        return t
    with ember.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = fn(*inputs)
    y.sum().backward()
    return log


def test_saved_tensor_hooks_get_the_inputs_by_name_as_pytorch_saves_them():
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    b = ember.tensor([3.0, 4.0], requires_grad=True)
    c = ember.tensor([0.25, 0.5], requires_grad=True)
    # mul saves other, then self
    assert _packed_sums(ember.mul, a, b) == [("pack", 7.0), ("pack", 3.0),
                                             ("unpack", 7.0), ("unpack", 3.0)]
    assert a.grad.tolist() == [3.0, 4.0] and b.grad.tolist() == [1.0, 2.0]
    # lerp: end, self, weight; clamp: max, min, self
    assert [v for k, v in _packed_sums(ember.lerp, a, b, c) if k == "pack"] == [7.0, 3.0, 0.75]
    assert [v for k, v in _packed_sums(ember.clamp, a, c, b) if k == "pack"] == [7.0, 0.75, 3.0]
    # dot: self, then tensor (already in order)
    assert [v for k, v in _packed_sums(ember.dot, a, b) if k == "pack"] == [3.0, 7.0]


def _add_one(nondiff, second=False):
    class AddOne(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1.0)
            ctx.mark_dirty(x)
            if nondiff:
                ctx.mark_non_differentiable(x)
            return (x, x * 2.0) if second else x

        @staticmethod
        def backward(ctx, *gs):
            return gs[0]
    return AddOne


def test_a_dirty_non_differentiable_input_comes_back_detached():
    a = ember.ones(2, 3, requires_grad=True)
    out = _add_one(True).apply(a)
    assert out is not a and not out.requires_grad and out.grad_fn is None
    assert a.requires_grad and a.is_leaf and a._version == 2
    assert out.tolist() == [[2.0] * 3] * 2
    b = (ember.ones(2, 3, requires_grad=True) * 1.0)[0]
    out = _add_one(True, second=True).apply(b)[0]
    assert not out.requires_grad and type(b.grad_fn).__name__ == "AsStridedBackward0"


def test_a_dirty_view_among_several_outputs_is_refused():
    b = (ember.ones(2, 3, requires_grad=True) * 1.0)[0]
    with pytest.raises(RuntimeError, match="^If your Function modifies inplace an input that "
                                           "is a view of another Tensor, your Function cannot "
                                           "return more than one Tensor"):
        _add_one(False, second=True).apply(b)


def test_hooks_of_outputs_no_gradient_reached_see_none():
    a = ember.ones(3, 2, requires_grad=True)
    outs = a.unbind(0)
    seen = []
    for k in range(3):
        outs[k].register_hook(lambda g, k=k: seen.append((k, None if g is None else g.tolist())))
    (g,) = ember.autograd.grad(outs[0].sum(), a)
    assert seen == [(0, [1.0, 1.0]), (1, None), (2, None)]
    assert g.tolist() == [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]
    p, q = ember.ones(2, requires_grad=True).split(1)
    q.register_hook(lambda g: ember.ones(1))
    with pytest.raises(RuntimeError, match="can't replace a None gradient with a non-None"):
        p.sum().backward()


def test_a_leafs_hooks_run_when_no_gradient_reaches_it():
    class First(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g, None
    x = ember.ones(2, requires_grad=True)
    y = ember.ones(2, requires_grad=True)
    seen = []
    y.register_hook(lambda g: seen.append(("hook", g)))
    y.register_post_accumulate_grad_hook(lambda p: seen.append(("post", p.grad)))
    out = First.apply(x, y)
    out.grad_fn.next_functions[1][0].register_hook(lambda gi, go: seen.append(("node", go)))
    out.sum().backward(retain_graph=True)
    assert seen == [("hook", None), ("post", None), ("node", (None,))]
    assert y.grad is None and x.grad.tolist() == [1.0, 1.0]
    seen.clear()
    assert ember.autograd.grad(out.sum(), [x, y], allow_unused=True)[1] is None
    assert seen == [("hook", None)]


def test_a_node_hook_sees_the_gradient_returned_for_an_input_needing_none():
    class Mix(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g * 2.0, ember.ones(4, dtype=ember.int64)    # (unchecked: y needs none)
    a = ember.ones(3, requires_grad=True)
    out = Mix.apply(a, ember.ones(3))
    seen = []
    out.grad_fn.register_hook(lambda gi, go: seen.append(
        [(t.tolist(), t.dtype) for t in gi]))
    out.sum().backward()
    assert seen == [[([2.0, 2.0, 2.0], ember.float32), ([1, 1, 1, 1], ember.int64)]]
    assert a.grad.tolist() == [2.0, 2.0, 2.0]


def test_a_jvp_returning_a_non_tensor_is_refused_before_its_count():
    class Two(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0, x.exp()

        @staticmethod
        def jvp(ctx, t):
            return 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1
    fw = ember.autograd.forward_ad
    with fw.dual_level():
        x = fw.make_dual(ember.ones(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64))
        with pytest.raises(RuntimeError) as info:
            Two.apply(x)
    assert str(info.value) == "expected Variable or None (got int) for grad output 0."
