"""Flash attention in Triton. The forward computes softmax(Q K^T * scale + mask) V block by
block with a running maximum and sum, so the (L, S) weights never exist in memory, and writes
each query row's log-sum-exp. The backward recomputes the weights block by block from it:
one kernel walks the queries for each block of keys (their gradients), another the keys for
each block of queries (theirs), so no two programs write the same gradient.

The mask is causal, or an ``attn_mask`` read in blocks through its strides (0 along the dims
it broadcasts over): a boolean one hides keys, a float one is added to the scores. A row
that sees no key gets zeros, as PyTorch's math path gives.

Dropout keeps weight (b, h, i, j) where element ((b*H + h)*L + i)*S + j of the Philox stream
from (seed, offset) is at least p, the same number ``rand`` of that shape draws from there:
the backward kernels, or generic code, regenerate the mask rather than store it."""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded, product

__all__ = ["attention_forward", "attention_backward", "MAX_HEAD"]

MAX_HEAD = 128                  # the largest head size a program holds in registers


@triton.jit
def _attention_forward_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, m_ptr, heads, group, L, S,
                              E, Ev, scale, sqb, sqh, sql, skb, skh, sks, svb, svh, svs, smb,
                              smh, sml, sms, seed, offset, p_drop, CAUSAL: tl.constexpr,
                              MASK: tl.constexpr, DROPOUT: tl.constexpr, IEEE: tl.constexpr,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD: tl.constexpr,
                              HEAD_V: tl.constexpr):
    block = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // heads).to(tl.int64)
    h = (bh % heads).to(tl.int64)
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    e = tl.arange(0, HEAD)
    ev = tl.arange(0, HEAD_V)
    q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sql + e[None, :],
                mask=(rows[:, None] < L) & (e[None, :] < E), other=0.0)
    k_base = k_ptr + b * skb + (h // group) * skh      # grouped-query heads share K and V
    v_base = v_ptr + b * svb + (h // group) * svh
    top = tl.full([BLOCK_M], -float("inf"), tl.float32)
    total = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_V], tl.float32)
    end = S
    if CAUSAL:                          # query i sees keys 0..i (PyTorch's top-left causal mask)
        end = tl.minimum(S, (block + 1) * BLOCK_M)
    for first in range(0, end, BLOCK_N):
        keys = first + cols
        k, v = _key_block(k_base, v_base, keys, e, ev, S, E, Ev, sks, svs)
        if IEEE:
            s = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        seen = keys[None, :] < S
        if CAUSAL:
            seen = seen & (keys[None, :] <= rows[:, None])
        s, seen = _apply_mask(s * scale, seen, m_ptr, b, h, rows, keys, L, S, smb, smh, sml,
                              sms, MASK)
        s = tl.where(seen, s, -float("inf"))
        new_top = tl.maximum(top, tl.max(s, axis=1))
        shift = tl.where(new_top == -float("inf"), 0.0, new_top)   # rows with no key yet
        p = tl.exp(s - shift[:, None])
        alpha = tl.exp(top - shift)
        total = total * alpha + tl.sum(p, axis=1)   # the weights' sum, before dropout
        if DROPOUT:
            p = _dropped(p, seed, offset, p_drop, bh.to(tl.int64), rows, keys, L, S)
        acc = acc * alpha[:, None] + product(p.to(v.dtype), v, IEEE)
        top = new_top
    out = acc / tl.where(total == 0.0, 1.0, total)[:, None]     # no key at all: zeros
    o_rows = bh.to(tl.int64) * L + rows
    tl.store(o_ptr + o_rows[:, None] * Ev + ev[None, :], out.to(o_ptr.dtype.element_ty),
             mask=(rows[:, None] < L) & (ev[None, :] < Ev))
    tl.store(lse_ptr + o_rows, top + tl.log(total), mask=rows < L)


@triton.jit
def _apply_mask(s, seen, m_ptr, b, h, rows, keys, L, S, smb, smh, sml, sms,
                MASK: tl.constexpr):
    """The scaled scores of a block, and where a row sees a key, after an ``attn_mask``
    (MASK 1: boolean, hiding keys; 2: float, added to the scores; 0: none)."""
    if MASK != 0:
        inside = (rows[:, None] < L) & (keys[None, :] < S)
        at = m_ptr + b * smb + h * smh + rows[:, None] * sml + keys[None, :] * sms
        if MASK == 1:
            seen = seen & (tl.load(at, mask=inside, other=0) != 0)
        else:
            s = s + tl.load(at, mask=inside, other=0.0).to(tl.float32)
            seen = seen & (s > -float("inf"))
    return s, seen


def _mask_arguments(q, mask):
    """(pointer, its four strides, MASK) for ``mask``: None, or (a boolean mask as uint8 or
    a float one, its (B, H, L, S) strides in elements, 0 where it broadcasts)."""
    if mask is None:
        return q, (0, 0, 0, 0), 0
    buffer, strides = mask
    return buffer, strides, 1 if buffer.dtype.itemsize == 1 else 2


@triton.jit
def _dropped(p, seed, offset, p_drop, bh, rows, keys, L, S):
    """A block of weights after dropout: each kept (its Philox number at least ``p_drop``)
    and scaled by 1 / (1 - p_drop), or zeroed."""
    at = offset + (bh * L + rows[:, None]) * S + keys[None, :]
    return tl.where(tl.rand(seed, at) >= p_drop, p / (1.0 - p_drop), 0.0)


def _dropout_arguments(dropout):
    """(seed, offset, p) of the kernels' dropout: ``dropout`` is None or such a triple."""
    return (0, 0, 0.0) if dropout is None else (int(dropout[0]), int(dropout[1]),
                                                float(dropout[2]))


@guarded
def attention_forward(q, k, v, out, lse, shape, strides, scale, causal, mask=None,
                      dropout=None, group=1):
    """Attention of 4-D ``q`` (B, H, L, E), ``k`` (B, H / group, S, E) and ``v`` (B, H /
    group, S, Ev), each with unit stride along its last dim (``strides``: the other three per
    operand, in elements), into contiguous ``out`` (B, H, L, Ev) and float32 ``lse`` (B, H,
    L); ``mask`` as ``_mask_arguments`` takes it; ``dropout`` None or (seed, offset, p);
    ``group`` query heads share each key and value head."""
    (B, H, L, S, E, Ev), (sq, sk, sv) = shape, strides
    head, head_v = (max(16, triton.next_power_of_2(n)) for n in (E, Ev))
    block_m = 64
    block_n = 64 if max(head, head_v) <= 64 else 32
    ieee = q.dtype.itemsize == 4            # float32 keeps its precision (no TF32)
    m, sm, kind = _mask_arguments(q, mask)
    _attention_forward_kernel[(triton.cdiv(L, block_m), B * H)](
        q, k, v, out, lse, m, H, group, L, S, E, Ev, float(scale), *sq[:3], *sk[:3], *sv[:3],
        *sm,
        *_dropout_arguments(dropout), CAUSAL=causal, MASK=kind, DROPOUT=dropout is not None,
        IEEE=ieee, BLOCK_M=block_m, BLOCK_N=block_n, HEAD=head, HEAD_V=head_v, num_warps=4)


@triton.jit
def _scores(q, k, scale, rows, keys, L, S, CAUSAL: tl.constexpr, IEEE: tl.constexpr):
    """Q K^T * scale for a block of rows and keys, and where a row sees a key."""
    if IEEE:
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k))
    seen = (rows[:, None] < L) & (keys[None, :] < S)
    if CAUSAL:
        seen = seen & (keys[None, :] <= rows[:, None])
    return s * scale, seen


@triton.jit
def _key_block(k_base, v_base, keys, e, ev, S, E, Ev, sks, svs):
    """Rows ``keys`` of K and V (zeros past S and past the head size)."""
    key_mask = keys[:, None] < S
    k = tl.load(k_base + keys[:, None] * sks + e[None, :], mask=key_mask & (e[None, :] < E),
                other=0.0)
    v = tl.load(v_base + keys[:, None] * svs + ev[None, :], mask=key_mask & (ev[None, :] < Ev),
                other=0.0)
    return k, v


@triton.jit
def _query_block(q_base, do_ptr, lse_ptr, delta_ptr, bh, rows, e, ev, L, E, Ev, sql):
    """Rows ``rows`` of Q, of the output's gradient, and their log-sum-exp and delta."""
    row_mask = rows[:, None] < L
    q = tl.load(q_base + rows[:, None] * sql + e[None, :], mask=row_mask & (e[None, :] < E),
                other=0.0)
    do = tl.load(do_ptr + (bh * L + rows)[:, None] * Ev + ev[None, :],
                 mask=row_mask & (ev[None, :] < Ev), other=0.0)
    lse = tl.load(lse_ptr + bh * L + rows, mask=rows < L, other=0.0)
    delta = tl.load(delta_ptr + bh * L + rows, mask=rows < L, other=0.0)
    return q, do, lse, delta


@triton.jit
def _weights_and_score_gradient(q, k, v, do, lse, delta, rows, keys, L, S, scale, m_ptr, b, h,
                                smb, smh, sml, sms, seed, offset, p_drop, bh,
                                CAUSAL: tl.constexpr, MASK: tl.constexpr,
                                DROPOUT: tl.constexpr, IEEE: tl.constexpr):
    """A block's weights P (recomputed from the log-sum-exp; after dropout, as they met V)
    and the scaled scores' gradient P * (dP - delta) * scale (dP through the dropout)."""
    s, seen = _scores(q, k, scale, rows, keys, L, S, CAUSAL, IEEE)
    s, seen = _apply_mask(s, seen, m_ptr, b, h, rows, keys, L, S, smb, smh, sml, sms, MASK)
    p = tl.where(seen, tl.exp(s - lse[:, None]), 0.0)
    dp = product(do, tl.trans(v), IEEE)
    if DROPOUT:
        dp = _dropped(dp, seed, offset, p_drop, bh, rows, keys, L, S)
        return _dropped(p, seed, offset, p_drop, bh, rows, keys, L, S), \
            p * (dp - delta[:, None]) * scale
    return p, p * (dp - delta[:, None]) * scale


@triton.jit
def _attention_backward_keys_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr,
                                    dv_ptr, m_ptr, heads, group, L, S, E, Ev, scale,
                                    sqb, sqh, sql, skb, skh, sks, svb, svh, svs,
                                    smb, smh, sml, sms, seed, offset, p_drop,
                                    CAUSAL: tl.constexpr, MASK: tl.constexpr,
                                    DROPOUT: tl.constexpr, IEEE: tl.constexpr,
                                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                    HEAD: tl.constexpr, HEAD_V: tl.constexpr):
    # a block of keys of one key/value head, summed over the ``group`` query heads it serves
    block = tl.program_id(0)
    bk = tl.program_id(1).to(tl.int64)
    b = bk // (heads // group)
    hk = bk % (heads // group)
    keys = block * BLOCK_N + tl.arange(0, BLOCK_N)
    e = tl.arange(0, HEAD)
    ev = tl.arange(0, HEAD_V)
    k, v = _key_block(k_ptr + b * skb + hk * skh, v_ptr + b * svb + hk * svh, keys, e, ev, S,
                      E, Ev, sks, svs)
    dk = tl.zeros([BLOCK_N, HEAD], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_V], tl.float32)
    first_row = 0
    if CAUSAL:                          # rows before the block's first key do not see it
        first_row = (block * BLOCK_N // BLOCK_M) * BLOCK_M
    for g in range(group):
        h = hk * group + g
        bh = b * heads + h
        for first in range(first_row, L, BLOCK_M):
            rows = first + tl.arange(0, BLOCK_M)
            q, do, lse, delta = _query_block(q_ptr + b * sqb + h * sqh, do_ptr, lse_ptr,
                                             delta_ptr, bh, rows, e, ev, L, E, Ev, sql)
            p, ds = _weights_and_score_gradient(q, k, v, do, lse, delta, rows, keys, L, S,
                                                scale, m_ptr, b, h, smb, smh, sml, sms, seed,
                                                offset, p_drop, bh, CAUSAL, MASK, DROPOUT,
                                                IEEE)
            dv += product(tl.trans(p).to(do.dtype), do, IEEE)
            dk += product(tl.trans(ds).to(q.dtype), q, IEEE)
    out_rows = bk * S + keys
    key_mask = keys[:, None] < S
    tl.store(dk_ptr + out_rows[:, None] * E + e[None, :], dk.to(dk_ptr.dtype.element_ty),
             mask=key_mask & (e[None, :] < E))
    tl.store(dv_ptr + out_rows[:, None] * Ev + ev[None, :], dv.to(dv_ptr.dtype.element_ty),
             mask=key_mask & (ev[None, :] < Ev))


@triton.jit
def _attention_backward_queries_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr,
                                       m_ptr, heads, group, L, S, E, Ev, scale,
                                       sqb, sqh, sql, skb, skh, sks, svb, svh, svs,
                                       smb, smh, sml, sms, seed, offset, p_drop,
                                       CAUSAL: tl.constexpr, MASK: tl.constexpr,
                                       DROPOUT: tl.constexpr, IEEE: tl.constexpr,
                                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                       HEAD: tl.constexpr, HEAD_V: tl.constexpr):
    block = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // heads
    h = bh % heads
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
    e = tl.arange(0, HEAD)
    ev = tl.arange(0, HEAD_V)
    q, do, lse, delta = _query_block(q_ptr + b * sqb + h * sqh, do_ptr, lse_ptr, delta_ptr, bh,
                                     rows, e, ev, L, E, Ev, sql)
    dq = tl.zeros([BLOCK_M, HEAD], tl.float32)
    end = S
    if CAUSAL:
        end = tl.minimum(S, (block + 1) * BLOCK_M)
    for first in range(0, end, BLOCK_N):
        keys = first + tl.arange(0, BLOCK_N)
        k, v = _key_block(k_ptr + b * skb + (h // group) * skh,
                          v_ptr + b * svb + (h // group) * svh, keys, e, ev, S, E, Ev, sks,
                          svs)
        p, ds = _weights_and_score_gradient(q, k, v, do, lse, delta, rows, keys, L, S, scale,
                                            m_ptr, b, h, smb, smh, sml, sms, seed, offset,
                                            p_drop, bh, CAUSAL, MASK, DROPOUT, IEEE)
        dq += product(ds.to(k.dtype), k, IEEE)
    tl.store(dq_ptr + (bh * L + rows)[:, None] * E + e[None, :], dq.to(dq_ptr.dtype.element_ty),
             mask=(rows[:, None] < L) & (e[None, :] < E))


@guarded
def attention_backward(q, k, v, grad_out, lse, delta, dq, dk, dv, shape, strides, scale,
                       causal, mask=None, dropout=None, group=1):
    """The gradients of flash attention into contiguous ``dq``, ``dk``, ``dv``, from the
    operands, mask, dropout and group (as for ``attention_forward``), the output's contiguous
    gradient, each row's log-sum-exp and ``delta``: each row's sum of output times output
    gradient (float32)."""
    (B, H, L, S, E, Ev), (sq, sk, sv) = shape, strides
    head, head_v = (max(16, triton.next_power_of_2(n)) for n in (E, Ev))
    block_m, block_n = (64, 64) if max(head, head_v) <= 64 else (32, 32)
    ieee = q.dtype.itemsize == 4
    m, sm, kind = _mask_arguments(q, mask)
    common = (H, group, L, S, E, Ev, float(scale), *sq[:3], *sk[:3], *sv[:3], *sm,
              *_dropout_arguments(dropout))
    meta = dict(CAUSAL=causal, MASK=kind, DROPOUT=dropout is not None, IEEE=ieee,
                BLOCK_M=block_m, BLOCK_N=block_n, HEAD=head, HEAD_V=head_v, num_warps=4)
    _attention_backward_keys_kernel[(triton.cdiv(S, block_n), B * (H // group))](
        q, k, v, grad_out, lse, delta, dk, dv, m, *common, **meta)
    _attention_backward_queries_kernel[(triton.cdiv(L, block_m), B * H)](
        q, k, v, grad_out, lse, delta, dq, m, *common, **meta)
