"""The Optimizer base: groups, bad input, zero_grad, state_dict, hooks, closures."""

import pickle
import re
import warnings

import numpy as np
import pytest

import ember
from ember import nn, optim


def _params(*shapes):
    return [nn.Parameter(ember.ones(*s)) for s in shapes]


def test_bad_params_are_refused_as_pytorch_words_it():
    p = nn.Parameter(ember.ones(2))
    with pytest.raises(TypeError, match="should be an iterable of Tensors or dicts, but got "
                                        "ember.FloatTensor"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        optim.SGD([p * 2], lr=0.1)
    with pytest.raises(ValueError, match="some parameters appear in more than one"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate: -0.1"):
        optim.SGD([p], lr=-0.1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum"):
        optim.SGD([p], nesterov=True)
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD([p], lr=0.1).add_param_group({"params": {nn.Parameter(ember.ones(1))}})



def test_add_param_group_type_and_name_errors_as_pytorch():
    p = nn.Parameter(ember.ones(2))
    opt = optim.SGD([p], lr=0.1)
    with pytest.raises(TypeError, match="^param_group must be a dict, but got <class 'list'>$"):
        opt.add_param_group([p])
    with pytest.raises(TypeError, match="one of the params is float$"):
        opt.add_param_group({"params": [1.0]})
    with pytest.raises(TypeError, match="one of the params is numpy.ndarray$"):
        opt.add_param_group({"params": [np.ones(2)]})
    with pytest.raises(ValueError, match="^all optimizer params should be with/without names. "
                                         "Some param names are missing$"):
        optim.SGD([nn.Parameter(ember.ones(1)), ("a", nn.Parameter(ember.ones(1)))], lr=0.1)
    named = optim.SGD([("a", nn.Parameter(ember.ones(1)))], lr=0.1)
    assert named.param_groups[0]["param_names"] == ["a"]


def test_tensor_lr_and_fused_checks_as_pytorch():
    p = nn.Parameter(ember.ones(2))
    for name in ["SGD", "Adam", "AdamW", "RMSprop", "Adafactor", "LBFGS", "SparseAdam"]:
        with pytest.raises(ValueError, match="^Tensor lr must be 1-element$"):
            getattr(optim, name)([p], lr=ember.tensor([0.1, 0.2]))
    for name in ["Adam", "AdamW"]:
        with pytest.raises(ValueError, match="^lr as a Tensor is not supported for "
                                             "capturable=False and foreach=True$"):
            getattr(optim, name)([p], lr=ember.tensor(0.1), foreach=True)
    for name in ["Adam", "AdamW", "SGD", "Adagrad"]:
        with pytest.raises(RuntimeError, match="^`fused` and `foreach` cannot be `True` "
                                               "together.$"):
            getattr(optim, name)([p], fused=True, foreach=True)
        with pytest.raises(RuntimeError, match="^`fused` does not support `differentiable`$"):
            getattr(optim, name)([p], fused=True, foreach=True, differentiable=True)
    opt = optim.Adam([p], lr=ember.tensor(0.1), foreach=False)
    p.grad = ember.ones(2)
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), 0.9, rtol=1e-6)


def test_groups_take_their_own_options_and_defaults_fill_the_rest():
    a, b = _params((2,), (3,))
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["momentum"] == 0.9
    assert opt.param_groups[1]["params"] == [b]
    a.grad, b.grad = ember.ones(2), ember.ones(3)
    opt.step()
    np.testing.assert_allclose(a.detach().numpy(), 0.9)
    np.testing.assert_allclose(b.detach().numpy(), 0.5)


def test_duplicate_parameter_in_a_group_warns():
    p = nn.Parameter(ember.ones(2))
    with pytest.warns(UserWarning, match="duplicate parameters"):
        optim.SGD([p, p], lr=0.1)


def test_parameters_without_gradients_are_left_alone():
    a, b = _params((2,), (2,))
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = ember.ones(2)
    opt.step()
    assert b not in opt.state
    np.testing.assert_allclose(b.detach().numpy(), 1.0)
    assert (a.detach().numpy() < 1).all()


def test_zero_grad_sets_to_none_or_zeroes_in_place():
    (p,) = _params((2,))
    opt = optim.SGD([p], lr=0.1)
    p.grad = ember.ones(2)
    opt.zero_grad()
    assert p.grad is None
    p.grad = g = ember.ones(2)
    opt.zero_grad(set_to_none=False)
    assert p.grad is g
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0])


def test_step_updates_in_place_and_bumps_the_version():
    (p,) = _params((2,))
    data, version = p._data, p._version
    opt = optim.SGD([p], lr=0.1)
    p.grad = ember.ones(2)
    opt.step()
    assert p._data is data and p._version == version + 1


def test_lr_may_be_a_tensor():
    (p,) = _params((2,))
    opt = optim.Adam([p], lr=ember.tensor(0.1))
    p.grad = ember.ones(2)
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), 0.9, rtol=1e-6)


def test_complex_parameters_update_as_pairs_of_reals():
    z = nn.Parameter(ember.tensor([1 + 2j, -1j]))
    r = nn.Parameter(ember.tensor([[1.0, 2.0], [0.0, -1.0]]))
    oz, orr = optim.Adam([z], lr=0.1), optim.Adam([r], lr=0.1)
    for _ in range(3):
        z.grad = ember.tensor([0.5 - 1j, 2 + 0.25j])
        r.grad = ember.tensor([[0.5, -1.0], [2.0, 0.25]])
        oz.step()
        orr.step()
    np.testing.assert_allclose(ember.view_as_real(z.detach()).numpy(), r.detach().numpy())
    assert oz.state[z]["exp_avg"].dtype == ember.complex64


def test_closure_is_evaluated_with_gradients_and_its_loss_returned():
    (p,) = _params((2,))
    opt = optim.SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    with ember.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 2.0
    np.testing.assert_allclose(p.detach().numpy(), 0.8)


def test_state_dict_layout_and_round_trip():
    a, b = _params((2,), (3,))
    opt = optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, amsgrad=True)
    for _ in range(2):
        a.grad, b.grad = ember.ones(2), ember.full((3,), 2.0)
        opt.step()
    sd = opt.state_dict()
    assert sorted(sd) == ["param_groups", "state"]
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert list(sd["state"][0]) == ["step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"]
    assert sd["state"][0]["step"].item() == 2.0 and sd["state"][0]["step"].dtype == ember.float32

    a2, b2 = nn.Parameter(a.detach().clone()), nn.Parameter(b.detach().clone())
    fresh = optim.Adam([{"params": [a2]}, {"params": [b2]}], lr=0.9)
    fresh.load_state_dict(pickle.loads(pickle.dumps(sd)))
    assert fresh.param_groups[1]["lr"] == 0.5 and fresh.param_groups[1]["params"] == [b2]
    for o, params in ((opt, (a, b)), (fresh, (a2, b2))):
        params[0].grad, params[1].grad = ember.ones(2), ember.ones(3)
        o.step()
    np.testing.assert_array_equal(a.detach().numpy(), a2.detach().numpy())
    np.testing.assert_array_equal(b.detach().numpy(), b2.detach().numpy())
    # a pickled state dict is a copy: stepping one optimizer leaves the other's state alone
    assert fresh.state[a2]["exp_avg"]._data is not opt.state[a]["exp_avg"]._data


def test_load_state_dict_shares_state_tensors_and_copies_the_groups():
    (p,) = _params((3,))
    opt = optim.Adam([p], lr=0.1)
    p.grad = ember.ones(3)
    opt.step()
    sd = opt.state_dict()
    (q,) = _params((3,))
    loaded = optim.Adam([q], lr=0.5)
    loaded.load_state_dict(sd)
    # PyTorch's semantics: no second copy of the state (checkpoints load at one copy's peak)
    assert loaded.state[q]["exp_avg"] is sd["state"][0]["exp_avg"]
    assert loaded.state[q]["step"] is sd["state"][0]["step"]
    assert loaded.state[q] is not sd["state"][0]
    assert loaded.param_groups[0] is not sd["param_groups"][0]
    assert loaded.param_groups[0]["lr"] == 0.1
    # a state of another dtype than its parameter is cast, so not shared; steps stay float32
    d = nn.Parameter(ember.ones(3, dtype=ember.float64))
    cast = optim.Adam([d])
    cast.load_state_dict(sd)
    assert cast.state[d]["exp_avg"].dtype == ember.float64
    assert cast.state[d]["step"].dtype == ember.float32


def test_load_state_dict_rebuilds_nested_state_containers():
    w = nn.Parameter(ember.tensor([1.0, 2.0]))
    lbfgs = optim.LBFGS([w], history_size=3)

    def closure():
        lbfgs.zero_grad()
        loss = ((w - 3) ** 2).sum()
        loss.backward()
        return loss

    lbfgs.step(closure)
    sd = lbfgs.state_dict()
    w2 = nn.Parameter(ember.tensor([1.0, 2.0]))
    loaded = optim.LBFGS([w2], history_size=3)
    loaded.load_state_dict(sd)
    dirs, saved = loaded.state[w2]["old_dirs"], sd["state"][0]["old_dirs"]
    assert dirs is not saved and len(dirs) == len(saved) > 0
    assert all(a is b for a, b in zip(dirs, saved))


def test_load_state_dict_casts_state_to_the_parameter_dtype():
    (p,) = _params((2,))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = ember.ones(2)
    opt.step()
    q = nn.Parameter(ember.ones(2, dtype=ember.float64))
    other = optim.SGD([q], lr=0.1, momentum=0.9)
    other.load_state_dict(opt.state_dict())
    assert other.state[q]["momentum_buffer"].dtype == ember.float64


def test_load_state_dict_with_mismatched_groups_raises_pytorchs_message():
    a, b = _params((2,), (2,))
    sd = optim.SGD([a, b], lr=0.1).state_dict()
    with pytest.raises(ValueError, match=r"doesn't match the size of optimizer's group$"):
        optim.SGD([a], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1).load_state_dict(sd)


def test_step_hooks_run_around_step_and_can_be_removed():
    (p,) = _params((2,))
    opt = optim.SGD([p], lr=0.1)
    calls = []
    pre = opt.register_step_pre_hook(lambda o, a, k: calls.append(("pre", o is opt)))
    opt.register_step_post_hook(lambda o, a, k: calls.append(("post", p._version)))
    p.grad = ember.ones(2)
    opt.step()
    assert calls == [("pre", True), ("post", p._version)]
    pre.remove()
    opt.step()
    assert [c[0] for c in calls] == ["pre", "post", "post"]


def test_state_dict_hooks_wrap_save_and_load_in_registration_order():
    (p,) = _params((2,))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    calls = []
    opt.register_state_dict_pre_hook(lambda o: calls.append("pre"))
    opt.register_state_dict_post_hook(lambda o, sd: dict(sd, extra=7))
    opt.register_state_dict_post_hook(lambda o, sd: calls.append(sd["extra"]))
    opt.register_load_state_dict_pre_hook(lambda o, sd: calls.append(sorted(sd)))
    opt.register_load_state_dict_pre_hook(lambda o, sd: calls.append("first"), prepend=True)
    opt.register_load_state_dict_post_hook(lambda o: calls.append(o.param_groups[0]["lr"]))
    sd = opt.state_dict()
    assert sd["extra"] == 7 and calls == ["pre", 7]
    sd["param_groups"][0]["lr"] = 0.5
    opt.load_state_dict(sd)
    assert calls[2:] == ["first", ["extra", "param_groups", "state"], 0.5]


def test_global_step_hooks_run_before_the_optimizers_own():
    (p,) = _params((2,))
    opt = optim.SGD([p], lr=0.1)
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("own pre"))
    pre = optim.optimizer.register_optimizer_step_pre_hook(lambda o, a, k: calls.append("pre"))
    post = optim.optimizer.register_optimizer_step_post_hook(
        lambda o, a, k: calls.append("post"))
    p.grad = ember.ones(2)
    try:
        opt.step()
    finally:
        pre.remove()
        post.remove()
    opt.step()
    assert calls == ["pre", "own pre", "post", "own pre"]


def test_repr_lists_each_group_sorted():
    (p,) = _params((2,))
    text = repr(optim.SGD([p], lr=0.1))
    assert text.startswith("SGD (\nParameter Group 0\n    dampening: 0\n")
    assert "    lr: 0.1\n" in text and text.endswith("\n)")


def test_named_parameters_record_their_names():
    a, b = _params((2,), (3,))
    opt = optim.SGD([("weight", a), ("bias", b)], lr=0.1)
    assert opt.param_groups[0]["params"] == [a, b]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]
    with pytest.raises(ValueError, match="should be with/without names"):
        opt.add_param_group({"params": [nn.Parameter(ember.ones(1))]})


def test_repr_separates_parameter_groups_with_a_blank_line():
    a, b = ember.ones(2, requires_grad=True), ember.ones(2, requires_grad=True)
    text = repr(ember.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1))
    assert "    weight_decay: 0\n\nParameter Group 1\n" in text and text.endswith("0\n)")


def test_capturable_refuses_host_parameters_at_step_as_pytorch():
    every = "'hpu', 'privateuseone', 'xla']"
    cases = [("Adam", "params and state_steps", every),
             ("NAdam", "params, mu_products and state_steps", every),
             ("ASGD", "params, mus, etas, and state_steps", every),
             ("Adadelta", "params and state_steps", "'hpu', 'privateuseone']")]
    for name, what, tail in cases:
        p = nn.Parameter(ember.ones(2))
        opt = getattr(optim, name)([p], capturable=True)
        opt.step()                               # nothing to update yet: no check
        p.grad = ember.ones(2)
        with pytest.raises(AssertionError) as info:
            opt.step()
        assert str(info.value) == (f"If capturable=True, {what} must be on supported devices: "
                                   f"['cuda', 'xpu', {tail}.")
        assert p.tolist() == [1.0, 1.0]


def test_step_hooks_see_the_optimizer_first_in_args_and_may_replace_them():
    """As PyTorch: ``args`` holds the optimizer then step's positional arguments; a pre-hook's
    ``(args, kwargs)`` is what step is then called with."""
    (p,) = _params((2,))
    opt = optim.SGD([p], lr=0.1)
    seen = []

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    def pre(o, args, kwargs):
        seen.append((len(args), args[0] is o, sorted(kwargs)))
        return (o,), {"closure": closure}
    opt.register_step_pre_hook(pre)
    opt.register_step_post_hook(lambda o, args, kwargs: seen.append((len(args), sorted(kwargs))))
    loss = opt.step(lambda: None)
    assert seen == [(2, True, []), (1, ["closure"])]
    assert loss.item() == 2.0
    assert p.tolist() == pytest.approx([0.8, 0.8])


def test_zero_grad_keeps_a_graph_built_gradient_and_detaches_it():
    """A gradient built with create_graph=True (here through a transpose, a view) is zeroed
    in place and detached, as in PyTorch."""
    w = nn.Parameter(ember.tensor([[1.0, 2.0], [3.0, 4.0]]))
    x = ember.tensor([[0.5, -1.0]])
    ember.sin(x @ w.t()).sum().backward(create_graph=True)
    grad = w.grad
    assert grad.grad_fn is not None and not grad._is_view()
    optim.SGD([w], lr=0.1).zero_grad(set_to_none=False)
    assert w.grad is grad and grad.grad_fn is None and not grad.requires_grad
    assert grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]


@pytest.fixture
def float64_default():
    ember.set_default_dtype(ember.float64)
    yield
    ember.set_default_dtype(ember.float32)


@pytest.mark.parametrize("cls, options, keys", [
    (optim.Adam, {}, ("step",)), (optim.NAdam, {}, ("step", "mu_product")),
    (optim.ASGD, {}, ("step", "eta", "mu")), (optim.Adafactor, {}, ("step",)),
])
def test_scalar_state_follows_a_float64_default_dtype(float64_default, cls, options, keys):
    """As PyTorch: step counts (and NAdam's, ASGD's scalar state) are float64 while the
    default dtype is, so float64 training keeps mu_product and eta unrounded."""
    (p,) = _params((2,))
    opt = cls([p], **options)
    p.grad = ember.ones(2)
    opt.step()
    assert {k: opt.state[p][k].dtype for k in keys} == {k: ember.float64 for k in keys}


@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW, optim.Adagrad])
def test_fused_step_counts_stay_float32(float64_default, cls):
    (p,) = _params((2,))
    opt = cls([p], fused=True)
    p.grad = ember.ones(2)
    opt.step()
    assert opt.state[p]["step"].dtype == ember.float32


def test_nadam_mu_product_is_exact_in_float64(float64_default):
    (p,) = _params((1,))
    opt = optim.NAdam([p], lr=0.1)
    for _ in range(3):
        p.grad = ember.ones(1)
        opt.step()
    mus = [0.9 * (1 - 0.5 * 0.96 ** (t * 0.004)) for t in (1, 2, 3)]
    assert opt.state[p]["mu_product"].item() == mus[0] * mus[1] * mus[2]


def test_a_non_leaf_that_retains_its_grad_may_be_optimized():
    (p,) = _params((2,))
    q = p * 2
    q.retain_grad()
    opt = optim.SGD([q], lr=0.5)
    q.sum().backward()
    opt.step()
    assert q.tolist() == [1.5, 1.5]
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        optim.SGD([p * 2], lr=0.5)


def _old_checkpoint(opt, drop, step_as_number=("step",)):
    """``opt``'s state_dict as an older PyTorch saved it: without the group options in
    ``drop`` and with the ``step_as_number`` entries as Python floats."""
    sd = opt.state_dict()
    for group in sd["param_groups"]:
        for name in drop:
            group.pop(name, None)
    for state in sd["state"].values():
        for key in step_as_number:
            state[key] = float(state[key])
    return sd


def test_an_older_pytorch_checkpoint_loads_with_new_options_defaulted():
    """As PyTorch's __setstate__: missing options take their defaults, Python-number
    step counts become float32 tensors, and stepping goes on from them."""
    (p,) = _params((2,))
    opt = optim.Adam([p], lr=0.1)
    p.grad = ember.ones(2)
    opt.step()
    new = ("maximize", "foreach", "capturable", "differentiable", "fused",
           "decoupled_weight_decay")
    sd = _old_checkpoint(opt, new)
    (q,) = _params((2,))
    other = optim.Adam([q], lr=0.5)
    other.load_state_dict(sd)
    assert {k: other.param_groups[0][k] for k in new} == {
        "maximize": False, "foreach": None, "capturable": False, "differentiable": False,
        "fused": None, "decoupled_weight_decay": False}
    step = other.state[q]["step"]
    assert isinstance(step, ember.Tensor) and step.dtype == ember.float32
    q.grad = ember.ones(2)
    other.step()
    assert step.item() == 2.0 and q.tolist() == pytest.approx([0.9] * 2)


@pytest.mark.parametrize("cls, options, defaults", [
    (optim.SGD, {"momentum": 0.9}, {"nesterov": False, "maximize": False, "fused": False}),
    (optim.AdamW, {}, {"decoupled_weight_decay": True, "amsgrad": False}),
    (optim.RMSprop, {}, {"momentum": 0, "centered": False, "capturable": False}),
    (optim.Rprop, {}, {"maximize": False, "foreach": None}),
    (optim.Adafactor, {}, {"foreach": None}),
])
def test_older_checkpoints_get_each_optimizers_defaults(cls, options, defaults):
    (p,) = _params((2,))
    opt = cls([p], **options)
    p.grad = ember.ones(2)
    opt.step()
    sd = _old_checkpoint(opt, defaults, step_as_number=())
    (q,) = _params((2,))
    other = cls([q], **options)
    other.load_state_dict(sd)
    assert {k: other.param_groups[0][k] for k in defaults} == defaults
    q.grad = ember.ones(2)
    other.step()


def test_older_checkpoints_scalar_state_becomes_tensors():
    """NAdam's mu_product and ASGD's eta and mu were Python numbers once."""
    for cls, keys in ((optim.NAdam, ("step", "mu_product")), (optim.ASGD, ("step", "eta", "mu"))):
        (p,) = _params((2,))
        opt = cls([p], lr=0.1)
        p.grad = ember.ones(2)
        opt.step()
        sd = _old_checkpoint(opt, (), step_as_number=keys)
        (q,) = _params((2,))
        other = cls([q], lr=0.1)
        other.load_state_dict(sd)
        assert all(other.state[q][k].dtype == ember.float32 for k in keys)


def test_sparse_adam_steps_a_checkpoint_without_maximize():
    emb = nn.Embedding(3, 2, sparse=True)
    opt = optim.SparseAdam(list(emb.parameters()), lr=0.1)
    sd = _old_checkpoint(opt, ("maximize",), step_as_number=())
    opt.load_state_dict(sd)
    emb(ember.tensor([1])).sum().backward()
    before = emb.weight.detach().clone()
    opt.step()
    assert "maximize" not in opt.param_groups[0]
    assert (emb.weight.detach() - before)[1].tolist() == pytest.approx([-0.1, -0.1])


def test_unpickling_fills_missing_options_too():
    (p,) = _params((2,))
    opt = optim.SGD([p], lr=0.1)
    del opt.param_groups[0]["maximize"], opt.defaults["differentiable"]
    clone = pickle.loads(pickle.dumps(opt))
    assert clone.param_groups[0]["maximize"] is False
    assert clone.defaults["differentiable"] is False


@pytest.mark.parametrize("cls", [optim.SGD, optim.Adam, optim.AdamW, optim.Adagrad])
def test_fused_refuses_complex_parameters_at_step_as_pytorch(cls):
    p = nn.Parameter(ember.tensor([1 + 1j, 2 - 1j]))
    opt = cls([p], lr=0.1, fused=True)
    p.grad = ember.ones_like(p)
    with pytest.raises(RuntimeError, match=r"^`fused=True` requires all the params to be "
                       r"floating point Tensors of supported devices: \['mps', 'cuda', 'xpu', "
                       r"'hpu', 'cpu', 'mtia', 'privateuseone'\] but .*complex64 and cpu$"):
        opt.step()
    assert p.tolist() == [1 + 1j, 2 - 1j]


@pytest.mark.parametrize("cls, message", [
    (optim.SGD, "`_fused_sgd` does not support sparse gradients"),
    (optim.Adagrad, "`fused` does not support sparse grad or complex param"),
    (optim.Adam, "Adam does not support sparse gradients, please consider SparseAdam instead"),
])
def test_fused_refuses_sparse_gradients_as_pytorch(cls, message):
    (p,) = _params((3,))
    opt = cls([p], lr=0.1, fused=True)
    p.grad = ember.tensor([1.0, 0.0, 2.0]).to_sparse()
    with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
        opt.step()
    assert p.tolist() == [1.0, 1.0, 1.0]


def test_loading_a_checkpoint_without_names_keeps_ours():
    a, b = _params((2,), (3,))
    named = optim.SGD([("weight", a), ("bias", b)], lr=0.1)
    named.load_state_dict(optim.SGD([a, b], lr=0.5).state_dict())
    assert named.param_groups[0]["param_names"] == ["weight", "bias"]
    assert named.param_groups[0]["lr"] == 0.5
    plain = optim.SGD([a, b], lr=0.1)
    plain.load_state_dict(optim.SGD([("w", a), ("b", b)], lr=0.1).state_dict())
    assert plain.param_groups[0]["param_names"] == ["w", "b"]


def test_an_added_named_group_lists_its_names_after_its_options():
    """As PyTorch, which sets param_names on the group after the keys it was given."""
    (a,) = _params((2,))
    opt = optim.SGD([("a", a)], lr=0.1)
    opt.add_param_group({"params": [("b", nn.Parameter(ember.ones(1)))], "lr": 0.3})
    assert list(opt.param_groups[1])[:3] == ["params", "lr", "param_names"]


@pytest.mark.parametrize("cls", [optim.Adam, optim.Adagrad, optim.RMSprop, optim.ASGD])
def test_a_step_that_divides_zero_by_zero_gives_nan_silently(cls):
    """As PyTorch: eps=0 and a zero gradient make nan, with no NumPy warning."""
    (p,) = _params((2,))
    opt = cls([p], lr=0.1, **({"lambd": float("inf")} if cls is optim.ASGD else {"eps": 0.0}))
    p.grad = ember.zeros(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
        opt.step()
    assert np.isnan(p.detach().numpy()).all()


@pytest.mark.parametrize("cls", [optim.SGD, optim.Adagrad])
def test_a_differentiable_step_carries_the_graph_to_lr_and_initial_params(cls):
    """w1 = w0 - lr * g (SGD; Adagrad's first step divides g by |g|): d sum(w1) / d lr is
    -sum(g / |g|^k), and d w1 / d w0 is one where g does not depend on w0."""
    lr = ember.tensor(0.1, dtype=ember.float64, requires_grad=True)
    w0 = ember.tensor([1.0, -2.0], dtype=ember.float64, requires_grad=True)
    w = w0.clone()
    opt = cls([w], lr=lr, differentiable=True) if cls is optim.SGD else cls(
        [w], lr=0.1, differentiable=True)
    w.grad = ember.tensor([0.5, -4.0], dtype=ember.float64)
    opt.step()
    assert w.grad_fn is not None
    w.sum().backward()
    np.testing.assert_allclose(w0.grad.numpy(), [1.0, 1.0])
    if cls is optim.SGD:
        np.testing.assert_allclose(lr.grad.item(), 3.5)
        np.testing.assert_allclose(w.detach().numpy(), [0.95, -1.6])
    else:
        np.testing.assert_allclose(w.detach().numpy(), [0.9, -1.9], rtol=1e-9)


def test_a_differentiable_step_records_even_under_no_grad():
    w = ember.ones(2, dtype=ember.float64, requires_grad=True).clone()
    opt = optim.Adam([w], lr=0.1, differentiable=True)
    w.grad = ember.ones(2, dtype=ember.float64, requires_grad=True) * 2
    with ember.no_grad():
        opt.step()
    assert w.requires_grad and w.grad_fn is not None


def test_duplicate_parameters_warning_points_at_the_callers_line():
    p = ember.nn.Parameter(ember.ones(2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ember.optim.SGD([p, p], lr=0.1)
    assert [w.filename for w in caught] == [__file__]
    assert "duplicate parameters" in str(caught[0].message)
