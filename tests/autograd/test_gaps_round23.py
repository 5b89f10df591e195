"""Round-23 gaps checkable without PyTorch: ops that refuse forward-mode AD (the registry's
``refuse_forward_ad``), checks of calls that record nothing (``check_unrecorded``),
autograd Functions without a vmap rule, ``Tensor._backward_hooks`` of rebuilt tensors and
non-leaves, views of inference tensors, and the legacy constructors' argument errors."""

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import ember
import ember.autograd.forward_ad as fwAD
import ember.nn.functional as F
from ember.autograd._forward_traces import forward_ad_kernel
from ember.ops._registry import REGISTRY

_FLASH = ("Trying to use forward AD with _scaled_dot_product_flash_attention_for_cpu that does "
          "not support it because it has not been implemented yet.\nPlease file an issue to "
          "PyTorch at https://github.com/pytorch/pytorch/issues/new?template=feature-request.yml "
          "so that we can prioritize its implementation or submit a PR adding the "
          "implementation to derivatives.yaml")


def _qkv(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return [ember.tensor(rng.standard_normal(shape)) for _ in range(3)]


# ----- forward AD refusals --------------------------------------------------------------------

def test_registry_declares_the_kernels_without_forward_derivative():
    declared = {name: op.forward_ad_refusal for name, op in REGISTRY.items()
                if op.forward_ad_refusal is not None}
    assert {"ctc_loss": "_ctc_loss", "geqrf": "geqrf",
            "_weight_norm_interface": "_weight_norm_interface",
            "_multi_margin_loss": "multi_margin_loss",
            "_multilabel_margin_loss": "multilabel_margin_loss_forward"}.items() <= \
        declared.items()
    assert callable(declared["nn.functional.scaled_dot_product_attention"])
    assert callable(declared["cdist"])


def test_the_attention_refusal_follows_the_cpu_kernel_choice():
    op = REGISTRY["nn.functional.scaled_dot_product_attention"]
    q, k, v = _qkv(1, 2, 3, 4)
    assert forward_ad_kernel(op, [q, k, v, None], (0.0, False, None, False)) == \
        "_scaled_dot_product_flash_attention_for_cpu"
    assert forward_ad_kernel(op, [q[0], k[0], v[0], None], (0.0, False, None, False)) is None
    assert forward_ad_kernel(op, [q, k, v, None], (0.5, False, None, False)) is None  # dropout
    grad_mask = ember.zeros(3, 3, dtype=ember.float64, requires_grad=True)
    assert forward_ad_kernel(op, [q, k, v, grad_mask], (0.0, False, None, False)) is None


@pytest.mark.parametrize("transform", ["jvp", "jacfwd", "linearize", "hessian", "dual"])
def test_forward_ad_through_the_cpu_flash_kernel_refuses(transform):
    q, k, v = _qkv(1, 2, 3, 4)

    def f(x):
        return F.scaled_dot_product_attention(x, k, v)
    run = {"jvp": lambda: ember.func.jvp(f, (q,), (ember.ones_like(q),)),
           "jacfwd": lambda: ember.func.jacfwd(f)(q),
           "linearize": lambda: ember.func.linearize(f, q)[1](ember.ones_like(q)),
           "hessian": lambda: ember.func.hessian(lambda x: f(x).sum())(q)}
    with pytest.raises(NotImplementedError) as caught:
        if transform == "dual":
            with fwAD.dual_level():
                f(fwAD.make_dual(q, ember.ones_like(q)))
        else:
            run[transform]()
    assert str(caught.value) == _FLASH


def test_forward_ad_through_the_math_kernel_matches_reverse_mode():
    q, k, v = _qkv(2, 3, 4, seed=1)               # 3-D: PyTorch's math kernel, differentiable
    tangent = ember.tensor(np.random.default_rng(2).standard_normal((2, 3, 4)))

    def f(x):
        return F.scaled_dot_product_attention(x, k, v, is_causal=True)
    _, jvp = ember.func.jvp(f, (q,), (tangent,))
    jacobian = ember.func.jacrev(f)(q).reshape(24, 24)
    np.testing.assert_allclose(jvp.reshape(-1).numpy(),
                               (jacobian @ tangent.reshape(-1)).numpy(), rtol=1e-10)


def test_a_refusing_call_not_reached_from_the_transform_inputs_computes():
    q, k, v = _qkv(1, 2, 3, 4)
    q.requires_grad_()                            # depends on no input of the jvp
    x = ember.tensor([1.0, 2.0], dtype=ember.float64)
    total = F.scaled_dot_product_attention(q, k, v).sum()
    _, tangent = ember.func.jvp(lambda y: y * F.scaled_dot_product_attention(q, k, v).sum(),
                                (x,), (ember.ones_like(x),))
    np.testing.assert_allclose(tangent.detach().numpy(), [total.item()] * 2, rtol=1e-12)


def test_forward_ad_refusals_of_other_kernels():
    x = ember.tensor(np.random.default_rng(3).standard_normal((3, 4)))
    ones = ember.ones_like(x)
    for f, kernel in [(lambda a: ember.cdist(a, a[:2]), "_cdist_forward"),
                      (lambda a: ember.cdist(a, a, compute_mode="use_mm_for_euclid_dist"),
                       "_euclidean_dist"),
                      (lambda a: ember.geqrf(a)[0], "geqrf"),
                      (lambda a: F.multi_margin_loss(a, ember.tensor([0, 1, 3])),
                       "multi_margin_loss")]:
        with pytest.raises(NotImplementedError, match=f"^Trying to use forward AD with "
                                                      f"{kernel} that does not support it"):
            ember.func.jvp(f, (x,), (ones,))


def test_flash_double_backward_still_refused():
    q, k, v = _qkv(1, 1, 3, 2)
    q.requires_grad_()
    g, = ember.autograd.grad(F.scaled_dot_product_attention(q, k, v).sum(), q,
                             create_graph=True)
    with pytest.raises(RuntimeError, match="^derivative for aten::_scaled_dot_product_flash_"
                                           "attention_for_cpu_backward is not implemented$"):
        ember.autograd.grad(g.sum(), q)


# ----- a grad-requiring mask with is_causal, without a graph ----------------------------------

def test_a_grad_requiring_mask_refuses_is_causal_outside_grad_mode():
    q, k, v = _qkv(1, 2, 3, 4)
    mask = ember.zeros(3, 3, dtype=ember.float64, requires_grad=True)
    for mode in (ember.no_grad, ember.inference_mode):
        with mode(), pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True)
    with ember.no_grad():
        plain = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.detach(), is_causal=True)
        masked = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    causal = ember.full((3, 3), float("-inf"), dtype=ember.float64).triu(1)
    np.testing.assert_allclose(plain.numpy(), F.scaled_dot_product_attention(
        q, k, v, attn_mask=causal).numpy(), rtol=1e-12)
    np.testing.assert_allclose(masked.numpy(), F.scaled_dot_product_attention(
        q, k, v).numpy(), rtol=1e-12)
    assert REGISTRY["nn.functional.scaled_dot_product_attention"].unrecorded_check is not None


# ----- autograd.Function without a vmap rule --------------------------------------------------

class _Double(ember.autograd.Function):
    @staticmethod
    def forward(x):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g * 2

    @staticmethod
    def jvp(ctx, t):
        return t * 2


class _Native(_Double):
    """One of ember's own Functions (a native op in PyTorch): its vmap rule is generated."""


_Native.__module__ = "ember.ops.example"


@pytest.mark.parametrize("run", [
    lambda x: ember.vmap(_Double.apply)(x),
    lambda x: ember.vmap(lambda y: _Double.apply(x[0]) + y)(x),
    lambda x: ember.func.jacfwd(_Double.apply)(x),
    lambda x: ember.func.hessian(lambda y: _Double.apply(y).sum())(x),
    lambda x: ember.func.grad(lambda y: ember.vmap(_Double.apply)(y).sum())(x),
])
def test_a_function_without_vmap_rule_refuses(run):
    with pytest.raises(RuntimeError, match=r"^You tried to vmap over _Double, but it does not "
                                           r"have vmap support\. Please override and implement "
                                           r"the vmap staticmethod or set generate_vmap_rule="
                                           r"True\."):
        run(ember.ones(3, 2))


def test_functions_with_a_rule_and_embers_own_run_under_vmap():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert ember.func.jacrev(_Double.apply)(x).reshape(4, 4).tolist() == \
        (2 * np.eye(4)).tolist()
    assert ember.vmap(_Native.apply)(x).tolist() == [[2.0, 4.0], [6.0, 8.0]]
    assert ember.func.jacfwd(_Native.apply)(x).reshape(4, 4).tolist() == \
        (2 * np.eye(4)).tolist()


# ----- Tensor._backward_hooks -----------------------------------------------------------------

def test_rebuilt_tensors_hold_an_empty_hooks_dict_deep_copies_none():
    x = ember.ones(4, requires_grad=True)
    assert pickle.loads(pickle.dumps(x))._backward_hooks == OrderedDict()
    assert [t._backward_hooks for t in pickle.loads(pickle.dumps((x, x[1:3])))] == \
        [OrderedDict(), OrderedDict()]
    assert copy.copy(x)._backward_hooks == OrderedDict()
    assert copy.deepcopy(x)._backward_hooks is None
    assert copy.deepcopy(x.detach()[1:3])._backward_hooks is None
    p = pickle.loads(pickle.dumps(x))
    p.register_hook(lambda g: g * 4)
    p.sum().backward()
    assert p.grad.tolist() == [4.0] * 4


@pytest.mark.parametrize("steps, keys, grad", [
    (["dict", 2], ["k", 0], 3.0),           # an assigned dict and what is added to it: not run
    (["none", 2], [0], 6.0),                # None: register_hook starts a dict that runs
    ([5, "empty", 2], [1], 15.0),           # the hook bound before keeps running
    ([5, "none", 2], [1], 30.0),            # both bound dicts run
    ([5, "none", 2, 7], [1, 2], 210.0),
])
def test_non_leaf_backward_hooks_after_assignment(steps, keys, grad):
    a = ember.ones(2, requires_grad=True)
    b = a * 3
    ids = []
    for step in steps:
        if step == "none":
            b._backward_hooks = None
        elif step == "empty":
            b._backward_hooks = OrderedDict()
        elif step == "dict":
            b._backward_hooks = OrderedDict(k=lambda g: g * 10)
        else:
            ids.append(b.register_hook(lambda g, s=step: g * s).id)
    assert [k if k == "k" else ids.index(k) for k in b._backward_hooks] == keys
    b.sum().backward()
    assert a.grad.tolist() == [grad, grad]


# ----- views of inference tensors -------------------------------------------------------------

def test_views_of_a_grad_requiring_inference_tensor_record_nothing():
    with ember.inference_mode():
        x = ember.ones(2, 3, requires_grad=True)
        strided = ember.ones(3, 2).t().requires_grad_()
    for v in (x.view(3, 2), x[0], x.t(), x.reshape(6), x.unbind(0)[1], x.diagonal()):
        assert (v.requires_grad, v.is_leaf, v.grad_fn, v.is_inference()) == \
            (False, True, None, True)
    with pytest.raises(RuntimeError, match="Setting requires_grad=True on inference tensor"):
        x.view(6).requires_grad_()
    copied = strided.reshape(6)                   # a copy, not a view: recorded
    assert copied.grad_fn.name() == "UnsafeViewBackward0" and not copied.is_inference()
    assert (x * 2).grad_fn.name() == "MulBackward0"


def test_forward_transforms_inside_inference_mode_still_differentiate():
    """(their internal zero cotangents must be no inference tensors, whose views now record
    nothing)"""
    x = ember.tensor([1.0, 2.0, 3.0])
    with ember.inference_mode():
        hessian = ember.func.hessian(lambda t: (t ** 3).sum())(x)
        _, tangent = ember.func.jvp(lambda t: (t ** 2).reshape(3, 1), (x,), (ember.ones(3),))
    assert hessian.tolist() == np.diag([6.0, 12.0, 18.0]).tolist()
    assert tangent.tolist() == [[2.0], [4.0], [6.0]] and not hessian.is_inference()


# ----- legacy constructors --------------------------------------------------------------------

def _combination(got, marks, where):
    why = f"      didn't match because some of the arguments have invalid types: ({marks})\n"
    first, last = (why, "") if where == "first" else ("", why) if where == "last" else ("", "")
    return (f"new() received an invalid combination of arguments - got ({got}), but expected "
            f"one of:\n * (*, torch.device device = None)\n{first} * (torch.Storage storage)\n"
            f" * (Tensor other)\n * (tuple of ints size, *, torch.device device = None)\n{last}"
            f" * (object data, *, torch.device device = None)\n{last}")


@pytest.mark.parametrize("make, message", [
    (lambda: ember.Tensor(True, False), _combination("bool, bool", "!bool!, !bool!", "first")),
    (lambda: ember.FloatTensor(True, 2), _combination("bool, int", "!bool!, !int!", "first")),
    (lambda: ember.ones(1).new([1], 2), _combination("list, int", "!list of [int]!, !int!",
                                                     "first")),
    (lambda: ember.Tensor(True, (2, 3), 1),
     _combination("bool, tuple, int", "!bool!, !tuple of (int, int)!, !int!", "last")),
    (lambda: ember.Tensor(1.5, 2, 3, 4), _combination("float, int, int, int", "", "none")),
    (lambda: ember.Tensor(2, True, None),
     'new(): argument \'size\' failed to unpack the object at pos 3 with error "type must be '
     'tuple of ints,but got NoneType"'),
    (lambda: ember.Tensor(True), "new(): data must be a sequence (got bool)"),
])
def test_legacy_constructor_argument_errors(make, message):
    with pytest.raises(TypeError) as caught:
        make()
    assert str(caught.value) == message


def test_legacy_constructor_sizes_take_bools_after_the_first():
    assert ember.Tensor(2, True).shape == (2, 1) and ember.LongTensor(0, True, 2).shape == (0, 1, 2)
    x = ember.arange(3)
    alias = ember.Tensor(x)                       # any dtype: an alias
    assert alias.dtype is ember.int64 and alias._base is x and alias.tolist() == [0, 1, 2]
