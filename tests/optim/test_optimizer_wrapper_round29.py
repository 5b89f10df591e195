"""An optimizer subclass that never runs Optimizer.__init__ (opacus's DPOptimizer forwards
param_groups, state and defaults to the optimizer it wraps) steps bare under a scheduler; the
wrapped optimizer's step runs the hooks, once per step."""

import numpy as np

import ember


def wrapper_class(lib):
    """opacus's DPOptimizer shape: an Optimizer subclass that never runs Optimizer.__init__
    and halves the gradients before the optimizer it wraps steps (shared with the parity
    test of the same program)."""
    class Wrapper(lib.optim.Optimizer):
        def __init__(self, optimizer):
            self.original_optimizer = optimizer

        @property
        def param_groups(self):
            return self.original_optimizer.param_groups

        @property
        def state(self):
            return self.original_optimizer.state

        @property
        def defaults(self):
            return self.original_optimizer.defaults

        def step(self, closure=None):
            for g in self.param_groups:
                for p in g["params"]:
                    p.grad = p.grad * 0.5
            return self.original_optimizer.step()
    return Wrapper


_Wrapper = wrapper_class(ember)


def test_wrapper_without_init_steps_under_step_lr():
    w = ember.nn.Parameter(ember.tensor([1.0, -2.0]))
    inner = ember.optim.SGD([w], lr=0.1, momentum=0.9)
    calls = []
    inner.register_step_pre_hook(lambda o, a, k: calls.append(type(o).__name__))
    opt = _Wrapper(inner)
    sched = ember.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    ref, buf, lr, lrs = np.array([1.0, -2.0]), np.zeros(2), 0.1, []
    for _ in range(3):
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
        buf = 0.9 * buf + 0.5 * 2 * ref
        ref = ref - lr * buf
        lr *= 0.5
    np.testing.assert_allclose(w.detach().numpy(), ref, rtol=1e-6)
    assert lrs == [0.05, 0.025, 0.0125]
    assert calls == ["SGD"] * 3
