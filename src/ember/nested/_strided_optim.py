"""Optimizers on strided nested tensor parameters, as PyTorch 2.13 runs them: SGD (its
single-tensor path) steps them with the nested tensor's own in-place ops; the other
optimizers, and SGD's foreach and fused paths, stop at the first op the nested tensors lack,
with PyTorch's error naming it."""

from ember.nested._strided_ops import unsupported
from ember.nested import NO_SIZES

__all__ = ["refuse", "refuse_flat", "sgd_step"]

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


def refuse(p, name, group):
    """Raise PyTorch's error for optimizer ``name`` stepping nested parameter ``p``; return
    for the one path that steps it (SGD's single-tensor path: see ``sgd_step``)."""
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
