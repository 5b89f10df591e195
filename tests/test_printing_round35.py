"""Printing and formatting bugs the round-35 repr fuzzer found (expected strings are
PyTorch 2.13's)."""

import warnings

import pytest

import ember


@pytest.fixture(autouse=True)
def _default_print_options():
    ember.set_printoptions(profile="default", sci_mode=None)
    yield
    ember.set_printoptions(profile="default", sci_mode=None)


def _nested(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (the prototype-stage warning)
        return ember.nested.nested_tensor(*args, **kwargs)


# ----- format() ---------------------------------------------------------------------------

def test_conjugate_view_formats_its_value_and_names_tensor_in_errors():
    z = ember.tensor(1.5 + 2j).conj()
    assert f"{z:.1f}" == "1.5-2.0j"
    with pytest.raises(TypeError, match=r"^unsupported format string passed to "
                                        r"Tensor\.__format__$"):
        format(ember.tensor([1j]).conj(), ".2f")
    with pytest.raises(TypeError, match=r"passed to Tensor\.__format__"):
        format(ember.tensor([1 + 1j]).conj().imag, ".2f")


def test_parameter_0d_formats_as_its_repr_not_its_value():
    p = ember.nn.Parameter(ember.tensor(2.5))
    assert format(p, "") == "Parameter containing:\ntensor(2.5000, requires_grad=True)"
    assert f"{p}" == str(p)
    with pytest.raises(TypeError, match=r"passed to Parameter\.__format__"):
        format(p, ".3f")


def test_parameter_of_a_conjugate_view_prints_and_formats_as_a_parameter():
    p = ember.nn.Parameter(ember.tensor([1 + 2j, 3j]).conj())
    assert repr(p) == "Parameter containing:\ntensor([1.-2.j, 0.-3.j], requires_grad=True)"
    q = ember.nn.Parameter(ember.tensor(1 + 2j).conj())
    with pytest.raises(TypeError, match=r"passed to Parameter\.__format__"):
        format(q, ".1f")


def test_meta_0d_tensor_formats_as_its_repr():
    m = ember.tensor(1., device="meta")
    assert format(m, "") == "tensor(..., device='meta', size=())"
    with pytest.raises(TypeError, match=r"passed to Tensor\.__format__"):
        format(m, ".2f")


def test_sparse_tensor_formats_like_a_tensor():
    assert f"{ember.tensor(2.5).to_sparse():.2f}" == "2.50"
    with pytest.raises(TypeError, match=r"passed to Tensor\.__format__"):
        format(ember.eye(2).to_sparse(), ".2f")


def test_plain_0d_format_still_uses_the_value():
    assert f"{ember.tensor(0.25):.3f}" == "0.250"
    assert f"{ember.ones((), requires_grad=True) * 2:.1f}" == "2.0"
    assert f"{ember.tensor(7):03d}" == "007"
    with pytest.raises(TypeError, match=r"passed to Tensor\.__format__"):
        format(ember.ones(2), ".1f")


# ----- nested tensors ---------------------------------------------------------------------

def test_nested_component_suffixes_wrap_at_the_line_width():
    n = _nested([ember.tensor([78.25, 21.5, -782.625], dtype=ember.float64)],
                requires_grad=True)
    assert repr(n) == ("nested_tensor([\n"
                       "  tensor([  78.2500,   21.5000, -782.6250], dtype=ember.float64,\n"
                       "         requires_grad=True)\n"
                       "], requires_grad=True)")


def test_nested_outer_suffix_wraps_at_the_line_width():
    ember.set_printoptions(linewidth=20)
    n = _nested([ember.tensor([1.25, -2.5])], requires_grad=True)
    assert repr(n) == ("nested_tensor([\n"
                       "  tensor([ 1.2500,\n"
                       "          -2.5000],\n"
                       "         requires_grad=True)\n"
                       "],\n"
                       "              requires_grad=True)")


def test_nested_format_spec_names_tensor():
    n = _nested([ember.ones(2)])
    assert f"{n}" == str(n)
    with pytest.raises(TypeError, match=r"passed to Tensor\.__format__"):
        format(n, ".2f")


def test_empty_nested_tensor_keeps_requires_grad():
    n = _nested([], requires_grad=True)
    assert n.requires_grad
    assert repr(n) == "nested_tensor([\n\n], requires_grad=True)"
    n.requires_grad_(False)
    assert not n.requires_grad
    assert not _nested([]).requires_grad


@pytest.mark.parametrize("tensors", [[], [[1, 2]]])
def test_nested_integer_tensor_refuses_requires_grad(tensors):
    dtype = ember.int32 if not tensors else None
    with pytest.raises(RuntimeError, match="^Only Tensors of floating point and complex dtype "
                                           "can require gradients$"):
        _nested(tensors, dtype=dtype, requires_grad=True)


def test_nested_components_take_the_first_ones_dtype():
    n = _nested([ember.ones(1), ember.ones(2, dtype=ember.float64),
                 ember.ones(1, dtype=ember.int64)])
    assert [t.dtype for t in n.unbind()] == [ember.float32] * 3
    assert repr(n) == ("nested_tensor([\n  tensor([1.]),\n  tensor([1., 1.]),\n"
                       "  tensor([1.])\n])")
    m = _nested([ember.ones(1, dtype=ember.int64), ember.ones(1)])
    assert [t.dtype for t in m.unbind()] == [ember.int64] * 2


# ----- storages and type names ------------------------------------------------------------

def test_meta_storage_repr_shows_no_values():
    x = ember.ones(2, device="meta")
    assert repr(x.untyped_storage()) == ("...\n[ember.storage.UntypedStorage(device=meta) "
                                         "of size 8]")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (TypedStorage is deprecated)
        typed = x.storage()
    assert str(typed) == ("...\n[ember.storage.TypedStorage(dtype=ember.float32, "
                          "device=meta) of size 2]")


def test_meta_tensor_type_name_names_the_device():
    assert ember.ones(1, device="meta").type() == "ember.meta.FloatTensor"
    assert ember.typename(ember.ones(1, device="meta", dtype=ember.uint16)) == \
        "ember.meta.UInt16Tensor"
    assert ember.ones(1).type() == "ember.FloatTensor"


def test_empty_nested_clone_and_detach_keep_the_dtype():
    # (review: an empty nested tensor's clone/detach fell back to the default dtype)
    n = _nested([], dtype=ember.float64)
    assert n.clone().dtype == ember.float64
    assert n.detach().dtype == ember.float64
    assert _nested([ember.ones(1, dtype=ember.float64)]).detach().dtype == ember.float64


@pytest.mark.parametrize("dtype", [None, ember.float64])
def test_jagged_nested_tensor_refuses_mixed_dtypes(dtype):
    # (review: PyTorch's jagged layout refuses them, even with a dtype given; strided takes
    # the first one's)
    parts = [ember.ones(1, 2), ember.ones(1, 2, dtype=ember.int64)]
    for make in (ember.nested.nested_tensor, ember.nested.as_nested_tensor):
        with pytest.raises(RuntimeError, match="^When constructing a nested tensor, all "
                                               "tensors in list must have the same dtype$"):
            make(parts, layout=ember.jagged, dtype=dtype)
    assert _nested([ember.ones(1, 2)] * 2, layout=ember.jagged).dtype == ember.float32


def test_meta_tensor_cast_to_a_cpu_legacy_type_is_refused():
    # (review: a legacy type names the CPU; a meta tensor stayed on meta)
    m = ember.ones(1, device="meta")
    with pytest.raises(NotImplementedError, match="^Cannot copy out of meta tensor; no data!$"):
        m.type(ember.DoubleTensor)
    assert m.type(ember.float64).device.type == "meta"
    assert ember.ones(1).type(ember.DoubleTensor).dtype == ember.float64


def test_empty_integer_nested_tensor_refuses_requires_grad_():
    # (review: the flag of an empty one was set whatever its dtype)
    n = _nested([], dtype=ember.int64)
    with pytest.raises(RuntimeError, match="^only Tensors of floating point dtype can require "
                                           "gradients$"):
        n.requires_grad_()
    assert not n.requires_grad
    assert _nested([], dtype=ember.float64).requires_grad_().requires_grad
