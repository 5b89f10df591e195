"""What the round-27 compression and second-order programs found, pinned against PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _both(fn):
    return fn(ember), fn(torch)


def _x(lib, *shape, seed=0):
    rng = np.random.default_rng(seed)
    return lib.from_numpy(rng.standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("case", ["single", "matrix", "tuple", "unused", "linear", "double"])
def test_hessian_forward_over_reverse(case):
    """hessian(outer_jacobian_strategy="forward-mode", vectorize=True): ember's inner
    reverse jacobian called requires_grad_ inside jacfwd's trace and raised; PyTorch returns
    the Hessian (nested lists for tuple inputs)."""
    def run(lib):
        AF = lib.autograd.functional
        x = _x(lib, 4)
        kw = dict(vectorize=True, outer_jacobian_strategy="forward-mode")
        if case == "single":
            return [AF.hessian(lambda a: (a.sin() * a.sum()).sum() + (a ** 3).sum(), x, **kw)]
        if case == "matrix":
            return [AF.hessian(lambda a: (a @ a.T).tanh().sum(), x.reshape(2, 2), **kw)]
        if case == "double":
            return [AF.hessian(lambda a: a.exp().prod(), x.double(), **kw)]
        if case == "linear":
            return [AF.hessian(lambda a: a.sum() * 3, x, **kw)]
        fn = ((lambda a, c: (a * c).sum() ** 2) if case == "tuple"
              else (lambda a, c: (a ** 3).sum()))
        h = AF.hessian(fn, (x, x + 1), **kw)
        assert type(h) is list and all(type(row) is list for row in h)
        return [t for row in h for t in row]
    ours, theirs = _both(run)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5,
                                   atol=1e-5)


@pytest.mark.parametrize("kw", [dict(create_graph=True), dict(strict=True),
                                dict(vectorize=False)])
def test_hessian_forward_over_reverse_refusals(kw):
    """The forward-mode outer jacobian's refusals keep PyTorch's types and messages."""
    def run(lib):
        args = dict(vectorize=True, outer_jacobian_strategy="forward-mode")
        args.update(kw)
        try:
            lib.autograd.functional.hessian(lambda a: (a ** 3).sum(), _x(lib, 3), **args)
        except Exception as exc:  # noqa: BLE001 - the type is the result
            return type(exc).__name__, str(exc).replace("ember", "torch")
        return None
    ours, theirs = _both(run)
    assert theirs is not None and ours == theirs


def _pruned(lib, layout):
    """A pruned 4x5 weight as a sparse tensor of ``layout`` ("coo", "csr", "csc"; "bsr": 4x6
    with a zero column, in 2x2 blocks)."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 5)).astype(np.float32)
    w[np.abs(w) < 0.7] = 0
    dense = lib.from_numpy(w)
    if layout == "bsr":     # (square blocks: PyTorch's MKL kernel takes no others)
        return lib.nn.functional.pad(dense, (0, 1)).to_sparse_bsr((2, 2))
    return {"coo": dense.to_sparse, "csr": dense.to_sparse_csr,
            "csc": dense.to_sparse_csc}[layout]()


@pytest.mark.parametrize("case", ["2d", "2d_csr_bias", "3d", "3d_bias", "3d_csr_bias", "1d",
                                  "1d_bias", "sparse_input", "sparse_input_bias", "2d_csc",
                                  "2d_csc_bias", "3d_csc_bias", "1d_csc_bias", "4d_bias",
                                  "4d_csr", "2d_bsr", "3d_bsr_bias"])
def test_linear_with_a_sparse_operand(case):
    """F.linear with a pruned weight made sparse (or a sparse input) refused every layout with
    NotImplementedError (CSC too); PyTorch computes it (matmul, addmm for a 2-D input with a
    bias, a transposed addmm for other contiguous inputs with one), giving the sparse weight
    leaf a dense gradient."""
    def run(lib):
        F = lib.nn.functional
        x = _x(lib, 2, 2, 3, 5, seed=4)
        x = {"3d": x[0], "4d": x, "1d": x[0, 0, 0]}.get(case[:2], x[0, 0])
        bias = _x(lib, 4, seed=5) if case.endswith("bias") else None
        w = _pruned(lib, next((n for n in ("csr", "csc", "bsr") if n in case), "coo"))
        if "bsr" in case:      # (its 4x6 weight)
            x = F.pad(x, (0, 1))
        if case.startswith("sparse_input"):
            return [F.linear(x.to_sparse(), w.to_dense(), bias)]
        x.requires_grad_("bsr" not in case)     # (PyTorch has no kernel for x's gradient)
        w.requires_grad_()
        out = F.linear(x, w, bias)
        out.pow(2).sum().backward()
        assert out.layout == lib.strided and w.grad.layout == lib.strided
        return [out, w.grad] + ([] if x.grad is None else [x.grad])
    ours, theirs = _both(run)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


_REFUSALS = ["linear_coo_bias", "linear_bad_shape", "matmul_bad_shape", "mv_bad_shape",
             "vector_left_bad_shape", "csr_linear_bad_shape", "csr_linear_bias_bad_shape",
             "csr_linear_3d_bias_bad_shape", "csr_linear_1d_bad_shape",
             "csr_linear_1d_bias_bad_shape", "csc_linear_3d_bad_shape", "csr_mm_bad_shape",
             "csr_mv_bad_shape", "csr_vector_left_bad_shape", "coo_by_coo_bad_shape",
             "csr_sparse_mm_bad_shape", "linear_0d", "bsc_linear", "bsc_linear_3d_bias"]


@pytest.mark.parametrize("case", _REFUSALS)
def test_sparse_product_refusals(case):
    """The errors: a 2-D input with a bias and a COO weight goes through addmm, which refuses
    a dense-by-COO product; bad shapes name the kernel PyTorch reports (addmm, or mv; a
    compressed or sparse-by-sparse product the shapes of its operands as PyTorch runs them);
    a 0-D input; block-compressed weights (no CPU kernel)."""
    def run(lib):
        F = lib.nn.functional
        ws = lib.ones(5, 4).to_sparse()
        wc = lib.ones(4, 5).to_sparse_csr()
        ones = lib.ones
        calls = {"linear_coo_bias": lambda: F.linear(ones(3, 5), ws.t(), ones(4)),
                 "linear_bad_shape": lambda: F.linear(ones(3, 5), ws),
                 "matmul_bad_shape": lambda: ones(3, 5) @ ws.t(),
                 "mv_bad_shape": lambda: ws @ ones(3),
                 "vector_left_bad_shape": lambda: ones(3) @ ws,
                 "csr_linear_bad_shape": lambda: F.linear(ones(3, 4), wc),
                 "csr_linear_bias_bad_shape": lambda: F.linear(ones(3, 4), wc, ones(4)),
                 "csr_linear_3d_bias_bad_shape": lambda: F.linear(ones(2, 3, 4), wc, ones(4)),
                 "csr_linear_1d_bad_shape": lambda: F.linear(ones(4), wc),
                 "csr_linear_1d_bias_bad_shape": lambda: F.linear(ones(4), wc, ones(4)),
                 "csc_linear_3d_bad_shape": lambda: F.linear(ones(2, 3, 4),
                                                             wc.to_dense().to_sparse_csc()),
                 "csr_mm_bad_shape": lambda: lib.mm(wc, ones(4, 2)),
                 "csr_mv_bad_shape": lambda: wc @ ones(4),
                 "csr_vector_left_bad_shape": lambda: ones(3) @ wc,
                 "coo_by_coo_bad_shape": lambda: lib.mm(ws, ones(5, 3).to_sparse()),
                 "csr_sparse_mm_bad_shape": lambda: lib.sparse.mm(wc, ones(4, 2)),
                 "linear_0d": lambda: F.linear(ones(()), ws.t()),
                 "bsc_linear": lambda: F.linear(ones(3, 4), ones(4, 4).to_sparse_bsc((2, 2))),
                 "bsc_linear_3d_bias": lambda: F.linear(ones(2, 3, 4),
                                                        ones(4, 4).to_sparse_bsc((2, 2)),
                                                        ones(4))}
        try:
            calls[case]()
        except RuntimeError as exc:
            return str(exc)
        return None
    ours, theirs = _both(run)
    assert theirs is not None and ours == theirs


def test_sparse_leaf_transposed_gets_a_dense_gradient():
    """``x @ w.t()`` and ``mm(x, w.t())`` with a sparse leaf ``w``: PyTorch's gradient of
    ``w`` is dense (as for ``w @ x``); ember gave a sparse one through the transpose.
    ``sparse.mm`` keeps its sparse gradient."""
    def run(lib):
        x = _x(lib, 3, 5, seed=6)
        out = []
        for fn in (lambda w: lib.mm(x, w.t()), lambda w: x @ w.t(),
                   lambda w: lib.sparse.mm(w.t(), lib.ones(4, 2))):
            w = _pruned(lib, "coo").requires_grad_()
            fn(w).pow(2).sum().backward()
            out.append((str(w.grad.layout).split(".")[-1], w.grad.to_dense().numpy()))
        return out
    ours, theirs = _both(run)
    for (la, a), (lb, b) in zip(ours, theirs):
        assert la == lb
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_linear_with_a_sparse_weight_node_names():
    """The nodes F.linear's sparse paths end in (with a bias, inputs other than 2-D go through
    a transposed addmm: ViewBackward0)."""
    def run(lib):
        F = lib.nn.functional
        w = _pruned(lib, "coo")
        x = _x(lib, 2, 3, 5).requires_grad_()
        b = _x(lib, 4)
        return [F.linear(x, w).grad_fn.name(), F.linear(x[0], w).grad_fn.name(),
                F.linear(x[0, 0], w).grad_fn.name(),
                F.linear(x[0], w.to_sparse_csr(), b).grad_fn.name(),
                F.linear(x, w, b).grad_fn.name(), F.linear(x[0, 0], w, b).grad_fn.name(),
                F.linear(x[None], w.to_sparse_csc(), b).grad_fn.name(),
                F.linear(x[0], w.to_sparse_csc()).grad_fn.name()]
    ours, theirs = _both(run)
    assert ours == theirs
