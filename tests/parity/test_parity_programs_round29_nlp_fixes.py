"""What the NLP programs of round 29 (test_parity_programs_round29_nlp.py and its _seq and
_global siblings) found, each pinned against PyTorch: DeBERTa's XSoftmax calls
``torch._softmax_backward_data`` in its backward (missing before; now an op with PyTorch's
values, double backward, node name and dtype checks), ``torch._log_softmax_backward_data`` is
reachable from the top-level namespace with the same checks and keeps 0-dim results 0-dim, and
``torch.onnx.is_in_onnx_export()`` (fairseq's and HF's attention guards) answers False."""

import numpy as np
import pytest

import ember
from tests.parity.test_parity_programs_round29_nlp import xsoftmax

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

KERNELS = ["_softmax_backward_data", "_log_softmax_backward_data"]


def _inputs(lib, kernel, dtype=None):
    rng = np.random.default_rng(2975)
    x = rng.standard_normal((3, 5))
    g = lib.from_numpy(rng.standard_normal((3, 5)).astype(np.float32))
    # the same output in both libraries: softmax / log_softmax rows from NumPy
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    y = np.exp(logp) if kernel == "_softmax_backward_data" else logp
    y = lib.from_numpy(y.astype(np.float32))
    if dtype is not None:
        g, y = g.to(getattr(lib, dtype)), y.to(getattr(lib, dtype))
    return g, y


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_backward_data_values_and_double_backward(kernel, dim):
    """Values, the node name, and both gradients of the kernel itself, as PyTorch's."""
    out = {}
    for lib in (ember, torch):
        g, y = _inputs(lib, kernel, "float64")
        g.requires_grad_()
        y.requires_grad_()
        r = getattr(lib, kernel)(g, y, dim, lib.float64)
        h = lib.ones_like(r).cumsum(0)
        out[lib.__name__] = (r, type(r.grad_fn).__name__, *lib.autograd.grad(r, (g, y), h))
    for got, want in zip(out["ember"], out["torch"]):
        if isinstance(want, str):
            assert got == want
        else:
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(),
                                       rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtypes", [("float16", "float32"), ("float64", "float32"),
                                    ("float32", "float64"), ("bfloat16", "float32"),
                                    ("float16", "bfloat16")])
def test_backward_data_result_has_the_gradients_dtype(kernel, dtypes):
    """The result takes grad_output's dtype whatever ``input_dtype`` says (where PyTorch
    accepts the pair)."""
    grad_dtype, input_dtype = dtypes
    got = getattr(ember, kernel)(*_inputs(ember, kernel, grad_dtype), 1,
                                 getattr(ember, input_dtype))
    want = getattr(torch, kernel)(*_inputs(torch, kernel, grad_dtype), 1,
                                  getattr(torch, input_dtype))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", ["half_input_dtype", "double_output", "bad_dim"])
def test_backward_data_errors(kernel, case):
    """float32 gradients with a Half input_dtype, an output of another dtype and an
    out-of-range dim fail as PyTorch's."""
    errors = []
    for lib in (ember, torch):
        g, y = _inputs(lib, kernel)
        args = {"half_input_dtype": (g, y, 1, lib.float16),
                "double_output": (g, y.double(), 1, lib.float32),
                "bad_dim": (g, y, 2, lib.float32)}[case]
        with pytest.raises((RuntimeError, IndexError)) as info:
            getattr(lib, kernel)(*args)
        errors.append((info.type, str(info.value)))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("kernel", KERNELS)
def test_backward_data_zero_dim_stays_zero_dim(kernel):
    """A 0-dim gradient and output give a 0-dim result (not shape (1,))."""
    got = getattr(ember, kernel)(ember.tensor(2.0), ember.tensor(1.0), 0, ember.float32)
    want = getattr(torch, kernel)(torch.tensor(2.0), torch.tensor(1.0), 0, torch.float32)
    assert tuple(got.shape) == tuple(want.shape) == ()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_xsoftmax_function_backward_matches_torch():
    """DeBERTa's XSoftmax: masked_fill with a finfo-min tensor, softmax, masked_fill_ of the
    output, and a backward through ``_softmax_backward_data`` of the saved output."""
    rng = np.random.default_rng(2976)
    scores = rng.standard_normal((2, 2, 4, 4)).astype(np.float32)
    mask = np.array([1, 1, 1, 0], dtype=np.int64)[None, None, None, :] * np.ones((2, 1, 4, 1),
                                                                                 np.int64)
    up = rng.standard_normal((2, 2, 4, 4)).astype(np.float32)
    out = {}
    for lib in (ember, torch):
        XSoftmax = xsoftmax(lib)

        x = lib.from_numpy(scores).requires_grad_()
        y = XSoftmax.apply(x, lib.from_numpy(mask), -1)
        (y * lib.from_numpy(up)).sum().backward()
        out[lib.__name__] = (y.detach().numpy(), x.grad.numpy())
    for got, want in zip(out["ember"], out["torch"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_onnx_export_guard_is_false():
    """``torch.onnx.is_in_onnx_export()`` answers False outside an export, as PyTorch's."""
    assert ember.onnx.is_in_onnx_export() is torch.onnx.is_in_onnx_export() is False
    assert "onnx" in dir(ember)
