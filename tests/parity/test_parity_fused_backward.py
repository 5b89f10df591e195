"""The fused backward ops of the activations against torch's kernels: values bit for bit
(16-bit floats rounded once), node names under create_graph, the in-place variants that
compute their gradient from the result, and a full reduction's gradient expanded directly."""

import numpy as np
import pytest

import ember
from ember.ops import activations as act
from ember.ops import activations_smooth as smooth
from ember.ops.activations import _threshold_backward
from ember.ops.activations_smooth import _silu_backward
from ember.ops.unary_math import _sigmoid_backward, _tanh_backward

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

KERNELS = {"tanh": (_tanh_backward, "tanh_backward", (-1, 1)),
           "sigmoid": (_sigmoid_backward, "sigmoid_backward", (0, 1)),
           "relu": (lambda g, x: _threshold_backward(g, x, 0),
                    lambda g, x: torch.ops.aten.threshold_backward(g, x, 0), (-1, 1)),
           "silu": (_silu_backward, "silu_backward", (-4, 4)),
           "leaky_relu": (lambda g, x: act._leaky_relu_backward(g, x, 0.1, False),
                          lambda g, x: torch.ops.aten.leaky_relu_backward(g, x, 0.1, False),
                          (-2, 2)),
           "hardtanh": (lambda g, x: act._hardtanh_backward(g, x, -0.3, 0.7),
                        lambda g, x: torch.ops.aten.hardtanh_backward(g, x, -0.3, 0.7), (-2, 2)),
           "threshold": (lambda g, x: _threshold_backward(g, x, 0.3),
                         lambda g, x: torch.ops.aten.threshold_backward(g, x, 0.3), (-2, 2)),
           "softshrink": (lambda g, x: act._softshrink_backward(g, x, 0.3),
                          lambda g, x: torch.ops.aten.softshrink_backward(g, x, 0.3), (-2, 2)),
           "hardsigmoid": (act._hardsigmoid_backward, "hardsigmoid_backward", (-4, 4)),
           "hardswish": (act._hardswish_backward, "hardswish_backward", (-4, 4)),
           "elu": (lambda g, x: smooth._elu_backward(g, 1.3, 1.0, 0.5, False, x),
                   lambda g, x: torch.ops.aten.elu_backward(g, 1.3, 1.0, 0.5, False, x), (-4, 4)),
           "elu_result": (lambda g, x: smooth._elu_backward(g, 1.3, 1.2, 0.5, True, x),
                          lambda g, x: torch.ops.aten.elu_backward(g, 1.3, 1.2, 0.5, True, x),
                          (-1.5, 4)),
           "softplus": (lambda g, x: smooth._softplus_backward(g, x, 2.0, 5.0),
                        lambda g, x: torch.ops.aten.softplus_backward(g, x, 2.0, 5.0), (-8, 8)),
           "logsigmoid": (smooth._log_sigmoid_backward, lambda g, x: torch.ops.aten.
                          log_sigmoid_backward(g, x, torch.ops.aten.log_sigmoid_forward(x)[1]),
                          (-20, 20)),
           "mish": (smooth._mish_backward, "mish_backward", (-8, 8))}
ALL = ("float32", "float64", "bfloat16", "float16")
EXACT = {"tanh": ("float32", "bfloat16", "float16"), "sigmoid": ALL, "relu": ALL,
         "silu": ("bfloat16",), "leaky_relu": ALL, "hardtanh": ALL, "threshold": ALL,
         "softshrink": ALL, "hardsigmoid": ALL, "hardswish": ALL, "elu_result": ALL,
         # exp differs from torch's by an ulp in float32 and float64
         "elu": ("bfloat16", "float16"), "softplus": ("bfloat16", "float16"),
         "logsigmoid": ("bfloat16", "float16"), "mish": ("bfloat16", "float16")}


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


ACTIVATIONS = {"leaky_relu": (0.1,), "hardtanh": (-0.7, 1.5), "relu6": (), "elu": (1.5,),
               "selu": (), "celu": (1.5,), "softplus": (2.0, 3.0), "hardswish": (),
               "logsigmoid": (), "softshrink": (0.7,), "hardshrink": (0.7,),
               "threshold": (0.7, 2.0), "mish": ()}


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "relu", "silu", *ACTIVATIONS])
def test_double_backward_nodes_and_values_match_torch(name):
    def fn(lib):
        if name in ACTIVATIONS:
            return lambda x: getattr(lib.nn.functional, name)(x, *ACTIVATIONS[name])
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


def _mean_gradient_node(lib):
    x = lib.ones(5, requires_grad=True)
    (gx,) = lib.autograd.grad(x.mean(), x, lib.tensor(1.0, requires_grad=True),
                              create_graph=True)
    return type(gx.grad_fn).__name__, gx.tolist()


def test_mean_gradient_divides_by_a_scalar_as_torch():
    assert _mean_gradient_node(ember) == _mean_gradient_node(torch)
    assert _mean_gradient_node(ember)[0] == "DivBackward1"


INPLACE = {"leaky_relu": lambda F, x, a: F.leaky_relu(x, a, inplace=True),
           "elu": lambda F, x, a: F.elu(x, a, inplace=True),
           "celu": lambda F, x, a: F.celu(x, a, inplace=True),
           "selu": lambda F, x, a: F.selu(x, inplace=True)}


def _inplace_run(lib, name, alpha, modify):
    x = lib.tensor([-1.0, 2.0, -0.5], dtype=lib.float64, requires_grad=True)
    y = INPLACE[name](lib.nn.functional, x * 1, alpha)
    node = type(y.grad_fn).__name__
    if modify:
        y.mul_(2)
    try:
        y.sum().backward()
    except RuntimeError as e:
        return node, str(e).replace("torch.", "").replace("ember.", "")
    return node, x.grad.tolist()


@pytest.mark.parametrize("name", list(INPLACE))
@pytest.mark.parametrize("alpha, modify", [(0.3, False), (-0.5, False), (0.3, True)])
def test_inplace_variants_compute_the_gradient_from_the_result(name, alpha, modify):
    # torch saves the result (no copy of the input): a negative slope cannot be inverted and
    # changing the result afterwards is caught at backward
    (node, got), (torch_node, expected) = (_inplace_run(lib, name, alpha, modify)
                                           for lib in (ember, torch))
    assert node == torch_node
    if isinstance(expected, list):
        np.testing.assert_allclose(got, expected, rtol=1e-15)
    else:
        assert got == expected


def _modified_output_error(lib, make):
    x = lib.tensor([-1.0, 2.0, -0.5], requires_grad=True)
    y = make(lib, x * 1)
    y.add_(1)
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    return str(info.value).replace("torch.", "").replace("ember.", "")


OVERLOADED_NODES = {"rrelu": lambda lib, y: lib.nn.functional.rrelu(y, training=False,
                                                                     inplace=True),
                    "exp2": lambda lib, y: y.exp2(), "relu_": lambda lib, y: lib.relu_(y)}


@pytest.mark.parametrize("name", list(OVERLOADED_NODES))
def test_version_error_names_the_op_with_its_overload_number(name):
    # torch drops "Backward" and an overload number 0 only: RreluWithNoise1, Exp2, Relu
    make = OVERLOADED_NODES[name]
    assert _modified_output_error(ember, make) == _modified_output_error(torch, make)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("threshold", [0, 0.5])
def test_threshold_backward_keeps_the_gradient_bits(dtype, threshold):
    # dropped negative, infinite and NaN gradients give +0; kept ones (and NaN inputs) pass as
    # they are, -0 included
    grad = [-1.0, float("inf"), float("nan"), 2.0, -3.0, -0.0, 1e-30, -0.0]
    x = [-1.0, -1.0, -2.0, float("nan"), 0.0, 1.0, 5.0, -1.0]

    def bits(lib, kernel):
        g = lib.tensor(grad, dtype=getattr(lib, dtype))
        out = kernel(g, lib.tensor(x, dtype=getattr(lib, dtype)), threshold)
        return out.view(lib.int16 if out.element_size() == 2 else
                        getattr(lib, f"int{8 * out.element_size()}")).tolist()
    assert bits(ember, _threshold_backward) == bits(torch, torch.ops.aten.threshold_backward)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_glu_backward_matches_torch_kernel(dtype):
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.uniform(-6, 6, (50, 40))).to(getattr(torch, dtype))
    grad = torch.tensor(rng.standard_normal((25, 40))).to(getattr(torch, dtype))
    expected = torch.ops.aten.glu_backward(grad, x, 0).double().numpy()
    got = smooth._glu_backward(_ember(grad), _ember(x), 0)
    assert got.dtype is getattr(ember, dtype)
    # (float32: scipy's expit and torch's sigmoid differ by an ulp now and then)
    rtol = 3e-7 if dtype == "float32" else 0
    np.testing.assert_allclose(got.double().numpy(), expected, rtol=rtol, atol=0)


def _chain(fn):
    if fn is None:
        return [None]
    return [type(fn).__name__] + [name for n, _ in fn.next_functions for name in _chain(n)]


def _fused_double_backward(lib, name):
    x = lib.tensor(np.linspace(-2, 2, 24).reshape(2, 4, 3), requires_grad=True)
    w = lib.tensor([0.25, -0.5, 0.1, 2.0], dtype=lib.float64, requires_grad=True)
    F = lib.nn.functional
    y = F.glu(x, 1) if name == "glu" else F.prelu(x, w)
    g = lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)), requires_grad=True)
    grads = lib.autograd.grad(y, (x, w) if name == "prelu" else (x,), g, create_graph=True)
    u = lib.tensor(np.sin(np.arange(24.0)).reshape(2, 4, 3))
    z = (grads[0] * u).sum() + sum((t * t).sum() for t in grads[1:])
    second = lib.autograd.grad(z, (x, g, w) if name == "prelu" else (x, g))
    return ([_chain(t.grad_fn) for t in grads],
            [v for t in grads + second for v in t.detach().reshape(-1).tolist()])


@pytest.mark.parametrize("name", ["glu", "prelu"])
def test_glu_and_prelu_double_backward_use_torchs_fused_nodes(name):
    # GluBackwardBackward0 and PreluKernelBackwardBackward0, not a composite's last node
    chains, values = _fused_double_backward(ember, name)
    torch_chains, torch_values = _fused_double_backward(torch, name)
    assert chains == torch_chains
    np.testing.assert_allclose(values, torch_values, rtol=1e-13, atol=1e-15)


_UNTAKEN_INF_CASES = [("leaky_relu", (0.1,)), ("hardtanh", ()), ("relu6", ()),
                      ("hardshrink", ()), ("softshrink", ()), ("hardsigmoid", ()),
                      ("hardswish", ()), ("elu", ()), ("selu", ()), ("celu", (1.5,)),
                      ("softplus", ()), ("logsigmoid", ()), ("mish", ()), ("relu", ()),
                      ("threshold", (0.1, 2.0)), ("silu", ())]


@pytest.mark.parametrize("name, args", _UNTAKEN_INF_CASES, ids=[c[0] for c in _UNTAKEN_INF_CASES])
def test_infinite_and_nan_gradients_pass_only_where_the_branch_takes_them(name, args):
    """The fused kernels choose a branch as torch's ternaries do: an infinite or NaN
    gradient in the branch not taken gives +0, not NaN (a product with a mask gave NaN)."""
    results = []
    for lib in (ember, torch):
        x = lib.tensor([-5.0, -0.5, 0.0, 0.5, 5.0], requires_grad=True)
        y = getattr(lib.nn.functional, name)(x, *args)
        y.backward(lib.tensor([np.inf, np.nan, -np.inf, np.inf, np.nan]))
        results.append(x.grad.numpy())
    np.testing.assert_array_equal(np.signbit(results[0]), np.signbit(results[1]))
    np.testing.assert_array_equal(results[0], results[1])       # NaNs compare equal here


def test_softplus_gradient_above_the_threshold_is_the_incoming_one_at_infinity():
    results = []
    for lib in (ember, torch):
        x = lib.tensor([np.inf, 2.0], requires_grad=True)
        lib.nn.functional.softplus(x, beta=3, threshold=1e30).backward(lib.tensor([1.0, 1.0]))
        results.append(x.grad.numpy())
    np.testing.assert_array_equal(results[0], results[1])
