"""Round 35 leftovers (values and messages as PyTorch 2.13's): the graph nodes that end a
``differentiable=True`` optimizer step, learnable learning rates refused where PyTorch passes
the rate as a Python scalar, scatter's reduce overloads (no derivative), refusals of
float8/uint16/32/64 at PyTorch's points (masked_fill, the logical ops, conj_physical's out=,
the in-place samplers), linalg.multi_dot's argument parsing, and no Tensor.cat."""

import warnings

import pytest

import ember
from ember.autograd import forward_ad as fwAD


def _node_chain(t, depth=3):
    names, fn = [], t.grad_fn
    while fn is not None and len(names) < depth:
        names.append(type(fn).__name__)
        nxt = [f for f, _ in fn.next_functions if f is not None]
        fn = nxt[0] if nxt else None
    return "/".join(names)


def _two_steps(name, lr=0.1, **options):
    w0 = ember.tensor([[0.3, -0.7], [1.2, 0.4]], dtype=ember.float64, requires_grad=True)
    x = ember.tensor([[1.0, 2.0], [-1.0, 0.5], [0.3, 0.3]], dtype=ember.float64)
    w = w0.clone()
    opt = getattr(ember.optim, name)([w], lr=lr, differentiable=True, **options)
    chains = []
    for _ in range(2):
        loss = (ember.tanh(x @ w) ** 2).sum()
        w.grad, = ember.autograd.grad(loss, w, create_graph=True)
        opt.step()
        chains.append(_node_chain(w))
    outer = (x @ w).sum() ** 2
    return chains, outer, w0


# (second step's node chain, outer loss, gradient to w0), from PyTorch 2.13
STEPS = {
    "SGD": ({}, "AddBackward0/AddBackward0/CloneBackward0", 14.568277981615,
            [4.882073751804, -7.608942883669, 21.287340709206, 3.893822473263]),
    "SGD-nesterov": ({"momentum": 0.9, "nesterov": True},
                     "AddBackward0/AddBackward0/CloneBackward0", 10.510716111529,
                     [5.389397991416, -6.505240255195, 18.178636235944, 3.190922769016]),
    "Adadelta": ({"lr": 0.5}, "AddBackward0/AddBackward0/CloneBackward0", 18.870380740991,
                 [2.606462823206, 2.60539564954, 24.32646817854, 24.324549283257]),
    "NAdam": ({"lr": 0.01}, "AddcdivBackward0/AddcdivBackward0/AddcdivBackward0",
              18.221531254471, [2.562553242268, 2.529446332992, 23.905976151982,
                                23.844990831088]),
    "RAdam": ({"lr": 0.01}, "AddBackward0/AddBackward0/CloneBackward0", None, None),
    "ASGD": ({"lr": 0.01}, "AddBackward0/MulBackward0/AddBackward0", 18.462524837323,
             [2.870277936102, 0.534456159853, 24.03886823559, 20.308813412896]),
}


@pytest.mark.parametrize("case", sorted(STEPS))
def test_differentiable_step_ends_in_pytorchs_node(case):
    options, chain, outer_value, grad = STEPS[case]
    options = dict(options)
    lr = options.pop("lr", 0.1)
    chains, outer, w0 = _two_steps(case.split("-")[0], lr=lr, **options)
    assert chains[1] == chain
    if outer_value is not None:
        g, = ember.autograd.grad(outer, w0)
        assert outer.item() == pytest.approx(outer_value, rel=1e-11)
        assert g.flatten().tolist() == pytest.approx(grad, rel=1e-10)


def test_learnable_lr_in_sgd_is_an_addcmul_and_gets_its_gradient():
    lr = ember.tensor(0.1, dtype=ember.float64, requires_grad=True)
    chains, outer, w0 = _two_steps("SGD", lr=lr)
    assert chains == ["AddcmulBackward0/CloneBackward0/AccumulateGrad",
                      "AddcmulBackward0/AddcmulBackward0/CloneBackward0"]
    g_w0, g_lr = ember.autograd.grad(outer, (w0, lr))
    assert g_lr.item() == pytest.approx(-33.770428870462, rel=1e-10)


@pytest.mark.parametrize("name,message,state_keys", [
    ("Adadelta", "add_(): argument 'alpha' must be Number, not Tensor",
     {"step", "square_avg", "acc_delta"}),
    ("Adamax", "addcdiv_(): argument 'value' must be Number, not Tensor",
     {"step", "exp_avg", "exp_inf"}),
    ("Adagrad", "addcdiv_(): argument 'value' must be Number, not Tensor", {"step", "sum"}),
    ("RMSprop", "addcdiv_(): argument 'value' must be Number, not Tensor",
     {"step", "square_avg"}),
    ("Rprop", "full_like(): argument 'fill_value' (position 2) must be Number, not Tensor",
     {"step", "prev"}),
])
def test_learnable_lr_refused_where_pytorch_takes_a_number(name, message, state_keys):
    # (even for a leaf parameter: the argument's parsing comes before the in-place checks)
    w = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    lr = ember.tensor(0.01, dtype=ember.float64, requires_grad=True)
    opt = getattr(ember.optim, name)([w], lr=lr, differentiable=True)
    w.grad = ember.tensor([0.5, -1.0], dtype=ember.float64)
    with pytest.raises(TypeError) as info:
        opt.step()
    assert str(info.value) == message
    assert set(opt.state[w]) == state_keys


def test_rprop_refuses_a_learnable_lr_even_without_differentiable():
    w = ember.tensor([1.0, 2.0], requires_grad=True)
    opt = ember.optim.Rprop([w], lr=ember.tensor(0.01, requires_grad=True))
    w.grad = ember.ones(2)
    with pytest.raises(TypeError, match="full_like"):
        opt.step()


# --- scatter with reduce ---------------------------------------------------------------------

IDX = ember.tensor([[0, 1], [1, 0]])


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_reduce_overloads_record_not_implemented(reduce):
    x = ember.ones(2, 2, requires_grad=True)
    src = ember.full((2, 2), 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = ember.scatter(x, 0, IDX, src, reduce=reduce)
        z = x.clone().scatter_(0, IDX, src, reduce=reduce)
        v = ember.scatter(x, 0, IDX, 2.0, reduce=reduce)
    expected = [[3.0, 3.0], [3.0, 3.0]] if reduce == "add" else [[2.0, 2.0], [2.0, 2.0]]
    assert y.tolist() == z.tolist() == v.tolist() == expected
    for t in (y, z, v):
        assert type(t.grad_fn).__name__ == "NotImplemented"
        assert t.grad_fn.name() == "torch::autograd::NotImplemented"
    assert len(y.grad_fn.next_functions) == 1           # an edge to x alone
    with pytest.raises(RuntimeError, match=r"^derivative for aten::scatter is not implemented"):
        y.sum().backward()
    with pytest.raises(RuntimeError, match=r"^derivative for aten::scatter_ is not implemented"):
        z.sum().backward()
    y = ember.scatter(x, 0, IDX, src)                   # no reduce: differentiable
    assert type(y.grad_fn).__name__ == "ScatterBackward0"


@pytest.mark.parametrize("inplace", [False, True])
def test_scatter_reduce_refuses_forward_ad(inplace):
    name = "aten::scatter_" if inplace else "aten::scatter"
    with fwAD.dual_level():
        x = fwAD.make_dual(ember.ones(2, 2), ember.ones(2, 2))
        with pytest.raises(NotImplementedError) as info:
            if inplace:
                x.clone().scatter_(0, IDX, 2.0, reduce="add")
            else:
                x.scatter(0, IDX, 2.0, reduce="add")
    assert str(info.value) == f"Trying to use forward AD with {name} that does not support it."


def test_scatter_reduce_out_records_not_implemented():
    out = ember.zeros(2, 2)
    x = ember.ones(2, 2, requires_grad=True)
    ember.scatter(x, 0, IDX, 2.0, reduce="add", out=out)
    assert out.tolist() == [[3.0, 3.0], [3.0, 3.0]] and out.requires_grad
    assert type(out.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError, match="^aten::scatter\\(\\): functions with out="):
        ember.scatter(ember.ones(2, 2), 0, IDX, 2.0, reduce="add",
                      out=ember.zeros(2, 2, requires_grad=True))
    with pytest.raises(RuntimeError, match="^scatter\\(\\): functions with out="):
        ember.scatter(x, 0, IDX, 2.0, out=ember.zeros(2, 2))     # no reduce: refused


# --- float8 and uint16/32/64 -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [ember.uint16, ember.uint32, ember.uint64,
                                   ember.float8_e4m3fn])
def test_masked_fill_checks_shapes_then_refuses_then_converts(dtype):
    name = dtype._torch_name
    with pytest.raises(RuntimeError, match=r"size of tensor a \(3\) must match the size of "
                                           r"tensor b \(4\)"):
        ember.zeros(2, 3, dtype=dtype).masked_fill_(ember.ones(4, dtype=ember.bool), 1)
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the "
                                           r"broadcast shape \[2, 3\]"):
        ember.zeros(3, dtype=dtype).masked_fill_(ember.ones(2, 3, dtype=ember.bool), 1)
    with pytest.raises(RuntimeError, match=r"size of tensor a \(4\) must match the size of "
                                           r"tensor b \(3\)"):     # (out of place: mask first)
        ember.zeros(2, 3, dtype=dtype).masked_fill(ember.ones(4, dtype=ember.bool), 10 ** 10)
    with pytest.raises(NotImplementedError, match=f"\"masked_fill\" not implemented for '{name}'"):
        ember.zeros(3, dtype=dtype).masked_fill_(ember.ones(3, dtype=ember.bool), 10 ** 10)
    with pytest.raises(NotImplementedError, match="masked_fill"):
        ember.zeros(2, 3, dtype=dtype)[ember.ones(2, 3, dtype=ember.bool)] = 1


def test_masked_fill_shapes_before_mask_and_value_checks():
    x = ember.zeros(2, 3, dtype=ember.int8)
    for mask, value in ((ember.ones(4, dtype=ember.uint8), 1), (ember.ones(4, dtype=ember.bool),
                                                                ember.ones(2)),
                        (ember.ones(4, dtype=ember.bool), 1000)):
        with pytest.raises(RuntimeError, match="must match the size"):
            x.masked_fill(mask, value)
    with pytest.raises(RuntimeError, match="cannot be converted to type int8_t"):
        x.masked_fill(ember.ones(3, dtype=ember.bool), 1000)
    with pytest.raises(RuntimeError, match="cannot be converted to type uint16_t"):
        ember.zeros(3, dtype=ember.uint16)[ember.tensor([True, False, True])] = 70000


@pytest.mark.parametrize("op", ["logical_and_", "logical_or_", "logical_xor_"])
def test_logical_in_place_checks_its_shape_before_refusing(op):
    for dtype in (ember.uint32, ember.float8_e5m2):
        x = ember.zeros(3, dtype=dtype)
        with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the "
                                               r"broadcast shape \[2, 3\]"):
            getattr(x, op)(ember.ones(2, 3, dtype=dtype))
        with pytest.raises(NotImplementedError, match=f"\"{op[:-1]}_cpu\" not implemented"):
            getattr(x, op)(ember.ones(3, dtype=dtype))
    x = ember.tensor([0.0, 1.0, 2.0])
    assert getattr(x, op)(ember.tensor([1, 1, 0], dtype=ember.int32)) is x
    assert x.dtype is ember.float32
    expected = {"logical_and_": [0.0, 1.0, 0.0], "logical_or_": [1.0, 1.0, 1.0],
                "logical_xor_": [1.0, 0.0, 1.0]}[op]
    assert x.tolist() == expected


def test_conj_physical_out_refuses_barebones_dtypes():
    for dtype in (ember.uint16, ember.uint64, ember.float8_e4m3fn):
        x = ember.ones(2, dtype=dtype)
        assert ember.conj_physical(x).tolist() == [1, 1]        # the function copies
        assert x.conj_physical_() is x
        with pytest.raises(NotImplementedError, match="\"conj_cpu\" not implemented"):
            ember.conj_physical(x, out=ember.empty(0, dtype=dtype))
        with pytest.raises(RuntimeError, match=r"^Found dtype Float but expected"):
            ember.conj_physical(x, out=ember.empty(2))
    out = ember.empty(2, dtype=ember.int32)
    assert ember.conj_physical(ember.ones(2, dtype=ember.int32), out=out) is out


@pytest.mark.parametrize("dtype", [ember.uint16, ember.uint64, ember.float8_e4m3fn])
def test_in_place_samplers_refuse_barebones_dtypes(dtype):
    x = ember.zeros(3, dtype=dtype)
    name = dtype._torch_name
    f8 = dtype is ember.float8_e4m3fn

    def refused(kernel, fn):
        with pytest.raises(NotImplementedError, match=f"^\"{kernel}\" not implemented for "
                                                      f"'{name}'$"):
            fn()
    refused("check_uniform_bounds", x.uniform_)
    refused("normal_kernel_cpu", x.normal_)
    refused("random_kernel_cpu", x.random_)
    refused("bernoulli_scalar_cpu_", x.bernoulli_)
    refused("bernoulli_tensor_cpu_self_", lambda: x.bernoulli_(ember.full((3,), 0.5)))
    refused("geometric_cpu", lambda: x.geometric_(0.5))
    refused("randperm", lambda: ember.randperm(3, dtype=dtype))
    if f8:
        refused("random_update_from_to", lambda: x.random_(10))
        refused("exponential_cpu", x.exponential_)
        refused("cauchy_cpu", x.cauchy_)
        refused("log_normal_cpu", x.log_normal_)
        refused("check_uniform_bounds", lambda: ember.rand(0, dtype=dtype))
        refused("normal_kernel_cpu", lambda: ember.randn(3, dtype=dtype))
        refused("normal_kernel_cpu", lambda: ember.normal(0.0, 1.0, (3,), dtype=dtype))
        refused("random_update_from_to", lambda: ember.randint(0, 5, (0,), dtype=dtype))
        assert ember.randn(0, dtype=dtype).shape == (0,)
    else:
        assert x.random_(10) is x                       # random_(to) has a kernel
        assert all(0 <= v < 10 for v in x.tolist())
        with pytest.raises(RuntimeError, match="Exponential distribution is a continuous"):
            x.exponential_()
        with pytest.raises(RuntimeError, match=f"you specified {_c_unsigned(dtype)}$"):
            x.cauchy_()
    # argument errors first; no kernel (no dtype check) for no elements
    with pytest.raises(RuntimeError, match="^bernoulli_ expects p to be in \\[0, 1\\], but "
                                           "got p=2$"):
        x.bernoulli_(2.0)
    with pytest.raises(RuntimeError, match="exponential_ expects lambda > 0.0"):
        x.exponential_(-1)
    empty = ember.zeros(0, dtype=dtype)
    for fill in (empty.normal_, empty.random_, empty.bernoulli_, empty.exponential_):
        assert fill() is empty


def _c_unsigned(dtype):
    return {ember.uint16: "short unsigned int", ember.uint64: "long unsigned int"}[dtype]


def test_empty_integer_tensors_draw_nothing_and_refuse_nothing():
    for dtype in (ember.int32, ember.bool, ember.uint8):
        empty = ember.zeros(0, dtype=dtype)
        assert empty.normal_() is empty and empty.log_normal_() is empty
        assert empty.exponential_() is empty
    with pytest.raises(RuntimeError, match="^cauchy_ expects sigma > 0.0"):
        ember.zeros(3, dtype=ember.int32).cauchy_(0, -1)
    with pytest.raises(NotImplementedError, match="normal_kernel_cpu"):
        ember.zeros(3, dtype=ember.int32).normal_()


# --- multi_dot, Tensor.cat -------------------------------------------------------------------

def test_multi_dot_parses_a_list_or_tuple_of_tensors():
    a = ember.ones(2, 2)
    for bad, kind in (((t for t in [a, a]), "generator"), (iter([a, a]), "list_iterator"),
                      (ember.ones(2, 2, 2), "Tensor")):
        with pytest.raises(TypeError) as info:
            ember.linalg.multi_dot(bad)
        assert str(info.value) == (f"linalg_multi_dot(): argument 'tensors' (position 1) must "
                                   f"be tuple of Tensors, not {kind}")
    with pytest.raises(RuntimeError, match=r"^multi_dot\(\): expected at least 2 tensors but "
                                           r"got 0$"):
        ember.linalg.multi_dot([])
    with pytest.raises(TypeError, match="^expected Tensor as element 1 in argument 0, but got "
                                        "int$"):
        ember.linalg.multi_dot([a, 3])
    assert ember.linalg.multi_dot((a, a, a)).tolist() == [[4.0, 4.0], [4.0, 4.0]]
    out = ember.empty(2, 2)
    assert ember.linalg.multi_dot([a, a], out=out) is out and out.tolist() == [[2.0, 2.0]] * 2
    assert ember.linalg.multi_dot.__name__ == "linalg_multi_dot"


def test_tensor_has_no_join_methods():
    for name in ("cat", "stack", "concat", "concatenate"):
        assert not hasattr(ember.Tensor, name)
    assert ember.concat([ember.ones(1), ember.zeros(1)]).tolist() == [1.0, 0.0]
