"""Round-16 leftovers checked against PyTorch: SGD's sparse momentum buffer, ``full``'s
unchecked 16-bit fill of one element, amax/amin ties in scatter_reduce and index_reduce with
``include_self=False`` and NaN, ``linalg.cond`` of empty inputs, ``func.jvp`` of a custom
Function without ``jvp``, and the storage offset and strides of empty slices."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(fn):
    """``fn()``'s value as a list, or its error's type and message."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn().tolist()
    except Exception as e:      # noqa: BLE001 (compared as they are)
        return type(e).__name__, str(e)


# --- 1. SGD momentum on a sparse gradient ---------------------------------------------------

def _sgd_sparse(T, **hyper):
    emb = T.nn.Embedding(5, 3, sparse=True)
    with T.no_grad():
        emb.weight.copy_(T.arange(15.0).reshape(5, 3))
    opt = T.optim.SGD(emb.parameters(), lr=0.1, **hyper)
    for rows in ([1, 1, 3], [3, 0]):
        opt.zero_grad()
        (emb(T.tensor(rows)) * T.tensor([1.0, 2.0, 3.0])).sum().backward()
        opt.step()
    return emb.weight.detach(), opt.state[emb.weight]["momentum_buffer"]


@pytest.mark.parametrize("hyper", [dict(momentum=0.9), dict(momentum=0.9, dampening=0.3),
                                   dict(momentum=0.5, nesterov=True),
                                   dict(momentum=0.9, maximize=True)])
def test_sgd_keeps_a_sparse_momentum_buffer_for_a_sparse_gradient(hyper):
    weight, buf = _sgd_sparse(ember, **hyper)
    t_weight, t_buf = _sgd_sparse(torch, **hyper)
    assert buf.is_sparse and t_buf.is_sparse
    assert np.allclose(buf.to_dense().numpy(), t_buf.to_dense().numpy())
    assert np.allclose(weight.numpy(), t_weight.numpy())


# --- 2. full of a too large value -----------------------------------------------------------

_FILLS = {
    "full_1": lambda T: T.full((1,), 70000.0, dtype=T.float16),
    "full_0d": lambda T: T.full((), 70000.0, dtype=T.float16),
    "full_1x1_int": lambda T: T.full((1, 1), 70000, dtype=T.float16),
    "full_1_bf16": lambda T: T.full((1,), 1e39, dtype=T.bfloat16),
    "full_3": lambda T: T.full((3,), 70000.0, dtype=T.float16),
    "full_0": lambda T: T.full((0,), 70000.0, dtype=T.float16),
    "full_1_f32": lambda T: T.full((1,), 1e39, dtype=T.float32),
    "full_1_int8": lambda T: T.full((1,), 300, dtype=T.int8),
    "full_1_complex": lambda T: T.full((1,), 1e39 + 1j, dtype=T.complex64),
    "full_like_1": lambda T: T.full_like(T.zeros(1), 70000.0, dtype=T.float16),
    "full_like_3": lambda T: T.full_like(T.zeros(3), 70000.0, dtype=T.float16),
    "new_full_1": lambda T: T.zeros(3, dtype=T.float16).new_full((1,), 70000.0),
    "fill_1": lambda T: T.zeros(1, dtype=T.float16).fill_(70000.0),
    "fill_3": lambda T: T.zeros(3, dtype=T.float16).fill_(70000.0),
    "masked_fill_1": lambda T: T.zeros(1, dtype=T.float16).masked_fill_(T.ones(1, dtype=T.bool),
                                                                         70000.0),
}


@pytest.mark.parametrize("name", sorted(_FILLS))
def test_full_of_a_too_large_value_as_pytorch(name):
    fill = _FILLS[name]
    assert _outcome(lambda: fill(ember)) == _outcome(lambda: fill(torch))


# --- 3. amax/amin ties ----------------------------------------------------------------------

def _extremum_grads(T, op, reduce, include_self, nan):
    x = T.tensor([[1.0, float("nan") if nan else 3.0, 3.0], [2.0, 2.0, 0.0]],
                 requires_grad=True)
    s = T.tensor([[3.0, 7.0], [0.0, 2.0]], requires_grad=True)
    if op == "scatter_reduce":
        out = s.scatter_reduce(1, T.tensor([[0, 0, 1], [1, 1, 0]]), x, reduce,
                               include_self=include_self)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = s.index_reduce(1, T.tensor([1, 1, 0]), x, reduce, include_self=include_self)
    out.backward(T.tensor([[1.0, 10.0], [100.0, 1000.0]]))
    return x.grad.numpy(), s.grad.numpy()


@pytest.mark.parametrize("nan", [False, True])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("op", ["scatter_reduce", "index_reduce"])
def test_extremum_reduction_gradients_share_ties_as_pytorch(op, reduce, include_self, nan):
    ours = _extremum_grads(ember, op, reduce, include_self, nan)
    theirs = _extremum_grads(torch, op, reduce, include_self, nan)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6)


# --- 4. linalg.cond of an empty input -------------------------------------------------------

@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 3), (0, 0), (0, 2, 2)])
@pytest.mark.parametrize("p", [None, 2, -2, 1, float("inf")])
def test_cond_of_an_empty_input_is_outside_the_graph(shape, p):
    def cond(T):
        r = T.linalg.cond(T.zeros(shape, requires_grad=True), p)
        return r.tolist(), tuple(r.shape), r.requires_grad, r.grad_fn is None
    assert cond(ember) == cond(torch)


# --- 5. func.jvp of a Function without jvp --------------------------------------------------

def _functions(T):
    class WithCtx(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class NoJvp(T.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2
    return WithCtx, NoJvp


_JVP_CALLS = {
    "jvp": lambda T, f: T.func.jvp(f.apply, (T.ones(2),), (T.ones(2),))[1],
    "linearize": lambda T, f: T.func.linearize(f.apply, T.ones(2))[1](T.ones(2)),
    "jvp_of_grad": lambda T, f: T.func.jvp(T.func.grad(lambda x: f.apply(x).sum()),
                                           (T.ones(2),), (T.ones(2),))[1],
    "constant": lambda T, f: T.func.jvp(lambda x: x + f.apply(T.ones(2)), (T.ones(2),),
                                        (T.ones(2),))[1],
    "grad_inside": lambda T, f: T.func.jvp(
        lambda x: x * T.func.grad(lambda y: f.apply(y).sum())(T.ones(2)), (T.ones(2),),
        (T.ones(2),))[1],
}


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("call", sorted(_JVP_CALLS))
def test_jvp_of_a_function_without_jvp_as_pytorch(call, which):
    run = _JVP_CALLS[call]
    ours = _outcome(lambda: run(ember, _functions(ember)[which]))
    theirs = _outcome(lambda: run(torch, _functions(torch)[which]))
    assert ours == theirs


# --- 6. empty slices ------------------------------------------------------------------------

_SLICES = {
    "x[2:2]": lambda x: x[2:2], "x[10:]": lambda x: x[10:], "x[:, 5:3]": lambda x: x[:, 5:3],
    "x[-1:0]": lambda x: x[-1:0], "x[2:2:2]": lambda x: x[2:2:2],
    "x[::2, 3:1]": lambda x: x[::2, 3:1], "x[5:2, 1]": lambda x: x[5:2, 1],
    "x[:, 2:2, 1:]": lambda x: x[:, 2:2, 1:], "x[2:2][:, 1:]": lambda x: x[2:2][:, 1:],
    "x[:, 2:2][1]": lambda x: x[:, 2:2][1], "x[:, -10:-8]": lambda x: x[:, -10:-8],
    "x[1:1, None]": lambda x: x[1:1, None], "t[10:]": lambda x: x.transpose(0, 2)[10:],
    "t[1:1, 1:]": lambda x: x.transpose(0, 2)[1:1, 1:],
}


@pytest.mark.parametrize("name", sorted(_SLICES))
def test_empty_slice_strides_and_storage_offset_as_pytorch(name):
    def geometry(T):
        y = _SLICES[name](T.arange(60.0).reshape(3, 4, 5))
        return tuple(y.shape), tuple(y.stride()), y.storage_offset()
    assert geometry(ember) == geometry(torch)
