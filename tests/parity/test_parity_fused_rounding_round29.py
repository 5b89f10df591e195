"""Round 29 parity: lerp gives PyTorch's CPU bits (its kernel fuses the multiply-add) for
float32 and, through float32, for float16 and bfloat16, and addcdiv (not fused) too; the
foreach lerp likewise. (addcmul and add/sub with ``alpha`` are fused in PyTorch too, but
fusing them in NumPy costs 1.6-1.8x, Adam's step 1.8x: ember rounds twice there.)"""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

DTYPES = ["float32", "bfloat16", "float16"]


def _inputs(n=4096, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(np.float32) for _ in range(3)]


def _same(e, t):
    np.testing.assert_array_equal(e.detach().float().numpy().view(np.int32),
                                  t.detach().float().numpy().view(np.int32))


CASES = {
    "lerp_0.3": lambda m, a, b, c: m.lerp(a, b, 0.3),
    "lerp_0.7": lambda m, a, b, c: m.lerp(a, b, 0.7),
    "lerp_0.999": lambda m, a, b, c: m.lerp(a, b, 0.999),
    "lerp_tensor": lambda m, a, b, c: m.lerp(a, b, c.abs() % 1),
    "lerp_": lambda m, a, b, c: a.clone().lerp_(b, 0.01),
    "addcdiv_0.3": lambda m, a, b, c: m.addcdiv(a, b, c, value=0.3),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_rounding(case, dtype):
    xs = _inputs()
    e = CASES[case](ember, *[ember.tensor(x, dtype=getattr(ember, dtype)) for x in xs])
    t = CASES[case](torch, *[torch.tensor(x, dtype=getattr(torch, dtype)) for x in xs])
    assert e.dtype == getattr(ember, dtype)
    _same(e, t)


@pytest.mark.parametrize("n", [1, 5, 17])
def test_float32_small_and_tail(n):
    xs = _inputs(n, seed=n)
    for case in ("lerp_0.3", "lerp_tensor", "addcdiv_0.3"):
        _same(CASES[case](ember, *map(ember.tensor, xs)),
              CASES[case](torch, *map(torch.tensor, xs)))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_foreach(dtype):
    sizes = (64, 4096, 32)
    a = [np.random.default_rng(i).standard_normal(n).astype(np.float32)
         for i, n in enumerate(sizes)]
    b = [np.random.default_rng(9 + i).standard_normal(n).astype(np.float32)
         for i, n in enumerate(sizes)]
    out = {}
    for m in (ember, torch):
        A = [m.tensor(x, dtype=getattr(m, dtype)) for x in a]
        B = [m.tensor(x, dtype=getattr(m, dtype)) for x in b]
        lerped = [t.clone() for t in A]
        m._foreach_lerp_(lerped, B, 0.01)
        out[m] = lerped
    for e, t in zip(out[ember], out[torch]):
        _same(e, t)
