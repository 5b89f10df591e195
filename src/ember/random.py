"""``ember.random``: the default CPU generator's seed and state, and ``fork_rng``
(``torch.random``)."""

import contextlib
import warnings

from ember._random import (Generator, default_generator, get_rng_state, initial_seed,
                           manual_seed, seed, set_rng_state)

__all__ = ["Generator", "default_generator", "fork_rng", "get_rng_state", "initial_seed",
           "manual_seed", "seed", "set_rng_state", "thread_safe_generator"]


def thread_safe_generator():
    """The generator of the DataLoader thread worker this runs in (its own, so that threads
    do not share one); None elsewhere, which makes random functions use the global one."""
    from ember.utils.data import get_worker_info
    info = get_worker_info()
    if info is not None and info.worker_method == "thread" and info.rng is not None:
        return info.rng.torch_generator
    return None


_FORK_RNG_WARNED = []      # fork_rng's warning about forking every device is given once


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type=None):
    """Random draws inside the block leave no trace: the CPU's generator and those of
    ``devices`` of ``device_type`` (every one by default; the current accelerator's type,
    else CUDA) are restored when it ends. ``_caller``/``_devices_kw``: the function and
    keyword the warning about forking many devices names."""
    if device_type == "meta":
        yield
        return
    import ember
    if device_type is None:
        accelerator = ember.accelerator.current_accelerator()
        device_type = accelerator.type if accelerator is not None else "cuda"
    device_mod = ember.get_device_module(device_type)
    if not enabled:
        yield
        return
    if devices is None:
        count = device_mod.device_count()
        if count > 1 and not _FORK_RNG_WARNED:
            kind = device_type.upper()
            warnings.warn(
                f"{kind} reports that you have {count} available devices, and you have used "
                f"{_caller} without explicitly specifying which devices are being used. For "
                f"safety, we initialize *every* {kind} device by default, which can be quite "
                f"slow if you have a lot of {kind}s. If you know that you are only making use "
                f"of a few {kind} devices, set the environment variable {kind}_VISIBLE_DEVICES "
                f"or the '{_devices_kw}' keyword argument of {_caller} with the set of devices "
                f"you are actually using. For example, if you are using CPU only, set "
                f"device.upper()_VISIBLE_DEVICES= or devices=[]; if you are using device 0 "
                f"only, set {kind}_VISIBLE_DEVICES=0 or devices=[0].  To initialize all "
                f"devices and suppress this warning, set the '{_devices_kw}' keyword argument "
                f"to `range(ember.{device_type}.device_count())`.", stacklevel=3)
            _FORK_RNG_WARNED.append(True)
        devices = range(count)
    devices = list(devices)
    cpu_state = get_rng_state()
    device_states = [device_mod.get_rng_state(d) for d in devices]
    try:
        yield
    finally:
        set_rng_state(cpu_state)
        for device, state in zip(devices, device_states):
            device_mod.set_rng_state(state, device)
