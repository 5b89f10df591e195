"""Settings for the parity tests, which run torch beside ember."""

import sys

import pytest


def pytest_configure(config):
    """torch computes on one thread here: its idle threads spin while they wait, and beside
    the other test workers on a small machine that made single programs take seconds (a
    tutorial DCGAN step: 3.8 s on two threads under load, 0.08 s on one)."""
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)
    import warnings
    with warnings.catch_warnings():     # its first jvp imports this module, which warns that
        warnings.simplefilter("ignore")   # torch.jit.script is deprecated: not the program's
        import torch._decomp.decompositions_for_jvp  # noqa: F401
    import ember            # ember's 16-bit kernels round as torch's on as many threads
    ember.set_num_threads(1)


@pytest.fixture(autouse=True)
def _torch_validates_distribution_arguments():
    """Each test starts with torch validating distribution arguments, its default: the first
    torch.compile of a process turns validation off for good (torch/_dynamo/eval_frame.py),
    which made tests comparing argument errors depend on the order of the tests."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "distributions"):
        torch.distributions.Distribution.set_default_validate_args(__debug__)
    yield


@pytest.fixture(autouse=True)
def _engine_counts_references_afresh():
    """The backward engine measures once per process how many references a gradient nobody
    else holds has (autograd/engine.py, _held_only_here). A torch.while_loop that fails while
    tracing leaves torch's frame hook installed, after which the interpreter holds two more
    references to each call's arguments: measured before, ember then copies gradients it may
    adopt (a layout test failed by test order). Each test measures in the state it runs in."""
    from ember.autograd import engine
    engine._SOLE_REFS.clear()
