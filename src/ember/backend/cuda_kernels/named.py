"""The Triton kernels that ops and optimizers find by name through
``ember.backend.device_kernel`` (they are neither an op's forward nor its derivative): an
LSTM time step and its gradient, the Adam update, and dropout's uniform random numbers.

Each returns None (False for the in-place ones) for layouts its kernel does not cover, and
the caller runs its generic code; ``fallible`` makes a kernel that cannot run here do the
same, after switching it off.
"""

import numpy as np

from ember.backend import DEVICE_KERNELS, xp_of
from ember.backend.cuda_kernels import fallible
from ember.backend.cuda_kernels import triton_pointwise as pointwise
from ember.backend.cuda_kernels import triton_rnn as rnn
from ember.backend.cuda_kernels._launch import FAST_DTYPES, buffer


def adam(x, g, m, v, vmax, **hyper):
    """The Adam/AdamW update of one float32 parameter in one pass; False (nothing done) for
    other dtypes and layouts, which the optimizer then updates itself."""
    arrays = (x, g, m, v) if vmax is None else (x, g, m, v, vmax)
    if any(a.dtype != np.float32 or not a.flags.c_contiguous for a in arrays) or not x.size:
        return False
    pointwise.adam_update(*(buffer(a) for a in (x, g, m, v)),
                          None if vmax is None else buffer(vmax), x.size, **hyper)
    return True


def _rows_of(*arrays):
    """Whether arrays of one covered dtype are unit-stride rows (the row stride is free)."""
    return len({a.dtype for a in arrays}) == 1 and arrays[0].dtype in FAST_DTYPES and all(
        a.ndim == 2 and a.strides[1] == a.itemsize for a in arrays)


def lstm_step(gh, x, b, h, c, ws, out, hidden):
    """One LSTM time step after its recurrent GEMM ``gh``, in one kernel (ops/_rnn_kernels:
    lstm_forward); False for layouts it does not cover."""
    if not (_rows_of(gh, x, h, c, ws, out) and gh.flags.c_contiguous and h.flags.c_contiguous
            and c.flags.c_contiguous and out.flags.c_contiguous
            and (b is None or (b.dtype == x.dtype and b.flags.c_contiguous))):
        return False
    item = x.itemsize
    rnn.lstm_step(*(buffer(a) for a in (gh, x)), None if b is None else buffer(b),
                  *(buffer(a) for a in (h, c, ws, out)), gh.shape[0], hidden,
                  x.strides[0] // item, ws.strides[0] // item)
    return True


def lstm_step_backward(dout, dh, dc, ws, dg, hidden):
    """The gate gradients of one LSTM time step in one kernel (lstm_backward); False for
    layouts it does not cover."""
    if not (_rows_of(dout, dh, dc, ws, dg) and all(a.flags.c_contiguous
                                                   for a in (dout, dh, dc, dg))):
        return False
    rnn.lstm_step_backward(*(buffer(a) for a in (dout, dh, dc, ws, dg)), dg.shape[0], hidden,
                           ws.strides[0] // ws.itemsize)
    return True


def uniform(like, shape, seed, offset):
    """Uniform [0, 1) float32 numbers of ``shape`` on ``like``'s GPU: elements ``offset``
    onward of the counter-based stream of ``seed``."""
    xp = xp_of(like)
    out = xp.empty(shape, xp.float32)
    if out.size:
        pointwise.uniform(buffer(out), out.size, seed, offset)
    return out


DEVICE_KERNELS.update({name: fallible(name, kernel) for name, kernel in (
    ("adam", adam), ("lstm_step", lstm_step), ("lstm_step_backward", lstm_step_backward),
    ("uniform", uniform))})
