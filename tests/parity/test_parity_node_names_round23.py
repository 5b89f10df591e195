"""Gradient graphs composed as PyTorch's, node by node, with the values and gradients they
give: linalg.cond (a ratio of singular-value slices; norms of A and of its inf-filled
inverse), linalg.multi_dot (unsqueezed ends, mm's, a view), tensorinv and tensorsolve
(reshapes around inv_ex and solve), vecdot (a sum of conj(x) * y), every torch.fft transform
(ToCopy, slices, one pad, Conj or ConjPhysical around the three kernels), ``real``/``imag``
(a select of view_as_real), fill with a number (no edge for it), fill_diagonal_ (fill_
of as_strided views: one CopySlices per view) and istft (an overlap-add by unfold_backward).

Where ember's graph still differs from PyTorch's for a reason outside these functions, the
comparison names it in ``_GAPS`` (none since round 26: a reshape that copies now makes
PyTorch's Clone node). PyTorch's
linalg.cond in the norms other than 2, -2 and 'nuc'
cannot be differentiated (it fills the inverse in place); ember's can.
"""

import warnings

import numpy as np
import pytest

import ember
from ember.ops.slicing import unfold_backward
from tests.parity._compare import assert_close

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

# PyTorch's nodes that ember's graph lacks (spliced out of PyTorch's graph) or names
# otherwise (renamed), each for a reason outside these functions
_GAPS = {}


def _graph(fn, gaps=None):
    """A node and everything under it, as nested names (None for an edge to nothing); with
    ``gaps`` ({name: new name or None}), PyTorch's nodes renamed or spliced out."""
    if fn is None:
        return None
    name = type(fn).__name__
    kids = tuple(_graph(f, gaps) for f, _ in fn.next_functions)
    if gaps and name in gaps:
        if gaps[name] is None:
            assert len(kids) == 1, name
            return kids[0]
        name = gaps[name]
    return (name,) + kids


def _data(seed, shape, kind="real"):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if kind == "complex":
        a = a + 1j * rng.standard_normal(shape)
    elif kind == "square":
        a = a + shape[-1] * np.eye(shape[-1])
    return a


def _run(lib, fn, arrays, gaps=None, grads=True):
    """(graph, value, gradients) of ``fn`` on leaves made from ``arrays`` (of a weighted sum
    of the real view of the result, so that every output element matters)."""
    leaves = [lib.tensor(a).requires_grad_() for a in arrays]
    out = fn(lib, *leaves)
    graph = _graph(out.grad_fn, gaps)
    if not grads:
        return graph, out.detach().resolve_conj(), ()
    real = lib.view_as_real(out.resolve_conj()) if out.is_complex() else out
    weights = lib.tensor(np.linspace(0.5, 1.5, real.numel()).reshape(tuple(real.shape)))
    found = lib.autograd.grad((real * weights).sum(), leaves, allow_unused=True)
    return graph, out.detach().resolve_conj(), [
        None if g is None else g.resolve_conj() for g in found]


def _check(fn, arrays, gaps=(), rtol=1e-9, atol=1e-12, grads=True):
    """Assert ember's graph, value and gradients are PyTorch's (``gaps``: keys of _GAPS)."""
    merged = {}
    for gap in gaps:
        merged.update(_GAPS[gap])
    theirs = _run(torch, fn, arrays, merged, grads)
    ours = _run(ember, fn, arrays, None, grads)
    assert ours[0] == theirs[0]
    assert_close(ours[1], theirs[1], rtol=rtol, atol=atol)
    for g, h in zip(ours[2], theirs[2]):
        assert (g is None) == (h is None)
        if g is not None:
            assert_close(g, h, rtol=rtol, atol=atol)


# --- linalg ------------------------------------------------------------------------------------

@pytest.mark.parametrize("p", [None, 2, -2, "nuc"])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_cond_by_singular_values(p, shape):
    _check(lambda lib, a: lib.linalg.cond(a, p), [_data(1, shape, "square")], rtol=1e-7)


@pytest.mark.parametrize("p", ["fro", float("inf"), -float("inf"), 1, -1])
def test_cond_by_norms_of_the_inverse(p):
    """PyTorch fills the inverse in place, so its backward refuses; ember's works: graph and
    value only."""
    _check(lambda lib, a: lib.linalg.cond(a, p), [_data(2, (2, 3, 3), "square")], (),
           rtol=1e-7, grads=False)


@pytest.mark.parametrize("p", ["fro", "nuc", float("inf"), -1, None])
def test_cond_of_singular_and_nan_matrices(p):
    """inf where the inverse does not exist or its norm is NaN (as PyTorch's nan_to_num)."""
    def run(lib):
        a = lib.tensor([[[1.0, 2.0], [2.0, 4.0]], [[float("nan"), 0.0], [0.0, 1.0]],
                        [[0.0, 0.0], [0.0, 0.0]], [[1e300, 0.0], [0.0, 1e-300]]],
                       dtype=lib.float64)
        if p in ("nuc", None):  # (the SVD refuses NaN; its rounding at a singular matrix differs)
            a = a[2:]
        return lib.linalg.cond(a, p).tolist()
    assert np.array_equal(run(ember), run(torch), equal_nan=True)


_CHAINS = {
    "two": [(2, 3), (3, 4)],
    "three": [(2, 3), (3, 4), (4, 5)],
    "three tied": [(2, 2), (2, 2), (2, 2)],
    "four": [(2, 3), (3, 4), (4, 5), (5, 2)],
    "vector first": [(3,), (3, 4), (4, 5)],
    "vector last": [(2, 3), (3, 4), (4,)],
    "vectors": [(3,), (3, 4), (4,)],
    "two vectors": [(3,), (3,)],
}


@pytest.mark.parametrize("name", list(_CHAINS))
def test_multi_dot(name):
    arrays = [_data(i, s) for i, s in enumerate(_CHAINS[name])]
    _check(lambda lib, *ts: lib.linalg.multi_dot(ts), arrays)


def test_tensorinv():
    _check(lambda lib, a: lib.linalg.tensorinv(a, ind=2), [_data(3, (4, 6, 8, 3))],
           rtol=1e-7)


@pytest.mark.parametrize("dims", [None, (0, 2)])
def test_tensorsolve(dims):
    gaps = ()           # (the permuted input's reshape copies: a clone, as PyTorch's)
    _check(lambda lib, a, b: lib.linalg.tensorsolve(a, b, dims=dims),
           [_data(4, (6, 2, 3) if dims is None else (2, 6, 3)), _data(5, (6,))], gaps,
           rtol=1e-7)


def test_tensorsolve_with_a_matrix_right_side():
    _check(lambda lib, a, b: lib.linalg.tensorsolve(a, b),
           [_data(4, (2, 3, 6)) + 3 * np.eye(6).reshape(2, 3, 6), _data(5, (2, 3))], rtol=1e-7)


@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 4))])
def test_vecdot(kind, shapes):
    _check(lambda lib, x, y: lib.linalg.vecdot(x, y, dim=-1),
           [_data(6, shapes[0], kind), _data(7, shapes[1], kind)])


def test_vecdot_over_another_dim_with_one_operand_needing_no_gradient():
    def fn(lib, x):
        return lib.linalg.vecdot(x, lib.tensor(_data(8, (3, 4), "complex")), dim=0)
    _check(fn, [_data(9, (3, 4), "complex")])


# --- fft ---------------------------------------------------------------------------------------

_FFTS = [
    ("fft", (6,), "real", {"n": 8}), ("fft", (6,), "real", {"n": 4}),
    ("fft", (6,), "complex", {"n": 8}), ("fft", (6,), "complex", {"n": 4, "norm": "ortho"}),
    ("ifft", (6,), "real", {}), ("ifft", (6,), "real", {"n": 9}),
    ("ifft", (6,), "complex", {"n": 4}),
    ("fft2", (4, 6), "real", {}), ("fft2", (4, 6), "real", {"s": (5, 5)}),
    ("ifft2", (4, 6), "complex", {"s": (3, 8)}), ("fftn", (4, 6), "real", {"dim": (0,)}),
    ("fftn", (2, 4, 6), "complex", {"s": (5, 3), "norm": "forward"}),
    ("ifftn", (4, 6), "real", {}),
    ("rfft", (6,), "real", {}), ("rfft", (6,), "real", {"n": 9}),
    ("rfft", (6,), "real", {"n": 4}), ("rfft2", (4, 6), "real", {"s": (5, 5)}),
    ("rfftn", (2, 4, 6), "real", {"s": (3, 8)}),
    ("irfft", (4,), "complex", {}), ("irfft", (4,), "complex", {"n": 9}),
    ("irfft", (4,), "complex", {"n": 4}), ("irfft", (4,), "real", {"n": 8}),
    ("irfft2", (4, 4), "complex", {"s": (5, 5)}), ("irfftn", (4, 4), "real", {}),
    ("hfft", (4,), "complex", {}), ("hfft", (4,), "complex", {"n": 8}),
    ("hfft", (6,), "complex", {"n": 4}), ("hfft", (4,), "real", {"norm": "ortho"}),
    ("hfft2", (4, 4), "complex", {"s": (5, 5)}), ("hfftn", (4, 4), "real", {}),
    ("hfftn", (2, 3, 4), "complex", {}), ("hfftn", (4, 4), "complex", {"dim": (1,)}),
    ("ihfft", (6,), "real", {}), ("ihfft", (6,), "real", {"n": 8}),
    ("ihfft2", (4, 6), "real", {"s": (5, 5)}), ("ihfftn", (2, 3, 4), "real", {}),
    ("ihfftn", (4, 6), "real", {"dim": (0,), "norm": "forward"}),
]


@pytest.mark.parametrize("name, shape, kind, kwargs", _FFTS,
                         ids=[f"{n}-{k}-{a}" for n, _, k, a in _FFTS])
def test_fft_graphs(name, shape, kind, kwargs):
    _check(lambda lib, x: getattr(lib.fft, name)(x, **kwargs), [_data(10, shape, kind)])


# --- real, imag, fill, fill_diagonal_ ------------------------------------------------------

@pytest.mark.parametrize("part", ["real", "imag"])
@pytest.mark.parametrize("form", ["property", "function"])
def test_real_and_imag_select_from_view_as_real(part, form):
    def fn(lib, z):
        z = z * 2
        return getattr(z, part) if form == "property" else getattr(lib, part)(z)
    _check(fn, [_data(11, (3, 2), "complex")])


def test_real_part_of_a_real_tensor_is_the_tensor():
    for lib in (ember, torch):
        x = lib.ones(3, requires_grad=True)
        assert lib.real(x) is x and x.real is x


@pytest.mark.parametrize("how", ["fill", "fill_", "zero_", "view fill_", "tensor fill_"])
def test_fill_with_a_number_has_no_edge_for_it(how):
    def fn(lib, x):
        y = x * 1
        if how == "fill":
            return lib.fill(y, 2.0)
        if how == "view fill_":
            y[1:].fill_(2.0)
        elif how == "tensor fill_":
            y.fill_(lib.tensor(2.0, dtype=lib.float64, requires_grad=True))
        else:
            getattr(y, how)(*(() if how == "zero_" else (2.0,)))
        return y
    _check(fn, [_data(12, (3,))])


@pytest.mark.parametrize("shape, wrap, view", [
    ((7, 3), True, None), ((7, 3), False, None), ((12, 3), True, None), ((5, 4), True, None),
    ((4, 3), True, None), ((3, 7), True, None), ((3, 3, 3), False, None), ((0, 3), True, None),
    ((8, 3), True, "rows"), ((8, 3), True, "cols"), ((8, 3), True, "step"),
])
def test_fill_diagonal_fills_strided_views(shape, wrap, view):
    """fill_ of the diagonal's as_strided view, and with wrap a second one: a CopySlices
    node per view; values, gradients and the version count as PyTorch's."""
    cut = {None: lambda t: t, "rows": lambda t: t[1:], "cols": lambda t: t[:, :2],
           "step": lambda t: t[::2]}[view]

    def fn(lib, x):
        y = cut(x * 1)
        y.fill_diagonal_(-2.5, wrap=wrap)
        return y

    def version(lib):
        y = cut(lib.ones(shape, dtype=lib.float64, requires_grad=True) * 1)
        y.fill_diagonal_(-2.5, wrap=wrap)
        return y._version
    _check(fn, [_data(13, shape)])
    assert version(ember) == version(torch)


# --- istft -------------------------------------------------------------------------------------

@pytest.mark.parametrize("batch, onesided, length, return_complex, window", [
    (False, True, None, False, True), (True, True, None, False, True),
    (False, True, 10, False, False), (False, True, 20, False, True),
    (False, False, None, True, True), (True, False, None, False, True),
])
def test_istft_overlap_adds_by_unfold_backward(batch, onesided, length, return_complex,
                                               window):
    """view_as_real, an unsqueeze for one spectrogram, transpose, view_as_complex, the
    inverse DFT, the window, unfold_backward's overlap-add, a slice, the envelope, a squeeze
    (and a pad past the signal's end)."""
    freq = 5 if onesided else 8
    shape = (2, freq, 7) if batch else (freq, 7)

    def fn(lib, spec):
        w = lib.hann_window(8, dtype=lib.float64) if window else lib.ones(8, dtype=lib.float64)
        return lib.istft(spec, 8, hop_length=2, window=w, length=length,
                         onesided=onesided, return_complex=return_complex)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # (the padded tail's warning)
        _check(fn, [_data(14, shape, "complex")])


def test_unfold_backward_is_unfolds_gradient():
    """The overlap-add node's own gradient unfolds (UnfoldBackward0), as PyTorch's."""
    def fn(lib, g):
        op = torch.ops.aten.unfold_backward if lib is torch else unfold_backward
        return op(g * 1, [2, 10], 1, 4, 3)
    _check(fn, [_data(15, (2, 3, 4))])


def test_unfolds_gradient_is_an_unfold_backward_node():
    def run(lib):
        x = lib.tensor(_data(16, (2, 10))).requires_grad_()
        u = x.unfold(1, 4, 3)
        w = lib.tensor(_data(17, tuple(u.shape))).requires_grad_()
        g, = lib.autograd.grad((u * w).sum(), x, create_graph=True)
        h, = lib.autograd.grad((g * g).sum(), w)
        return _graph(g.grad_fn), g.detach(), h
    ours, theirs = run(ember), run(torch)
    assert ours[0] == theirs[0]
    assert_close(ours[1], theirs[1])
    assert_close(ours[2], theirs[2])
