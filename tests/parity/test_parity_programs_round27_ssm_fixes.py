"""What the state-space and operator-learning programs of round 27
(test_parity_programs_round27_ssm.py and its _retention and _operators siblings) found, each
pinned against PyTorch: torch.func's jacrev and jacfwd take only real inputs (every positional
argument, whatever argnums picks) and give only real outputs (aux aside), with PyTorch's
message; autograd.functional differentiates scalars with no grad_outputs where PyTorch does
(each Jacobian row without vectorize, vjp's v=None, the first gradient of vhp, hvp and
hessian), so a complex output that requires grad raises there, while the forward-mode and
vectorized Jacobians keep their complex results; split's size-mismatch message names the dim
as given (-1, not 1); and an lr scheduler made before a param group was added raises
PyTorch's ValueError (its strict zips) where the new lrs come from base_lrs or lr_lambdas
(closed forms, LambdaLR, MultiplicativeLR, cosine restarts, CyclicLR, SequentialLR), instead
of leaving the new group alone."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(fn):
    """The value (as nested lists of complex NumPy values) or the (type, message) raised."""
    try:
        out = fn()
    except Exception as e:      # noqa: BLE001 (the error is the result)
        return type(e).__name__, str(e).replace("torch.", "").replace("ember.", "")
    return _numpy(out)


def _numpy(value):
    if isinstance(value, (tuple, list)):
        return [_numpy(v) for v in value]
    if isinstance(value, dict):
        return {k: _numpy(v) for k, v in value.items()}
    return value.detach().resolve_conj().numpy().astype(np.complex128)


def _same(ours, theirs):
    if isinstance(theirs, tuple):
        assert ours == theirs
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b)
    elif isinstance(theirs, dict):
        assert ours.keys() == theirs.keys()
        for k in theirs:
            _same(ours[k], theirs[k])
    else:
        assert not isinstance(ours, tuple), ours
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)


_FUNC_CASES = {
    "jacrev_complex_out": lambda lib: lib.func.jacrev(lambda x: x * 1j)(lib.ones(2)),
    "jacrev_complex_in": lambda lib: lib.func.jacrev(lambda x: x * 2)(
        lib.ones(2, dtype=lib.cfloat)),
    "jacrev_second_out": lambda lib: lib.func.jacrev(lambda x, y: (x * 2, y * 1j), argnums=1)(
        lib.ones(2), lib.ones(2)),
    "jacrev_unselected_in": lambda lib: lib.func.jacrev(lambda x, y: x * 2)(
        lib.ones(2), lib.ones(2, dtype=lib.cfloat)),
    "jacrev_dict_out": lambda lib: lib.func.jacrev(lambda x: {"a": x * 2, "b": x * 1j})(
        lib.ones(2)),
    "jacrev_complex_aux": lambda lib: lib.func.jacrev(lambda x: (x * 2, x * 1j),
                                                      has_aux=True)(lib.ones(2)),
    "jacfwd_complex_out": lambda lib: lib.func.jacfwd(lambda x: x * 1j)(lib.ones(2)),
    "jacfwd_unselected_in": lambda lib: lib.func.jacfwd(lambda x, y: x * y, argnums=0)(
        lib.ones(2), lib.ones(2, dtype=lib.cfloat)),
    "jacfwd_complex_aux": lambda lib: lib.func.jacfwd(lambda x: (x * 2, x * 1j),
                                                      has_aux=True)(lib.ones(2)),
    "hessian_complex_in": lambda lib: lib.func.hessian(lambda x: x.abs().sum())(
        lib.ones(2, dtype=lib.cfloat)),
    "hessian_real": lambda lib: lib.func.hessian(lambda x: (x.sin() * x).sum())(
        lib.tensor([0.3, 0.7])),
    "vjp_complex": lambda lib: lib.func.vjp(lambda x: x * 1j, lib.ones(2))[0],
    "jvp_complex": lambda lib: lib.func.jvp(lambda x: x * 1j, (lib.ones(2),),
                                            (lib.ones(2),)),
}


@pytest.mark.parametrize("case", list(_FUNC_CASES))
def test_func_jacobians_refuse_complex_like_torch(case):
    _same(_outcome(lambda: _FUNC_CASES[case](ember)), _outcome(lambda: _FUNC_CASES[case](torch)))


def _f(lib):
    return lambda x: x * 1j


_FUNCTIONAL_CASES = {
    "jacobian": lambda lib: lib.autograd.functional.jacobian(_f(lib), lib.ones(2)),
    "jacobian_strict": lambda lib: lib.autograd.functional.jacobian(_f(lib), lib.ones(2),
                                                                    strict=True),
    "jacobian_vectorize": lambda lib: lib.autograd.functional.jacobian(_f(lib), lib.ones(2),
                                                                       vectorize=True),
    "jacobian_forward": lambda lib: lib.autograd.functional.jacobian(
        _f(lib), lib.ones(2), strategy="forward-mode", vectorize=True),
    "jacobian_complex_in": lambda lib: lib.autograd.functional.jacobian(
        lambda x: x.real * 3, lib.tensor([1 + 2j, 3j])),
    "jacobian_unconnected": lambda lib: lib.autograd.functional.jacobian(
        lambda x: lib.zeros(2, dtype=lib.cfloat), lib.ones(2)),
    "vjp_no_v": lambda lib: lib.autograd.functional.vjp(lambda x: (x * 1j).sum(), lib.ones(2)),
    "vjp_v": lambda lib: lib.autograd.functional.vjp(lambda x: (x * 1j).sum(), lib.ones(2),
                                                     lib.tensor(1 + 0j)),
    "jvp": lambda lib: lib.autograd.functional.jvp(lambda x: (x * 1j).sum(), lib.ones(2),
                                                   lib.ones(2)),
    "vhp": lambda lib: lib.autograd.functional.vhp(
        lambda x: (x * x).sum(), lib.ones(2, dtype=lib.cfloat), lib.ones(2, dtype=lib.cfloat)),
    "hvp": lambda lib: lib.autograd.functional.hvp(
        lambda x: (x * x).sum(), lib.ones(2, dtype=lib.cfloat), lib.ones(2, dtype=lib.cfloat)),
    "hessian": lambda lib: lib.autograd.functional.hessian(
        lambda x: (x * x).sum(), lib.ones(2, dtype=lib.cfloat)),
    "hessian_vectorize": lambda lib: lib.autograd.functional.hessian(
        lambda x: (x * x).sum(), lib.ones(2, dtype=lib.cfloat), vectorize=True),
    "hessian_abs": lambda lib: lib.autograd.functional.hessian(
        lambda x: (x * x).abs().sum(), lib.tensor([1 + 1j, 2 - 1j])),
    # forward-over-reverse: complex inputs pass, a complex output raises
    "hessian_forward": lambda lib: lib.autograd.functional.hessian(
        lambda x: (x * x).sum(), lib.ones(2, dtype=lib.cfloat), vectorize=True,
        outer_jacobian_strategy="forward-mode"),
    "hessian_forward_real_out": lambda lib: lib.autograd.functional.hessian(
        lambda x: (x.abs() ** 2 * x.real).sum(), lib.tensor([1 + 2j, -0.5 + 0.3j]),
        vectorize=True, outer_jacobian_strategy="forward-mode").detach(),
    "hessian_forward_constant": lambda lib: lib.autograd.functional.hessian(
        lambda x: lib.ones((), dtype=lib.cfloat), lib.ones(2), vectorize=True,
        outer_jacobian_strategy="forward-mode"),
}


@pytest.mark.parametrize("case", list(_FUNCTIONAL_CASES))
def test_functional_complex_outputs_like_torch(case):
    _same(_outcome(lambda: _FUNCTIONAL_CASES[case](ember)),
          _outcome(lambda: _FUNCTIONAL_CASES[case](torch)))


@pytest.mark.parametrize("call", [
    lambda lib, x: x.split([1, 1], dim=-1),
    lambda lib, x: lib.split(x, [1, 1, 2], -1),
    lambda lib, x: x.split_with_sizes([2], -2),
    lambda lib, x: lib.split_with_sizes(x, [4], dim=-2),
    lambda lib, x: x.split([1, 1], dim=1),
])
def test_split_sizes_message_names_dim_as_given(call):
    _same(_outcome(lambda: call(ember, ember.ones(3, 3))),
          _outcome(lambda: call(torch, torch.ones(3, 3))))


_SCHEDULERS = {
    "LambdaLR": (lambda S, o: S.LambdaLR(o, lambda e: 0.5 ** e), None),
    "MultiplicativeLR": (lambda S, o: S.MultiplicativeLR(o, lambda e: 0.5), None),
    "StepLR": (lambda S, o: S.StepLR(o, 1), None),
    "StepLR_epoch": (lambda S, o: S.StepLR(o, 1), 2),
    "CosineAnnealingLR": (lambda S, o: S.CosineAnnealingLR(o, 4), None),
    "CosineAnnealingLR_restart": (lambda S, o: S.CosineAnnealingLR(o, 1), None),
    "CosineAnnealingLR_epoch": (lambda S, o: S.CosineAnnealingLR(o, 4), 2),
    "LinearLR": (lambda S, o: S.LinearLR(o), None),
    "ExponentialLR_epoch": (lambda S, o: S.ExponentialLR(o, 0.5), 2),
    "CyclicLR": (lambda S, o: S.CyclicLR(o, 0.01, 0.1), None),
    "OneCycleLR": (lambda S, o: S.OneCycleLR(o, 0.1, total_steps=10), None),
    "CosineAnnealingWarmRestarts": (lambda S, o: S.CosineAnnealingWarmRestarts(o, 2), None),
    "WarmRestarts_epoch": (lambda S, o: S.CosineAnnealingWarmRestarts(o, 2), 2.5),
    "ReduceLROnPlateau": (lambda S, o: S.ReduceLROnPlateau(o, patience=0), None),
    "SequentialLR": (lambda S, o: S.SequentialLR(o, [S.ConstantLR(o), S.ExponentialLR(o, 0.9)],
                                                 [1]), None),
    "ChainedScheduler": (lambda S, o: S.ChainedScheduler([S.StepLR(o, 1),
                                                          S.ExponentialLR(o, 0.9)]), None),
}


def _group_added_after(lib, name):
    """The lrs over three steps of a scheduler made before a second param group was added
    (the S4/Hyena optimizer setups add their groups first; this is the other order), or the
    error PyTorch's strict zips raise."""
    make, epoch = _SCHEDULERS[name]
    p, q = lib.nn.Parameter(lib.ones(2)), lib.nn.Parameter(lib.ones(2))
    opt = lib.optim.SGD([p], lr=0.1, momentum=0.9)
    sched = make(lib.optim.lr_scheduler, opt)
    opt.add_param_group({"params": [q], "lr": 0.01})
    lrs = []
    try:
        for i in range(3):
            opt.step()
            if name == "ReduceLROnPlateau":
                sched.step(1.0)
            else:
                sched.step() if epoch is None else sched.step(epoch + i)
            lrs.append([g["lr"] for g in opt.param_groups])
    except (ValueError, KeyError) as e:
        return lrs, type(e).__name__, str(e)
    return lrs, None, None


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", list(_SCHEDULERS))
def test_scheduler_with_group_added_after_like_torch(name):
    ours, theirs = _group_added_after(ember, name), _group_added_after(torch, name)
    assert ours[1:] == theirs[1:]
    np.testing.assert_allclose(np.array(ours[0], dtype=float).reshape(-1),
                               np.array(theirs[0], dtype=float).reshape(-1), rtol=1e-12)
