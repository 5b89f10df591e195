"""Focused parity tests for the differences the round-20 sequence programs
(test_parity_programs_round20_sequence.py) found: weight normalization's torch._weight_norm
(its WeightNormInterfaceBackward0 node, values, gradients and errors), and warnings PyTorch
gives once per process (every time after set_warn_always(True)): stft's missing window before
its return_complex error, rms_norm's weight of another dtype, conv's padding='same'."""

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_close, assert_same_error, recorded

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


# --- weight normalization: torch._weight_norm and its WeightNormInterfaceBackward0 node ----

def _node_names(fn):
    return type(fn).__name__, [type(f).__name__ for f, _ in fn.next_functions if f is not None]


def _weight_norm_module(lib, form, kind, dim):
    module = lib.nn.Linear(3, 4) if kind == "linear" else lib.nn.Conv1d(2, 4, 3)
    if form == "parametrization":
        return lib.nn.utils.parametrizations.weight_norm(module, dim=dim)
    with pytest.warns(FutureWarning):
        return lib.nn.utils.weight_norm(module, dim=dim)


@pytest.mark.parametrize("form", ["parametrization", "hook"])
@pytest.mark.parametrize("kind, dim", [("linear", 0), ("linear", 1), ("linear", -1),
                                       ("linear", None), ("conv", 0), ("conv", 1),
                                       ("conv", 2)])
def test_weight_norm_records_torch_nodes(form, kind, dim):
    """PyTorch computes the weight by torch._weight_norm: its fused kernel (one
    WeightNormInterfaceBackward0 node over g and v) for dim 0 or the last dim, mul and div
    for the others; ember composed every dim from mul and div."""
    names = []
    for lib in (ember, torch):
        module = _weight_norm_module(lib, form, kind, dim)
        module(lib.ones(2, 3) if kind == "linear" else lib.ones(1, 2, 5))
        names.append(_node_names(module.weight.grad_fn))
    assert names[0] == names[1]


def _weight_norm_call(lib, v_shape, g_shape, dim, dtype="float32", g_dtype=None):
    rng = np.random.default_rng(len(v_shape) + dim)
    v = lib.from_numpy(rng.standard_normal(v_shape).astype(np.float32))
    g = lib.from_numpy(rng.standard_normal(g_shape).astype(np.float32))
    v = v.to(getattr(lib, dtype)).requires_grad_()
    g = g.to(getattr(lib, g_dtype or dtype)).requires_grad_()
    w = lib._weight_norm(v, g, dim)
    weights = lib.from_numpy(rng.standard_normal(tuple(w.shape)).astype(np.float32))
    (w * weights.to(w.dtype)).sum().backward()
    return w, v.grad, g.grad, _node_names(w.grad_fn)


@pytest.mark.parametrize("v_shape, g_shape, dim", [
    ((4, 3), (4, 1), 0), ((4, 3), (1, 3), 1), ((4, 3), (1, 1), -1), ((4, 3), (4, 1), -2),
    ((4, 2, 3), (4, 1, 1), 0), ((4, 2, 3), (4,), 0), ((4, 2, 3), (1, 1, 3), 2),
    ((4, 2, 3), (1, 2, 1), 1), ((5,), (5,), 0)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_weight_norm_matches_torch(v_shape, g_shape, dim, dtype):
    """Values and both gradients; 16-bit operands are computed in float32 and rounded once
    by the fused kernel, forward and backward."""
    ours = _weight_norm_call(ember, v_shape, g_shape, dim, dtype)
    theirs = _weight_norm_call(torch, v_shape, g_shape, dim, dtype)
    assert ours[3] == theirs[3]
    low = dtype in ("bfloat16", "float16")
    fused = dim in (0, len(v_shape) - 1)
    # torch's 16-bit mul/div composition rounds its intermediates other than ember's; a 1-D
    # v's gradient is zero, torch's its rounding error (1e-9)
    tol = {"float32": (1e-6, 1e-6), "float64": (1e-12, 1e-12)}.get(dtype, (0, 1e-8) if fused
                                                                     else (1e-2, 1e-3))
    for a, b in zip(ours[:3], theirs[:3]):
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        assert_close(a.float(), b.float(), *tol) if low else assert_close(a, b, *tol)


@pytest.mark.parametrize("v_dtype, g_dtype", [("float32", "float64"), ("float64", "float32"),
                                              ("float16", "float32"), ("float32", "float16")])
def test_weight_norm_mixed_dtypes_as_torch(v_dtype, g_dtype):
    """The fused kernel takes one dtype ("expected scalar type Float but found Double"); the
    mul/div composition (a middle dim) promotes."""
    def fused(lib, v):
        return lib._weight_norm(v, lib.ones(3, 1, dtype=getattr(lib, g_dtype)), 0)
    assert_same_error(fused, lambda lib: lib.ones(3, 4, dtype=getattr(lib, v_dtype)))
    for lib in (ember, torch):
        w = lib._weight_norm(lib.ones(3, 4, 2, dtype=getattr(lib, v_dtype)),
                             lib.ones(1, 4, 1, dtype=getattr(lib, g_dtype)), 1)
        assert str(w.dtype).split(".")[-1] == ("float16" if {v_dtype, g_dtype} == {"float16"}
                                               else max(v_dtype, g_dtype,
                                                        key=lambda n: (n != "float16", n)))


@pytest.mark.parametrize("call", [
    lambda lib, v: lib._weight_norm(v.long(), lib.ones(3, 1, dtype=lib.long), 0),
    lambda lib, v: lib._weight_norm(v.to(lib.complex64), lib.ones(3, 1), 0),
    lambda lib, v: lib._weight_norm(v.to(lib.float8_e4m3fn),
                                    lib.ones(3, 1, dtype=lib.float8_e4m3fn), 0),
    lambda lib, v: lib._weight_norm(v, lib.ones(3, 1), 2),
    lambda lib, v: lib._weight_norm(v, lib.ones(3, 1), -3),
    lambda lib, v: lib._weight_norm(v[0, 0], lib.ones(()), 0),
    lambda lib, v: lib._weight_norm(v[0, 0], lib.ones(()), -1),
    lambda lib, v: lib._weight_norm(v[0, 0], lib.ones(()), 1),
    lambda lib, v: lib._weight_norm(v, lib.ones(3, 1, device="meta"), 0),
], ids=["long", "complex", "float8", "dim_2", "dim_-3", "0d_dim_0", "0d_dim_-1", "0d_dim_1",
        "devices"])
def test_weight_norm_errors_as_torch(call):
    assert_same_error(call, lambda lib: lib.ones(3, 4))


def test_weight_norm_double_backward_is_exact():
    """ember's derivative is written in ember ops, so it differentiates again exactly (torch's
    fused double backward fails this gradgradcheck: it is not matched)."""
    rng = np.random.default_rng(0)
    v = ember.from_numpy(rng.standard_normal((3, 4))).requires_grad_()
    g = ember.from_numpy(rng.standard_normal((3, 1))).requires_grad_()
    for dim in (0, 1):
        gs = g if dim == 0 else ember.from_numpy(rng.standard_normal((1, 4))).requires_grad_()
        assert ember.autograd.gradgradcheck(lambda v, g: ember._weight_norm(v, g, dim), (v, gs))


def test_weight_norm_refuses_g_of_another_size():
    """torch's fused kernel reads past such a g; ember refuses it."""
    with pytest.raises(RuntimeError, match="expected g to have 3 elements"):
        ember._weight_norm(ember.ones(2, 3), ember.ones(2, 1), 1)


# --- warnings PyTorch gives once per process (every time after set_warn_always(True)) ------

def _always_warned(lib, fn):
    lib.set_warn_always(True)
    try:
        return recorded(fn, lib)
    finally:
        lib.set_warn_always(False)


def test_stft_warns_of_missing_window_before_refusing_missing_return_complex():
    def call(lib):
        return lib.stft(lib.ones(40), 8)
    ours, theirs = _always_warned(ember, call), _always_warned(torch, call)
    assert ours[0] == theirs[0] and ours[0][0] == "RuntimeError"
    # (torch's text, "torch." kept, without its "(Triggered internally at ...)")
    assert ours[1] == [(c, m.split(" (Triggered internally")[0]) for c, m in theirs[1]]
    assert len(ours[1]) == 1


def test_stft_istft_warnings_repeat_under_set_warn_always():
    def calls(lib):
        x = lib.ones(40)
        for _ in range(2):
            lib.stft(x, 8, return_complex=False)
            spec = lib.stft(x, 8, window=lib.hann_window(8), return_complex=True)
            lib.istft(spec, 8)
            lib.istft(spec, 8, window=lib.hann_window(8), length=60)
    ours, theirs = _always_warned(ember, calls), _always_warned(torch, calls)
    # torch's C++ warnings end with "(Triggered internally at ...)"
    assert ours[1] == [(c, m.split(" (Triggered internally")[0]) for c, m in theirs[1]]
    assert len(ours[1]) == 8


@pytest.mark.parametrize("x_dtype, w_dtype", [("bfloat16", "float32"), ("float16", "float32"),
                                              ("float32", "float64"), ("float64", "float32"),
                                              ("float32", "bfloat16"), ("float32", None)])
def test_rms_norm_warns_of_a_weight_of_another_dtype(x_dtype, w_dtype):
    """Mixed-precision RMSNorm (bfloat16 activations, a float32 weight): PyTorch warns that its
    fused kernel cannot take the pair, naming the dtypes as C++ types."""
    def call(lib):
        x = lib.arange(8.).reshape(2, 4).to(getattr(lib, x_dtype))
        w = None if w_dtype is None else lib.linspace(0.5, 2, 4).to(getattr(lib, w_dtype))
        out = lib.nn.functional.rms_norm(x, (4,), w, 1e-6)
        return str(out.dtype).split(".")[-1], out.double().tolist()
    ours, theirs = _always_warned(ember, call), _always_warned(torch, call)
    assert ours[0][0] == theirs[0][0]
    np.testing.assert_allclose(ours[0][1], theirs[0][1], rtol=1e-2 if "16" in x_dtype else 1e-6)
    assert ours[1] == [(c, m.split(" (Triggered internally")[0]) for c, m in theirs[1]]
    assert len(ours[1]) == (w_dtype is not None)


def test_conv_same_padding_warning_repeats_under_set_warn_always():
    def calls(lib):
        for _ in range(2):
            lib.nn.functional.conv1d(lib.ones(1, 2, 7), lib.ones(3, 2, 4), padding="same")
    ours, theirs = _always_warned(ember, calls), _always_warned(torch, calls)
    assert ours[1] == [(c, m.split(" (Triggered internally")[0]) for c, m in theirs[1]]
    assert len(ours[1]) == 2
