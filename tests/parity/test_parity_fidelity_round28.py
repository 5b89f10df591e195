"""Round 28 fidelity against PyTorch: logsumexp's dim=() error, conv_transpose's parser errors
for string paddings, the complex-gradient refusals (nan_to_num, silu, geqrf, normal; not their
in-place forms), and the float8 and uint16/32/64 kernels PyTorch's CPU build lacks."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(lib, fn):
    """("ok", result) or (exception type name, message) of ``fn(lib)``."""
    try:
        out = fn(lib)
    except Exception as e:      # noqa: BLE001 (compared with PyTorch's)
        return type(e).__name__, str(e).split("\n")[0]
    return "ok", out


def _same_outcome(fn):
    e, t = _outcome(ember, fn), _outcome(torch, fn)
    if e[0] == "ok" or t[0] == "ok":
        assert e[0] == t[0] == "ok", (e, t)
        return e[1], t[1]
    assert e == t
    return None


# --- logsumexp with dim=() --------------------------------------------------------------------

@pytest.mark.parametrize("shape,keepdim", [((2, 3), False), ((4,), False), ((2, 3, 4), False),
                                           ((), False), ((2, 3), True), ((0, 3), False)])
def test_logsumexp_empty_dims(shape, keepdim):
    data = np.arange(float(np.prod(shape)), dtype=np.float32).reshape(shape) / 7
    got = _same_outcome(lambda lib: lib.logsumexp(lib.tensor(data), (), keepdim=keepdim))
    if got is not None:
        e, t = got
        assert tuple(e.shape) == tuple(t.shape)
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "std", "var", "nansum", "norm"])
def test_other_reductions_reduce_all_for_empty_dims(name):
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    e, t = _same_outcome(lambda lib: getattr(lib, name)(lib.tensor(data), dim=()))
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


# --- conv_transpose with string padding -------------------------------------------------------

@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("padding", ["same", "valid"])
def test_conv_transpose_module_string_padding(nd, padding):
    def build(lib):
        return getattr(lib.nn, f"ConvTranspose{nd}d")(2, 2, 5, padding=padding)
    assert repr(build(ember)) == repr(build(torch))
    assert build(ember).padding == tuple(padding)

    def run(lib):
        return build(lib)(lib.ones((1, 2) + (6,) * nd))
    e, t = _outcome(ember, run), _outcome(torch, run)
    assert e[0] == t[0] == "TypeError"
    assert e[1] == t[1]


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("call", ["kw_pair", "kw_one", "pos_pair", "kw_str", "pos_str",
                                  "kw_list", "kw_float", "late_str", "stride", "opad_pos",
                                  "groups", "dilation"])
def test_conv_transpose_functional_parser_errors(nd, call):
    def run(lib):
        f = getattr(lib.nn.functional, f"conv_transpose{nd}d")
        x, w = lib.ones((1, 2) + (6,) * nd), lib.ones((2, 2) + (3,) * nd)
        return {"kw_pair": lambda: f(x, w, padding=("s", "a")),
                "kw_one": lambda: f(x, w, padding=("s",) * nd),
                "pos_pair": lambda: f(x, w, None, 1, ("s", "a")),
                "kw_str": lambda: f(x, w, padding="same"),
                "pos_str": lambda: f(x, w, None, 1, "valid"),
                "kw_list": lambda: f(x, w, padding=["s"]),
                "kw_float": lambda: f(x, w, padding=1.5),
                "late_str": lambda: f(x, w, padding=(1, "s")),
                "stride": lambda: f(x, w, stride="ab"),
                "opad_pos": lambda: f(x, w, None, 1, 0, ("s",)),
                "groups": lambda: f(x, w, groups="s"),
                "dilation": lambda: f(x, w, dilation=("s",))}[call]()
    assert _same_outcome(run) is None


@pytest.mark.parametrize("nd", [1, 2])
def test_conv_transpose_int_arguments_still_work(nd):
    rng = np.random.default_rng(0)
    xd = rng.standard_normal((1, 2) + (5,) * nd).astype(np.float32)
    wd = rng.standard_normal((2, 3) + (3,) * nd).astype(np.float32)

    def run(lib):
        f = getattr(lib.nn.functional, f"conv_transpose{nd}d")
        return f(lib.tensor(xd), lib.tensor(wd), None, 2, [1] * nd, 1, 1, (1,) * nd)
    e, t = _same_outcome(run)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5, atol=1e-5)


# --- complex gradients PyTorch refuses --------------------------------------------------------

_C = np.array([1 + 2j, np.nan + 1j, complex(np.inf, 0), -0.5 - 1j], dtype=np.complex64)


@pytest.mark.parametrize("case", ["nan_to_num", "nan_to_num_method", "silu", "geqrf",
                                  "normal_mean", "normal_both"])
def test_complex_grad_refused(case):
    def run(lib):
        a = lib.tensor(_C).requires_grad_()
        return {"nan_to_num": lambda: lib.nan_to_num(a),
                "nan_to_num_method": lambda: a.nan_to_num(1.0),
                "silu": lambda: lib.nn.functional.silu(a),
                "geqrf": lambda: lib.geqrf(a.reshape(4, 1)),
                "normal_mean": lambda: lib.normal(a, 1.0),
                "normal_both": lambda: lib.normal(a, lib.ones(4))}[case]()
    e, t = _outcome(ember, run), _outcome(torch, run)
    assert e == t
    assert "does not support automatic differentiation for outputs with complex" in e[1]


@pytest.mark.parametrize("case", ["nan_to_num_", "silu_inplace", "no_grad", "detached", "real"])
def test_complex_grad_not_refused(case):
    def run(lib):
        a = lib.tensor(_C).requires_grad_()
        if case == "nan_to_num_":
            out = (a * 1).nan_to_num_()
        elif case == "silu_inplace":
            out = lib.nn.functional.silu(a[[0, 3]] * 1, inplace=True)
        elif case == "no_grad":
            with lib.no_grad():
                out = a.nan_to_num()
        elif case == "detached":
            out = a.detach().nan_to_num()
        else:
            out = lib.tensor([1.0, float("nan")]).requires_grad_().nan_to_num()
        return out
    e, t = _same_outcome(run)
    assert e.requires_grad == t.requires_grad
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-6)


def test_complex_nan_to_num_inplace_backward():
    def run(lib):
        a = lib.tensor(_C).requires_grad_()
        (a * 2).nan_to_num_().abs().sum().backward()
        return a.grad
    e, t = _same_outcome(run)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


# --- float8 and wide unsigned kernels -------------------------------------------------------

_F8_CASES = {
    "flip0": lambda x, lib: x.flip(0),
    "flip1": lambda x, lib: x.flip(1),
    "flip01": lambda x, lib: x.flip(0, 1),
    "flip_t0": lambda x, lib: x.t().flip(0),
    "flip_t1": lambda x, lib: x.t().flip(1),
    "flip_1d": lambda x, lib: x[0].flip(0),
    "flip_unit": lambda x, lib: x[:, :1].contiguous().flip(1),
    "flip_col": lambda x, lib: x[:, :1].contiguous().flip(0),
    "flip_empty": lambda x, lib: x[:0].flip(1),
    "flip_0d": lambda x, lib: x[0, 0].flip(0),
    "fliplr": lambda x, lib: x.fliplr(),
    "flipud": lambda x, lib: x.flipud(),
    "rot90": lambda x, lib: x.rot90(),
    "triu": lambda x, lib: x.triu(),
    "tril_": lambda x, lib: x.clone().tril_(),
    "triu_empty": lambda x, lib: x[:0].triu(),
    "index_fill": lambda x, lib: x.index_fill(0, lib.tensor([0, 2]), 1.0),
    "index_fill_": lambda x, lib: x.clone().index_fill_(0, lib.tensor([], dtype=lib.long), 1.0),
    "masked_fill": lambda x, lib: x.masked_fill(lib.tensor([True, False, True]), 1.0),
    "masked_fill_": lambda x, lib: x.clone().masked_fill_(lib.tensor([True, False, True]), 1.0),
    "take": lambda x, lib: x.take(lib.tensor([0, 2])),
    "take_empty": lambda x, lib: x.take(lib.tensor([], dtype=lib.long)),
    "put": lambda x, lib: x.put(lib.tensor([0, 2]), x.flatten()[:2]),
    "index_add": lambda x, lib: x.index_add(0, lib.tensor([0, 2]), x[:2]),
    "index_add_empty": lambda x, lib: x.index_add(0, lib.tensor([], dtype=lib.long), x[:0]),
    "scatter": lambda x, lib: x.scatter(0, lib.zeros(1, 2, dtype=lib.long), x[:1, :2]),
    "scatter_value": lambda x, lib: x.scatter(0, lib.zeros(1, 2, dtype=lib.long), 1.0),
    "scatter_add": lambda x, lib: x.scatter_add(0, lib.zeros(1, 2, dtype=lib.long), x[:1, :2]),
    "scatter_empty": lambda x, lib: x.scatter(0, lib.zeros(0, 3, dtype=lib.long), x),
    "scatter_reduce": lambda x, lib: x.scatter_reduce(0, lib.zeros(1, 2, dtype=lib.long),
                                                      x[:1, :2], "amax"),
    "scatter_reduce_excl": lambda x, lib: x.scatter_reduce(
        0, lib.zeros(1, 2, dtype=lib.long), x[:1, :2], "sum", include_self=False),
    "gather": lambda x, lib: x.gather(0, lib.zeros(1, 2, dtype=lib.long)),
    "gather_empty": lambda x, lib: x.gather(0, lib.zeros(0, 3, dtype=lib.long)),
    "masked_scatter": lambda x, lib: x.masked_scatter(lib.ones(3, 3, dtype=lib.bool), x),
    "masked_select": lambda x, lib: x.masked_select(lib.tensor([True, False, True])),
    "nonzero": lambda x, lib: x.nonzero(),
    "nonzero_tuple": lambda x, lib: x.nonzero(as_tuple=True),
    "argwhere": lambda x, lib: lib.argwhere(x),
    "count_nonzero": lambda x, lib: lib.count_nonzero(x),
    "count_nonzero_dim": lambda x, lib: lib.count_nonzero(x, 0),
    "logical_not": lambda x, lib: x.logical_not(),
    "logical_and": lambda x, lib: x.logical_and(x),
    "logical_xor_mixed": lambda x, lib: x.logical_xor(lib.ones(3, 3)),
    "equal_self": lambda x, lib: lib.equal(x, x),
    "equal_copy": lambda x, lib: lib.equal(x, x.clone()),
    "sort": lambda x, lib: x.sort(),
    "argsort": lambda x, lib: x.argsort(),
    "unique": lambda x, lib: x.unique(),
    "index_select": lambda x, lib: x.index_select(0, lib.tensor([0, 2])),
    "roll": lambda x, lib: x.roll(1),
}


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("case", sorted(_F8_CASES))
def test_float8_kernels(dtype, case):
    data = np.array([[1.0, 0.0, -2.0], [0.5, 3.0, 0.0], [4.0, -1.0, 0.25]], dtype=np.float32)

    def run(lib):
        x = lib.tensor(data).to(getattr(lib, dtype))
        out = _F8_CASES[case](x, lib)
        if isinstance(out, bool):
            return out
        return [o.float().numpy() for o in (out if isinstance(out, tuple) else (out,))]
    got = _same_outcome(run)
    if got is not None:
        e, t = got
        if isinstance(t, bool):
            assert e == t
            return
        assert len(e) == len(t)
        for a, b in zip(e, t):
            assert a.shape == b.shape
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
@pytest.mark.parametrize("case", ["rshift", "lshift", "rshift_fn", "irshift", "rrshift",
                                  "lshift_", "invert", "logical_not", "logical_and",
                                  "logical_or_f32", "and", "or", "xor", "rshift_long"])
def test_wide_unsigned_kernels(dtype, case):
    def run(lib):
        u = lib.tensor([1 << 12, 5, 0], dtype=getattr(lib, dtype))
        out = {"rshift": lambda: u >> 2, "lshift": lambda: u << 1,
               "rshift_fn": lambda: lib.bitwise_right_shift(u, 1),
               "irshift": lambda: u.clone().__irshift__(1), "rrshift": lambda: 1 >> u,
               "lshift_": lambda: u.clone().bitwise_left_shift_(1), "invert": lambda: ~u,
               "logical_not": lambda: u.logical_not(), "logical_and": lambda: u.logical_and(u),
               "logical_or_f32": lambda: u.logical_or(lib.ones(3)),
               "and": lambda: u & 3, "or": lambda: u | 3, "xor": lambda: u ^ 3,
               "rshift_long": lambda: u >> lib.tensor([1, 1, 1])}[case]()
        return out.long() if out.dtype != lib.bool else out
    got = _same_outcome(run)
    if got is not None:
        np.testing.assert_array_equal(got[0].numpy(), got[1].numpy())
