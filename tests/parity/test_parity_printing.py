"""repr of tensors against torch's, character by character: element formats over random
dtypes, magnitudes and print options, and the wrappers vmap shows its function."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int8", "uint8", "bool",
          "complex64", "complex128"]


def _values(rng, n):
    """n floats of one of several kinds that choose different notations when printed."""
    kind = rng.integers(0, 5)
    if kind == 0:
        return rng.standard_normal(n) * 10.0 ** rng.integers(-12, 12)
    if kind == 1:
        return rng.integers(-1000, 1000, n).astype(float)
    if kind == 2:
        return np.exp(rng.uniform(-30, 30, n)) * rng.choice([-1, 1], n)
    if kind == 3:
        return rng.choice([0., -0., np.inf, -np.inf, np.nan, 1.5, 1e-7, 3e9], n)
    return rng.standard_normal(n).round(rng.integers(0, 4))


def _build(lib, dtype, real, imag):
    dt = getattr(lib, dtype)
    if dtype.startswith("complex"):
        return lib.complex(lib.tensor(real), lib.tensor(imag)).to(dt)
    if dtype == "bool":
        return lib.tensor(real != 0)
    if dtype.startswith(("int", "uint")):
        return lib.tensor(np.nan_to_num(real).clip(-100, 100).astype(np.int64)).to(dt)
    return lib.tensor(real).to(dt)


def _repr_under(lib, options, dtype, real, imag):
    lib.set_printoptions(profile="default", sci_mode=None)
    try:
        lib.set_printoptions(**options)
        return repr(_build(lib, dtype, real, imag)).replace("ember.", "torch.")
    finally:
        lib.set_printoptions(profile="default", sci_mode=None)


@pytest.mark.parametrize("seed", range(8))
def test_random_tensor_repr_matches_torch(seed):
    rng = np.random.default_rng(seed)
    for _ in range(25):
        shape = tuple(int(rng.choice([0, 1, 2, 3, 7, 40])) for _ in range(rng.integers(0, 4)))
        if rng.random() < 0.2:
            shape = (int(rng.integers(990, 1100)),)
        n = int(np.prod(shape))
        real = _values(rng, n).reshape(shape)
        imag = _values(rng, n).reshape(shape)
        dtype = str(rng.choice(DTYPES))
        options = {}
        if rng.random() < 0.4:
            options = dict(precision=int(rng.integers(0, 8)),
                           threshold=int(rng.choice([5, 50, 1000])),
                           edgeitems=int(rng.integers(1, 4)),
                           linewidth=int(rng.choice([20, 50, 80, 120])),
                           sci_mode=[None, True, False][rng.integers(0, 3)])
        with np.errstate(all="ignore"):
            expected = _repr_under(torch, options, dtype, real, imag)
            got = _repr_under(ember, options, dtype, real, imag)
        assert got == expected, (dtype, shape, options)


def _reprs_inside(lib, transform, x):
    seen = []

    def record(t):
        seen.append(repr(t).replace("ember.", "torch."))
        return t

    transform(lib)(record)(x)
    return seen


@pytest.mark.parametrize("name", ["vmap", "vmap_float64", "nested_vmap", "vmap_grad_input"])
def test_batched_tensor_repr_matches_torch(name):
    transforms = {
        "vmap": lambda lib: lib.vmap,
        "vmap_float64": lambda lib: lib.vmap,
        "nested_vmap": lambda lib: lambda f: lib.vmap(lib.vmap(f)),
        "vmap_grad_input": lambda lib: lib.vmap,
    }
    inputs = {
        "vmap": lambda lib: lib.arange(6.).reshape(2, 3),
        "vmap_float64": lambda lib: lib.ones(2, 2, dtype=lib.float64),
        "nested_vmap": lambda lib: lib.arange(12.).reshape(2, 3, 2),
        "vmap_grad_input": lambda lib: lib.ones(2, 3, requires_grad=True),
    }
    expected = _reprs_inside(torch, transforms[name], inputs[name](torch))
    got = _reprs_inside(ember, transforms[name], inputs[name](ember))
    assert got == expected


def test_batched_tensor_levels_restart_in_each_vmap():
    def lvl_seen(lib):
        return [_reprs_inside(lib, lambda m: m.vmap, lib.ones(2))[0] for _ in range(2)]

    assert lvl_seen(ember) == lvl_seen(torch)
    assert lvl_seen(ember)[1].startswith("BatchedTensor(lvl=1,")


SPARSE = {
    "coo_parameter": lambda lib: lib.nn.Parameter(lib.eye(2).to_sparse()),
    "csr_parameter": lambda lib: lib.nn.Parameter(lib.eye(2).to_sparse_csr()),
    "csr_parameter_no_grad": lambda lib: lib.nn.Parameter(lib.eye(2).to_sparse_csr(),
                                                          requires_grad=False),
    "coo_meta": lambda lib: lib.zeros(2, 2, dtype=lib.float64).to_sparse().to("meta"),
    "csr_meta": lambda lib: lib.zeros(2, 3).to_sparse_csr().to("meta"),
    "coo_meta_parameter": lambda lib: lib.nn.Parameter(lib.zeros(2, 2).to_sparse().to("meta")),
}


@pytest.mark.parametrize("name", sorted(SPARSE))
def test_sparse_repr_matches_torch(name):
    expected = repr(SPARSE[name](torch))
    assert repr(SPARSE[name](ember)).replace("ember.", "torch.") == expected


CLASSES = ["dtype", "device", "Size", "finfo", "iinfo", "layout", "memory_format", "Tensor"]


@pytest.mark.parametrize("name", CLASSES)
def test_class_repr_and_typename_match_torch(name):
    assert repr(getattr(ember, name)).replace("ember", "torch") == repr(getattr(torch, name))
    instance = {"layout": "sparse_coo", "memory_format": "channels_last", "dtype": "int8"}
    if name in instance:
        value = instance[name]
        got = ember.typename(getattr(ember, value)).replace("ember", "torch")
        assert got == torch.typename(getattr(torch, value))


@pytest.mark.parametrize("name", ["strided", "sparse_coo", "sparse_csr"])
def test_layout_survives_pickle_and_copy_as_itself(name):
    import copy
    import pickle

    layout = getattr(ember, name)
    assert pickle.loads(pickle.dumps(layout)) is layout
    assert copy.deepcopy(layout) is layout
    assert pickle.loads(pickle.dumps(getattr(torch, name))) is getattr(torch, name)
