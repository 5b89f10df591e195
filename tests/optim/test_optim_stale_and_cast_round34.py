"""What an optimizer step on stale state leaves behind (PyTorch's order of writes), complex
SGD's stale messages, and the dtypes load_state_dict casts state to (round 34)."""

import numpy as np
import pytest

import ember


def _stale_setup(name, foreach, stale_shape=(5,), **options):
    """Three parameters of shape (3,) step once with gradient 1; the middle one then takes
    ``stale_shape``; all get gradient 1 again."""
    params = [ember.nn.Parameter(ember.zeros(3)) for _ in range(3)]
    opt = getattr(ember.optim, name)(params, foreach=foreach, **options)
    for p in params:
        p.grad = ember.ones(3)
    opt.step()
    params[1].data = ember.zeros(stale_shape)
    for p in params:
        p.grad = ember.ones(tuple(p.shape))
    return params, opt


@pytest.mark.parametrize("name", ["Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Adagrad",
                                  "Adadelta", "RMSprop"])
def test_single_tensor_step_counts_stop_at_the_failing_parameter(name):
    params, opt = _stale_setup(name, False)
    before = [dict((k, v.clone()) for k, v in opt.state[p].items()) for p in params]
    with pytest.raises(RuntimeError, match="must match the size"):
        opt.step()
    assert [opt.state[p]["step"].item() for p in params] == [2.0, 2.0, 1.0]
    for key, value in opt.state[params[2]].items():     # the last one untouched
        assert ember.equal(value, before[2][key]), key
    assert not ember.equal(opt.state[params[0]]["step"], before[0]["step"])


@pytest.mark.parametrize("name", ["Adam", "NAdam", "RAdam", "Adamax"])
def test_multi_tensor_list_op_stops_at_the_failing_parameter(name):
    """exp_avg (3,) cannot take the (5,) gradient: the lerp list op wrote the first
    parameter's average only, after every step was counted."""
    params, opt = _stale_setup(name, True)
    averages = [opt.state[p]["exp_avg"].clone() for p in params]
    with pytest.raises(RuntimeError, match="must match the size"):
        opt.step()
    assert [opt.state[p]["step"].item() for p in params] == [2.0, 2.0, 2.0]
    np.testing.assert_allclose(opt.state[params[0]]["exp_avg"].numpy(), [0.19] * 3,
                               rtol=1e-6)
    for p, a in zip(params[1:], averages[1:]):
        np.testing.assert_array_equal(opt.state[p]["exp_avg"].numpy(), a.numpy())
    assert params[0].tolist() == params[2].tolist()     # no parameter stepped again


def test_nadam_mu_product_kept_where_the_step_did_not_reach():
    params, opt = _stale_setup("NAdam", False)
    product = opt.state[params[2]]["mu_product"].item()
    with pytest.raises(RuntimeError):
        opt.step()
    assert opt.state[params[2]]["mu_product"].item() == product
    assert opt.state[params[0]]["mu_product"].item() != product


def test_multi_tensor_broadcastable_stale_average_written_for_all():
    """A (1,) parameter under (3,) state: the averages broadcast (written for all three),
    the parameters' update fails at the middle one, the first one stepped."""
    params, opt = _stale_setup("Adam", True, stale_shape=(1,))
    with pytest.raises(RuntimeError, match=r"output with shape \[1\] doesn't match the "
                                           r"broadcast shape \[3\]"):
        opt.step()
    sums = [opt.state[p]["exp_avg"].tolist() for p in params]
    assert sums[0] == sums[2] and sums[1] == pytest.approx([0.19] * 3)
    assert params[0].tolist() != params[2].tolist()


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("name, options", [("SGD", {"lr": 0.1, "momentum": 0.9}),
                                           ("Adadelta", {})])
def test_complex_stale_message_names_the_complex_shapes(foreach, name, options):
    params = [ember.nn.Parameter(ember.ones(3, dtype=ember.complex64)) for _ in range(2)]
    opt = getattr(ember.optim, name)(params, foreach=foreach, **options)
    for p in params:
        p.grad = ember.ones(3, dtype=ember.complex64)
    opt.step()
    params[1].data = ember.ones(1, dtype=ember.complex64)
    for p in params:
        p.grad = ember.ones(tuple(p.shape), dtype=ember.complex64)
    with pytest.raises(RuntimeError) as info:
        opt.step()
    # (a multi-tensor Adadelta steps the real views, as PyTorch's)
    shapes = ("[1, 2]", "[3, 2]") if name == "Adadelta" and foreach else ("[1]", "[3]")
    assert str(info.value) == (f"output with shape {shapes[0]} doesn't match the broadcast "
                               f"shape {shapes[1]}")


def test_sgd_16_bit_stale_buffer_takes_the_gradient_row_by_row():
    p = ember.nn.Parameter(ember.zeros(2, 3, dtype=ember.float16))
    opt = ember.optim.SGD([p], lr=0.1, momentum=0.5, foreach=False)
    p.grad = ember.ones(2, 3, dtype=ember.float16)
    opt.step()
    p.data = ember.zeros(3, dtype=ember.float16)
    p.grad = ember.tensor([1.0, 2.0, 3.0], dtype=ember.float16)
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match"):
        opt.step()
    assert opt.state[p]["momentum_buffer"].tolist() == [[1.5, 2.5, 3.5]] * 2


@pytest.mark.parametrize("dtype", [ember.float64, ember.float16, ember.bfloat16])
def test_load_state_dict_casts_every_state_tensor_to_a_float_parameter(dtype):
    p = ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.Adam([p])
    p.grad = ember.ones(2)
    opt.step()
    saved = opt.state_dict()
    saved["state"][0].update(counts=ember.tensor([1, 2]), mask=ember.tensor([True]),
                             listed={"step": [ember.tensor([3])]},
                             nested={"step": ember.tensor([4])})
    q = ember.nn.Parameter(ember.ones(2, dtype=dtype))
    loaded = ember.optim.Adam([q])
    loaded.load_state_dict(saved)
    state = loaded.state[q]
    assert state["step"].dtype == ember.float32
    assert state["exp_avg"].dtype == state["counts"].dtype == state["mask"].dtype == dtype
    assert state["counts"].tolist() == [1, 2] and state["mask"].tolist() == [1]
    assert state["listed"]["step"][0].dtype == dtype        # a list's items: no step counts
    assert state["nested"]["step"].dtype == ember.int64


def test_load_state_dict_only_moves_state_of_a_complex_parameter():
    p = ember.nn.Parameter(ember.ones(2, dtype=ember.complex64))
    opt = ember.optim.SGD([p], lr=0.1)
    saved = opt.state_dict()
    saved["state"][0] = {"counts": ember.tensor([1, 2]), "avg": ember.ones(2)}
    opt.load_state_dict(saved)
    assert opt.state[p]["counts"].dtype == ember.int64
    assert opt.state[p]["avg"].dtype == ember.float32


def test_reduce_lr_on_plateau_load_state_dict_resets_the_worst_value():
    p = ember.nn.Parameter(ember.ones(2))
    s = ember.optim.lr_scheduler.ReduceLROnPlateau(ember.optim.SGD([p], lr=0.1), mode="max")
    assert s.mode_worse == -float("inf")
    s.load_state_dict({"mode": "min"})
    assert s.mode_worse == float("inf")
    with pytest.raises(ValueError, match="threshold mode x is unknown!"):
        s.load_state_dict({"threshold_mode": "x"})


def test_state_of_an_unknown_id_round_trips():
    p = ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.SGD([p], lr=0.1, momentum=0.9)
    saved = opt.state_dict()
    saved["state"][7] = {"momentum_buffer": ember.zeros(2)}
    opt.load_state_dict(saved)
    assert list(opt.state) == [7]
    assert list(opt.state_dict()["state"]) == [7]


def test_state_under_any_non_tensor_key_round_trips():
    """(review) PyTorch keeps every key that is not a parameter as it came ((3,), "k"); a
    tensor matching no parameter is left out (PyTorch raises a KeyError)."""
    p = ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.SGD([p], lr=0.1)
    saved = opt.state_dict()
    saved["state"] = {7: {"x": 1}, "k": {"y": 2}, (3,): {"z": 3}}
    opt.load_state_dict(saved)
    opt.state[ember.ones(2)] = {"w": 4}
    assert opt.state_dict()["state"] == {7: {"x": 1}, "k": {"y": 2}, (3,): {"z": 3}}


def test_sgd_differentiable_buffer_starts_at_version_zero():
    p = ember.tensor([1.0, 2.0], requires_grad=True).clone()
    opt = ember.optim.SGD([p], lr=0.1, momentum=0.9, differentiable=True)
    p.grad = ember.ones(2)
    opt.step()
    assert opt.state[p]["momentum_buffer"]._version == 0
    assert opt.state[p]["momentum_buffer"].tolist() == [1.0, 1.0]
    opt.step()
    assert opt.state[p]["momentum_buffer"]._version == 2
