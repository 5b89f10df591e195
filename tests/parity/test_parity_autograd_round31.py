"""Autograd and functorch corners against PyTorch (round 31): how many fallback warnings
nested vmaps give for ops PyTorch loops, ``embedding_renorm_`` under both AD modes, the
``out=`` calls of matrix_power and of the inverse FFTs of a real signal with inputs requiring
grad, and the nodes of the in-place foreach ops."""

import importlib
import warnings
from collections import Counter

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same, ember_names, error, first_line, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _warnings(fn):
    """``(result shape, Counter of the fallback warnings' ATen names)`` of ``fn()``, every
    warning recorded."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shape = tuple(fn().shape)
    names = [str(w.message).split("batching rule for ")[1].split(". Please")[0]
             for w in caught if "performance drop" in str(w.message)]
    return shape, Counter(names)


_NESTED = {
    "quantile_vv": lambda lib, x: lib.func.vmap(lib.func.vmap(
        lambda a: lib.quantile(a, lib.tensor([0.2, 0.5]))))(x[0]),
    "quantile_scalar_vv": lambda lib, x: lib.func.vmap(lib.func.vmap(
        lambda a: lib.quantile(a, 0.3)))(x[0]),
    "quantile_vvv": lambda lib, x: lib.func.vmap(lib.func.vmap(lib.func.vmap(
        lambda a: lib.quantile(a, lib.tensor([0.5]), dim=0))))(x),
    "quantile_per_example_q": lambda lib, x: lib.func.vmap(lib.func.vmap(
        lambda a, q: lib.quantile(a, q)))(x[0], x[1, :, :, :2]),
    "masked_scatter_vv": lambda lib, x: lib.func.vmap(lib.func.vmap(
        lambda a, m, s: a.masked_scatter(m, s)))(x[0], x[1] > 0.5, x[0] * 2),
    "masked_scatter_vvv": lambda lib, x: lib.func.vmap(lib.func.vmap(lib.func.vmap(
        lambda a, m, s: a.masked_scatter(m, s))))(x, x > 0.5, x * 2),
    "masked_scatter_unbatched_source": lambda lib, x: lib.func.vmap(lib.func.vmap(
        lambda a, m, s: a.masked_scatter(m, s), in_dims=(0, 0, None)),
        in_dims=(0, 0, None))(x[0], x[1] > 0.5, x[0, 0, 0]),
}


@pytest.mark.parametrize("case", sorted(_NESTED))
def test_nested_vmap_fallback_warning_counts(case):
    data = torch.rand(2, 3, 4, 5, generator=torch.Generator().manual_seed(0))
    want = _warnings(lambda: _NESTED[case](torch, data))
    got = _warnings(lambda: _NESTED[case](ember, ember.tensor(data.numpy())))
    assert got == want
    assert sum(want[1].values()) > 2      # (the count grows with the examples inside)


def _renorm_forward_ad(lib):
    fwad = lib.autograd.forward_ad
    with fwad.dual_level():
        w = fwad.make_dual(lib.ones(5, 3) * 2, lib.ones(5, 3))
        lib.embedding_renorm_(w, lib.tensor([0, 1]), 1.0, 2.0)


def _renorm_jvp(lib):
    return lib.func.jvp(lambda w: lib.embedding_renorm_(w * 1, lib.tensor([0]), 1.0, 2.0),
                        (lib.ones(5, 3),), (lib.ones(5, 3),))


def _renorm_backward(lib):
    w = lib.ones(5, 3, requires_grad=True) * 2
    lib.embedding_renorm_(w, lib.tensor([0, 1]), 1.0, 2.0)
    assert type(w.grad_fn).__name__ == "EmbeddingRenormBackward0"
    assert w._version == 1
    w.sum().backward()


def _renorm_leaf(lib):
    lib.embedding_renorm_(lib.ones(5, 3, requires_grad=True), lib.tensor([0]), 1.0, 2.0)


def _renorm_through_a_view(lib):
    base = lib.ones(5, 3, requires_grad=True) * 2
    view = base[1:]
    lib.embedding_renorm_(view, lib.tensor([0, 1]), 1.0, 2.0)
    assert type(view.grad_fn).__name__ == "AsStridedBackward0"
    assert base._version == 1 and abs(float(base[1, 0]) - 3 ** -0.5) < 1e-6
    base.sum().backward()


def _renorm_view_of_a_leaf(lib):
    lib.embedding_renorm_(lib.ones(5, 3, requires_grad=True)[1:], lib.tensor([0]), 1.0, 2.0)


@pytest.mark.parametrize("program", [_renorm_forward_ad, _renorm_jvp, _renorm_backward,
                                     _renorm_leaf, _renorm_through_a_view,
                                     _renorm_view_of_a_leaf])
def test_embedding_renorm_refusals(program):
    want = error(program, torch)
    assert want is not None
    assert error(program, ember) == (want[0], ember_names(want[1]))


def test_embedding_renorm_values_and_untracked_calls():
    def program(lib):
        w = lib.arange(15.0).reshape(5, 3)
        out = lib.embedding_renorm_(w, lib.tensor([0, 3, 3]), 4.0, 2.0)
        with lib.no_grad():
            x = lib.arange(15.0, requires_grad=True).reshape(5, 3) * 1
        lib.embedding_renorm_(x, lib.tensor([4]), 1.0, 1.0)
        return out is w, w.tolist(), x.grad_fn, x.tolist()
    assert_same(program, catch=())


@pytest.mark.parametrize("module", ["linalg", ""])
@pytest.mark.parametrize("n", [-3, -1, 0, 1, 2, 3])
def test_matrix_power_out_with_grad(module, n):
    def program(lib):
        x = lib.tensor([[2.0, 1.0], [0.5, 3.0]], dtype=lib.float64, requires_grad=True)
        buf = lib.empty(2, 2, dtype=lib.float64)
        fn = getattr(lib.linalg, "matrix_power") if module else lib.matrix_power
        r = fn(x, n, out=buf)
        node = None if buf.grad_fn is None else type(buf.grad_fn).__name__
        grad = None
        if buf.requires_grad:
            (buf * lib.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=lib.float64)).sum().backward()
            grad = x.grad.tolist()
        return r is buf, buf.requires_grad, node, grad, [round(v, 9) for v in
                                                         buf.detach().flatten().tolist()]
    assert_same(program, message=ember_names)


@pytest.mark.parametrize("name", ["ifft", "ihfft", "ifft2", "ihfft2", "fft", "hfft"])
def test_inverse_fft_of_real_signal_out_with_grad(name):
    def program(lib):
        x = lib.tensor([1.0, -2.0, 0.5, 4.0], requires_grad=True)
        dtype = lib.float32 if name == "hfft" else lib.complex64
        buf = lib.empty(0, dtype=dtype)
        arg = x.reshape(2, 2) if name.endswith("2") else x
        getattr(lib.fft, name)(arg, out=buf)
        node = type(buf.grad_fn).__name__
        try:
            buf.abs().sum().backward()
        except RuntimeError as e:
            return node, buf.shape == arg.shape or tuple(buf.shape), str(e)
        return node
    assert_same(program, message=ember_names)


def test_ifft_out_forward_ad_and_recording_out():
    def forward(lib):
        fwad = lib.autograd.forward_ad
        buf = lib.empty(4, dtype=lib.complex64)
        with fwad.dual_level():
            lib.fft.ifft(fwad.make_dual(lib.ones(4), lib.ones(4)), out=buf)

    def into_grad(lib):
        lib.fft.ifft(lib.ones(4), out=lib.empty(4, dtype=lib.complex64, requires_grad=True))
    for program in (forward, into_grad):
        want = error(program, torch)
        assert want is not None
        assert error(program, ember) == (want[0], ember_names(want[1]))


def _node(t):
    return None if t.grad_fn is None else t.grad_fn.name()


_OTHERS = {"Scalar": lambda lib: 2.0, "ScalarList": lambda lib: [2.0, 3.0],
           "List": lambda lib: [lib.tensor([1.0, 5.0, 0.0]), lib.tensor([2.0, 2.0, 2.0])],
           "Tensor": lambda lib: lib.tensor(2.0)}


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "clamp_min", "clamp_max",
                                "maximum", "minimum"])
@pytest.mark.parametrize("kind", sorted(_OTHERS))
def test_inplace_foreach_nodes_and_gradients(op, kind):
    def program(lib):
        leaf = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        xs = [leaf * 1, leaf * 2]
        getattr(lib, f"_foreach_{op}_")(xs, _OTHERS[kind](lib))
        names = [_node(x) for x in xs]
        try:
            (xs[0] + xs[1]).sum().backward()
        except RuntimeError as e:
            return names, str(e)
        return names, [round(v, 6) for v in leaf.grad.tolist()]
    assert_same(program, message=ember_names)


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("value", ["number", "numbers", "tensor", "tensor_requiring_grad"])
def test_foreach_pointwise_value_kinds(name, inplace, value):
    def program(lib):
        leaf = lib.tensor([1.0, 2.0, 3.0], requires_grad=value != "tensor_requiring_grad")
        xs = [leaf * 1, leaf * 2] if leaf.requires_grad else [leaf.clone(), leaf.clone()]
        v = {"number": 2.0, "numbers": [1.0, 2.0], "tensor": lib.tensor([1.0, 2.0]),
             "tensor_requiring_grad": lib.tensor([1.0, 2.0], requires_grad=True)}[value]
        ones = [lib.ones(3), lib.full((3,), 2.0)]
        fn = getattr(lib, f"_foreach_{name}{'_' if inplace else ''}")
        out = fn(xs, ones, ones, v)
        out = xs if inplace else out
        names = [_node(x) for x in out]
        values = [x.detach().tolist() for x in out]
        try:
            out[0].sum().backward()
        except RuntimeError as e:
            return names, values, str(e)
        return names, values
    assert_same(program, message=ember_names)


def _exp_then_write_output(lib):
    xs = [lib.ones(3, requires_grad=True) * 1, lib.ones(3, requires_grad=True) * 1]
    out = lib._foreach_exp(xs)
    out[1].mul_(2)
    (out[0].sum() + out[1].sum()).backward()


def _mul_then_foreach_add(lib):
    xs = [lib.ones(3, requires_grad=True) * 1]
    out = lib._foreach_mul(xs, xs)
    lib._foreach_add_(xs, 1.0)
    out[0].sum().backward()


def _mul_then_add_list(lib):
    xs = [lib.ones(3, requires_grad=True) * 1]
    out = lib._foreach_mul(xs, xs)
    xs[0].add_(lib.ones(3))
    out[0].sum().backward()


def _exp_then_foreach_add_output(lib):
    xs = [lib.ones(3, requires_grad=True) * 1]
    out = lib._foreach_exp(xs)
    lib._foreach_add_(list(out), [lib.ones(3)])
    out[0].sum().backward()


@pytest.mark.parametrize("program", [_exp_then_write_output, _mul_then_foreach_add,
                                     _mul_then_add_list, _exp_then_foreach_add_output])
def test_foreach_saved_tensor_version_errors(program):
    want = error(program, torch)
    assert want is not None and "modified by an inplace operation" in want[1]
    assert error(program, ember) == (want[0], ember_names(want[1]))


def _node_name(t):
    return None if t.grad_fn is None else type(t.grad_fn).__name__


@pytest.mark.parametrize("kind", ["plain", "leaf", "non_leaf"])
def test_linearize_runs_the_function_twice_as_torch(kind):
    def program(lib):
        seen = []

        def f(x):
            seen.append((x.is_leaf, x.requires_grad, _node_name(x), x.sin().requires_grad))
            return (x.sin() * x).sum() + x
        leaf = lib.tensor([0.5, 1.0, 2.0], requires_grad=kind != "plain")
        x = leaf * 1 if kind == "non_leaf" else leaf
        out, jvp_fn = lib.func.linearize(f, x)
        t = jvp_fn(lib.tensor([1.0, -1.0, 0.5]))
        found = None
        if t.requires_grad:         # (a function of the tangents: no path to the primals)
            found = lib.autograd.grad(t.sum(), leaf, allow_unused=True)[0]
        tangent = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        (dt,) = lib.autograd.grad(jvp_fn(tangent).sum(), tangent)
        return (seen, out.requires_grad, _node_name(out), [round(v, 5) for v in out.tolist()],
                [round(v, 5) for v in t.tolist()], t.requires_grad, found,
                [round(v, 5) for v in dt.tolist()])
    assert_same(program, catch=())


def test_linearize_under_no_grad_records_nothing():
    def program(lib):
        x = lib.tensor([0.5, 1.0], requires_grad=True)
        with lib.no_grad():
            out, jvp_fn = lib.func.linearize(lambda a: a.sin(), x)
            t = jvp_fn(lib.ones(2))
        later = jvp_fn(lib.ones(2))
        return out.requires_grad, t.requires_grad, later.requires_grad, \
            [round(v, 6) for v in t.tolist()]
    assert_same(program, catch=())


@pytest.mark.parametrize("linearize_no_grad", [False, True])
@pytest.mark.parametrize("first_call_no_grad", [False, True])
def test_linearize_constants_fold_in_the_first_calls_grad_mode(linearize_no_grad,
                                                                first_call_no_grad):
    def program(lib):
        x = lib.tensor([0.5, 1.0], requires_grad=True)
        with lib.set_grad_enabled(not linearize_no_grad):
            _, jvp_fn = lib.func.linearize(lambda a: a.sin(), x)
        with lib.set_grad_enabled(not first_call_no_grad):
            first = jvp_fn(lib.ones(2))
        later = jvp_fn(lib.ones(2))
        with lib.no_grad():
            quiet = jvp_fn(lib.ones(2))
        of_tangent = jvp_fn(lib.ones(2, requires_grad=True))
        return (first.requires_grad, later.requires_grad, quiet.requires_grad,
                of_tangent.requires_grad, [round(v, 6) for v in later.tolist()])
    assert_same(program, catch=())


@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize("kind", ["Scalar", "ScalarList", "List", "Tensor"])
def test_foreach_extrema_split_ties_and_pass_nan_gradients(name, kind):
    def program(lib):
        x = lib.tensor([0.0, 1.0, 2.0, float("nan")], requires_grad=True)
        other = {"Scalar": 1.0, "ScalarList": [1.0], "Tensor": lib.tensor(1.0),
                 "List": [lib.tensor([1.0, 1.0, 1.0, 1.0])]}[kind]
        (y,) = getattr(lib, f"_foreach_{name}")([x], other)
        y.backward(lib.tensor([1.0, 2.0, 4.0, 8.0]))
        return (_node(y), str(y.dtype).split(".")[1],
                [round(v, 6) for v in y.detach().tolist()[:3]], x.grad.tolist())
    assert_same(program, message=ember_names)


@pytest.mark.parametrize("tangents", ["shape", "dtype", "int", "two", "list"])
def test_linearize_tangent_errors(tangents):
    def program(lib):
        _, jvp_fn = lib.func.linearize(lambda a: a * 2, lib.ones(3))
        bad = {"shape": (lib.ones(4),), "dtype": (lib.ones(3, dtype=lib.float64),),
               "int": (lib.ones(3, dtype=lib.int64),), "two": (lib.ones(3), lib.ones(3)),
               "list": ([lib.ones(3)],)}[tangents]
        jvp_fn(*bad)
    want = error(program, torch)
    assert want is not None
    assert error(program, ember) == (want[0], ember_names(want[1]))


_RECURRENT = {
    "rnn": ("RNN", {}, "float32"), "rnn_relu_2_layers": ("RNN", {"nonlinearity": "relu",
                                                                   "num_layers": 2}, "float32"),
    "gru": ("GRU", {}, "float32"), "gru_bidirectional": ("GRU", {"bidirectional": True},
                                                         "float32"),
    "lstm_float64": ("LSTM", {}, "float64"), "lstm_float32": ("LSTM", {}, "float32"),
    "lstm_proj_float64": ("LSTM", {"proj_size": 2}, "float64"),
    "gru_time_major": ("GRU", {"batch_first": False}, "float32"),
    "rnn_time_major_square": ("RNN", {"batch_first": False}, "float64"),
}


@pytest.mark.parametrize("case", sorted(_RECURRENT))
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_recurrent_layers_per_sample_grads(case, reduction):
    cls, kwargs, dtype = _RECURRENT[case]
    kwargs = dict(kwargs)
    batch_first = kwargs.pop("batch_first", True)
    gen = torch.Generator().manual_seed(0)
    shape = (5, 5, 3) if case.endswith("square") else (2, 5, 3)
    data = torch.randn(*shape, generator=gen, dtype=getattr(torch, dtype)).numpy()
    weights = getattr(torch.nn, cls)(3, 4, batch_first=batch_first, **kwargs).to(
        getattr(torch, dtype)).state_dict()

    def program(lib):
        m = getattr(lib.nn, cls)(3, 4, batch_first=batch_first, **kwargs).to(
            getattr(lib, dtype))
        m.load_state_dict({k: lib.tensor(v.numpy()) for k, v in weights.items()})
        psg = importlib.import_module(lib.__name__ + ".nn.utils._per_sample_grad")
        y = psg.call_for_per_sample_grads(m, loss_reduction=reduction)(lib.tensor(data))[0]
        (y * y).sum().backward()
        return (_node(y), y.detach().numpy(),
                [(n, p.grad_sample.numpy(), p.grad) for n, p in m.named_parameters()])
    got = outcome(program, ember, message=first_line)
    want = outcome(program, torch, message=first_line)
    if isinstance(want[0], str) and want[0].endswith("Error"):
        assert got == want
        return
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
    assert [(n, g) for n, _, g in got[2]] == [(n, g) for n, _, g in want[2]]
    for (_, ours, _), (_, theirs, _) in zip(got[2], want[2]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


_PACKED = {"rnn": ("RNN", {}, "float64"), "gru_bidirectional": ("GRU", {"bidirectional": True},
                                                                 "float64"),
           "lstm_float32_2_layers": ("LSTM", {"num_layers": 2}, "float32"),
           "lstm_proj": ("LSTM", {"proj_size": 2}, "float64")}


@pytest.mark.parametrize("case", sorted(_PACKED))
@pytest.mark.parametrize("lengths", [(4, 2, 1), (2, 4, 1), (3, 3, 3)])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_recurrent_per_sample_grads_of_packed_sequences(case, lengths, reduction):
    cls, kwargs, dtype = _PACKED[case]
    gen = torch.Generator().manual_seed(1)
    data = torch.randn(4, 3, 3, generator=gen, dtype=getattr(torch, dtype)).numpy()
    weights = getattr(torch.nn, cls)(3, 4, **kwargs).to(getattr(torch, dtype)).state_dict()

    def program(lib):
        m = getattr(lib.nn, cls)(3, 4, **kwargs).to(getattr(lib, dtype))
        m.load_state_dict({k: lib.tensor(v.numpy()) for k, v in weights.items()})
        psg = importlib.import_module(lib.__name__ + ".nn.utils._per_sample_grad")
        packed = lib.nn.utils.rnn.pack_padded_sequence(lib.tensor(data), list(lengths),
                                                       enforce_sorted=False)
        out, h = psg.call_for_per_sample_grads(m, batch_size=3, loss_reduction=reduction)(packed)
        h = h[0] if isinstance(h, tuple) else h
        ((out.data * out.data).sum() + (h * h).sum()).backward()
        return (_node(out.data), out.data.detach().numpy(), h.detach().numpy(),
                [(n, p.grad_sample.numpy()) for n, p in m.named_parameters()])
    got = outcome(program, ember, message=first_line)
    want = outcome(program, torch, message=first_line)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5, atol=1e-6)
    assert [n for n, _ in got[3]] == [n for n, _ in want[3]]
    for (_, ours), (_, theirs) in zip(got[3], want[3]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
