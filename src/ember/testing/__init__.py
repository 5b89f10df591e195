"""ember.testing: ``assert_close`` and ``make_tensor``, as in ``torch.testing``."""

import math
import warnings

import numpy as np

from ember import _dtype as D
from ember._host_values import host_values
from ember._tensor import Tensor

__all__ = ["assert_close", "assert_allclose", "make_tensor"]

# the older assert_allclose's tolerances (rtol, atol); other dtypes compare exactly
_LEGACY_TOLERANCES = {D.float16: (1e-3, 1e-5), D.float32: (1e-4, 1e-5),
                      D.float64: (1e-5, 1e-8)}

# PyTorch's default tolerances (rtol, atol) per dtype; integers and bool compare exactly.
_TOLERANCES = {
    D.float16: (1e-3, 1e-5), D.bfloat16: (1.6e-2, 1e-5), D.float32: (1.3e-6, 1e-5),
    D.float64: (1e-7, 1e-7), D.complex64: (1.3e-6, 1e-5), D.complex128: (1e-7, 1e-7),
    D.float8_e4m3fn: (1.25e-1, 1e-3), D.float8_e5m2: (2.5e-1, 1e-3),
}


def default_tolerances(*dtypes):
    """The loosest default (rtol, atol) over ``dtypes``."""
    pairs = [_TOLERANCES.get(d, (0.0, 0.0)) for d in dtypes]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _as_array(x):
    if isinstance(x, Tensor):
        return host_values(x)
    return np.asarray(x)


def _exact_dtype(x):
    if isinstance(x, Tensor):
        return x.dtype
    arr = np.asarray(x)
    return D.FROM_NUMPY.get(arr.dtype)


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    """Raise AssertionError unless ``actual`` and ``expected`` are close (``torch.testing``).

    Tensors, NumPy arrays, numbers, and (nested) sequences and mappings of them compare
    elementwise with ``|actual - expected| <= atol + rtol * |expected|``.
    """
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got "
                         f"no {'rtol' if rtol is None else 'atol'}.")
    actual, expected = _layouts_compared(actual, expected, check_layout, msg)
    try:
        _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype,
                 check_stride, msg, ())
    except _Mismatch as e:
        text = e.args[0]
        if e.path and not (msg is not None and not callable(msg)):
            text += f"\n\nThe failure occurred for item {''.join(f'[{p!r}]' for p in e.path)}"
        raise AssertionError(text) from None


class _Mismatch(Exception):
    """A failed comparison, with the path to the failing item of nested inputs."""

    def __init__(self, text, path):
        super().__init__(text)
        self.path = path


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """Deprecated: ``assert_close`` with ``expected`` made a tensor like ``actual``, NaNs
    equal, dtypes and devices unchecked, and the older default tolerances."""
    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be "
                  "removed in a future release. Please use `torch.testing.assert_close()` "
                  "instead. You can find detailed upgrade instructions in "
                  "https://github.com/pytorch/pytorch/issues/61844.", FutureWarning,
                  stacklevel=2)
    from ember._creation import as_tensor
    actual = actual if isinstance(actual, Tensor) else as_tensor(actual)
    expected = as_tensor(expected, dtype=actual.dtype) if not isinstance(expected, Tensor) \
        else expected
    if rtol is None and atol is None:
        pairs = [_LEGACY_TOLERANCES.get(t.dtype, (0.0, 0.0)) for t in (actual, expected)]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan,
                 check_device=False, check_dtype=False, msg=msg or None)


def _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype,
             check_stride, msg, path):
    try:
        _compare_one(actual, expected, rtol, atol, equal_nan, check_device, check_dtype,
                     check_stride, msg, path)
    except AssertionError as e:
        raise _Mismatch(str(e), path) from None


def _compare_one(actual, expected, rtol, atol, equal_nan, check_device, check_dtype,
                 check_stride, msg, path):
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            raise AssertionError("The keys of the mappings do not match")
        if set(actual) != set(expected):
            raise AssertionError(
                f"The keys of the mappings do not match:\n"
                f"Missing keys in the actual mapping: {sorted(set(expected) - set(actual))}\n"
                f"Additional keys in the actual mapping: {sorted(set(actual) - set(expected))}")
        for k in expected:
            _compare(actual[k], expected[k], rtol, atol, equal_nan, check_device, check_dtype,
                     check_stride, msg, path + (k,))
        return
    if isinstance(expected, (list, tuple)) and not isinstance(actual, Tensor):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise AssertionError(f"The length of the sequences mismatch: "
                                 f"{len(actual) if hasattr(actual, '__len__') else actual} != "
                                 f"{len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, rtol, atol, equal_nan, check_device, check_dtype, check_stride, msg,
                     path + (i,))
        return
    if isinstance(expected, Tensor) != isinstance(actual, Tensor) and check_dtype:
        # (with check_dtype=False a tensor may meet an array, which ember's own tests use)
        raise TypeError(f"No comparison pair was able to handle inputs of type "
                        f"{type(actual)} and {type(expected)}.")
    if _sparse(actual) or _sparse(expected):
        return _compare_sparse(actual, expected, rtol, atol, equal_nan, check_device,
                               check_dtype, msg)
    a_dtype, e_dtype = _exact_dtype(actual), _exact_dtype(expected)
    a, e = _as_array(actual), _as_array(expected)
    if a.shape != e.shape:
        raise AssertionError(_fail(msg, f"The values for attribute 'shape' do not match: "
                                        f"{_shape(a)} != {_shape(e)}."))
    if check_device and isinstance(actual, Tensor) and isinstance(expected, Tensor) \
            and actual.device != expected.device:
        raise AssertionError(_fail(msg, f"The values for attribute 'device' do not match: "
                                        f"{actual.device} != {expected.device}."))
    if check_dtype and isinstance(actual, Tensor) and isinstance(expected, Tensor) \
            and a_dtype is not e_dtype:
        raise AssertionError(_fail(msg, f"The values for attribute 'dtype' do not match: "
                                        f"{a_dtype} != {e_dtype}."))
    if check_stride and isinstance(actual, Tensor) and isinstance(expected, Tensor) \
            and actual.stride() != expected.stride():
        raise AssertionError(_fail(msg, f"The values for attribute 'stride()' do not match: "
                                        f"{actual.stride()} != {expected.stride()}."))
    if rtol is None:
        dtypes = [d for d in (a_dtype, e_dtype) if d is not None]
        rtol, atol = default_tolerances(*dtypes) if dtypes else (0.0, 0.0)
    _compare_values(a, e, rtol, atol, equal_nan, msg,
                    "Scalars" if a.ndim == 0 else "Tensor-likes")


def _sparse(x):
    from ember.sparse._tensor import SparseTensor
    return isinstance(x, SparseTensor)


def _layouts_compared(actual, expected, check_layout, msg):
    """The pair with PyTorch's layout rule applied (top-level tensors): differing layouts fail
    when checked, and are compared densely when not."""
    if not (isinstance(actual, Tensor) and isinstance(expected, Tensor)) or \
            actual.layout is expected.layout:
        return actual, expected
    if check_layout:
        raise AssertionError(_fail(msg, f"The values for attribute 'layout' do not match: "
                                        f"{actual.layout} != {expected.layout}."))
    return actual.to_dense(), expected.to_dense()


def _compare_sparse(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg):
    """Two sparse tensors of one layout: their sizes, then their (coalesced) index tensors
    exactly and their values within tolerance, as PyTorch compares them."""
    if actual.shape != expected.shape:
        raise AssertionError(_fail(msg, f"The values for attribute 'shape' do not match: "
                                        f"{actual.shape} != {expected.shape}."))
    if actual.is_sparse:
        name = "COO"
        actual, expected = actual.coalesce(), expected.coalesce()
        indices = [("indices", actual._indices(), expected._indices())]
        a_values, e_values = actual._values(), expected._values()
    else:                           # CSR, CSC, BSR, BSC
        from ember.sparse import _layouts
        name = actual.layout.name[len("sparse_"):].upper()
        indices = [(what, getattr(actual, what)(), getattr(expected, what)())
                   for what in _layouts.index_names(actual.layout)]
        a_values, e_values = actual.values(), expected.values()
    if a_values.shape[0] != e_values.shape[0]:
        raise AssertionError(_fail(msg, f"The number of specified values in sparse {name} "
                                        f"tensors does not match: {a_values.shape[0]} != "
                                        f"{e_values.shape[0]}"))
    for what, a, e in indices:
        if a.shape != e.shape or not bool((a == e).all()):
            raise AssertionError(_fail(msg, f"Sparse {name} {what} are not equal!"))
    for attribute, check in (("device", check_device), ("dtype", check_dtype)):
        if check and getattr(a_values, attribute) != getattr(e_values, attribute):
            raise AssertionError(_fail(msg, f"The values for attribute '{attribute}' do not "
                                            f"match: {getattr(a_values, attribute)} != "
                                            f"{getattr(e_values, attribute)}."))
    if rtol is None:
        rtol, atol = default_tolerances(a_values.dtype, e_values.dtype)
    _compare_values(_as_array(a_values), _as_array(e_values), rtol, atol, equal_nan, msg,
                    f"Sparse {name} values")


def _shape(arr):
    return f"ember.Size([{', '.join(map(str, arr.shape))}])"


def _wide(arr):
    if arr.dtype.kind == "c":
        return arr.astype(np.complex128)
    if arr.dtype.kind in "iub":
        return arr.astype(np.float64) if arr.dtype.kind != "b" else arr.astype(np.int64)
    return arr.astype(np.float64)


def _close(a, e, rtol, atol, equal_nan):
    """Where ``|a - e| <= atol + rtol * |e|``; infinities are close only to themselves."""
    a, e = _wide(a), _wide(e)
    with np.errstate(all="ignore"):
        ok = (a == e) | (np.isfinite(a) & np.isfinite(e)
                         & (np.abs(a - e) <= atol + rtol * np.abs(e)))
        if equal_nan:
            ok |= np.isnan(a) & np.isnan(e)
    return ok


def _differences(a, e):
    """|a - e| and |a - e| / |e| as PyTorch reports them: in the inputs' (promoted) dtype,
    integers and bools as int64 with a float32 (default dtype) ratio."""
    if a.dtype != e.dtype:
        common = D.promote_types(D.FROM_NUMPY[a.dtype], D.FROM_NUMPY[e.dtype]).np
        a, e = a.astype(common), e.astype(common)
    with np.errstate(all="ignore"):
        if a.dtype.kind in "iub":
            diff = np.abs(a.astype(np.int64) - e.astype(np.int64))
            return diff, (diff / np.abs(e.astype(np.int64))).astype(np.float32)
        real = np.abs(a[:0]).dtype
        work = np.float32 if real.itemsize < 4 else real      # 16-bit: in float32, rounded
        diff = np.abs(a.astype(np.result_type(a, work)) - e.astype(np.result_type(e, work)))
        rel = (diff / np.abs(e.astype(np.result_type(e, work)))).astype(real)
        return diff.astype(real), rel


def _greatest(x):
    """The largest value (NaN first, as ``max`` propagates it) and its index."""
    nan = np.isnan(x)
    i = int(np.argmax(nan)) if nan.any() else int(np.argmax(x))
    return x.reshape(-1)[i].item(), tuple(int(j) for j in np.unravel_index(i, x.shape))


def _compare_values(a, e, rtol, atol, equal_nan, msg, what):
    if a.size == 0:
        return
    ok = _close(a, e, rtol, atol, equal_nan)
    if ok.all():
        return
    equal = rtol == 0 and atol == 0
    head = f"{what} are not {'equal' if equal else 'close'}!\n\n"

    def tolerance(tol):
        return "" if equal else f" (up to {tol} allowed)"

    if a.ndim == 0:
        x, y = a.item(), e.item()
        diff = abs(x - y)
        rel = math.inf if y == 0 else diff / abs(y)
        text = (f"{head}Expected {y} but got {x}.\n"
                f"Absolute difference: {diff}{tolerance(atol)}\n"
                f"Relative difference: {rel}{tolerance(rtol)}")
        raise AssertionError(_fail(msg, text))
    diff, rel = _differences(a, e)
    diff[ok], rel[ok] = 0, 0
    n_bad = int((~ok).sum())
    (d, i_abs), (r, i_rel) = _greatest(diff), _greatest(rel)
    text = (f"{head}Mismatched elements: {n_bad} / {a.size} ({n_bad / a.size:.1%})\n"
            f"Greatest absolute difference: {d} at index {i_abs}{tolerance(atol)}\n"
            f"Greatest relative difference: {r} at index {i_rel}{tolerance(rtol)}")
    raise AssertionError(_fail(msg, text))


def _fail(msg, text):
    if msg is None:
        return text
    return msg(text) if callable(msg) else msg


def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False,
                noncontiguous=False, exclude_zero=False, memory_format=None):
    """A random tensor for tests: floats in [low, high) (default [-9, 9]), ints likewise.

    ``noncontiguous=True`` returns a strided view of a larger tensor with the same values
    semantics; draws come from ember's default generator, so ``manual_seed`` reproduces them.
    """
    from ember._random import _rng
    from ember._tensor import _make
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    rng = _rng(None)
    full_shape = shape[:-1] + (shape[-1] * 2,) if noncontiguous and shape else shape
    if dtype is D.bool_:
        arr = rng.random(full_shape) < 0.5
    elif dtype.category == D.INTEGRAL:
        info = np.iinfo(dtype.np)
        lo = max(int(math.ceil(low)) if low is not None else -9, int(info.min))
        hi = min(int(math.ceil(high)) if high is not None else 10, int(info.max) + 1)
        if dtype is D.uint8 and low is None:
            lo = 0
        arr = np.asarray(rng.integers(lo, max(hi, lo + 1), size=full_shape))
        if exclude_zero:
            arr[arr == 0] = 1 if hi > 1 else -1
    else:
        lo = -9.0 if low is None else float(low)
        hi = 9.0 if high is None else float(high)
        arr = np.asarray(lo + (hi - lo) * rng.random(full_shape))
        if dtype.category == D.COMPLEX:
            arr = np.asarray(arr + 1j * (lo + (hi - lo) * rng.random(full_shape)))
        if exclude_zero:
            tiny = D.finfo(dtype).tiny
            arr[arr == 0] = tiny
    arr = np.asarray(arr).astype(dtype.np)
    if noncontiguous and shape:
        arr = arr[..., ::2]
    t = _make(arr)
    if device is not None and str(device) != "cpu":
        t = t.to(device)
    if requires_grad:
        t.requires_grad = True      # (not requires_grad_: allowed inside function transforms)
    return t
