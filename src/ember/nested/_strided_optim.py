"""Optimizers on strided nested tensor parameters, as PyTorch 2.13 runs them: SGD and ASGD
(their single-tensor paths) step them with the nested tensor's own in-place ops; the other
optimizers, and the foreach and fused paths, stop at the first op the nested tensors lack,
with PyTorch's error naming it."""

import ember

from ember.nested._strided_ops import unsupported
from ember.nested import NO_SIZES

__all__ = ["refuse", "refuse_flat", "sgd_step", "asgd_step"]

# the ATen op each optimizer's step reaches first and nested tensors lack: (single-tensor
# path, foreach path)
_FIRST_MISSING = {
    "Adam": ("lerp_.Scalar", "_foreach_lerp_.Scalar"),
    "Adamax": ("lerp_.Scalar", "_foreach_lerp_.Scalar"),
    "NAdam": ("lerp_.Scalar", "_foreach_lerp_.Scalar"),
    "RAdam": ("lerp_.Scalar", "_foreach_lerp_.Scalar"),
    "Adagrad": ("full_like", "full_like"),
    "Rprop": ("full_like", "full_like"),
    "Adadelta": ("addcmul_", "_foreach_mul_.Scalar"),
    "RMSprop": ("addcmul_", "_foreach_mul_.Scalar"),
    "ASGD": (None, "_foreach_add.List"),
}
_LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."


def refuse(p, name, group):
    """Raise PyTorch's error for optimizer ``name`` stepping nested parameter ``p``; return
    for the paths that step it (SGD's and ASGD's single-tensor paths: see ``sgd_step``,
    ``asgd_step``)."""
    foreach = bool(group.get("foreach"))
    if group.get("fused"):
        raise unsupported(f"_fused_{name.lower()}_", p)
    if name == "SGD":
        if not foreach:
            return
        if group["maximize"]:
            raise unsupported("_foreach_neg", p)
        raise unsupported("_foreach_add.List" if group["weight_decay"] else
                          "_foreach_add_.List", p)
    if name == "ASGD" and not foreach:
        if group["capturable"]:         # (asserted of the devices before anything)
            from ember.optim._state import _CAPTURABLE
            what, devices = _CAPTURABLE["ASGD"]
            raise AssertionError(f"If capturable=True, {what} must be on supported devices: "
                                 f"{devices}.")
        if group["differentiable"]:     # (its update then writes the leaf under autograd)
            raise RuntimeError(_LEAF_INPLACE)
        return
    if name == "Adam" and foreach and group["weight_decay"]:   # (AdamW's decays the param)
        raise unsupported("_foreach_mul_.Scalar" if group.get("decoupled_weight_decay") else
                          "_foreach_add.List", p)
    missing = _FIRST_MISSING.get(name)
    if missing is None or missing[foreach] is None:
        # (Adafactor, Muon ask for the sizes; ember's ASGD does not step them yet)
        raise RuntimeError(NO_SIZES)
    raise unsupported(missing[foreach], p)


def refuse_flat(p):
    """Raise PyTorch's error for LBFGS flattening nested parameter ``p``'s gradient (into
    zeros made by ``new()`` when it has none, else by ``view(-1)``)."""
    if p.grad is None:
        p.new()             # (refused, with PyTorch's error)
    raise RuntimeError("view: For now nested view cannot change or infer the implicit batch "
                       "dimension")


def sgd_step(p, states, maximize, *, lr, momentum, dampening, weight_decay, nesterov):
    """One SGD step of nested parameter ``p`` (which has a gradient; grad mode as the step
    set it), its momentum buffer a nested tensor in ``states[p]`` as PyTorch keeps it."""
    g = p.grad
    if maximize:
        g = -g
    if weight_decay:
        g = g.add(p, alpha=weight_decay)
    if momentum:
        state = states[p]
        buf = state.get("momentum_buffer")
        if buf is None:
            buf = state["momentum_buffer"] = g.clone().detach()
        else:
            buf.mul_(momentum).add_(g, alpha=1 - dampening)
        g = g.add(buf, alpha=momentum) if nesterov else buf
    p.add_(g, alpha=-lr)


def asgd_step(p, state, group):
    """One ASGD step of nested parameter ``p`` (which has a gradient), its state (step, eta,
    mu as 0-d tensors, ax a nested tensor) in ``state`` as PyTorch keeps it."""
    from ember.optim._state import new_step, number_lr, scalar_state, step_count
    lr, lambd = number_lr(group), group["lambd"]
    if not state:
        state.update(step=new_step(), eta=scalar_state(lr), mu=scalar_state(1.0),
                     ax=ember.zeros_like(p))
    t = step_count(state, numbers=True)
    eta, mu, ax = state["eta"], state["mu"], state["ax"]
    g = -p.grad if group["maximize"] else p.grad
    if group["weight_decay"]:
        g = g.add(p, alpha=group["weight_decay"])
    p.mul_(1 - lambd * eta.item())
    p.add_(g, alpha=-eta.item())
    if mu.item() != 1:
        ax.add_(p.sub(ax).mul(mu))
    else:
        ax.copy_(p)
    eta.fill_(lr / ((1 + lambd * lr * t) ** group["alpha"]))
    mu.fill_(1 / max(1, t - group["t0"]))
