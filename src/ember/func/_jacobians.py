"""jacrev, jacfwd, hessian: whole Jacobians as vmaps of vjps (rows) or jvps (columns)."""

import functools

from ember.func._autodiff import (_Linearized, _Traced, check_jvp_primals, check_vjp_outputs,
                                  split_args)
from ember._tensor import Tensor
from ember.func._no_grad_tangents import settle
from ember.func._vmap import random_error_scope, vmap
from ember.func._zero_terms import link_outputs
from ember.utils._pytree import tree_flatten, tree_unflatten

__all__ = ["jacrev", "jacfwd", "hessian"]


def _basis(flat, dtype, device):
    """The rows of the identity, split per tensor: ``(N, *t.shape)`` for each ``t``."""
    import ember
    sizes = [t.numel() for t in flat]
    eye = ember.eye(sum(sizes), dtype=dtype, device=device)
    out, start = [], 0
    for t, n in zip(flat, sizes):
        out.append(eye[:, start:start + n].reshape((eye.shape[0],) + tuple(t.shape)))
        start += n
    return out


def _blocks(stacked, row_tensors):
    """Split ``stacked`` (rows first) into one block per tensor of ``row_tensors``."""
    out, start = [], 0
    for t in row_tensors:
        n = t.numel()
        out.append(stacked[start:start + n])
        start += n
    return out


def _error_if_complex(api, values, is_input):
    """PyTorch's jacrev and jacfwd take real inputs (all positional arguments, whatever
    ``argnums`` selects) and give real outputs (aux aside)."""
    for i, v in enumerate(tree_flatten(values)[0]):
        if isinstance(v, Tensor) and v.is_complex():
            kind = "inputs" if is_input else "outputs"
            raise RuntimeError(f"{api}: Expected all {kind} to be real but received complex "
                               f"tensor at flattened input idx: {i}")


def _check_chunk(chunk_size, api):
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"{api}: `chunk_size` should be greater than 0.")


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """The Jacobian of ``func`` with respect to the arguments ``argnums``, one vjp per output
    element (vmapped; ``chunk_size`` rows at a time) (``torch.func.jacrev``)."""
    return _jacrev(func, argnums, has_aux, chunk_size, real_only=True)


def _jacrev(func, argnums, has_aux, chunk_size, real_only):
    """jacrev; ``real_only=False`` lets complex values through, as the inner gradient of the
    forward-mode ``autograd.functional.hessian`` does."""
    _check_chunk(chunk_size, "jacrev")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if real_only:
            _error_if_complex("jacrev", args, True)
        diff, partial = split_args(func, argnums, args, kwargs)
        traced = _Traced(partial, diff, has_aux, "jacrev(f, *args)")
        flat_out = traced.flat_out
        if real_only:
            _error_if_complex("jacrev", flat_out, False)
        check_vjp_outputs(flat_out)
        flat_in = tree_flatten(diff)[0]
        rows = _basis(flat_out, flat_out[0].dtype, flat_out[0].device) if flat_out else []

        def pull(*cotangents):
            grads = traced.wrap_inputs(traced.pull(list(cotangents), traced.connected))
            return tuple(tree_flatten(grads)[0])
        if rows and rows[0].shape[0]:
            pulled = vmap(pull, chunk_size=chunk_size)(*rows)
        else:
            pulled = [_empty(x) for x in flat_in]
        jac = []
        for y, yblocks in zip(flat_out, zip(*(_blocks(g, flat_out) for g in pulled))):
            per_input = [block.reshape(tuple(y.shape) + tuple(x.shape))
                         for x, block in zip(flat_in, yblocks)]
            jac.append(_arrange(per_input, traced.in_spec, argnums))
        result = tree_unflatten(jac, traced.out_spec)
        traced.finish(result, traced.aux)
        partial.settle()
        return (result, traced.aux) if has_aux else result
    return wrapper


def _empty(x):
    import ember
    return ember.zeros((0,) + tuple(x.shape), dtype=x.dtype)


def _arrange(per_input, in_spec, argnums):
    tree = tree_unflatten(per_input, in_spec)
    return tree[0] if isinstance(argnums, int) else tree


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian of ``func`` with respect to the arguments ``argnums``, one jvp per input
    element (vmapped) (``torch.func.jacfwd``; jvps by the double-vjp construction)."""
    return _jacfwd(func, argnums, has_aux, randomness, real_only=True)


def _jacfwd(func, argnums, has_aux, randomness, real_only):
    """jacfwd; ``real_only=False`` lets complex values through, as the forward-mode
    ``autograd.functional.jacobian`` does."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if real_only:
            _error_if_complex("jacfwd", args, True)
        diff, partial = split_args(func, argnums, args, kwargs)
        check_jvp_primals([x for x in tree_flatten(diff)[0] if isinstance(x, Tensor)])
        if randomness == "error":           # PyTorch runs func under vmap(randomness=...)
            with random_error_scope():
                traced = _Traced(partial, diff, has_aux, "jacfwd(f, *args)")
        else:
            traced = _Traced(partial, diff, has_aux, "jacfwd(f, *args)")
        if real_only:
            _error_if_complex("jacfwd", traced.flat_out, False)
        lin = _Linearized(traced)
        flat_in = tree_flatten(diff)[0]
        cols = _basis(flat_in, flat_in[0].dtype, flat_in[0].device)

        def push(*tangents):
            return tuple(tree_flatten(lin.push(list(tangents), traced.connected))[0])
        pushed = vmap(push, randomness=randomness)(*cols)
        if traced.links is not None:    # (NOTE [Zero-tangent terms in func.jvp])
            pushed = link_outputs(traced.links, pushed, traced.parent)
        if traced.no_grad_results:
            settle(traced.no_grad_results)
        jac = []
        for y, col in zip(traced.flat_out, pushed):
            per_input = []
            for x, block in zip(flat_in, _blocks(col, flat_in)):
                # block: (elements of x, *y.shape) -> (*y.shape, *x.shape), by movedim and
                # unflatten as PyTorch's: the result's grad_fn is a ViewBackward0 as there
                b = block.reshape((x.numel(),) + tuple(y.shape)).movedim(0, -1)
                per_input.append(b.unflatten(-1, tuple(x.shape)) if x.dim() else b.squeeze(-1))
            jac.append(_arrange(per_input, traced.in_spec, argnums))
        result = tree_unflatten(jac, traced.out_spec)
        traced.finish(result, traced.aux)
        partial.settle()
        return (result, traced.aux) if has_aux else result
    return wrapper


def hessian(func, argnums=0):
    """The Hessian of the scalar ``func``: ``jacfwd(jacrev(func))`` (``torch.func.hessian``)."""
    return jacfwd(jacrev(func, argnums), argnums)
