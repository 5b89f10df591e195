"""Regression tests for the LR-scheduler bugs the round-37 fuzzer found (expected values are
PyTorch 2.13's): MultiplicativeLR's own constructor, LinearLR's closed form, CyclicLR's
momentum over a group added after it, and 16-bit tensor lrs in the Adam family, Adagrad and
foreach RAdam."""

import warnings

import pytest

import ember
from ember.optim import lr_scheduler as L


def _sgd(*lrs, momentum=0.0):
    groups = [{"params": [ember.nn.Parameter(ember.zeros(2))], "lr": lr} for lr in lrs]
    return ember.optim.SGD(groups, lr=0.1, momentum=momentum)


def test_multiplicative_lr_is_no_lambda_lr():
    sched = L.MultiplicativeLR(_sgd(0.1), lambda e: 0.5)
    assert not isinstance(sched, L.LambdaLR)
    with pytest.raises(TypeError, match=r"^MultiplicativeLR.__init__\(\) got an unexpected "
                                        r"keyword argument 'verbose'$"):
        L.MultiplicativeLR(_sgd(0.1), lambda e: 0.5, verbose=True)


@pytest.mark.parametrize("lr_lambda, error, message", [
    (0.5, TypeError, "lr_lambda should be a function, but got float"),
    ([lambda e: 1.0, "x"], TypeError, "lr_lambda should be a function, but got str"),
    ([None], ValueError, "Expected 2 lr_lambdas, but got 1"),      # the length first
])
def test_multiplicative_lr_checks_its_functions(lr_lambda, error, message):
    opt = _sgd(0.1, 0.1) if isinstance(lr_lambda, list) else _sgd(0.1)
    with pytest.raises(error) as info:
        L.MultiplicativeLR(opt, lr_lambda)
    assert str(info.value) == message
    assert opt.param_groups[0]["lr"] == 0.1


def test_multiplicative_lr_state_dict_round_trip():
    opt = _sgd(1.0)
    sched = L.MultiplicativeLR(opt, lambda e: 0.5)
    opt.step()
    sched.step()
    state = sched.state_dict()
    assert state["lr_lambdas"] == [None] and state["last_epoch"] == 1
    sched.load_state_dict(state)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == 0.25


def test_linear_lr_closed_form_rounds_as_torch():
    opt = _sgd(0.1)
    sched = L.LinearLR(opt, start_factor=0.25)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched.step(-1)
        assert opt.param_groups[0]["lr"] == 0.010000000000000002
        sched.step(3)
    assert opt.param_groups[0]["lr"] == 0.06999999999999999
    assert sched.get_last_lr() == [0.06999999999999999]


def test_linear_lr_closed_form_zero_total_iters():
    sched = L.LinearLR(_sgd(0.1), total_iters=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ZeroDivisionError, match="^float division by zero$"):
            sched.step(1)


def test_cyclic_lr_group_added_after_it():
    opt = _sgd(2.0, momentum=0.9)
    sched = L.CyclicLR(opt, 0.001, 0.1, step_size_up=5)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.0208, abs=1e-15)
    opt.add_param_group({"params": [ember.nn.Parameter(ember.zeros(2))], "lr": 0.02})
    opt.step()
    with pytest.raises(ValueError, match=r"^zip\(\) argument 2 is shorter than argument 1$"):
        sched.step()
    # the known group's momentum moved on, its lr did not (the error came first)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.0208, abs=1e-15)
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.86, abs=1e-15)
    assert opt.param_groups[1]["momentum"] == 0.9
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"^zip\(\) argument 2 is shorter"):
            sched.get_lr()


def _trajectory(name, dtype, **options):
    p = ember.nn.Parameter(ember.ones(1))
    p.grad = ember.full((1,), 0.5)
    options.setdefault("foreach", False)
    opt = getattr(ember.optim, name)([p], lr=ember.tensor(0.3, dtype=dtype), **options)
    out = []
    for i in range(4):
        before = p.item()
        opt.step()
        out.append(before - p.item())
        p.grad = ember.full((1,), 0.5 - 0.2 * i)
    return out, p.item()


def test_adam_with_a_16_bit_tensor_lr():
    # lr / (1 - beta1 ** t) rounds to the lr's dtype from the float32 quotient
    steps, _ = _trajectory("Adam", ember.bfloat16)
    assert steps == pytest.approx([0.299999952, 0.301328123, 0.288970798, 0.257534921],
                                  rel=1e-7)
    steps, _ = _trajectory("Adam", ember.float16)
    assert steps == pytest.approx([0.299999952, 0.300029308, 0.288462043, 0.256816357],
                                  rel=1e-7)


@pytest.mark.parametrize("name, dtype, options, expected", [
    ("NAdam", "bfloat16", {}, 0.201820016),
    ("NAdam", "float16", {}, 0.203281939),
    ("Adamax", "bfloat16", {}, -0.057662189),
    ("Adamax", "float16", {}, -0.0553542525),
    ("Adagrad", "float16", {"lr_decay": 0.1}, 0.379677176),
    ("Adagrad", "float16", {"lr_decay": 0.1, "foreach": True}, 0.379677176),
    ("RAdam", "bfloat16", {"foreach": True}, 0.47149691),
    ("RAdam", "float16", {"foreach": True}, 0.472650111),
])
def test_16_bit_tensor_lrs_of_other_optimizers(name, dtype, options, expected):
    _, final = _trajectory(name, getattr(ember, dtype), **options)
    assert final == pytest.approx(expected, rel=1e-6)
