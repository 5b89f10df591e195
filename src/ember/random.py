"""``ember.random``: the default CPU generator's seed and state, and ``fork_rng``
(``torch.random``)."""

import contextlib

from ember._random import (Generator, default_generator, get_rng_state, initial_seed,
                           manual_seed, seed, set_rng_state)

__all__ = ["Generator", "default_generator", "fork_rng", "get_rng_state", "initial_seed",
           "manual_seed", "seed", "set_rng_state"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, device_type="cuda"):
    """Random draws inside the block leave no trace: the CPU's generator and those of
    ``devices`` (every GPU by default) are restored when it ends."""
    if not enabled:
        yield
        return
    if device_type not in (None, "cuda"):
        raise RuntimeError(f"ember has no module of `{device_type}`, so its random states "
                           f"cannot be forked")
    from ember import cuda
    if devices is None:
        devices = range(cuda.device_count())
    devices = list(devices)
    cpu_state = get_rng_state()
    gpu_states = [cuda.get_rng_state(d) for d in devices]
    try:
        yield
    finally:
        set_rng_state(cpu_state)
        for device, state in zip(devices, gpu_states):
            cuda.set_rng_state(state, device)
