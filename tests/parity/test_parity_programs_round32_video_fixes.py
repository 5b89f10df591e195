"""What the round-32 video and protein-structure programs (test_parity_programs_round32_video*.py)
found, pinned against PyTorch: adaptive average pooling of bfloat16/float16 on the CPU rounded
differently from PyTorch's kernels (the 3-D forward summed in float32 where PyTorch sums each
window in the 16-bit dtype and divides by kT, kH, kW in turn, each step rounded: 74% of the
elements of an X3D-style (4, 4, 3) pool differed by an ulp or more; the 2-D and 1-D forwards
multiplied by 1/k where PyTorch divides a float32 sum, missing its exact ties; every backward
summed in float32 where PyTorch adds grad / kT / kH / kW into each window in the 16-bit dtype),
and resize_ grew a tensor's memory with zeros under use_deterministic_algorithms where PyTorch
fills the new elements as empty does (NaN, an integer's max, True), and shrinking a tensor that
owns its memory dropped the rest of that memory (arange(6).resize_(2).resize_(5) read
[0, 1, 0, 0, 0] where PyTorch's storage keeps its 24 bytes and reads [0, 1, 2, 3, 4]); and
logsumexp of bfloat16/float16 rounded once where PyTorch rounds each step (x - max, exp, the
sum, log, + max) to the input's dtype: about one element in 13 was an ulp off."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_RNG = np.random.default_rng(32)
X = (_RNG.standard_normal((2, 4, 6, 9, 10)) * 3).astype(np.float32)

CASES = {   # nd, input shape, output size, memory format
    "3d_x3d_head": (3, (2, 4, 6, 9, 10), (4, 4, 3), None),
    "3d_upsampling": (3, (2, 4, 6, 9, 10), (5, 13, 7), None),
    "3d_none_dims": (3, (2, 4, 6, 9, 10), (None, 2, 1), None),
    "3d_unbatched": (3, (4, 6, 9, 10), (4, 5, 3), None),
    "3d_channels_last": (3, (2, 4, 6, 9, 10), (4, 4, 3), "channels_last_3d"),
    "2d": (2, (2, 4, 9, 10), (4, 3), None),
    "2d_upsampling": (2, (2, 4, 9, 10), (7, 13), None),
    "2d_channels_last": (2, (2, 4, 9, 10), (4, 3), "channels_last"),
    "1d": (1, (2, 4, 10), (3,), None),
}


def _pool(lib, nd, shape, out, fmt, dtype):
    x = lib.from_numpy(X.reshape(-1)[:int(np.prod(shape))].reshape(shape).copy())
    x = x.to(getattr(lib, dtype))
    if fmt:
        x = x.contiguous(memory_format=getattr(lib, fmt))
    x.requires_grad_()
    y = getattr(lib.nn.functional, f"adaptive_avg_pool{nd}d")(x, out)
    go = np.cos(np.arange(y.numel(), dtype=np.float32)).reshape(tuple(y.shape)) * 3
    y.backward(lib.from_numpy(go).to(y.dtype))
    return y, x.grad


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_half_adaptive_avg_pool_rounds_as_pytorch(case, dtype):
    got = _pool(ember, *CASES[case], dtype)
    want = _pool(torch, *CASES[case], dtype)
    for g, w in zip(got, want):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        assert g.stride() == w.stride()
        np.testing.assert_array_equal(g.detach().float().numpy(), w.detach().float().numpy())


def test_half_adaptive_avg_pool3d_double_backward_stays_a_graph():
    def program(lib):
        x = lib.from_numpy(X[:, :, :4, :4, :4].copy()).double().requires_grad_()
        y = lib.nn.functional.adaptive_avg_pool3d(x.to(lib.bfloat16), (3, 3, 2))
        g, = lib.autograd.grad(y.float().pow(2).sum(), x, create_graph=True)
        g.sum().backward()
        return g.detach().numpy(), x.grad.numpy(), type(g.grad_fn).__name__
    got, want = program(ember), program(torch)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-2, atol=1e-2)
    assert got[2] == want[2]


RESIZES = {
    "grow_float": lambda lib: lib.arange(4.0).view(2, 2).resize_(3, 2),
    "grow_int32": lambda lib: lib.zeros(2, dtype=lib.int32).resize_(4),
    "grow_bool": lambda lib: lib.zeros(2, dtype=lib.bool).resize_(4),
    "grow_complex": lambda lib: lib.zeros(2, dtype=lib.complex64).resize_(3),
    "grow_bfloat16": lambda lib: lib.zeros(2, dtype=lib.bfloat16).resize_(3),
    "resize_as": lambda lib: lib.arange(3.0).resize_as_(lib.zeros(5)),
    "within_storage": lambda lib: lib.arange(6.0)[::2].resize_(4),
    "shrink_then_grow": lambda lib: lib.arange(6.0).resize_(2).resize_(5),
    "shrink_then_past": lambda lib: lib.arange(6.0).resize_(2).resize_(7),
}


def test_resize_keeps_a_shrunk_tensors_memory():
    def program(lib):
        t = lib.arange(6.0)
        t.resize_(2)
        nbytes = t.untyped_storage().nbytes()
        t[1:].fill_(9)
        return nbytes, t.resize_(6).tolist(), t.untyped_storage().nbytes()
    assert program(ember) == program(torch)


@pytest.mark.parametrize("name", sorted(RESIZES))
def test_resize_fills_new_memory_under_deterministic_algorithms(name):
    def program(lib):
        lib.use_deterministic_algorithms(True)
        try:
            out = RESIZES[name](lib)
        finally:
            lib.use_deterministic_algorithms(False)
        return str(out.dtype).split(".")[-1], tuple(out.shape), out.to(lib.complex128).numpy()
    got, want = program(ember), program(torch)
    assert got[:2] == want[:2]
    np.testing.assert_array_equal(got[2], want[2])


LSE = {     # dims, keepdim
    "last": (-1, False),
    "two_dims_kept": ((1, 3), True),
    "all": ((0, 1, 2, 3, 4), False),
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("case", sorted(LSE))
def test_half_logsumexp_rounds_each_step_as_pytorch(case, dtype):
    values = X.copy()
    values[0, 0, 0, 0, :3] = np.inf
    values[0, 1, 0, 0, :] = -np.inf
    values[1, 1, 1, 1, 2] = np.nan

    def program(lib):
        x = lib.from_numpy(values).to(getattr(lib, dtype)).requires_grad_()
        y = lib.logsumexp(x, *LSE[case])
        y.float().nan_to_num(0, 0, 0).sum().backward()
        return y.float().detach().numpy(), x.grad.float().numpy()
    for g, w in zip(program(ember), program(torch)):
        np.testing.assert_array_equal(g, w)
