"""The in-place sampling methods: ``Tensor.uniform_``, ``normal_``, ``random_``, ``bernoulli_``,
``exponential_``, ``geometric_``, ``log_normal_`` and ``cauchy_``, drawn from the generators
and streams of ``ember._random``. A tensor with history gets PyTorch's zero-gradient node; a
meta tensor draws nothing."""

import functools
import math

import numpy as np

from ember import _dtype as D
from ember._random import _below, _check_generator, _drawn_on_device, _rng_on, _vmap_aware
from ember._random_checks import (_barebones, _check_from_alone, _check_random_bounds,
                                  _continuous, _float_dtype,
                                  _not_implemented_for, _random_limit)
from ember._storage import _c_type
from ember._tensor import Tensor, _make
from ember._transform_births import STATE as _BIRTHS, refuse_captured
from ember.backend import cuda_backend, host_array, loud_fp, quiet_fp
from ember.backend.meta import MetaArray


def _fill_(t, arr, node):
    """Write the samples ``arr`` into ``t``; a tensor with history gets a backward node
    named ``node`` (as PyTorch's, e.g. NormalBackward0) passing no gradient back."""
    from ember.autograd.grad_mode import STATE
    from ember.ops._inplace import _check_leaf
    from ember.ops._overlap import check_internal_overlap
    # (a forward-mode transform's input records, though it reports no requires_grad: NOTE
    # [Forward-mode primals]; its tangent is cut as any history)
    history = STATE.grad_enabled and (t._requires_grad or t._grad_fn is not None)
    if STATE.grad_enabled:
        _check_leaf(t)
    check_internal_overlap(t._data)
    if history:         # fill_ records the cut (a zero gradient) and bumps the version
        from ember.ops.conversion import fill_
        fill_(t, 0)
    data = t._data
    token = quiet_fp()          # (values beyond the dtype's range become inf silently)
    try:
        data[...] = _like_data(data, arr)
    finally:
        loud_fp(token)
    if not history:
        t._bump_version()
    elif type(t._grad_fn).__name__ == "FillBackward2":     # (a view's node stays as it is)
        from ember.ops._registry import rename_node
        rename_node(t, node)
    return t


def _like_data(data, arr):
    """The samples ``arr`` where they can be written into the backend array ``data``: those
    drawn on the host uploaded to its device, integers cast."""
    if type(data) is not np.ndarray and type(arr) is not type(data):   # drawn on the host
        return cuda_backend().to_device(np.asarray(arr).astype(data.dtype), data.device.id)
    if data.dtype.kind in "iub":
        return np.asarray(arr).astype(data.dtype)
    return arr


def _check_floats(fn, *values):
    """PyTorch's error for a float argument of ``fn`` given as a tensor that is not a 0-dim
    one without grad; ``values``: (name, value) in position order."""
    for position, (name, value) in enumerate(values, 1):
        if isinstance(value, Tensor) and (value.ndim or value.requires_grad):
            raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be float, "
                            f"not Tensor")


def uniform_(self, from_=0.0, to=1.0, *, generator=None, **kw):
    """Fill with uniform samples on [from, to)."""
    _check_generator(generator, "uniform_")
    from_ = kw.pop("from", from_)
    _check_floats("uniform_", ("from", from_), ("to", to))
    if _BIRTHS.levels:      # NOTE [Captured tensors]
        refuse_captured(self, "aten::uniform_")
    _float_dtype(self.dtype, "check_uniform_bounds")
    _barebones(self.dtype, "check_uniform_bounds", wide_unsigned=False)
    if self.dtype.is_complex and not self.numel():     # (PyTorch checks the real view's bounds
        return _fill_(self, np.zeros(self.shape), "UniformBackward0")   # where it draws)
    _check_uniform_bounds(self.dtype.to_real(), from_, to)
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={from_:g} > to={to:g}")
    return _fill_(self, _parts(self, generator, "uniform", from_, to), "UniformBackward0")


def _parts(t, generator, kind, a, b):
    """Samples for ``t`` of ``kind`` "uniform" (on [a, b)) or "normal" (mean a, std b); a
    complex ``t`` gets them for its real and its imaginary part, each (PyTorch's sampler of
    the real view)."""
    is_complex = t.dtype.is_complex
    shape = tuple(t.shape) + (2,) if is_complex else t.shape
    drawn = _drawn_on_device(generator, shape, t.dtype.to_real(), t.device, kind, a, b)
    if drawn is None:
        rng = _rng_on(generator, t.device)
        if kind == "uniform":   # (cannot overflow: uniform_ refuses a span beyond the range)
            drawn = a + (b - a) * rng.random(shape)
        else:
            token = quiet_fp()      # (PyTorch overflows to inf silently)
            try:
                drawn = a + b * rng.standard_normal(shape)
            finally:
                loud_fp(token)
    return drawn[..., 0] + 1j * drawn[..., 1] if is_complex else drawn


@functools.lru_cache(maxsize=None)
def _finite_max(dtype):
    """The largest finite value of the float ``dtype``, as a Python float."""
    return float(D.finfo(dtype).max)


def _check_uniform_bounds(dtype, from_, to):
    """PyTorch's errors for uniform_ bounds outside ``dtype``'s finite range, or whose span
    overflows it."""
    top = _finite_max(dtype)
    for what, bound in (("from", from_), ("to", to)):
        if not -top <= bound <= top:
            raise RuntimeError(f"{what} is out of bounds for {_c_type(dtype)}")
    if to - from_ > top:
        limit = "Double" if dtype is D.float64 else "Float"
        raise RuntimeError(f"uniform_ expects to-from <= std::numeric_limits<{limit}>::max(), "
                           f"but found to={to:g} and from={from_:g} which result in to-from to "
                           f"exceed the limit")


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with normal samples."""
    _check_generator(generator, "normal_")
    _check_floats("normal_", ("mean", mean), ("std", std))
    if _BIRTHS.levels:
        refuse_captured(self, "aten::normal_")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    if self.numel():            # (PyTorch's kernel, which refuses dtypes, skips no elements)
        _float_dtype(self.dtype, "normal_kernel_cpu")
        _barebones(self.dtype, "normal_kernel_cpu", wide_unsigned=False)
    # (a complex tensor's parts each get half the variance)
    part_std = std / math.sqrt(2) if self.dtype.is_complex else std
    return _fill_(self, _parts(self, generator, "normal", mean, part_std), "NormalBackward0")


def normal_of_tensors(mean, std, generator, out):
    """``normal`` with a tensor ``mean`` or ``std``, computed as PyTorch does: its output
    (``out``, else a tensor like that operand) resized to the broadcast shape (of the mean
    and ``out`` where std is a number), filled by ``normal_``, scaled by a tensor ``std`` and
    shifted by the mean in place, so that their refusals of dtypes are PyTorch's."""
    ref = mean if isinstance(mean, Tensor) else std
    if out is None and not _BIRTHS.levels and ref.dtype in _PLAIN_FLOATS:
        fast = _plain_normal(mean, std, ref, generator)
        if fast is not None:
            return fast
    import ember
    from ember.ops._out import warn_resized
    from ember.ops._registry import broadcast_message
    output = ember.empty_like(ref, memory_format=ember.contiguous_format) if out is None \
        else out
    shapes = [tuple(mean.shape) if isinstance(mean, Tensor) else (),
              tuple(std.shape) if isinstance(std, Tensor) else tuple(output.shape)]
    try:
        shape = shapes[0] if shapes[0] == shapes[1] else np.broadcast_shapes(*shapes)
    except ValueError:
        raise RuntimeError(broadcast_message(shapes)) from None
    with ember.no_grad():
        if tuple(output.shape) != shape:
            if out is not None and out.numel():     # (not the output made here)
                warn_resized(output.shape, shape)
            output.resize_(shape)
        output.normal_(0.0, 1.0 if isinstance(std, Tensor) else std, generator=generator)
        if isinstance(std, Tensor):
            output.mul_(std)
        output.add_(mean if isinstance(mean, Tensor) else
                    ember.full((), float(mean) if isinstance(mean, int) else mean,  # (read as a
                               dtype=output.dtype, device=output.device))  # float, 2**70 too)
    return output


_PLAIN_FLOATS = (D.float32, D.float64)
_FLOAT_MAX = {dtype: float(np.finfo(dtype.np).max) for dtype in _PLAIN_FLOATS}


def _plain_normal(mean, std, ref, generator):
    """``normal_of_tensors`` without ``out`` in one pass, where its steps cannot refuse or
    warn: operands of ``ref``'s shape, dtype (float32/64) and device, or Python numbers; the
    same samples, rounded as its ``normal_``, ``mul_`` and ``add_`` round them. None
    elsewhere (nothing drawn)."""
    device = ref.device
    for value in (mean, std):
        if isinstance(value, Tensor):
            if value is not ref and (value.dtype is not ref.dtype or value.shape != ref.shape
                                     or value.device != device):
                return None
        elif not (type(value) is float or type(value) is int and abs(value) < 2 ** 53):
            return None
    data = ref._data
    if type(data) is MetaArray or not isinstance(mean, Tensor) and \
            float("inf") != abs(mean) > _FLOAT_MAX[ref.dtype]:      # (add_ refuses it)
        return None
    scale = 1.0 if isinstance(std, Tensor) else std
    shape = tuple(ref.shape)
    drawn = _drawn_on_device(generator, shape, ref.dtype, device, "normal", 0.0, scale)
    token = quiet_fp()          # (PyTorch overflows to inf silently)
    try:
        if drawn is None:       # (as normal_ draws them)
            drawn = np.asarray(0.0 + scale * _rng_on(generator, device).standard_normal(shape))
        arr = _like_data(data, drawn).astype(data.dtype)       # (a fresh row-major array)
        if isinstance(std, Tensor):
            arr *= std._data
        arr += mean._data if isinstance(mean, Tensor) else data.dtype.type(mean)
    finally:
        loud_fp(token)
    return _make(arr)


_UNSET = object()


def random_(self, from_=_UNSET, to=_UNSET, *, generator=None, **kw):
    """Fill with integers from [from, to) (default: the dtype's range of exact integers)."""
    _check_generator(generator, "random_")
    from_ = kw.pop("from", from_)
    if to is _UNSET and from_ is _UNSET:                 # random_()
        node, from_, to = "RandomBackward2", 0, None
    elif to is _UNSET or from_ is _UNSET:               # random_(to)
        node, from_, to = "RandomBackward1", 0, from_ if to is _UNSET else to
        _check_random_ints(("to", to))
    else:                                               # random_(from, to), to may be None
        node = "RandomBackward0"
        _check_random_ints(("from", from_), *((("to", to),) if to is not None else ()))
    if _BIRTHS.levels:
        refuse_captured(self, _RANDOM_OVERLOADS[node])
    if node == "RandomBackward2":   # (no kernel, which refuses dtypes, runs for no elements)
        if not self.numel():
            return _fill_(self, np.zeros(self.shape), node)
        _not_implemented_for(self.dtype, "random_kernel_cpu", (D.COMPLEX,))
        _barebones(self.dtype, "random_kernel_cpu")
    given = to is not None
    if to is None and node == "RandomBackward0":
        _check_from_alone(self.dtype, from_)
    if to is None:
        to = _random_limit(self.dtype)
    if from_ >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} "
                           f">= to={to}")
    if node != "RandomBackward2":   # (its bounds check dispatches on the dtype, however empty)
        _barebones(self.dtype, "random_update_from_to", wide_unsigned=False)
    _check_random_bounds(self.dtype, from_, to, given)
    drawn = _drawn_on_device(generator, self.shape, self.dtype, self.device, "integers", from_,
                             to)
    if drawn is not None:
        return _fill_(self, drawn, node)
    drawn = _rng_on(generator, self.device).integers(from_, to, size=self.shape)
    return _fill_(self, drawn, node)


_RANDOM_OVERLOADS = {"RandomBackward2": "aten::random_", "RandomBackward1": "aten::random_.to",
                     "RandomBackward0": "aten::random_.from"}


def _check_random_ints(*bounds):
    """PyTorch's errors for random_ bounds, (name, value) in position order, that are not
    64-bit integers."""
    from ember._random_checks import _parser_error
    from ember.ops._dims import type_name
    for position, (name, bound) in enumerate(bounds, 1):
        if isinstance(bound, bool) or not hasattr(type(bound), "__index__"):
            raise _parser_error(f"random_(): argument '{name}' (position {position}) must be "
                                f"int, not {type_name(bound)}")
        if not -2 ** 63 <= bound < 2 ** 63:
            raise ValueError("Overflow when unpacking long long")


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 0/1 samples with probability ``p`` (a number or tensor)."""
    _check_generator(generator, "bernoulli_")
    on_host = isinstance(p, Tensor) and p.device != self.device
    node = "BernoulliBackward1" if isinstance(p, Tensor) else "BernoulliBackward2"
    if _BIRTHS.levels:
        refuse_captured(self, "aten::bernoulli_." + ("Tensor" if isinstance(p, Tensor) else
                                                     "float"))
    if isinstance(p, Tensor):
        _not_implemented_for(self.dtype, "bernoulli_tensor_cpu_self_", (D.COMPLEX,))
        _not_implemented_for(p.dtype, "bernoulli_tensor_cpu_p_", (D.COMPLEX,))
        if self.numel():        # (float8, uint16/32/64: refused where elements are drawn)
            _barebones(self.dtype, "bernoulli_tensor_cpu_self_")
            _barebones(p.dtype, "bernoulli_tensor_cpu_p_")
    if isinstance(p, Tensor):
        if not self.numel():    # (no kernel runs, so no expand of p)
            return _fill_(self, np.zeros(self.shape), node)
        _check_expandable(p, self.shape)
    elif not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p:g}")
    elif self.numel():          # (no kernel, which refuses dtypes, runs for no elements)
        _not_implemented_for(self.dtype, "bernoulli_scalar_cpu_", (D.COMPLEX,))
        _barebones(self.dtype, "bernoulli_scalar_cpu_")
    drawn = None if on_host else _drawn_on_device(generator, self.shape, D.float32, self.device)
    if drawn is not None:
        return _fill_(self, _below(drawn, p._data if isinstance(p, Tensor) else p), node)
    probs = host_array(p._data) if isinstance(p, Tensor) else p
    if isinstance(p, Tensor) and probs.size and not ((probs >= 0) & (probs <= 1)).all():
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could "
                           "this error message be improved?  If so, please report an "
                           "enhancement request to PyTorch.)")
    return _fill_(self, _rng_on(generator, self.device).random(self.shape) < probs, node)


def _check_expandable(probs, target):
    """PyTorch's expand errors for the tensor ``probs`` filling a tensor of shape ``target``."""
    shape = probs.shape
    if len(shape) > len(target):
        raise RuntimeError(f"expand(torch.{probs.dtype._legacy}{{{list(shape)}}}, "
                           f"size={list(target)}): "
                           f"the number of sizes provided ({len(target)}) must be greater or "
                           f"equal to the number of dimensions in the tensor ({len(shape)})")
    for i, (have, want) in enumerate(zip(shape[::-1], target[::-1])):
        if have not in (1, want):
            dim = len(target) - 1 - i
            raise RuntimeError(f"The expanded size of the tensor ({want}) must match the "
                               f"existing size ({have}) at non-singleton dimension {dim}.  "
                               f"Target sizes: {list(target)}.  Tensor sizes: {list(shape)}")


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with exponential samples of rate ``lambd``."""
    _check_generator(generator, "exponential_")
    _check_floats("exponential_", ("lambd", lambd))
    if _BIRTHS.levels:
        refuse_captured(self, "aten::exponential_")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    if self.numel():            # (no kernel, so no dtype check, for no elements)
        _continuous(self, "Exponential")
        _barebones(self.dtype, "exponential_cpu", wide_unsigned=False)
    drawn = _rng_on(generator, self.device).exponential(1.0 / lambd, self.shape)
    return _fill_(self, drawn, "ExponentialBackward0")


def geometric_(self, p=_UNSET, *, generator=None):
    """Fill with geometric samples (number of trials to the first success)."""
    if p is _UNSET:
        raise TypeError('geometric_() missing 1 required positional arguments: "p"')
    _check_generator(generator, "geometric_")
    _check_floats("geometric_", ("p", p))
    if _BIRTHS.levels:
        refuse_captured(self, "aten::geometric_")
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    if self.numel():            # (no kernel, so no dtype check, for no elements)
        _not_implemented_for(self.dtype, "geometric_cpu", (D.BOOL, D.COMPLEX))
        _barebones(self.dtype, "geometric_cpu")
    drawn = _rng_on(generator, self.device).geometric(p, self.shape)
    return _fill_(self, drawn, "GeometricBackward0")


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with log-normal samples."""
    _check_generator(generator, "log_normal_")
    _check_floats("log_normal_", ("mean", mean), ("std", std))
    if _BIRTHS.levels:
        refuse_captured(self, "aten::log_normal_")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    if self.numel():            # (no kernel, so no dtype check, for no elements)
        _not_implemented_for(self.dtype, "log_normal_cpu", (D.BOOL, D.INTEGRAL, D.COMPLEX))
        _barebones(self.dtype, "log_normal_cpu", wide_unsigned=False)
    drawn = _rng_on(generator, self.device).lognormal(mean, std, self.shape)
    return _fill_(self, drawn, "LogNormalBackward0")


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy samples."""
    _check_generator(generator, "cauchy_")
    _check_floats("cauchy_", ("median", median), ("sigma", sigma))
    if _BIRTHS.levels:
        refuse_captured(self, "aten::cauchy_")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")
    _continuous(self, "Cauchy", c_name=True)
    if self.numel():
        _barebones(self.dtype, "cauchy_cpu", wide_unsigned=False)
    rng = _rng_on(generator, self.device)
    return _fill_(self, median + sigma * rng.standard_cauchy(self.shape), "CauchyBackward0")


def _nothing_on_meta(sample_):
    """``sample_`` (an in-place sampler), which on a meta tensor draws nothing: initializing a
    module built on the meta device costs nothing, whatever its size."""
    @functools.wraps(sample_)
    def sampler(self, *args, **kwargs):
        if type(self._data) is not MetaArray:
            return sample_(self, *args, **kwargs)
        from ember.autograd.grad_mode import STATE
        from ember.ops._inplace import _check_leaf
        if STATE.grad_enabled:
            _check_leaf(self)
        self._bump_version()
        return self
    sampler._ember_forwards = True      # (the call reads as ``sample_``'s: _call_site)
    return sampler


for _fn in (uniform_, normal_, random_, bernoulli_, exponential_, geometric_, log_normal_,
            cauchy_):
    setattr(Tensor, _fn.__name__, _nothing_on_meta(_vmap_aware(_fn, inplace=True)))
