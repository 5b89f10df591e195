"""``x[key] = value`` against PyTorch: forward-mode tangents, vmap (results and refusals),
inference mode, TorchFunctionMode, and writes of numbers and 0-dim tensors into
low-precision, complex, bool and float8 targets (values and node names)."""

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _run(lib, program):
    """``program(lib, fwAD, func)``'s result, or its error's type and message."""
    try:
        return program(lib, lib.autograd.forward_ad, lib.func)
    except Exception as e:      # noqa: BLE001  (the error is the result compared)
        return ("error", type(e).__name__, str(e).split(" (Triggered internally")[0])


def _plain(t):
    if not hasattr(t, "dtype"):
        return t
    if t is None:
        return None
    wide = str(t.dtype).split(".")[-1] in ("float8_e4m3fn", "bfloat16", "float16")
    return (str(t.dtype).split(".")[-1], tuple(t.shape), tuple(t.stride()),
            (t.float() if wide else t).tolist())


def _tangent_cases():
    def dual_target_number(lib, fw, F):
        with fw.dual_level():
            d = fw.make_dual(lib.zeros(2, 3), lib.ones(2, 3) * 2)
            d[0, 1] = 5.
            return _plain(fw.unpack_dual(d).tangent), d._version

    def plain_target_dual_slice(lib, fw, F):
        with fw.dual_level():
            x = lib.zeros(3, 4)
            x[:, 1:3] = fw.make_dual(lib.ones(3, 2), lib.arange(6.).reshape(3, 2))
            return _plain(fw.unpack_dual(x).tangent)

    def plain_target_dual_fill(lib, fw, F):
        with fw.dual_level():
            x = lib.zeros(3, 4)
            x[1] = fw.make_dual(lib.tensor(2.), lib.tensor(3.))
            x[2, 0] = fw.make_dual(lib.tensor(2., dtype=lib.float64), lib.tensor(4.,
                                   dtype=lib.float64))
            return _plain(fw.unpack_dual(x).tangent)

    def transposed(lib, fw, F):
        with fw.dual_level():
            d = fw.make_dual(lib.zeros(3, 4), lib.arange(12.).reshape(4, 3).t())
            d[1] = fw.make_dual(lib.ones(4), lib.full((4,), 9.))
            x = lib.zeros(3, 2).t()
            x[:] = fw.make_dual(lib.ones(2, 3), lib.arange(6.).reshape(2, 3))
            return _plain(fw.unpack_dual(d).tangent), _plain(fw.unpack_dual(x).tangent)

    def advanced_and_masks(lib, fw, F):
        with fw.dual_level():
            x = lib.zeros(4, 2)
            x[lib.tensor([0, 2])] = fw.make_dual(lib.ones(2, 2), lib.arange(4.).reshape(2, 2))
            d = fw.make_dual(lib.arange(4.), lib.ones(4))
            d[d > 1] = 0.
            y = lib.arange(4.)
            y[y > 1] = fw.make_dual(lib.tensor(2.), lib.tensor(3.))
            return [_plain(fw.unpack_dual(t).tangent) for t in (x, d, y)]

    def complex_and_int_targets(lib, fw, F):
        with fw.dual_level():
            c = lib.zeros(2, 3, dtype=lib.complex64)
            c[1] = fw.make_dual(lib.ones(3), lib.full((3,), 2.))
            i = lib.zeros(2, 3, dtype=lib.int64)
            i[1] = fw.make_dual(lib.ones(3), lib.full((3,), 2.))
            b = lib.zeros(2, 3, dtype=lib.bool)
            b[:, 0] = fw.make_dual(lib.ones(2), lib.full((2,), 2.))
            return (_plain(fw.unpack_dual(c).tangent), fw.unpack_dual(i).tangent,
                    fw.unpack_dual(b).tangent, i.tolist(), b.tolist())

    def inference_mode(lib, fw, F):
        with fw.dual_level():
            d = fw.make_dual(lib.ones(3), lib.full((3,), 2.))
            x = lib.zeros(3)
            with lib.inference_mode():
                d[0] = 5.
                x[1:] = d[1:]
            return _plain(fw.unpack_dual(d).tangent), fw.unpack_dual(x).tangent, x.tolist()

    def no_grad(lib, fw, F):
        with fw.dual_level():
            x = lib.zeros(2, 3)
            with lib.no_grad():
                x[1] = fw.make_dual(lib.ones(3), lib.full((3,), 2.))
            return _plain(fw.unpack_dual(x).tangent)

    def jvp_slices(lib, fw, F):
        def f(x, v):
            y = x.clone()
            y[1:] = v
            return y

        def g(x, v):
            y = x * 2
            y[lib.tensor([0, 2])] = v
            return y

        def h(x):
            y = x.clone()
            y[1:] = 0.
            return y
        a = (lib.arange(3.), lib.tensor([7., 8.]))
        ta = (lib.ones(3), lib.tensor([2., 3.]))
        return ([_plain(t) for t in F.jvp(f, a, ta)], _plain(F.jvp(g, a, ta)[1]),
                _plain(F.jvp(h, a[:1], ta[:1])[1]))

    def jvp_column_and_write_into_input(lib, fw, F):
        def f(x, v):
            y = x.clone()
            y[:, 0] = v
            return y

        def g(x, v):
            x[1:] = v
            return x * 1
        o, t = F.jvp(f, (lib.zeros(2, 3), lib.tensor([7., 8.])),
                     (lib.ones(2, 3), lib.tensor([2., 3.])))
        a, ta = lib.arange(3.), lib.ones(3)
        _, t2 = F.jvp(g, (a, lib.tensor([7., 8.])), (ta, lib.tensor([2., 3.])))
        return _plain(o), _plain(t), _plain(t2), a.tolist(), ta.tolist()

    def jacobians(lib, fw, F):
        def f(x, v):
            y = x.clone()
            y[1:] = v
            return y

        def g(v):
            y = lib.zeros(2, 3)
            y[:, 1] = v
            return y
        return (_plain(F.jacfwd(f, argnums=(0, 1))(lib.arange(3.), lib.tensor([7., 8.]))[1]),
                _plain(F.jacrev(g)(lib.tensor([2., 3.]))))
    return [dual_target_number, plain_target_dual_slice, plain_target_dual_fill, transposed,
            advanced_and_masks, complex_and_int_targets, inference_mode, no_grad, jvp_slices,
            jvp_column_and_write_into_input, jacobians]


@pytest.mark.parametrize("program", _tangent_cases(), ids=lambda p: p.__name__)
def test_tangents_match(program):
    assert _run(ember, program) == _run(torch, program)


def _vmap_cases():
    def make(body, *shapes, in_dims=0):
        def program(lib, fw, F):
            args = [lib.arange(float(lib.tensor(s).prod())).reshape(s) if s else
                    lib.arange(2.) for s in shapes]
            return _plain(F.vmap(lambda *a: body(lib, *a), in_dims=in_dims)(*args))
        program.__name__ = body.__name__
        return program

    def col_number(lib, x):
        x = x.clone()
        x[:, 0] = 5.
        return x

    def ellipsis_zero(lib, x):
        x = x.clone()
        x[...] = 0.
        return x

    def unbatched_value(lib, x):
        x = x.clone()
        x[:, 0] = lib.tensor([7., 8., 9.])
        return x

    def batched_into_unbatched(lib, v):
        x = lib.zeros(3, 4)
        x[:, 0] = v
        return x

    def batched_0d_into_unbatched_row(lib, v):
        x = lib.zeros(3, 4)
        x[0] = v
        return x

    def batched_0d_into_unbatched_elem(lib, v):
        x = lib.zeros(3, 4)
        x[0, 0] = v
        return x

    def batched_into_unbatched_index(lib, v):
        x = lib.zeros(3, 4)
        x[lib.tensor([0, 2])] = v
        return x

    def batched_into_unbatched_mask(lib, v):
        x = lib.zeros(4)
        x[lib.tensor([True, False, True, False])] = v
        return x

    def batched_into_unbatched_ellipsis(lib, v):
        x = lib.zeros(3)
        x[...] = v
        return x

    def both_col(lib, x, v):
        x = x.clone()
        x[:, 0] = v
        return x

    def both_fill(lib, x, v):
        x = x.clone()
        x[1] = v
        return x

    def both_elem(lib, x, v):
        x = x.clone()
        x[1, 2] = v
        return x

    def both_index(lib, x, v):
        x = x.clone()
        x[lib.tensor([0, 2])] = v
        return x

    def batched_mask(lib, x):
        x = x.clone()
        x[x > 1] = 0.
        return x

    def fixed_mask(lib, x):
        x = x.clone()
        x[lib.tensor([True, False, True, False])] = -1.
        return x

    def both_slice_dim1(lib, x, v):
        x = x.clone()
        x[1:] = v
        return x
    return [make(col_number, (2, 3, 4)), make(ellipsis_zero, (2, 3)),
            make(unbatched_value, (2, 3, 4)), make(batched_into_unbatched, (2, 3)),
            make(batched_0d_into_unbatched_row, ()), make(batched_0d_into_unbatched_elem, ()),
            make(batched_into_unbatched_index, (2, 2, 4)), make(batched_into_unbatched_mask, ()),
            make(batched_into_unbatched_ellipsis, (2, 3)), make(both_col, (2, 3, 4), (2, 3)),
            make(both_fill, (2, 3, 4), ()), make(both_elem, (2, 3, 4), ()),
            make(both_index, (2, 3, 4), (2, 2, 4)), make(batched_mask, (2, 4)),
            make(fixed_mask, (2, 4)), make(both_slice_dim1, (3, 2), (2, 2), in_dims=(1, 1))]


@pytest.mark.parametrize("program", _vmap_cases(), ids=lambda p: p.__name__)
def test_vmap_matches(program):
    assert _run(ember, program) == _run(torch, program)


def _modes_and_versions(lib, fw, F):
    class Seen(lib.overrides.TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.seen.append(func.__name__)
            return func(*args, **(kwargs or {}))
    x, v, s = lib.zeros(3, 4), lib.ones(4), lib.tensor(2.)
    versions, seen = [], []
    for key, value in [(0, v), (1, 2.), (2, s), ((2, 0), s), (Ellipsis, v),
                       (lib.tensor([0]), 3.), (True, 1.), (False, 5.)]:
        with Seen() as mode:        # (the version read outside: PyTorch's modes see _version)
            x[key] = value
        seen.append(mode.seen)
        versions.append(x._version)
    with lib.inference_mode():
        x[0] = 7.
        x[1] = v
    y = lib.zeros(3, requires_grad=True)
    with lib.no_grad():
        y[0] = 1.
        y[1:] = lib.ones(2)
    return seen, versions, x._version, x.tolist(), y._version, y.grad_fn, y.tolist()


def test_modes_versions_and_grad_modes_match():
    assert _run(ember, _modes_and_versions) == _run(torch, _modes_and_versions)


_VALUES = {
    "int": lambda lib: 3, "float": lambda lib: 2.7, "big": lambda lib: 1e10,
    "negbig": lambda lib: -1e10, "inf": lambda lib: float("inf"), "cplx": lambda lib: 1 + 2j,
    "bool": lambda lib: True, "t0": lambda lib: lib.tensor(2.7),
    "t0big": lambda lib: lib.tensor(1e10), "t0d": lambda lib: lib.tensor(7e4, dtype=lib.float64),
    "t0c": lambda lib: lib.tensor(1 + 2j), "t0b": lambda lib: lib.tensor(True),
    "t0i": lambda lib: lib.tensor(300), "t1": lambda lib: lib.tensor([1e10, 2.5]),
}
_KEYS = {"row": lambda lib: 0, "col": lambda lib: (slice(None), 1), "elem": lambda lib: (0, 1),
         "adv": lambda lib: lib.tensor([1]), "all": lambda lib: Ellipsis}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "complex64", "bool", "int8",
                                   "float8_e4m3fn", "float8_e5m2"])
def test_dtype_writes_match(dtype):
    def program(lib, fw, F):
        results = []
        for vname, value in _VALUES.items():
            for kname, key in _KEYS.items():
                if vname == "t1" and kname != "col":
                    continue
                dt = getattr(lib, dtype)
                x = lib.zeros(2, 3, dtype=dt)
                if x.is_floating_point() or x.is_complex():
                    x = x.requires_grad_().clone()
                try:
                    x[key(lib)] = value(lib)
                    got = (type(x.grad_fn).__name__ if x.grad_fn else None, _plain(x))
                except Exception as e:      # noqa: BLE001
                    got = (type(e).__name__, str(e).split(" (Triggered")[0])
                results.append((vname, kname, got))
        return results
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _run(ember, program) == _run(torch, program)
