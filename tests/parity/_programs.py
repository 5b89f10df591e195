"""Shared pieces of the whole-program parity tests: weights and data drawn once from a NumPy
Generator, so that the program run under ember and under PyTorch starts from the same values."""

import re
import warnings

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


def plain(v):
    """Tensors in ``v`` (nested tuples/lists) as lists of floats rounded to 6 places."""
    if isinstance(v, (tuple, list)):
        return [plain(e) for e in v]
    if hasattr(v, "tolist") and hasattr(v, "requires_grad"):
        return np.round(np.asarray(v.tolist(), dtype=float), 6).tolist()
    return v


def warnings_of(program, lib):
    """The (category, message) pairs ``program(lib)`` warns with, each once, sorted."""
    # warn-always: PyTorch's once-per-process warnings may have fired in an earlier test
    was = lib.is_warn_always_enabled()
    lib.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            program(lib)
    finally:
        lib.set_warn_always(was)
    # PyTorch's C++ warnings end by naming the source line that raised them
    return sorted({(w.category.__name__,
                    re.sub(r" \(Triggered internally at .*\)$", "", str(w.message)))
                   for w in caught})


def program_tests(programs, ember, torch, tolerances=None):
    """A program file's two tests, parametrised over ``programs``: results as PyTorch's
    (rtol 1e-5, atol 1e-6, or the ``(rtol, atol)`` ``tolerances`` gives a program's name, each
    with its reason beside it), and the same warnings. Assign them to module-level ``test_``
    names so that pytest collects them."""
    import pytest

    from tests.parity.test_parity_programs_round9 import assert_same_results
    tolerances = tolerances or {}
    by_name = pytest.mark.parametrize("program", programs, ids=lambda f: f.__name__)

    @by_name
    def test_program_matches_torch(program):
        rtol, atol = tolerances.get(program.__name__, (1e-5, 1e-6))
        assert_same_results(program(ember), program(torch), rtol=rtol, atol=atol)

    @by_name
    def test_program_warns_like_torch(program):
        assert warnings_of(program, ember) == warnings_of(program, torch)
    return test_program_matches_torch, test_program_warns_like_torch
