"""The fused backward ops of tanh, sigmoid, relu and silu against torch's kernels: values bit
for bit (16-bit floats rounded once), node names under create_graph, and a full reduction's
gradient expanded directly."""

import numpy as np
import pytest

import ember
from ember.ops.activations import _threshold_backward
from ember.ops.activations_smooth import _silu_backward
from ember.ops.unary_math import _sigmoid_backward, _tanh_backward

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

KERNELS = {"tanh": (_tanh_backward, "tanh_backward", (-1, 1)),
           "sigmoid": (_sigmoid_backward, "sigmoid_backward", (0, 1)),
           "relu": (lambda g, x: _threshold_backward(g, x, 0),
                    lambda g, x: torch.ops.aten.threshold_backward(g, x, 0), (-1, 1)),
           "silu": (_silu_backward, "silu_backward", (-4, 4))}
EXACT = {"tanh": ("float32", "bfloat16", "float16"),
         "sigmoid": ("float32", "float64", "bfloat16", "float16"),
         "relu": ("float32", "float64", "bfloat16", "float16"),
         "silu": ("bfloat16",)}


def _pair(dtype, low, high):
    rng = np.random.default_rng(0)
    grad = torch.tensor(rng.standard_normal(2000)).to(getattr(torch, dtype))
    x = torch.tensor(rng.uniform(low, high, 2000)).to(getattr(torch, dtype))
    return grad, x


def _ember(t):
    return ember.tensor(t.double().numpy()).to(getattr(ember, str(t.dtype)[6:]))


@pytest.mark.parametrize("name, dtype", [(n, d) for n, ds in EXACT.items() for d in ds])
def test_fused_backward_matches_torch_bit_for_bit(name, dtype):
    ours, theirs, (low, high) = KERNELS[name]
    theirs = getattr(torch.ops.aten, theirs) if isinstance(theirs, str) else theirs
    grad, x = _pair(dtype, low, high)
    expected = theirs(grad, x).double().numpy()
    got = ours(_ember(grad), _ember(x))
    assert got.dtype is getattr(ember, dtype)
    np.testing.assert_array_equal(got.double().numpy(), expected)


def _double_backward_names(lib, fn):
    x = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
    g = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
    (gx,) = lib.autograd.grad(fn(lib)(x), x, g, create_graph=True)
    second = lib.autograd.grad(gx.sum(), (x, g), create_graph=True)
    return ([type(gx.grad_fn).__name__] + [type(t.grad_fn).__name__ for t in second],
            gx.detach().tolist() + [v for t in second for v in t.detach().tolist()])


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "relu", "silu"])
def test_double_backward_nodes_and_values_match_torch(name):
    def fn(lib):
        return lib.nn.functional.silu if name == "silu" else getattr(lib, name)
    names, values = _double_backward_names(ember, fn)
    torch_names, torch_values = _double_backward_names(torch, fn)
    assert names == torch_names
    np.testing.assert_allclose(values, torch_values, rtol=1e-15, atol=1e-15)


def _grad_chain(lib):
    x = lib.ones(3, 4, requires_grad=True)
    g = lib.tensor(2.0, requires_grad=True)
    (gx,) = lib.autograd.grad(x.sum(), x, g, create_graph=True)
    chain, fn = [], gx.grad_fn
    while fn is not None:
        chain.append(type(fn).__name__)
        fn = next((n for n, _ in fn.next_functions if n is not None), None)
    return chain, gx.stride(), gx.detach().tolist()


def test_full_sum_gradient_is_the_expanded_scalar():
    # torch expands the 0-dim gradient as it is (no view to 1x1 first)
    assert _grad_chain(ember) == _grad_chain(torch)
