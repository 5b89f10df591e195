"""Review of round 22's gap fixes, compared with PyTorch: views of inference tensors (copies
made by view ops that may copy), float sequence subscripts beyond int64, searchsorted's and
bucketize's non-contiguous warnings for operands they promote, where SDPA's kernel-choice
warnings point, and the legacy constructors' refusal of scalar data."""

import fractions
import warnings

import numpy as np
import pytest

from tests.parity._compare import assert_same_error, assert_same_result

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


# ----- views of inference tensors ------------------------------------------------------------

def test_a_copy_made_by_reshape_of_an_inference_tensor_shares_no_memory():
    def program(lib):
        with lib.inference_mode():
            x = lib.arange(6.).reshape(2, 3)
            y = x.t().reshape(-1)               # cannot be a view: a copy
            y[0] = 100.0
            flat = x.reshape(-1)                # a view (an alias of x's memory)
            flat[1] = -1.0
        shared = y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        return (x.tolist(), y.tolist(), shared, y.storage_offset(), lib.is_inference(y),
                flat.untyped_storage().data_ptr() == x.untyped_storage().data_ptr())
    assert assert_same_result(program)[2:] == (False, 0, True, True)


def test_writes_through_chains_of_inference_aliases_reach_the_base():
    def program(lib):
        with lib.inference_mode():
            x = lib.arange(24.).reshape(2, 3, 4)
            y = x.permute(2, 0, 1)[1:3].transpose(0, 1)[..., ::2]
            y.mul_(10)
            d = x[0].diagonal()
            d.fill_(-1)
        return (x.tolist(), y.storage_offset(), y.stride(), y._is_view(), d._is_view(),
                y.data_ptr() - x.data_ptr())
    assert_same_result(program)


# ----- float sequence subscripts -------------------------------------------------------------

@pytest.mark.parametrize("key", [[1e20], [1.0, 1e19], [float("nan")], [-1e19]],
                         ids=["1e20", "mixed", "nan", "-1e19"])
def test_float_subscripts_beyond_int64_raise_torchs_overflow_error(key):
    assert_same_error(lambda lib, x: x[key], lambda lib: lib.arange(4))


@pytest.mark.parametrize("key", [[2 ** 63], [2 ** 64], [-2 ** 63 - 1]],
                         ids=["2**63", "2**64", "-2**63-1"])
def test_int_subscripts_beyond_int64_raise_torchs_overflow_error(key):
    assert_same_error(lambda lib, x: x[key], lambda lib: lib.arange(4))


def test_float_subscripts_at_the_int64_bounds_index_as_torch():
    for key in ([2.0 ** 63], [-2.0 ** 63], np.array([1e20])):       # converted, then checked
        assert_same_error(lambda lib, x: x[key], lambda lib: lib.arange(4))
    assert assert_same_result(lambda lib: lib.arange(4)[[1.9, -1.5]].tolist()) == [1, 3]


def test_float_subscript_assignment_and_masks_as_torch():
    def program(lib):
        x = lib.zeros(5)
        x[[1.5, 3.2]] = lib.tensor([1.0, 2.0])
        x[np.array([], dtype=float)] = 7.0
        x[[True, False, False, False, True]] += 3.0
        return x.tolist()
    assert_same_result(program)


# ----- searchsorted and bucketize warnings ---------------------------------------------------

def _warnings_of(lib, call):
    lib.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = call(lib).tolist()
    finally:
        lib.set_warn_always(False)
    return result, sorted(str(w.message).split(" (Triggered")[0] for w in caught)


@pytest.mark.parametrize("call", [
    lambda lib: lib.bucketize(lib.tensor([2.5, 6.5]), lib.tensor([1, 0, 3, 0, 7])[::2]),
    lambda lib: lib.searchsorted(lib.tensor([[1, 3, 5, 7], [2, 4, 6, 8]])[:, ::2],
                                 lib.tensor([[2.5], [6.5]])),
    lambda lib: lib.searchsorted(lib.tensor([[1, 3, 5, 7], [2, 4, 6, 8]])[:, :1],
                                 lib.tensor([[2.5], [6.5]])),
], ids=["bucketize", "searchsorted", "searchsorted-last-dim-1"])
def test_promoted_strided_boundaries_warn_as_torch(call):
    result, caught = assert_same_result(lambda lib: _warnings_of(lib, call))
    assert any("boundary tensor is non-contiguous" in m for m in caught)


# ----- SDPA warnings point at the caller -----------------------------------------------------

def test_sdpa_kernel_choice_warnings_point_at_the_caller():
    def program(lib):
        q = lib.ones(2, 3, 4)
        mask = lib.zeros(3, 3, requires_grad=True)
        found = []
        for backend, make_mask in [(lib.nn.attention.SDPBackend.FLASH_ATTENTION, False),
                                   (lib.nn.attention.SDPBackend.FLASH_ATTENTION, True)]:
            with warnings.catch_warnings(record=True) as caught, \
                    lib.nn.attention.sdpa_kernel(backend):
                warnings.simplefilter("always")
                with pytest.raises(RuntimeError, match="No available kernel"):
                    lib.nn.functional.scaled_dot_product_attention(
                        q, q, q, attn_mask=mask if make_mask else None)
            found.append(sorted({w.filename for w in caught}))
        return found
    assert assert_same_result(program) == [[__file__], [__file__]]


# ----- legacy constructors -------------------------------------------------------------------

@pytest.mark.parametrize("data", [fractions.Fraction(1, 2), np.float32(2.0), 2.5, True],
                         ids=["python-class", "numpy-scalar", "float", "bool"])
def test_legacy_constructors_name_refused_scalar_data_as_torch(data):
    assert_same_error(lambda lib, _: lib.Tensor(data), lambda lib: None)
