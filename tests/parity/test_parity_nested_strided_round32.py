"""Strided nested tensors, the corners round 31 left: ``unbind`` and indexing hand out views on
the graph, ``as_nested_tensor``'s node is freed by a backward, the nodes PyTorch records but
cannot differentiate refuse at backward, refusals that depend on requires_grad, and the
optimizers stepping nested parameters: all as PyTorch 2.13."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

A = np.array([[1., -2., 3., 4.], [4., 5., -6., 7.]], np.float32)
B = np.array([[7., 8., 9., 1.]], np.float32)


def _nt(lib, requires_grad=True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # PyTorch's prototype warning
        return lib.nested.nested_tensor([lib.tensor(A), lib.tensor(B)],
                                        requires_grad=requires_grad)


def _ones(lib, out):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lib.nested.nested_tensor([lib.ones_like(t) * (i + 1)
                                         for i, t in enumerate(out.unbind())])


def _value(r):
    if isinstance(r, (tuple, list)):
        return [_value(v) for v in r]
    if getattr(r, "is_nested", False):
        return ("nested", [t.detach().double().numpy() for t in r.unbind()])
    if hasattr(r, "detach") and hasattr(r, "dtype"):
        return ("dense", r.detach().double().numpy())
    return r


def _outcome(lib, fn):
    """What ``fn(lib)`` gives (compared with PyTorch's), or its error's type and message."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", _value(fn(lib))
    except Exception as e:          # noqa: BLE001  (the error is the answer compared)
        return type(e).__name__, str(e).split(" This could be")[0].replace("torch", "ember")


def _same(e, t):
    if isinstance(t, np.ndarray):
        np.testing.assert_allclose(e, t, rtol=1e-5, atol=1e-5)
    elif isinstance(t, (list, tuple)):
        assert len(e) == len(t), (e, t)
        for x, y in zip(e, t):
            _same(x, y)
    else:
        assert e == t


def _check(fn):
    _same(_outcome(ember, fn), _outcome(torch, fn))


def _name(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


# ----- 1. unbind and indexing: views on the graph ---------------------------------------------

def _unbind_meta(L, rg, take):
    x = _nt(L, rg)
    parts = take(x)
    return [(_name(p), p.is_leaf, p.requires_grad, p._is_view()) for p in parts]


@pytest.mark.parametrize("rg", [False, True])
@pytest.mark.parametrize("take", ["unbind", "fn_unbind", "getitem", "select0", "getitem_tuple",
                                  "nonleaf_unbind"])
def test_unbound_components_are_views_on_the_graph(rg, take):
    takes = {"unbind": lambda x: x.unbind(), "fn_unbind": lambda x: ember_or(x).unbind(x),
             "getitem": lambda x: (x[0], x[-1]), "select0": lambda x: (x.select(0, 1),),
             "getitem_tuple": lambda x: (x[0, 1], x[1, 0]),
             "nonleaf_unbind": lambda x: (x * 2).unbind()}
    _check(lambda L: _unbind_meta(L, rg, takes[take]))


def ember_or(x):
    return ember if type(x).__module__.startswith("ember") else torch


def _grads_through(L, take):
    x = _nt(L)
    take(x).backward()
    return x.grad


@pytest.mark.parametrize("case", ["both", "one", "square", "select", "select_tuple",
                                  "nonleaf_one", "nonleaf_both"])
def test_gradients_flow_through_unbound_views(case):
    takes = {"both": lambda x: x.unbind()[0].sum() * 2 + x.unbind()[1].sum() * 3,
             "one": lambda x: x.unbind()[1].sum(),
             "square": lambda x: (x.unbind()[0] ** 2).sum(),
             "select": lambda x: x[0].sum() + x[1].exp().sum(),
             "select_tuple": lambda x: x[0, 1].sum(),
             "nonleaf_one": lambda x: (x * 2).unbind()[0].sum(),
             "nonleaf_both": lambda x: sum(t.sum() for t in (x * x).unbind())}
    _check(lambda L: _grads_through(L, takes[case]))


def _write(L, case):
    x = _nt(L, case.startswith("grad"))
    if case == "nograd_unbind":
        x.unbind()[1].mul_(10)
    elif case == "nograd_getitem":
        x[0].add_(100)
    elif case == "nograd_getitem_tuple":
        x[0, 1].fill_(-1)
    elif case == "grad_unbind":
        x.unbind()[1].mul_(2)
    elif case == "grad_view_of_unbound":
        x.unbind()[1][0].mul_(2)
    elif case == "grad_getitem":
        x[0].mul_(2)
    elif case == "grad_nonleaf_unbind":
        (x * 2).unbind()[1].mul_(2)
    elif case == "grad_base_written":
        u = x.unbind()
        with L.no_grad():
            x.mul_(2)
        return _name(u[0])
    elif case == "grad_no_grad_view":
        with L.no_grad():
            u = x.unbind()
        u[0].mul_(2)
    elif case == "grad_requires_grad_":
        x.unbind()[0].requires_grad_(False)
    elif case == "grad_nonleaf_select":         # (CopySlices on the nested base: refused)
        (x * 1)[0].mul_(2)
    elif case == "grad_nonleaf_select_of_select":
        (x * 1)[0][1].mul_(2)
    elif case == "grad_nonleaf_select_tuple":
        (x * 1)[0, 1].mul_(2)
    elif case == "grad_select_of_plain_dense_source":
        x = _nt(L, False)
        x[0].copy_(L.ones(2, 4, requires_grad=True))
    elif case == "grad_nonleaf_select_no_grad":
        x = x * 1
        with L.no_grad():
            x[0].mul_(2)
    return x


@pytest.mark.parametrize("case", ["nograd_unbind", "nograd_getitem", "nograd_getitem_tuple",
                                  "grad_unbind", "grad_view_of_unbound", "grad_getitem",
                                  "grad_nonleaf_unbind", "grad_base_written",
                                  "grad_no_grad_view", "grad_requires_grad_",
                                  "grad_nonleaf_select", "grad_nonleaf_select_of_select",
                                  "grad_nonleaf_select_tuple",
                                  "grad_select_of_plain_dense_source",
                                  "grad_nonleaf_select_no_grad"])
def test_writes_through_unbound_views(case):
    _check(lambda L: _write(L, case))


@pytest.mark.parametrize("make", ["unbind", "view_of_unbind", "unsqueeze_unbind", "split"])
def test_multi_output_view_of_a_leaf_is_named_first(make):
    # (dense: PyTorch names the multi-output view before the view of a leaf)
    makes = {"unbind": lambda x: x.unbind()[1], "view_of_unbind": lambda x: x.unbind()[1][0],
             "unsqueeze_unbind": lambda x: x.unsqueeze(0).unbind()[0],
             "split": lambda x: x.split(1)[1]}

    def run(L):
        makes[make](L.ones(2, 3, requires_grad=True)).mul_(2)
    _check(run)


@pytest.mark.parametrize("make", ["unbind", "view_of_split", "chunk"])
@pytest.mark.parametrize("how", ["requires_grad_", "operand"])
def test_multi_output_view_of_a_plain_base_written_under_autograd(make, how):
    # (no grad_fn: PyTorch's message supposes the view was made in no_grad mode)
    makes = {"unbind": lambda x: x.unbind()[1], "view_of_split": lambda x: x.split(1)[0][0],
             "chunk": lambda x: x.chunk(2)[0]}

    def run(L):
        v = makes[make](L.ones(2, 3))
        if how == "requires_grad_":
            v.requires_grad_()
            v.mul_(2)
        else:
            v.mul_(L.ones(v.shape, requires_grad=True))
    _check(run)


def _freed(L, case):
    x = _nt(L)
    if case == "unbind_other_output":
        u = x.unbind()
        u[0].sum().backward()
        u[1].sum().backward()
    elif case == "unbind_same_output":
        u = x.unbind()
        (u[0] * 1).sum().backward()
        (u[0] * 2).sum().backward()
    elif case == "unbind_grad_twice":
        u = x.unbind()
        return [L.autograd.grad(u[i].sum(), x) for i in (0, 1)]
    elif case == "unbind_retained":
        u = x.unbind()
        return [L.autograd.grad(u[0].sum(), x, retain_graph=True),
                L.autograd.grad(u[1].sum(), x)]
    elif case == "select_twice":
        a = x[0]
        (a * 1).sum().backward()
        (a * 2).sum().backward()
    elif case == "select_grad_retained":
        a = x[1]
        return [L.autograd.grad((a * 1).sum(), x, retain_graph=True),
                L.autograd.grad((a * 2).sum(), x)]
    return x.grad


@pytest.mark.parametrize("case", ["unbind_other_output", "unbind_same_output",
                                  "unbind_grad_twice", "unbind_retained", "select_twice",
                                  "select_grad_retained"])
def test_unbind_and_select_nodes_freed_by_backward(case):
    # (PyTorch's nodes save the nested tensor; unbind's one node serves all its outputs)
    _check(lambda L: _freed(L, case))


# ----- 2. values(), and as_nested_tensor's node freed by a backward ----------------------------

def _as_nested(L, case):
    x, y = L.ones(2, 4, requires_grad=True), L.ones(1, 4, requires_grad=True)
    nt = L.nested.as_nested_tensor([x, y])
    g = _ones(L, nt)
    if case == "twice_retained":
        out = nt * 2
        out.backward(g, retain_graph=True)
        out.backward(g)
    elif case == "twice":
        (nt * 2).backward(g)
        (nt * 3).backward(g)
    elif case == "once":
        (nt * 2).backward(g)
    elif case == "components_apart":
        nt.unbind()[0].sum().backward()
        nt.unbind()[1].sum().backward()
    elif case == "unbind_twice_retained":
        u = nt.unbind()[0].sum()
        u.backward(retain_graph=True)
        u.backward()
    elif case == "grad_twice":
        return [L.autograd.grad(nt.unbind()[i].sum(), (x, y)[i]) for i in (0, 1)]
    elif case == "grad_retained":
        return [L.autograd.grad(nt * 2, [x, y], g, retain_graph=True),
                L.autograd.grad(nt * 3, [x, y], g)]
    return x.grad, y.grad


@pytest.mark.parametrize("case", ["twice_retained", "twice", "once", "components_apart",
                                  "unbind_twice_retained", "grad_twice", "grad_retained"])
def test_as_nested_tensor_node_is_freed_by_backward(case):
    _check(lambda L: _as_nested(L, case))


@pytest.mark.parametrize("dtype", [None, "float64", "float16", "int64", "bool", "complex64"])
@pytest.mark.parametrize("source", ["list", "tensor", "list_no_grad", "list_inference"])
def test_as_nested_tensor_differentiable_dtypes(source, dtype):
    def run(L):
        x = L.ones(2, 3, requires_grad=True)
        ts = x if source == "tensor" else [x, L.ones(1, 3)]
        mode = {"list_no_grad": L.no_grad, "list_inference": L.inference_mode}.get(source)
        with mode() if mode else warnings.catch_warnings():
            out = L.nested.as_nested_tensor(ts, dtype=dtype and getattr(L, dtype))
        return [out, out.requires_grad, out.is_leaf]
    _check(run)


@pytest.mark.parametrize("rg", [False, True])
def test_values(rg):
    def run(L):
        x = _nt(L, rg)
        v = x.values()
        out = [_name(v), v.requires_grad, v]
        if rg:
            (v * L.arange(12.0)).sum().backward()
            out.append(x.grad)
        return out
    _check(run)


def test_leaf_gradient_accumulated_twice_refused():
    def run(L):
        x = _nt(L)
        out = x * 1
        out.backward(_ones(L, out), retain_graph=True)
        out.backward(_ones(L, out))
    _check(run)


# ----- 4. backward through the nodes PyTorch cannot differentiate -----------------------------

def _backward(L, fn, how):
    x = _nt(L)
    out = fn(L, x)
    out = out[-1] if isinstance(out, tuple) else out
    if how == "nested":
        out.backward(_ones(L, out))
        return _name(out), x.grad
    if how == "grad":
        return L.autograd.grad(out, x, _ones(L, out))
    if how == "unbind":
        out.unbind()[0].sum().backward()
    else:
        out.to_padded_tensor(0.0).sum().backward()
    return x.grad


BACKWARD = {
    "tanh": lambda L, x: x.tanh(),
    "tanh_fn": lambda L, x: L.tanh(x),
    "tanh_nonleaf": lambda L, x: (x * 2).tanh(),
    "tanh_": lambda L, x: (x * 1).tanh_(),
    "sgn": lambda L, x: x.sgn(),
    "sgn_": lambda L, x: (x * 1).sgn_(),
    "chunk": lambda L, x: x.chunk(2, -1),
    "select": lambda L, x: x.select(2, 1),
    "select_1": lambda L, x: x.select(1, 0),
    # what PyTorch differentiates
    "relu_": lambda L, x: (x * 1).relu_(),
    "abs_": lambda L, x: (x * 1).abs_(),
    "neg_": lambda L, x: (x * 1).neg_(),
    "split_with_sizes": lambda L, x: x.split_with_sizes([1, 3], -1),
    "relu": lambda L, x: x.relu(),
    "gelu": lambda L, x: L.nn.functional.gelu(x),
    "sin": lambda L, x: x.sin(),
    "softmax": lambda L, x: x.softmax(-1),
    "sum": lambda L, x: x.sum(-1, keepdim=True),
}


@pytest.mark.parametrize("how", ["nested", "grad", "unbind", "padded"])
@pytest.mark.parametrize("op", sorted(BACKWARD))
def test_backward_refused_where_pytorch_refuses(op, how):
    if op == "select_1" and how == "padded":
        # (PyTorch's select(1, ...) result is not contiguous, so to_padded_tensor refuses it;
        # ember's components are each contiguous there)
        pytest.skip("ember's select(1) of a nested tensor is contiguous")
    _check(lambda L: _backward(L, BACKWARD[op], how))


# ----- 5. refusals that depend on requires_grad ------------------------------------------------

REFUSED = {
    "split": lambda L, x: x.split(2, -1),
    "split_dim0": lambda L, x: x.split(1, 0),
    "cat": lambda L, x: L.cat([x, x], -1),
    "cat_dim0": lambda L, x: L.cat([x, x], 0),
    "cat_dense": lambda L, x: L.cat([x, L.ones(2, 4)], -1),
    "expand": lambda L, x: x.expand(2, -1, 4),
    "mean_dim": lambda L, x: x.mean(-1, keepdim=True),
    "mean": lambda L, x: x.mean(),
    "max_dim": lambda L, x: x.max(-1),
    "slice": lambda L, x: x[:, :, :2],
    "repeat": lambda L, x: x.repeat(1, 1, 2),
    "tensor_split": lambda L, x: x.tensor_split(2, -1),
    "unsafe_split": lambda L, x: x.unsafe_split(2, -1),
    "diagonal": lambda L, x: x.diagonal(dim1=1, dim2=2),
    "index_select": lambda L, x: x.index_select(2, L.tensor([0])),
    "addmm": lambda L, x: L.addmm(L.ones(3), x, L.ones(4, 3)),
    "squeeze_no_dim": lambda L, x: x.squeeze(),
    "numpy": lambda L, x: x.numpy(),
    "exp": lambda L, x: x.exp(),
    "prod_dim": lambda L, x: x.prod(-1),
    "movedim": lambda L, x: x.movedim(1, 2),
    "flatten": lambda L, x: x.flatten(1),
    "unflatten": lambda L, x: x.unflatten(-1, (2, 2)),
    "expand_as": lambda L, x: x.expand_as(x),
    "view_as": lambda L, x: x.view_as(x),
    "mse_loss": lambda L, x: L.nn.functional.mse_loss(x, x),
    "conv1d": lambda L, x: L.nn.functional.conv1d(x, L.ones(1, 2, 1)),
    "requires_grad_": lambda L, x: (x * 1).requires_grad_(False),
    # (a list of sizes is split_with_sizes, which PyTorch's nested tensors have)
    "split_list": lambda L, x: x.split([1, 3], -1),
    "split_tuple_fn": lambda L, x: L.split(x, (2, 2), 2),
    "split_list_kw": lambda L, x: x.split(split_size=[1, 3], dim=-1),
    "split_list_dim1": lambda L, x: x.split([1, 1], 1),
    "split_list_bad_sum": lambda L, x: x.split([1, 2], -1),
    "min_dim": lambda L, x: x.min(-1),
    "median_dim": lambda L, x: x.median(-1),
    "maximum": lambda L, x: L.max(x, x),
    "minimum": lambda L, x: L.min(x, x),
    "sort": lambda L, x: x.sort(-1),
    "topk": lambda L, x: x.topk(1, -1),
    "kthvalue": lambda L, x: x.kthvalue(1, -1),
    "mm": lambda L, x: L.mm(x, L.ones(4, 3)),
    "unfold": lambda L, x: x.unfold(-1, 2, 1),
    "l1_loss": lambda L, x: L.nn.functional.l1_loss(x, x),
    "cross_entropy": lambda L, x: L.nn.functional.cross_entropy(x, x),
    "interpolate": lambda L, x: L.nn.functional.interpolate(x, scale_factor=2),
    "repeat_interleave": lambda L, x: x.repeat_interleave(2, -1),
    "addmm_keyword": lambda L, x: L.addmm(L.ones(3), x, mat2=L.ones(4, 3, requires_grad=True)),
}


@pytest.mark.parametrize("mode", ["plain", "requires_grad", "requires_grad_no_grad",
                                  "dense_requires_grad"])
@pytest.mark.parametrize("op", sorted(REFUSED))
def test_refusals_that_depend_on_requires_grad(op, mode):
    def run(L):
        x = _nt(L, mode.startswith("requires_grad"))
        if mode == "dense_requires_grad" and op in ("addmm", "cat_dense"):
            return REFUSED[op](L, x) if op != "addmm" else L.addmm(
                L.ones(3), x, L.ones(4, 3, requires_grad=True))
        if mode == "requires_grad_no_grad":
            with L.no_grad():
                return REFUSED[op](L, x)
        return REFUSED[op](L, x)
    _check(run)


@pytest.mark.parametrize("op", ["split_list", "split_tuple_fn"])
def test_split_with_a_list_of_sizes_differentiates(op):
    def run(L):
        x = _nt(L)
        parts = REFUSED[op](L, x)
        (parts[0].unbind()[0].sum() * 2 + parts[1].unbind()[1].sum()).backward()
        return [_name(parts[0].unbind()[0]), parts, x.grad]
    _check(run)


def test_cat_of_a_dense_tensor_that_requires_grad():
    def run(L):
        return L.cat([_nt(L, False), L.ones(2, 4, requires_grad=True)], -1)
    _check(run)


# ----- 3. the optimizers stepping nested parameters --------------------------------------------

OPTIMIZERS = ["SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Adagrad", "Adadelta",
              "RMSprop", "Rprop", "ASGD", "LBFGS"]


def _optimize(L, name, flags, steps=4):
    x = _nt(L)
    kwargs = dict(flags)
    if name in ("SGD", "ASGD"):
        kwargs["lr"] = 0.1
    opt = getattr(L.optim, name)([x], **kwargs)

    def closure():
        opt.zero_grad()
        out = x * x
        out.backward(_ones(L, out))
        return out.unbind()[0].sum()
    for _ in range(steps):
        if name == "LBFGS":
            opt.step(closure)
        else:
            closure()
            opt.step()
    state = opt.state[x]
    return x, sorted((k, v) for k, v in state.items() if k != "step" or name == "ASGD")


@pytest.mark.parametrize("flags", [{}, {"foreach": False}, {"foreach": True}],
                         ids=["default", "single", "foreach"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizers_step_or_refuse_nested_parameters(name, flags):
    if name == "LBFGS" and flags:
        pytest.skip("LBFGS takes no foreach")
    _check(lambda L: _optimize(L, name, flags))


@pytest.mark.parametrize("flags", [{"weight_decay": 0.1}, {"maximize": True},
                                   {"lambd": 0.5, "alpha": 0.5}, {"t0": 1},
                                   {"t0": 2, "weight_decay": 0.2}, {"capturable": True},
                                   {"differentiable": True}, {"fused": True}],
                         ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()))
def test_asgd_on_nested_parameters(flags):
    _check(lambda L: _optimize(L, "ASGD", flags, steps=5))


# ----- node names and small refusals of the ops round 31 made ------------------------------------

def _sdpa(L, x):
    q = x.unsqueeze(1)
    return L.nn.functional.scaled_dot_product_attention(q, q, q)


def _copied(L, x):
    dst = _nt(L, False)
    dst.copy_(x * 2)
    return dst


NAMED = {
    "dropout": lambda L, x: L.nn.functional.dropout(x, 0.5),
    "dropout_p0": lambda L, x: L.nn.functional.dropout(x, 0.0),
    "dropout_p1": lambda L, x: L.nn.functional.dropout(x, 1.0),
    "dropout_eval": lambda L, x: L.nn.functional.dropout(x, 0.5, training=False),
    "dropout_module": lambda L, x: L.nn.Dropout(0.3)(x),
    "dropout_inplace": lambda L, x: L.nn.functional.dropout(x * 1, 0.5, inplace=True),
    "dropout_inplace_p1": lambda L, x: L.nn.functional.dropout(x * 1, 1.0, inplace=True),
    "alpha_dropout": lambda L, x: L.nn.functional.alpha_dropout(x, 0.5, training=True),
    "alpha_dropout_eval": lambda L, x: L.nn.functional.alpha_dropout(x, 0.5),
    "feature_alpha_dropout": lambda L, x: L.nn.functional.feature_alpha_dropout(
        x, 0.5, training=True),
    "to_padded": lambda L, x: x.to_padded_tensor(0.0),
    "to_padded_size": lambda L, x: L.nested.to_padded_tensor(x, 1.0, (3, 3, 5)),
    "to_padded_transposed": lambda L, x: x.transpose(1, 2).to_padded_tensor(0.0),
    "sdpa": _sdpa,
    "copy_": _copied,
    "narrow": lambda L, x: L.nested.narrow(x, 0, 0, 1),
    "narrow_method": lambda L, x: x.narrow(0, 1, 1),
    "narrow_method_dim1": lambda L, x: x.narrow(1, 0, 1),
    "real": lambda L, x: x.real,
    "imag": lambda L, x: x.imag,
    "real_fn": lambda L, x: L.real(x),
    "imag_fn": lambda L, x: L.imag(x),
    "real_complex": lambda L, x: (x * (1 + 2j)).real,
    "imag_complex": lambda L, x: (x * (1 + 2j)).imag,
    "real_complex_fn": lambda L, x: L.real(x * (1 + 2j)),
    "imag_complex_fn": lambda L, x: L.imag(x * (1 + 2j)),
    "narrow_transposed": lambda L, x: x.transpose(1, 2).narrow(0, 1, 1),
    "nested_narrow_transposed": lambda L, x: L.nested.narrow(x.transpose(1, 2), 0, 1, 1),
}


@pytest.mark.parametrize("rg", [False, True])
@pytest.mark.parametrize("op", sorted(NAMED))
def test_node_names_and_refusals(op, rg):
    def run(L):
        x = _nt(L, rg)
        out = NAMED[op](L, x)
        result = [_name(out), out.is_leaf, out.requires_grad, out is x]
        if op.startswith("dropout") and op not in ("dropout_p0", "dropout_eval", "dropout_p1"):
            return result
        result.append(out)
        if rg and out.requires_grad:
            if out.is_nested:
                out.backward(_ones(L, out))
            else:
                out.sum().backward()
            result.append(x.grad)
        return result
    _check(run)


def _narrowed_and_written(L, how):
    x = _nt(L, False)
    y = x.narrow(0, 0, 2) if how == "method" else L.nested.narrow(x, 0, 0, 2)
    y[1].add_(1)
    x[0].mul_(0)
    return x, y


@pytest.mark.parametrize("how", ["method", "function"])
def test_narrow_aliases_as_pytorch(how):
    # (Tensor.narrow views the nested tensor; torch.nested.narrow narrows a copy of it)
    _check(lambda L: _narrowed_and_written(L, how))


def test_narrow_under_no_grad_writes_through():
    def run(L):
        x = _nt(L)
        with L.no_grad():
            x.narrow(0, 1, 1).unbind()[0].mul_(0)
        return x
    _check(run)
