"""nn.Module: registration, traversal, state_dict, conversion in place, hooks, repr, pickling,
and the error context that names the failing module."""

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import ember
import ember.nn as nn


class Affine(nn.Module):
    """A small Linear-like layer written here so these tests need no other helper's layers."""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(ember.randn(out_features, in_features))
        self.bias = nn.Parameter(ember.randn(out_features)) if bias else None
        self.register_buffer("calls", ember.zeros((), dtype=ember.int64))
        self.register_buffer("scratch", ember.zeros(2), persistent=False)

    def forward(self, x):
        out = x @ self.weight.t()
        return out if self.bias is None else out + self.bias

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = Affine(4, 3)
        self.linear2 = Affine(3, 2)

    def forward(self, x):
        return self.linear2(self.linear1(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Block()
        self.head = Affine(2, 1, bias=False)

    def forward(self, x):
        return self.head(self.encoder(x))


# ----- registration and traversal -------------------------------------------------------

def test_named_members_and_prefixes():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "encoder.linear1.weight", "encoder.linear1.bias", "encoder.linear2.weight",
        "encoder.linear2.bias", "head.weight"]
    assert [n for n, _ in net.named_buffers()] == [
        "encoder.linear1.calls", "encoder.linear1.scratch", "encoder.linear2.calls",
        "encoder.linear2.scratch", "head.calls", "head.scratch"]
    assert [n for n, _ in net.named_parameters(prefix="m", recurse=False)] == []
    assert [n for n, _ in net.head.named_parameters(prefix="h")] == ["h.weight"]
    assert [n for n, _ in net.named_modules()] == ["", "encoder", "encoder.linear1",
                                                    "encoder.linear2", "head"]
    assert [n for n, _ in net.named_children()] == ["encoder", "head"]
    assert len(list(net.parameters())) == 5


def test_remove_duplicate_for_shared_modules_and_parameters():
    net = Net()
    net.tied = net.head
    net.encoder.linear2.extra = net.encoder.linear2.weight
    assert [n for n, _ in net.named_modules()] == ["", "encoder", "encoder.linear1",
                                                    "encoder.linear2", "head"]
    assert len(list(net.named_modules(remove_duplicate=False))) == 6
    names = [n for n, _ in net.named_parameters(remove_duplicate=False)]
    assert "tied.weight" in names and "encoder.linear2.extra" in names
    assert len(list(net.parameters())) == 5


def test_setattr_and_delattr_move_between_tables():
    m = Affine(2, 2)
    m.weight = None
    assert m._parameters["weight"] is None and m.weight is None
    with pytest.raises(TypeError, match=r"cannot assign 'ember.FloatTensor' as parameter "
                                        r"'bias' \(torch.nn.Parameter or None expected\)"):
        m.bias = ember.zeros(2)
    m.calls = ember.ones(3)             # assigning a tensor to a buffer name keeps it a buffer
    assert "calls" in m._buffers
    m.scratch = ember.ones(1)
    assert "scratch" in m._non_persistent_buffers_set
    m.child = Affine(1, 1)
    assert "child" in m._modules
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'child'"):
        m.child = 3
    del m.child
    assert "child" not in m._modules
    m.buf = nn.Buffer(ember.ones(2), persistent=False)
    assert "buf" in m._buffers and "buf" in m._non_persistent_buffers_set


def test_registration_errors():
    m = nn.Module()
    with pytest.raises(KeyError, match=r"buffer name can.+t contain"):
        m.register_buffer("a.b", None)
    with pytest.raises(KeyError, match="attribute 'training' already exists"):
        m.register_parameter("training", None)
    with pytest.raises(TypeError, match=r"cannot assign 'ember.FloatTensor' object to parameter "
                                        r"'x' \(torch.nn.Parameter or None required\)"):
        m.register_parameter("x", ember.zeros(1))
    with pytest.raises(TypeError, match="int is not a Module subclass"):
        m.add_module("x", 3)
    with pytest.raises(ValueError, match="Cannot assign non-leaf Tensor to parameter 'p'"):
        m.register_parameter("p", _non_leaf_parameter())

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ember.ones(1))
    with pytest.raises(AttributeError, match=r"cannot assign parameters before "
                                             r"Module.__init__\(\) call"):
        Early()


def _non_leaf_parameter():
    p = nn.Parameter(ember.ones(2))
    fake = nn.Parameter(ember.ones(2))
    fake._grad_fn = (p * 2)._grad_fn
    return fake


def test_get_submodule_parameter_buffer():
    net = Net()
    assert net.get_submodule("encoder.linear2") is net.encoder.linear2
    assert net.get_parameter("encoder.linear1.bias") is net.encoder.linear1.bias
    assert net.get_buffer("head.calls") is net.head.calls
    with pytest.raises(AttributeError, match="Affine has no attribute `x`"):
        net.get_submodule("head.x")
    with pytest.raises(AttributeError, match="`weight` is not an nn.Module"):
        net.get_submodule("head.weight")
    with pytest.raises(AttributeError, match="`head` is not an nn.Parameter"):
        net.get_parameter("head")
    with pytest.raises(AttributeError, match="`weight` is not a buffer"):
        net.get_buffer("head.weight")
    new = Affine(2, 1)
    net.set_submodule("head", new)
    assert net.head is new
    with pytest.raises(AttributeError, match="Affine has no attribute `other`"):
        net.set_submodule("head.other", Affine(1, 1), strict=True)


def test_dir_lists_registered_names():
    m = Affine(2, 2)
    names = dir(m)
    for n in ("weight", "bias", "calls", "forward", "in_features"):
        assert n in names
    assert names == sorted(names)


# ----- state dict --------------------------------------------------------------------------

def test_state_dict_contents_order_and_metadata():
    net = Net()
    sd = net.state_dict()
    assert isinstance(sd, OrderedDict)
    assert list(sd) == ["encoder.linear1.weight", "encoder.linear1.bias",
                        "encoder.linear1.calls", "encoder.linear2.weight",
                        "encoder.linear2.bias", "encoder.linear2.calls", "head.weight",
                        "head.calls"]
    assert type(sd["head.weight"]) is ember.Tensor and not sd["head.weight"].requires_grad
    assert sd["head.weight"].data_ptr() == net.head.weight.data_ptr()      # no copy
    assert sd._metadata == OrderedDict([("", {"version": 1}), ("encoder", {"version": 1}),
                                        ("encoder.linear1", {"version": 1}),
                                        ("encoder.linear2", {"version": 1}),
                                        ("head", {"version": 1})])
    kept = net.state_dict(keep_vars=True, prefix="model.")
    assert kept["model.head.weight"] is net.head.weight


def test_state_dict_round_trip():
    a, b = Net(), Net()
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    x = ember.randn(5, 4)
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())


def test_load_state_dict_errors_match_pytorch():
    m = Affine(4, 2)
    sd = {"weight": ember.zeros(3, 4), "bias": ember.zeros(3), "x": ember.zeros(1),
          "calls": ember.zeros((), dtype=ember.int64)}
    with pytest.raises(RuntimeError) as info:
        m.load_state_dict(sd)
    assert str(info.value) == (
        "Error(s) in loading state_dict for Affine:\n"
        "\tUnexpected key(s) in state_dict: \"x\". \n"
        "\tsize mismatch for weight: copying a param with shape ember.Size([3, 4]) from "
        "checkpoint, the shape in current model is ember.Size([2, 4]).\n"
        "\tsize mismatch for bias: copying a param with shape ember.Size([3]) from "
        "checkpoint, the shape in current model is ember.Size([2]).")
    with pytest.raises(RuntimeError) as info:
        m.load_state_dict({"weight": ember.zeros(2, 4)})
    assert str(info.value) == ("Error(s) in loading state_dict for Affine:\n"
                               "\tMissing key(s) in state_dict: \"bias\", \"calls\". ")
    result = m.load_state_dict({"weight": ember.ones(2, 4), "z": ember.zeros(1)}, strict=False)
    assert repr(result) == "_IncompatibleKeys(missing_keys=['bias', 'calls'], " \
                           "unexpected_keys=['z'])"
    assert result.missing_keys == ["bias", "calls"]
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.ones((2, 4), np.float32))
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        m.load_state_dict([1, 2])


def test_load_copies_in_place_unless_assign():
    m = Affine(2, 2)
    w = m.weight
    new = ember.full((2, 2), 3.0, dtype=ember.float64)
    m.load_state_dict({"weight": new, "bias": ember.zeros(2), "calls": ember.tensor(4)})
    assert m.weight is w and w.dtype == ember.float32
    assert float(w.sum()) == 12.0 and int(m.calls) == 4
    m.load_state_dict({"weight": new, "bias": ember.zeros(2), "calls": ember.tensor(4)},
                      assign=True)
    assert m.weight is not w and isinstance(m.weight, nn.Parameter)
    assert m.weight.dtype == ember.float64 and m.weight.requires_grad


def test_overridable_save_load_and_extra_state():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.count = 0

        def get_extra_state(self):
            return {"count": self.count}

        def set_extra_state(self, state):
            self.count = state["count"]

    a = nn.Module()
    a.c = Counter()
    a.c.count = 7
    sd = a.state_dict()
    assert sd["c._extra_state"] == {"count": 7}
    b = nn.Module()
    b.c = Counter()
    b.load_state_dict(sd)
    assert b.c.count == 7

    class Renamed(Affine):
        def _load_from_state_dict(self, state_dict, prefix, *args):
            if prefix + "w" in state_dict:
                state_dict[prefix + "weight"] = state_dict.pop(prefix + "w")
            super()._load_from_state_dict(state_dict, prefix, *args)

    r = Renamed(2, 2)
    r.load_state_dict({"w": ember.ones(2, 2), "bias": ember.ones(2), "calls": ember.tensor(0)})
    assert float(r.weight.sum()) == 4.0


def test_state_dict_hooks():
    m = Affine(2, 2)
    calls = []
    m.register_state_dict_pre_hook(lambda mod, prefix, keep: calls.append(("pre", prefix)))

    def post(mod, sd, prefix, meta):
        sd[prefix + "extra"] = ember.ones(1)
    h = m.register_state_dict_post_hook(post)
    sd = m.state_dict(prefix="p.")
    assert calls == [("pre", "p.")] and "p.extra" in sd
    h.remove()
    assert "extra" not in m.state_dict()

    def load_post(mod, keys):
        keys.unexpected_keys.clear()
    m.register_load_state_dict_post_hook(load_post)
    full = m.state_dict()
    full["junk"] = ember.zeros(1)
    assert m.load_state_dict(full).unexpected_keys == []
    seen = []
    m.register_load_state_dict_pre_hook(lambda mod, sd, prefix, *rest: seen.append(mod))
    m.load_state_dict(m.state_dict())
    assert seen == [m]


def test_state_dict_post_hook_must_return_none_but_private_hook_may_replace():
    m = Affine(2, 2)
    h = m.register_state_dict_post_hook(lambda mod, sd, prefix, meta: {})
    with pytest.raises(RuntimeError, match="^state_dict post-hook must return None$"):
        m.state_dict()
    h.remove()
    m._register_state_dict_hook(lambda mod, sd, prefix, meta: {"only": ember.ones(1)})
    assert list(m.state_dict()) == ["only"]
    dest = {}
    with pytest.warns(FutureWarning, match="Positional args are being deprecated"):
        Affine(2, 2).state_dict(dest, "p.")
    assert sorted(dest) == ["p.bias", "p.calls", "p.weight"]


def test_load_state_dict_post_hook_returning_a_value_is_an_assertion_error():
    m = Affine(2, 2)
    m.register_load_state_dict_post_hook(lambda mod, keys: keys)
    with pytest.raises(AssertionError, match="^Hooks registered with "
                                             "``register_load_state_dict_post_hook`` are not "
                                             "expected to return new values"):
        m.load_state_dict(m.state_dict())


# ----- modes, grads, conversion ----------------------------------------------------------

def test_train_eval_recurse_through_overrides():
    class Sticky(nn.Module):
        def train(self, mode=True):
            return super().train(False)

    net = Net()
    net.sticky = Sticky()
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert net.encoder.linear1.training and not net.sticky.training
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        net.train(1)


def test_requires_grad_and_zero_grad():
    net = Net()
    net(ember.randn(3, 4)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(float(p.grad.abs().sum()) == 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    assert net.requires_grad_(False) is net
    assert not any(p.requires_grad for p in net.parameters())


def test_conversion_keeps_parameter_objects():
    net = Net()
    params = list(net.parameters())
    net(ember.randn(3, 4)).sum().backward()
    before = [p.detach().numpy().copy() for p in params]
    assert net.double() is net
    after = list(net.parameters())
    assert all(a is b for a, b in zip(params, after))
    assert all(p.dtype == ember.float64 and p.grad.dtype == ember.float64 for p in after)
    assert net.head.calls.dtype == ember.int64          # integers untouched
    for b, p in zip(before, after):
        np.testing.assert_allclose(p.detach().numpy(), b, rtol=1e-7)
    net.half()
    assert net.head.weight.dtype == ember.float16 and net.head.calls.dtype == ember.int64
    net.bfloat16()
    assert net.head.weight.dtype == ember.bfloat16
    net.float()
    assert net.head.weight.dtype == ember.float32
    net.to(ember.float64)
    assert net.head.weight.dtype == ember.float64 and net.head.calls.dtype == ember.int64
    net.to("cpu", dtype=ember.float32)
    assert net.head.weight.dtype == ember.float32
    net.to(ember.zeros(1, dtype=ember.float64))
    assert net.head.weight.dtype == ember.float64
    assert all(a is b for a, b in zip(params, net.parameters()))
    net.cpu()
    net.type(ember.float32)
    assert net.head.calls.dtype == ember.float32        # type() casts everything
    with pytest.raises(TypeError, match="nn.Module.to only accepts floating point or complex "
                                        "dtypes, but got desired dtype=ember.int64"):
        net.to(ember.int64)


def test_apply_order_and_init():
    net = Net()
    order = []
    net.apply(lambda m: order.append(type(m).__name__))
    assert order == ["Affine", "Affine", "Block", "Affine", "Net"]

    def init(m):
        if isinstance(m, Affine):
            nn.init.ones_(m.weight)
    net.apply(init)
    assert float(net.head.weight.sum()) == 2.0


# ----- hooks -------------------------------------------------------------------------------

def test_forward_hooks_order_and_results():
    m = Affine(2, 2, bias=False)
    with ember.no_grad():
        m.weight.copy_(ember.eye(2))
    log = []
    m.register_forward_pre_hook(lambda mod, args: log.append("pre1"))
    m.register_forward_pre_hook(lambda mod, args: log.append("pre0"), prepend=True)
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    m.register_forward_hook(lambda mod, args, out: log.append("post1"))
    h = m.register_forward_hook(lambda mod, args, out: out + 1)
    m.register_forward_hook(lambda mod, args, kwargs, out: log.append(("kw", kwargs)),
                            with_kwargs=True)
    out = m(ember.ones(1, 2))
    assert log == ["pre0", "pre1", "post1", ("kw", {})]
    np.testing.assert_array_equal(out.detach().numpy(), [[3.0, 3.0]])
    h.remove()
    np.testing.assert_array_equal(m(ember.ones(1, 2)).detach().numpy(), [[2.0, 2.0]])


def test_forward_pre_hook_with_kwargs_rewrites_both():
    class Scale(nn.Module):
        def forward(self, x, *, factor=1.0):
            return x * factor

    m = Scale()
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"factor": 5.0}),
                                with_kwargs=True)
    assert float(m(ember.ones(1))) == 5.0
    m2 = Scale()
    m2.register_forward_pre_hook(lambda mod, args, kwargs: 3, with_kwargs=True)
    with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple of "
                                           r"\(new_args, new_kwargs\), but got 3."):
        m2(ember.ones(1))


def test_always_call_hook_runs_when_forward_raises():
    class Bad(nn.Module):
        def forward(self, x):
            raise KeyError("boom")

    m = Bad()
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    with pytest.raises(KeyError):
        m(ember.ones(1))
    assert seen == [None]


def test_always_call_hooks_after_a_failing_hook_get_the_output_and_name_their_kind():
    m = Affine(1, 1, bias=False)
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append("first"), always_call=True)
    m.register_forward_hook(lambda mod, args, out: {}["no such key"])
    m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    with pytest.raises(KeyError):
        m(ember.ones(1))
    assert seen[0] == "first" and isinstance(seen[1], ember.Tensor)   # as PyTorch: not None

    class Bad(nn.Module):
        def forward(self, x):
            raise KeyError("boom")

    def failing(mod, args, out):
        raise ValueError("hook failed")
    b = Bad()
    b.register_forward_hook(failing, always_call=True)
    with pytest.warns(UserWarning, match="^module forward hook with ``always_call=True`` raised "
                                         "an exception that was silenced as another error was "
                                         "raised in forward: hook failed$"):
        with pytest.raises(KeyError):
            b(ember.ones(1))
    from ember.nn.modules import module as mm
    with mm.register_module_forward_hook(failing, always_call=True):
        with pytest.warns(UserWarning, match="^global module forward hook with"):
            with pytest.raises(KeyError):
                Bad()(ember.ones(1))


def test_full_backward_hooks():
    m = Affine(3, 2)
    log = []
    m.register_full_backward_pre_hook(
        lambda mod, go: log.append(("pre", [tuple(g.shape) for g in go])))
    m.register_full_backward_hook(lambda mod, gi, go: log.append(
        ("full", [None if g is None else tuple(g.shape) for g in gi],
         [tuple(g.shape) for g in go])))
    x = ember.randn(4, 3, requires_grad=True)
    m(x).sum().backward()
    assert log == [("pre", [(4, 2)]), ("full", [(4, 3)], [(4, 2)])]
    log.clear()
    with pytest.warns(UserWarning, match="Full backward hook is firing when gradients are "
                                         "computed with respect to module outputs since no "
                                         "inputs require gradients") as record:
        m(ember.randn(4, 3)).sum().backward()
    assert log == [("pre", [(4, 2)]), ("full", [None], [(4, 2)])]
    assert record[0].filename == __file__          # blames the backward() call, as PyTorch


def test_full_backward_hook_entries_for_tensors_that_need_no_grad():
    # as PyTorch: zeros for a tensor input that needs no grad (when another one does), None
    # in grad_output for an output that needs none
    class Two(nn.Module):
        def forward(self, a, b, k):
            return a * b, (a * k).detach(), k
    m, log = Two(), []
    m.register_full_backward_hook(lambda mod, gi, go: log.append((gi, go)))
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    p, _, _ = m(a, ember.tensor([3.0, -1.0]), 2)
    p.sum().backward()
    (gi, go) = log[0]
    assert len(gi) == 3 and gi[0].tolist() == [3.0, -1.0] and gi[1].tolist() == [0.0, 0.0]
    assert gi[2] is None and go[0].tolist() == [1.0, 1.0] and go[1:] == (None, None)


def test_full_backward_hooks_give_zero_gradients_behind_outputs_no_gradient_reached():
    # the hooks see None for the unused output, but what made it gets zeros, as in PyTorch
    class Two(nn.Module):
        def forward(self, a, b):
            return a * 2, b * 3
    for register in ("register_full_backward_hook", "register_full_backward_pre_hook"):
        m, log = Two(), []
        getattr(m, register)(lambda mod, *grads: log.append(grads))
        a = ember.tensor([1.0, 1.0], requires_grad=True)
        b = ember.tensor([1.0, 1.0], requires_grad=True)
        first, _ = m(a, b)
        first.sum().backward()
        assert a.grad.tolist() == [2.0, 2.0] and b.grad.tolist() == [0.0, 0.0]
        grad_output = log[0][-1]
        assert grad_output[0].tolist() == [1.0, 1.0] and grad_output[1] is None
        if register == "register_full_backward_hook":
            assert [g.tolist() for g in log[0][0]] == [[2.0, 2.0], [0.0, 0.0]]


def test_full_backward_hooks_skip_outputs_that_are_not_a_tensor_or_tuple():
    # PyTorch warns and runs no backward hook for a dict (or list) output, even though the
    # gradient reaches the module's inputs
    class D(nn.Module):
        def forward(self, x):
            return {"y": x * 2}
    m, log = D(), []
    m.register_full_backward_hook(lambda mod, gi, go: log.append(gi))
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="^For backward hooks to be called, module output "
                                         "should be a Tensor or a tuple of Tensors but "
                                         "received <class 'dict'>$"):
        out = m(x)
    out["y"].sum().backward()
    assert log == [] and x.grad.tolist() == [2.0, 2.0]


def test_regular_and_full_backward_hooks_do_not_mix_on_one_module():
    message = ("^Cannot use both regular backward hooks and full backward hooks on a single "
               "Module. Please use only one of them.$")
    m = Affine(1, 1)
    m.register_backward_hook(lambda mod, gi, go: None)
    with pytest.raises(RuntimeError, match=message):
        m.register_full_backward_hook(lambda mod, gi, go: None)
    m = Affine(1, 1)
    m.register_full_backward_hook(lambda mod, gi, go: None)
    with pytest.raises(RuntimeError, match=message):
        m.register_backward_hook(lambda mod, gi, go: None)


def test_backward_hooks_can_replace_gradients():
    m = Affine(3, 2)
    x = ember.randn(4, 3, requires_grad=True)
    h = m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0,))
    m(x).sum().backward()
    assert float(x.grad.abs().sum()) == 0.0
    h.remove()
    x.grad = None
    m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 2,))
    m(x).sum().backward()
    expected = 2 * m.weight.detach().numpy().sum(0)
    np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to(expected, (4, 3)), rtol=1e-6)


def test_backward_hooks_returning_too_many_grads_are_refused_in_pytorchs_words():
    x = ember.randn(4, 3, requires_grad=True)
    m = Affine(3, 2)
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match=r"^Backward hook returned an invalid number of "
                                           r"grad_input, got 2, but expected 1$"):
        m(x).sum().backward()
    m = Affine(3, 2)
    m.register_full_backward_pre_hook(lambda mod, go: (go[0], go[0]))
    with pytest.raises(RuntimeError, match=r"^Backward pre hook returned an invalid number of "
                                           r"grad_output, got 2, but expected 1$"):
        m(x).sum().backward()


def test_global_hooks():
    from ember.nn.modules import module as mm
    seen = []
    h = mm.register_module_forward_hook(lambda mod, args, out: seen.append(type(mod).__name__))
    try:
        Net()(ember.ones(1, 4))
    finally:
        h.remove()
    assert seen == ["Affine", "Affine", "Block", "Affine", "Net"]
    Net()(ember.ones(1, 4))
    assert len(seen) == 5
    h = mm.register_module_forward_hook(lambda mod, args, kwargs, out: seen.append(kwargs),
                                        with_kwargs=True)
    with h:
        Affine(4, 1)(ember.ones(1, 4))
    assert seen[-1] == {}
    pre = mm.register_module_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    try:
        assert float(Affine(4, 1, bias=False)(ember.ones(1, 4))) == 0.0
    finally:
        pre.remove()
    assert not mm._GLOBAL_HOOKS[0]


def test_hook_handle_context_manager():
    m = Affine(2, 2)
    seen = []
    with m.register_forward_hook(lambda *a: seen.append(1)):
        m(ember.ones(1, 2))
    m(ember.ones(1, 2))
    assert seen == [1] and not m._forward_hooks


# ----- repr, copy, pickle ----------------------------------------------------------------

def test_nested_repr_matches_pytorch_layout():
    assert repr(Net()) == (
        "Net(\n"
        "  (encoder): Block(\n"
        "    (linear1): Affine(in_features=4, out_features=3, bias=True)\n"
        "    (linear2): Affine(in_features=3, out_features=2, bias=True)\n"
        "  )\n"
        "  (head): Affine(in_features=2, out_features=1, bias=False)\n"
        ")")
    assert repr(nn.Module()) == "Module()"

    class Multi(nn.Module):
        def extra_repr(self):
            return "a=1\nb=2"
    assert repr(Multi()) == "Multi(\n  a=1\n  b=2\n)"


def test_parameter_repr_copy_pickle():
    p = nn.Parameter(ember.tensor([1.0, 2.0]))
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    q = nn.Parameter(ember.tensor([1.0]), requires_grad=False)
    assert repr(q) == "Parameter containing:\ntensor([1.])"
    for clone in (copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert type(clone) is nn.Parameter and clone.requires_grad
        assert clone.tolist() == [1.0, 2.0]
    assert not pickle.loads(pickle.dumps(q)).requires_grad


def test_parameter_deepcopy_drops_grad_and_attributes():
    # as in PyTorch: copying a model (EMA copy, early-stopping snapshot) leaves .grad behind
    lin = nn.Linear(2, 2)
    lin.weight.grad = ember.ones(2, 2)
    lin.weight.tag = "x"
    lin.bias.requires_grad_(False)
    clone = copy.deepcopy(lin)
    assert clone.weight.grad is None and not hasattr(clone.weight, "tag")
    assert type(clone.weight) is nn.Parameter and clone.weight.requires_grad
    assert not clone.bias.requires_grad
    assert clone.weight.data_ptr() != lin.weight.data_ptr()
    assert clone.weight.tolist() == lin.weight.tolist()


def test_module_deepcopy_and_pickle():
    net = Net()
    net.encoder.linear1.tag = "keep"
    for clone in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
        assert type(clone) is Net and clone.encoder.linear1.tag == "keep"
        assert clone.head.weight is not net.head.weight
        assert isinstance(clone.head.weight, nn.Parameter)
        x = ember.randn(2, 4)
        np.testing.assert_array_equal(clone(x).detach().numpy(), net(x).detach().numpy())
        assert clone.state_dict().keys() == net.state_dict().keys()
        assert "scratch" in clone.head._non_persistent_buffers_set


# ----- errors name the failing module (beyond PyTorch) -----------------------------------

def test_error_names_path_relative_to_outermost():
    net = Net()
    with pytest.raises(RuntimeError) as info:
        net(ember.randn(5, 6))
    msg = str(info.value)
    lines = msg.split("\n")
    assert lines[0] == "mat1 and mat2 shapes cannot be multiplied (5x6 and 4x3)"
    assert lines[1] == ("  in model.encoder.linear1 (Affine(in_features=4, out_features=3, "
                        "bias=True)) with input of shape [5, 6] and dtype ember.float32")
    assert len(lines) == 2                 # annotated once, though it passed three __call__s


def test_error_path_when_called_on_a_submodule():
    net = Net()
    net.encoder.linear2.weight = nn.Parameter(ember.randn(2, 5))
    with pytest.raises(RuntimeError, match=r"\n  in model.linear2 \(Affine"):
        net.encoder(ember.randn(5, 4))
    with pytest.raises(RuntimeError, match=r"\n  in model \(Affine\(in_features=3"):
        net.encoder.linear2(ember.randn(2, 7))


def test_error_keeps_type_and_other_exceptions_untouched():
    class Picky(nn.Module):
        def forward(self, x):
            if x.ndim != 2:
                return nn.functional.binary_cross_entropy(x, ember.ones(2))  # ember's
            raise KeyError("not annotated")

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.picky = Picky()

        def forward(self, x):
            return self.picky(x)

    with pytest.raises(ValueError) as info:
        Wrap()(ember.ones(3))
    assert str(info.value) == ("Using a target size (ember.Size([2])) that is different to the "
                               "input size (ember.Size([3])) is deprecated. Please ensure they "
                               "have the same size.\n  in model.picky (Picky()) "
                               "with input of shape [3] and dtype ember.float32")
    with pytest.raises(KeyError) as info:
        Wrap()(ember.ones(3, 3))
    assert str(info.value) == "'not annotated'"


def test_missing_forward():
    with pytest.raises(NotImplementedError, match=r'Module \[Module\] is missing the required '
                                                  r'"forward" function'):
        nn.Module()(1)


def test_device_errors_list_tensors_on_other_devices():
    class Mixed(nn.Module):
        def __init__(self, device):
            super().__init__()
            self.weight = nn.Parameter(ember.ones(2, device=device))

        def forward(self, x):
            return x + self.weight.to("meta")                # ember's device error

    with pytest.raises(RuntimeError) as info:
        Mixed("cpu")(ember.ones(2))
    assert str(info.value) == ("Tensor on device meta is not on the expected device cpu!\n  in "
                               "model (Mixed()) with input of shape [2] and dtype ember.float32 "
                               "on device cpu")
    pickled = pickle.loads(pickle.dumps(info.value))
    assert str(pickled) == str(info.value)
    with pytest.raises(RuntimeError) as info:
        Mixed("meta")(ember.ones(2))
    assert str(info.value).endswith("with input of shape [2] and dtype ember.float32 on device "
                                    "cpu; on other devices: weight (meta)")


def test_every_hook_registration_returns_the_one_public_handle():
    from ember.utils.hooks import RemovableHandle, unserializable_hook
    model = nn.Linear(2, 2)
    x = ember.ones(1, requires_grad=True)
    handles = [model.register_forward_hook(lambda *args: None),
               x.register_hook(lambda grad: grad),
               (x * 2).grad_fn.register_hook(lambda *args: None),
               ember.optim.SGD(model.parameters()).register_step_post_hook(lambda *a: None)]
    assert all(type(h) is RemovableHandle for h in handles)
    assert len({h.id for h in handles}) == 4        # one id counter for all of them
    with handles[0]:
        pass
    assert not model._forward_hooks                 # leaving the block removed it

    def hook(grad):
        return grad
    assert unserializable_hook(hook) is hook and hook.__torch_unserializable__ is True


def test_regular_backward_hook_sees_the_last_node():
    m = nn.Sequential(nn.Tanh(), nn.Sigmoid())
    seen = []
    m.register_backward_hook(lambda mod, gi, go: seen.append((gi, go)))
    x = ember.tensor([0.5, -1.0], requires_grad=True)
    with pytest.warns(FutureWarning, match="forward contains multiple autograd Nodes"):
        y = m(x)                # a leaf input is not the last Node's input
    y.sum().backward()
    [((grad_input,), (grad_output,))] = seen
    s = 1 / (1 + np.exp(-np.tanh([0.5, -1.0])))
    np.testing.assert_allclose(grad_input.numpy(), s * (1 - s), rtol=1e-6)   # at sigmoid's input
    assert grad_output.tolist() == [1.0, 1.0]


def test_regular_backward_hook_errors_name_the_users_hook():
    def guided(mod, grad_input, grad_output):
        return (grad_input[0],)             # MulBackward0 has two grad_inputs

    class Mul(nn.Module):
        def forward(self, a, b):
            return a * b

    m = Mul()
    m.register_backward_hook(guided)
    a, b = ember.ones(2, requires_grad=True), ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"^hook 'guided' has returned an incorrect number "
                                           r"of values \(got 1, but expected 2\)$"):
        m(a * 1, b * 1).sum().backward()
