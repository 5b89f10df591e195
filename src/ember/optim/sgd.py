"""SGD with momentum, dampening, Nesterov momentum and weight decay (``torch.optim.SGD``)."""

from ember._tensor import _make
from ember.optim._state import grads_of, real, value
from ember.optim.optimizer import Optimizer, closure_loss

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent, following PyTorch's documented update:

    g = grad (+ weight_decay * p); b = momentum * b + (1 - dampening) * g (b = g at the first
    step); g = g + momentum * b (nesterov) or b; p = p - lr * g (+ when maximize).
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        if value(lr) < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def step(self, closure=None):
        """Perform one optimization step."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            lr, wd = value(group["lr"]), group["weight_decay"]
            momentum, dampening = group["momentum"], group["dampening"]
            for p, x, g in grads_of(group, group["maximize"]):
                if wd:
                    g = g + wd * x
                if momentum:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        state["momentum_buffer"] = _make(p._grad._data.copy())
                        b = real(state["momentum_buffer"]._data)
                        b[...] = g
                    else:
                        b = real(buf._data)
                        b *= momentum
                        b += (1 - dampening) * g
                    g = g + momentum * b if group["nesterov"] else b
                x -= lr * g
                p._bump_version()
        return loss
