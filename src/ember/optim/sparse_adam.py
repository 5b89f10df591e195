"""SparseAdam: lazy Adam for sparse gradients (``torch.optim.SparseAdam``)."""

import ember
from ember.optim._checks import check_betas, check_positive
from ember.optim._state import grads_of, number_lr, real, state_like
from ember.optim.optimizer import Optimizer, closure_loss

__all__ = ["SparseAdam"]


def _check_params(groups):
    """PyTorch's refusal of sparse, then complex, parameters, by [group, index]."""
    at = [([g, i], p) for g, group in enumerate(groups) for i, p in enumerate(group["params"])]
    sparse = [gi for gi, p in at if p.is_sparse]
    if sparse:
        raise ValueError(f"Sparse params at indices {sparse}: SparseAdam requires dense "
                         f"parameter tensors")
    complex_ = [gi for gi, p in at if p.is_complex()]
    if complex_:
        raise ValueError(f"Complex params at indices {complex_}: SparseAdam does not support "
                         f"complex parameters")


class SparseAdam(Optimizer):
    """Lazy Adam: only the entries a sparse gradient holds (``Embedding(sparse=True)``'s)
    update their moments and values.

    The update: m += (1 - beta1)(g - m), v += (1 - beta2)(g^2 - v) at those entries, and
    p -= lr sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + eps) there.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        check_positive(lr=lr, eps=eps)
        check_betas(betas)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        _check_params(self.param_groups)

    def step(self, closure=None):
        """Perform one optimization step."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            lr, eps = number_lr(group), group["eps"]
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p._grad is not None and not p._grad.is_sparse:
                    raise RuntimeError("SparseAdam does not support dense gradients, please "
                                       "consider Adam instead")
            maximize = group.get("maximize", False)     # older checkpoints lack it
            for p, x, g in grads_of(group, maximize, takes_sparse=True):
                state = self.state[p]
                if not state:               # PyTorch counts SparseAdam's steps in an int
                    state.update(step=0, exp_avg=state_like(p), exp_avg_sq=state_like(p))
                state["step"] += 1
                t = state["step"]
                touched = _held(p._grad, x)
                m, v = real(state["exp_avg"]._data), real(state["exp_avg_sq"]._data)
                m += touched * ((1 - beta1) * (g - m))
                v += touched * ((1 - beta2) * (g * g - v))
                step_size = lr * (1 - beta2 ** t) ** 0.5 / (1 - beta1 ** t)
                x -= touched * (step_size * m / (v ** 0.5 + eps))
                p._bump_version()
        return loss


def _held(grad, x):
    """Where sparse ``grad`` holds entries, as a boolean array shaped like ``x`` (the
    parameter's array, a real view if complex)."""
    held = grad.coalesce()
    ones = ember.ones(held._values().shape, dtype=ember.bool, device=held.device)
    mask = ember.sparse_coo_tensor(held._indices(), ones, held.shape,
                                   check_invariants=False).to_dense()._data
    return mask if mask.shape == x.shape else mask[..., None]
