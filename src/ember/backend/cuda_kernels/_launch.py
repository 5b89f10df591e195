"""What every Triton launcher shares: buffers Triton can read from CuPy arrays, block shapes
(and the positions of a block of planes, a jit helper), Triton's driver pointed at CuPy's
current device and stream, and launch failures reported as ``KernelUnavailable``."""

import functools

import ml_dtypes
import numpy as np
import triton
import triton.language as tl

__all__ = ["buffer", "buffers", "block_of_planes", "product", "row_tiling", "follow_cupy",
           "guarded", "FAST_DTYPES", "covered"]

FAST_DTYPES = frozenset(map(np.dtype, (np.float32, np.float16, ml_dtypes.bfloat16)))


def covered(*arrays):
    """Whether the kernels take these arrays: non-empty, C-contiguous, of a 32- or 16-bit
    float dtype."""
    return all(a.dtype in FAST_DTYPES and a.flags.c_contiguous and a.size for a in arrays)


def guarded(launcher):
    """``launcher`` raising KernelUnavailable when Triton cannot compile or launch its kernel
    here (the caller then falls back to generic code); its other behaviour unchanged."""
    @functools.wraps(launcher)
    def run(*args, **kwargs):
        try:
            return launcher(*args, **kwargs)
        except Exception as e:
            from ember.backend.cuda_kernels import KernelUnavailable
            raise KernelUnavailable(f"{launcher.__name__}: {type(e).__name__}: "
                                    f"{str(e)[:300]}") from e
    return run


class buffer:
    """A CuPy array as Triton sees a tensor: its device address and element type."""

    __slots__ = ("_ptr", "dtype")

    def __init__(self, array):
        self._ptr = array.data.ptr
        self.dtype = array.dtype

    def data_ptr(self):
        """The array's device address."""
        return self._ptr

    def at(self, nbytes):
        """This buffer from ``nbytes`` further on (a row of a matrix, without slicing it)."""
        moved = object.__new__(buffer)
        moved._ptr, moved.dtype = self._ptr + nbytes, self.dtype
        return moved


def buffers(*arrays):
    """``buffer`` of each array; None stays None (an absent optional operand)."""
    return tuple(None if a is None else buffer(a) for a in arrays)


@triton.jit
def block_of_planes(n, rows, cols, BLOCK: tl.constexpr):
    """This program's block of the ``n`` flat positions of (rows, cols) planes: (positions,
    which are in range, their plane, row and column)."""
    at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    return at, at < n, at // (rows * cols), (at // cols) % rows, at % cols


@triton.jit
def product(a, b, IEEE: tl.constexpr):
    """``tl.dot(a, b)``: float32 blocks in full precision when ``IEEE``, else on TF32 tensor
    cores (16-bit blocks always multiply natively, summing in float32)."""
    if IEEE:
        return tl.dot(a, b, input_precision="ieee")
    return tl.dot(a, b)


def row_tiling(n_cols, tile=4096):
    """(rows per program, padded row length, warps) for a kernel holding whole rows: short
    rows are packed several to a program, so that each moves about ``tile`` elements."""
    block = triton.next_power_of_2(max(n_cols, 1))
    rows = max(1, min(64, tile // block))
    warps = 4 if block <= 2048 else 8 if block <= 8192 else 16
    return rows, block, warps


def follow_cupy(cupy):
    """Make Triton launch on CuPy's current device and stream (its driver otherwise asks
    PyTorch, or uses the default stream when PyTorch is absent)."""
    active = triton.runtime.driver.active
    active.get_current_device = lambda: cupy.cuda.Device().id
    active.set_current_device = lambda index: cupy.cuda.Device(index).use()
    active.get_current_stream = lambda index=None: cupy.cuda.get_current_stream().ptr
