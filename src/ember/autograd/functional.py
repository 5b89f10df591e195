"""torch.autograd.functional: jacobian, hessian, vjp, jvp, vhp, hvp on the autograd engine.

Inputs are a tensor or a tuple of tensors; results follow the same shape (a tensor for a
tensor, a tuple for a tuple). ``jvp`` and ``hvp`` use the double-backward trick (the vjp
``u -> J^T u`` is linear, so its vjp with weights ``v`` is ``J v``). ``vectorize=True``
computes Jacobian rows with ``ember.func.vmap`` instead of one backward pass per row.
"""

import ember
from ember import autograd
from ember._tensor import Tensor
from ember.autograd.grad_mode import enable_grad

__all__ = ["jacobian", "hessian", "vjp", "jvp", "vhp", "hvp"]


def _as_tuple(x, arg, fn):
    is_tuple = isinstance(x, tuple)
    xs = x if is_tuple else (x,)
    for i, t in enumerate(xs):
        if not isinstance(t, Tensor):
            if is_tuple:
                raise TypeError(f"The {arg} given to {fn} must be either a Tensor or a tuple "
                                f"of Tensors but the value at index {i} has type {type(t)}.")
            raise TypeError(f"The {arg} given to {fn} must be either a Tensor or a tuple of "
                            f"Tensors but the given {arg} has type {type(t)}.")
    return is_tuple, xs


def _grad_inputs(inputs, create_graph):
    """Copies of ``inputs`` to differentiate: attached to the caller's graph only when
    ``create_graph`` asks for that."""
    return tuple(x.view_as(x) if create_graph and x.requires_grad else
                 x.detach().requires_grad_() for x in inputs)


def _grad(outputs, inputs, grad_outputs, create_graph, strict, what):
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        if strict:
            raise RuntimeError(f"The output of the user-provided function is independent of "
                               f"input 0. This is not allowed in strict mode{what}.")
        return tuple(ember.zeros_like(x) for x in inputs)
    grads = autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs],
                          retain_graph=True, create_graph=create_graph, allow_unused=True)
    out = []
    for i, (g, x) in enumerate(zip(grads, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent "
                                   f"of input {i}. This is not allowed in strict mode{what}.")
            g = ember.zeros_like(x)
        out.append(g)
    return tuple(out)


def _finish(values, create_graph):
    return tuple(v if create_graph else v.detach() for v in values)


def _call(func, inputs, fn):
    with enable_grad():
        out = func(*inputs)
    is_tuple, outs = _as_tuple(out, "outputs of the user-provided function", fn)
    return is_tuple, outs


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "vjp")
    xs = _grad_inputs(xs, create_graph)
    out_tuple, outs = _call(func, xs, "vjp")
    if v is None:
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function "
                               "returns a single Tensor with a single element.")
        vs = (ember.ones_like(outs[0]),)
    else:
        vs = _as_tuple(v, "v", "vjp")[1]
    grads = _finish(_grad(outs, xs, vs, create_graph, strict, ""), create_graph)
    outs = _finish(outs, create_graph)
    return (outs if out_tuple else outs[0]), (grads if in_tuple else grads[0])


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)``."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "jvp")
    xs = _grad_inputs(xs, create_graph)
    if v is None:
        if len(xs) != 1 or xs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the "
                               "user-provided function is a single Tensor with a single "
                               "element.")
        vs = (ember.ones_like(xs[0]),)
    else:
        vs = _as_tuple(v, "v", "jvp")[1]
    out_tuple, outs = _call(func, xs, "jvp")
    with enable_grad():
        us = tuple(ember.zeros_like(o).requires_grad_() for o in outs)
        pulled = _grad(outs, xs, us, True, strict, "")
        pushed = _grad(pulled, us, vs, create_graph, False, "")
    outs, pushed = _finish(outs, create_graph), _finish(pushed, create_graph)
    return (outs if out_tuple else outs[0]), (pushed if out_tuple else pushed[0])


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for each output, for each input, a tensor of
    shape ``output.shape + input.shape``."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                         'Hint: If your function has more outputs than inputs, '
                         '"forward-mode" tends to be more performant. Otherwise, prefer to '
                         'use "reverse-mode".')
    in_tuple, xs = _as_tuple(inputs, "inputs", "jacobian")
    xs = _grad_inputs(xs, create_graph)
    out_tuple, outs = _call(func, xs, "jacobian")
    jac = []
    for o in outs:
        n = o.numel()
        if vectorize and n and o.requires_grad:
            rows = ember.eye(n, dtype=o.dtype).reshape((n,) + tuple(o.shape))

            def row(u, o=o):
                return _grad((o,), xs, (u,), create_graph, strict, "")
            per = ember.func.vmap(row)(rows)
        else:
            eye = ember.eye(n, dtype=o.dtype)
            flat = [_grad((o,), xs, (eye[k].reshape(o.shape),), create_graph, strict, "")
                    for k in range(n)]
            per = [ember.stack([r[i] for r in flat]) if n else
                   ember.zeros((0,) + tuple(x.shape), dtype=x.dtype)
                   for i, x in enumerate(xs)]
        blocks = tuple(p.reshape(tuple(o.shape) + tuple(x.shape)) for p, x in zip(per, xs))
        blocks = _finish(blocks, create_graph)
        jac.append(blocks if in_tuple else blocks[0])
    return tuple(jac) if out_tuple else jac[0]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of the scalar ``func`` at ``inputs`` (blocks per pair of inputs)."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "hessian")

    def scalar(*args):
        out = func(*args)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor "
                               "with a single element.")
        return out.reshape(())

    def gradient(*args):
        return jacobian(scalar, args, create_graph=True, strict=strict)
    res = jacobian(gradient, xs, create_graph=create_graph, strict=strict, vectorize=vectorize)
    if not in_tuple:
        return res[0][0]
    return res


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)``."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "vhp")
    xs = _grad_inputs(xs, create_graph)
    vs = (ember.ones_like(xs[0]),) if v is None else _as_tuple(v, "v", "vhp")[1]
    _, outs = _call(func, xs, "vhp")
    if len(outs) != 1 or outs[0].numel() != 1:
        raise RuntimeError("The function given to vhp should return a single Tensor with a "
                           "single element.")
    with enable_grad():
        g = _grad(outs, xs, (ember.ones_like(outs[0]),), True, strict, "")
        res = _grad(g, xs, vs, create_graph, strict, "")
    res = _finish(res, create_graph)
    out = _finish(outs, create_graph)[0]
    return out, (res if in_tuple else res[0])


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)`` (equal to vhp: Hessians of smooth functions are symmetric)."""
    return vhp(func, inputs, v, create_graph, strict)
