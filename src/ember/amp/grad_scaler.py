"""``GradScaler``: loss scaling for float16 training (``torch.amp.GradScaler``).

The loss is multiplied by a scale before backward so small float16 gradients do not flush
to zero; ``unscale_`` divides the gradients back and checks them for inf/NaN, ``step``
skips the optimizer step when any was found, and ``update`` halves the scale after an
overflow or doubles it after ``growth_interval`` clean steps.
"""

import math
import warnings

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor
from ember.backend import device_guard, device_kernel, gpu_elsewhere, xp_of

__all__ = ["GradScaler"]

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


def _unscale(grads, inv_scale):
    """Multiply ``grads`` (on one device) by ``inv_scale`` in place; whether one of them
    then holds an inf or NaN, as a boolean array on their device. On a GPU all of them go
    through one launch when the kernels take them."""
    with device_guard(gpu_elsewhere(grads[0]._data)):
        return _unscale_here(grads, inv_scale)


def _unscale_here(grads, inv_scale):
    """``_unscale`` with the gradients' device current."""
    arrays = [g._data for g in grads]
    fast = device_kernel(arrays[0], "scale_all")
    if fast is not None:
        xp = xp_of(arrays[0])
        found = xp.zeros((), np.float32)
        if fast(arrays, xp.full((), inv_scale, np.float32), found):
            for g in grads:
                g._bump_version()
            return found > 0
    bad = None
    for g, a in zip(grads, arrays):
        a *= inv_scale.astype(a.dtype)
        g._bump_version()
        flags = ~np.isfinite(a.astype(np.float32, copy=False)).all()
        bad = flags if bad is None else bad | flags
    return bad


def _float32(value):
    """``value`` rounded to float32, as PyTorch's scale tensor holds it."""
    return float(np.float32(value))


class GradScaler:
    """Scale losses and unscale gradients for mixed-precision training."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = enabled
        if enabled and device == "cuda":
            from ember import cuda
            if not cuda.is_available():
                warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not "
                              "available.  Disabling.", UserWarning, stacklevel=2)
                self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:          # PyTorch asserts these
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
        self._init_scale = float(init_scale)
        self._scale = None                  # a float; the first scale() sets it
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer = {}            # id(optimizer) -> {"stage", "found_inf"}

    def is_enabled(self):
        """Whether this scaler does anything."""
        return self._enabled

    # --- scaling ------------------------------------------------------------------------------

    def scale(self, outputs):
        """``outputs`` (a tensor, or nested lists/tuples of them) times the current scale."""
        if not self._enabled:
            return outputs
        if self._scale is None:             # kept as PyTorch keeps it: a float32
            self._scale = _float32(self._init_scale)
        if isinstance(outputs, Tensor):
            return outputs * self._scale_tensor(outputs.device)
        if isinstance(outputs, (list, tuple)):
            scaled = [self.scale(o) for o in outputs]
            return type(outputs)(scaled) if isinstance(outputs, tuple) else scaled
        if hasattr(outputs, "__iter__") and not isinstance(outputs, (str, bytes)):
            return map(self.scale, outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _scale_tensor(self, device):
        """The scale as PyTorch holds it, a 0-dim float32 tensor: it promotes a 0-dim float16
        loss to float32 (where a Python float would keep float16, and overflow)."""
        import ember
        return ember.full((), self._scale, dtype=D.float32, device=device)

    def _state_of(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer),
                                              {"stage": _READY, "found_inf": False})

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale in place, noting any inf/NaN."""
        if not self._enabled:
            return
        state = self._state_of(optimizer)
        if state["stage"] is _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if state["stage"] is _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        self._check_scale("unscale_")
        inv_scale = np.float32(1.0 / self._scale)     # rounded to float32, as PyTorch's is
        by_device = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.dtype is D.float16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                by_device.setdefault(p.grad.device, []).append(p.grad)
        # device -> whether a gradient there held an inf or NaN: kept on the device (as
        # PyTorch's found_inf tensors are), read once, in step
        state["found_inf"] = {dev: _unscale(grads, inv_scale)
                              for dev, grads in by_device.items()}
        state["stage"] = _UNSCALED

    @staticmethod
    def _found_inf(state):
        """Whether an optimizer's unscaled gradients held an inf or NaN (read once)."""
        found = state["found_inf"]
        if type(found) is not bool:
            found = state["found_inf"] = any(bool(f) for f in found.values())
        return found

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)`` unless the unscaled gradients held an inf or
        NaN; returns what the step returned (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        self._check_scale("step")
        state = self._state_of(optimizer)
        if state["stage"] is _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is _READY:
            self.unscale_(optimizer)
        result = None if self._found_inf(state) else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale=None):
        """Set the scale for the next iteration: ``new_scale``, or the scale backed off
        after an overflow / grown after ``growth_interval`` clean steps."""
        if not self._enabled:
            return
        self._check_scale("update")
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.device.type != self._device.split(":")[0] or \
                        new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError("new_scale should be a float or a 1-element "
                                         "torch.cuda.FloatTensor or torch.FloatTensor with "
                                         "requires_grad=False.")
                new_scale = new_scale.item()
            self._scale = _float32(new_scale)
        else:
            checked = [s for s in self._per_optimizer.values() if s["stage"] is not _READY]
            if not checked:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(self._found_inf(s) for s in checked):
                self._scale = _float32(self._scale * self._backoff_factor)
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = _float32(self._scale * self._growth_factor)
                    if math.isfinite(grown):
                        self._scale = grown
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def _check_scale(self, what):
        if self._scale is None:         # PyTorch asserts this
            raise AssertionError(f"Attempted {what} but _scale is None.  This may indicate "
                                 "your script did not use scaler.scale(loss or outputs) "
                                 "earlier in the iteration.")

    # --- settings and state -------------------------------------------------------------------

    def get_scale(self):
        """The current scale (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale

    def get_growth_factor(self):
        """The factor the scale grows by."""
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        """Set the factor the scale grows by."""
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        """The factor the scale shrinks by after an overflow."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        """Set the factor the scale shrinks by after an overflow."""
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        """How many clean steps grow the scale."""
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        """Set how many clean steps grow the scale."""
        self._growth_interval = new_interval

    def state_dict(self):
        """The scale and its settings ({} when disabled), in PyTorch's keys."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        """Restore what ``state_dict`` returned."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:         # else the next scale() starts from it
            self._scale = _float32(self._init_scale)
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._growth_tracker = int(state_dict["_growth_tracker"])
