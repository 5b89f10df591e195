"""Single-tensor (foreach=False) optimizer steps on CUDA with state kept from before a
parameter changed shape (round 34 review): the fused multi-tensor kernels, which size every
array by its parameter's, must take none of them (they read and wrote past the stale state's
end and 'succeeded'); the step fails at that parameter as PyTorch's loop does, the earlier
parameters updated and counted, the later ones untouched and not counted."""

import pytest

import ember

pytestmark = pytest.mark.cuda

CASES = [("Adam", {}), ("AdamW", {}), ("SGD", {"momentum": 0.9}), ("Adagrad", {}),
         ("RMSprop", {}), ("Adadelta", {}), ("NAdam", {}), ("RAdam", {}), ("Adamax", {})]


@pytest.mark.parametrize("name,kw", CASES)
def test_stale_state_fails_in_order(name, kw):
    ps = [ember.nn.Parameter(ember.ones(4, device="cuda") * (i + 1)) for i in range(3)]
    opt = getattr(ember.optim, name)(ps, lr=0.1, foreach=False, **kw)
    for p in ps:
        p.grad = ember.ones(4, device="cuda")
    opt.step()
    ps[1].data = ember.ones(6, device="cuda")
    for p in ps:
        p.grad = ember.ones(p.shape, device="cuda")
    before = [p.detach().clone() for p in ps]
    with pytest.raises(RuntimeError, match=r"size of tensor a \(4\) must match the size of "
                                           r"tensor b \(6\)"):
        opt.step()
    changed = [bool((p != b).any()) for p, b in zip(ps, before)]
    # (AdamW's decoupled decay scales the stale parameter before its update fails)
    assert changed == [True, name == "AdamW", False]
    if "step" in opt.state[ps[0]]:
        assert [float(opt.state[p]["step"]) for p in ps] == [2.0, 2.0, 1.0]
    for p in ps:        # the stale buffers keep their shape (nothing written past them)
        assert all(v.shape == (4,) for k, v in opt.state[p].items()
                   if isinstance(v, ember.Tensor) and v.ndim)
