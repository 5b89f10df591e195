"""What ops save for backward, and the shapes of their graphs, against PyTorch 2.13.

An input written in place after an op and before backward must make backward raise ("one of
the variables needed for gradient computation has been modified by an inplace operation")
exactly when PyTorch's node saved it: sort/topk/kthvalue/mode/median(dim) save the indices
alone, a constant pad nothing, index_add/index_copy/put and max_unpool the index (and
source), addcdiv its factors, copysign its input, the convolutions not their bias, trapezoid
with a spacing nothing, the activations' backward kernels not grad_output; the average pools
save the input (adaptive ones, unless they pool to ones: a mean), and so do the r2c
transforms (rfft, ihfft, ...: FftR2CBackward0); inv (and inverse, inv_ex) and ndtri save
their result alone, ldexp its exponent and result, the solves A and the solution (not B).
Graphs: a reshape that copies is a clone under an _unsafe_view (no view of anything), a
vector times a matrix an mm of the unsqueezed vector, tensor_split's pieces are slices of
their own (output 0), and ``z.real`` rebuilt after a write to ``z`` is an as_strided of
view_as_real.
"""

import itertools

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_INPLACE = "modified by an inplace operation"


def _outcome(lib, build, shapes, written, write_output=False):
    """Run ``build(lib, *inputs)`` on non-leaf float64 inputs of ``shapes``, write in place
    to input ``written`` (or, with ``write_output``, to output ``written``), then backward:
    "ok", "inplace" (the saved-tensor error), or the other error's type name."""
    rng = np.random.default_rng(0)
    leaves = [lib.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]
    xs = [x.clone() for x in leaves]
    out = build(lib, *xs)
    outs = out if isinstance(out, tuple) else (out,)
    target = outs[written] if write_output else xs[written]
    target.mul_(2)
    diff = [o for o in outs if o.requires_grad]
    try:
        lib.autograd.grad(diff, leaves, [lib.ones_like(o) for o in diff], allow_unused=True)
    except RuntimeError as e:
        return "inplace" if _INPLACE in str(e) else type(e).__name__
    return "ok"


def _index(lib, values):
    return lib.tensor(values, dtype=lib.int64)


CASES = {
    # (build, input shapes, written input, expected outcome in both)
    "sort": (lambda L, x: L.sort(x, dim=1)[0], [(3, 4)], 0, "ok"),
    "sort_descending": (lambda L, x: L.sort(x, descending=True), [(5,)], 0, "ok"),
    "topk": (lambda L, x: L.topk(x, 2)[0], [(3, 4)], 0, "ok"),
    "kthvalue": (lambda L, x: L.kthvalue(x, 2, dim=0)[0], [(3, 4)], 0, "ok"),
    "mode": (lambda L, x: L.mode(x, 1)[0], [(3, 4)], 0, "ok"),
    "median_dim": (lambda L, x: L.median(x, 1)[0], [(3, 4)], 0, "ok"),
    "nanmedian_dim": (lambda L, x: L.nanmedian(x, 0)[0], [(3, 4)], 0, "ok"),
    "pad_constant": (lambda L, x: L.nn.functional.pad(x, (1, 2), value=0.5), [(2, 3)], 0,
                     "ok"),
    "pad_constant_crop": (lambda L, x: L.nn.functional.pad(x, (1, -1)), [(1, 2, 3)], 0, "ok"),
    "pad_reflect": (lambda L, x: L.nn.functional.pad(x, (1, 1), mode="reflect"), [(1, 2, 3)],
                    0, "inplace"),
    "avg_pool1d": (lambda L, x: L.nn.functional.avg_pool1d(x, 2), [(2, 3, 6)], 0, "inplace"),
    "avg_pool2d": (lambda L, x: L.nn.functional.avg_pool2d(x, 2), [(1, 2, 4, 4)], 0,
                   "inplace"),
    "avg_pool3d": (lambda L, x: L.nn.functional.avg_pool3d(x, 2), [(1, 2, 2, 4, 4)], 0,
                   "inplace"),
    "adaptive_avg_pool1d": (lambda L, x: L.nn.functional.adaptive_avg_pool1d(x, 3),
                            [(2, 3, 7)], 0, "inplace"),
    "adaptive_avg_pool2d": (lambda L, x: L.nn.functional.adaptive_avg_pool2d(x, (2, 3)),
                            [(1, 2, 5, 7)], 0, "inplace"),
    "adaptive_avg_pool1d_to_one": (lambda L, x: L.nn.functional.adaptive_avg_pool1d(x, 1),
                                   [(2, 3, 7)], 0, "ok"),
    "adaptive_avg_pool2d_to_one": (lambda L, x: L.nn.functional.adaptive_avg_pool2d(x, 1),
                                   [(1, 2, 5, 7)], 0, "ok"),
    "adaptive_avg_pool3d_to_one": (lambda L, x: L.nn.functional.adaptive_avg_pool3d(x, 1),
                                   [(1, 2, 3, 5, 4)], 0, "ok"),
    "index_add_input": (lambda L, x, s: x.index_add(0, _index(L, [0, 2, 0]), s),
                        [(3, 4), (3, 4)], 0, "ok"),
    "index_add_source": (lambda L, x, s: x.index_add(0, _index(L, [0, 2, 0]), s),
                         [(3, 4), (3, 4)], 1, "inplace"),
    "index_copy_input": (lambda L, x, s: x.index_copy(1, _index(L, [3, 0]), s),
                         [(3, 4), (3, 2)], 0, "ok"),
    "put_input": (lambda L, x, s: x.put(_index(L, [5, 1]), s), [(3, 4), (2,)], 0, "ok"),
    "put_source": (lambda L, x, s: x.put(_index(L, [5, 1]), s), [(3, 4), (2,)], 1,
                   "inplace"),
    "addcdiv_input": (lambda L, x, a, b: L.addcdiv(x, a, b, value=0.5),
                      [(2, 3), (2, 3), (2, 3)], 0, "ok"),
    "addcdiv_tensor1": (lambda L, x, a, b: L.addcdiv(x, a, b), [(2, 3), (2, 3), (2, 3)], 1,
                        "inplace"),
    "copysign_other": (lambda L, a, b: L.copysign(a, b), [(2, 3), (3,)], 1, "ok"),
    "copysign_input": (lambda L, a, b: L.copysign(a, b), [(2, 3), (3,)], 0, "inplace"),
    "trapezoid_dx": (lambda L, y: L.trapezoid(y, dx=0.5, dim=0), [(4, 3)], 0, "ok"),
    "cumulative_trapezoid": (lambda L, y: L.cumulative_trapezoid(y), [(2, 5)], 0, "ok"),
    "conv1d_bias": (lambda L, x, w, b: L.nn.functional.conv1d(x, w, b, padding=1),
                    [(2, 2, 5), (3, 2, 3), (3,)], 2, "ok"),
    "conv2d_bias": (lambda L, x, w, b: L.nn.functional.conv2d(x, w, b),
                    [(1, 2, 4, 4), (3, 2, 2, 2), (3,)], 2, "ok"),
    "conv2d_weight": (lambda L, x, w, b: L.nn.functional.conv2d(x, w, b),
                      [(1, 2, 4, 4), (3, 2, 2, 2), (3,)], 1, "inplace"),
    "conv_transpose2d_bias": (lambda L, x, w, b: L.nn.functional.conv_transpose2d(x, w, b),
                              [(1, 2, 3, 3), (2, 3, 2, 2), (3,)], 2, "ok"),
    "convolution_bias": (lambda L, x, w, b: L.convolution(x, w, b, [1], [0], [1], False, [0],
                                                          1), [(1, 2, 5), (3, 2, 2), (3,)],
                         2, "ok"),
    "rfft": (lambda L, x: L.fft.rfft(x), [(6,)], 0, "inplace"),
    "ihfft2": (lambda L, x: L.fft.ihfft2(x), [(3, 4)], 0, "inplace"),
    "rfftn_padded": (lambda L, x: L.fft.rfftn(x, s=(4, 6)), [(3, 4)], 0, "ok"),
    "irfft": (lambda L, x: L.fft.irfft(x.to(L.complex128)), [(5,)], 0, "ok"),
    "ndtri": (lambda L, x: L.special.ndtri(x), [(4,)], 0, "ok"),
    "ldexp": (lambda L, x: L.ldexp(x, L.tensor([1, -2, 3])), [(3,)], 0, "ok"),
    "ldexp_float_exponent": (lambda L, x, e: L.ldexp(x, e), [(3,), (3,)], 1, "inplace"),
    "linalg_inv": (lambda L, a: L.linalg.inv(a), [(3, 3)], 0, "ok"),
    "inverse": (lambda L, a: L.inverse(a), [(2, 3, 3)], 0, "ok"),
    "linalg_inv_ex": (lambda L, a: L.linalg.inv_ex(a)[0], [(3, 3)], 0, "ok"),
    "max_unpool1d": (lambda L, x: L.nn.functional.max_unpool1d(
        x, _index(L, [[[0, 3, 5]]]), 2, output_size=[6]), [(1, 1, 3)], 0, "ok"),
    "reshape_copy": (lambda L, x: x.t().reshape(-1), [(3, 4)], 0, "ok"),
    "flatten_copy": (lambda L, x: x.transpose(0, 2).flatten(1), [(2, 3, 4)], 0, "ok"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_write_after_op_then_backward(name):
    """Backward raises (or not) after an in-place write to an input, as in PyTorch."""
    build, shapes, written, expected = CASES[name]
    ours = _outcome(ember, build, shapes, written)
    theirs = _outcome(torch, build, shapes, written)
    assert theirs == expected, f"torch: {theirs}"
    assert ours == theirs


def _masked_outcome(lib, build, shapes, mask, written):
    """As ``_outcome``, with only the inputs flagged in ``mask`` requiring grad."""
    rng = np.random.default_rng(1)
    leaves = [lib.tensor(rng.standard_normal(s), requires_grad=m) for s, m in zip(shapes, mask)]
    xs = [x.clone() for x in leaves]
    out = build(lib, *xs)
    xs[written].mul_(2)
    try:
        grads = lib.autograd.grad(out.sum(), [x for x in leaves if x.requires_grad])
    except RuntimeError as e:
        return "inplace" if _INPLACE in str(e) else type(e).__name__
    return [np.round(np.asarray(g.tolist()), 8).tolist() for g in grads]


_PARTIAL = {
    "index_add": (lambda L, x, s: x.index_add(0, _index(L, [0, 2, 0]), s, alpha=2),
                  [(3, 4), (3, 4)]),
    "index_copy": (lambda L, x, s: x.index_copy(1, _index(L, [3, 0]), s), [(3, 4), (3, 2)]),
    "put": (lambda L, x, s: x.put(_index(L, [5, 1]), s), [(3, 4), (2,)]),
    "put_accumulate": (lambda L, x, s: x.put(_index(L, [5, 1]), s, accumulate=True),
                       [(3, 4), (2,)]),
    "addcdiv": (lambda L, x, a, b: L.addcdiv(x, a, b, value=0.5), [(2, 3)] * 3),
    "copysign": (lambda L, a, b: L.copysign(a, b), [(2, 3), (3,)]),
    "conv1d": (lambda L, x, w, b: L.nn.functional.conv1d(x, w, b), [(1, 2, 5), (3, 2, 2), (3,)]),
    "linalg.solve": (lambda L, a, b: L.linalg.solve(a, b), [(3, 3), (3, 2)]),
    "linalg.solve_vector": (lambda L, a, b: L.linalg.solve(a, b), [(2, 3, 3), (2, 3)]),
    "linalg.solve_ex": (lambda L, a, b: L.linalg.solve_ex(a, b)[0], [(3, 3), (3,)]),
    "solve_triangular": (lambda L, a, b: L.linalg.solve_triangular(a, b, upper=True),
                         [(3, 3), (3, 2)]),
    "cumulative_trapezoid_dx": (lambda L, y: L.cumulative_trapezoid(y, dx=2.0), [(2, 4)]),
    # mm saves the unsqueezed vector (a view: the vector's version) and the matrix (a strided
    # vector takes the composed ops' path, a contiguous one ember's direct recording)
    "vector_matrix": (lambda L, v, m: v @ m, [(3,), (3, 4)]),
    "vector_matrix_strided": (lambda L, v, m: v[::2] @ m, [(6,), (3, 4)]),
}


def _partial_cases():
    for name, (build, shapes) in sorted(_PARTIAL.items()):
        for mask in itertools.product([False, True], repeat=len(shapes)):
            if any(mask):
                for written in range(len(shapes)):
                    yield pytest.param(name, mask, written, id=f"{name}-{mask}-{written}")


@pytest.mark.parametrize("name,mask,written", list(_partial_cases()))
def test_saved_inputs_follow_which_inputs_need_grad(name, mask, written):
    """With only some inputs requiring grad, an input is saved (and a write to it raises at
    backward) exactly when PyTorch saves it; otherwise the gradients are PyTorch's."""
    build, shapes = _PARTIAL[name]
    assert _masked_outcome(ember, build, shapes, mask, written) == \
        _masked_outcome(torch, build, shapes, mask, written)


def test_inv_ex_keeps_the_inverse_alone():
    """Writing inv_ex's info in place leaves backward working (PyTorch saves the inverse);
    writing the inverse makes it raise."""
    def build(lib, a):
        return lib.linalg.inv_ex(a)
    for written, expected in ((1, "ok"), (0, "inplace")):
        ours = _outcome(ember, build, [(3, 3)], written, write_output=True)
        theirs = _outcome(torch, build, [(3, 3)], written, write_output=True)
        assert ours == theirs == expected


_BACKWARD_KERNELS = ("threshold_backward", "hardtanh_backward", "leaky_relu_backward",
                     "hardshrink_backward", "softshrink_backward")
_KERNEL_ARGS = {"threshold_backward": (0.1,), "hardtanh_backward": (-0.5, 0.5),
                "leaky_relu_backward": (0.2, False), "hardshrink_backward": (0.5,),
                "softshrink_backward": (0.5,)}


@pytest.mark.parametrize("kernel", _BACKWARD_KERNELS)
@pytest.mark.parametrize("written", [0, 1])
def test_backward_kernels_save_the_input_alone(kernel, written):
    """The activations' backward kernels (double backward's nodes) save the input, not
    grad_output: writing grad_output after the call leaves backward working."""
    extra = _KERNEL_ARGS[kernel]
    ours = _outcome(ember, lambda L, g, x: getattr(ember.ops._registry.REGISTRY["_" + kernel],
                                                   "function")(g, x, *extra), [(5,), (5,)],
                    written)
    theirs = _outcome(torch, lambda L, g, x: getattr(torch.ops.aten, kernel)(g, x, *extra),
                      [(5,), (5,)], written)
    assert ours == theirs == ("ok" if written == 0 else "inplace")


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


def _both(build):
    return build(ember), build(torch)


def test_copying_reshape_is_clone_under_unsafe_view():
    """A reshape (or flatten) that must copy: UnsafeViewBackward0 over CloneBackward0, its
    result no view (an in-place write to it records MulBackward0, not a view's rebuild); the
    gradient reaches the input transposed back."""
    def build(lib):
        x = lib.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
        y = x.t().reshape(2, 6)
        z = x.t().flatten()
        w = lib.tensor(np.arange(12.0).reshape(2, 6))
        (g,) = lib.autograd.grad((y * w).sum(), x)
        facts = (_chain(y.grad_fn), _chain(z.grad_fn), y._base is None, y._is_view(),
                 g.tolist())
        y.mul_(2)
        return facts + (type(y.grad_fn).__name__,)
    ours, theirs = _both(build)
    assert theirs[0][:3] == ["UnsafeViewBackward0", "CloneBackward0", "TBackward0"]
    assert ours == theirs


def test_vector_times_matrix_is_mm_of_unsqueezed_vector():
    """1-D @ 2-D: SqueezeBackward4 over MmBackward0 over UnsqueezeBackward0, with the
    gradients of both operands, and None for a vector needing none."""
    def build(lib):
        rng = np.random.default_rng(3)
        v = lib.tensor(rng.standard_normal(3), requires_grad=True)
        m = lib.tensor(rng.standard_normal((3, 4)), requires_grad=True)
        y = v @ m
        gv, gm = lib.autograd.grad(y.sum(), (v, m))
        frozen = lib.tensor(rng.standard_normal(3)) @ m
        mm = frozen.grad_fn.next_functions[0][0]
        return (_chain(y.grad_fn), y.grad_fn._saved_dim, np.round(gv.tolist(), 12).tolist(),
                np.round(gm.tolist(), 12).tolist(), [f is None for f, _ in mm.next_functions])
    ours, theirs = _both(build)
    assert theirs[0][:3] == ["SqueezeBackward4", "MmBackward0", "UnsqueezeBackward0"]
    assert ours == theirs


@pytest.mark.parametrize("case", ["vector_batch", "batch_vector", "frozen_vector"])
def test_vector_times_batch_result_is_no_view(case):
    """A vector times a batch of matrices ends in an _unsafe_view: its result is no view
    (``_base`` None), so an in-place write to it records the write's own node."""
    def build(lib):
        rng = np.random.default_rng(4)
        v = lib.tensor(rng.standard_normal(3), requires_grad=case != "frozen_vector")
        b = lib.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
        y = b.mT @ v if case == "batch_vector" else v @ b.transpose(0, 1).transpose(0, 1)
        facts = [_chain(y.grad_fn), y._base is None, y._is_view()]
        y.add_(1)
        (g,) = lib.autograd.grad((y * y).sum(), b)
        return facts + [type(y.grad_fn).__name__, np.round(g.tolist(), 10).tolist()]
    ours, theirs = _both(build)
    assert theirs[1:4] == [True, False, "AddBackward0"]
    assert ours == theirs


def test_tensor_split_pieces_are_output_zero():
    """Each tensor_split piece is a slice of its own (output_nr 0), before and after its base
    is written in place (rebuilt as AsStridedBackward0), and may be written itself."""
    def build(lib):
        a = lib.tensor(np.arange(7.0), requires_grad=True).clone()
        pieces = lib.tensor_split(a, [2, 5])
        before = [(type(p.grad_fn).__name__, p.output_nr) for p in pieces]
        distinct = len({id(p.grad_fn) for p in pieces})
        a.mul_(2)
        after = [(type(p.grad_fn).__name__, p.output_nr) for p in pieces]
        pieces[1].mul_(3)
        (g,) = lib.autograd.grad(sum((p * (i + 1)).sum() for i, p in enumerate(pieces)), a)
        return before, distinct, after, g.tolist()
    ours, theirs = _both(build)
    assert theirs[0] == [("SliceBackward0", 0)] * 3
    assert ours == theirs


@pytest.mark.parametrize("part", ["real", "imag"])
def test_real_imag_rebuilt_as_strided_over_view_as_real(part):
    """``z.real``/``z.imag`` after a write to ``z``: AsStridedBackward0 over
    ViewAsRealBackward0 (PyTorch replays the dtype-changing view, then one as_strided)."""
    def build(lib):
        z = lib.tensor(np.array([1 + 2j, 3 - 1j]), requires_grad=True).clone()
        r = getattr(z, part)
        fresh = _chain(r.grad_fn)
        z.mul_(2)
        rebuilt = _chain(r.grad_fn)
        (g,) = lib.autograd.grad(r.sum(), z)
        return fresh, rebuilt, np.round(np.asarray(g.tolist()), 12).tolist()
    ours, theirs = _both(build)
    assert theirs[1][:3] == ["AsStridedBackward0", "ViewAsRealBackward0", "MulBackward0"]
    assert ours == theirs


def test_adaptive_avg_pool1d_to_one_graph():
    """Pooling a signal to one: Squeeze over Mean over Unsqueeze, as PyTorch composes it,
    with the mean's saved dims (which PyTorch shows as unsigned) and the same gradient."""
    def build(lib):
        x = lib.tensor(np.arange(12.0).reshape(2, 6), requires_grad=True)
        y = lib.nn.functional.adaptive_avg_pool1d(x, 1)
        mean = y.grad_fn.next_functions[0][0]
        (g,) = lib.autograd.grad((y * 3).sum(), x)
        dims = tuple(d % 2 ** 64 for d in mean._saved_dim)
        return _chain(y.grad_fn), dims, g.tolist(), y.tolist()
    ours, theirs = _both(build)
    assert theirs[0][:3] == ["SqueezeBackward1", "MeanBackward1", "UnsqueezeBackward0"]
    assert ours == theirs


def test_constant_pad_saves_the_pad_alone():
    """F.pad in constant mode records constant_pad_nd's node, which keeps ``pad`` (PyTorch
    shows its negative entries as unsigned)."""
    def build(lib):
        x = lib.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
        y = lib.nn.functional.pad(x, (1, -1, 0, 2), value=2.0)
        (g,) = lib.autograd.grad((y * y).sum(), x)
        pad = tuple(p % 2 ** 64 for p in y.grad_fn._saved_pad)
        return type(y.grad_fn).__name__, pad, g.tolist(), y.tolist()
    ours, theirs = _both(build)
    assert ours == theirs
