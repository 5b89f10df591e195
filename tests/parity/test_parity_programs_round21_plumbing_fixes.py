"""What the training-plumbing programs of test_parity_programs_round21_plumbing.py found,
each checked against PyTorch on its own: full backward hooks under no_grad, the builtins a
weights-only load takes, the storage an unknown map_location names, the state-dict metadata
and legacy upgrade of the hook-based spectral_norm, the hook tables under PyTorch's private
names, the private helpers optimizers vendored from PyTorch import, and the warning pickling
a tensor with gradient hooks gives."""

import collections
import copy
import io

import numpy as np
import pytest

import ember
from tests.parity._programs import normal
from tests.parity.test_parity_programs_round21_plumbing import _outcome, _text, _unpickling

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _identity_hooked_under_no_grad(lib):
    class Identity(lib.nn.Module):
        def forward(self, x):
            return x
    module, layer = Identity(), lib.nn.Linear(2, 2)
    for m in (module, layer):
        m.register_full_backward_hook(lambda m, gi, go: None)
    leaf = lib.ones(2, requires_grad=True)
    with lib.no_grad():
        same, out = module(leaf), layer(leaf)
    return [same is leaf, same.requires_grad, out.requires_grad, out.grad_fn is None]


def test_full_backward_hooks_leave_no_grad_calls_alone():
    """Under no_grad a module with full backward hooks wraps nothing: an input handed back
    is the caller's own tensor, still requiring grad."""
    assert _identity_hooked_under_no_grad(ember) == _identity_hooked_under_no_grad(torch) \
        == [True, True, False, True]


def _load_refusal(lib, value):
    buf = io.BytesIO()
    lib.save({"v": value}, buf)
    buf.seek(0)
    return _unpickling(lambda: lib.load(buf))


@pytest.mark.parametrize("value", [frozenset([1]), {1, 2}, 1 + 2j, bytearray(b"a"), Ellipsis],
                         ids=["frozenset", "set", "complex", "bytearray", "ellipsis"])
def test_weights_only_load_takes_the_builtins_torch_takes(value):
    """PyTorch's weights-only loader takes a set, complex and bytearray, and refuses a
    frozenset (and Ellipsis) as an unsupported global."""
    assert _load_refusal(ember, value) == _load_refusal(torch, value)


def test_unknown_map_location_names_the_storage_type():
    def load(lib):
        buf = io.BytesIO()
        lib.save(lib.ones(1), buf)
        buf.seek(0)
        return _outcome(lambda: lib.load(buf, map_location="nope"))
    assert load(ember) == load(torch)


def test_hook_based_spectral_norm_records_its_version_in_the_metadata():
    def metadata(lib):
        nn = lib.nn
        net = nn.Sequential(nn.utils.spectral_norm(nn.Linear(3, 4)), nn.ReLU(),
                            nn.utils.spectral_norm(nn.Conv1d(2, 3, 2), name="weight"))
        before = dict(net.state_dict()._metadata)
        nn.utils.remove_spectral_norm(net[0])
        return str(before), str(dict(net.state_dict()._metadata))
    assert metadata(ember) == metadata(torch)


def _legacy_load(lib, drop=None, strict=True):
    """A version-0 state dict (the normalized weight saved, no weight_v) loaded into a
    spectral-normed Linear: the v it solves for, and what the load reports."""
    rng = np.random.default_rng(14)
    lin = lib.nn.utils.spectral_norm(lib.nn.Linear(3, 4))
    orig = normal(lib, rng, 4, 3)
    legacy = collections.OrderedDict(
        weight_orig=orig, weight=orig / 2.5, bias=lib.zeros(4),
        weight_u=lib.nn.functional.normalize(normal(lib, rng, 4), dim=0))
    legacy._metadata = {"": {"version": 1}}
    if drop:
        del legacy[drop]
    report = _outcome(lambda: repr(lin.load_state_dict(legacy, strict=strict)))
    lin.eval()
    return report, lin.weight_v.detach().numpy(), lin(lib.ones(1, 3)).detach().numpy()


def test_hook_based_spectral_norm_upgrades_a_version_0_state_dict():
    """weight_v is solved so that the loaded weight's sigma (weight_orig / weight) holds."""
    ours, theirs = _legacy_load(ember), _legacy_load(torch)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("strict", [True, False])
def test_hook_based_spectral_norm_reports_an_incomplete_version_0_state_dict(strict):
    assert _legacy_load(ember, "weight_u", strict)[0] == _legacy_load(torch, "weight_u",
                                                                       strict)[0]


def _hook_tables(lib):
    mm = lib.nn.modules.module
    tables = ("forward_hooks", "forward_hooks_always_called", "forward_hooks_with_kwargs",
              "forward_pre_hooks", "backward_hooks")
    handle = mm.register_module_forward_hook(lambda m, a, k, o: None, always_call=True,
                                             with_kwargs=True)
    seen = [len(getattr(mm, "_global_" + t)) for t in tables]
    handle.remove()     # (PyTorch leaves the with_kwargs entry behind)
    seen += [len(getattr(mm, "_global_" + t)) for t in tables if not t.endswith("kwargs")]
    # (that leftover would make a later test's torch.compile warn about global hooks)
    mm._global_forward_hooks_with_kwargs.pop(handle.id, None)
    full, old = lib.nn.Linear(1, 1), lib.nn.Linear(1, 1)
    seen.append(full._is_full_backward_hook)
    full.register_full_backward_hook(lambda *a: None)
    old.register_backward_hook(lambda *a: None)
    return seen + [full._is_full_backward_hook, old._is_full_backward_hook]


def test_module_hook_tables_under_torch_private_names():
    """Tools look at nn.modules.module._global_*_hooks and Module._is_full_backward_hook to
    tell whether hooks are set."""
    assert _hook_tables(ember) == _hook_tables(torch)


def _vendored_lion(lib):
    """An optimizer vendored the way repositories copy PyTorch's: private helpers from
    optim.optimizer and utils._foreach_utils, a multi-tensor path over (device, dtype)
    groups, a docstring assembled from the shared pieces, a scheduler warning with
    EPOCH_DEPRECATION_WARNING."""
    import importlib
    import warnings
    opt_mod = importlib.import_module(lib.__name__ + ".optim.optimizer")
    sched_mod = importlib.import_module(lib.__name__ + ".optim.lr_scheduler")
    foreach_utils = importlib.import_module(lib.__name__ + ".utils._foreach_utils")

    supported = []

    def _multi_tensor_lion(params, grads, exp_avgs, *, lr, beta1, beta2, weight_decay):
        grouped = opt_mod.Optimizer._group_tensors_by_device_and_dtype([params, grads, exp_avgs])
        for (device, _), ((ps, gs, ms), _) in grouped.items():
            # (a Parameter is not a plain Tensor: PyTorch's check says no to it)
            supported.append(foreach_utils._has_foreach_support(ps, device)
                             + 2 * foreach_utils._has_foreach_support(gs, device))
            lib._foreach_mul_(ps, 1 - lr * weight_decay)
            updates = lib._foreach_lerp(ms, gs, 1 - beta1)
            lib._foreach_add_(ps, [u.sign() for u in updates], alpha=-lr)
            lib._foreach_lerp_(ms, gs, 1 - beta2)

    @opt_mod._disable_dynamo_if_unsupported(single_tensor_fn=None)
    def lion(params, grads, exp_avgs, **kwargs):
        _multi_tensor_lion(params, grads, exp_avgs, **kwargs)

    class Lion(opt_mod.Optimizer):
        def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
            super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay,
                                          differentiable=False))

        @opt_mod._use_grad_for_differentiable
        def step(self, closure=None):
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                for p in params:
                    self.state[p].setdefault("exp_avg", lib.zeros_like(p))
                lion(params, [p.grad for p in params],
                     [self.state[p]["exp_avg"] for p in params], lr=group["lr"],
                     beta1=group["betas"][0], beta2=group["betas"][1],
                     weight_decay=group["weight_decay"])

    Lion.__doc__ = f"Lion.\n    Args:\n        {opt_mod._params_doc}\n    {opt_mod._maximize_doc}"
    rng = np.random.default_rng(16)
    model = lib.nn.Linear(3, 2)
    with lib.no_grad():
        model.weight.copy_(normal(lib, rng, 2, 3))
        model.bias.copy_(normal(lib, rng, 2))
    opt = Lion([{"params": [model.weight], "weight_decay": 0.1},
                {"params": [model.bias.double().detach().requires_grad_()]}], lr=0.05)
    sched = sched_mod.StepLR(opt, 1, gamma=0.5)
    x, y = normal(lib, rng, 6, 3), normal(lib, rng, 6, 2)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.param_groups[1]["params"][0].grad = lib.ones(2, dtype=lib.float64)
        opt.step()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sched.step(len(losses))
        losses.append(loss.item())
    epoch_warned = [str(w.message) == sched_mod.EPOCH_DEPRECATION_WARNING for w in caught]
    return (losses, model.weight.detach().numpy(), opt.param_groups[1]["params"][0].tolist(),
            epoch_warned, "maximize" in Lion.__doc__, supported)


def test_an_optimizer_vendored_from_torch_runs_on_its_private_helpers():
    ours, theirs = _vendored_lion(ember), _vendored_lion(torch)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)
    assert ours[2:] == theirs[2:]


def _pickled_with_hooks(lib):
    """The warnings pickling and saving tensors with gradient hooks raise."""
    import pickle
    import warnings
    leaf = lib.ones(2, requires_grad=True)
    leaf.register_hook(lambda g: g)
    quiet = lib.ones(2, requires_grad=True)
    quiet.register_hook(lib.utils.hooks.unserializable_hook(lambda g: g * 2))
    param = lib.nn.Parameter(lib.ones(2))
    param.register_hook(lambda g: g)
    inner = leaf * 2
    inner.register_hook(lambda g: g)
    counts = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for run in (lambda: pickle.dumps(leaf), lambda: lib.save({"a": leaf, "b": leaf},
                                                                   io.BytesIO()),
                    lambda: pickle.dumps(quiet), lambda: lib.save(param, io.BytesIO()),
                    lambda: copy.deepcopy(leaf),
                    lambda: lib.utils.hooks.warn_if_has_hooks(inner)):
            run()
            counts.append(len(caught))
    texts = {_text(w.message).split(" at 0x")[0] for w in caught}
    return counts, texts, [w.category.__name__ for w in caught]


def test_pickling_a_tensor_warns_that_its_gradient_hooks_stay_behind():
    assert _pickled_with_hooks(ember) == _pickled_with_hooks(torch)
