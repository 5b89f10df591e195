"""``ember.backends.openmp`` (``torch.backends.openmp``): ember's CPU threads are its BLAS
library's (``ember.set_num_threads``), not an OpenMP runtime's."""

__all__ = ["is_available"]


def is_available():
    """Whether ember's kernels run on OpenMP: no."""
    return False
