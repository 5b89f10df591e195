"""What the LLM-inference programs of round 28 (test_parity_programs_round28_llm_infer.py) found,
each pinned against PyTorch: the float8 CPU kernels PyTorch has (abs, mul of two tensors, eq/ne,
cat, stack, where), gradients through them included, work and the ones it lacks raise its
error, naming its kernel (add_stub, sign_cpu, sqrt_vml_cpu, mul_cpu_reduced_float for a
number, index_copy_cpu); a float8_e4m3fn product beyond the range saturates to +-448
instead of becoming NaN; and views of float8_e5m2 tensors (expand, unfold, as_strided,
diagonal, None indexing) keep their dtype instead of failing in NumPy's as_strided."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

VALUES = [1.0, -2.0, 0.5, 300.0, -448.0, 0.013, 57344.0, 0.0]


def _f8(lib, name, values=VALUES):
    return lib.tensor(values).to(getattr(lib, name))


def _outcome(fn):
    """fn()'s value as (dtype name, float values), or (error type, message)."""
    try:
        out = fn()
    except Exception as e:          # noqa: BLE001 - the error is the result compared
        return type(e).__name__, str(e)
    return str(out.dtype).split(".")[-1], np.asarray(out.float().tolist())


def _same(ours, theirs):
    assert ours[0] == theirs[0]
    if isinstance(theirs[1], str):
        assert ours[1] == theirs[1]
    else:
        np.testing.assert_array_equal(ours[1], theirs[1])


FLOAT8_CALLS = {
    "abs": lambda lib, a, b: a.abs(),
    "mul": lambda lib, a, b: a * b,
    "mul_": lambda lib, a, b: a.clone().mul_(b),
    "mul_number": lambda lib, a, b: a * 2.0,
    "mul_0dim": lambda lib, a, b: a * lib.tensor(2.0),
    "mul_0dim_other": lambda lib, a, b: a * b[1],
    "mul_0dim_self": lambda lib, a, b: a[1] * b,
    "abs_0dim": lambda lib, a, b: a[3].abs(),
    "mul_0dim_both": lambda lib, a, b: a[3] * b[3],
    "eq": lambda lib, a, b: a == b,
    "ne_number": lambda lib, a, b: a != 1.0,
    "cat": lambda lib, a, b: lib.cat([a, b]),
    "stack": lambda lib, a, b: lib.stack([a, b]),
    "where": lambda lib, a, b: lib.where(a.float() > 0, a, b),
    "add": lambda lib, a, b: a + b,
    "neg": lambda lib, a, b: -a,
    "sub": lambda lib, a, b: a - b,
    "sgn": lambda lib, a, b: a.sgn(),
    "sqrt": lambda lib, a, b: a.sqrt(),
    "square": lambda lib, a, b: a.square(),
    "clamp": lambda lib, a, b: a.clamp(-1.0, 1.0),
    "relu": lambda lib, a, b: lib.relu(a),
    "nan_to_num": lambda lib, a, b: a.nan_to_num(),
    "index_copy_": lambda lib, a, b: a.clone().index_copy_(0, lib.tensor([1, 0]), b[:2]),
}


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("call", sorted(FLOAT8_CALLS))
def test_float8_kernels_like_torch(call, dtype):
    fn = FLOAT8_CALLS[call]

    def run(lib):
        a, b = _f8(lib, dtype), _f8(lib, dtype, VALUES[::-1])
        return _outcome(lambda: fn(lib, a, b))
    _same(run(ember), run(torch))


def test_float8_gradients_like_torch():
    def grad(lib, loss_of):
        p = lib.tensor([1.0, -3.0, 500.0], requires_grad=True)
        try:
            loss_of(lib, p).backward()
        except NotImplementedError as e:
            return str(e)
        return p.grad.tolist()

    cases = [
        lambda lib, p: (p.to(lib.float8_e4m3fn) * p.to(lib.float8_e4m3fn)).float().sum(),
        # one float8 tensor used twice: its gradients meet in a float8 add, which PyTorch lacks
        lambda lib, p: (lambda e: (e * e).float().sum())(p.to(lib.float8_e4m3fn)),
        lambda lib, p: (lib.cat([p.to(lib.float8_e5m2)] * 2).float()
                        * lib.tensor([1.0, 2, 3, 4, 5, 6])).sum(),
        lambda lib, p: p.to(lib.float8_e5m2).abs().float().sum(),
    ]
    for case in cases:
        assert grad(ember, case) == grad(torch, case)


def test_float8_e4m3fn_product_saturates_like_torch():
    def square(lib):
        a = _f8(lib, "float8_e4m3fn", [448.0, 300.0, -448.0, float("nan"), 20.0])
        out = a * a
        return out.view(lib.uint8).tolist(), out.float().tolist()
    ours, theirs = square(ember), square(torch)
    assert ours[0] == theirs[0]
    np.testing.assert_array_equal(ours[1], theirs[1])


E5M2_VIEWS = {
    "expand_reshape": lambda t: t[:, None].expand(2, 3, 4).reshape(6, 4),
    "unfold": lambda t: t.unfold(1, 2, 1),
    "as_strided": lambda t: t.as_strided((3, 2), (1, 2), 1),
    "diagonal": lambda t: t.diagonal(),
    "none_index": lambda t: t[None, :, None],
}


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("view", sorted(E5M2_VIEWS))
def test_float8_views_keep_their_dtype_like_torch(view, dtype):
    def run(lib):
        t = lib.tensor([[1.0, -2.0, 0.5, 3.0], [4.0, 0.25, -8.0, 6.0]]).to(getattr(lib, dtype))
        out = E5M2_VIEWS[view](t)
        return str(out.dtype).split(".")[-1], list(out.shape), out.contiguous().view(
            lib.uint8).tolist()
    assert run(ember) == run(torch)
