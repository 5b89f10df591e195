"""What the diffusion programs of round 32 (test_parity_programs_round32_diffusion*.py) found,
pinned against PyTorch.

- float16/bfloat16 ``F.interpolate(mode="bilinear")`` on the CPU differed from PyTorch in up
  to half the elements (one 16-bit ulp each): PyTorch has two kernels. Outputs of at most 128
  rows plus columns (or 3 channels on one thread) and channels-last input with more than 3
  channels take its channels-last kernel: float32 weights, the four taps summed in float32 as
  fused multiply-adds (right-nested in its 16-channel vector blocks, left to right in the
  channels left over), one rounding. The rest take its generic kernel, whose weights are
  rounded to the input's dtype (as its linear and trilinear kernels, which ember already
  followed), now from float32 source coordinates. Left: bfloat16 in the channels-last
  kernel's scalar loop (fewer than 16 channels) still differs by one ulp in ~0.02% of elements
  (no float32 order of the four products tried reproduces it), float16 in the generic one in
  ~0.01%."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

CASES = [((2, 4, 6, 6), (9, 9), False, False), ((2, 4, 6, 6), (9, 9), True, False),
         ((1, 24, 5, 7), (13, 11), False, False), ((2, 4, 16, 12), (7, 5), False, False),
         ((1, 2, 20, 30), (70, 90), False, False), ((1, 3, 20, 30), (70, 90), True, False),
         ((1, 5, 20, 30), (70, 90), False, True), ((1, 3, 20, 30), (70, 90), False, True),
         ((1, 4, 8, 8), (16, 16), False, True), ((1, 4, 64, 64), (128, 128), False, False)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_16_bit_bilinear_is_torchs(dtype, case):
    shape, out, align_corners, channels_last = case
    x = np.random.default_rng(sum(shape) + sum(out)).standard_normal(shape).astype(np.float32)
    res = []
    for lib in (ember, torch):
        t = lib.from_numpy(x).to(getattr(lib, dtype))
        if channels_last:
            t = t.contiguous(memory_format=lib.channels_last)
        y = lib.nn.functional.interpolate(t, size=out, mode="bilinear",
                                          align_corners=align_corners)
        res.append((y.float().numpy(), y.is_contiguous(memory_format=lib.channels_last)))
    (ours, ours_cl), (theirs, theirs_cl) = res
    assert ours_cl == theirs_cl
    differ = ours != theirs
    assert differ.mean() < 2e-3, differ.sum()      # (see the module's docstring)
    # where they differ, by one ulp of the 16-bit dtype at most
    ulp = 2.0 ** (-7 if dtype == "bfloat16" else -10)
    np.testing.assert_allclose(ours, theirs, rtol=ulp, atol=1e-7)


def test_16_bit_bilinear_scale_factor_and_gradient():
    x = np.random.default_rng(7).standard_normal((1, 4, 5, 7)).astype(np.float32)
    g = np.random.default_rng(8).standard_normal((1, 4, 10, 14)).astype(np.float32)
    res = []
    for lib in (ember, torch):
        t = lib.from_numpy(x).half().requires_grad_()
        y = lib.nn.functional.interpolate(t, scale_factor=2, mode="bilinear")
        y.backward(lib.from_numpy(g).half())
        res.append((y.float().detach().numpy(), t.grad.float().numpy(), y.grad_fn.name()))
    np.testing.assert_array_equal(res[0][0], res[1][0])
    np.testing.assert_array_equal(res[0][1], res[1][1])
    assert res[0][2] == res[1][2]
