"""``torch.masked``'s reductions and normalizations: same values and gradients as PyTorch."""

import math

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_X = [[1.0, -2.0, 3.0, 0.5], [4.0, 5.0, -6.0, 2.0], [0.0, 1.0, 1.0, -1.0]]
_M = [[True, False, True, True], [False, False, False, False], [True, True, False, True]]

_CALLS = {
    "sum": lambda M, x, m: M.sum(x, 1, mask=m),
    "sum_all_keepdim": lambda M, x, m: M.sum(x, keepdim=True, mask=m),
    "sum_dims": lambda M, x, m: M.sum(x, (0, 1), mask=m),
    "sum_no_mask": lambda M, x, m: M.sum(x, 0),
    "prod": lambda M, x, m: M.prod(x, 1, mask=m),
    "prod_all": lambda M, x, m: M.prod(x, mask=m),
    "amax": lambda M, x, m: M.amax(x, 1, mask=m),
    "amin": lambda M, x, m: M.amin(x, 0, keepdim=True, mask=m),
    "argmax": lambda M, x, m: M.argmax(x, 1, mask=m),
    "argmin": lambda M, x, m: M.argmin(x, 1, mask=m),
    "mean": lambda M, x, m: M.mean(x, 1, mask=m),
    "mean_all": lambda M, x, m: M.mean(x, mask=m),
    "var": lambda M, x, m: M.var(x, 1, mask=m),
    "var_biased": lambda M, x, m: M.var(x, 1, unbiased=False, mask=m),
    "std": lambda M, x, m: M.std(x, 0, correction=0, keepdim=True, mask=m),
    "std_rows": lambda M, x, m: M.std(x, 1, mask=m),
    "var_complex": lambda M, x, m: M.var(x * (1 + 1j), 1, mask=m).real,
    "logsumexp": lambda M, x, m: M.logsumexp(x, 1, mask=m),
    "norm": lambda M, x, m: M.norm(x, 2.0, 1, mask=m),
    "norm_inf": lambda M, x, m: M.norm(x, math.inf, 1, mask=m),
    "norm_1": lambda M, x, m: M.norm(x, 1.0, (0, 1), mask=m),
    "median": lambda M, x, m: M.median(x, 1, mask=m),
    "softmax": lambda M, x, m: M.softmax(x, 1, mask=m),
    "log_softmax": lambda M, x, m: M.log_softmax(x, 1, mask=m),
    "softmin": lambda M, x, m: M.softmin(x, 0, mask=m),
    "normalize": lambda M, x, m: M.normalize(x, 2.0, 1, mask=m),
    "cumsum": lambda M, x, m: M.cumsum(x, 1, mask=m),
    "cumprod": lambda M, x, m: M.cumprod(x, 1, mask=m),
    "row_mask": lambda M, x, m: M.sum(x, 1, mask=m[0]),
    "logaddexp": lambda M, x, m: M.logaddexp(x, x.flip(1), input_mask=m, other_mask=m[0]),
    "dtype": lambda M, x, m: M.sum(x, 1, dtype=x.new_zeros(()).double().dtype, mask=m),
}


def _run(lib, name):
    x = lib.tensor(_X, requires_grad=True)
    out = _CALLS[name](lib.masked, x, lib.tensor(_M))
    if out.dtype.is_floating_point and name not in ("argmax", "argmin"):
        lib.where(lib.isfinite(out), out, lib.zeros(())).sum().backward()
    grad = None if x.grad is None else x.grad.numpy()
    return out.detach().numpy(), str(out.dtype).split(".")[-1], grad


@pytest.mark.parametrize("name", sorted(_CALLS))
def test_masked_matches_torch(name):
    ours, theirs = _run(ember, name), _run(torch, name)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6)
    assert ours[1] == theirs[1]
    if theirs[2] is not None:  # nan where PyTorch's are (var's on fully masked rows)
        np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-6)


def test_integer_inputs():
    for lib in (ember, torch):
        x, m = lib.tensor([[1, 7, 3], [2, 2, 2]]), lib.tensor([[True, False, True]] * 2)
        out = [lib.masked.sum(x, 1, mask=m).tolist(), lib.masked.amax(x, 1, mask=~m).tolist(),
               str(lib.masked.sum(x.int(), 1, mask=m).dtype).split(".")[-1]]
        if lib is ember:
            ours = out
    assert ours == out
    for lib in (ember, torch):
        with pytest.raises(ValueError, match=r"mean\(\): Could not infer output dtype"):
            lib.masked.mean(lib.tensor([1, 2]), 0, mask=lib.tensor([True, False]))
