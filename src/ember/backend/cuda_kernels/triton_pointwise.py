"""Triton kernels applied element by element over contiguous buffers: gelu and its gradient,
silu, and uniform, normal and integer random numbers. Launchers take buffers as objects with
``data_ptr()`` and ``dtype`` and compute in float32."""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded

__all__ = ["gelu", "gelu_backward", "silu", "silu_backward", "random", "randint", "BLOCK"]

BLOCK = 1024
# the kernels write their constants as literals (Triton's compiler reads module globals only as
# constexprs, which its interpreter cannot multiply with tensors): 0.7071067811865476 is
# sqrt(1/2), 0.3989422804014327 is 1/sqrt(2 pi), 0.7978845608028654 is sqrt(2/pi) and
# 0.044715 is the tanh approximation's cubic coefficient.


@triton.jit
def _tanh(z):
    return 2.0 * tl.sigmoid(2.0 * z) - 1.0


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, TANH: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    if TANH:
        y = 0.5 * x * (1.0 + _tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    else:
        y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gelu_backward_kernel(g_ptr, x_ptr, y_ptr, n, TANH: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    g = tl.load(g_ptr + offsets, mask=mask).to(tl.float32)
    if TANH:
        x2 = x * x
        t = _tanh(0.7978845608028654 * (x + 0.044715 * x2 * x))
        slope = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x2)
        d = 0.5 * ((1.0 - t * t) * x * slope + (1.0 + t))
    else:
        density = tl.exp(-0.5 * x * x) * 0.3989422804014327
        d = 0.5 * (1.0 + tl.erf(x * 0.7071067811865476)) + x * density
    tl.store(y_ptr + offsets, (g * d).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _silu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(y_ptr + offsets, (x * tl.sigmoid(x)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _silu_backward_kernel(g_ptr, x_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    g = tl.load(g_ptr + offsets, mask=mask).to(tl.float32)
    s = tl.sigmoid(x)
    tl.store(dx_ptr + offsets, (g * s * (1.0 + x * (1.0 - s))).to(dx_ptr.dtype.element_ty),
             mask=mask)


@guarded
def silu_backward(grad, x, dx, n):
    """``dx = grad * silu'(x)`` over ``n`` elements."""
    _silu_backward_kernel[(triton.cdiv(n, BLOCK),)](grad, x, dx, n, BLOCK=BLOCK)


@guarded
def gelu(x, y, n, approximate):
    """``y = gelu(x)`` over ``n`` elements (``approximate``: 'none' or 'tanh')."""
    _gelu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, TANH=approximate == "tanh", BLOCK=BLOCK)


@guarded
def gelu_backward(grad, x, y, n, approximate):
    """``y = grad * gelu'(x)`` over ``n`` elements."""
    _gelu_backward_kernel[(triton.cdiv(n, BLOCK),)](grad, x, y, n, TANH=approximate == "tanh",
                                                    BLOCK=BLOCK)


@guarded
def silu(x, y, n):
    """``y = x * sigmoid(x)`` over ``n`` elements."""
    _silu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)


@triton.jit
def _random_kernel(out_ptr, n, seed, offset, low, high, NORMAL: tl.constexpr,
                   BLOCK: tl.constexpr):
    index = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if NORMAL:                                      # low: the mean, high: the std
        value = (low + high * tl.randn(seed, offset + index)).to(out_ptr.dtype.element_ty)
    else:
        u = tl.rand(seed, offset + index)           # Philox: element i of the stream
        value = low + (high - low) * u
        # a draw that rounds up to ``high`` in the output dtype counts as ``low``, as in
        # PyTorch's kernels: uniform draws stay in [low, high)
        rounded = value.to(out_ptr.dtype.element_ty).to(tl.float32)
        value = tl.where(rounded >= high, low, value).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + index, value, mask=index < n)


@guarded
def random(out, n, seed, offset, normal, low, high):
    """Fill ``out`` with ``n`` numbers from elements ``offset`` to ``offset + n`` of the
    counter-based stream of ``seed``: normal with mean ``low`` and std ``high`` when
    ``normal``, else uniform on [low, high)."""
    _random_kernel[(triton.cdiv(n, BLOCK),)](out, n, seed, offset, float(low), float(high),
                                            NORMAL=bool(normal), BLOCK=BLOCK)


@triton.jit
def _randint_kernel(out_ptr, n, seed, offset, low, span, BLOCK: tl.constexpr):
    index = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    r = tl.randint(seed, offset + index).to(tl.int64) & 0xFFFFFFFF    # 32 random bits
    tl.store(out_ptr + index, (low + r % span).to(out_ptr.dtype.element_ty), mask=index < n)


@guarded
def randint(out, n, seed, offset, low, high):
    """Fill ``out`` with ``n`` integers in [low, high) (``high - low`` at most 2**32) from
    elements ``offset`` to ``offset + n`` of the counter-based stream of ``seed``: 32 random
    bits modulo the span, as PyTorch's kernels take them."""
    _randint_kernel[(triton.cdiv(n, BLOCK),)](out, n, seed, offset, int(low), int(high - low),
                                             BLOCK=BLOCK)
