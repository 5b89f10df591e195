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

_STRATEGY = 'Expected strategy to be either "forward-mode" or "reverse-mode".'
_HESSIAN_STRICT = ("While computing the hessian, found that the jacobian of the user-provided "
                   "function with respect to input {} is independent of the input. This is not "
                   "allowed in strict mode. You should ensure that your function is twice "
                   "differentiable and that the jacobian depends on the inputs (this would be "
                   "violated by a linear function for example).")


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


def _validate_v(vs, others, others_tuple):
    """PyTorch's checks that ``v`` matches ``others`` (the outputs or the inputs) in number
    and shapes."""
    if len(vs) != len(others):
        if others_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(others)} but "
                               f"got {len(vs)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for v, o in zip(vs, others):
        if v.shape != o.shape:
            raise RuntimeError(f"v has invalid size: should be {o.shape} but got {v.shape}.")


def _check_outputs(outs, strict):
    """In strict mode every output must depend on the inputs through autograd."""
    for i, o in enumerate(outs):
        if strict and not o.requires_grad:
            raise RuntimeError(f"Output {i} of the user-provided function does not require "
                               "gradients. The outputs must be computed in a differentiable "
                               "manner from the input when running in strict mode.")


def _grad_inputs(inputs, create_graph):
    """Copies of ``inputs`` to differentiate: attached to the caller's graph only when
    ``create_graph`` asks for that."""
    return tuple(x.view_as(x) if create_graph and x.requires_grad else
                 x.detach().requires_grad_() for x in inputs)


def _grad(outputs, inputs, grad_outputs, create_graph, strict, who="The output", of=None):
    """The vjp of ``outputs`` with ``grad_outputs`` (zeros where an input is unused). In
    strict mode an unused input raises, and with ``create_graph`` and ``of`` ("jacobian" or
    "hessian") so does a gradient that does not depend on the inputs."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        if strict:
            raise RuntimeError(f"{who} of the user-provided function is independent of "
                               f"input 0. This is not allowed in strict mode.")
        return tuple(ember.zeros_like(x) for x in inputs)
    grads = autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs],
                          retain_graph=True, create_graph=create_graph, allow_unused=True)
    out = []
    for i, (g, x) in enumerate(zip(grads, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(f"{who} of the user-provided function is independent "
                                   f"of input {i}. This is not allowed in strict mode.")
            g = ember.zeros_like(x)
        elif strict and create_graph and of is not None and not g.requires_grad:
            _independent(of, i)
        out.append(g)
    return tuple(out)


def _implicit(outs):
    """Where PyTorch differentiates scalars with no grad_outputs (each Jacobian row without
    vectorize, vjp's ``v=None``, the first gradient of vhp, hvp and hessian), a complex output
    that requires grad raises as its ``backward()`` would."""
    for o in outs:
        if o.requires_grad and o.is_complex():
            raise RuntimeError("grad can be implicitly created only for real scalar outputs "
                               f"but got {o.dtype}")


def _independent(of, i):
    raise RuntimeError(f"The {of} of the user-provided function is independent of input {i}. "
                       f"This is not allowed in strict mode when create_graph=True.")


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
    _check_outputs(outs, strict)
    if v is None:
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function "
                               "returns a single Tensor with a single element.")
        _implicit(outs)
        vs = (ember.ones_like(outs[0]),)
    else:
        vs = _as_tuple(v, "v", "vjp")[1]
        _validate_v(vs, outs, out_tuple)
    grads = _finish(_grad(outs, xs, vs, create_graph, strict, of="jacobian"), create_graph)
    outs = _finish(outs, create_graph)
    return (outs if out_tuple else outs[0]), (grads if in_tuple else grads[0])


def _v_for_inputs(v, xs, in_tuple, fn):
    """``v`` as a tuple matching the inputs (ones for a single one-element input)."""
    if v is None:
        if len(xs) != 1 or xs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the "
                               "user-provided function is a single Tensor with a single "
                               "element.")
        return (ember.ones_like(xs[0]),)
    vs = _as_tuple(v, "v", fn)[1]
    _validate_v(vs, xs, in_tuple)
    return vs


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)``."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "jvp")
    xs = _grad_inputs(xs, create_graph)
    vs = _v_for_inputs(v, xs, in_tuple, "jvp")
    out_tuple, outs = _call(func, xs, "jvp")
    _check_outputs(outs, strict)
    with enable_grad():
        us = tuple(ember.zeros_like(o).requires_grad_() for o in outs)
        pulled = _grad(outs, xs, us, True, strict)
        for i, g in enumerate(pulled):
            if strict and not g.requires_grad:      # the double-backward trick needs J^T u
                raise RuntimeError(f"The gradient with respect to input {i} is independent "
                                   "of the inputs of the user-provided function. This is not "
                                   "allowed in strict mode.")
        pushed = _grad(pulled, us, vs, create_graph, False)
    for i, p in enumerate(pushed):
        if strict and create_graph and not p.requires_grad:
            _independent("jacobian", i)
    outs, pushed = _finish(outs, create_graph), _finish(pushed, create_graph)
    return (outs if out_tuple else outs[0]), (pushed if out_tuple else pushed[0])


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for each output, for each input, a tensor of
    shape ``output.shape + input.shape``."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise AssertionError(_STRATEGY + ' Hint: If your function has more outputs than '
                             'inputs, "forward-mode" tends to be more performant. Otherwise, '
                             'prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "torch.autograd.functional.jacobian: `create_graph=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either '
                'set `create_graph=False` or `strategy="reverse-mode"`.')
        if strict:
            raise RuntimeError(
                'torch.autograd.functional.jacobian: `strict=True` and `strategy="forward-mode"'
                '` are not supported together (yet). Please either set `strict=False` or '
                '`strategy="reverse-mode"`.')
    in_tuple, xs = _as_tuple(inputs, "inputs", "jacobian")
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse "
                                  "Hessian isonly implemented for `vectorize=True`.")
    if vectorize and strict:
        raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and "
                           "`vectorized=True` are not supported together. Please either set "
                           "`strict=False` or `vectorize=False`.")
    if strategy == "forward-mode":
        return _forward_jacobian(func, xs, in_tuple)
    xs = _grad_inputs(xs, create_graph)
    out_tuple, outs = _call(func, xs, "jacobian")
    _check_outputs(outs, strict)
    jac = []
    for j, o in enumerate(outs):
        n = o.numel()
        if vectorize and n and o.requires_grad:
            rows = ember.eye(n, dtype=o.dtype).reshape((n,) + tuple(o.shape))

            def row(u, o=o):
                return _grad((o,), xs, (u,), create_graph, False)
            per = ember.func.vmap(row)(rows)
        else:
            if n:
                _implicit((o,))
            eye = ember.eye(n, dtype=o.dtype)
            flat = [_grad((o,), xs, (eye[k].reshape(o.shape),), create_graph, strict,
                          f"Output {j}", "jacobian") for k in range(n)]
            per = [ember.stack([r[i] for r in flat]) if n else
                   ember.zeros((0,) + tuple(x.shape), dtype=x.dtype)
                   for i, x in enumerate(xs)]
        blocks = tuple(p.reshape(tuple(o.shape) + tuple(x.shape)) for p, x in zip(per, xs))
        blocks = _finish(blocks, create_graph)
        jac.append(blocks if in_tuple else blocks[0])
    return tuple(jac) if out_tuple else jac[0]


def _forward_jacobian(func, xs, in_tuple):
    """``jacobian`` with ``strategy="forward-mode"``: one batched jvp per input (complex
    outputs keep their imaginary part). PyTorch's results nest lists for tuple inputs."""
    out_tuple = []

    def outputs(*args):
        is_tuple, outs = _call(func, args, "jacobian")
        out_tuple[:] = [is_tuple]
        return outs
    from ember.func._jacobians import _jacfwd
    jac = _jacfwd(outputs, tuple(range(len(xs))), False, "error", real_only=False)(*xs)
    if not in_tuple:
        jac = tuple(blocks[0] for blocks in jac)
        return tuple(jac) if out_tuple[0] else jac[0]
    jac = [list(blocks) for blocks in jac]
    return jac if out_tuple[0] else jac[0]


def _single_output(out_tuple, outs, fn):
    """The one scalar output ``hessian``, ``vhp`` and ``hvp`` require."""
    if out_tuple or len(outs) != 1:
        raise RuntimeError(f"The function given to {fn} should return a single Tensor")
    if outs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn} should "
                           "contain a single element")
    return outs[0]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of the scalar ``func`` at ``inputs`` (blocks per pair of inputs)."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("reverse-mode", "forward-mode"):
        raise AssertionError(_STRATEGY)

    def scalar(*args):
        out = _single_output(*_call(func, args, "hessian"), "hessian")
        _check_outputs((out,), strict)
        return out.reshape(())

    def real_scalar(*args):
        out = scalar(*args)
        _implicit((out,))
        return out

    def gradient(*args):
        if outer_jacobian_strategy == "forward-mode":
            # forward-over-reverse: inside jacfwd's trace the inputs cannot be made to
            # require grad, so the inner gradient is a func transform too (strict and
            # create_graph were refused by the forward-mode jacobian already); complex inputs
            # pass, a complex output raises as PyTorch's inner reverse-mode jacobian does
            from ember.func._jacobians import _jacrev
            return _jacrev(real_scalar, tuple(range(len(args))), False, None, False)(*args)
        grads = jacobian(scalar, args, create_graph=True)     # strict: checked below
        for i, g in enumerate(grads):
            if strict and not g.requires_grad:
                raise RuntimeError(_HESSIAN_STRICT.format(i))
        return grads
    res = jacobian(gradient, xs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    if not in_tuple:
        return res[0][0]
    return res


def _vhp(func, inputs, v, create_graph, strict, fn):
    in_tuple, xs = _as_tuple(inputs, "inputs", fn)
    xs = _grad_inputs(xs, create_graph)
    vs = _v_for_inputs(v, xs, in_tuple, fn)
    out = _single_output(*_call(func, xs, fn), fn)
    _check_outputs((out,), strict)
    _implicit((out,))
    with enable_grad():
        g = _grad((out,), xs, (ember.ones_like(out),), True, strict)
        for i, gi in enumerate(g):
            if strict and not gi.requires_grad:
                raise RuntimeError(_HESSIAN_STRICT.format(i))
        res = _grad(g, xs, vs, create_graph, strict, of="hessian")
    res = _finish(res, create_graph)
    out = _finish((out,), create_graph)[0]
    return out, (res if in_tuple else res[0])


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)``."""
    return _vhp(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)`` (equal to vhp: Hessians of smooth functions are symmetric)."""
    return _vhp(func, inputs, v, create_graph, strict, "hvp")
