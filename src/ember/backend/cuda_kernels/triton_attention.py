"""A flash-attention forward in Triton: softmax(Q K^T * scale) V computed block by block with
a running maximum and sum, so the (L, S) weights never exist in memory. It writes each query
row's log-sum-exp, from which the backward recomputes the weights it needs."""

import triton
import triton.language as tl

from ember.backend.cuda_kernels._launch import guarded

__all__ = ["attention_forward", "MAX_HEAD"]

MAX_HEAD = 128                  # the largest head size a program holds in registers


@triton.jit
def _attention_forward_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, heads, L, S, E, Ev, scale,
                              sqb, sqh, sql, skb, skh, sks, svb, svh, svs,
                              CAUSAL: tl.constexpr, IEEE: tl.constexpr, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr, HEAD: tl.constexpr, HEAD_V: tl.constexpr):
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
    k_base = k_ptr + b * skb + h * skh
    v_base = v_ptr + b * svb + h * svh
    top = tl.full([BLOCK_M], -float("inf"), tl.float32)
    total = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_V], tl.float32)
    end = S
    if CAUSAL:                          # query i sees keys 0..i (PyTorch's top-left causal mask)
        end = tl.minimum(S, (block + 1) * BLOCK_M)
    for first in range(0, end, BLOCK_N):
        keys = first + cols
        k = tl.load(k_base + keys[:, None] * sks + e[None, :],
                    mask=(keys[:, None] < S) & (e[None, :] < E), other=0.0)
        if IEEE:
            s = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        seen = keys[None, :] < S
        if CAUSAL:
            seen = seen & (keys[None, :] <= rows[:, None])
        s = tl.where(seen, s * scale, -float("inf"))
        new_top = tl.maximum(top, tl.max(s, axis=1))
        shift = tl.where(new_top == -float("inf"), 0.0, new_top)   # rows with no key yet
        p = tl.exp(s - shift[:, None])
        alpha = tl.exp(top - shift)
        total = total * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + keys[:, None] * svs + ev[None, :],
                    mask=(keys[:, None] < S) & (ev[None, :] < Ev), other=0.0)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        top = new_top
    out = acc / tl.where(total == 0.0, 1.0, total)[:, None]     # no key at all: zeros
    o_rows = bh.to(tl.int64) * L + rows
    tl.store(o_ptr + o_rows[:, None] * Ev + ev[None, :], out.to(o_ptr.dtype.element_ty),
             mask=(rows[:, None] < L) & (ev[None, :] < Ev))
    tl.store(lse_ptr + o_rows, top + tl.log(total), mask=rows < L)


@guarded
def attention_forward(q, k, v, out, lse, shape, strides, scale, causal):
    """Attention of 4-D ``q`` (B, H, L, E), ``k`` (B, H, S, E) and ``v`` (B, H, S, Ev), each
    with unit stride along its last dim (``strides``: the other three per operand, in
    elements), into contiguous ``out`` (B, H, L, Ev) and float32 ``lse`` (B, H, L)."""
    (B, H, L, S, E, Ev), (sq, sk, sv) = shape, strides
    head, head_v = (max(16, triton.next_power_of_2(n)) for n in (E, Ev))
    block_m = 64
    block_n = 64 if max(head, head_v) <= 64 else 32
    ieee = q.dtype.itemsize == 4            # float32 keeps its precision (no TF32)
    _attention_forward_kernel[(triton.cdiv(L, block_m), B * H)](
        q, k, v, out, lse, H, L, S, E, Ev, float(scale), *sq[:3], *sk[:3], *sv[:3],
        CAUSAL=causal, IEEE=ieee, BLOCK_M=block_m, BLOCK_N=block_n, HEAD=head,
        HEAD_V=head_v, num_warps=4)
