"""Gradient graphs and selection indices against PyTorch, node by node and index by index.

Selections: sort/topk/kthvalue/mode indices and strides on data without ties, and the tie
order of ``stable=True`` sorts (the only one PyTorch documents; ember's is stable always).
Graphs: prod's gradient at zeros
(first and second derivative, with and without create_graph), pow's double-backward graph
(SubBackward1 for ``exponent - 1``, the exponent's gradient built first), cummax/cummin
(ScatterAddBackward0), sort/topk (ScatterBackward0), subscripts (a select per int, a slice per
partial slice, an unsqueeze per None; SelectBackwardBackward0 in the double backward), div,
squeeze/unsqueeze, cumsum/cumprod, and a gradient summed to a 0-d input (SumBackward0).
"""

import math

import numpy as np
import pytest

from tests.parity._compare import assert_same, assert_same_error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _graph(fn, depth=0):
    """A node and everything under it, as nested names (None for an edge to nothing)."""
    if fn is None:
        return None
    if depth > 14:
        return type(fn).__name__
    return (type(fn).__name__,) + tuple(_graph(f, depth + 1) for f, _ in fn.next_functions)


def _values(t):
    """A tensor's values as a flat list of floats (NaN kept), or None."""
    if t is None:
        return None
    return [round(v, 9) if v == v else "nan" for v in
            np.asarray(t.detach().double().tolist(), dtype=float).reshape(-1).tolist()]


def _grad_graph(T, x, y, create_graph):
    """(values, requires_grad, graph) of d(sum(y * w))/dx, with w requiring grad under
    ``create_graph`` so that the gradient's graph shows."""
    w = T.arange(1., 1. + y.numel(), dtype=y.dtype).reshape(y.shape)
    if create_graph:
        w.requires_grad_()
    g, = T.autograd.grad((y * w).sum(), x, create_graph=create_graph, allow_unused=True)
    if g is None:
        return None
    return _values(g), g.requires_grad, _graph(g.grad_fn)


def _second(T, x, y):
    """The first gradient's graph and values, then the second derivative of a weighted sum of
    it (values and graph), for x and for the first backward's weights."""
    w = T.arange(1., 1. + y.numel(), dtype=y.dtype).reshape(y.shape).requires_grad_()
    g, = T.autograd.grad((y * w).sum(), x, create_graph=True)
    out = [_values(g), _graph(g.grad_fn)]
    if g.requires_grad:
        v = T.arange(1., 1. + g.numel(), dtype=g.dtype).reshape(g.shape)
        for h in T.autograd.grad((g * v).sum(), [x, w], allow_unused=True):
            out += [_values(h), None if h is None else _graph(h.grad_fn)]
    return out


# --- sort, argsort, msort, topk, kthvalue, mode (and median, max, cummax) ----------------------
# PyTorch documents the order of equal elements as unspecified except for ``stable=True``, so
# tie indices are compared only there; elsewhere the data have no ties.

def _tie_data(seed, shape, distinct, nan=0.0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, distinct, shape).astype(np.float64)
    if nan:
        a[rng.random(shape) < nan] = np.nan
    return a


def _distinct_data(seed, shape):
    """Values without ties: a permutation of 0..n-1 (small enough for every dtype used)."""
    return np.random.default_rng(seed).permutation(math.prod(shape)).reshape(shape).astype(float)


_SELECTION_CASES = [  # (seed, shape, dtype)
    (0, (40,), "float32"), (1, (3, 70), "int64"), (2, (17, 4), "int32"),
    (3, (2, 3, 33), "float64"), (4, (5, 20), "uint8"), (5, (2, 100), "float16"),
    (6, (4, 57), "bfloat16"), (7, (1, 5), "int16"),
]


def _selection_program(T, seed, shape, dtype):
    x = T.tensor(_distinct_data(seed, shape)).to(getattr(T, dtype))
    out = []
    for d in range(-x.ndim, x.ndim):
        n = x.shape[d]
        for descending in (False, True):
            r = T.sort(x, dim=d, descending=descending)
            out.append((r.indices.tolist(), r.indices.stride(), r.values.stride()))
            out.append(T.argsort(x, dim=d, descending=descending).tolist())
        for k in sorted({1, 2, n // 3 + 1, n}):
            for largest in (True, False):
                r = T.topk(x, k, dim=d, largest=largest)
                out.append((r.indices.tolist(), r.indices.stride(), r.values.stride()))
                unsorted = T.topk(x, k, dim=d, largest=largest, sorted=False).indices
                out.append((sorted(unsorted.flatten().tolist()), unsorted.stride()))
            r = T.kthvalue(x, k, dim=d, keepdim=k % 2 == 0)
            out.append((r.indices.tolist(), r.indices.stride(), r.values.stride()))
        for keepdim in (False, True):
            r = T.mode(x, dim=d, keepdim=keepdim)
            out.append((r.indices.tolist(), r.indices.stride(), r.values.stride()))
        out.append(T.median(x, dim=d).indices.tolist())
        out.append(T.max(x, dim=d).indices.tolist())
        out.append(T.cummax(x, dim=d).indices.tolist())
    out.append(_values(T.msort(x)))
    return out


@pytest.mark.parametrize("seed,shape,dtype", _SELECTION_CASES)
def test_selection_indices_and_strides(seed, shape, dtype):
    assert_same(lambda T: _selection_program(T, seed, shape, dtype))


def test_stable_sort_tie_indices():
    # stable=True is the one documented tie order
    def program(T):
        out = []
        for seed, shape, nan in [(0, (40,), 0.0), (1, (3, 70), 0.0), (2, (2, 3, 33), 0.3)]:
            x = T.tensor(_tie_data(seed, shape, 3, nan))
            for d in range(x.ndim):
                for descending in (False, True):
                    r = T.sort(x, dim=d, descending=descending, stable=True)
                    out.append((r.indices.tolist(), _values(r.values)))
                    out.append(T.argsort(x, dim=d, descending=descending, stable=True).tolist())
        return out
    assert_same(program)


def test_ember_sorts_ties_stably():
    # ember's order of equal elements, where PyTorch leaves it unspecified, is the stable one
    import ember
    a = _tie_data(3, (4, 50), 3, 0.2)
    stable_up = np.argsort(a, axis=1, kind="stable")
    # descending and stable: larger first, equal ones (NaN first of all) in index order
    key = np.where(np.isnan(a), -np.inf, -a)
    stable_down = np.argsort(key, axis=1, kind="stable")
    x = ember.tensor(a)
    assert ember.sort(x).indices.tolist() == stable_up.tolist()
    assert ember.argsort(x, descending=True).tolist() == stable_down.tolist()
    assert ember.topk(x, 9).indices.tolist() == stable_down[:, :9].tolist()
    assert ember.kthvalue(x, 20).indices.tolist() == stable_up[:, 19].tolist()
    np.testing.assert_array_equal(ember.msort(x.t()).t().numpy(),
                                  np.take_along_axis(a, stable_up, 1))


@pytest.mark.parametrize("op", ["sort", "topk", "topk_unsorted", "kthvalue", "mode", "msort",
                                "median"])
def test_selection_gradients(op):
    def program(T):
        x = T.tensor(_distinct_data(12, (3, 40))).requires_grad_()
        y = {"sort": lambda: T.sort(x, 1).values, "topk": lambda: T.topk(x, 7).values,
             "topk_unsorted": lambda: T.topk(x, 7, sorted=False).values.sort(1).values,
             "kthvalue": lambda: T.kthvalue(x, 20, 1).values, "mode": lambda: T.mode(x, 1).values,
             "msort": lambda: T.msort(x.t()), "median": lambda: T.median(x, 1).values}[op]()
        return _grad_graph(T, x, y, False), _second(T, x, y)
    assert_same(program)


def test_selection_graphs_at_every_size():
    def program(T):
        out = []
        for shape in [(), (0,), (0, 2), (3,)]:
            for name in ("sort", "topk", "msort", "kthvalue", "mode", "median", "max", "cummax",
                         "cummin"):
                x = T.arange(float(math.prod(shape))).reshape(shape).requires_grad_()
                y = {"sort": lambda: T.sort(x, 0).values,
                     "topk": lambda: T.topk(x, min(1, x.numel()), 0).values,
                     "msort": lambda: T.msort(x), "kthvalue": lambda: T.kthvalue(x, 1, 0).values,
                     "mode": lambda: T.mode(x, 0).values, "median": lambda: T.median(x, 0).values,
                     "max": lambda: T.max(x, 0).values, "cummax": lambda: T.cummax(x, 0).values,
                     "cummin": lambda: T.cummin(x, 0).values}
                try:
                    result = y[name]()
                except (RuntimeError, IndexError) as e:
                    out.append(type(e).__name__)
                    continue
                g = _grad_graph(T, x, result, True)
                grad, = T.autograd.grad(result.sum(), x, create_graph=True)
                out.append((shape, name, g, grad is x))     # an empty cummax's gradient is x
        return out
    assert_same(program)


# --- prod --------------------------------------------------------------------------------------

_PROD_CASES = {
    "single0": ([0.], None), "single0d": (0., None), "single2": ([2.], None),
    "one0": ([2., 0., 3.], None), "two0": ([0., 0., 3.], None), "none0": ([2., 4., 3.], None),
    "two0_inf": ([0., 0., math.inf], None), "one0_nan": ([0., 2., math.nan], None),
    "dim_one0": ([[2., 0.], [3., 4.]], 1), "dim_two0": ([[0., 0.], [3., 4.]], 1),
    "dim_mixed": ([[0., 0., 1.], [0., 4., 1.]], 0), "dim_single0": ([[0.]], 1),
    "dim_two0_inf": ([[0., 0., math.inf]], 1), "empty": ([], None), "empty_dim": ([[], []], 1),
    "3d_full": ([[[0., 2.], [3., 5.]], [[1., 2.], [3., 4.]]], None),
    "3d_dim1": ([[[0., 2.], [3., 0.]], [[1., 2.], [3., 4.]]], 1),
    "dim_size1": ([[0., 1.]], 0),
}


@pytest.mark.parametrize("case", sorted(_PROD_CASES))
@pytest.mark.parametrize("create_graph", [False, True])
def test_prod_gradient(case, create_graph):
    data, dim = _PROD_CASES[case]

    def program(T):
        x = T.tensor(data, dtype=T.float64, requires_grad=True)
        y = x.prod() if dim is None else x.prod(dim)
        out = _grad_graph(T, x, y, create_graph)
        # (at inf, the second derivative runs through cumprod's backward at zeros, whose
        # formula is not PyTorch's yet)
        if create_graph and out is not None and out[1] and "inf" not in case:
            out = out + tuple(_second(T, x, x.prod() if dim is None else x.prod(dim)))
        return out
    assert_same(program)


@pytest.mark.parametrize("make", ["transposed", "dtype", "dtype_dim", "keepdim"])
def test_prod_gradient_variants(make):
    def program(T):
        x = T.tensor([[0., 2.], [3., 4.]], requires_grad=True)
        y = {"transposed": lambda: x.t().prod(), "dtype": lambda: x.prod(dtype=T.float64),
             "dtype_dim": lambda: x.prod(1, dtype=T.float64),
             "keepdim": lambda: x.prod(-1, keepdim=True)}[make]()
        return _grad_graph(T, x, y, True), _grad_graph(T, x, y, False)
    assert_same(program)


# --- pow, div ----------------------------------------------------------------------------------

@pytest.mark.parametrize("form", ["t^2", "t^2.5", "t^0", "t^-1", "2^t", "0^t", "t^t", "t^0d",
                                  "t^0d_tensor", "div", "div_number"])
def test_pow_and_div_double_backward_graphs(form):
    def program(T):
        x = T.tensor([1.5, 2.0, 0.0], dtype=T.float64, requires_grad=True)
        e = T.tensor([2.0, 0.5, 3.0], dtype=T.float64, requires_grad=True)
        y = {"t^2": lambda: x ** 2, "t^2.5": lambda: x ** 2.5, "t^0": lambda: x ** 0,
             "t^-1": lambda: x.pow(-1), "2^t": lambda: 2 ** x, "0^t": lambda: 0 ** x,
             "t^t": lambda: x ** (e + 1), "t^0d": lambda: x ** e.sum(),
             "t^0d_tensor": lambda: x.pow(T.tensor(2.0, dtype=T.float64)),
             "div": lambda: (x + 1) / e, "div_number": lambda: 2 / (e + x)}[form]()
        inputs = [x, e]
        grads = T.autograd.grad(y.sum(), inputs, create_graph=True, allow_unused=True)
        out = [(_values(g), None if g is None else _graph(g.grad_fn)) for g in grads]
        live = [g for g in grads if g is not None and g.requires_grad]
        if live:
            s = sum((g * T.tensor([1., 2., 3.], dtype=T.float64)).sum() for g in live)
            for h in T.autograd.grad(s, inputs, allow_unused=True, create_graph=True):
                out.append((_values(h), None if h is None else _graph(h.grad_fn)))
        return out
    assert_same(program)


def test_pow_gradient_for_a_bool_exponent_is_an_error():
    def call(T, x):
        return T.autograd.grad(x.pow(T.tensor([True, False, True])).sum(), x)
    assert_same_error(call, lambda T: T.tensor([0.5, 2.0, 0.0], requires_grad=True))


def test_gradient_summed_to_a_0d_input():
    def program(T):
        out = []
        for big, small in [((3,), ()), ((2, 3), ()), ((2, 3), (3,)), ((2, 3), (1, 3)),
                           ((4, 2, 3), (2, 1))]:
            a, b = T.ones(big, requires_grad=True), T.ones(small, requires_grad=True)
            y = a * b
            w = T.ones(y.shape, requires_grad=True)
            out.append(_graph(T.autograd.grad((y * w).sum(), b, create_graph=True)[0].grad_fn))
        return out
    assert_same(program)


# --- cumulative ops, squeeze/unsqueeze -----------------------------------------------------------

@pytest.mark.parametrize("name", ["cummax", "cummin", "cumsum", "cumprod"])
@pytest.mark.parametrize("shape,dim", [((3,), 0), ((1,), 0), ((2, 3), 1), ((2, 1), 1), ((), 0),
                                       ((0,), 0), ((2, 0), 1)])
def test_cumulative_gradient_graphs(name, shape, dim):
    def program(T):
        x = (T.arange(float(math.prod(shape))).sin() + 2).reshape(shape).requires_grad_()
        y = getattr(T, name)(x, dim)
        y = y.values if name in ("cummax", "cummin") else y
        return _grad_graph(T, x, y, True), _grad_graph(T, x, y, False)
    assert_same(program)


def test_squeeze_and_unsqueeze_gradient_graphs():
    def program(T):
        x = T.ones(2, 1, 3, 1, requires_grad=True)
        x0 = T.ones((), requires_grad=True)
        out = []
        for t, f in [(x, lambda t: t.squeeze(1)), (x, lambda t: t.squeeze()),
                     (x, lambda t: t.squeeze((1, 3))), (x, lambda t: t.squeeze(0)),
                     (x, lambda t: t.unsqueeze(0)), (x, lambda t: t.unsqueeze(-1)),
                     (x, lambda t: t.squeeze(())), (x0, lambda t: t.unsqueeze(0)),
                     (x0, lambda t: t.squeeze())]:
            out.append(_grad_graph(T, t, f(t), True))
        return out
    assert_same(program)


# --- subscripts ---------------------------------------------------------------------------------

_KEYS = ["0", "0, 0", "-1, 2", "1:, 0", "None, 0, 1", "..., 1", ":, 0", "0, :", "0:", ":",
         "...", "None", "0:3", "0:2", "::2", "1:2, 1:3", "None, None", "0, None",
         "None, ..., None", ":, None, 1", "1, ..., 1", "0:3, 0", "0:10, 0", "-3:, 0", ":, :",
         "..., 0:4", "1:, [0, 1]", "0, [0, 1]", "[0, 1], 0", "[0, 2]", "x > 5", "True",
         "0, True", "..., None", "1:1, 0"]


# keys of more than one view step: PyTorch records a node per step, ember one node named after
# the last step (a node per step would cost a dispatch each), so only the top node compares
_CHAINED = {"-1, 2", "-3:, 0", "0, 0", "0, None", "0, True", "1, ..., 1", "1:, 0", "1:1, 0",
            "1:2, 1:3", ":, None, 1", "None, ..., None", "None, 0, 1", "None, None"}


@pytest.mark.parametrize("key", _KEYS)
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 2)])
def test_subscript_graphs(key, shape):
    def program(T):
        x = T.arange(1., 1. + math.prod(shape), dtype=T.float64).reshape(shape)
        x.requires_grad_()
        try:
            y = eval(f"x[{key}]", {"x": x})
        except IndexError as e:
            return "IndexError", str(e)
        w = T.ones(y.shape, dtype=T.float64, requires_grad=True)
        g, = T.autograd.grad((y * w).sum(), x, create_graph=True)
        v = T.arange(1., 1. + math.prod(shape), dtype=T.float64).reshape(shape)
        gw, = T.autograd.grad((g * v).sum(), w)
        graphs = (y.grad_fn.name(),) if key in _CHAINED else (_graph(y.grad_fn), _graph(g.grad_fn))
        return graphs + (tuple(y.shape), _values(g), _values(gw),
                         y.stride() if y.numel() and y.grad_fn.name() != "IndexBackward0" else None)
    assert_same(program)


def test_subscripts_without_a_graph_are_one_view():
    def program(T):
        x = T.arange(24.).reshape(2, 3, 4)
        with T.no_grad():
            y = x.requires_grad_()[1, 1:, None, 0]
        z = x.detach()[1, 1:, None, 0]
        z[0, 0] = 100.                                  # a view: writes reach x
        return tuple(y.shape), y.stride(), y.grad_fn is None, x[1, 1, 0].item()
    assert_same(program)


@pytest.mark.parametrize("key", ["1:, 0", "0, 0", "None, 1, 1:", "0", "1:, 1:3"])
def test_subscript_views_remade_after_in_place_changes(key):
    def program(T):
        a = T.arange(1., 13.).reshape(3, 4).requires_grad_()
        x = a * 1
        v = eval(f"x[{key}]", {"x": x})
        v.mul_(3)                                   # the base becomes CopySlices
        out = [_graph(x.grad_fn), _graph(v.grad_fn), v._version, x._version]
        (x * T.arange(12.).reshape(3, 4)).sum().backward()
        out.append(_values(a.grad))
        x = a * 1
        w = eval(f"x[{key}]", {"x": x})
        x.add_(1)                                   # the view is remade from its base
        return out + [_graph(w.grad_fn), _values(w)]
    assert_same(program)


@pytest.mark.parametrize("make", ["select", "select_neg", "narrow", "narrow_neg"])
def test_select_and_narrow_double_backward(make):
    def program(T):
        x = T.arange(1., 13., dtype=T.float64).reshape(3, 4).requires_grad_()
        y = {"select": lambda: x.select(1, 2), "select_neg": lambda: x.select(-1, -2),
             "narrow": lambda: x.narrow(1, 1, 2), "narrow_neg": lambda: x.narrow(-1, -3, 2)}[make]()
        return _second(T, x, y)
    assert_same(program)
