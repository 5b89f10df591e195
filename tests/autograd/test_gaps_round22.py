"""Round-22 gaps checkable without PyTorch: ``Tensor._backward_hooks``, the public
``utils.hooks`` helpers, views of inference tensors, scaled_dot_product_attention's CPU
kernel choice, searchsorted's warnings for promoted operands, samplers under vmap."""

import warnings
from collections import OrderedDict

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.nn.attention import SDPBackend, sdpa_kernel


def test_backward_hooks_is_none_until_a_hook_is_registered():
    x = ember.ones(2, requires_grad=True)
    assert x._backward_hooks is None
    handle = x.register_hook(lambda g: g * 3)
    assert isinstance(x._backward_hooks, OrderedDict) and list(x._backward_hooks) == [handle.id]
    x.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_an_assigned_backward_hooks_dict_runs_on_a_leaf_and_none_clears_it():
    x = ember.ones(2, requires_grad=True)
    hooks = OrderedDict(double=lambda g: g * 2)
    x._backward_hooks = hooks
    hooks["plus"] = lambda g: g + 1             # read at backward: (1 * 2) + 1
    x.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    x._backward_hooks = None
    x.grad = None
    x.sum().backward()
    assert x._backward_hooks is None and x.grad.tolist() == [1.0, 1.0]


def test_assigning_backward_hooks_of_a_non_leaf_changes_only_the_attribute():
    x = ember.ones(2, requires_grad=True)
    y = x * 3
    y.register_hook(lambda g: g * 10)
    y._backward_hooks = None
    assert y._backward_hooks is None
    y.sum().backward()
    assert x.grad.tolist() == [30.0, 30.0]     # the registered hook still ran


def test_legacy_pickle_state_restores_backward_hooks():
    t = ember.empty(0)
    hooks = OrderedDict(h=lambda g: g * 5)
    t.__setstate__((True, None, hooks))
    assert t.requires_grad and t._backward_hooks is hooks


def test_utils_hooks_exports_backward_hook_and_handle_ids():
    assert ember.utils.hooks.BackwardHook is ember.nn.modules._hooks.BackwardHook
    table = OrderedDict()
    handle = ember.utils.hooks.RemovableHandle(table)
    assert ember.utils.hooks.RemovableHandle.next_id == handle.id + 1


def test_backward_hook_used_by_hand_runs_the_module_hooks():
    lin = ember.nn.Linear(2, 1, bias=False)
    with ember.no_grad():
        lin.weight.copy_(ember.tensor([[2.0, -1.0]]))
    seen = []
    bw = ember.utils.hooks.BackwardHook(
        lin, [lambda m, gi, go: seen.append((gi[0].tolist(), go[0].tolist()))], [])
    x = ember.tensor([[1.0, 1.0]], requires_grad=True)
    out = bw.setup_output_hook(lin(bw.setup_input_hook((x,))[0]))
    (out * 3).sum().backward()
    assert seen == [([[6.0, -3.0]], [[3.0]])]


def test_views_of_inference_tensors_are_inference_tensors_not_views():
    with ember.inference_mode():
        a = ember.arange(6.0)
        s = a[1:3]
        s.add_(10)
    assert not s._is_view() and s._base is None and s.is_inference()
    assert a.tolist() == [0.0, 11.0, 12.0, 3.0, 4.0, 5.0]
    assert s.data_ptr() == a.data_ptr() + 4
    x = ember.arange(4.0)
    with ember.inference_mode():
        v = x[1:]
    assert v._is_view() and v._base is x and not v.is_inference()


def _qkv(*shape):
    rng = np.random.default_rng(0)
    return [ember.tensor(rng.standard_normal(shape)) for _ in range(3)]


def test_sdpa_mask_requiring_grad_with_is_causal_takes_the_math_kernels_error():
    q, k, v = _qkv(1, 2, 3, 4)
    mask = ember.zeros(3, 3, dtype=ember.float64)
    F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True)   # flash: fine
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask.requires_grad_(), is_causal=True)


def test_sdpa_flash_only_refuses_what_the_flash_kernel_cannot_take():
    q, k, v = _qkv(2, 3, 4)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="^No available kernel.  Aborting execution.$"):
            F.scaled_dot_product_attention(q, k, v)
    assert [str(x.message) for x in w] == [
        "Flash attention kernel not used because:",
        "All fused kernels requires query, key and value to be 4 dimensional, but got Query "
        "dim: 3, Key dim: 3, Value dim: 3 instead."]


def test_sdpa_double_backward_refused_through_flash_allowed_through_math():
    q, k, v = _qkv(1, 1, 3, 2)
    q.requires_grad_()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    g, = ember.autograd.grad(out.sum(), q, create_graph=True)
    assert g.grad_fn.name() == "torch::autograd::NotImplemented"
    with pytest.raises(RuntimeError, match="derivative for aten::_scaled_dot_product_flash_"
                                           "attention_for_cpu_backward is not implemented"):
        ember.autograd.grad(g.sum(), q)
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    g, = ember.autograd.grad(out.sum(), q, create_graph=True)   # (the backward outside)
    g2, = ember.autograd.grad(g.sum(), q)
    assert g.grad_fn.name() != "torch::autograd::NotImplemented" and g2.shape == q.shape


def test_searchsorted_warns_of_a_strided_sequence_it_promotes():
    seq = ember.arange(12, dtype=ember.int64).view(3, 4)[:, ::2]
    values = ember.tensor([[1.0, 5.0], [2.0, 3.0], [9.0, 10.0]])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        found = ember.searchsorted(seq, values)
    assert found.tolist() == [[1, 2], [0, 0], [1, 1]]
    assert any("boundary tensor is non-contiguous" in str(x.message) for x in w)


@pytest.mark.parametrize("make, message", [
    (lambda p: ember.distributions.Dirichlet(p.abs() + 1), "must override the setup_context"),
    (lambda p: ember.distributions.Beta(p.abs() + 1, 2.0), "must override the setup_context"),
    (lambda p: ember.distributions.VonMises(p, 1.0), "data-dependent control flow"),
    (lambda p: ember.distributions.Multinomial(3, probs=p.abs() + 0.1),
     r"vmap: scatter_add_\(self, \*extra_args\) is not possible"),
])
def test_samplers_pytorch_cannot_batch_refuse_vmap_different(make, message):
    with pytest.raises(RuntimeError, match=message):
        ember.vmap(lambda p: make(p).sample(), randomness="different")(ember.randn(2, 3))


def test_samplers_that_batch_still_run_under_vmap_different():
    out = ember.vmap(lambda p: ember.distributions.Gamma(p.abs() + 1, 1.0).sample(),
                     randomness="different")(ember.randn(2, 3))
    assert out.shape == (2, 3) and bool((out > 0).all())
