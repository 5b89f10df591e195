"""vmap: run a function over a batch dim as if once per element, with batching rules."""

import contextlib
import functools
import threading

from ember import backend
from ember._tensor import Tensor
from ember.func._batched import STATE, Level, is_batched_at, wrap
from ember.ops._dispatch import ACTIVE_VMAPS
from ember.utils._pytree import broadcast_prefix, tree_flatten, tree_unflatten

__all__ = ["vmap"]

_RANDOMNESS = ("error", "different", "same")
_RANDOM_ERROR = ("vmap: called random operation while in randomness error mode. Please either "
                 "use the 'same' or 'different' randomness flags on vmap or perform the "
                 "randomness operation out of vmap")


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """Vectorize ``func`` over dim ``in_dims`` of its inputs (``torch.func.vmap``).

    ``in_dims``/``out_dims`` are an int, None (not batched) or a pytree prefix of the
    inputs/outputs. ``randomness``: "error" raises on random ops inside, "same" draws one
    sample for the whole batch, "different" one per element (random ops make such a vmap run
    its function once per element). ``chunk_size`` maps that many elements at a time.
    """
    if randomness not in _RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got "
                         f"{chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs)
    return wrapped


def _name(func):
    return getattr(func, "__name__", repr(func))


def _flat_in_dims(func, in_dims, args):
    where = f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>)"
    if not args:
        raise ValueError(f"vmap({_name(func)})(<inputs>): got no inputs. Maybe you forgot to add "
                         f"inputs, or you are trying to vmap over a function with no inputs. "
                         f"The latter is unsupported.")
    if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
        raise ValueError(f"{where}: expected `in_dims` to be int or a (potentially nested) "
                         f"tuple matching the structure of inputs, got: {type(in_dims)}.")
    flat_args, spec = tree_flatten(args)
    dims = broadcast_prefix(in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args),
                            args)
    if dims is None:
        raise ValueError(f"{where}: in_dims is not compatible with the structure of `inputs`. "
                         f"in_dims has structure {tree_flatten(in_dims)[1]} but inputs has "
                         f"structure {spec}.")
    size = None
    sizes = []
    for x, d in zip(flat_args, dims):
        if d is None:
            continue
        if not isinstance(d, int):
            raise ValueError(f"{where}: Got in_dim={d} for an input but in_dim must be either "
                             f"an integer dimension or None.")
        if not isinstance(x, Tensor):
            raise ValueError(f"{where}: Got in_dim={d} for an input but the input is of type "
                             f"{type(x)}. We cannot vmap over non-Tensor arguments, please "
                             f"use None as the respective in_dim")
        if not -x.ndim <= d < x.ndim:
            raise ValueError(f"{where}: Got in_dim={d} for some input, but that input is a "
                             f"Tensor of dimensionality {x.ndim} so expected in_dim to satisfy "
                             f"-{x.ndim} <= in_dim < {x.ndim}.")
        sizes.append(x.shape[d])
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    size = sizes[0]
    if any(s != size for s in sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    return flat_args, spec, dims, size


def _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs):
    flat_args, spec, dims, size = _flat_in_dims(func, in_dims, args)
    if chunk_size is not None and chunk_size < size:
        def chunk(s):
            n = min(chunk_size, size - s)
            return tree_unflatten([x if d is None else x.narrow(d, s, n)
                                   for x, d in zip(flat_args, dims)], spec)
        outs = [_vmap_call(func, in_dims, out_dims, randomness, None, chunk(s), kwargs)
                for s in range(0, size, chunk_size)]
        return _concat(outs, out_dims)
    try:
        return _flat_vmap(func, flat_args, spec, dims, size, out_dims, randomness, kwargs)
    except _Different:
        return _loop_vmap(func, flat_args, spec, dims, size, out_dims, kwargs)


def _concat(outs, out_dims):
    import ember
    flat0, spec = tree_flatten(outs[0])
    dims = broadcast_prefix(out_dims, outs[0]) or [out_dims] * len(flat0)
    cols = zip(*(tree_flatten(o)[0] for o in outs))
    return tree_unflatten([col[0] if d is None else ember.cat(col, d)
                           for col, d in zip(cols, dims)], spec)


class _Different(Exception):
    """A random op ran under randomness="different": the vmap reruns as a loop."""


_SAME_BATCHED = ("Vmap does not currently support same randomness with a batched tensor input. "
                 "Please file an issue with functorch")


def batched_random(sample, args, kwargs, inplace):
    """``sample(*args, **kwargs)``, a random function called with a BatchedTensor argument,
    under the active vmaps' randomness: "error" raises, "different" reruns the vmap as a
    loop, "same" fills a batched ``self`` (in-place samplers) with one draw for the whole
    batch and refuses batched parameters (torch's rules)."""
    from ember import empty
    from ember.func._batched import BatchedTensor
    self, rest = args[0], list(args[1:]) + list(kwargs.values())
    if inplace and not any(type(a) is BatchedTensor for a in rest):
        physical = _per_example(self)
        if physical is not None:    # one draw per element of the physical tensor
            _PHYSICAL[0] += 1
            try:
                sample(physical, *args[1:], **kwargs)
            finally:
                _PHYSICAL[0] -= 1
            return self
    _check_randomness()
    if not inplace or any(type(a) is BatchedTensor for a in rest):
        raise RuntimeError(_SAME_BATCHED)
    draw = empty(tuple(self.shape), dtype=self.dtype, device=self.device)
    sample(draw, *args[1:], **kwargs)
    return self.copy_(draw)


_PHYSICAL = [0]      # in-place draws into a physical tensor running (see ``_per_example``)
# vmaps rerunning as loops: their levels are gone from STATE.levels, so ``_per_example``
# cannot tell whether ``self`` was batched there, nor that one asked for "same"
_LOOPING = [0]


def _per_example(self):
    """The physical tensor under ``self`` when an in-place draw into it is the "different"
    randomness the vmaps ask for (all active vmaps are "different", ``self`` is batched at
    each, its memory has no overlap, no vmap reruns as a loop: the batch run by batching
    rules, so PyTorch's fallback warnings for the ops after it stay); None otherwise (the
    vmap reruns as a loop)."""
    from ember.func._batched import BatchedTensor
    levels = set()
    t = self
    while type(t) is BatchedTensor:
        levels.add(t._level)
        t = t._value
    if _NO_RANDOM[0] or _LOOPING[0] or type(t) is not Tensor or any(
            lv.randomness != "different" or lv.level not in levels for lv in STATE.levels):
        return None
    if any(s == 0 and n > 1 for s, n in zip(t.stride(), t.shape)):
        return None
    return t


_UNBATCHED_INPLACE = ("vmap: Cannot ask for different inplace randomness on an unbatched "
                      "tensor. This will appear like same randomness. If this is necessary "
                      "for your usage, please file an issue with functorch.")


def unbatched_inplace_random():
    """An in-place random op on a tensor no vmap batches (``empty(n).normal_()``, as
    distributions' rsample draws): the innermost vmap that is not "same" refuses it."""
    for lv in reversed(STATE.levels):
        if lv.randomness == "error":
            raise RuntimeError(_RANDOM_ERROR)
        if lv.randomness == "different":
            raise RuntimeError(_UNBATCHED_INPLACE)


_NO_RANDOM = [0]     # how many random_error_scope()s are open


@contextlib.contextmanager
def random_error_scope():
    """Random draws raise as under vmap(randomness="error"): for transforms that run ``func``
    once where PyTorch runs it under such a vmap (jacfwd)."""
    _NO_RANDOM[0] += 1
    try:
        with _RandomGuard():
            yield
    finally:
        _NO_RANDOM[0] -= 1


def _check_randomness():
    """Raise as the active vmaps' randomness asks when a random number is drawn."""
    if _PHYSICAL[0]:
        return
    if _NO_RANDOM[0]:
        raise RuntimeError(_RANDOM_ERROR)
    for lv in STATE.levels:
        if lv.randomness == "error":
            raise RuntimeError(_RANDOM_ERROR)
    if any(lv.randomness == "different" for lv in STATE.levels):
        raise _Different


_COUNT_LOCK = threading.Lock()


def _count_vmaps(step):
    """Count the vmaps running in all threads (see NOTE [Batched parameters])."""
    with _COUNT_LOCK:
        ACTIVE_VMAPS[0] += step


def _flat_vmap(func, flat_args, spec, dims, size, out_dims, randomness, kwargs):
    STATE.counter += 1
    level = STATE.counter
    batched = [x if d is None else wrap(x.movedim(d, 0) if d else x, level)
               for x, d in zip(flat_args, dims)]
    STATE.levels.append(Level(level, size, randomness))
    _count_vmaps(1)
    guard = _RandomGuard()
    try:
        with guard:
            out = func(*tree_unflatten(batched, spec), **kwargs)
    finally:
        STATE.levels.pop()
        _count_vmaps(-1)
    return _unwrap_outputs(func, out, out_dims, level, size)


def _loop_vmap(func, flat_args, spec, dims, size, out_dims, kwargs):
    import ember
    _LOOPING[0] += 1
    try:
        outs = [func(*tree_unflatten([x if d is None else x.select(d, b)
                                      for x, d in zip(flat_args, dims)], spec), **kwargs)
                for b in range(size)]
    finally:
        _LOOPING[0] -= 1
    flat0, ospec = tree_flatten(outs[0])
    odims = broadcast_prefix(out_dims, outs[0]) or [out_dims] * len(flat0)
    cols = zip(*(tree_flatten(o)[0] for o in outs))
    return tree_unflatten([col[0] if d is None else ember.stack(col, d)
                           for col, d in zip(cols, odims)], ospec)


def _unwrap_outputs(func, out, out_dims, level, size):
    flat, spec = tree_flatten(out)
    dims = broadcast_prefix(out_dims, out)
    if dims is None:
        raise ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims "
                         f"is not compatible with the structure of `outputs`. out_dims has "
                         f"structure {tree_flatten(out_dims)[1]} but outputs has structure "
                         f"{spec}.")
    result = []
    for x, d in zip(flat, dims):
        if d is None:
            if is_batched_at(x, level):
                raise ValueError(f"vmap({_name(func)}, ...): `{_name(func)}` can not return a "
                                 f"BatchedTensor when out_dim is None")
            result.append(x)
            continue
        if not isinstance(x, Tensor):
            raise ValueError(f"vmap({_name(func)}, ...): `{_name(func)}` must only return "
                             f"Tensors, got type {type(x)}. Did you mean to set out_dims= to "
                             f"None for output?")
        if is_batched_at(x, level):
            x = x._value
        else:
            x = x.unsqueeze(0).expand((size,) + tuple(x.shape))
        result.append(x.movedim(0, d) if d else x)
    return tree_unflatten(result, spec)


class _RandomGuard:
    """Watch the default generators while a vmap runs (see ``randomness``): the CPU's, and
    the GPUs' once a GPU is in use (CUDA samples draw from those)."""

    def __enter__(self):
        from ember._random import default_generator
        gens = [default_generator]
        if backend.cuda_initialized():
            from ember.cuda import random as cuda_random
            cuda_random.default_generator()             # the current GPU's, made if new
            gens += cuda_random._GENERATORS.values()
        self.saved = [(g, g._rng) for g in gens]
        for g, rng in self.saved:
            if not isinstance(rng, _GuardedRng):
                g._rng = _GuardedRng(rng)

    def __exit__(self, *exc):
        for g, rng in self.saved:
            g._rng = rng


class _GuardedRng:
    """The generator's NumPy Generator, checking the active vmaps' randomness on each draw."""

    def __init__(self, rng):
        self._rng = rng

    @staticmethod
    def before_draw():
        """Check for a draw that does not use the NumPy stream (the GPU's Philox kernels)."""
        _check_randomness()

    def __getattr__(self, name):
        attr = getattr(self._rng, name)
        if name == "bit_generator" or not callable(attr):
            return attr
        _check_randomness()
        return attr
