"""Random programs over sparse leaves that require grad, run in ember and torch side by side.

A seeded generator writes a program of rounds over a pool of sparse leaves (COO coalesced,
COO with duplicates, CSR): each round builds a scalar loss from a few random chains of sparse
ops (scalar and dense products, coalesce, transpose, narrow_copy, index_select, softmax and
log_softmax) ending in a product (sparse.mm, mm, matmul, addmm, mv, hspmm, smm), a sum or
to_dense, then runs backward; between rounds it registers hooks and post-accumulate hooks,
clears or zeroes gradients, assigns ``.grad`` or steps SGD. The same program runs in both
libraries; after every step each leaf is observed (its values, and its ``.grad``: layout,
dtype, shape, coalesced flag, nnz, indices, values, ``grad is grad``), with the hooks' calls
and any error (type and first line of the message).
"""

import random
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

ROWS, COLS = 4, 4


def _err(exc):
    msg = str(exc).replace("ember.", "torch.").replace("ember", "torch")
    # (PyTorch's dispatcher errors go on with a list of backends, ember's with a hint)
    msg = msg.split("\n")[0].split(" This could be because")[0]
    msg = msg.split(": torch does not support this operator")[0].rstrip(".") + "."
    return ("error", type(exc).__name__, msg[:120])


def _array(lib, x):
    with lib.no_grad():
        return np.array(x.detach().tolist(), dtype=np.float64)


def _sparse_parts(lib, g, accumulated=False):
    """What is observable of a sparse or dense tensor (a gradient). The stored elements of a
    COO one are compared in index order (PyTorch's order follows its kernels' internals);
    an ``accumulated`` one's flag and nnz are not compared (see _LEFT)."""
    layout = str(g.layout).split(".")[-1]
    if layout == "strided":
        return (layout, str(g.dtype), tuple(g.shape), _array(lib, g))
    if layout == "sparse_coo":
        if accumulated:
            return (layout, str(g.dtype), tuple(g.shape), _array(lib, g.to_dense()))
        indices, values = g._indices().tolist(), _array(lib, g._values())
        order = sorted(range(len(values)), key=lambda k: ([row[k] for row in indices],
                                                          values[k]))
        return (layout, str(g.dtype), tuple(g.shape), g.is_coalesced(), g._nnz(),
                [[row[k] for row in indices] for k in order], values[order],
                _array(lib, g.to_dense()))
    return (layout, str(g.dtype), tuple(g.shape), g._nnz(), g.crow_indices().tolist(),
            g.col_indices().tolist(), str(g.crow_indices().dtype), _array(lib, g.values()))


def _observe(lib, leaves, backwards):
    out = []
    for s, n in zip(leaves, backwards):
        g = s.grad
        out.append(("leaf", _array(lib, s.detach().to_dense()), None if g is None else
                    (_sparse_parts(lib, g, n > 1), g is s.grad)))
    return out


# Left as it is: PyTorch accumulates a second sparse gradient with its CPU add_, which appends
# the elements (rather than merging them) when the stored gradient's values are not contiguous
# (sparse.sum's are expanded), so nnz and the coalesced flag of an accumulated COO gradient
# follow its kernels' memory layout; ember sums into the values (the same tensor densely).
# The same holds for two sparse gradients reaching one leaf in one backward (its input buffer
# adds them: appended when one is sparse.sum's, else merged and marked coalesced); and there a
# dense and a sparse gradient are summed before the leaf's hooks run once, where ember runs
# them on each (its values' gradient and its dense stand-in's). A hook's gradient that came
# through a transpose is uncoalesced in PyTorch (ember's is marked coalesced).
# And sparse.mm of two sparse matrices gives an uncoalesced leaf a gradient storing every
# element of the product (zeros outside the leaf's), ember's stores the leaf's elements.
# PyTorch's errors ember does not raise: a dense gradient reaching a CSR leaf whose .grad
# (of an earlier backward, or assigned) is CSR ("Sparse CSR tensors do not have
# is_contiguous"), sparse.mm's backward for a CSC matrix (a CSR leaf's t()), and a CSC
# values()'s backward on some gradients ("crow_indices expected sparse row compressed...").
_LEFT = "accumulated COO gradients: nnz and is_coalesced(); sparse.mm(uncoalesced, sparse)"


# --- the program: a list of steps drawn from a seeded generator ------------------------------

CHAINS = ["mul_scalar", "mul_dense", "coalesce", "t", "narrow_copy", "index_select", "softmax",
          "log_softmax", "neg", "div_scalar"]
ENDS = ["sparse_mm", "mm", "matmul", "addmm", "mv", "hspmm", "smm", "sparse_sum",
        "sparse_sum_dim", "to_dense", "values", "sparse_mm_sparse"]
# PyTorch's backward fails where it should not (kept out of the programs; ember's runs): a
# dense gradient (a product's) reaching sparse.softmax/log_softmax ("coalesce expected sparse
# coordinate tensor layout but got Strided"), and a sparse one reaching narrow_copy (its
# backward runs as_strided on it)
DENSE_ENDS = ["mm", "matmul", "addmm", "mv"]
ACTIONS = ["loss", "loss", "loss", "loss", "hook", "hook_scale", "post_hook", "zero_grad",
           "grad_none", "assign", "sgd", "remove_hook", "read"]


def _program(seed, n_steps=6):
    rng = random.Random(seed)
    steps, csr_grad = [], False
    for _ in range(n_steps):
        kind = rng.choice(ACTIONS)
        leaf = rng.randrange(3)
        if leaf == 2 and kind in ("grad_none", "assign"):
            csr_grad = kind == "assign"
        if kind == "loss":
            terms = []
            for _ in range(rng.choice([1, 1, 2])):
                chain = [rng.choice(CHAINS) for _ in range(rng.choice([0, 0, 1, 2]))]
                end = rng.choice(ENDS)
                if "narrow_copy" in chain:      # (see _torch_bugs)
                    chain = [op for op in chain if "softmax" not in op]
                    end = rng.choice(DENSE_ENDS)
                elif end in DENSE_ENDS:
                    chain = [op for op in chain if "softmax" not in op]
                leaf = rng.randrange(3)
                if (leaf == 1 or chain) and end == "sparse_mm_sparse":
                    end = "sparse_mm"           # (see _LEFT)
                if leaf == 2:                   # (see _LEFT)
                    if csr_grad and end in DENSE_ENDS + ["sparse_sum"]:
                        end = "to_dense"
                    if end in ("sparse_mm", "values"):
                        chain = [op for op in chain if op != "t"]
                    csr_grad = True
                terms.append((leaf, chain, end, rng.random() + 0.5, rng.randrange(4)))
            steps.append(("loss", terms))
        elif kind == "sgd":
            steps.append(("sgd", leaf, rng.choice([0.1, 0.5]), rng.choice([0.0, 0.9])))
        elif kind == "zero_grad":
            steps.append(("zero_grad", leaf, rng.random() < 0.5))
            csr_grad = csr_grad and not (leaf == 2 and steps[-1][2])
        else:
            steps.append((kind, leaf))
    return steps


def _leaves(lib):
    i = lib.tensor([[0, 1, 1, 2, 3], [1, 0, 2, 3, 3]])
    v = lib.tensor([1., 2., -3., 4., 0.5], dtype=lib.float64)
    coalesced = lib.sparse_coo_tensor(i, v, (ROWS, COLS)).coalesce().requires_grad_()
    dup_i = lib.tensor([[2, 0, 2, 1, 3], [1, 3, 1, 0, 0]])
    duplicated = lib.sparse_coo_tensor(dup_i, v * 2, (ROWS, COLS)).requires_grad_()
    crow, col = lib.tensor([0, 2, 3, 3, 5]), lib.tensor([0, 3, 1, 0, 2])
    csr = lib.sparse_csr_tensor(crow, col, v - 1, (ROWS, COLS)).requires_grad_()
    return [coalesced, duplicated, csr]


def _dense(lib, k, shape=(ROWS, COLS)):
    n = int(np.prod(shape))
    return lib.tensor(np.sin(np.arange(n) * (k + 1.3)).reshape(shape), dtype=lib.float64)


def _chain(lib, x, op):  # noqa: C901 - one branch per op
    if op == "mul_scalar":
        return x * 1.5
    if op == "div_scalar":
        return x / 2
    if op == "neg":
        return -x
    if op == "mul_dense":
        return x * _dense(lib, 7, tuple(x.shape))
    if op == "coalesce":
        return x.coalesce()
    if op == "t":
        return x.t()
    if op == "narrow_copy":
        return x.narrow_copy(0, 1, 2)
    if op == "index_select":
        return x.index_select(1, lib.tensor([2, 0, 1]))
    if op == "softmax":
        return lib.sparse.softmax(x, 1)
    if op == "log_softmax":
        return lib.sparse.log_softmax(x, 0)
    raise AssertionError(op)


def _end(lib, x, op, k):  # noqa: C901 - one branch per op
    rows, cols = x.shape
    d = _dense(lib, k, (cols, 3))
    if op == "sparse_mm":
        return lib.sparse.mm(x, d).sum()
    if op == "mm":
        return (lib.mm(x, d) * _dense(lib, k + 1, (rows, 3))).sum()
    if op == "matmul":
        return (x @ d).sum()
    if op == "addmm":
        return lib.addmm(_dense(lib, k, (rows, 3)), x, d, beta=0.5, alpha=2).sum()
    if op == "mv":
        return lib.mv(x, _dense(lib, k, (cols,))).sum()
    if op == "hspmm":
        return lib.hspmm(x, d).to_dense().sum()
    if op == "smm":
        return lib.smm(x, d).sum()
    if op == "sparse_sum":
        return lib.sparse.sum(x)
    if op == "sparse_sum_dim":
        return (lib.sparse.sum(x, 0).to_dense() * _dense(lib, k, (cols,))).sum()
    if op == "to_dense":
        return (x.to_dense() * _dense(lib, k, (rows, cols))).sum()
    if op == "values":
        return (x.values() * x.values()).sum()
    if op == "sparse_mm_sparse":
        return lib.sparse.sum(lib.sparse.mm(x, _dense(lib, k, (cols, 3)).to_sparse()))
    raise AssertionError(op)


def _run(lib, steps):
    """Run the program in ``lib``; the list of what each step showed."""
    leaves, seen, handles, out = _leaves(lib), [], [], []
    backwards = [0, 0, 0]           # gradients each leaf's .grad holds (see _LEFT)
    pending = [0, 0, 0]             # terms of the loss running backward, by leaf
    transposed = [False] * 3        # whether a term transposes the leaf (see _LEFT)
    optimizers = {}

    def hook(tag, scale, leaf):
        def fn(g):
            if pending[leaf] <= 1:      # (see _LEFT)
                seen.append((tag, _sparse_parts(lib, g, transposed[leaf])))
            return None if scale is None else g * scale
        return fn

    def post_hook(tag, leaf):
        def fn(p):
            if pending[leaf] <= 1:      # (see _LEFT)
                seen.append((tag, "post", None if p.grad is None else _sparse_parts(
                    lib, p.grad, backwards[leaf] + pending[leaf] > 1)))
        return fn

    for step in steps:
        kind, shown = step[0], []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if kind == "loss":
                    loss = 0
                    for leaf, chain, end, weight, k in step[1]:
                        x = leaves[leaf]
                        for op in chain:
                            x = _chain(lib, x, op)
                        loss = loss + _end(lib, x, end, k) * weight
                    for term in step[1]:
                        pending[term[0]] += 1
                        transposed[term[0]] |= "t" in term[1]
                    loss.backward()
                    for leaf in range(3):
                        backwards[leaf] += pending[leaf]
                    shown.append(("loss", _array(lib, loss)))
                elif kind == "hook":
                    handles.append(leaves[step[1]].register_hook(hook(len(handles), None,
                                                                       step[1])))
                elif kind == "hook_scale":
                    handles.append(leaves[step[1]].register_hook(hook(len(handles), 2.0,
                                                                       step[1])))
                elif kind == "post_hook":
                    tag, leaf = len(handles), step[1]
                    handles.append(leaves[leaf].register_post_accumulate_grad_hook(
                        post_hook(tag, leaf)))
                elif kind == "remove_hook":
                    if handles:
                        handles.pop(step[1] % len(handles)).remove()
                elif kind == "zero_grad":
                    opt = lib.optim.SGD([leaves[step[1]]], lr=0.1)
                    opt.zero_grad(set_to_none=step[2])
                    backwards[step[1]] = 0 if step[2] else 2
                elif kind == "grad_none":
                    leaves[step[1]].grad = None
                    backwards[step[1]] = 0
                elif kind == "assign":
                    s = leaves[step[1]]
                    s.grad = (s.detach() * 0.25).coalesce() if s.layout == lib.sparse_coo \
                        else s.detach() * 0.25
                    backwards[step[1]] = 1
                elif kind == "sgd":
                    key = step[1:]
                    if key not in optimizers:
                        optimizers[key] = lib.optim.SGD([leaves[step[1]]], lr=step[2],
                                                        momentum=step[3])
                    optimizers[key].step()
                elif kind == "read":
                    g = leaves[step[1]].grad
                    shown.append(("read", None if g is None else g is leaves[step[1]].grad))
        except Exception as exc:  # noqa: BLE001 - the error itself is compared
            shown.append(_err(exc))
            if kind == "loss":      # (what a failed backward accumulated first follows the
                for s in leaves:    # engines' orders: not compared)
                    s.grad = None
                backwards = [0, 0, 0]
        pending[:], transposed[:] = [0, 0, 0], [False] * 3
        shown.append(("hooks", list(seen)))
        seen.clear()
        shown.append(_observe(lib, leaves, backwards))
        out.append(shown)
    return out


def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape \
            and np.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, str):
        return a.replace("ember.", "torch.") == b.replace("ember.", "torch.")
    return a == b


def _first_difference(seed, n_steps=6):
    steps = _program(seed, n_steps)
    got_torch, got_ember = _run(torch, steps), _run(ember, steps)
    for i, (a, b) in enumerate(zip(got_ember, got_torch)):
        if not _same(a, b):
            return steps, i, a, b
    return None


# seeds the round-35 fixes were found with (each failed before), and a sweep
CURATED = [4, 9, 42, 50, 55, 107, 312, 443]


@pytest.mark.parametrize("seed", CURATED + list(range(2000, 2025)))
def test_sparse_program_matches_torch(seed):
    diff = _first_difference(seed)
    assert diff is None, diff


if __name__ == "__main__":          # a long sweep, bucketed by the first differing step
    import collections
    import sys
    buckets = collections.defaultdict(list)
    lo, hi = int(sys.argv[1]), int(sys.argv[2])
    for seed in range(lo, hi):
        diff = _first_difference(seed)
        if diff is not None:
            steps, i, a, b = diff
            buckets[str(steps[min(i // 3, len(steps) - 1)])[:60]].append(seed)
    for key, seeds in sorted(buckets.items(), key=lambda kv: -len(kv[1])):
        print(len(seeds), key, seeds[:8])
    print("programs", hi - lo, "differing", sum(len(s) for s in buckets.values()))
