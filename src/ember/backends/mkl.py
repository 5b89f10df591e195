"""``ember.backends.mkl`` (``torch.backends.mkl``): ember computes with NumPy and
SciPy, whatever BLAS they were built with, and calls no MKL function of its own."""

__all__ = ["is_available"]


def is_available():
    """Whether ember's kernels run on MKL: no."""
    return False
