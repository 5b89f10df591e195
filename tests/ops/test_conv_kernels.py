"""The convolution kernels' layouts and paths agree: each backward is the forward's adjoint."""

import numpy as np
import pytest

from ember.ops import _conv_chunks as C
from ember.ops import _conv_kernels as K

# (batch, in channels, out channels, size, kernel, stride, pads, dilation, groups): chosen so
# that every input-gradient path runs (flipped convolution, batch-innermost columns, col2im,
# channel-last scatter; test_cases_cover_every_input_gradient_path), and the forward and
# weight gradient run with batch-innermost columns (few output pixels with few channels), as
# one product (few output pixels) and as per-sample products (_FEW_PIXELS or more)
CASES = [
    (3, 4, 4, (7, 6), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),      # flipped
    (3, 2, 5, (9, 8), (3, 2), (2, 1), ((1, 0), (0, 1)), (1, 2), 1),      # batch innermost
    (2, 8, 6, (7, 7), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), 2),      # same, groups
    (2, 6, 12, (6, 6), (5, 5), (1, 1), ((0, 0), (0, 0)), (1, 1), 1),     # same, unit stride
    (2, 4, 4, (8,), (3,), (2,), ((2, 2),), (2,), 4),                     # depthwise 1-d
    (1, 3, 2, (4, 5, 3), (2, 2, 2), (1, 2, 1), ((0, 1), (1, 0), (0, 0)), (1, 1, 2), 1),
    (2, 8, 4, (18, 18), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),    # per-sample products
    (2, 24, 32, (6, 6), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),    # scatter, one product
    (2, 16, 20, (34, 34), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), 1),  # scatter, per sample
    (2, 2, 5, (40, 40), (3, 3), (2, 2), ((1, 1), (0, 1)), (1, 1), 1),    # col2im
    (2, 1, 12, (40, 40), (2, 2), (1, 1), ((0, 0), (0, 0)), (1, 1), 1),  # same, O > K*C
    (3, 8, 8, (5, 5), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 8),      # depthwise 2-d
    (2, 4, 4, (18, 18), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 4),    # same, per sample
    (2, 16, 12, (18, 18), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 2),  # groups, per sample
    (3, 8, 6, (5, 7), (1, 1), (1, 1), ((0, 0), (0, 0)), (1, 1), 1),      # pointwise
    (2, 6, 4, (8, 9), (1, 1), (3, 2), ((0, 0), (0, 0)), (2, 1), 2),      # same, strided
    (2, 4, 8, (6,), (1,), (1,), ((0, 0),), (1,), 4),                     # same, depthwise
    (2, 3, 4, (300,), (3,), (1,), ((2, 1),), (2,), 1),                   # flat columns
    (1, 2, 3, (7, 7, 7), (2, 2, 2), (1, 1, 1), ((1, 0), (0, 1), (1, 1)), (1, 2, 1), 1),
    (2, 6, 6, (17, 15), (3, 3), (2, 2), ((1, 0), (1, 1)), (1, 2), 6),     # depthwise taps
    (3, 3, 3, (100,), (4,), (3,), ((2, 1),), (1,), 3),                   # same, 1-d
]


def test_cases_cover_every_input_gradient_path(monkeypatch):
    used = set()
    for name in ("_unit_stride_input_grad", "_batch_input_grad", "_col2im_input_grad",
                 "_scatter_input_grad", "pointwise_input_grad", "depthwise_input_grad"):
        def spy(*args, _name=name, _f=getattr(K, name)):
            used.add(_name)
            return _f(*args)
        monkeypatch.setattr(K, name, spy)
    rng = np.random.default_rng(0)
    for b, c, o, size, kernel, stride, pads, dilation, groups in CASES:
        out = K.output_size(size, kernel, stride, pads, dilation)
        K.conv_input_grad(np, rng.standard_normal((b, o) + out),
                          rng.standard_normal((o, c // groups) + kernel), size, stride, pads,
                          dilation, groups)
    assert used == {"_unit_stride_input_grad", "_batch_input_grad", "_col2im_input_grad",
                    "_scatter_input_grad", "pointwise_input_grad", "depthwise_input_grad"}


def test_cases_cover_flat_columns(monkeypatch):
    # unit-stride forwards with few channels per pixel or groups take the flattened padded
    # image's columns: 1-d, 2-d with groups (case 13) and 3-d, dilated, unevenly padded
    used, grads = [], []
    flat, flat_grad = K._flat_forward, K._flat_weight_grad
    monkeypatch.setattr(K, "_flat_forward", lambda *a: used.append(a[2].shape) or flat(*a))
    monkeypatch.setattr(K, "_flat_weight_grad",
                        lambda *a: grads.append(a[3]) or flat_grad(*a))
    rng = np.random.default_rng(0)
    for b, c, o, size, kernel, stride, pads, dilation, groups in CASES:
        x = rng.standard_normal((b, c) + size)
        y = K.conv_forward(np, x, rng.standard_normal((o, c // groups) + kernel), stride, pads,
                           dilation, groups)
        K.conv_weight_grad(np, x, y, kernel, stride, pads, dilation, groups)
    assert {len(shape) for shape in used} == {3, 4, 5} and (12, 8, 3, 3) in used
    assert {len(kernel) for kernel in grads} == {1, 2, 3}


@pytest.mark.parametrize("c, o, groups", [(4, 4, 4), (4, 8, 4), (8, 4, 2)])
@pytest.mark.parametrize("b", [1, 4, 8, 9])
def test_weight_grad_takes_the_forwards_layout_whatever_the_batch(monkeypatch, b, c, o, groups):
    # the flattened-image columns are chosen from the channels, never from the batch size
    # (depthwise convolutions, c == o == groups, included: their columns are long runs too)
    used = []
    flat, flat_grad = K._flat_forward, K._flat_weight_grad
    monkeypatch.setattr(K, "_flat_forward", lambda *a: used.append("forward") or flat(*a))
    monkeypatch.setattr(K, "_flat_weight_grad", lambda *a: used.append("weight") or flat_grad(*a))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, c, 18, 18))
    w = rng.standard_normal((o, c // groups, 3, 3))
    args = ((1, 1), ((1, 1), (1, 1)), (1, 1), groups)
    y = K.conv_forward(np, x, w, *args)
    g = rng.standard_normal(y.shape)
    gw = K.conv_weight_grad(np, x, g, (3, 3), *args)
    assert used == ["forward", "weight"]
    assert np.isclose(np.vdot(y, g), np.vdot(w, gw))


@pytest.mark.parametrize("case", [
    (2, 3, 4, (20, 20), (3, 3), (1, 1), ((0, 0), (0, 0)), (1, 1), 1), CASES[14], CASES[15]])
def test_channels_last_inputs_give_the_same_values(case):
    # unpadded inputs reach the flat columns and pointwise products in their own layout
    b, c, o, size, kernel, stride, pads, dilation, groups = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, c) + size)
    w = rng.standard_normal((o, c // groups) + kernel)
    moved = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    x_cl = np.moveaxis(moved, -1, 1)
    y = K.conv_forward(np, x, w, stride, pads, dilation, groups)
    g = rng.standard_normal(y.shape)
    np.testing.assert_allclose(K.conv_forward(np, x_cl, w, stride, pads, dilation, groups), y,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(K.conv_weight_grad(np, x_cl, g, kernel, stride, pads, dilation,
                                                  groups),
                               K.conv_weight_grad(np, x, g, kernel, stride, pads, dilation,
                                                  groups), rtol=1e-12, atol=1e-12)


def test_cases_cover_both_product_layouts():
    pixels = [np.prod(K.output_size(size, kernel, stride, pads, dilation))
              for _, _, _, size, kernel, stride, pads, dilation, _ in CASES]
    assert min(pixels) < K._FEW_PIXELS <= max(pixels)


@pytest.mark.parametrize("b, c, o, size, kernel, stride, pads, dilation, groups", CASES)
def test_backward_kernels_are_adjoints(b, c, o, size, kernel, stride, pads, dilation, groups):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, c) + size)
    w = rng.standard_normal((o, c // groups) + kernel)
    y = K.conv_forward(np, x, w, stride, pads, dilation, groups)
    g = rng.standard_normal(y.shape)
    gx = K.conv_input_grad(np, g, w, size, stride, pads, dilation, groups)
    gw = K.conv_weight_grad(np, x, g, kernel, stride, pads, dilation, groups)
    # <conv(x, w), g> is linear in x and in w: its gradients are exactly these adjoints
    assert np.isclose(np.vdot(y, g), np.vdot(x, gx))
    assert np.isclose(np.vdot(y, g), np.vdot(w, gw))
    # and the forward matches a direct sum over kernel offsets
    xp_ = np.pad(x, ((0, 0), (0, 0)) + pads)
    direct = np.zeros_like(y)
    og, cg = o // groups, c // groups
    for offset in np.ndindex(*kernel):
        window = tuple(slice(j * d, j * d + (p - 1) * s + 1, s)
                       for j, d, p, s in zip(offset, dilation, y.shape[2:], stride))
        patch = xp_[(slice(None), slice(None)) + window]
        for gi in range(groups):
            direct[:, gi * og:(gi + 1) * og] += np.einsum(
                "bc...,oc->bo...", patch[:, gi * cg:(gi + 1) * cg],
                w[(slice(gi * og, (gi + 1) * og), slice(None)) + offset])
    np.testing.assert_allclose(y, direct, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("b, c, o, size, kernel, stride, pads, dilation, groups", CASES)
def test_forward_adds_bias_per_output_channel(b, c, o, size, kernel, stride, pads, dilation,
                                              groups):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((b, c) + size).astype(np.float32)
    w = rng.standard_normal((o, c // groups) + kernel).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    plain = K.conv_forward(np, x, w, stride, pads, dilation, groups)
    biased = K.conv_forward(np, x, w, stride, pads, dilation, groups, bias)
    assert biased.dtype == np.float32 and biased.shape == plain.shape
    np.testing.assert_allclose(biased, plain + bias.reshape((-1,) + (1,) * len(size)),
                               rtol=1e-6, atol=1e-5)


def test_small_batches_run_in_chunks_that_fit_in_cache():
    # under the threads' threshold, still chunks of at most CHUNK_BYTES of columns
    per_sample = 40_000
    assert 64 * per_sample < C.PARALLEL_BYTES
    spans = C.map_samples(np, 64, per_sample, lambda lo, hi: (lo, hi))
    assert len(spans) > 1 and spans[0][0] == 0 and spans[-1][1] == 64
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert all((hi - lo) * per_sample <= C.CHUNK_BYTES for lo, hi in spans)


@pytest.mark.parametrize("case", [CASES[1], CASES[2], CASES[7], CASES[9], CASES[13], CASES[15],
                                  CASES[18], CASES[19]])
def test_chunked_kernels_equal_one_chunk(monkeypatch, case):
    b, c, o, size, kernel, stride, pads, dilation, groups = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, c) + size)
    w = rng.standard_normal((o, c // groups) + kernel)
    g = rng.standard_normal((b, o) + K.output_size(size, kernel, stride, pads, dilation))

    def run():
        return (K.conv_forward(np, x, w, stride, pads, dilation, groups),
                K.conv_input_grad(np, g, w, size, stride, pads, dilation, groups),
                K.conv_weight_grad(np, x, g, kernel, stride, pads, dilation, groups))
    whole = run()
    monkeypatch.setattr(C, "CHUNK_BYTES", 1)       # one sample per chunk
    for chunked, ref in zip(run(), whole):
        np.testing.assert_allclose(chunked, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("rows_a, rows_b", [(6, 25), (25, 6), (4, 4)])
def test_product_nt_is_a_times_b_transposed(rows_a, rows_b):
    # with fewer rows in a the operands swap (faster in OpenBLAS); either way a @ b.mT,
    # row-major for the callers' reshape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, rows_a, 300)).astype(np.float32)
    b = rng.standard_normal((2, rows_b, 300)).astype(np.float32)
    res = K._product_nt(np, a, b)
    assert res.flags.c_contiguous and res.dtype == np.float32
    expected = np.einsum("gmk,gnk->gmn", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(res, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(19, 16, 8, 8), (64, 1, 32, 32), (9, 1024)])
def test_batch_last_copies_aliasing_batches_in_bands(shape):
    # samples spanning a multiple of 4 KiB take the banded copy; it must equal the transpose,
    # including a last band shorter than the others (19 and 9 samples)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    assert K._aliasing_rows(np, x)
    moved = K._batch_last(np, x, ())
    assert moved.flags.c_contiguous
    np.testing.assert_array_equal(moved, x.transpose(tuple(range(1, x.ndim)) + (0,)))


def test_batch_last_leaves_other_batches_to_one_copy():
    assert not K._aliasing_rows(np, np.zeros((64, 6, 12, 12), np.float32))
    assert not K._aliasing_rows(np, np.zeros((8, 1024), np.float32))   # one band only
    assert not K._aliasing_rows(np, np.zeros((64, 1024), np.float32)[:, ::2])


@pytest.mark.parametrize("extra", [(0, 0), (1, 1)])
def test_depthwise_input_grad_adds_bias_and_output_padding(extra):
    # as a transposed convolution's forward: a bias per channel, and rows past the natural
    # size (output padding) that no window reaches hold the bias alone
    rng = np.random.default_rng(2)
    w = rng.standard_normal((5, 1, 3, 3)).astype(np.float32)
    g = rng.standard_normal((2, 5, 7, 6)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    stride, pads, dilation = (2, 2), ((1, 1), (1, 1)), (1, 1)
    size = tuple(2 * (p - 1) - 2 + 3 + e for p, e in zip(g.shape[2:], extra))
    got = K.conv_input_grad(np, g, w, size, stride, pads, dilation, 5, bias)
    assert got.dtype == np.float32 and got.shape == (2, 5) + size
    ref = np.zeros((2, 5) + tuple(s + 2 for s in size))
    for i, j in np.ndindex(3, 3):
        ref[:, :, i:i + 2 * g.shape[2] - 1:2, j:j + 2 * g.shape[3] - 1:2] += (
            g * w[:, 0, i, j].reshape(5, 1, 1))
    ref = ref[:, :, 1:1 + size[0], 1:1 + size[1]] + bias.reshape(5, 1, 1)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
