"""What the LLM compression programs of round 31 (test_parity_programs_round31_quant*.py)
found, pinned against PyTorch.

- ``torch._fake_quantize_learnable_per_tensor_affine`` / ``_per_channel_affine`` (LSQ+, what
  torch.ao's _LearnableFakeQuantize calls) were missing: an LSQ program stopped with
  AttributeError. Now PyTorch's forward (zero point rounded half to even, clamped) and its
  backward kernels' input, scale and zero-point gradients bit for bit per element (float32,
  the fake-quantized error contracted into one rounding, ``grad_factor`` in float32; the
  per-tensor backward's zero point is ``zero_point + 0.5`` truncated), node names, errors.
- ``torch._weight_int8pack_mm`` (gpt-fast's int8 weight-only linear) was missing; now float32
  sums rounded once to the activations' dtype (bfloat16 bit for bit), PyTorch's checks and
  messages, and its NotImplemented node.
- ``torch._scaled_mm`` (torchao's float8 matmul) was missing; now PyTorch's CPU results:
  per-tensor or row-wise scales applied to the operands before a float32 product, bias added,
  float8 results NaN on overflow and, with per-tensor scales, rounded through float16 first
  (as PyTorch's kernel; a direct cast differs in ~0.3% of elements).
- forward-mode AD through fake_quantize_per_tensor/per_channel_affine gave a straight-through
  tangent; PyTorch refuses it (no forward rule for the cachemask kernels), now so does ember,
  and the new ops refuse it as PyTorch's do.
- review: ``_scaled_mm`` refused int8 results, non-float per-tensor scales and per-row
  results other than oneDNN's dtypes, gave NaN where a per-row e4m3fn result saturates, and
  took strided per-row scales and float64/integer biases per tensor, all unlike PyTorch; the
  learnable backward refused a bfloat16 input and counted NaN/inf/huge inputs as in range."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _learnable(lib, kind, x, scale, zp, qmin, qmax, gf, dy, axis=1):
    X = lib.from_numpy(x).requires_grad_()
    S = lib.from_numpy(scale).requires_grad_()
    Z = lib.from_numpy(zp).requires_grad_()
    if kind == "tensor":
        y = lib._fake_quantize_learnable_per_tensor_affine(X, S, Z, qmin, qmax, gf)
    else:
        y = lib._fake_quantize_learnable_per_channel_affine(X, S, Z, axis, qmin, qmax, gf)
    y.backward(lib.from_numpy(dy))
    return (y.detach().numpy(), X.grad.numpy(), S.grad.numpy(), Z.grad.numpy(),
            y.grad_fn.name())


@pytest.mark.parametrize("gf", [1.0, 0.7, 0.1234567])
def test_learnable_per_channel_is_torchs_bits(gf):
    # one element per channel: no summation, so every per-element term is compared bit for bit
    rng = np.random.default_rng(int(gf * 100))
    n = 600
    x = (rng.standard_normal((1, n)) * 2).astype(np.float32)
    s = (rng.random(n) * .3 + 0.05).astype(np.float32)
    z = (rng.random(n) * 6 - 3).astype(np.float32)
    dy = rng.standard_normal((1, n)).astype(np.float32)
    ours = _learnable(ember, "channel", x, s, z, -4, 3, gf, dy)
    theirs = _learnable(torch, "channel", x, s, z, -4, 3, gf, dy)
    for a, b in zip(ours[:4], theirs[:4]):
        np.testing.assert_array_equal(a, b)
    assert ours[4] == theirs[4] == "FakeQuantizeLearnablePerChannelAffineBackward0"


@pytest.mark.parametrize("zp", [2.4, 2.5, 2.6, -0.5, 0.5, 1.5, 0.49999, 100.0, -100.0])
def test_learnable_per_tensor_zero_point_rounding_is_torchs(zp):
    # forward rounds half to even (2.5 -> 2), backward truncates zp + 0.5 (2.5 -> 3)
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((5, 7)) * 2).astype(np.float32)
    dy = rng.standard_normal((5, 7)).astype(np.float32)
    args = (x, np.array([0.25], np.float32), np.array([zp], np.float32), -8, 7, 0.37, dy)
    ours, theirs = _learnable(ember, "tensor", *args), _learnable(torch, "tensor", *args)
    _assert_same(ours, theirs)
    assert ours[4] == theirs[4] == "FakeQuantizeLearnablePerTensorAffineBackward0"


def test_learnable_3d_channels_and_low_precision_forward():
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((3, 4, 5)) * 2).astype(np.float32)
    s = np.array([0.25, 0.5, 0.125, 1.0], np.float32)
    z = np.array([0.5, -1.5, 9.0, 3.49], np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    ours = _learnable(ember, "channel", x, s, z, 0, 15, 2.0, dy)
    theirs = _learnable(torch, "channel", x, s, z, 0, 15, 2.0, dy)
    _assert_same(ours, theirs)
    half = [lib.from_numpy(x).to(lib.bfloat16) for lib in (ember, torch)]
    outs = [lib._fake_quantize_learnable_per_channel_affine(
        h, lib.from_numpy(s), lib.from_numpy(z), 1, 0, 15).float().numpy()
        for lib, h in zip((ember, torch), half)]
    np.testing.assert_array_equal(*outs)


def test_learnable_empty_input_hands_back_scale_and_zero_point():
    for kind, shape, n in (("tensor", (0,), 1), ("channel", (0, 2), 2)):
        x = np.zeros(shape, np.float32)
        s, z = np.full(n, 0.5, np.float32), np.full(n, 1.3, np.float32)
        ours = _learnable(ember, kind, x, s, z, -4, 3, 1.0, x)
        theirs = _learnable(torch, kind, x, s, z, -4, 3, 1.0, x)
        for a, b in zip(ours[:4], theirs[:4]):
            np.testing.assert_array_equal(a, b)


def _assert_same(ours, theirs):
    """Result and input gradient bit for bit; the scale and zero-point gradients, which sum
    per-element terms, to float32 summation-order noise (ember's sum is not PyTorch's
    vectorised cascade)."""
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])
    for a, b in zip(ours[2:4], theirs[2:4]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def _error(lib, fn):
    try:
        fn(lib)
    except Exception as e:      # noqa: BLE001 - the type and message are what is compared
        return type(e).__name__, str(e)
    return None


@pytest.mark.parametrize("case", [
    lambda t: t._fake_quantize_learnable_per_tensor_affine(
        t.ones(3), t.tensor(0.5), t.tensor([0.0]), -8, 7),
    lambda t: t._fake_quantize_learnable_per_tensor_affine(
        t.ones(3, dtype=t.float64, requires_grad=True), t.tensor([0.5]), t.tensor([0.0]),
        -8, 7).sum().backward(),
    lambda t: t._fake_quantize_learnable_per_tensor_affine(
        t.ones(3, requires_grad=True), t.tensor([0.5]), t.tensor([0]), -8, 7).sum().backward(),
    lambda t: t._fake_quantize_learnable_per_tensor_affine(
        t.ones(3, requires_grad=True), t.tensor([0.5]), t.tensor([1.0]), 1, 7).sum().backward(),
    lambda t: t._fake_quantize_learnable_per_tensor_affine(
        t.ones(3), t.tensor([0.5]), t.tensor([1.0]), 7, 1),
    lambda t: t._fake_quantize_learnable_per_tensor_affine(
        t.ones(3), t.tensor([0.5, 0.3], requires_grad=True), t.tensor([1.0, 2.0]), -8,
        7).sum().backward(),
    lambda t: t._fake_quantize_learnable_per_channel_affine(
        t.ones(2, 3, requires_grad=True), t.ones(3), t.ones(3), 1, 1, 7).sum().backward(),
    lambda t: t._fake_quantize_learnable_per_channel_affine(
        t.ones(2, 3), t.ones(3), t.ones(3), 1.0, -8, 7),
    lambda t: t._fake_quantize_learnable_per_channel_affine(
        t.ones(2, 3), t.ones(3), t.ones(3), -1, -8, 7),
    lambda t: t._fake_quantize_learnable_per_channel_affine(
        t.ones(2, 3), t.ones(2), t.ones(2), 1, -8, 7),
    lambda t: t._fake_quantize_learnable_per_channel_affine(
        t.ones(2, 3), t.ones(3, dtype=t.float64), t.ones(3), 1, -8, 7),
])
def test_learnable_errors_are_torchs(case):
    expected = _error(torch, case)
    assert expected is not None
    assert _error(ember, case) == expected


def _int8pack(lib, a, b, s, dtype):
    d = getattr(lib, dtype)
    # (fresh tensors: PyTorch's bfloat16 kernel crashes on 2-byte-aligned NumPy memory)
    a, b, s = (lib.from_numpy(v).clone() for v in (a, b, s))
    return lib._weight_int8pack_mm(a.to(d), b, s.to(d))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_weight_int8pack_mm_is_torchs(dtype):
    rng = np.random.default_rng(5)
    for m, n, k in ((7, 9, 48), (1, 3, 16), (4, 1, 32)):
        a = (rng.standard_normal((m, k)) * 3).astype(np.float32)
        b = rng.integers(-128, 128, (n, k)).astype(np.int8)
        s = (rng.random(n) * 0.05).astype(np.float32)
        ours, theirs = _int8pack(ember, a, b, s, dtype), _int8pack(torch, a, b, s, dtype)
        assert str(ours.dtype) == str(theirs.dtype).replace("torch", "ember")
        if dtype == "float32":      # float32 sums: accumulation order
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)
        else:                       # one rounding of a float32 sum (the rare tie apart)
            np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(),
                                       rtol=1e-3, atol=0)


def test_weight_int8pack_mm_empty_and_not_differentiable():
    for lib in (ember, torch):
        assert tuple(lib._weight_int8pack_mm(lib.ones(0, 16), lib.ones(3, 16, dtype=lib.int8),
                                             lib.ones(3)).shape) == (0, 3)
        zero_k = lib._weight_int8pack_mm(lib.ones(2, 0), lib.ones(3, 0, dtype=lib.int8),
                                         lib.ones(3))
        assert zero_k.tolist() == [[0.0] * 3] * 2
    outs = [_error(lib, lambda t: t._weight_int8pack_mm(
        t.ones(2, 16, requires_grad=True), t.ones(3, 16, dtype=t.int8), t.ones(3)).sum()
        .backward()) for lib in (ember, torch)]
    assert outs[0] == outs[1] == (
        "RuntimeError", "derivative for aten::_weight_int8pack_mm is not implemented")
    nodes = [lib._weight_int8pack_mm(lib.ones(2, 16, requires_grad=True),
                                     lib.ones(3, 16, dtype=lib.int8), lib.ones(3)).grad_fn
             for lib in (ember, torch)]
    assert type(nodes[0]).__name__ == type(nodes[1]).__name__ == "NotImplemented"


def _scaled(lib, a, b, sa, sb, out_dtype, rowwise):
    f8 = lib.float8_e4m3fn
    a, b = lib.from_numpy(a).to(f8), lib.from_numpy(b).to(f8).t()
    if rowwise:
        sa, sb = lib.from_numpy(sa), lib.from_numpy(sb)
    else:
        sa, sb = lib.tensor(0.37), lib.tensor(0.011)
    return lib._scaled_mm(a, b, sa, sb, out_dtype=getattr(lib, out_dtype))


@pytest.mark.parametrize("rowwise", [False, True], ids=["tensorwise", "rowwise"])
@pytest.mark.parametrize("out_dtype", ["float8_e4m3fn", "float8_e5m2", "float32"])
def test_scaled_mm_is_torchs(out_dtype, rowwise):
    rng = np.random.default_rng(6)
    for _ in range(5):
        a = (rng.standard_normal((16, 32)) * 3).astype(np.float32)
        b = (rng.standard_normal((24, 32)) * 3).astype(np.float32)
        sa = (rng.random((16, 1)) * 0.1 + 0.01).astype(np.float32)
        sb = (rng.random((1, 24)) * 0.1 + 0.01).astype(np.float32)
        ours = _scaled(ember, a, b, sa, sb, out_dtype, rowwise)
        theirs = _scaled(torch, a, b, sa, sb, out_dtype, rowwise)
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
        if out_dtype == "float32":          # float32 sums: accumulation order
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)
        else:       # float8: the float16 step (per tensor) decides ties; one rounding per row
            np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())


def test_scaled_mm_overflow_bias_and_errors():
    outs = []
    for lib in (ember, torch):
        a = lib.full((16, 16), 20.0).to(lib.float8_e4m3fn)
        one = lib.tensor(1.0)
        outs.append([lib._scaled_mm(a, a.t(), one, one).float().numpy(),
                     lib._scaled_mm(a, a.t(), one, one, bias=lib.ones(16, dtype=lib.bfloat16),
                                    out_dtype=lib.bfloat16).float().numpy(),
                     lib._scaled_mm(a, a.t(), one, one, scale_result=lib.tensor(4.0),
                                    out_dtype=lib.float32).numpy()])
    for ours, theirs in zip(*outs):
        np.testing.assert_array_equal(ours, theirs)
    assert np.isnan(outs[0][0]).all() and np.isnan(outs[1][0]).all()    # no saturation
    for case in (lambda t: t._scaled_mm(t.ones(16, 32), t.ones(32, 16).to(t.float8_e4m3fn),
                                        t.tensor(1.0), t.tensor(1.0)),
                 lambda t: t._scaled_mm(t.ones(16, 32, dtype=t.bfloat16),
                                        t.ones(32, 16, dtype=t.bfloat16), t.tensor(1.0),
                                        t.tensor(1.0)),
                 lambda t: t._scaled_mm(t.ones(16, 32), t.ones(32, 16), t.ones(16, 1),
                                        t.ones(1, 16)),
                 lambda t: t._scaled_mm(t.ones(16, 32).to(t.float8_e4m3fn),
                                        t.ones(32, 8).to(t.float8_e4m3fn),
                                        t.ones(16, 1).double(), t.ones(1, 8).double()),
                 lambda t: t._scaled_mm(t.ones(16, 32).to(t.float8_e4m3fn),
                                        t.ones(16, 32).to(t.float8_e4m3fn), t.tensor(1.0),
                                        t.tensor(1.0)),
                 lambda t: t._scaled_mm(t.ones(16, 32).to(t.float8_e4m3fn),
                                        t.ones(32, 8).to(t.float8_e4m3fn), t.tensor(1.0),
                                        t.tensor(1.0), out_dtype=t.int32),
                 lambda t: t._scaled_mm(t.ones(16, 32).to(t.float8_e4m3fn),
                                        t.ones(32, 8).to(t.float8_e4m3fn),
                                        t.tensor(1.0, requires_grad=True),
                                        t.tensor(1.0), out_dtype=t.float32).sum().backward()):
        expected = _error(torch, case)
        assert expected is not None
        assert _error(ember, case) == expected


def test_learnable_double_backward_refused_as_torch():
    def case(t):
        x = t.linspace(-2, 2, 9, requires_grad=True)
        s, z = t.tensor([0.25], requires_grad=True), t.tensor([1.0], requires_grad=True)
        y = t._fake_quantize_learnable_per_channel_affine(x[None], s, z, 0, -8, 7)
        _, gs = t.autograd.grad(y.pow(2).sum(), (x, s), create_graph=True)
        assert type(gs.grad_fn).__name__ == "NotImplemented"
        gs.sum().backward()
    assert _error(ember, case) == _error(torch, case) == (
        "RuntimeError", "derivative for aten::_fake_quantize_learnable_per_channel_affine_backward "
        "is not implemented")


@pytest.mark.parametrize("call", [
    lambda t, x: t.fake_quantize_per_tensor_affine(x, 0.25, 1, -8, 7),
    lambda t, x: t.fake_quantize_per_tensor_affine(x, t.tensor(0.25), t.tensor(1), -8, 7),
    lambda t, x: t.fake_quantize_per_channel_affine(
        x[None], t.tensor([0.25]), t.tensor([1], dtype=t.int32), 0, -8, 7),
    lambda t, x: t._fake_quantize_learnable_per_tensor_affine(
        x, t.tensor([0.25]), t.tensor([1.0]), -8, 7),
    lambda t, x: t._fake_quantize_learnable_per_channel_affine(
        x[None], t.tensor([0.25]), t.tensor([1.0]), 0, -8, 7),
    lambda t, x: t._weight_int8pack_mm(x[None], t.ones(2, 16, dtype=t.int8), t.ones(2)),
], ids=["per_tensor", "tensor_qparams", "per_channel", "learnable_tensor",
        "learnable_channel", "int8pack"])
def test_fake_quant_refuses_forward_ad_as_torch(call):
    # ember's fake quantizations gave a straight-through tangent; PyTorch has no forward rule
    def case(t):
        with t.autograd.forward_ad.dual_level():
            call(t, t.autograd.forward_ad.make_dual(t.linspace(-2, 2, 16), t.ones(16)))
    expected = _error(torch, case)
    assert expected is not None and expected[0] == "NotImplementedError"
    assert _error(ember, case) == expected


def _exact_operands(lib):
    """float8 operands and scales whose products and float32 sums are exact (no order noise),
    with results past int8's and e4m3fn's ranges and halves to round."""
    rng = np.random.default_rng(8)
    a = lib.from_numpy(rng.integers(-8, 9, (16, 32)).astype(np.float32)).to(lib.float8_e4m3fn)
    b = lib.from_numpy(rng.integers(-8, 9, (24, 32)).astype(np.float32))
    sa = lib.from_numpy(rng.choice([0.5, 1.0, 2.0, 4.0], (16, 1)).astype(np.float32))
    sb = lib.from_numpy(rng.choice([0.25, 0.5, 1.0], (1, 24)).astype(np.float32))
    return a, b.to(lib.float8_e4m3fn).t(), sa, sb


@pytest.mark.parametrize("case", [
    # int8 results: per tensor rounded half to even and saturated, per row cast as .to (wraps)
    lambda t, a, b, sa, sb: t._scaled_mm(a, b, t.tensor(0.25), t.tensor(1.0), out_dtype=t.int8),
    lambda t, a, b, sa, sb: t._scaled_mm(a, b, sa, sb, out_dtype=t.int8),
    # a per-row e4m3fn result saturates (per tensor it is NaN)
    lambda t, a, b, sa, sb: t._scaled_mm(a, b, sa * 64, sb),
    # per row, any result dtype (PyTorch's decomposition ends in .to)
    lambda t, a, b, sa, sb: t._scaled_mm(a, b, sa, sb, out_dtype=t.float64,
                                         bias=t.full((24,), 0.1, dtype=t.float64)),
    lambda t, a, b, sa, sb: t._scaled_mm(a, b, sa, sb, out_dtype=t.int32),
    lambda t, a, b, sa, sb: t._scaled_mm(a, b, sa, sb, out_dtype=t.bool),
    # per tensor, scales of any dtype are read as one float
    lambda t, a, b, sa, sb: t._scaled_mm(a, b, t.tensor(2), t.tensor([True]),
                                         out_dtype=t.float32),
    lambda t, a, b, sa, sb: t._scaled_mm(a, b, t.tensor(2 + 0j), t.tensor(0.5),
                                         out_dtype=t.bfloat16),
], ids=["int8_tensorwise", "int8_rowwise", "e4m3_rowwise_saturates", "rowwise_float64_bias",
        "rowwise_int32", "rowwise_bool", "int_bool_scales", "complex_scale"])
def test_scaled_mm_result_dtypes_and_scales_are_torchs(case):
    ours = case(ember, *_exact_operands(ember))
    theirs = case(torch, *_exact_operands(torch))
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    np.testing.assert_array_equal(ours.double().numpy(), theirs.double().numpy())


@pytest.mark.parametrize("case", [
    lambda t, a, b, sa, sb: t._scaled_mm(a, b, t.ones(16, 2)[:, :1], sb),    # strided scale_a
    lambda t, a, b, sa, sb: t._scaled_mm(a, b, sa, t.ones(1, 48)[:, ::2]),   # strided scale_b
    lambda t, a, b, sa, sb: t._scaled_mm(a, b, t.tensor(1.0), t.tensor(1.0),
                                         bias=t.ones(24, dtype=t.float64), out_dtype=t.float32),
    lambda t, a, b, sa, sb: t._scaled_mm(a, b, t.tensor(1.0), t.tensor(1.0),
                                         bias=t.ones(24, dtype=t.int8), out_dtype=t.float32),
    lambda t, a, b, sa, sb: t._scaled_mm(a, b, t.tensor(1j), t.tensor(1.0)),
], ids=["strided_scale_a", "strided_scale_b", "float64_bias", "int8_bias", "complex_scale"])
def test_scaled_mm_scale_and_bias_errors_are_torchs(case):
    expected = _error(torch, lambda t: case(t, *_exact_operands(t)))
    assert expected is not None
    assert _error(ember, lambda t: case(t, *_exact_operands(t))) == expected


@pytest.mark.parametrize("kind", ["tensor", "channel"])
def test_learnable_bfloat16_input_backward_is_torchs(kind):
    # PyTorch's backward kernels cast a bfloat16 input (and dY, scale, zero point) to float32;
    # ember refused it as a non-float32 dY
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((4, 6)) * 2).astype(np.float32)
    dy = rng.standard_normal((4, 6)).astype(np.float32)
    outs = []
    for lib in (ember, torch):
        X = lib.from_numpy(x).bfloat16().requires_grad_()
        S = lib.full((6,), 0.3, requires_grad=True)
        Z = lib.tensor([0.5, 1.5, -2.5, 3.0, 0.0, 9.0], requires_grad=True)
        if kind == "tensor":
            y = lib._fake_quantize_learnable_per_tensor_affine(X, S[:1], Z[:1], -8, 7, 0.5)
        else:
            y = lib._fake_quantize_learnable_per_channel_affine(X, S, Z, 1, -8, 7, 0.5)
        y.backward(lib.from_numpy(dy).bfloat16())
        assert str(X.grad.dtype).endswith("bfloat16") and str(S.grad.dtype).endswith("float32")
        outs.append([t.detach().float().numpy() for t in (y, X.grad, S.grad, Z.grad)])
    for ours, theirs in zip(*outs):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


def test_learnable_non_finite_inputs_are_out_of_range():
    # PyTorch casts zp + round(x / scale) to int64 (NaN, infinities and huge values give
    # INT64_MIN): below quant_min. ember counted them as in range (gradient passed through)
    x = np.array([np.inf, -np.inf, np.nan, 1e30, -1e30, 0.5, -0.75, 1.0], np.float32)
    outs = []
    for lib in (ember, torch):
        for kind in ("tensor", "channel"):
            X = lib.from_numpy(x).requires_grad_()
            S, Z = lib.tensor([0.25], requires_grad=True), lib.tensor([1.0], requires_grad=True)
            if kind == "tensor":
                y = lib._fake_quantize_learnable_per_tensor_affine(X, S, Z, -8, 7)
            else:
                y = lib._fake_quantize_learnable_per_channel_affine(X[None], S, Z, 0, -8, 7)
            y.backward(lib.arange(1.0, 9.0).reshape(y.shape))
            outs.append([t.detach().numpy() for t in (y, X.grad, S.grad, Z.grad)])
    for ours, theirs in zip(outs[:2], outs[2:]):
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a, b)
    assert outs[0][1].tolist() == [0, 0, 0, 0, 0, 6, 7, 8]
