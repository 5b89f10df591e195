"""Shared pieces of the whole-program parity tests: weights and data drawn once from a NumPy
Generator, so that the program run under ember and under PyTorch starts from the same values."""

import numpy as np


def fill_(lib, module_or_params, rng, scale=0.3):
    """Copy N(0, scale) values from `rng` into each parameter, in order."""
    params = getattr(module_or_params, "parameters", lambda: module_or_params)()
    with lib.no_grad():
        for p in params:
            value = np.asarray(rng.standard_normal(tuple(p.shape)).astype(np.float32) * scale)
            p.copy_(lib.from_numpy(value))


def normal(lib, rng, *shape):
    """A float32 tensor of N(0, 1) values drawn from `rng`."""
    return lib.from_numpy(rng.standard_normal(shape).astype(np.float32))
