"""Triton kernels that update many float32 tensors in one launch: the Adam/AdamW, SGD,
RMSprop, Adadelta and Adagrad steps, NAdam's, RAdam's and Adamax's (one kernel), and
gradient clipping's norm and scaling.

Each program handles one block of one tensor. A table on the device holds a row per tensor
(its addresses, size and per-tensor scalars, as int64 words; floats as float64 bits), and
``tensor_blocks`` lists (tensor, first element) per program: so a parameter group of any
number of tensors is one launch, with no copies into a flat buffer.
"""

import numpy as np
import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded

__all__ = ["adam_update", "adam_table", "tensor_blocks", "sgd_update", "sgd_table",
           "rmsprop_update", "adadelta_update", "adagrad_update", "adagrad_table",
           "adam_variant_update", "adam_variant_table", "sum_of_squares", "scale", "ADAM_ROW",
           "SGD_ROW", "RMSPROP_ROW", "ADADELTA_ROW", "ADAGRAD_ROW", "VARIANT_ROW", "CLIP_ROW",
           "BLOCK"]

BLOCK = 1024


ADAM_ROW = 8        # int64 words per tensor in the Adam kernel's table


@triton.jit
def _tensor_block(table_ptr, blocks_ptr, ROW: tl.constexpr, BLOCK: tl.constexpr):
    """This program's block of one tensor of a multi-tensor kernel: (the tensor's row of
    ``ROW`` words in the table, the block's element offsets). ``blocks`` holds (tensor, first
    element) per program (``tensor_blocks``)."""
    block = blocks_ptr + tl.program_id(0).to(tl.int64) * 2
    return table_ptr + tl.load(block) * ROW, tl.load(block + 1) + tl.arange(0, BLOCK)


@triton.jit
def _tensor(row, word):
    """The float32 tensor whose address is word ``word`` of a table row."""
    return tl.load(row + word).to(tl.pointer_type(tl.float32))


@triton.jit
def _float_word(row, word):
    """Word ``word`` of a table row, a float64's bits, as a float32."""
    return tl.load(row + word).to(tl.float64, bitcast=True).to(tl.float32)


@triton.jit
def _decay_and_average(x, g, m_ptr, offsets, mask, lr, beta1, weight_decay,
                       DECAY: tl.constexpr):
    """The Adam family's weight decay (1: added to the gradient; 2: decoupled, of the
    parameter) and new first moment: (x, g, m), m also stored."""
    if DECAY == 1:
        g = g + weight_decay * x
    if DECAY == 2:
        x = x * (1.0 - lr * weight_decay)
    m = tl.load(m_ptr + offsets, mask=mask)
    m = m + (1.0 - beta1) * (g - m)
    tl.store(m_ptr + offsets, m, mask=mask)
    return x, g, m


@triton.jit
def _adam_kernel(table_ptr, blocks_ptr, lr, beta1, beta2, eps, weight_decay,
                 DECAY: tl.constexpr, AMSGRAD: tl.constexpr, BLOCK: tl.constexpr):
    # each program updates one block of one tensor: ``blocks`` holds (tensor, first element)
    # per program, the table a row per tensor: the addresses of x, g, m, v and vmax, the size,
    # then step_size and sqrt(1 - beta2^t) as float64 bits (each tensor counts its own steps)
    row, offsets = _tensor_block(table_ptr, blocks_ptr, 8, BLOCK)
    mask = offsets < tl.load(row + 5)
    x_ptr, g_ptr, m_ptr, v_ptr = _tensor(row, 0), _tensor(row, 1), _tensor(row, 2), \
        _tensor(row, 3)
    step_size, bias2_sqrt = _float_word(row, 6), _float_word(row, 7)
    x, g, m = _decay_and_average(tl.load(x_ptr + offsets, mask=mask),
                                 tl.load(g_ptr + offsets, mask=mask), m_ptr, offsets, mask, lr,
                                 beta1, weight_decay, DECAY)      # 1: Adam's, 2: AdamW's
    v = tl.load(v_ptr + offsets, mask=mask) * beta2 + (1.0 - beta2) * g * g
    tl.store(v_ptr + offsets, v, mask=mask)
    if AMSGRAD:
        vmax_ptr = _tensor(row, 4)
        v = tl.maximum(tl.load(vmax_ptr + offsets, mask=mask), v)
        tl.store(vmax_ptr + offsets, v, mask=mask)
    denom = tl.sqrt(v) / bias2_sqrt + eps
    tl.store(x_ptr + offsets, x - step_size * m / denom, mask=mask)


@guarded
def adam_update(table, blocks, programs, *, lr, beta1, beta2, eps, weight_decay, decoupled,
                amsgrad):
    """One Adam step in place on many float32 tensors at once: ``table`` (tensors,
    ``ADAM_ROW``) int64 on the device, as ``adam_table`` builds it, and ``blocks`` (programs,
    2), as ``tensor_blocks`` does; the moments, with AMSGrad their running maximum, then the
    parameters."""
    decay = 0 if not weight_decay else 2 if decoupled else 1
    _adam_kernel[(programs,)](table, blocks, float(lr), float(beta1), float(beta2), float(eps),
                              float(weight_decay), DECAY=decay, AMSGRAD=amsgrad, BLOCK=BLOCK)


def adam_table(addresses, sizes, steps, lr, beta1, beta2):
    """The kernel's table on the host: per tensor, the addresses of (x, g, m, v, vmax),
    its size, and the step size and ``sqrt(1 - beta2^t)`` of its step count ``t``."""
    table = np.empty((len(sizes), ADAM_ROW), np.int64)
    table[:, :5] = addresses
    table[:, 5] = sizes
    t = np.asarray(steps, np.float64)
    table[:, 6] = (lr / (1 - beta1 ** t)).view(np.int64)
    table[:, 7] = np.sqrt(1 - beta2 ** t).view(np.int64)
    return table


def tensor_blocks(sizes):
    """(tensor, first element) of every block of every tensor, one row per program."""
    return np.array([(i, first) for i, n in enumerate(sizes) for first in range(0, n, BLOCK)],
                    np.int64).reshape(-1, 2)


SGD_ROW = 4         # int64 words per tensor in the SGD kernel's table


@triton.jit
def _sgd_kernel(table_ptr, blocks_ptr, lr, momentum, dampening, weight_decay,
                DECAY: tl.constexpr, MOMENTUM: tl.constexpr, NESTEROV: tl.constexpr,
                BLOCK: tl.constexpr):
    # as _adam_kernel: a block of one tensor per program; the table a row per tensor: the
    # addresses of x, g and the momentum buffer, then the size, negative on the buffer's first
    # step (when it takes the gradient as it is)
    row, offsets = _tensor_block(table_ptr, blocks_ptr, 4, BLOCK)
    size = tl.load(row + 3)
    mask = offsets < tl.abs(size)
    x_ptr, g_ptr = _tensor(row, 0), _tensor(row, 1)
    x = tl.load(x_ptr + offsets, mask=mask)
    g = tl.load(g_ptr + offsets, mask=mask)
    if DECAY:
        g = g + weight_decay * x
    if MOMENTUM:
        b_ptr = _tensor(row, 2)
        b = tl.load(b_ptr + offsets, mask=mask)
        b = tl.where(size < 0, g, momentum * b + (1.0 - dampening) * g)
        tl.store(b_ptr + offsets, b, mask=mask)
        if NESTEROV:
            g = g + momentum * b
        else:
            g = b
    tl.store(x_ptr + offsets, x - lr * g, mask=mask)


@guarded
def sgd_update(table, blocks, programs, *, lr, momentum, dampening, weight_decay, nesterov):
    """One SGD step in place on many float32 tensors at once: ``table`` (tensors,
    ``SGD_ROW``) int64 on the device, as ``sgd_table`` builds it, and ``blocks`` as
    ``tensor_blocks`` does; the momentum buffers, then the parameters."""
    _sgd_kernel[(programs,)](table, blocks, float(lr), float(momentum), float(dampening),
                             float(weight_decay), DECAY=bool(weight_decay),
                             MOMENTUM=bool(momentum), NESTEROV=nesterov, BLOCK=BLOCK)


def sgd_table(addresses, sizes, first):
    """The SGD kernel's table on the host: per tensor, the addresses of (x, g, buffer) and
    its size, negated where ``first`` marks the buffer's first step."""
    table = np.empty((len(sizes), SGD_ROW), np.int64)
    table[:, :3] = addresses
    table[:, 3] = np.where(first, -np.asarray(sizes), sizes)
    return table


RMSPROP_ROW = 6     # int64 words per tensor in the RMSprop kernel's table


@triton.jit
def _rmsprop_kernel(table_ptr, blocks_ptr, lr, alpha, eps, weight_decay, momentum,
                    DECAY: tl.constexpr, CENTERED: tl.constexpr, MOMENTUM: tl.constexpr,
                    BLOCK: tl.constexpr):
    # as _adam_kernel: a block of one tensor per program; the table a row per tensor: the
    # addresses of x, g, the square average, the gradient average and the momentum buffer,
    # then the size
    row, offsets = _tensor_block(table_ptr, blocks_ptr, 6, BLOCK)
    mask = offsets < tl.load(row + 5)
    x_ptr, g_ptr, v_ptr = _tensor(row, 0), _tensor(row, 1), _tensor(row, 2)
    x = tl.load(x_ptr + offsets, mask=mask)
    g = tl.load(g_ptr + offsets, mask=mask)
    if DECAY:
        g = g + weight_decay * x
    v = tl.load(v_ptr + offsets, mask=mask) * alpha + (1.0 - alpha) * g * g
    tl.store(v_ptr + offsets, v, mask=mask)
    if CENTERED:
        a_ptr = _tensor(row, 3)
        a = tl.load(a_ptr + offsets, mask=mask)
        a = a + (1.0 - alpha) * (g - a)
        tl.store(a_ptr + offsets, a, mask=mask)
        avg = tl.sqrt(v - a * a) + eps
    else:
        avg = tl.sqrt(v) + eps
    if MOMENTUM:
        b_ptr = _tensor(row, 4)
        b = tl.load(b_ptr + offsets, mask=mask) * momentum + g / avg
        tl.store(b_ptr + offsets, b, mask=mask)
        x = x - lr * b
    else:
        x = x - lr * g / avg
    tl.store(x_ptr + offsets, x, mask=mask)


@guarded
def rmsprop_update(table, blocks, programs, *, lr, alpha, eps, weight_decay, momentum,
                   centered):
    """One RMSprop step in place on many float32 tensors at once: ``table`` (tensors,
    ``RMSPROP_ROW``) int64 on the device, the addresses of (x, g, square average, gradient
    average, momentum buffer) and the size per tensor, and ``blocks`` as ``tensor_blocks``
    makes it."""
    _rmsprop_kernel[(programs,)](table, blocks, float(lr), float(alpha), float(eps),
                                 float(weight_decay), float(momentum),
                                 DECAY=bool(weight_decay), CENTERED=bool(centered),
                                 MOMENTUM=momentum > 0, BLOCK=BLOCK)


ADADELTA_ROW = 5    # int64 words per tensor in the Adadelta kernel's table


@triton.jit
def _adadelta_kernel(table_ptr, blocks_ptr, lr, rho, eps, weight_decay, DECAY: tl.constexpr,
                     BLOCK: tl.constexpr):
    # as _adam_kernel; the table a row per tensor: the addresses of x, g, the square average
    # and the accumulated update, then the size
    row, offsets = _tensor_block(table_ptr, blocks_ptr, 5, BLOCK)
    mask = offsets < tl.load(row + 4)
    x_ptr, g_ptr, v_ptr, u_ptr = _tensor(row, 0), _tensor(row, 1), _tensor(row, 2), \
        _tensor(row, 3)
    x = tl.load(x_ptr + offsets, mask=mask)
    g = tl.load(g_ptr + offsets, mask=mask)
    if DECAY:
        g = g + weight_decay * x
    v = tl.load(v_ptr + offsets, mask=mask) * rho + (1.0 - rho) * g * g
    u = tl.load(u_ptr + offsets, mask=mask)
    delta = tl.sqrt(u + eps) / tl.sqrt(v + eps) * g
    tl.store(v_ptr + offsets, v, mask=mask)
    tl.store(u_ptr + offsets, u * rho + (1.0 - rho) * delta * delta, mask=mask)
    tl.store(x_ptr + offsets, x - lr * delta, mask=mask)


@guarded
def adadelta_update(table, blocks, programs, *, lr, rho, eps, weight_decay):
    """One Adadelta step in place on many float32 tensors at once: ``table`` (tensors,
    ``ADADELTA_ROW``) int64 on the device, the addresses of (x, g, square average,
    accumulated update) and the size per tensor, and ``blocks`` as ``tensor_blocks`` makes
    it."""
    _adadelta_kernel[(programs,)](table, blocks, float(lr), float(rho), float(eps),
                                  float(weight_decay), DECAY=bool(weight_decay), BLOCK=BLOCK)


ADAGRAD_ROW = 5     # int64 words per tensor in the Adagrad kernel's table


@triton.jit
def _adagrad_kernel(table_ptr, blocks_ptr, eps, weight_decay, DECAY: tl.constexpr,
                    BLOCK: tl.constexpr):
    # as _adam_kernel; the table a row per tensor: the addresses of x, g and the sum of
    # squares, the size, then the tensor's decayed learning rate as float64 bits
    row, offsets = _tensor_block(table_ptr, blocks_ptr, 5, BLOCK)
    mask = offsets < tl.load(row + 3)
    x_ptr, g_ptr, s_ptr = _tensor(row, 0), _tensor(row, 1), _tensor(row, 2)
    clr = _float_word(row, 4)
    x = tl.load(x_ptr + offsets, mask=mask)
    g = tl.load(g_ptr + offsets, mask=mask)
    if DECAY:
        g = g + weight_decay * x
    total = tl.load(s_ptr + offsets, mask=mask) + g * g
    tl.store(s_ptr + offsets, total, mask=mask)
    tl.store(x_ptr + offsets, x - clr * g / (tl.sqrt(total) + eps), mask=mask)


@guarded
def adagrad_update(table, blocks, programs, *, eps, weight_decay):
    """One Adagrad step in place on many float32 tensors at once: ``table`` (tensors,
    ``ADAGRAD_ROW``) int64 on the device, as ``adagrad_table`` builds it, and ``blocks`` as
    ``tensor_blocks`` makes it."""
    _adagrad_kernel[(programs,)](table, blocks, float(eps), float(weight_decay),
                                 DECAY=bool(weight_decay), BLOCK=BLOCK)


def adagrad_table(addresses, sizes, rates):
    """The Adagrad kernel's table on the host: per tensor, the addresses of (x, g, sum of
    squares), its size and its learning rate (decayed by its step count)."""
    table = np.empty((len(sizes), ADAGRAD_ROW), np.int64)
    table[:, :3] = addresses
    table[:, 3] = sizes
    table[:, 4] = np.asarray(rates, np.float64).view(np.int64)
    return table


VARIANT_ROW = 9     # int64 words per tensor in the Adam variants' table


@triton.jit
def _adam_variant_kernel(table_ptr, blocks_ptr, lr, beta1, beta2, eps, weight_decay,
                         DECAY: tl.constexpr, INF_NORM: tl.constexpr, BLOCK: tl.constexpr):
    # as _adam_kernel; the table a row per tensor: the addresses of x, g, m and v (Adamax's
    # infinity norm u), the size, then the step's coefficients s, e, cg and cm as float64
    # bits: x -= (cg g + cm m) / d, with d = sqrt(v) s + e (e alone when s is 0; Adamax: u)
    row, offsets = _tensor_block(table_ptr, blocks_ptr, 9, BLOCK)
    mask = offsets < tl.load(row + 4)
    x_ptr, g_ptr, m_ptr, v_ptr = _tensor(row, 0), _tensor(row, 1), _tensor(row, 2), \
        _tensor(row, 3)
    x, g, m = _decay_and_average(tl.load(x_ptr + offsets, mask=mask),
                                 tl.load(g_ptr + offsets, mask=mask), m_ptr, offsets, mask, lr,
                                 beta1, weight_decay, DECAY)
    v = tl.load(v_ptr + offsets, mask=mask)
    if INF_NORM:
        v = tl.maximum(v * beta2, tl.abs(g) + eps)
        d = v
    else:
        v = v * beta2 + (1.0 - beta2) * g * g
        s, e = _float_word(row, 5), _float_word(row, 6)
        d = tl.where(s == 0.0, e, tl.sqrt(v) * s + e)
    tl.store(v_ptr + offsets, v, mask=mask)
    step = _float_word(row, 8) * m
    if not INF_NORM:
        step += _float_word(row, 7) * g
    tl.store(x_ptr + offsets, x - step / d, mask=mask)


@guarded
def adam_variant_update(table, blocks, programs, *, lr, beta1, beta2, eps, weight_decay,
                        decoupled=False, inf_norm=False):
    """One step of an Adam variant (NAdam, RAdam; Adamax with ``inf_norm``) in place on many
    float32 tensors at once: ``table`` (tensors, ``VARIANT_ROW``) int64 on the device, as
    ``adam_variant_table`` builds it, and ``blocks`` as ``tensor_blocks`` makes it."""
    decay = 0 if not weight_decay else 2 if decoupled else 1
    _adam_variant_kernel[(programs,)](table, blocks, float(lr), float(beta1), float(beta2),
                                      float(eps), float(weight_decay), DECAY=decay,
                                      INF_NORM=inf_norm, BLOCK=BLOCK)


def adam_variant_table(addresses, sizes, coefficients):
    """The Adam variants' table on the host: per tensor, the addresses of (x, g, m, v), its
    size and its step's coefficients (s, e, cg, cm) (see ``_adam_variant_kernel``)."""
    table = np.empty((len(sizes), VARIANT_ROW), np.int64)
    table[:, :4] = addresses
    table[:, 4] = sizes
    table[:, 5:] = np.asarray(coefficients, np.float64).reshape(-1, 4).view(np.int64)
    return table


# the gradient-clipping kernels' table: per tensor, its address and size (int64 words)
CLIP_ROW = 2


@triton.jit
def _clip_block(table_ptr, blocks_ptr, BLOCK: tl.constexpr):
    """This program's block of one float32 tensor: (its addresses, which are in range)."""
    row, offsets = _tensor_block(table_ptr, blocks_ptr, 2, BLOCK)
    return _tensor(row, 0) + offsets, offsets < tl.load(row + 1)


@triton.jit
def _sum_of_squares_kernel(table_ptr, blocks_ptr, out_ptr, BLOCK: tl.constexpr):
    at, mask = _clip_block(table_ptr, blocks_ptr, BLOCK)
    x = tl.load(at, mask=mask, other=0.0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(x * x, axis=0))


@triton.jit
def _scale_kernel(table_ptr, blocks_ptr, coef_ptr, found_ptr, CHECK: tl.constexpr,
                  BLOCK: tl.constexpr):
    at, mask = _clip_block(table_ptr, blocks_ptr, BLOCK)
    x = tl.load(at, mask=mask) * tl.load(coef_ptr)
    tl.store(at, x, mask=mask)
    if CHECK:                       # any inf or NaN among the scaled values: found = 1
        bad = tl.max(tl.where(mask & ((x - x) != 0), 1, 0), axis=0)
        if bad > 0:
            tl.store(found_ptr, 1.0)


@guarded
def sum_of_squares(table, blocks, programs, *, out):
    """``out[i]``: the sum of the squares of block i of the float32 tensors in ``table``
    (tensors, ``CLIP_ROW``: address and size), ``blocks`` as ``tensor_blocks`` makes it."""
    _sum_of_squares_kernel[(programs,)](table, blocks, out, BLOCK=BLOCK)


@guarded
def scale(table, blocks, programs, *, coef, found=None):
    """Multiply the float32 tensors of ``table`` (as for ``sum_of_squares``) in place by the
    float32 scalar on the device at ``coef``; with ``found`` (a float32 scalar on the
    device), set it to 1 if a product is an inf or NaN."""
    _scale_kernel[(programs,)](table, blocks, coef, found, CHECK=found is not None,
                               BLOCK=BLOCK)
