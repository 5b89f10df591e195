"""``ember.autocast``: run chosen ops in lower precision inside a region (``torch.autocast``).

The op lists are in _policy.py. Each registry op named there carries its policy as
``Op.autocast``; the dispatcher hands the operands of such an op to ``cast_operands`` while
autocast is on, and the casts are ordinary ``Tensor.to`` calls, so gradients flow back to
the original dtypes. Backward passes run under the caller's autocast state, as PyTorch's
do (see autograd/engine.py). Casts of weights to the low dtype go through the cast cache
(_cache.py), which the outermost region's exit empties.
"""

import functools
import warnings

from ember import _dtype as D
from ember._tensor import Tensor
from ember._warn import HIDDEN
from ember.amp._cache import cast_to_lower
from ember.amp._cache import clear as _clear_cache
from ember.amp._policy import POLICY, TOP_LEVEL_ONLY, Composite
from ember.amp._state import STATE, suspended

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled",
           "set_autocast_dtype", "is_autocast_available", "cast_operands", "install"]

_DEFAULT_DTYPE = {"cpu": D.bfloat16, "cuda": D.float16}
_SUPPORTED = {"cpu": (D.bfloat16, D.float16), "cuda": (D.bfloat16, D.float16)}


def is_autocast_available(device_type):
    """Whether autocast supports ``device_type`` ("cpu" and "cuda")."""
    return _parse_device_type(device_type, "is_autocast_available") in _DEFAULT_DTYPE


def is_autocast_enabled(device_type="cuda"):
    """Whether autocast is on for ``device_type`` in this thread."""
    return STATE.enabled.get(_parse_device_type(device_type, "is_autocast_enabled"), False)


def get_autocast_dtype(device_type):
    """The lower-precision dtype autocast uses on ``device_type``."""
    device_type = _check_device_type(device_type, "get_autocast_dtype")
    return STATE.dtype.get(device_type, _DEFAULT_DTYPE[device_type])


def set_autocast_enabled(device_type, enabled=None):
    """Turn autocast on or off for ``device_type`` (prefer the ``autocast`` context);
    ``set_autocast_enabled(enabled)``, PyTorch's older form, sets it for "cuda"."""
    position = 2
    if enabled is None:
        device_type, enabled, position = "cuda", device_type, 1
    if type(enabled) is not bool:
        raise TypeError(f"set_autocast_enabled(): argument 'enabled' (position {position}) "
                        f"must be bool, not {type(enabled).__name__}")
    device_type = _check_device_type(device_type, "set_autocast_enabled")
    STATE.enabled = {**STATE.enabled, device_type: enabled}


def set_autocast_dtype(device_type, dtype):
    """Set the lower-precision dtype autocast uses on ``device_type``."""
    device_type = _check_device_type(device_type, "set_autocast_dtype")
    _check_dtype(dtype)
    STATE.dtype = {**STATE.dtype, device_type: dtype}


def _check_dtype(dtype):
    if not isinstance(dtype, D.dtype):
        raise TypeError(f"set_autocast_dtype(): argument 'dtype' (position 2) must be "
                        f"ember.dtype, not {type(dtype).__name__}")


def _check_switches(enabled, dtype, cache_enabled):
    """PyTorch's errors for a region's switches that are not bools, or dtype not a dtype
    (raised before the state changes: PyTorch's leave the switches set before it)."""
    if type(enabled) is not bool:
        raise TypeError(f"set_autocast_enabled(): argument 'enabled' (position 2) must be "
                        f"bool, not {type(enabled).__name__}")
    _check_dtype(dtype)
    if type(cache_enabled) is not bool:
        raise TypeError(f"enabled must be a bool (got {type(cache_enabled).__name__})")


def _check_device_type(device_type, caller):
    """The device type of ``device_type`` ("cuda:0" is "cuda"), with PyTorch's errors for a
    string that names no device and for a device autocast does not support."""
    base = _parse_device_type(device_type, caller)
    if base not in _DEFAULT_DTYPE:
        raise RuntimeError(f"User specified an unsupported autocast device_type "
                           f"'{device_type}'")
    return base


def _parse_device_type(device_type, caller):
    """The device type ``device_type`` starts with ("cuda:0" is "cuda"), with PyTorch's
    errors for what is not a string (a ``device`` too) and a string naming no device type."""
    if type(device_type) is str and device_type in _DEFAULT_DTYPE:
        return device_type
    if not isinstance(device_type, str):
        from ember._device import device
        from ember._from_data import _tp_name
        name = "ember.device" if isinstance(device_type, device) else _tp_name(device_type)
        raise TypeError(f"{caller}(): argument 'device_type' (position 1) must be str, "
                        f"not {name}")
    base = device_type.partition(":")[0]
    from ember.library import DEVICE_TYPES
    if base not in DEVICE_TYPES:
        raise RuntimeError(f"Expected one of {', '.join(DEVICE_TYPES)} device type at start of "
                           f"device string: {device_type}")
    return base


class autocast:
    """Run the ops of a region (or decorated function) in mixed precision on one device
    type: matrix products and convolutions in ``dtype``, precision-sensitive ops in
    float32."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: "
                             f"`{type(device_type)}`")
        device_type = _check_device_type(device_type, "autocast")
        self.device = device_type
        # as PyTorch's: the dtype and cache switch in effect unless given
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self._cache_enabled = STATE.cache_enabled if cache_enabled is None else cache_enabled
        self._enabled = enabled         # (checked as the region is entered, as PyTorch's)
        if self._enabled and device_type == "cuda":
            from ember import cuda
            if not cuda.is_available():
                warnings.warn("CUDA is not available or torch_xla is imported. Disabling "
                              "autocast.", UserWarning, stacklevel=2)
                self._enabled = False
        if self._enabled and self.fast_dtype not in _SUPPORTED[device_type]:
            names = ", ".join(str(d) for d in _SUPPORTED[device_type])
            warnings.warn(f"In {device_type.upper()} autocast, but the target dtype is not "
                          f"supported. Disabling autocast.\n{device_type.upper()} Autocast "
                          f"only supports dtypes of {names} currently.", UserWarning,
                          stacklevel=2)
            self._enabled = False

    def __enter__(self):
        _check_switches(self._enabled, self.fast_dtype, self._cache_enabled)
        self._prev = (STATE.enabled, STATE.dtype, STATE.cache_enabled)
        STATE.enabled = {**STATE.enabled, self.device: bool(self._enabled)}
        STATE.dtype = {**STATE.dtype, self.device: self.fast_dtype}
        STATE.cache_enabled = bool(self._cache_enabled)
        STATE.nesting += 1
        return self

    def __exit__(self, *exc):
        STATE.enabled, STATE.dtype, STATE.cache_enabled = self._prev
        STATE.nesting -= 1
        if STATE.nesting == 0:         # the outermost region drops the cast cache
            _clear_cache()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)
        return wrapper


def _floating(x, device_type):
    """Whether autocast may cast ``x``: a floating tensor on ``device_type``, not float64."""
    return (isinstance(x, Tensor) and x.device.type == device_type
            and x.dtype.is_floating_point and x.dtype != D.float64)


def cast_operands(policy, operands, params=()):
    """``operands`` (a list) with its floating tensors cast as ``policy`` asks on each
    device type where autocast is on (a rule in ``policy`` sees ``params`` too). Float64
    tensors are left as they are, and so promote ops do not count them. A rule may answer
    with a ``Composite`` instead, which is returned, for the dispatcher to run."""
    out = list(operands)
    for device_type, kind in policy.items():
        if not STATE.enabled.get(device_type):
            continue
        if callable(kind):
            kind = kind(out, params)
            if kind is None:
                continue
            if type(kind) is Composite:
                return kind             # the caller runs it instead of the op
        floats = [x for x in out if _floating(x, device_type)]
        if not floats:
            continue
        cast = Tensor.to
        if kind == "promote":
            target = functools.reduce(D.promote_types, [x.dtype for x in floats])
        elif kind == "lower":
            target = get_autocast_dtype(device_type)
            cast = cast_to_lower
        else:
            target = D.float32
        for i, x in enumerate(out):
            if _floating(x, device_type) and x.dtype != target:
                out[i] = cast(x, target)
    return out


def _autocast_function(fn, policy):
    """``fn`` (an ``nn.functional`` composition) with its tensor arguments cast."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if any(STATE.enabled.get(d) for d in policy):
            args = cast_operands(policy, args)
            kwargs = dict(zip(kwargs, cast_operands(policy, list(kwargs.values()))))
            with suspended(policy):
                return fn(*args, **kwargs)
        return fn(*args, **kwargs)
    HIDDEN.add(wrapper.__code__)        # warnings inside fn point past this frame
    return wrapper


def install(registry, *tables):
    """Attach the policies to the registry's ops, and wrap the listed compositions found in
    ``tables`` (dicts of public functions; one wrapper per function, shared by all, and by
    the Tensor method that is the same function); the first table holds the top-level
    functions."""
    wrapped = {}
    for name, policy in POLICY.items():
        if name in registry:
            registry[name].autocast = policy
            continue
        for table in tables[:1] if name in TOP_LEVEL_ONLY else tables:
            fn = table.get(name)
            if callable(fn):
                if id(fn) not in wrapped:
                    wrapped[id(fn)] = _autocast_function(fn, policy)
                table[name] = wrapped[id(fn)]
                if Tensor.__dict__.get(name) is fn:
                    setattr(Tensor, name, wrapped[id(fn)])
