"""What the NLP and search programs of round 24 (test_parity_programs_round24_nlp_search.py and
test_parity_programs_round24_nlp_search_hyper.py) found, each pinned against PyTorch: the norm
of a sparse COO tensor (the gradient-norm logging of word2vec's sparse embedding gradients),
a full reduction over its coalesced values with norm_sparse's errors and its NormBackward1
node, whose backward works for p = 0 and 1 only; LBFGS over sparse gradients; a module's
dtype conversion and a dense gradient accumulated onto a sparse one; PyTorch's operator name
(linalg_vector_norm) in the refusal of sparse operands; and torch.func transforms (grad, vjp,
jvp, jacrev, under vmap too) of functions that close over tensors requiring grad (a learning
rate, a hypernetwork's output), whose results stay in the outer graph."""

import math

import numpy as np
import pytest

import ember
from tests.parity._compare import outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _sparse(lib, values, indices=((1, 2, 1, 4),), size=(6, 3), requires_grad=False):
    """An uncoalesced COO tensor (index 1 twice) and its values tensor."""
    values = lib.tensor(values, requires_grad=requires_grad)
    return lib.sparse_coo_tensor(lib.tensor(indices), values, size), values


VALUES = [[1.0, -2.0, 3.0], [4.0, 5.0, 6.0], [1.0, 1.0, 1.0], [0.0, -3.0, 0.0]]


def _first_line(text):
    # PyTorch's "Could not run" errors go on to list every backend that has the kernel
    return text.split(". This could be")[0].rstrip(".")


def _norm_outcome(lib, fn, values=VALUES, **options):
    def run():
        result = fn(lib, _sparse(lib, values, **options)[0])
        return [round(float(result), 4), str(result.dtype).rsplit(".", 1)[-1],
                list(result.shape)]
    return outcome(run, message=_first_line)


NORMS = {
    "default": lambda lib, s: s.norm(),
    "p1": lambda lib, s: s.norm(1),
    "p2": lambda lib, s: s.norm(2),
    "p3": lambda lib, s: s.norm(p=3),
    "p0": lambda lib, s: s.norm(0),
    "inf": lambda lib, s: s.norm(math.inf),
    "-inf": lambda lib, s: s.norm(-math.inf),
    "p-1": lambda lib, s: s.norm(-1),
    "fro": lambda lib, s: s.norm(p="fro"),
    "torch.norm": lambda lib, s: lib.norm(s, 1),
    "all_dims": lambda lib, s: s.norm(2, dim=(0, 1)),
    "all_dims_negative": lambda lib, s: s.norm(1, dim=[-1, 0]),
    "coalesced": lambda lib, s: s.coalesce().norm(),
    "float64": lambda lib, s: s.double().norm(),
    "float16": lambda lib, s: s.half().norm(),
    "complex": lambda lib, s: (s * (1 + 1j)).norm(),
    "one_dim": lambda lib, s: s.norm(p=2, dim=1),
    "keepdim": lambda lib, s: s.norm(p=2, dim=(0, 1), keepdim=True),
    "dtype": lambda lib, s: s.norm(2, dtype=lib.float64),
    "dtype_fro": lambda lib, s: s.norm(dtype=lib.float64),
    "bad_string": lambda lib, s: s.norm(p="abc"),
    "nuclear": lambda lib, s: s.norm(p="nuc"),
    "integer": lambda lib, s: s.long().norm(),
    "nothing_stored": lambda lib, s: (s * 0).coalesce().norm(),
    "csr": lambda lib, s: s.to_sparse_csr().norm(1),
}


@pytest.mark.parametrize("case", NORMS)
def test_sparse_norm_like_torch(case):
    # implicit zeros count for nothing, even for p <= 0: -inf and -1 see the stored 0
    assert _norm_outcome(ember, NORMS[case]) == _norm_outcome(torch, NORMS[case])


def test_sparse_norm_ignores_unstored_zeros_like_torch():
    def run(lib):
        s, _ = _sparse(lib, [1.0, -2.0, 3.0], indices=((0, 1, 1),), size=(5,))
        return [round(float(s.norm(p)), 5) for p in (-math.inf, -1, 0, 0.5, 1, 2, math.inf)]
    assert run(ember) == run(torch)


@pytest.mark.parametrize("p", [0, 1, 2, 3, 0.5, -1, math.inf, -math.inf, "fro"])
@pytest.mark.parametrize("size", [(6, 3), (6,)])
def test_sparse_norm_backward_like_torch(p, size):
    # PyTorch's derivative of norm_sparse works for p = 0 (no gradient) and 1 (the signs of the
    # coalesced values, back to every stored entry); for the others it calls ops that have no
    # sparse kernel
    def run(lib):
        indices = ((1, 2, 1, 4),) if len(size) == 1 else ((1, 2, 1, 4), (0, 1, 0, 2))
        values = VALUES if len(size) == 2 and len(indices) == 1 else [1.0, -2.0, 3.0, 0.0]
        s, v = _sparse(lib, values, indices=indices, size=size, requires_grad=True)
        out = s.norm(p)

        def backward():
            out.backward()
            return None if v.grad is None else v.grad.tolist()
        return [out.grad_fn.name(), round(out.item(), 4), outcome(backward, message=_first_line)]
    assert run(ember) == run(torch)


def test_sparse_leaf_norm_gradient_is_sparse_like_torch():
    def run(lib):
        s = _sparse(lib, VALUES)[0].requires_grad_()
        s.norm(1).backward()
        g = s.grad.coalesce()
        return [g.layout == lib.sparse_coo, g.indices().tolist(), g.values().tolist()]
    assert run(ember) == run(torch)


def test_sparse_embedding_gradient_norms_like_torch():
    # word2vec's logging: the 2-norm of every parameter's gradient, sparse ones included
    def run(lib):
        rng = np.random.default_rng(0)
        emb = lib.nn.Embedding(7, 3, sparse=True)
        with lib.no_grad():
            emb.weight.copy_(lib.from_numpy(rng.standard_normal((7, 3)).astype(np.float32)))
        emb(lib.tensor([[1, 2, 1], [6, 2, 0]])).pow(2).sum().backward()
        g = emb.weight.grad
        return [round(g.norm(2).item(), 5), round(g.norm(1).item(), 5), g.is_coalesced(),
                outcome(lambda: lib.nn.utils.clip_grad_norm_(emb.parameters(), 1.0),
                        message=None)]
    assert run(ember) == run(torch)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_takes_sparse_gradients_like_torch(line_search_fn):
    # PyTorch's LBFGS flattens a sparse gradient through to_dense (ember's met an empty array)
    def run(lib):
        emb = lib.nn.Embedding(6, 3, sparse=True)
        with lib.no_grad():
            emb.weight.copy_(lib.arange(18.0).reshape(6, 3) / 10)
        target = lib.ones(3, 3)
        opt = lib.optim.LBFGS(emb.parameters(), lr=0.5, max_iter=4,
                              line_search_fn=line_search_fn)

        def closure():
            opt.zero_grad()
            loss = (emb(lib.tensor([1, 2, 1])) - target).pow(2).sum()
            loss.backward()
            return loss
        losses = [round(opt.step(closure).item(), 5) for _ in range(2)]
        return [losses, np.round(emb.weight.detach().numpy(), 5).tolist(),
                opt.state[emb.weight]["func_evals"]]
    assert run(ember) == run(torch)


def _embedding_with_sparse_grad(lib):
    emb = lib.nn.Embedding(6, 3, sparse=True)
    with lib.no_grad():
        emb.weight.copy_(lib.arange(18.0).reshape(6, 3) / 10)
    emb(lib.tensor([1, 2, 1])).pow(2).sum().backward()
    return emb


@pytest.mark.parametrize("convert", ["double", "half", "float"])
def test_module_conversion_keeps_a_sparse_gradient_like_torch(convert):
    # model.double() after a backward through Embedding(sparse=True): the gradient is converted
    # and stays sparse (ember tried to set a sparse tensor's array)
    def run(lib):
        emb = _embedding_with_sparse_grad(lib)
        getattr(emb, convert)()
        g = emb.weight.grad
        return [g.is_sparse, str(g.dtype).rsplit(".", 1)[-1],
                g.to_dense().float().numpy().round(4).tolist()]
    assert run(ember) == run(torch)


@pytest.mark.parametrize("order", ["sparse_then_dense", "dense_then_sparse"])
def test_dense_gradient_accumulates_onto_a_sparse_one_like_torch(order):
    # two backward passes reaching one weight, once through a sparse lookup and once densely
    # (a weight-decay term, a tied output layer): the accumulated gradient is dense
    def run(lib):
        emb = lib.nn.Embedding(6, 3, sparse=True)
        with lib.no_grad():
            emb.weight.copy_(lib.arange(18.0).reshape(6, 3) / 10)
        passes = [lambda: emb(lib.tensor([1, 2, 1])).sum().backward(),
                  lambda: (emb.weight.pow(2).sum() * 0.5).backward()]
        for backward in passes if order == "sparse_then_dense" else passes[::-1]:
            backward()
        g = emb.weight.grad
        return [g.is_sparse, g.to_dense().numpy().round(5).tolist()]
    assert run(ember) == run(torch)


def test_clip_grad_norm_refuses_sparse_gradients_like_torch():
    # PyTorch names its operator linalg_vector_norm (ember said vector_norm); what follows the
    # backend's name differs (PyTorch lists the backends that have the kernel)
    def run(lib):
        emb = _embedding_with_sparse_grad(lib)
        return outcome(lambda: lib.nn.utils.clip_grad_norm_(emb.parameters(), 1.0,
                                                            foreach=False),
                       message=lambda text: text.split(" backend")[0])
    assert run(ember) == run(torch)


CLOSURES = {
    # each: the transform's results from a function closing over lr (requires grad), to be
    # back-propagated to lr
    "grad": lambda lib, lr, x: [lib.func.grad(lambda v: (lr * v ** 2).sum())(x)],
    "grad_and_value": lambda lib, lr, x: list(
        lib.func.grad_and_value(lambda v: (lr * v ** 3).sum())(x)),
    "vmap_grad": lambda lib, lr, x: [
        lib.func.vmap(lib.func.grad(lambda v: (lr * v ** 2).sum()))(x.unsqueeze(1))],
    "vjp": lambda lib, lr, x: (lambda out, fn: [out, *fn(lib.ones(2))])(
        *lib.func.vjp(lambda v: lr * v ** 2, x)),
    "jvp": lambda lib, lr, x: list(lib.func.jvp(lambda v: lr * v ** 2, (x,), (lib.ones(2),))),
    "jacrev": lambda lib, lr, x: [lib.func.jacrev(lambda v: lr * v ** 2)(x)],
    "jacfwd": lambda lib, lr, x: [lib.func.jacfwd(lambda v: lr * v ** 2)(x)],
    "hessian": lambda lib, lr, x: [lib.func.hessian(lambda v: (lr * v ** 3).sum())(x)],
    "aux": lambda lib, lr, x: list(lib.func.grad(
        lambda v: ((lr * v ** 2).sum(), (v * 2, lr * 3)), has_aux=True)(x)[1]),
}


@pytest.mark.parametrize("case", CLOSURES)
def test_func_transforms_keep_closed_over_tensors_in_the_graph_like_torch(case):
    def run(lib):
        lr = lib.tensor(0.1, requires_grad=True)
        results = CLOSURES[case](lib, lr, lib.tensor([1.0, 2.0]))
        flags = [t.requires_grad for t in results]
        total = sum(t.sum() for t in results if t.requires_grad)
        if isinstance(total, (lib.Tensor,)):
            total.backward()
        return [flags, [np.round(t.detach().numpy(), 6).tolist() for t in results],
                None if lr.grad is None else round(lr.grad.item(), 5)]
    assert run(ember) == run(torch)


def test_func_grad_closure_under_no_grad_is_detached_like_torch():
    def run(lib):
        lr = lib.tensor(0.1, requires_grad=True)
        with lib.no_grad():
            g = lib.func.grad(lambda v: (lr * v ** 2).sum())(lib.ones(2))
        return [g.requires_grad, g.tolist()]
    assert run(ember) == run(torch)


def test_per_example_gradients_through_a_hypernetwork_like_torch():
    # the pattern of the hypernetwork program: vmap(grad) of a loss closing over generated
    # weights, then backward into the generator
    def run(lib):
        hyper = lib.nn.Linear(2, 3)
        with lib.no_grad():
            hyper.weight.copy_(lib.arange(6.0).reshape(3, 2) / 10)
            hyper.bias.zero_()
        w = hyper(lib.ones(2))
        xs = lib.arange(12.0).reshape(4, 3) / 10
        per = lib.func.vmap(lib.func.grad(lambda x: (x * w).sum().pow(2)))(xs)
        per.sum().backward()
        return [np.round(per.detach().numpy(), 5).tolist(),
                np.round(hyper.weight.grad.numpy(), 5).tolist()]
    assert run(ember) == run(torch)
