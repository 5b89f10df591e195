"""The in-place sampling methods: ``Tensor.uniform_``, ``normal_``, ``random_``, ``bernoulli_``,
``exponential_``, ``geometric_``, ``log_normal_`` and ``cauchy_``, drawn from the generators
and streams of ``ember._random``. A tensor with history gets PyTorch's zero-gradient node; a
meta tensor draws nothing."""

import functools

import numpy as np

from ember import _dtype as D
from ember._random import (_below, _check_random_bounds, _continuous, _drawn_on_device,
                           _float_dtype, _not_implemented_for, _random_limit, _rng_on,
                           _vmap_aware)
from ember._tensor import Tensor
from ember.backend import cuda_backend, host_array
from ember.backend.meta import MetaArray


def _fill_(t, arr, node):
    """Write the samples ``arr`` into ``t``; a tensor with history gets a backward node
    named ``node`` (as PyTorch's, e.g. NormalBackward0) passing no gradient back."""
    from ember.autograd.grad_mode import STATE
    from ember.ops._inplace import _check_leaf
    from ember.ops._overlap import check_internal_overlap
    history = STATE.grad_enabled and t.requires_grad
    if STATE.grad_enabled:
        _check_leaf(t)
    check_internal_overlap(t._data)
    if history:         # fill_ records the cut (a zero gradient) and bumps the version
        from ember.ops.conversion import fill_
        fill_(t, 0)
    data = t._data
    if type(data) is not np.ndarray and type(arr) is not type(data):   # drawn on the host
        arr = cuda_backend().to_device(np.asarray(arr).astype(data.dtype), data.device.id)
    elif data.dtype.kind in "iub":
        arr = np.asarray(arr).astype(data.dtype)
    data[...] = arr
    if not history:
        t._bump_version()
    elif type(t._grad_fn).__name__ == "FillBackward2":     # (a view's node stays as it is)
        from ember.ops._registry import rename_node
        rename_node(t, node)
    return t


def uniform_(self, from_=0.0, to=1.0, *, generator=None, **kw):
    """Fill with uniform samples on [from, to)."""
    from_ = kw.pop("from", from_)
    _float_dtype(self.dtype, "check_uniform_bounds")
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={from_:g} > to={to:g}")
    drawn = _drawn_on_device(generator, self.shape, self.dtype, self.device, "uniform", from_,
                             to)
    if drawn is not None:
        return _fill_(self, drawn, "UniformBackward0")
    drawn = from_ + (to - from_) * _rng_on(generator, self.device).random(self.shape)
    return _fill_(self, drawn, "UniformBackward0")


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with normal samples."""
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    _float_dtype(self.dtype, "normal_kernel_cpu")
    drawn = _drawn_on_device(generator, self.shape, self.dtype, self.device, "normal", mean,
                             std)
    if drawn is not None:
        return _fill_(self, drawn, "NormalBackward0")
    drawn = mean + std * _rng_on(generator, self.device).standard_normal(self.shape)
    return _fill_(self, drawn, "NormalBackward0")


def random_(self, from_=0, to=None, *, generator=None, **kw):
    """Fill with integers from [from, to) (default: the dtype's range of exact integers)."""
    from_ = kw.pop("from", from_)
    node = "RandomBackward0" if to is not None else "RandomBackward1" if from_ else \
        "RandomBackward2"
    if to is None:
        to, from_ = (from_, 0) if from_ else (_random_limit(self.dtype), 0)
    if from_ >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} "
                           f">= to={to}")
    _check_random_bounds(self.dtype, from_, to)
    drawn = _drawn_on_device(generator, self.shape, self.dtype, self.device, "integers", from_,
                             to)
    if drawn is not None:
        return _fill_(self, drawn, node)
    drawn = _rng_on(generator, self.device).integers(from_, to, size=self.shape)
    return _fill_(self, drawn, node)


# the C++ type names PyTorch's bounds messages give


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 0/1 samples with probability ``p`` (a number or tensor)."""
    on_host = isinstance(p, Tensor) and p.device != self.device
    node = "BernoulliBackward1" if isinstance(p, Tensor) else "BernoulliBackward2"
    if isinstance(p, Tensor):
        _not_implemented_for(self.dtype, "bernoulli_tensor_cpu_self_", (D.COMPLEX,))
        _not_implemented_for(p.dtype, "bernoulli_tensor_cpu_p_", (D.COMPLEX,))
    else:
        _not_implemented_for(self.dtype, "bernoulli_scalar_cpu_", (D.COMPLEX,))
    drawn = None if on_host else _drawn_on_device(generator, self.shape, D.float32, self.device)
    if drawn is not None:
        return _fill_(self, _below(drawn, p._data if isinstance(p, Tensor) else p), node)
    probs = host_array(p._data) if isinstance(p, Tensor) else p
    return _fill_(self, _rng_on(generator, self.device).random(self.shape) < probs, node)


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with exponential samples of rate ``lambd``."""
    _continuous(self, "Exponential")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    drawn = _rng_on(generator, self.device).exponential(1.0 / lambd, self.shape)
    return _fill_(self, drawn, "ExponentialBackward0")


def geometric_(self, p, *, generator=None):
    """Fill with geometric samples (number of trials to the first success)."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    _not_implemented_for(self.dtype, "geometric_cpu", (D.BOOL, D.COMPLEX))
    drawn = _rng_on(generator, self.device).geometric(p, self.shape)
    return _fill_(self, drawn, "GeometricBackward0")


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with log-normal samples."""
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    _not_implemented_for(self.dtype, "log_normal_cpu", (D.BOOL, D.INTEGRAL, D.COMPLEX))
    drawn = _rng_on(generator, self.device).lognormal(mean, std, self.shape)
    return _fill_(self, drawn, "LogNormalBackward0")


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy samples."""
    _continuous(self, "Cauchy", c_name=True)
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
    return sampler


for _fn in (uniform_, normal_, random_, bernoulli_, exponential_, geometric_, log_normal_,
            cauchy_):
    setattr(Tensor, _fn.__name__, _nothing_on_meta(_vmap_aware(_fn, inplace=True)))
