"""Settings for the parity tests, which run torch beside ember."""


def pytest_configure(config):
    """torch computes on one thread here: its idle threads spin while they wait, and beside
    the other test workers on a small machine that made single programs take seconds (a
    tutorial DCGAN step: 3.8 s on two threads under load, 0.08 s on one)."""
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)
    import ember            # ember's 16-bit kernels round as torch's on as many threads
    ember.set_num_threads(1)
