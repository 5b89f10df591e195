"""Gaps closed in round 22, compared with PyTorch: ``Tensor._backward_hooks`` and
``torch.utils.hooks`` (BackwardHook, RemovableHandle), views of inference tensors,
scaled_dot_product_attention's kernel choice on the CPU, and searchsorted's non-contiguous
warnings for operands it promotes."""

import re
from collections import OrderedDict

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same_result, recorded

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _floats(t):
    return [round(x, 6) for x in t.detach().reshape(-1).tolist()]


# ----- Tensor._backward_hooks ---------------------------------------------------------------

def _backward_hooks_program(lib):
    seen = []
    x = lib.ones(3, requires_grad=True)
    seen.append(x._backward_hooks)
    y = x * 2
    seen.append(y._backward_hooks)
    h = x.register_hook(lambda g: g * 2)
    seen.append((type(x._backward_hooks).__name__, list(x._backward_hooks) == [h.id]))
    h.remove()
    seen.append(dict(x._backward_hooks))            # emptied, not None
    h2 = y.register_hook(lambda g: g * 5)
    seen.append(list(y._backward_hooks) == [h2.id])
    y.sum().backward()
    seen.append(_floats(x.grad))
    z = lib.ones(2, requires_grad=True)             # an assigned dict runs on a leaf ...
    z._backward_hooks = OrderedDict(a=lambda g: g * 10)
    z.sum().backward()
    seen.append(_floats(z.grad))
    z.grad = None
    z._backward_hooks = None                        # ... and None removes them
    seen.append(z._backward_hooks)
    z.sum().backward()
    seen.append(_floats(z.grad))
    w = lib.ones(2, requires_grad=True)
    d = OrderedDict()
    w._backward_hooks = d
    d["k"] = lambda g: g * 3                        # the same dict object, read at backward
    hh = w.register_hook(lambda g: g + 1)           # register_hook adds to it
    seen.append((w._backward_hooks is d, list(d) == ["k", hh.id]))
    w.sum().backward()
    seen.append(_floats(w.grad))
    u = lib.ones(2, requires_grad=True)
    v = u * 3                                       # a non-leaf: assigning changes the attribute
    v._backward_hooks = OrderedDict(q=lambda g: g * 7)      # only; its hooks keep running
    seen.append(list(v._backward_hooks))
    v.sum().backward()
    seen.append(_floats(u.grad))
    v = u * 3
    v.register_hook(lambda g: g * 100)
    v._backward_hooks = None
    u.grad = None
    v.sum().backward()
    seen.append((v._backward_hooks, _floats(u.grad)))
    return seen


def test_backward_hooks_attribute_reads_and_assigns_as_torch():
    assert_same_result(_backward_hooks_program)


def _backward_hook_helper_program(lib):
    """``torch.utils.hooks.BackwardHook`` used by hand, as a module's call does."""
    lib.manual_seed(0)
    lin = lib.nn.Linear(3, 2)
    with lib.no_grad():
        lin.weight.copy_(lib.tensor([[1., 2., 3.], [-1., 0.5, 2.]]))
        lin.bias.fill_(0.5)
    seen = []

    def hook(module, grad_input, grad_output):
        seen.append(("full", type(module).__name__,
                     [None if g is None else _floats(g) for g in grad_input],
                     [_floats(g) for g in grad_output]))

    def pre(module, grad_output):
        seen.append(("pre", [_floats(g) for g in grad_output]))

    bw = lib.utils.hooks.BackwardHook(lin, [hook], [pre])
    x = lib.tensor([[1., 2., 3.], [0., 1., -1.]], requires_grad=True)
    constant = lib.ones(2, 3)
    args = bw.setup_input_hook((x, constant, 5))
    seen.append((type(args).__name__, len(args), args[0].grad_fn.name(), args[1].grad_fn,
                 args[2]))
    out = bw.setup_output_hook(lin(args[0]))
    seen.append(out.grad_fn.name())
    (out * lib.tensor([[1., 2.], [3., 4.]])).sum().backward()
    seen.append(_floats(x.grad))
    bw = lib.utils.hooks.BackwardHook(lin, [hook], [])
    a = bw.setup_input_hook((x,))
    pair = bw.setup_output_hook((lin(a[0]), lin(a[0]) * 2))
    seen.append((type(pair).__name__, [t.grad_fn.name() for t in pair]))
    (pair[0].sum() + pair[1].sum()).backward()
    return seen


def test_backward_hook_helper_wraps_inputs_and_outputs_as_torch():
    assert_same_result(_backward_hook_helper_program)


def _removable_handle_program(lib):
    handle_type = lib.utils.hooks.RemovableHandle
    table, extra = OrderedDict(), OrderedDict()
    h = handle_type(table)
    table[h.id] = 1
    h2 = handle_type(table, extra_dict=extra)
    table[h2.id] = 2
    extra[h2.id] = 3
    seen = [h2.id - h.id, handle_type.next_id == h2.id + 1]
    with h2 as entered:
        seen.append(entered is h2)
    seen.append((list(table.values()), dict(extra)))
    h.remove()
    h.remove()                                      # twice is fine
    seen.append(dict(table))
    h3 = handle_type(table, extra_dict=[extra, OrderedDict()])
    seen.append((len(h3.extra_dict_ref), type(h3.hooks_dict_ref).__name__))
    return seen


def test_removable_handle_as_torch():
    assert_same_result(_removable_handle_program)


# ----- views of inference tensors -----------------------------------------------------------

def _inference_views_program(lib):
    seen = []
    x = lib.arange(6.)
    with lib.inference_mode():
        a = lib.arange(6.)
        views = [a[1:3], a.view(2, 3), a.view(2, 3).t(), a[0], a.narrow(0, 1, 2),
                 a[:1].expand(3), a.unbind()[0], a.view(2, 3).diagonal(), a.detach()]
        for v in views:
            seen.append((v._is_view(), v._base is None, v.is_inference(),
                         v.data_ptr() - a.data_ptr()))
        s = a[1:3]
        s.add_(1)                                   # still writes through to a
        seen.append(a.tolist())
        normal = x[1:3]                             # a view of a normal tensor stays a view
        seen.append((normal._is_view(), normal._base is x, normal.is_inference()))
    outside = a[1:3]
    seen.append((outside._is_view(), outside._base is None, outside.is_inference()))
    try:
        outside.add_(1)
    except RuntimeError as e:
        seen.append(str(e)[:60])
    return seen


def test_views_of_inference_tensors_are_no_views():
    assert_same_result(_inference_views_program)


# ----- scaled_dot_product_attention's CPU kernels -------------------------------------------

_Q = np.random.default_rng(0).standard_normal((3, 2, 3, 4, 8))
_MASK = np.arange(16.).reshape(4, 4) / 10


def _sdpa_case(lib, backends, case):
    from importlib import import_module
    attention = import_module(f"{lib.__name__}.nn.attention")
    F = lib.nn.functional
    q, k, v = (lib.tensor(a) for a in _Q)
    mask = lib.tensor(_MASK)
    kernels = [getattr(attention.SDPBackend, b) for b in backends]

    def call():
        with attention.sdpa_kernel(kernels):
            if case == "grad_mask_causal":
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.requires_grad_(),
                                                     is_causal=True)
            elif case == "grad_mask":
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.requires_grad_())
            elif case == "mask_causal":
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True)
            elif case == "3d":
                out = F.scaled_dot_product_attention(q[0], k[0], v[0])
            elif case == "dropout":
                out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
            else:
                out = F.scaled_dot_product_attention(q[:, :, :0], k, v)
        return (out.grad_fn.name() if out.grad_fn is not None else None,
                list(out.shape), _floats(out)[:6] if case != "dropout" else None)

    def clean(message):
        return re.sub(r" \(Triggered internally at .*\)$", "", message)
    answer, warned = recorded(call, message=clean)
    return answer, [(kind, clean(text)) for kind, text in warned]


@pytest.mark.parametrize("backends", [["FLASH_ATTENTION", "MATH"], ["MATH"],
                                      ["FLASH_ATTENTION"], ["EFFICIENT_ATTENTION"]],
                         ids=lambda b: "+".join(b))
@pytest.mark.parametrize("case", ["grad_mask_causal", "grad_mask", "mask_causal", "3d",
                                  "dropout", "empty"])
def test_sdpa_kernel_choice_on_cpu(backends, case):
    ours, theirs = _sdpa_case(ember, backends, case), _sdpa_case(torch, backends, case)
    assert ours == theirs


def _sdpa_math_double_backward(lib):
    from importlib import import_module
    attention = import_module(f"{lib.__name__}.nn.attention")
    q, k, v = (lib.tensor(a) for a in _Q)
    q.requires_grad_()
    with attention.sdpa_kernel(attention.SDPBackend.MATH):
        out = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    g, = lib.autograd.grad(out.sum(), q, create_graph=True)     # backward outside the block
    g2, = lib.autograd.grad(g.pow(2).sum(), q)
    return out.grad_fn.name(), g2


def test_sdpa_math_kernel_double_backward_outside_the_kernel_block():
    (name, ours), (theirs_name, theirs) = (_sdpa_math_double_backward(ember),
                                           _sdpa_math_double_backward(torch))
    assert name == theirs_name == "UnsafeViewBackward0"
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-9, atol=1e-12)


def _sdpa_double_backward(lib, backends, dtype):
    from importlib import import_module
    attention = import_module(f"{lib.__name__}.nn.attention")
    q, k, v = (lib.tensor(a).to(getattr(lib, dtype)) for a in _Q)
    q.requires_grad_()
    kernels = [getattr(attention.SDPBackend, b) for b in backends]
    with attention.sdpa_kernel(kernels):
        out = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    g, = lib.autograd.grad(out.sum(), q, create_graph=True)
    node = g.grad_fn.name()
    try:
        g2, = lib.autograd.grad(g.pow(2).sum(), q)
    except RuntimeError as e:
        return out.grad_fn.name(), node, str(e)
    return out.grad_fn.name(), node[:3], round(g2.double().sum().item(), 3)


@pytest.mark.parametrize("backends", [["FLASH_ATTENTION", "MATH"], ["FLASH_ATTENTION"],
                                      ["MATH"]], ids="+".join)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sdpa_double_backward_through_the_cpu_kernels(backends, dtype):
    ours = _sdpa_double_backward(ember, backends, dtype)
    theirs = _sdpa_double_backward(torch, backends, dtype)
    if backends == ["MATH"]:        # (the first gradient's node: ember's Mul differs in suffix)
        assert ours[0] == theirs[0] and ours[2] == pytest.approx(theirs[2], rel=1e-4)
    else:
        assert ours == theirs


def test_sdpa_backend_prints_by_name():
    assert str(ember.nn.attention.SDPBackend.MATH) == str(torch.nn.attention.SDPBackend.MATH)
    assert f"{ember.nn.attention.SDPBackend.FLASH_ATTENTION}" == \
        f"{torch.nn.attention.SDPBackend.FLASH_ATTENTION}"


# ----- distributions' samplers under vmap ---------------------------------------------------

_DISTRIBUTIONS = {
    "Beta": lambda D, p: D.Beta(p.abs() + 1, 2.),
    "Dirichlet": lambda D, p: D.Dirichlet(p.abs() + 1),
    "LKJCholesky": lambda D, p: D.LKJCholesky(3, p.abs().sum() + 1),
    "VonMises": lambda D, p: D.VonMises(p, 1.),
    "Multinomial": lambda D, p: D.Multinomial(3, probs=p.abs() + 0.1),
    "Wishart": lambda D, p: D.Wishart(*_WISHART[D]),       # (parameters not batched)
    "Poisson": lambda D, p: D.Poisson(p.abs() + 1),
    "Binomial": lambda D, p: D.Binomial(3, probs=p.sigmoid()),
    "Gamma": lambda D, p: D.Gamma(p.abs() + 1, 1.),
    "Normal": lambda D, p: D.Normal(p, 1.),
}


_WISHART = {}


def _vmapped_sample(lib, name, randomness):
    _WISHART[lib.distributions] = lib.tensor(4.), lib.eye(3)
    lib.manual_seed(0)
    data = lib.tensor(np.random.default_rng(1).standard_normal((2, 3)))

    def draw(p):
        return _DISTRIBUTIONS[name](lib.distributions, p).sample()
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore")
        try:
            out = lib.vmap(draw, randomness=randomness)(data)
        except RuntimeError as e:
            return "RuntimeError", str(e)
    return list(out.shape)


@pytest.mark.parametrize("randomness", ["different", "same", "error"])
@pytest.mark.parametrize("name", list(_DISTRIBUTIONS))
def test_distribution_samples_under_vmap(name, randomness):
    assert _vmapped_sample(ember, name, randomness) == _vmapped_sample(torch, name, randomness)


# ----- searchsorted's non-contiguous warnings -----------------------------------------------

@pytest.fixture
def torch_warns_always():
    old = torch._C._get_warnAlways()
    torch._C._set_warnAlways(True)                  # its once-per-process warnings, every time
    yield
    torch._C._set_warnAlways(old)


def _searchsorted_case(lib, seq_dtype, value_dtype, strided):
    seq = lib.arange(12).to(getattr(lib, seq_dtype)).view(3, 4)[:, ::2]
    values = lib.tensor([[1, 5], [2, 3], [9, 10]]).to(getattr(lib, value_dtype))
    if strided == "values":
        seq = seq.contiguous()
    if strided in ("values", "both"):
        values = values.t().contiguous().t()
    answer, warned = recorded(lambda: lib.searchsorted(seq, values).tolist())
    return answer, [text[:60] for _, text in warned]


@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("int64", "float32"),
                                    ("int32", "int64"), ("float64", "float32"),
                                    ("float32", "float32")], ids="-".join)
@pytest.mark.parametrize("strided", ["sequence", "values", "both"])
def test_searchsorted_warns_of_operands_as_given(torch_warns_always, dtypes, strided):
    ours = _searchsorted_case(ember, *dtypes, strided)
    assert ours == _searchsorted_case(torch, *dtypes, strided)
    assert ours[1]                                  # (the case warns at all)
