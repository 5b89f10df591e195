"""What the round-32 neural-field programs found, pinned against PyTorch: an optimizer step
whose state was kept from before the parameter changed shape (TensoRF/DVGO upsample a grid by
``p.data = ...`` and forget to rebuild the optimizer) raises PyTorch's RuntimeError, not
NumPy's ValueError."""

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

OPTIMIZERS = [("Adam", {}), ("AdamW", {"amsgrad": True}), ("SGD", {"momentum": 0.9}),
              ("RMSprop", {"centered": True}), ("Adagrad", {}), ("Adamax", {}), ("NAdam", {}),
              ("RAdam", {}), ("Adadelta", {})]


def _stale_step_error(lib, name, kwargs, new_shape):
    p = lib.nn.Parameter(lib.ones(2, 2))
    opt = getattr(lib.optim, name)([p], lr=0.1, **kwargs)
    p.sum().backward()
    opt.step()
    p.data = lib.ones(new_shape)     # the grid upsampled in place of a new Parameter
    p.grad = None
    (p * 2).sum().backward()
    with pytest.raises(Exception) as info:
        opt.step()
    return type(info.value).__name__, str(info.value)


@pytest.mark.parametrize("new_shape", [(3, 3), (4,), (2,)], ids=str)
@pytest.mark.parametrize("name, kwargs", OPTIMIZERS, ids=[n for n, _ in OPTIMIZERS])
def test_step_with_stale_state_raises_like_torch(name, kwargs, new_shape):
    assert (_stale_step_error(ember, name, kwargs, new_shape)
            == _stale_step_error(torch, name, kwargs, new_shape))


def test_fresh_optimizer_after_upsampling_steps_like_torch():
    # the right way: a new optimizer over the new parameter
    def run(lib):
        p = lib.nn.Parameter(lib.arange(4.).reshape(2, 2))
        lib.optim.Adam([p], lr=0.1).step()
        p.data = lib.arange(9.).reshape(3, 3) / 9
        opt = lib.optim.Adam([p], lr=0.1)
        (p ** 2).sum().backward()
        opt.step()
        return p.detach().numpy()
    import numpy as np
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-6)
