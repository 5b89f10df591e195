"""The range factories: ``arange``, ``range``, ``linspace`` and ``logspace``."""

import math
import numbers
import warnings

import numpy as np

from ember import _dtype as D
from ember._creation import (_alloc, _finish, _out_device, _out_dtype, _place, _target,
                             _write_out, check_requires_grad)
from ember._device import as_device, get_default_device
from ember._warn import outside_level
from ember._tensor import Tensor

__all__ = ["arange", "linspace", "logspace"]

_UNSET = object()       # arange's start when not given


def _number(x, name, fn="arange", grad_ok=False):
    """A range bound as a Python number; a tensor bound must be 0-dim (and, but for
    linspace's and logspace's, not require grad), as in PyTorch."""
    from ember.ops._scalars import number_arg       # (ember.ops imports this module)
    if grad_ok and isinstance(x, Tensor):
        x = x.detach()
    return number_arg(x, fn, name)


def _space_ends(name, start, end):
    """linspace's and logspace's ends as numbers: PyTorch refuses tensors of 1 dim or more."""
    dims = [t.dim() for t in (start, end) if isinstance(t, Tensor)]
    if any(dims):
        if len(dims) == 2:
            got = f"start with {dims[0]} dimension(s) and end with {dims[1]} dimension(s)"
        else:
            got = f"{'start' if isinstance(start, Tensor) else 'end'} with {dims[0]} dimension(s)"
        raise RuntimeError(f"{name} only supports 0-dimensional start and end tensors, "
                           f"but got {got}.")
    return _number(start, "start", name, True), _number(end, "end", name, True)


def _reject_range_dtype(kernel, dtype, device, complex_ok=False):
    """PyTorch's NotImplementedError for the dtypes its range kernels have no version for."""
    dev = get_default_device() if device is None else as_device(device)
    unsupported = (D.bool_, D.float8_e4m3fn, D.float8_e5m2) + D.WIDE_UNSIGNED
    if dev.type in ("cpu", "cuda") and (dtype in unsupported or
                                        dtype.is_complex and not complex_ok):
        raise NotImplementedError(f"\"{kernel}_{dev.type}\" not implemented for "
                                  f"'{dtype._torch_name}'")


def _bounds(start, end, step, fn="arange"):
    """``arange``'s and ``range``'s bounds as numbers: (start, end, step); one bound is the
    end."""
    if end is None:
        start, end = 0, start
    return _number(start, "start", fn), _number(end, "end", fn), _number(step, "step", fn)


def _span(start, end, step, fn="arange"):
    """``arange``'s and ``range``'s bounds checked: (start, end, step); one bound is the
    end."""
    return _checked(*_bounds(start, end, step, fn))


def _checked(start, end, step):
    """The bounds refused as PyTorch's range kernels refuse them."""
    if step == 0 or step != step:           # a NaN step is refused as zero is
        raise RuntimeError("step must be nonzero")
    if not (math.isfinite(start) and math.isfinite(end)):
        raise RuntimeError(f"unsupported range: {start:g} -> {end:g}")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    return start, end, step


def arange(start=_UNSET, end=_UNSET, step=1, *, out=None, dtype=None, layout=None,
           device=None, requires_grad=False):
    """Values from ``start`` up to (excluding) ``end`` in steps of ``step``."""
    if end is _UNSET:
        end = None
    elif end is None:       # (no overload takes an end of None: arange(5, None))
        from ember.ops._overloads import combination_error
        given = (start, end) if type(step) is int and step == 1 else (start, end, step)
        raise combination_error("arange", given[start is _UNSET:], {})
    if start is _UNSET:
        if end is None:
            _no_end(step, out, dtype, layout, device, requires_grad)
        start = 0
    check_requires_grad(requires_grad, "arange")
    start, end, step = _bounds(start, end, step)
    ints = all(isinstance(v, numbers.Integral) for v in (start, end, step))
    dtype = _out_dtype(dtype, out, "arange")
    if dtype is None:
        dtype = D.int64 if ints else D.get_default_dtype()
    _reject_range_dtype("arange", dtype, device)       # (before the bounds, as PyTorch's)
    start, end, step = _checked(start, end, step)
    n = max(0, math.ceil((end - start) / step))
    if not ints and not dtype.is_floating_point and not dtype.is_complex:
        # PyTorch's integral kernels count in int64: the bounds truncated (its int64 kernel
        # counts the truncated span; the others count the span as given)
        start, end, step, ints = *(math.trunc(v) for v in (start, end, step)), True
        if dtype is D.int64:
            if step == 0:
                raise ValueError("step must be nonzero")
            n = max(0, math.ceil((end - start) / step))
    # made where it lives: on a GPU, no upload to wait for
    if ints:
        def fill(xp, _, np_dtype):
            if step == 0:                   # (truncated to 0: PyTorch repeats the start)
                return xp.full(n, start, dtype=np.int64).astype(np_dtype, copy=False)
            return xp.arange(start, start + n * step, step, dtype=np.int64).astype(
                np_dtype, copy=False)       # (n values: PyTorch's count, not NumPy's)
    else:
        def fill(xp, _, np_dtype):
            return (start + step * xp.arange(n, dtype=np.float64)).astype(np_dtype, copy=False)
    if out is None:
        return _alloc(fill, (n,), dtype, device, requires_grad)
    arr = _alloc(fill, (n,), dtype, _out_device(device, out), False)._data
    return _write_range(out, arr, warn=True)


def _no_end(step, *keywords):
    """PyTorch's TypeError for an ``arange`` given no end: no overload takes nothing; one
    given keywords only, ``arange(end, *, ...)``, misses its end."""
    if type(step) is int and step == 1 and all(k is None for k in keywords[:4]) \
            and keywords[4] is False:
        from ember.ops._overloads import combination_error
        raise combination_error("arange", (), {})
    raise TypeError('arange() missing 1 required positional arguments: "end"')


def _write_range(out, arr, warn=False):
    """``arr`` written into a range factory's ``out=``: in out's own shape when it holds as
    many elements (PyTorch keeps that shape), else resized to ``arr``'s, with arange's warning
    (``warn``) when out had elements."""
    if out.numel() == arr.size:
        if out.shape != arr.shape and out.device.type != "meta":
            arr = arr.reshape(out.shape)
    elif warn and out.numel():
        warnings.warn(f"The number of elements in the out tensor of shape {list(out.shape)} "
                      f"is {out.numel()} which does not match the computed number of elements "
                      f"{arr.size}. Note that this may occur as a result of rounding error. The "
                      f"out tensor will be resized to a tensor of shape ({arr.size},).",
                      UserWarning, stacklevel=outside_level())
    return _write_out(out, arr)


def deprecated_range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None,
                     device=None, requires_grad=False):
    """Deprecated: values from ``start`` to ``end`` INCLUSIVE in steps of ``step``, of the
    default dtype (``arange`` excludes ``end``)."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    check_requires_grad(requires_grad, "range", none_ok=False)
    start, end, step = _span(start, end, step, "range")
    n = math.floor((end - start) / step) + 1
    dtype = _out_dtype(dtype, out, "range")
    if dtype is not None:
        _reject_range_dtype("range", dtype, device)

    def fill(xp, _, np_dtype):
        return (start + step * xp.arange(n, dtype=np.float64)).astype(np_dtype, copy=False)
    dtype = D.get_default_dtype() if dtype is None else dtype
    if out is None:
        return _alloc(fill, (n,), dtype, device, requires_grad)
    return _write_range(out, _alloc(fill, (n,), dtype, _out_device(device, out), False)._data)


def _space_dtype(name, start, end, dtype):
    """linspace's and logspace's dtype: a complex endpoint makes the default one complex."""
    complex_ends = isinstance(start, complex) or isinstance(end, complex)
    inferred = D.default_complex_dtype() if complex_ends else D.get_default_dtype()
    if dtype is None:
        return inferred
    if complex_ends and not dtype.is_complex:
        part = "double" if inferred is D.complex128 else "float"
        raise RuntimeError(f"torch.{name}(): inferred dtype c10::complex<{part}> can't be "
                           f"safely cast to passed dtype {dtype._torch_name}")
    return dtype


def linspace(start, end, steps, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    check_requires_grad(requires_grad, "linspace")
    if isinstance(steps, bool) or not hasattr(type(steps), "__index__"):
        raise TypeError(f"linspace(): argument 'steps' must be int, not {type(steps).__name__}")
    steps = steps.__index__()
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    start, end = _space_ends("linspace", start, end)
    dtype = _space_dtype("linspace", start, end, _out_dtype(dtype, out, "linspace"))
    if steps > 1:                   # (PyTorch fills one step without its kernel)
        _reject_range_dtype("linspace", dtype, device, complex_ok=True)
    _, dev = _target(_out_device(device, out))
    if dtype.is_floating_point:
        _check_float_ends(start, end, steps, dtype)
    if dtype.np in (np.float32, np.float64):
        arr = _evenly_spaced(start.real, end.real, steps, dtype.np.type)
    elif dtype.is_complex:
        part = np.float32 if dtype.np == np.complex64 else np.float64
        arr = _evenly_spaced(start.real, end.real, steps, part).astype(part) \
            + 1j * _evenly_spaced(start.imag, end.imag, steps, part).astype(part)
    elif dtype.category <= D.INTEGRAL:       # float64 values between the integer ends, cut
        arr = np.trunc(_evenly_spaced(*_integer_ends(start, end, steps, dtype), steps,
                                      np.float64).astype(np.float64))
    else:
        arr = _evenly_spaced_16bit(start.real, end.real, steps, dtype.np)
    with np.errstate(invalid="ignore"):         # (beyond int64, a C cast's INT64_MIN)
        arr = _place(arr.astype(dtype.np), dev)
    if out is not None:
        return _write_range(out, arr)
    return _finish(arr, requires_grad)


def _integer_ends(start, end, steps, dtype):
    """linspace's ends in an integer dtype as PyTorch's kernel converts them: an end that
    does not fit raises, a negative integer wraps into an unsigned dtype (-1 is 255 in uint8);
    one step converts only ``start``."""
    from ember.ops._scalars import checked_scalar     # (ember.ops imports this module)
    if steps < 1:
        return 0, 0
    first = int(checked_scalar(np, start, dtype.np))
    return first, (int(checked_scalar(np, end, dtype.np)) if steps > 1 else first)


def _check_float_ends(start, end, steps, dtype):
    """PyTorch's overflow error for ends beyond a float dtype's range: the kernel converts
    both when it runs (steps > 1); one step fills with ``start``, unchecked in 16 bits."""
    from ember.ops._scalars import fitted_number     # (ember.ops imports this module)
    if steps > 1:
        fitted_number(start, dtype.np)
        fitted_number(end, dtype.np)
    elif steps == 1 and dtype.itemsize > 2:
        fitted_number(start, dtype.np)


def _evenly_spaced_16bit(start, end, steps, dtype):
    """linspace's values in a 16-bit float as PyTorch's CPU kernel computes them: halves
    counted from each end as in ``_evenly_spaced``, but every operation (the ends, the step,
    each count and each product and sum) rounded to ``dtype``, so that counts past 256
    (bfloat16) or 2048 (float16) are rounded too."""
    def rounded(values):            # one float32 operation, then rounded to ``dtype``
        return np.asarray(values, np.float32).astype(dtype).astype(np.float32)

    with np.errstate(over="ignore", invalid="ignore"):
        first, last = rounded(start), rounded(end)
        if steps <= 1:
            return np.full(steps, first)
        step = rounded(rounded(last - first) / rounded(steps - 1))
        half = steps // 2
        counts = rounded(np.arange(steps))
        up = rounded(first + rounded(step * counts[:half]))
        down = rounded(last - rounded(step * counts[steps - half - 1::-1]))
    return np.concatenate([up, down]).astype(dtype)


def _evenly_spaced(start, end, steps, step_type):
    """linspace's values as PyTorch computes them, to the last bit once cast to
    ``step_type``: the first half counted up from ``start`` and the rest back from ``end``
    (so that a range symmetric about 0 is symmetric), each with one rounding as a fused
    multiply-add gives (emulated in a wider type, which is returned), from a step computed
    in ``step_type``."""
    wide = np.float64 if step_type == np.float32 else np.longdouble
    if steps <= 1:
        return np.full(steps, start, wide)
    first, last = step_type(start), step_type(end)
    step = wide((last - first) / step_type(steps - 1))
    half = steps // 2
    values = np.empty(steps, wide)
    with np.errstate(invalid="ignore"):         # infinite ends give NaN, silently
        values[:half] = wide(first) + step * np.arange(half, dtype=wide)
        values[half:] = wide(last) - step * np.arange(steps - half - 1, -1, -1, dtype=wide)
    return values


def logspace(start, end, steps, base=10.0, *, out=None, dtype=None, layout=None,
             device=None, requires_grad=False):
    """``steps`` values spaced evenly on a log scale from ``base**start`` to ``base**end``."""
    if isinstance(steps, bool) or not hasattr(type(steps), "__index__"):
        raise TypeError(f"logspace(): argument 'steps' must be int, not {type(steps).__name__}")
    if not hasattr(type(base), "__float__"):
        raise TypeError(f"logspace(): argument 'base' must be float, not {type(base).__name__}")
    check_requires_grad(requires_grad, "logspace")
    _, dev = _target(_out_device(device, out))
    dtype = _space_dtype("logspace", *_space_ends("logspace", start, end),
                         _out_dtype(dtype, out, "logspace"))
    if steps > 1:                   # (PyTorch fills one step without its kernel)
        _reject_range_dtype("logspace", dtype, device, complex_ok=True)
    exponents = linspace(start, end, steps, dtype=D.complex128 if dtype.is_complex else D.float64,
                         device="cpu")
    with np.errstate(all="ignore"):             # (0 ** -1 is inf, silently, in PyTorch)
        arr = np.power(float(base), exponents._data)
        if dtype.category == D.INTEGRAL:        # (a bool takes whether a value is nonzero)
            if steps == 1 and not np.iinfo(dtype.np).min <= arr[0] <= np.iinfo(dtype.np).max:
                from ember.ops._scalars import _overflow    # (PyTorch fills one step, checked)
                _overflow(dtype.np)
            arr = np.trunc(arr)
        arr = arr.astype(dtype.np)
    arr = _place(arr, dev)
    if out is not None:
        return _write_range(out, arr)
    return _finish(arr, requires_grad)
