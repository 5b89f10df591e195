"""Small API gaps against PyTorch 2.13: sort/argsort/msort's keyword-only parameters, ``.data``
assignment on sparse tensors, pack_padded_sequence's unsorted 2-D lengths, the names split
takes by keyword, checkpoint's check_backward_validity, grad_fn._sequence_nr, nn.Buffer as a
Tensor subclass, the profiler's optimizer and DataLoader ranges, and forward AD / double
backward refused where PyTorch's kernels have no derivative (embedding_bag, the CPU flash
kernel of scaled_dot_product_attention and its attn_mask inside transforms).
"""

import inspect
import warnings

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_close, assert_same, assert_same_error, error, recorded

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _both(fn):
    """``(fn(ember), fn(torch))``."""
    return fn(ember), fn(torch)


# --- 1. sort, argsort, msort: stable is keyword-only ------------------------------------------

@pytest.mark.parametrize("call", [
    lambda lib, x: lib.argsort(x, 1, True, True),
    lambda lib, x: x.argsort(1, True, True),
    lambda lib, x: lib.sort(x, 1, True, True),
    lambda lib, x: x.sort(1, True, True),
    lambda lib, x: lib.msort(x, True),
    lambda lib, x: x.msort(True),
])
def test_stable_is_keyword_only(call):
    def run(lib):
        return error(call, lib, lib.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]]))
    ours, theirs = _both(run)
    assert theirs is not None and theirs[0] == "TypeError"
    assert ours is not None and ours[0] == "TypeError"


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.sort(x, 1, stable=True),
    lambda lib, x: lib.sort(x, 1, True, stable=True),
    lambda lib, x: lib.argsort(x, 1, stable=True),
    lambda lib, x: lib.argsort(x, 1, True, stable=True),
    lambda lib, x: x.sort(1, stable=True),
    lambda lib, x: x.argsort(1, True, stable=True),
    lambda lib, x: x.sort(0, descending=True, stable=True),
])
def test_stable_refuses_dim_by_position(call):
    # PyTorch's signature taking stable takes dim and descending by keyword only
    assert_same_error(call, lambda lib: lib.tensor([[3.0, 1.0, 3.0], [0.0, 5.0, 0.0]]))


def test_sorting_with_stable_by_keyword():
    def run(lib):
        x = lib.tensor([[3.0, 1.0, 3.0], [0.0, 5.0, 0.0]])
        values, indices = lib.sort(x, stable=True, dim=1, descending=True)
        return (values.tolist(), indices.tolist(),
                lib.argsort(x, dim=1, descending=True, stable=True).tolist(),
                x.argsort(dim=0, stable=True).tolist(), x.sort(stable=False)[1].tolist(),
                lib.msort(x).tolist())
    assert_same(run)


def test_stable_keyword_only_in_signatures():
    for fn in (ember.argsort, ember.sort, ember.Tensor.argsort, ember.Tensor.sort):
        assert inspect.signature(fn).parameters["stable"].kind is inspect.Parameter.KEYWORD_ONLY


# --- 2. .data = on sparse tensors ---------------------------------------------------------

def _coo(lib, indices, values, size, requires_grad=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lib.sparse_coo_tensor(indices, values, size, requires_grad=requires_grad)


def _set_data(target, value):
    target.data = value
    return target


@pytest.mark.parametrize("pair", [
    lambda lib: (_coo(lib, [[0, 1], [1, 0]], [1.0, 2.0], (2, 2)), lib.ones(2, 2)),
    lambda lib: (lib.ones(2, 2, requires_grad=True), _coo(lib, [[0], [1]], [1.0], (2, 2))),
    lambda lib: (_coo(lib, [[0, 1], [1, 0]], [1.0, 2.0], (2, 2)), lib.eye(2).to_sparse_csr()),
    lambda lib: (lib.eye(2).to_sparse_csr(), _coo(lib, [[0], [1]], [1.0], (2, 2))),
    lambda lib: (_coo(lib, [[0], [1]], [1.0], (2, 2), True), _coo(lib, [[0], [0]], [5], (3, 3))),
    lambda lib: (_coo(lib, [[0], [1]], [1.0], (2, 2)), 3),
])
def test_sparse_data_assignment_errors(pair):
    assert_same_error(lambda lib, p: _set_data(*p), pair)


def test_sparse_coo_data_assignment():
    def run(lib):
        s = _coo(lib, [[0, 1], [1, 0]], [1.0, 2.0], (2, 2), requires_grad=True)
        new = _coo(lib, [[0, 2], [0, 1]], [5.0, 6.0], (3, 3))
        s.data = new
        new._values().add_(1)           # the memory is shared
        return (s.to_dense().tolist(), s.requires_grad, s.is_leaf, list(s.shape), s._nnz(),
                s.is_coalesced(), s.layout == lib.sparse_coo)
    assert_same(run)


def test_compressed_data_assignment_keeps_the_parts():
    def run(lib):
        c = lib.tensor([[1.0, 2.0], [0.0, 3.0]]).to_sparse_csr()
        c.data = lib.eye(2).to_sparse_csr()     # PyTorch's set_data leaves it as it was
        return c.to_dense().tolist(), c.col_indices().tolist()
    assert_same(run)


# --- 3. pack_padded_sequence with 2-D lengths -----------------------------------------------

_LENGTHS = {"list2d": lambda lib: [[3, 2]], "column": lambda lib: [[3], [2]],
            "tensor2d": lambda lib: lib.tensor([[3, 2]]), "tensor3d": lambda lib: lib.ones(
                1, 2, 1, dtype=lib.int64) * 2, "tensor0d": lambda lib: lib.tensor(2)}


@pytest.mark.parametrize("lengths", list(_LENGTHS))
@pytest.mark.parametrize("enforce_sorted", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_padded_sequence_lengths_rank(lengths, enforce_sorted, batch_first):
    def make(lib):
        return lib.zeros(3, 2, 4), _LENGTHS[lengths](lib)

    def call(lib, made):
        return lib.nn.utils.rnn.pack_padded_sequence(made[0], made[1], batch_first=batch_first,
                                                     enforce_sorted=enforce_sorted)
    assert_same_error(call, make)


# --- 4. split's keyword names -------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda lib, x: lib.split(x, split_size=2),
    lambda lib, x: lib.split(x, split_size=[2, 4]),
    lambda lib, x: x.split(split_size_or_sections=2),
])
def test_split_keyword_names_refused(call):
    assert_same_error(call, lambda lib: lib.arange(6.0))


def test_split_keyword_names_taken():
    def run(lib):
        x = lib.arange(6.0)
        return ([t.tolist() for t in lib.split(x, split_size_or_sections=[2, 4])],
                [t.tolist() for t in x.split(split_size=2)],
                [t.tolist() for t in x.split(split_size=[1, 5], dim=0)])
    assert_same(run)
    assert list(inspect.signature(ember.split).parameters) == ["tensor", "split_size_or_sections",
                                                               "dim"]
    assert list(inspect.signature(ember.Tensor.split).parameters) == ["self", "split_size", "dim"]


@pytest.mark.parametrize("call", [
    lambda lib, x: x.split(1, axis=0),
    lambda lib, x: lib.split(x, 1, axis=0),
    lambda lib, x: x.unflatten(axis=1, sizes=(3, 1)),
    lambda lib, x: x.norm(axis=0),
    lambda lib, x: x.norm(dim=0, keepdims=True),
    lambda lib, x: lib.norm(x, axis=0),
    lambda lib, x: x.unique(axis=0),
    lambda lib, x: x.unique_consecutive(axis=0),
])
def test_python_written_functions_take_no_numpy_names(call):
    # PyTorch writes these in Python: its parser's axis/keepdims aliases do not reach them
    assert_same_error(call, lambda lib: lib.arange(6.0).reshape(2, 3))


def test_numpy_names_still_taken_by_native_functions():
    def run(lib):
        x = lib.arange(6.0).reshape(2, 3)
        return (lib.unflatten(x, axis=1, sizes=(3, 1)).shape, x.sum(axis=0).tolist(),
                lib.sum(x, axis=1, keepdims=True).tolist())
    assert_same(run)


# --- 5. check_backward_validity -------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda lib: (lib.ones(2),),
    lambda lib: (1, lib.ones(2), "a"),
    lambda lib: [lib.ones(2), lib.ones(2, requires_grad=True)],
    lambda lib: (),
    lambda lib: lib.ones(2),
])
def test_check_backward_validity(make):
    def run(lib):
        return recorded(lambda: lib.utils.checkpoint.check_backward_validity(make(lib)))
    ours, theirs = _both(run)
    assert ours == theirs
    assert "check_backward_validity" in ember.utils.checkpoint.__all__


# --- 6. Node._sequence_nr ---------------------------------------------------------------------

class _Double:
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def _numbers(lib):
    """The sequence numbers of the nodes a few ops make, relative to the first."""
    Double = type("Double", (lib.autograd.Function,), dict(vars(_Double)))
    a = lib.ones(2, requires_grad=True)
    b = a * 2
    nodes = [b.grad_fn, (b + 1).grad_fn, b.sum().grad_fn, a.exp().grad_fn]
    with lib.no_grad():
        a * 3                                   # no node, no number
    nodes.append((a * 4).grad_fn)
    h = Double.apply(a)
    nodes += [h.grad_fn, (h * 1).grad_fn]
    j = a * 1
    k = j.view(2)
    nodes += [j.grad_fn, k.grad_fn]
    j.mul_(2)
    nodes += [j.grad_fn, k.grad_fn]
    a.sum().backward()
    nodes.append((a * 1).grad_fn)
    first = nodes[0]._sequence_nr()
    accumulator = b.grad_fn.next_functions[0][0]
    return [n._sequence_nr() - first for n in nodes], accumulator._sequence_nr()


def test_sequence_numbers():
    ours, theirs = _both(_numbers)
    assert ours == theirs
    assert theirs[1] == 2 ** 64 - 1
    assert callable(ember.autograd.graph.Node._sequence_nr)


# --- 7. nn.Buffer ---------------------------------------------------------------------------

def test_buffer_is_a_tensor_subclass():
    def run(lib):
        B = lib.nn.Buffer
        b = B(lib.ones(2), persistent=False)
        m = lib.nn.Module()
        m.kept = B(lib.zeros(3))
        m.register_buffer("plain", lib.zeros(1))
        m.plain = B(lib.ones(1), persistent=False)
        return (issubclass(B, lib.Tensor), type(b) is lib.Tensor, isinstance(b, B),
                isinstance(lib.ones(2), B), isinstance(lib.nn.Parameter(lib.ones(2)), B),
                b.persistent, type(m.kept) is lib.Tensor, type(m._buffers["kept"]) is lib.Tensor,
                sorted(m.state_dict()), sorted(m._non_persistent_buffers_set),
                type(B(lib.ones(2)) * 2) is lib.Tensor, type(B).__name__,
                str(inspect.signature(B)), sorted(set(vars(B)) - {"__doc__"}))
    assert_same(run)


# --- 8. profiler ranges ---------------------------------------------------------------------

def _profiled_names(lib):
    lin = lib.nn.Linear(2, 2)
    names = []
    for make in (lambda p: lib.optim.SGD(p, lr=0.1), lambda p: lib.optim.AdamW(p),
                 lambda p: type("Mine", (lib.optim.SGD,), {})(p, lr=0.1)):
        opt = make(lin.parameters())
        lin(lib.ones(1, 2)).sum().backward()
        opt.register_step_pre_hook(lambda o, a, k: lib.ones(1).add(1) and None)
        with lib.profiler.profile() as prof:
            opt.step()
            opt.zero_grad()
        events = prof.events()
        names += [(e.name, e.is_user_annotation) for e in events if "#" in e.name]
        names += [e.cpu_parent.name for e in events if e.name == "aten::add"]
    loader = lib.utils.data.DataLoader(lib.utils.data.TensorDataset(lib.arange(4.0)),
                                       batch_size=2)
    with lib.profiler.profile() as prof:
        for _ in loader:
            pass
    names += [e.name for e in prof.events() if "#" in e.name]
    return names


def test_profiler_optimizer_and_dataloader_ranges():
    ours, theirs = _both(_profiled_names)
    assert ours == theirs
    assert ("Optimizer.step#SGD.step", True) in ours


@pytest.mark.parametrize("name", ["profile", "record_function", "emit_nvtx", "emit_itt"])
def test_autograd_profiler_signatures(name):
    def params(lib):
        sig = inspect.signature(getattr(lib.autograd.profiler, name))
        return [(p.name, p.kind, p.default) for p in sig.parameters.values()]
    assert params(ember) == params(torch)


# --- 9. forward AD and double backward where PyTorch's kernels have none ------------------

_W = np.random.RandomState(0).randn(5, 3)


def _embedding_bag_orders(lib, mode, sparse, psw, wrt):
    w = lib.tensor(_W, requires_grad=True)
    p = lib.tensor([1.0, 2.0, 3.0, 4.0], dtype=lib.float64, requires_grad=True) if psw else None
    out = lib.nn.functional.embedding_bag(lib.tensor([0, 2, 1, 4]), w, lib.tensor([0, 2]),
                                          mode=mode, sparse=sparse, per_sample_weights=p)
    (g,) = lib.autograd.grad((out ** 2).sum(), w if wrt == "w" else p, create_graph=True)
    first = (g.to_dense() if g.is_sparse else g).detach().tolist()
    node = type(g.grad_fn).__name__
    second = error(lambda: lib.autograd.grad((g.coalesce().values() if g.is_sparse else g).sum(),
                                             w))
    return first, node, second


@pytest.mark.parametrize("mode, sparse, psw, wrt", [
    ("sum", False, False, "w"), ("mean", False, False, "w"), ("max", False, False, "w"),
    ("sum", True, False, "w"), ("mean", True, False, "w"), ("sum", False, True, "w"),
    ("sum", False, True, "p"), ("sum", True, True, "p")])
def test_embedding_bag_double_backward_refused(mode, sparse, psw, wrt):
    ours, theirs = _both(lambda lib: _embedding_bag_orders(lib, mode, sparse, psw, wrt))
    assert ours[1:] == theirs[1:]
    assert_close(np.array(ours[0]), np.array(theirs[0]), rtol=1e-12)


def test_embedding_bag_max_norm_values():
    def run(lib):
        w = lib.tensor(_W * 3, requires_grad=True)
        out = lib.nn.functional.embedding_bag(lib.tensor([0, 2, 1, 4]), w, lib.tensor([0, 2]),
                                              mode="sum", max_norm=1.0)
        (out ** 2).sum().backward()
        return out, w.grad, w.detach()
    for ours, theirs in zip(*_both(run)):
        assert_close(ours, theirs, rtol=1e-12)


def test_embedding_bag_grad_of_grad_refused():
    def run(lib):
        F = lib.nn.functional
        idx, off = lib.tensor([0, 2, 1, 4]), lib.tensor([0, 2])

        def loss(w):
            return (F.embedding_bag(idx, w, off, mode="sum") ** 2).sum()
        return error(lambda: lib.func.grad(lambda w: lib.func.grad(loss)(w).sum())(
            lib.tensor(_W)))
    assert_same(run)


_RS = np.random.RandomState(1)
_Q, _K, _V, _MASK, _TM, _TQ = (_RS.randn(*s) for s in [(1, 2, 3, 4)] * 3 + [(1, 2, 3, 3)] * 2
                               + [(1, 2, 3, 4)])


def _sdpa_setup(lib):
    """(q, mask, the mask's tangent, q's tangent, f(mask, q)) for the SDPA cases."""
    T = lib.tensor
    q, k, v = T(_Q), T(_K), T(_V)

    def fq(m, qq):
        return (lib.nn.functional.scaled_dot_product_attention(qq, k, v, attn_mask=m) ** 2).sum()
    return q, T(_MASK), T(_TM), T(_TQ), fq


# each: fn(func, q, mask, tangent of mask, tangent of q, f(mask, q))
_SDPA_CASES = {
    "grad mask": lambda fn, q, m, tm, tq, f: fn.grad(f)(m, q),
    "jvp(grad) mask": lambda fn, q, m, tm, tq, f: fn.jvp(
        lambda mm: fn.grad(f)(mm, q), (m,), (tm,))[1],
    "jvp mask": lambda fn, q, m, tm, tq, f: fn.jvp(lambda mm: f(mm, q), (m,), (tm,))[1],
    "jvp(grad mask) mask, q": lambda fn, q, m, tm, tq, f: fn.jvp(
        fn.grad(f), (m, q), (tm, tq))[1],
    "jvp(grad q) mask, q": lambda fn, q, m, tm, tq, f: fn.jvp(
        fn.grad(f, argnums=1), (m, q), (tm, tq))[1],
    "jvp(grad q) q": lambda fn, q, m, tm, tq, f: fn.jvp(
        lambda qq: fn.grad(f, argnums=1)(m, qq), (q,), (tq,))[1],
    "jvp(grad mask) q": lambda fn, q, m, tm, tq, f: fn.jvp(
        lambda qq: fn.grad(f)(m, qq), (q,), (tq,))[1],
    "jvp(grad q) mask": lambda fn, q, m, tm, tq, f: fn.jvp(
        lambda mm: fn.grad(f, argnums=1)(mm, q), (m,), (tm,))[1],
    "jvp(grad q) of mask * 2": lambda fn, q, m, tm, tq, f: fn.jvp(
        lambda mm: fn.grad(lambda q2: f(mm * 2, q2))(q), (m,), (tm,))[1],
    "grad(jvp) mask": lambda fn, q, m, tm, tq, f: fn.grad(
        lambda mm: fn.jvp(lambda m2: f(m2, q), (mm,), (tm,))[1])(m),
    "hessian mask": lambda fn, q, m, tm, tq, f: fn.hessian(lambda mm: f(mm, q))(m),
    "jacfwd mask": lambda fn, q, m, tm, tq, f: fn.jacfwd(lambda mm: f(mm, q))(m),
}


@pytest.mark.parametrize("case", list(_SDPA_CASES))
def test_sdpa_mask_under_transforms(case):
    def run(lib):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return "ok", _SDPA_CASES[case](lib.func, *_sdpa_setup(lib)).detach().numpy()
            except (NotImplementedError, RuntimeError) as e:
                return type(e).__name__, str(e).split("\n")[0]
    ours, theirs = _both(run)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "ok":
        assert_close(ours[1], theirs[1], rtol=1e-9, atol=1e-12)
    else:
        assert ours[1] == theirs[1]
