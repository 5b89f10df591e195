"""nn.utils.prune: masks of each method, the reparametrization (weight_orig, weight_mask and the
forward pre-hook), state_dict, remove, containers of successive prunings, global pruning,
errors, and training a pruned model."""

import copy

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.utils.prune as prune

W = [[3.0, 1.0, 2.0, -1.0], [5.0, 6.0, 0.5, 1.0], [0.0, 0.0, 1.0, 2.0]]


def linear(weight=W, bias=(1.0, 0.0, 1.0)):
    m = nn.Linear(len(weight[0]), len(weight))
    with ember.no_grad():
        m.weight.copy_(ember.tensor(weight))
        m.bias.copy_(ember.tensor(bias))
    return m


def mask_of(m, name="weight"):
    return getattr(m, name + "_mask").tolist()


def pruning_hooks(m):
    return [h for h in m._forward_pre_hooks.values() if isinstance(h, prune.BasePruningMethod)]


# ----- the reparametrization -------------------------------------------------------------

def test_l1_unstructured_reparametrizes_the_weight():
    m = linear()
    weight = m.weight
    assert prune.l1_unstructured(m, "weight", amount=3) is m
    assert m.weight_orig is weight and "weight" not in m._parameters
    assert mask_of(m) == [[1, 1, 1, 1], [1, 1, 0, 1], [0, 0, 1, 1]]
    assert m.weight_mask.dtype == ember.float32 and not m.weight_mask.requires_grad
    assert not isinstance(m.weight, nn.Parameter) and m.weight.grad_fn is not None
    np.testing.assert_array_equal(m.weight.detach().numpy(),
                                  np.array(W) * np.array(mask_of(m)))
    assert list(m.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight_orig"]
    assert [type(h) for h in pruning_hooks(m)] == [prune.L1Unstructured]
    assert pruning_hooks(m)[0]._tensor_name == "weight"


def test_the_hook_recomputes_the_weight_before_forward():
    m = linear()
    prune.l1_unstructured(m, "weight", amount=0.25)          # round(0.25 * 12) = 3 entries
    with ember.no_grad():
        m.weight_orig.fill_(2.0)
    out = m(ember.ones(1, 4))
    np.testing.assert_allclose(out.detach().numpy(), [[9.0, 6.0, 5.0]])
    assert m.weight.tolist() == [[2, 2, 2, 2], [2, 2, 0, 2], [0, 0, 2, 2]]


def test_float_amount_rounds_and_zero_prunes_nothing():
    m = linear()
    prune.l1_unstructured(m, "weight", amount=0.3)          # round(3.6) = 4
    assert int((m.weight_mask == 0).sum()) == 4
    m = linear()
    prune.l1_unstructured(m, "weight", amount=0)
    assert m.weight_mask.tolist() == [[1.0] * 4] * 3


def test_importance_scores_rank_the_entries():
    m = linear()
    scores = ember.arange(12.0).view(3, 4).flip(0)
    prune.l1_unstructured(m, "weight", amount=2, importance_scores=scores)
    assert mask_of(m) == [[1, 1, 1, 1], [1, 1, 1, 1], [0, 0, 1, 1]]
    np.testing.assert_array_equal(m.weight_orig.detach().numpy(), W)


def test_ties_at_the_cut_go_by_lowest_index():
    # ember's topk takes the lowest indices among equal values; PyTorch's CPU topk leaves
    # the choice to its selection algorithm (prune._topk_indices)
    t = ember.tensor([[1.0, -1, 2], [2, 0, 0], [3, 1, -1]])      # |t|: 1 1 2 2 0 0 3 1 1
    expected = {1: [1, 1, 1, 1, 0, 1, 1, 1, 1], 3: [0, 1, 1, 1, 0, 0, 1, 1, 1],
                5: [0, 0, 1, 1, 0, 0, 1, 0, 1]}
    for amount, mask in expected.items():
        got = prune.L1Unstructured(amount).compute_mask(t, ember.ones_like(t))
        assert got.flatten().tolist() == mask
    t = ember.tensor([[1.0, -1], [2, 0], [1, 1], [0, 3], [-1, 1]])  # row norms 2 2 2 3 2
    got = prune.LnStructured(1, 1, dim=0).compute_mask(t, ember.ones_like(t))
    assert got[:, 0].tolist() == [1, 1, 1, 1, 0]              # keeps row 3, then rows 0-2
    ones = ember.ones(5)
    assert prune.L1Unstructured(2).compute_mask(ones, ones).tolist() == [0, 0, 1, 1, 1]


def test_random_unstructured_prunes_the_amount_reproducibly():
    ember.manual_seed(0)
    m = linear()
    prune.random_unstructured(m, "weight", amount=5)
    first = mask_of(m)
    assert int((m.weight_mask == 0).sum()) == 5
    ember.manual_seed(0)
    m = linear()
    prune.random_unstructured(m, "weight", amount=5)
    assert mask_of(m) == first


def test_random_structured_prunes_whole_channels():
    m = linear()
    prune.random_structured(m, "weight", amount=2, dim=1)
    mask = m.weight_mask.numpy()
    kept = mask.sum(0)
    assert sorted(kept.tolist()) == [0, 0, 3, 3]
    m = linear()
    prune.random_structured(m, "weight", amount=1.0, dim=0)
    assert m.weight_mask.sum().item() == 0


@pytest.mark.parametrize("n, dim, expected", [
    (1, 0, [[1, 1, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0]]),
    (2, -1, [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]]),
    (float("inf"), 1, [[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 0]]),   # columns 2, 3 tie
])
def test_ln_structured_keeps_the_channels_of_largest_norm(n, dim, expected):
    m = linear()
    amount = 1 if n != 2 else 0.5
    prune.ln_structured(m, "weight", amount=amount, n=n, dim=dim)
    assert mask_of(m) == expected


def test_ln_structured_on_a_conv_weight_prunes_output_channels():
    conv = nn.Conv2d(2, 4, 3)
    with ember.no_grad():
        conv.weight.copy_(ember.arange(72.0).view(4, 2, 3, 3) - 30)
    prune.ln_structured(conv, "weight", amount=0.5, n=2, dim=0)
    per_channel = conv.weight_mask.sum(dim=(1, 2, 3)).tolist()
    assert per_channel == [18, 0, 0, 18]


def test_custom_from_mask_and_identity():
    m = linear()
    prune.custom_from_mask(m, "weight", mask=ember.tensor(W) > 1)
    assert mask_of(m) == [[1, 0, 1, 0], [1, 1, 0, 0], [0, 0, 0, 1]]
    assert m.weight_mask.dtype == ember.float32
    prune.identity(m, "bias")
    assert m.bias_mask.tolist() == [1, 1, 1]
    assert list(m.state_dict()) == ["weight_orig", "bias_orig", "weight_mask", "bias_mask"]


def test_pruning_a_zero_dim_and_an_empty_tensor():
    m = nn.Module()
    m.scale = nn.Parameter(ember.tensor(3.0))
    m.empty = nn.Parameter(ember.ones(0, 3))
    prune.l1_unstructured(m, "scale", amount=1)
    prune.l1_unstructured(m, "empty", amount=0.5)
    assert m.scale.item() == 0 and m.scale_mask.shape == ()
    assert m.empty.shape == (0, 3)


def test_prune_method_without_a_module():
    t = ember.tensor([3.0, 1.0, 2.0])
    assert prune.L1Unstructured(1).prune(t).tolist() == [3, 0, 2]
    scores = ember.tensor([1.0, 2.0, 3.0])
    assert prune.L1Unstructured(2).prune(t, importance_scores=scores).tolist() == [0, 0, 2]
    assert prune.Identity().prune(t, default_mask=ember.tensor([1.0, 0, 1])).tolist() \
        == [3, 0, 2]


# ----- remove and state_dict ---------------------------------------------------------------

def test_remove_makes_the_pruning_permanent():
    m = linear()
    weight = m.weight
    prune.l1_unstructured(m, "weight", amount=3)
    assert prune.remove(m, "weight") is m
    assert m.weight is weight and isinstance(m.weight, nn.Parameter)
    assert m.weight.tolist() == [[3, 1, 2, -1], [5, 6, 0, 1], [0, 0, 1, 2]]
    assert list(m._parameters) == ["bias", "weight"] and not m._buffers
    assert not m._forward_pre_hooks and not prune.is_pruned(m)
    assert list(m.state_dict()) == ["bias", "weight"]


def test_state_dict_round_trip_between_pruned_modules():
    src = linear()
    prune.l1_unstructured(src, "weight", amount=4)
    dst = linear(weight=[[1.0] * 4] * 3)
    prune.identity(dst, "weight")
    dst.load_state_dict(src.state_dict())
    x = ember.randn(2, 4)
    np.testing.assert_allclose(dst(x).detach().numpy(), src(x).detach().numpy())
    assert mask_of(dst) == mask_of(src)


def test_deepcopy_of_a_pruned_module_fails_as_in_pytorch():
    m = linear()
    prune.l1_unstructured(m, "weight", amount=3)
    with pytest.raises(RuntimeError, match=r"Only Tensors created explicitly by the user "
                                           r"\(graph leaves\) support the deepcopy protocol"):
        copy.deepcopy(m)                    # module.weight is a non-leaf tensor attribute
    prune.remove(m, "weight")
    assert copy.deepcopy(m).weight.tolist() == m.weight.tolist()


def test_is_pruned_looks_at_submodules():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 2)))
    assert not prune.is_pruned(net)
    prune.random_unstructured(net[1][0], "bias", amount=1)
    assert prune.is_pruned(net)


# ----- containers --------------------------------------------------------------------------

def test_successive_prunings_combine_in_a_container():
    m = linear()
    first = pruning_hooks(prune.l1_unstructured(m, "weight", amount=3))[0]
    prune.l1_unstructured(m, "weight", amount=2)       # among the 9 entries still kept
    assert mask_of(m) == [[1, 0, 1, 0], [1, 1, 0, 1], [0, 0, 1, 1]]   # four 1s tie
    (container,) = pruning_hooks(m)
    assert isinstance(container, prune.PruningContainer) and container._tensor_name == "weight"
    assert len(container) == 2 and container[0] is first
    prune.ln_structured(m, "weight", amount=1, n=1, dim=0)   # among the kept rows
    assert mask_of(m) == [[1, 0, 1, 0], [1, 1, 0, 1], [0, 0, 0, 0]]
    assert [type(p) for p in container] == [prune.L1Unstructured, prune.L1Unstructured,
                                            prune.LnStructured]
    assert pruning_hooks(m) == [container]


def test_structured_after_structured_prunes_among_kept_channels():
    m = linear()
    prune.ln_structured(m, "weight", amount=1, n=1, dim=0)   # row 2 (norm 3) goes
    prune.ln_structured(m, "weight", amount=1, n=1, dim=0)   # then row 0 (7 < 12.5)
    assert mask_of(m) == [[0] * 4, [1] * 4, [0] * 4]
    prune.custom_from_mask(m, "weight", ember.tensor([[0.0, 1, 1, 1]] * 3))
    assert mask_of(m) == [[0] * 4, [0, 1, 1, 1], [0] * 4]


def test_container_errors():
    a = prune.Identity()
    a._tensor_name = "weight"
    b = prune.Identity()
    b._tensor_name = "bias"
    container = prune.PruningContainer(a)
    with pytest.raises(TypeError, match="<class 'int'> is not a BasePruningMethod subclass"):
        container.add_pruning_method(3)
    with pytest.raises(ValueError, match="Can only add pruning methods acting on the parameter "
                                         "named 'weight' to PruningContainer .* Found 'bias'"):
        container.add_pruning_method(b)

    class Odd(prune.BasePruningMethod):
        PRUNING_TYPE = "odd"

        def compute_mask(self, t, default_mask):
            return default_mask

    class NoDim(Odd):
        PRUNING_TYPE = "structured"

    for cls, err, msg in [(Odd, ValueError, "Unrecognized PRUNING_TYPE odd"),
                          (NoDim, AttributeError, "need to have the attribute `dim`")]:
        m = linear()
        prune.identity(m, "weight")
        with pytest.raises(err, match=msg):
            cls.apply(m, "weight")
    far = prune.LnStructured(1, 1, dim=-5)
    far._tensor_name = "weight"
    container.add_pruning_method(far)
    with pytest.raises(IndexError, match="Index is out of bounds for tensor with dimensions 2"):
        container.compute_mask(ember.ones(3, 4), ember.ones(3, 4))


# ----- global pruning ----------------------------------------------------------------------

def test_global_unstructured_prunes_across_tensors():
    a, b = linear(), linear(weight=[[0.1] * 4] * 3, bias=(9.0, 9.0, 0.2))
    params = [(a, "weight"), (b, "weight"), (b, "bias")]
    prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount=14)
    assert mask_of(b) == [[0] * 4] * 3 and mask_of(b, "bias") == [1, 1, 1]
    assert mask_of(a) == [[1, 1, 1, 1], [1, 1, 1, 1], [0, 0, 1, 1]]
    hooks = pruning_hooks(a) + pruning_hooks(b)
    assert [type(h) for h in hooks] == [prune.CustomFromMask] * 3
    assert [h._tensor_name for h in hooks] == ["weight", "weight", "bias"]


def test_global_unstructured_respects_masks_and_importance_scores():
    a, b = linear(), linear()
    prune.l1_unstructured(a, "weight", amount=3)
    scores = {(b, "weight"): ember.full((3, 4), 100.0)}
    prune.global_unstructured([(a, "weight"), (b, "weight")], prune.L1Unstructured,
                              importance_scores=scores, amount=0.5)
    # round(0.5 * 21) = 10 of the 21 kept entries: a's 9, and the first of b's tied scores
    assert int(a.weight_mask.sum()) == 0
    assert mask_of(b) == [[0, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]]
    assert isinstance(pruning_hooks(a)[0], prune.PruningContainer)


def test_global_unstructured_errors():
    m = linear()
    with pytest.raises(TypeError, match="parameters is not an Iterable"):
        prune.global_unstructured(3, prune.L1Unstructured, amount=1)
    with pytest.raises(TypeError, match="importance_scores must be of type dict"):
        prune.global_unstructured([(m, "weight")], prune.L1Unstructured,
                                  importance_scores=[1], amount=1)
    with pytest.raises(TypeError, match='Only "unstructured" PRUNING_TYPE supported for the '
                                        "`pruning_method`. Found method .*RandomStructured.* "
                                        "of type structured"):
        prune.global_unstructured([(m, "weight")], prune.RandomStructured, amount=1)


# ----- errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("amount, err, msg", [
    (-1, ValueError, "amount=-1 should either be a float in the range [0, 1] or a "
                     "non-negative integer"),
    (1.5, ValueError, "amount=1.5 should either be a float in the range [0, 1]"),
    ("x", TypeError, "Invalid type for amount: x. Must be int or float."),
    (ember.tensor(0.5), TypeError, "Invalid type for amount: 0.5."),
])
def test_invalid_amounts(amount, err, msg):
    for method in (prune.RandomUnstructured, prune.L1Unstructured):
        with pytest.raises(err, match=msg.replace("[", r"\[").replace("]", r"\]")
                           .replace("(", r"\(").replace(")", r"\)")):
            method(amount)


def test_too_large_an_amount_leaves_the_module_as_it_was():
    m = linear()
    with pytest.raises(ValueError, match="amount=13 should be smaller than the number of "
                                         "parameters to prune=12"):
        prune.l1_unstructured(m, "weight", amount=13)
    assert list(m._parameters) == ["bias", "weight"] and not m._buffers
    assert not m._forward_pre_hooks
    with pytest.raises(ValueError, match="amount=4 should be smaller than the number of "
                                         "parameters to prune=3"):
        prune.ln_structured(m, "weight", amount=4, n=1, dim=0)


def test_structured_pruning_errors():
    m = linear()
    with pytest.raises(ValueError, match=r"Structured pruning can only be applied to "
                                         r"multidimensional tensors. Found tensor of shape "
                                         r"ember.Size\(\[3\]\) with 1 dims"):
        prune.ln_structured(m, "bias", amount=1, n=2, dim=0)
    with pytest.raises(IndexError, match=r"Invalid index 2 for tensor of size "
                                         r"ember.Size\(\[3, 4\]\)"):
        prune.random_structured(m, "weight", amount=1, dim=2)
    assert "weight" in m._parameters


def test_misuse_errors():
    m = linear()
    with pytest.raises(AssertionError, match="importance_scores should have the same shape as "
                                             "parameter weight of Linear"):
        prune.l1_unstructured(m, "weight", 1, importance_scores=ember.ones(3))
    with pytest.raises(AssertionError, match="importance_scores should have the same shape as "
                                             "tensor t"):
        prune.Identity().prune(ember.ones(3), importance_scores=ember.ones(2))
    with pytest.raises(AssertionError, match="default_mask shape"):
        prune.custom_from_mask(m, "weight", ember.ones(3))
    with pytest.raises(ValueError, match="Parameter 'weight' of module Linear.* has to be "
                                         "pruned before pruning can be removed"):
        prune.remove(m, "weight")
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nope'"):
        prune.identity(m, "nope")
    with pytest.raises(TypeError, match="abstract"):
        prune.BasePruningMethod()
    m.register_buffer("buf", ember.ones(3))
    with pytest.raises(TypeError, match="cannot assign .* to parameter 'buf_orig'"):
        prune.identity(m, "buf")


# ----- training ----------------------------------------------------------------------------

def test_training_a_pruned_model_keeps_pruned_weights_zero():
    ember.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
    prune.l1_unstructured(net[0], "weight", amount=0.5)
    prune.ln_structured(net[2], "weight", amount=1, n=2, dim=1)
    opt = ember.optim.SGD(net.parameters(), lr=0.1)
    x, y = ember.randn(16, 6), ember.randn(16, 2)
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.mse_loss(net(x), y)
        loss.backward()
        masked = net[0].weight_mask == 0
        assert float(net[0].weight_orig.grad[masked].abs().sum()) == 0
        opt.step()
    net(x)
    for layer in (net[0], net[2]):
        assert float(layer.weight[layer.weight_mask == 0].abs().sum()) == 0
        assert float(layer.weight[layer.weight_mask == 1].abs().sum()) > 0
