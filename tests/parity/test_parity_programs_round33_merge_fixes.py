"""What the model merging/editing programs of round 33 (test_parity_programs_round33_merge*.py)
found, pinned against PyTorch.

- ``linalg.solve``/``solve_ex``/``tensorsolve`` of a bfloat16 system (RegMean or ROME run on a
  bf16 checkpoint) raised RuntimeError "linalg.solve: Low precision dtypes not supported. Got
  BFloat16" (bfloat16's NumPy kind is "V", so it took the non-float path); PyTorch, as for
  float16, checks the dtypes agree and then fails in the LU kernel: NotImplementedError
  "lu_cpu" not implemented for 'BFloat16'.
- ``linalg.lu_solve`` with a 16-bit LU raised the kernel's NotImplementedError before its
  argument checks (B's rank, the pivots' dtype, count and range); PyTorch checks all of them
  first and reaches the kernel's error last.
- ``quantile``/``nanquantile`` sorted any number of elements; PyTorch refuses more than
  2**24 along the reduced dim (all elements when dim is None: mergekit's and breadcrumbs'
  magnitude thresholds hit it and switch to kthvalue) with "quantile() input tensor is too
  large", after its other argument checks. More rows of at most 2**24 are fine.
- ``F.scaled_dot_product_attention`` under vmap, where the logical (per-example) inputs suit
  PyTorch's CPU flash kernel (4-D: nn.MultiheadAttention's call, so Fisher merging of an
  attention model by vmap(grad)): PyTorch has no batching rule for that kernel and loops, with
  its "There is a performance drop ... aten::_scaled_dot_product_flash_attention_for_cpu"
  warning (and ``..._backward`` when vmap(grad) or jacrev loops the backward), once per call
  and per example of inner levels; a batch of 0 raises "Batching rule not implemented for ...".
  ember gave neither, and with only the flash kernel allowed (sdpa_kernel(FLASH_ATTENTION))
  it judged the physical tensors (a batch dim more): it refused 4-D examples ("No available
  kernel") and ran 3-D ones, which PyTorch refuses, naming their logical ranks.

Found and left alone (ember follows the documentation, PyTorch 2.13 does not):
``func.functional_call(m, {"weight": w}, ...)`` on a parametrized ``m`` uses ``w`` as the
weight ("completely disable the parametrization", as documented); PyTorch assigns ``w``
through the parametrization's ``right_inverse`` (raising "parametrization S does not implement
right_inverse." when there is none) and on the way out writes the parametrized value back
through it, which changes ``original`` when right_inverse is not the exact inverse.
"""

import re

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e).replace("ember", "torch")
    return None


_SOLVES = {
    "solve": lambda L, a, b: L.linalg.solve(a, b),
    "solve_right": lambda L, a, b: L.linalg.solve(a, b[None], left=False),
    "solve_ex": lambda L, a, b: L.linalg.solve_ex(a, b),
    "tensorsolve": lambda L, a, b: L.linalg.tensorsolve(a, b),
}


@pytest.mark.parametrize("name", list(_SOLVES))
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("b_dtype", ["same", "float32"])
def test_16bit_solve_fails_in_the_lu_kernel(name, dtype, b_dtype):
    def call(lib):
        d = getattr(lib, dtype)
        a = lib.eye(3, dtype=d) * 2
        b = lib.ones(3, dtype=d if b_dtype == "same" else lib.float32)
        return _error(lambda: _SOLVES[name](lib, a, b))
    got = call(ember)
    assert got is not None and got == call(torch)


def test_bfloat16_regmean_solve_raises_not_implemented():
    rng = np.random.default_rng(0)
    g = rng.standard_normal((4, 4)).astype(np.float32)
    g = g @ g.T + np.eye(4, dtype=np.float32)
    w = rng.standard_normal((4, 3)).astype(np.float32)

    def call(lib):
        gram = lib.from_numpy(g).bfloat16()
        with pytest.raises(NotImplementedError) as info:
            lib.linalg.solve(gram, lib.from_numpy(w).bfloat16())
        return str(info.value)
    assert call(ember) == call(torch) == "\"lu_cpu\" not implemented for 'BFloat16'"
    # the usual workaround, solving in float32, agrees
    got = ember.linalg.solve(ember.from_numpy(g).bfloat16().float(),
                             ember.from_numpy(w).bfloat16().float())
    want = torch.linalg.solve(torch.from_numpy(g).bfloat16().float(),
                              torch.from_numpy(w).bfloat16().float())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("case", ["b_1d", "pivots_int64", "pivots_count", "rows", "pivot_high",
                                  "pivot_low", "valid"])
def test_lu_solve_checks_arguments_before_the_16bit_kernel(dtype, case):
    def call(lib):
        d = getattr(lib, dtype)
        lu = lib.eye(3, dtype=d) * 2
        piv = lib.tensor([1, 2, 3], dtype=lib.int32)
        b = lib.ones(3, 1, dtype=d)
        if case == "b_1d":
            b = b[:, 0]
        elif case == "pivots_int64":
            piv = piv.long()
        elif case == "pivots_count":
            piv = piv[:2]
        elif case == "rows":
            b = b[:2]
        elif case == "pivot_high":
            piv = lib.tensor([1, 2, 4], dtype=lib.int32)
        elif case == "pivot_low":
            piv = lib.tensor([0, 2, 3], dtype=lib.int32)
        err = _error(lambda: lib.linalg.lu_solve(lu, piv, b))
        return err if err is not None else lib.linalg.lu_solve(lu, piv, b).float().tolist()
    got, want = call(ember), call(torch)
    assert got == want



_BIG = 2 ** 24


@pytest.mark.parametrize("case", ["flat", "flat_dim0", "rows_dim0", "nan", "q_tensor",
                                  "q_range_first", "dtype_first", "dim_first"])
def test_quantile_refuses_more_than_2_pow_24_reduced_elements(case):
    # (stride-0 views: nothing is allocated, and both libraries refuse before sorting; the
    # other dims' sizes do not count: tests/ops/test_quantile_limit_round33.py)
    def call(lib):
        fn, q, kw = lib.quantile, 0.5, {}
        x = lib.zeros(1).expand(_BIG + 1)
        if case == "flat_dim0":
            kw = {"dim": 0}
        elif case == "rows_dim0":
            x, kw = lib.zeros(1, 1).expand(_BIG + 1, 3), {"dim": 0, "keepdim": True}
        elif case == "nan":
            fn = lib.nanquantile
        elif case == "q_tensor":
            q = lib.tensor([0.25, 0.5])
        elif case == "q_range_first":
            q = 1.5
        elif case == "dtype_first":
            x = lib.zeros(1, dtype=lib.int64).expand(_BIG + 1)
        elif case == "dim_first":
            kw = {"dim": 2}
        return _error(lambda: fn(x, q, **kw))
    got = call(ember)
    assert got is not None and got == call(torch)
    if case in ("flat", "flat_dim0", "rows_dim0", "nan", "q_tensor"):
        assert got == ("RuntimeError", "quantile() input tensor is too large")


def _sdpa_cases(lib):
    F = lib.nn.functional
    q = lib.from_numpy(np.random.default_rng(2).standard_normal((3, 2, 4, 5)).astype(np.float32))
    mask = lib.triu(lib.ones(4, 4, dtype=lib.bool), 1)

    def attend(q, **kw):
        return F.scaled_dot_product_attention(q[None], q[None], q[None], **kw)

    def flash_only():
        with lib.nn.attention.sdpa_kernel(lib.nn.attention.SDPBackend.FLASH_ATTENTION):
            return lib.vmap(attend)(q)

    def flash_only_3d():
        with lib.nn.attention.sdpa_kernel(lib.nn.attention.SDPBackend.FLASH_ATTENTION):
            return lib.vmap(lambda q: F.scaled_dot_product_attention(q, q, q))(q)

    def flash_only_dropout():
        with lib.nn.attention.sdpa_kernel(lib.nn.attention.SDPBackend.FLASH_ATTENTION):
            return lib.vmap(lambda q: attend(q, dropout_p=0.5), randomness="different")(q)

    def math_only():
        with lib.nn.attention.sdpa_kernel(lib.nn.attention.SDPBackend.MATH):
            return lib.vmap(attend)(q)

    return {
        "3d": lambda: lib.vmap(lambda q: F.scaled_dot_product_attention(q, q, q))(q),
        "3d_grad": lambda: lib.vmap(lib.func.grad(
            lambda q: F.scaled_dot_product_attention(q, q, q, attn_mask=mask).sum()))(q),
        "4d": lambda: lib.vmap(attend)(q),
        "4d_causal": lambda: lib.vmap(lambda q: attend(q, is_causal=True))(q),
        "4d_mask": lambda: lib.vmap(lambda q: attend(q, attn_mask=mask))(q),
        "4d_batched_mask": lambda: lib.vmap(lambda q, m: attend(q, attn_mask=m))(
            q, mask.expand(3, 4, 4)),
        "4d_mask_requires_grad": lambda: lib.vmap(lambda q: attend(
            q, attn_mask=lib.zeros(4, 4, requires_grad=True)))(q),
        "4d_grad": lambda: lib.vmap(lib.func.grad(lambda q: attend(q, attn_mask=mask).sum()))(q),
        "4d_nested": lambda: lib.vmap(lib.vmap(
            lambda q: F.scaled_dot_product_attention(q[None, None], q[None, None],
                                                     q[None, None])))(q),
        "4d_chunks": lambda: lib.vmap(attend, chunk_size=2)(q),
        "4d_grad_outside": lambda: lib.func.grad(lambda q: lib.vmap(attend)(q).sum())(q),
        "4d_backward_outside": lambda: lib.vmap(attend)(q.clone().requires_grad_()).sum()
        .backward(),
        "4d_vmap_jacrev": lambda: lib.vmap(lib.func.jacrev(lambda q: attend(q).sum()))(q),
        "4d_jacrev": lambda: lib.func.jacrev(lambda q: attend(q, attn_mask=mask).sum(0))(q[0]),
        "4d_jacrev_jacrev": lambda: lib.func.jacrev(lib.func.jacrev(
            lambda q: attend(q).sum()))(q[0, :, :2]),
        "4d_size_0": lambda: lib.vmap(attend)(q[:0]),
        "4d_empty_rows": lambda: lib.vmap(attend)(q[:, :, :0]),
        "4d_half": lambda: lib.vmap(attend)(q.half()),
        "4d_dropout": lambda: lib.vmap(lambda q: attend(q, dropout_p=0.5),
                                       randomness="different")(q),
        "flash_only": flash_only,
        "flash_only_3d": flash_only_3d,
        "flash_only_dropout": flash_only_dropout,
        "math_only": math_only,
    }


@pytest.mark.parametrize("case", list(_sdpa_cases(torch)))
def test_sdpa_flash_kernel_under_vmap_loops_and_warns_like_pytorch(case):
    import warnings

    def run(lib):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            err = _error(_sdpa_cases(lib)[case])
        # (PyTorch's C++ warnings end by naming the source line that raised them)
        return err, [re.sub(r" \(Triggered internally at .*\)$", "", str(w.message))
                     .replace("ember", "torch") for w in caught]
    got, want = run(ember), run(torch)
    assert got == want
    if case in ("4d", "4d_mask", "4d_grad", "4d_nested", "4d_vmap_jacrev", "4d_jacrev",
                "4d_size_0"):
        assert want[1], "PyTorch warns here"


def test_sdpa_flash_kernel_under_vmap_values():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((3, 2, 4, 5)).astype(np.float32)
    mask = np.triu(np.ones((4, 4), dtype=bool), 1)

    def run(lib):
        F = lib.nn.functional

        def f(q):
            return F.scaled_dot_product_attention(q[None], q[None], q[None],
                                                  attn_mask=lib.from_numpy(mask)).sum()
        x = lib.from_numpy(q)
        with lib.nn.attention.sdpa_kernel(lib.nn.attention.SDPBackend.FLASH_ATTENTION):
            out = lib.vmap(lambda q: F.scaled_dot_product_attention(q[None], q[None], q[None]))(x)
        return out.detach().numpy(), lib.vmap(lib.func.grad(f))(x).numpy()
    for got, want in zip(run(ember), run(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
