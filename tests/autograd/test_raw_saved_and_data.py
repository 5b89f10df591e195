"""Per-tensor saved hooks (``grad_fn._raw_saved_<name>.register_hooks``), named saved
outputs (``_saved_indices``), ``.data``'s own version counter and the grad-mode context
managers' argument checks and ``__enter__`` results, as PyTorch behaves."""

import numpy as np
import pytest

import ember


def _hooks(log, tag):
    def pack(t):
        log.append(("pack", tag, t.requires_grad))
        return t.clone()

    def unpack(t):
        log.append(("unpack", tag))
        return t
    return pack, unpack


def test_raw_saved_hooks_pack_at_once_and_unpack_for_backward():
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = ember.tensor([4.0, 5.0, 6.0], requires_grad=True)
    z = x * y
    log = []
    z.grad_fn._raw_saved_self.register_hooks(*_hooks(log, "s"))
    z.grad_fn._raw_saved_other.register_hooks(*_hooks(log, "o"))
    assert log == [("pack", "s", False), ("pack", "o", False)]    # the data, no history
    z.sum().backward()
    assert sorted(log[2:]) == [("unpack", "o"), ("unpack", "s")]
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 5.0, 6.0])
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 2.0, 3.0])


def test_raw_saved_result_hooks_and_what_the_unpack_hook_returns_is_used():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    e = x.exp()
    log = []
    e.grad_fn._raw_saved_result.register_hooks(*_hooks(log, "r"))
    assert log == [("pack", "r", False)]
    saved = e.grad_fn._saved_result
    assert saved.grad_fn is e.grad_fn and log[-1] == ("unpack", "r")
    p = x.pow(2)
    p.grad_fn._raw_saved_self.register_hooks(lambda t: t * 10, lambda t: t)
    p.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [20.0, 40.0])


def test_raw_saved_hooks_keep_double_backward_working():
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    p = x.pow(3)
    p.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: t)
    (g,) = ember.autograd.grad(p.sum(), x, create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), [3.0, 12.0, 27.0])
    g.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 12.0, 18.0])


def test_raw_saved_hooks_errors():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = ember.tensor([3.0, 4.0], requires_grad=True)
    z = x * y
    raw = z.grad_fn._raw_saved_self
    assert type(raw).__name__ == "SavedTensor"
    raw.register_hooks(lambda t: t, lambda t: t)
    with pytest.raises(RuntimeError, match="whose hooks have already been set. Hint: only one"):
        raw.register_hooks(lambda t: t, lambda t: t)
    with pytest.raises(TypeError, match="register_hooks\\(\\): incompatible function arguments"):
        z.grad_fn._raw_saved_other.register_hooks(1, 2)
    m = x * 2                           # x is not saved: no gradient reads it
    with pytest.raises(RuntimeError, match="saved tensor with value None is forbidden"):
        m.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: t)
    with pytest.raises(AttributeError, match="'SumBackward1' object has no attribute "
                                             "'_raw_saved_dim'"):
        x.sum(0).grad_fn._raw_saved_dim
    with ember.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        q = x.exp()
    with pytest.raises(RuntimeError, match="hooks have already been set"):
        q.grad_fn._raw_saved_result.register_hooks(lambda t: t, lambda t: t)
    w = x * y
    w.grad_fn._raw_saved_self.register_hooks(lambda t: 5, lambda t: t)
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor but got result "
                                        "of type int"):
        w.grad_fn._saved_self
    f = x * y
    f.sum().backward()
    assert type(f.grad_fn._raw_saved_other).__name__ == "SavedTensor"
    with pytest.raises(RuntimeError, match="Calling register_hooks on a saved tensor after it "
                                           "has been freed"):
        f.grad_fn._raw_saved_other.register_hooks(lambda t: t, lambda t: t)


def test_unhooked_saved_tensors_of_a_hooked_node_are_still_version_checked():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = ember.tensor([3.0, 4.0], requires_grad=True)
    a, b = x * 1, y * 1
    m = a * b
    m.grad_fn._raw_saved_self.register_hooks(lambda t: t.clone(), lambda t: t)
    b.add_(1)
    with pytest.raises(RuntimeError, match="which is output 0 of Add, is at version 1; "
                                           "expected version 0 instead"):
        m.sum().backward()


def test_named_saved_outputs():
    w = ember.tensor([[1.0, 5.0, 3.0], [7.0, 2.0, 0.5]], requires_grad=True)
    node = w.max(1).values.grad_fn
    indices = node._saved_indices
    assert indices.tolist() == [1, 0] and indices.grad_fn is None
    assert not indices.requires_grad
    assert type(node._raw_saved_indices).__name__ == "SavedTensor"
    assert w.sort(1).values.grad_fn._saved_indices.tolist() == [[0, 2, 1], [2, 1, 0]]


def test_data_has_its_own_version_counter():
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    e = x.exp()
    e.data.zero_()                      # unseen by autograd, unlike through detach()
    assert e._version == 0
    e.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0])
    d = e.detach()
    d.add_(1)
    assert e._version == 1
    assert not e.data.requires_grad and e.data.is_leaf


def test_data_setter_refuses_integer_data_for_a_tensor_requiring_grad():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="data set to a tensor that requires gradients must "
                                           "be floating point or complex dtype"):
        x.data = ember.tensor([1, 2])
    x.data = ember.tensor([5.0, 6.0, 7.0])
    assert x.shape == (3,) and x.requires_grad


def test_set_grad_enabled_takes_a_bool_only():
    for bad, kind in [(1, "int"), (None, "NoneType"), ("yes", "str")]:
        with pytest.raises(TypeError, match=f"set_grad_enabled\\(\\): argument 'enabled' "
                                            f"\\(position 1\\) must be bool, not {kind}"):
            ember.set_grad_enabled(bad)
    assert ember.is_grad_enabled()


def test_grad_mode_context_managers_enter_to_none():
    with ember.no_grad() as a, ember.enable_grad() as b:
        pass
    with ember.set_grad_enabled(False) as c, ember.inference_mode() as d:
        assert not ember.is_grad_enabled() and ember.is_inference_mode_enabled()
    assert (a, b, c, d) == (None, None, None, None)
    assert ember.is_grad_enabled() and not ember.is_inference_mode_enabled()


def test_index_select_saves_only_its_index():
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    h = a * 1
    packed = []
    with ember.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t.dtype) or t,
                                                  lambda t: t):
        y = h.index_select(0, ember.tensor([1, 1, 0]))
    assert packed == [ember.int64]
    h.add_(1)                           # not saved: backward may still run, as in PyTorch
    (y * ember.tensor([[1.0, 2.0]])).sum().backward()
    assert a.grad.tolist() == [[1.0, 2.0], [2.0, 4.0]]


def test_detach_in_place_of_a_view_is_refused_with_pytorchs_message():
    x = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="^Can't detach views in-place. Use detach\\(\\) "
                                           "instead. If you are using DistributedDataParallel"):
        x[0:1].detach_()
