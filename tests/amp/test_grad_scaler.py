import math

import pytest

import ember


def _setup(init_scale=4.0, growth_interval=2):
    p = ember.nn.Parameter(ember.ones(3))
    opt = ember.optim.SGD([p], lr=0.1)
    return p, opt, ember.amp.GradScaler("cpu", init_scale=init_scale,
                                        growth_interval=growth_interval)


def test_scale_unscale_step_update():
    p, opt, scaler = _setup()
    loss = (p * 2).sum()
    scaled = scaler.scale(loss)
    assert scaled.item() == 24.0 and scaler.get_scale() == 4.0
    scaled.backward()
    assert p.grad.tolist() == [8.0, 8.0, 8.0]
    scaler.unscale_(opt)
    assert p.grad.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match="already been called on this optimizer"):
        scaler.unscale_(opt)
    scaler.step(opt)
    assert ember.allclose(p.detach(), ember.full((3,), 0.8))
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    assert scaler.state_dict() == {"scale": 4.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                                   "growth_interval": 2, "_growth_tracker": 1}
    with pytest.raises(AssertionError, match="No inf checks"):
        scaler.update()


def test_overflow_skips_the_step_and_backs_off_then_grows():
    p, opt, scaler = _setup()
    scaler.scale(p.sum())
    p.grad = ember.tensor([math.inf, 1.0, 1.0])
    assert scaler.step(opt) is None
    assert p.tolist() == [1.0, 1.0, 1.0]                 # skipped
    scaler.update()
    assert scaler.get_scale() == 2.0 and scaler.state_dict()["_growth_tracker"] == 0
    for _ in range(2):                                   # two clean steps grow it
        p.grad = ember.ones(3)
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 4.0
    p.grad = ember.tensor([math.nan, 0.0, 0.0])
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0


def test_disabled_and_errors():
    off = ember.amp.GradScaler("cpu", enabled=False)
    t = ember.ones(2)
    assert off.scale(t) is t and off.get_scale() == 1.0 and off.state_dict() == {}
    p, opt, scaler = _setup()
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: 0)
    with pytest.raises(RuntimeError, match="source state dict is empty"):
        scaler.load_state_dict({})
    for call in (lambda: scaler.unscale_(opt), lambda: scaler.update(new_scale=2.0)):
        with pytest.raises(AssertionError, match=r"_scale is None.  This may indicate your "
                                                 r"script did not use scaler.scale\(loss"):
            call()                                       # PyTorch asserts a scale() came first
    scaler.scale(ember.ones(1))
    with pytest.raises(AssertionError, match="new_scale should be a float"):
        scaler.update(new_scale=ember.ones(2))
    with pytest.raises(ValueError, match="outputs must be a Tensor"):
        scaler.scale(3.0)
    half = ember.nn.Parameter(ember.ones(2, dtype=ember.float16))
    half.grad = ember.ones(2, dtype=ember.float16)
    scaler.scale(ember.ones(1))
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients."):
        scaler.unscale_(ember.optim.SGD([half], lr=0.1))
    scaled = scaler.scale([ember.ones(1), (ember.ones(1),)])
    assert scaled[0].item() == 4.0 and scaled[1][0].item() == 4.0


@pytest.mark.skipif(ember.cuda.is_available(), reason="checks the no-CUDA fallback")
def test_cuda_scaler_without_cuda_disables():
    with pytest.warns(UserWarning, match="CUDA is not available.  Disabling."):
        scaler = ember.amp.GradScaler()
    assert not scaler.is_enabled()


def test_state_dict_round_trip_and_new_scale():
    _, _, scaler = _setup(init_scale=8.0)
    scaler.scale(ember.ones(1))
    scaler.update(new_scale=32.0)
    other = ember.amp.GradScaler("cpu")
    other.load_state_dict(scaler.state_dict())
    assert other.get_scale() == 32.0 and other.get_growth_interval() == 2


def test_mixed_precision_training_converges_like_float32():
    """A small regression trained under autocast + GradScaler ends near float32's loss."""
    def train(amp):
        ember.manual_seed(0)
        model = ember.nn.Sequential(ember.nn.Linear(8, 32), ember.nn.Tanh(),
                                    ember.nn.Linear(32, 1))
        opt = ember.optim.Adam(model.parameters(), lr=1e-2)
        scaler = ember.amp.GradScaler("cpu", enabled=amp)
        x = ember.randn(64, 8)
        y = x.sum(1, keepdim=True).sin()
        for _ in range(150):
            opt.zero_grad()
            with ember.autocast("cpu", enabled=amp):
                loss = ember.nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return loss.item()
    full, mixed = train(False), train(True)
    assert full < 0.05 and mixed < 0.08, (full, mixed)


def test_errors_name_the_call_and_the_factors_are_asserted():
    p, opt, scaler = _setup()
    p.grad = ember.ones(3)
    with pytest.raises(AssertionError, match=r"Attempted step but _scale is None"):
        scaler.step(opt)
    with pytest.raises(AssertionError, match=r"The growth factor must be > 1\.0\."):
        ember.amp.GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(AssertionError, match=r"The backoff factor must be < 1\.0\."):
        ember.amp.GradScaler("cpu", backoff_factor=1.0)


def test_the_scale_is_held_in_float32():
    # PyTorch keeps the scale in a float32 tensor: get_scale() reads its rounded value
    scaler = ember.amp.GradScaler("cpu", init_scale=0.1)
    assert scaler.get_scale() == 0.1                    # not made yet: the number given
    scaler.scale(ember.ones(1))
    assert scaler.get_scale() == 0.10000000149011612
    assert scaler.state_dict()["scale"] == 0.10000000149011612
    scaler.update(new_scale=0.3)
    assert scaler.get_scale() == 0.30000001192092896
    scaler.update(new_scale=ember.tensor(5))           # any 1-element tensor is copied in
    assert scaler.get_scale() == 5.0
    scaler.update(new_scale=ember.tensor(2.0, dtype=ember.float64))
    assert scaler.get_scale() == 2.0
    fresh = ember.amp.GradScaler("cpu")
    fresh.load_state_dict({"scale": 0.1, "growth_factor": 2.0, "backoff_factor": 0.5,
                           "growth_interval": 5, "_growth_tracker": 1})
    assert fresh.get_scale() == 0.1
    with pytest.raises(AssertionError, match="Attempted update but _scale is None"):
        fresh.update()


def test_scale_promotes_a_0dim_float16_loss_to_float32():
    scaler = ember.amp.GradScaler("cpu")
    loss = ember.tensor(1.0, dtype=ember.float16)       # 65536 overflows float16
    scaled = scaler.scale(loss)
    assert scaled.dtype == ember.float32 and scaled.item() == 65536.0
    batch = scaler.scale(ember.tensor([1.0, 2.0], dtype=ember.bfloat16))
    assert batch.dtype == ember.bfloat16 and batch.tolist() == [65536.0, 131072.0]
