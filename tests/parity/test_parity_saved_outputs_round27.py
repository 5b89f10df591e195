"""What the decompositions, FFTs, index_put and float_power save for backward, against
PyTorch 2.13.

An input (or output) written in place after an op and before backward makes backward raise
("one of the variables needed for gradient computation has been modified by an inplace
operation") exactly when PyTorch's node saved it. The decompositions (svd, qr, eig, eigh,
lu, lu_factor, cholesky) keep their outputs, not A; svdvals, eigvals and eigvalsh are an
svd's, eig's and eigh's outputs, whose nodes keep them all; lstsq keeps A, B and the
solution; slogdet A and the sign; lu_factor_ex and cholesky_ex not their info. fft of a real
signal (PyTorch's two-sided r2c kernel) saves it; float_power with a tensor exponent saves
its result, as pow does; index_put (and indexing) save the index tensors.
"""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_INPLACE = "modified by an inplace operation"


def _hermitian(lib, a):
    """A well-conditioned symmetric matrix made from ``a`` (its graph saves ``a``)."""
    return a @ a.mT + 3 * lib.eye(a.shape[-1], dtype=a.dtype)


def _outcome(lib, build, shapes, written, write_output=False):
    """Run ``build(lib, *inputs)`` on non-leaf float64 inputs of ``shapes``, write in place
    to input ``written`` (or, with ``write_output``, to output ``written``), then take the
    gradients of every differentiable output: "ok", "inplace" (the saved-tensor error), or
    the other error's type name."""
    rng = np.random.default_rng(0)
    leaves = [lib.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]
    xs = [x.clone() for x in leaves]
    out = build(lib, *xs)
    outs = out if isinstance(out, tuple) else (out,)
    target = outs[written] if write_output else xs[written]
    target.mul_(2)
    diff = [o for o in outs if o.requires_grad]
    losses = [(o.abs() if o.is_complex() else o).sum() for o in diff]
    try:
        lib.autograd.grad(losses, leaves, allow_unused=True)
    except RuntimeError as e:
        return "inplace" if _INPLACE in str(e) else type(e).__name__
    return "ok"


CASES = {
    # build, input shapes
    "linalg.svd": (lambda L, a: L.linalg.svd(a, full_matrices=False), [(4, 3)]),
    "linalg.svd_wide_full": (lambda L, a: L.linalg.svd(a), [(3, 4)]),
    "linalg.svdvals": (lambda L, a: L.linalg.svdvals(a), [(4, 3)]),
    "svd": (lambda L, a: L.svd(a), [(4, 3)]),
    "svd_no_uv": (lambda L, a: L.svd(a, compute_uv=False), [(4, 3)]),
    "linalg.qr": (lambda L, a: L.linalg.qr(a), [(4, 3)]),
    "linalg.qr_wide": (lambda L, a: L.linalg.qr(a), [(3, 4)]),
    "linalg.qr_complete": (lambda L, a: L.linalg.qr(a, mode="complete"), [(3, 3)]),
    "linalg.eig": (lambda L, a: L.linalg.eig(a), [(3, 3)]),
    "linalg.eigvals": (lambda L, a: L.linalg.eigvals(a), [(3, 3)]),
    "linalg.eigh": (lambda L, a: L.linalg.eigh(a + a.mT), [(3, 3)]),
    "linalg.eigvalsh": (lambda L, a: L.linalg.eigvalsh(a + a.mT), [(3, 3)]),
    "linalg.lu": (lambda L, a: L.linalg.lu(a), [(3, 3)]),
    "linalg.lu_wide": (lambda L, a: L.linalg.lu(a), [(3, 4)]),
    "linalg.lu_factor": (lambda L, a: L.linalg.lu_factor(a), [(3, 3)]),
    "linalg.lu_factor_ex": (lambda L, a: L.linalg.lu_factor_ex(a), [(3, 3)]),
    "linalg.lstsq": (lambda L, a, b: L.linalg.lstsq(a, b), [(4, 3), (4, 2)]),
    "linalg.lstsq_gelsd": (lambda L, a, b: L.linalg.lstsq(a, b, driver="gelsd"),
                           [(5, 3), (5, 2)]),
    "linalg.cholesky_ex": (lambda L, a: L.linalg.cholesky_ex(_hermitian(L, a)), [(3, 3)]),
    "linalg.slogdet": (lambda L, a: L.linalg.slogdet(a), [(3, 3)]),
    "slogdet": (lambda L, a: L.slogdet(a), [(3, 3)]),
    "fft.fft_real": (lambda L, x: L.fft.fft(x), [(6,)]),
    "fft.ifft_real": (lambda L, x: L.fft.ifft(x), [(2, 5)]),
    "fft.fft_complex": (lambda L, x: L.fft.fft(x.to(L.complex128)), [(6,)]),
    "fft.fft2_real": (lambda L, x: L.fft.fft2(x), [(3, 4)]),
    "float_power": (lambda L, a, b: L.float_power(a, b), [(3,), (3,)]),
    "float_power_scalar_exponent": (lambda L, a: L.float_power(a, 2.5), [(3,)]),
    "float_power_scalar_base": (lambda L, b: L.float_power(2.0, b), [(3,)]),
}


def _cases():
    rng = np.random.default_rng(0)
    for name, (build, shapes) in sorted(CASES.items()):
        outputs = build(torch, *[torch.tensor(rng.standard_normal(s)) for s in shapes])
        n_out = len(outputs) if isinstance(outputs, tuple) else 1
        for i in range(len(shapes)):
            yield pytest.param(name, i, False, id=f"{name}-input{i}")
        for i in range(n_out):
            yield pytest.param(name, i, True, id=f"{name}-output{i}")


@pytest.mark.parametrize("name,written,write_output", list(_cases()))
def test_write_then_backward(name, written, write_output):
    """Backward raises (or not) after an in-place write to an input or an output, as in
    PyTorch."""
    build, shapes = CASES[name]
    ours = _outcome(ember, build, shapes, written, write_output)
    theirs = _outcome(torch, build, shapes, written, write_output)
    assert ours == theirs


def _both(build):
    return build(ember), build(torch)


def _rounded(t):
    return np.round(np.asarray(t.tolist()), 9).tolist()


@pytest.mark.parametrize("name", ["linalg.svdvals", "linalg.eigvalsh", "linalg.eigvals"])
def test_values_alone_hang_from_the_decomposition(name):
    """svdvals, eigvalsh and eigvals record the full decomposition's node (output 1 of an
    svd, output 0 of an eigh or eig), which keeps its outputs; the gradient of repeated
    values (the identity's) is finite, as PyTorch's."""
    def build(lib):
        x = lib.eye(3, dtype=lib.float64, requires_grad=True)
        y = getattr(lib.linalg, name.split(".")[1])(x)
        fn = y.grad_fn
        saved = sorted(k for k in ("_saved_U", "_saved_S", "_saved_Vh", "_saved_eigenvalues",
                                   "_saved_eigenvectors") if hasattr(fn, k))
        (g,) = lib.autograd.grad((y.abs() if y.is_complex() else y).sum(), x)
        return type(fn).__name__, y.output_nr, saved, _rounded(g)
    ours, theirs = _both(build)
    assert ours == theirs


def test_svd_without_vectors_makes_zeros_needing_no_grad():
    """torch.svd(compute_uv=False): U and V are zeros that need no gradient; S is output 1
    of an svd node, whose gradient is PyTorch's."""
    def build(lib):
        a = lib.tensor(np.arange(12.0).reshape(4, 3) ** 1.5, requires_grad=True)
        u, s, v = lib.svd(a, compute_uv=False)
        (g,) = lib.autograd.grad(s.sum(), a)
        return (u.requires_grad, v.requires_grad, u.tolist(), v.tolist(), s.output_nr,
                type(s.grad_fn).__name__, _rounded(g))
    ours, theirs = _both(build)
    assert ours == theirs


def test_qr_wide_gradient_from_outputs():
    """A wide QR's gradient (which reads A's columns past m) from Q and R alone matches
    PyTorch's, also after A was written in place."""
    def build(lib):
        rng = np.random.default_rng(5)
        leaf = lib.tensor(rng.standard_normal((3, 5)), requires_grad=True)
        a = leaf.clone()
        q, r = lib.linalg.qr(a)
        a.zero_()
        w = lib.tensor(rng.standard_normal((3, 5)))
        (g,) = lib.autograd.grad(q.sum() + (r * w).sum(), leaf)
        return _rounded(g)
    ours, theirs = _both(build)
    assert ours == theirs


def test_lstsq_residuals_gradient_without_residuals_saved():
    """lstsq's residuals (driver gelsd, tall A of full rank) take their gradient from A, B
    and the solution: writing the residuals, rank or singular values does not matter."""
    def build(lib):
        a = lib.tensor(np.arange(15.0).reshape(5, 3) ** 0.5, requires_grad=True)
        b = lib.tensor(np.cos(np.arange(10.0)).reshape(5, 2), requires_grad=True)
        x, res, rank, values = lib.linalg.lstsq(a, b, driver="gelsd")
        res.mul_(1)
        values.mul_(1)
        ga, gb = lib.autograd.grad(x.sum() + (res * 2).sum(), (a, b))
        return _rounded(ga), _rounded(gb)
    ours, theirs = _both(build)
    assert ours == theirs


def _write_index_then_backward(lib, kind, dtype):
    """index_put / a subscript write / a subscript read with an index tensor of ``dtype``,
    then the index is written in place: backward's error message, or "ok"."""
    x = lib.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True).clone()
    v = lib.tensor(np.ones((2, 4)), requires_grad=True)
    idx = (lib.tensor([True, False, True]) if dtype == "bool"
           else lib.tensor([0, 2], dtype=getattr(lib, dtype)))
    if kind == "index_put":
        y = x.index_put((idx,), v)
    elif kind == "index_put_accumulate":
        y = x.index_put((idx,), v, accumulate=True)
    elif kind == "setitem":
        y = x * 1
        y[idx] = v
    else:
        y = x[idx]
    saved = [t.tolist() for t in y.grad_fn._saved_indices]
    if dtype == "bool":
        idx.logical_not_()
    else:
        idx.add_(0)
    try:
        lib.autograd.grad(y.sum(), (x,))
    except RuntimeError as e:
        return saved, str(e).replace("torch.", "ember.").split(" Hint")[0]
    return saved, "ok"


@pytest.mark.parametrize("kind", ["index_put", "index_put_accumulate", "setitem", "index"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_index_tensors_are_saved(kind, dtype):
    """index_put and indexing keep their index tensors (``_saved_indices``): writing one in
    place before backward raises PyTorch's error, naming a bool index CPUBoolType."""
    ours = _write_index_then_backward(ember, kind, dtype)
    theirs = _write_index_then_backward(torch, kind, dtype)
    assert "is at version 1; expected version 0" in theirs[1]
    assert ours == theirs


def test_float_power_saves_its_result():
    """float_power with a tensor exponent keeps its result (``_saved_result``), and its
    gradients are PyTorch's."""
    def build(lib):
        a = lib.tensor([0.5, 1.5, 2.0], requires_grad=True)
        b = lib.tensor([1.0, -2.0, 0.5], requires_grad=True)
        y = lib.float_power(a, b)
        result = _rounded(y.grad_fn._saved_result)
        ga, gb = lib.autograd.grad(y.sum(), (a, b))
        return result, _rounded(ga), _rounded(gb)
    ours, theirs = _both(build)
    assert ours == theirs


@pytest.mark.parametrize("legacy", [False, True])
def test_svd_values_gradient_with_repeated_values(legacy):
    """Only S reaching backward: finite gradients for repeated singular values, from
    linalg.svd (full matrices) and torch.svd alike."""
    def build(lib):
        x = lib.tensor(np.diag([2.0, 2.0, 1.0]), requires_grad=True)
        s = lib.svd(x)[1] if legacy else lib.linalg.svd(x)[1]
        (g,) = lib.autograd.grad((s * lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)).sum(),
                                 x)
        return _rounded(g)
    ours, theirs = _both(build)
    assert np.isfinite(theirs).all()
    assert ours == theirs


def _sdpa(lib, q, k, v, *rest, **kw):
    return lib.nn.functional.scaled_dot_product_attention(q, k, v, *rest, **kw)


_SDPA = {
    # PyTorch's CPU flash kernel (4-D, no dropout, no mask needing grad) saves q, k, v and
    # its output; its math kernel (3-D, dropout, a float mask needing grad) composes ops
    # that keep V, the weights and copies of Q and K scaled, but not the mask or the output
    "flash": (lambda L, q, k, v: _sdpa(L, q, k, v), [(1, 2, 3, 4)] * 3),
    "flash_bool_mask": (lambda L, q, k, v: _sdpa(L, q, k, v, attn_mask=L.tensor(
        [[True, False, True]] * 3)), [(1, 2, 3, 4)] * 3),
    "math_3d": (lambda L, q, k, v: _sdpa(L, q, k, v), [(2, 3, 4)] * 3),
    "math_3d_causal": (lambda L, q, k, v: _sdpa(L, q, k, v, is_causal=True, scale=0.7),
                       [(2, 3, 4), (2, 5, 4), (2, 5, 3)]),
    "math_float_mask": (lambda L, q, k, v, m: _sdpa(L, q, k, v, attn_mask=m),
                        [(1, 2, 3, 4)] * 3 + [(3, 3)]),
    "math_dropout": (lambda L, q, k, v: _sdpa(L, q, k, v, dropout_p=0.3), [(1, 2, 3, 4)] * 3),
    "math_gqa_3d": (lambda L, q, k, v: _sdpa(L, q, k, v, enable_gqa=True),
                    [(4, 3, 4), (2, 3, 4), (2, 3, 4)]),
    "math_gqa_3d_equal_heads": (lambda L, q, k, v: _sdpa(L, q, k, v, enable_gqa=True),
                                [(2, 3, 4)] * 3),
    "flash_gqa": (lambda L, q, k, v: _sdpa(L, q, k, v, enable_gqa=True),
                  [(1, 4, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)]),
}


@pytest.mark.parametrize("name", sorted(_SDPA))
@pytest.mark.parametrize("written", range(5))
def test_attention_saves_what_its_kernel_saves(name, written):
    """scaled_dot_product_attention: a write to an input (or, last, the output) before
    backward raises as PyTorch's kernel for the call makes it."""
    build, shapes = _SDPA[name]
    if written > len(shapes):
        pytest.skip("no such input")
    as_output = written == len(shapes)
    ours = _outcome(ember, build, shapes, 0 if as_output else written, as_output)
    theirs = _outcome(torch, build, shapes, 0 if as_output else written, as_output)
    assert ours == theirs


def _attention_partial(lib, name, mask, written):
    """The math kernel with only the inputs flagged in ``mask`` requiring grad, input
    ``written`` written in place (or none): the gradients, or "inplace"."""
    build, shapes = _SDPA[name]
    rng = np.random.default_rng(2)
    leaves = [lib.tensor(rng.standard_normal(s), requires_grad=m) for s, m in zip(shapes, mask)]
    xs = [x.clone() for x in leaves]
    out = build(lib, *xs)
    if written is not None:
        xs[written].mul_(2)
    try:
        grads = lib.autograd.grad((out * out).sum(), [x for x in leaves if x.requires_grad])
    except RuntimeError as e:
        return "inplace" if _INPLACE in str(e) else type(e).__name__
    return [_rounded(g) for g in grads]


def _partial_cases():
    import itertools
    for name in ("math_3d", "math_3d_causal", "math_float_mask", "flash"):
        n = len(_SDPA[name][1])
        for mask in itertools.product([False, True], repeat=n):
            if any(mask):
                for written in [None, *range(n)]:
                    yield pytest.param(name, mask, written, id=f"{name}-{mask}-{written}")


@pytest.mark.parametrize("name,mask,written", list(_partial_cases()))
def test_attention_gradients_follow_which_inputs_need_grad(name, mask, written):
    """With only some inputs requiring grad, attention's gradients are PyTorch's, and a
    write to an input raises exactly when PyTorch's node keeps it."""
    assert _attention_partial(ember, name, mask, written) == \
        _attention_partial(torch, name, mask, written)


def _chain(fn, depth=6):
    """Node names depth-first under ``fn`` (to ``depth``)."""
    names = []

    def walk(node, d):
        if node is None or d > depth:
            return
        names.append(type(node).__name__)
        for nxt, _ in node.next_functions:
            walk(nxt, d + 1)
    walk(fn, 0)
    return names


_VIEW_CHAINS = {
    "slices_transposed": lambda a: a[1:][:, 2:].transpose(0, 1),
    "row_expanded": lambda a: a[1].unsqueeze(0).expand(3, 5),
    "diagonal_of_slice": lambda a: a[:, 1:].diagonal(),
    "viewed_strided": lambda a: a.view(2, 10)[:, ::3],
}


@pytest.mark.parametrize("name", sorted(_VIEW_CHAINS))
def test_view_chain_rebuilt_as_one_as_strided(name):
    """A view taken in several steps, rebuilt after a write into its base, is one
    AsStridedBackward0 over the base's node (with the view's geometry saved), as PyTorch
    rebuilds it; its gradient reaches the base as PyTorch's does."""
    def build(lib):
        leaf = lib.tensor(np.arange(20.0).reshape(4, 5), requires_grad=True)
        a = leaf.clone()
        b = _VIEW_CHAINS[name](a)
        a.add_(1)
        fn = b.grad_fn
        geometry = (tuple(fn._saved_size), tuple(fn._saved_stride), fn._saved_storage_offset)
        (g,) = lib.autograd.grad((b * b).sum(), leaf)
        return _chain(fn), geometry, g.tolist()
    ours, theirs = _both(build)
    assert theirs[0][:2] == ["AsStridedBackward0", "AddBackward0"]
    assert ours == theirs


def test_view_of_view_written_through_its_parent():
    """A view of a view, rebuilt after a write into the parent view: one as_strided over the
    base's CopySlices, and PyTorch's gradient."""
    def build(lib):
        leaf = lib.tensor(np.arange(20.0).reshape(4, 5), requires_grad=True)
        a = leaf.clone()
        c = a[1:]
        b = c[:, ::2].t()
        c.mul_(2)
        (g,) = lib.autograd.grad((b * b).sum(), leaf)
        return _chain(b.grad_fn), g.tolist()
    ours, theirs = _both(build)
    assert ours == theirs


@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 2, 3, 4)])     # math kernel; flash kernel
def test_attention_recording_keeps_no_input_alive(shape):
    """The kernel choice, asked several times while a call records, holds the call's inputs
    only until it is recorded: an input no node keeps is freed."""
    import gc
    import weakref
    q = ember.randn(*shape, requires_grad=True)
    k, v = ember.randn(*shape), ember.randn(*shape)
    ref = weakref.ref(k)
    out = ember.nn.functional.scaled_dot_product_attention(q, k, v)
    del k, out
    gc.collect()
    assert ref() is None
