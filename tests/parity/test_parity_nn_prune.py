"""nn.utils.prune against PyTorch: the same masks for the deterministic methods given the same
weights, through containers and global pruning; the same state_dict keys, weights after
remove, and errors. The weights' magnitudes all differ: where several tie at the cut, PyTorch's
CPU topk and ember's pick different ones (prune._topk_indices), which no test compares."""

import numpy as np
import pytest

import ember
import ember.nn.utils.prune as eprune

torch = pytest.importorskip("torch")
tprune = pytest.importorskip("torch.nn.utils.prune")
pytestmark = pytest.mark.parity


def pair(weight, bias=None):
    """The same Linear in ember and torch, with the given weight (and bias)."""
    weight = np.asarray(weight, dtype=np.float32)
    bias = np.zeros(weight.shape[0], np.float32) if bias is None else np.float32(bias)
    out = []
    for lib, tensor in ((ember, ember.tensor), (torch, torch.tensor)):
        m = lib.nn.Linear(weight.shape[1], weight.shape[0])
        with lib.no_grad():
            m.weight.copy_(tensor(weight))
            m.bias.copy_(tensor(bias))
        out.append(m)
    return out


def spread(rng, shape):
    """Weights of both signs whose magnitudes (and sums of them) do not tie."""
    return rng.standard_normal(shape).astype(np.float32)


def assert_same_mask(ours, theirs, name="weight"):
    np.testing.assert_array_equal(getattr(ours, name + "_mask").numpy(),
                                  getattr(theirs, name + "_mask").numpy())


@pytest.mark.parametrize("shape", [(3, 4), (5, 7), (40, 50), (200, 60)])
@pytest.mark.parametrize("amount", [1, 3, 0.2, 0.5, 0.9, 1.0])
def test_l1_unstructured_masks_match(shape, amount):
    rng = np.random.default_rng([shape[0], int(amount * 10)])
    ours, theirs = pair(spread(rng, shape))
    eprune.l1_unstructured(ours, "weight", amount=amount)
    tprune.l1_unstructured(theirs, "weight", amount=amount)
    assert_same_mask(ours, theirs)


@pytest.mark.parametrize("n", [1, 2, float("inf"), -1])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("amount", [1, 0.5, 0.0, 1.0])
def test_ln_structured_masks_match(n, dim, amount):
    rng = np.random.default_rng([int(n) + 1 if n != float("inf") else 9, dim + 1])
    ours, theirs = pair(spread(rng, (12, 10)))
    eprune.ln_structured(ours, "weight", amount=amount, n=n, dim=dim)
    tprune.ln_structured(theirs, "weight", amount=amount, n=n, dim=dim)
    assert_same_mask(ours, theirs)


def test_importance_scores_and_custom_masks_match():
    rng = np.random.default_rng(3)
    scores = spread(rng, (6, 8))
    ours, theirs = pair(rng.standard_normal((6, 8)))
    eprune.l1_unstructured(ours, "weight", 0.4, importance_scores=ember.tensor(scores))
    tprune.l1_unstructured(theirs, "weight", 0.4, importance_scores=torch.tensor(scores))
    eprune.ln_structured(ours, "weight", 2, 2, 0, importance_scores=ember.tensor(scores))
    tprune.ln_structured(theirs, "weight", 2, 2, 0, importance_scores=torch.tensor(scores))
    mask = rng.random((6, 8)) > 0.3
    eprune.custom_from_mask(ours, "weight", ember.tensor(mask))
    tprune.custom_from_mask(theirs, "weight", torch.tensor(mask))
    eprune.identity(ours, "bias")
    tprune.identity(theirs, "bias")
    assert_same_mask(ours, theirs)
    assert_same_mask(ours, theirs, "bias")
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert list(ours._buffers) == list(theirs._buffers)


def test_containers_match_and_remove_gives_the_same_weights():
    rng = np.random.default_rng(4)
    ours, theirs = pair(spread(rng, (10, 12)), rng.standard_normal(10))
    steps = [("l1_unstructured", dict(amount=0.3)),
             ("ln_structured", dict(amount=2, n=1, dim=0)),
             ("l1_unstructured", dict(amount=5)),
             ("ln_structured", dict(amount=0.25, n=2, dim=1)),
             ("l1_unstructured", dict(amount=0.5))]
    for fn, kwargs in steps:
        getattr(eprune, fn)(ours, "weight", **kwargs)
        getattr(tprune, fn)(theirs, "weight", **kwargs)
        assert_same_mask(ours, theirs)
    (container,) = ours._forward_pre_hooks.values()
    assert [type(p).__name__ for p in container] == \
        [type(p).__name__ for p in next(iter(theirs._forward_pre_hooks.values()))]
    x = rng.standard_normal((3, 12)).astype(np.float32)
    np.testing.assert_allclose(ours(ember.tensor(x)).detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    eprune.remove(ours, "weight")
    tprune.remove(theirs, "weight")
    np.testing.assert_array_equal(ours.weight.detach().numpy(), theirs.weight.detach().numpy())
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert list(ours._parameters) == list(theirs._parameters)


def test_global_unstructured_matches():
    rng = np.random.default_rng(5)
    pairs = [pair(spread(rng, (8, 6)), spread(rng, 8)) for _ in range(2)]
    (o1, t1), (o2, t2) = pairs
    eprune.l1_unstructured(o1, "weight", 7)
    tprune.l1_unstructured(t1, "weight", 7)
    scores = spread(rng, (8, 6))
    eprune.global_unstructured([(o1, "weight"), (o2, "weight"), (o2, "bias")],
                               eprune.L1Unstructured, amount=0.4,
                               importance_scores={(o2, "weight"): ember.tensor(scores)})
    tprune.global_unstructured([(t1, "weight"), (t2, "weight"), (t2, "bias")],
                               tprune.L1Unstructured, amount=0.4,
                               importance_scores={(t2, "weight"): torch.tensor(scores)})
    for ours, theirs in pairs:
        assert_same_mask(ours, theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
    assert_same_mask(o2, t2, "bias")


def outcome(fn):
    try:
        fn()
    except Exception as e:                  # noqa: BLE001  (comparing what each library raises)
        return type(e).__name__, str(e).replace("ember", "torch").split(" at 0x")[0]
    return None


@pytest.mark.parametrize("case", [
    lambda P, lib: P.l1_unstructured(lib.nn.Linear(3, 2), "weight", amount=-1),
    lambda P, lib: P.l1_unstructured(lib.nn.Linear(3, 2), "weight", amount=1.5),
    lambda P, lib: P.random_unstructured(lib.nn.Linear(3, 2), "weight", amount="a"),
    lambda P, lib: P.l1_unstructured(lib.nn.Linear(3, 2), "weight", amount=7),
    lambda P, lib: P.l1_unstructured(lib.nn.Linear(3, 2), "weight", amount=True),
    lambda P, lib: P.random_unstructured(lib.nn.Linear(3, 2), "weight", amount=True),
    lambda P, lib: P.ln_structured(lib.nn.Linear(3, 2), "bias", amount=1, n=1, dim=0),
    lambda P, lib: P.ln_structured(lib.nn.Linear(3, 2), "weight", amount=3, n=1, dim=0),
    lambda P, lib: P.random_structured(lib.nn.Linear(3, 2), "weight", amount=1, dim=5),
    lambda P, lib: P.l1_unstructured(lib.nn.Linear(3, 2), "weight", 1,
                                     importance_scores=lib.ones(3)),
    lambda P, lib: P.custom_from_mask(lib.nn.Linear(3, 2), "weight", lib.ones(3)),
    lambda P, lib: P.remove(lib.nn.Linear(3, 2), "weight"),
    lambda P, lib: P.global_unstructured(3, P.L1Unstructured, amount=1),
    lambda P, lib: P.global_unstructured([(lib.nn.Linear(3, 2), "weight")], P.L1Unstructured,
                                         importance_scores=[1], amount=1),
    lambda P, lib: P.global_unstructured([(lib.nn.Linear(3, 2), "weight")], P.LnStructured,
                                         amount=1, n=1, dim=0),
    lambda P, lib: P.PruningContainer(P.Identity(), 3),
    lambda P, lib: P.Identity().prune(lib.ones(3), importance_scores=lib.ones(2)),
    lambda P, lib: P.BasePruningMethod(),
])
def test_errors_match(case):
    ours = outcome(lambda: case(eprune, ember))
    theirs = outcome(lambda: case(tprune, torch))
    assert theirs is not None and ours == theirs


def test_a_failed_pruning_leaves_the_module_as_torch_does():
    for P, lib in ((eprune, ember), (tprune, torch)):
        m = lib.nn.Linear(3, 2)
        P.l1_unstructured(m, "weight", amount=1.0)
        with pytest.raises(ValueError):
            P.l1_unstructured(m, "weight", amount=7)       # nothing left to prune
        assert list(m._parameters) == ["bias", "weight_orig"]
        assert list(m._buffers) == ["weight_mask"] and not m._forward_pre_hooks
