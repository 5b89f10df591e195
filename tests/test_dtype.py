"""dtypes: names, aliases, info objects, the default dtype, and PyTorch's promotion rules."""

import pytest

import ember
from tests.data.promotion_tables import CAN_CAST, PROMOTE_TYPES, RESULT_TYPE

NAMES = list(PROMOTE_TYPES)


def dt(name):
    return getattr(ember, name)


@pytest.mark.parametrize("a", NAMES)
def test_promote_types_table(a):
    got = [ember.promote_types(dt(a), dt(b)).name for b in NAMES]
    assert got == PROMOTE_TYPES[a]


@pytest.mark.parametrize("a", NAMES)
def test_can_cast_table(a):
    assert [b for b in NAMES if ember.can_cast(dt(a), dt(b))] == CAN_CAST[a]


# ember has no complex32 (NumPy has no half-precision complex): it uses complex64 there.
def _ember_name(torch_name):
    return "complex64" if torch_name == "complex32" else torch_name


def _operand(name, kind):
    if name == "scalar":
        return kind
    return ember.zeros(() if kind == "zero" else (2,), dtype=dt(name))


@pytest.mark.parametrize("first,second,expected", RESULT_TYPE,
                         ids=[f"{a}-{b}" for a, b, _ in RESULT_TYPE])
def test_result_type_with_weak_operands(first, second, expected):
    got = ember.result_type(_operand(*first), _operand(*second))
    assert got.name == _ember_name(expected)


@pytest.mark.parametrize("first,second,expected", RESULT_TYPE[::3],
                         ids=[f"{a}-{b}" for a, b, _ in RESULT_TYPE[::3]])
def test_add_follows_result_type(first, second, expected):
    a, b = _operand(*first), _operand(*second)
    if expected == "bool" or "bool" in (first[0], getattr(second, "__getitem__",
                                                          lambda i: None)(0)):
        pytest.skip("bool arithmetic has its own rules")
    assert (a * b).dtype.name == _ember_name(expected)


def test_float8_does_not_promote():
    with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported"):
        ember.promote_types(ember.float8_e4m3fn, ember.float32)
    assert ember.promote_types(ember.float8_e5m2, ember.float8_e5m2) is ember.float8_e5m2


def test_aliases():
    assert ember.float is ember.float32 and ember.double is ember.float64
    assert ember.half is ember.float16 and ember.long is ember.int64
    assert ember.int is ember.int32 and ember.short is ember.int16
    assert ember.cfloat is ember.complex64 and ember.cdouble is ember.complex128
    assert repr(ember.float32) == "ember.float32"


def test_dtype_properties():
    assert ember.float16.is_floating_point and not ember.int8.is_floating_point
    assert ember.complex64.is_complex and not ember.float64.is_complex
    assert ember.bfloat16.itemsize == 2 and ember.complex128.itemsize == 16
    assert ember.float8_e4m3fn.itemsize == 1 and ember.float8_e4m3fn.is_floating_point
    assert ember.uint8.is_signed is False and ember.int8.is_signed


def test_finfo_iinfo():
    f = ember.finfo(ember.float32)
    assert f.bits == 32 and f.eps == 2 ** -23 and f.max == 3.4028234663852886e38
    assert ember.finfo(ember.bfloat16).eps == 2 ** -7
    assert ember.finfo(ember.float16).max == 65504.0
    assert ember.finfo(ember.float8_e4m3fn).max == 448.0
    assert ember.finfo().bits == 32                  # the default dtype
    i = ember.iinfo(ember.int16)
    assert (i.min, i.max, i.bits) == (-32768, 32767, 16)
    assert ember.iinfo(ember.uint8).max == 255
    with pytest.raises(TypeError, match=r"^torch.finfo\(\) requires a floating point input "
                                        r"type. Use torch.iinfo to handle 'torch.finfo'$"):
        ember.finfo(ember.int32)
    with pytest.raises(TypeError, match=r"^torch.iinfo\(\) requires an integer input type. "
                                        r"Use torch.finfo to handle 'torch.iinfo'$"):
        ember.iinfo(ember.float32)


def test_finfo_resolution_and_repr():
    resolutions = {ember.float16: 0.001, ember.bfloat16: 0.01, ember.float32: 1e-06,
                   ember.float64: 1e-15, ember.float8_e4m3fn: 1.0, ember.float8_e5m2: 1.0,
                   ember.complex64: 1e-06}
    for dtype, resolution in resolutions.items():
        assert ember.finfo(dtype).resolution == resolution
    assert repr(ember.finfo(ember.float16)) == (
        "finfo(resolution=0.001, min=-65504, max=65504, eps=0.000976562, "
        "smallest_normal=6.10352e-05, tiny=6.10352e-05, dtype=float16)")
    assert repr(ember.finfo(ember.float8_e4m3fn)) == (
        "finfo(resolution=1, min=-448, max=448, eps=0.125, smallest_normal=0.015625, "
        "tiny=0.015625, dtype=float8_e4m3fn)")


def test_default_dtype_governs_new_floats_and_scalar_promotion():
    assert ember.get_default_dtype() is ember.float32
    assert ember.tensor([1.0]).dtype is ember.float32
    assert (ember.tensor([1, 2]) / 2).dtype is ember.float32
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.tensor([1.0]).dtype is ember.float64
        assert (ember.tensor([1, 2]) / 2).dtype is ember.float64
        assert (ember.tensor([1, 2]) + 0.5).dtype is ember.float64
        assert ember.tensor([1j]).dtype is ember.complex128
        assert (ember.ones(2, dtype=ember.float32) + 0.5).dtype is ember.float32
    finally:
        ember.set_default_dtype(ember.float32)
    assert (ember.tensor([1, 2]) + 0.5).dtype is ember.float32


def test_set_default_dtype_rejects_non_float():
    with pytest.raises(TypeError, match="only floating-point types"):
        ember.set_default_dtype(ember.int64)


def test_weak_scalars_keep_low_precision():
    h = ember.ones(2, dtype=ember.float16)
    assert (h + 1.5).dtype is ember.float16
    assert (ember.ones(2, dtype=ember.uint8) + 300).tolist() == [45, 45]  # wraps like C
    assert (ember.ones(2, dtype=ember.int8) + ember.tensor(1000)).dtype is ember.int8


def test_in_place_cannot_change_category():
    i = ember.tensor([1, 2])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        i += 1.5
    f = ember.ones(2)
    f += ember.tensor([1, 2])
    assert f.dtype is ember.float32 and f.tolist() == [2.0, 3.0]


def test_dtypes_pickle_to_themselves():
    import pickle
    for d in (ember.float32, ember.bfloat16, ember.bool):
        assert pickle.loads(pickle.dumps(d)) is d


def test_promote_types_and_can_cast_check_their_arguments():
    assert ember.promote_types(ember.float32, int) is ember.float32
    assert ember.promote_types(float, ember.int8) is ember.float64
    assert ember.promote_types(complex, bool) is ember.complex128
    assert ember.can_cast(float, int) is False
    with pytest.raises(TypeError, match=r"^can_cast\(\): argument 'to' \(position 2\) must be "
                                        r"torch.dtype, not str$"):
        ember.can_cast(ember.float32, "int")
    with pytest.raises(TypeError, match=r"promote_types\(\): argument 'type2' \(position 2\) "
                                        r"must be torch.dtype, not NoneType"):
        ember.promote_types(ember.float32, None)


def test_to_complex_of_a_non_float_dtype_raises():
    assert ember.float64.to_complex() is ember.complex128
    assert ember.complex64.to_complex() is ember.complex64
    for d, name in ((ember.int64, "Long"), (ember.bool, "Bool"),
                    (ember.float8_e4m3fn, "Float8_e4m3fn")):
        with pytest.raises(RuntimeError, match=f"^Unknown Complex ScalarType for {name}$"):
            d.to_complex()
    assert ember.int64.to_real() is ember.int64


def test_finfo_iinfo_arguments_and_equality():
    assert ember.finfo() == ember.finfo(ember.float32)
    assert ember.finfo(ember.complex64) == ember.finfo(ember.float32)
    assert ember.finfo(ember.float32) != ember.finfo(ember.float64)
    assert ember.iinfo(ember.int8) == ember.iinfo(ember.int8)
    assert ember.iinfo(ember.int8) != ember.iinfo(ember.int16)
    assert ember.finfo(float).dtype == "float64" and ember.iinfo(int).dtype == "int64"
    for fn in (ember.finfo, ember.iinfo):
        for bad, kind in (("float32", "str"), (3, "int"), (None, "NoneType")):
            message = rf"^{fn.__name__}\(\): argument 'type' \(position 1\) must be " \
                rf"torch.dtype, not {kind}$"
            with pytest.raises(TypeError, match=message):
                fn(bad)



def test_low_precision_numpy_dtype_sets_are_defined_once():
    """The NumPy dtypes of the 16-bit floats (and of all low-precision ones) live in _dtype;
    op modules import them instead of building their own equal sets."""
    import importlib
    import pkgutil

    import ml_dtypes
    import numpy as np

    from ember import _dtype as D
    assert D.HALF_NP == {np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)}
    assert D.LOW_PRECISION_NP == D.HALF_NP | {np.dtype(ml_dtypes.float8_e4m3fn),
                                              np.dtype(ml_dtypes.float8_e5m2)}
    copies = []
    packages = [importlib.import_module(f"ember.{p}") for p in ("ops", "optim", "sparse", "nn")]
    for info in (i for package in packages for i in pkgutil.walk_packages(
            package.__path__, package.__name__ + ".")):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, (set, frozenset, tuple)) and value \
                    and all(isinstance(v, np.dtype) for v in value) \
                    and set(value) in (D.HALF_NP, D.LOW_PRECISION_NP) \
                    and value is not D.HALF_NP and value is not D.LOW_PRECISION_NP:
                copies.append(f"{info.name}.{name}")
    assert not copies, f"use ember._dtype's HALF_NP / LOW_PRECISION_NP in {copies}"
