"""Regressions found by the save/load fuzzer of round 35 (tests/parity/
test_parity_serialization_fuzz_round35.py), checked without PyTorch."""

import io
import pickle

import numpy as np
import pytest

import ember
from ember.utils.safetensors import load as st_load
from ember.utils.safetensors import save as st_save


def _roundtrip(obj, **save_kwargs):
    buf = io.BytesIO()
    ember.save(obj, buf, **save_kwargs)
    buf.seek(0)
    return ember.load(buf)


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "float8_e5m2"])
@pytest.mark.parametrize("storage_first", [False, True])
def test_a_byte_saved_tensor_and_its_untyped_storage_save_together(dtype, legacy,
                                                                   storage_first):
    # PyTorch saves these dtypes' memory as bytes, so a tensor and its untyped storage are
    # one storage of one type (ember refused: "... as different types")
    t = ember.arange(6).to(getattr(ember, dtype))
    objs = [t.untyped_storage(), t, t[2:]] if storage_first else [t, t[2:], t.untyped_storage()]
    out = _roundtrip(objs, _use_new_zipfile_serialization=not legacy)
    storage = out[0] if storage_first else out[2]
    a, b = (out[1], out[2]) if storage_first else (out[0], out[1])
    assert a.dtype is t.dtype and b.storage_offset() == 2 and storage.nbytes() == t.nbytes
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    a.view(ember.uint8)[2 * a.element_size()] = 77          # a write shows in the view
    assert b.view(ember.uint8)[0].item() == 77


def test_a_typed_tensor_and_its_untyped_storage_are_still_refused():
    t = ember.ones(3)
    with pytest.raises(RuntimeError, match="view the same data as different types"):
        ember.save([t, t.untyped_storage()], io.BytesIO())


def test_empty_views_keep_their_storage_offset():
    t = ember.empty((4, 0), dtype=ember.int8)
    v = t.narrow(0, 3, 1)
    assert v.storage_offset() == 3
    out = _roundtrip([t, v])
    assert [(x.shape, x.stride(), x.storage_offset()) for x in out] == [
        ((4, 0), (1, 1), 0), ((1, 0), (1, 1), 3)]


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sparse_tensors_in_the_legacy_format(layout):
    # the legacy format reads the storages after the pickle: the invariants are checked then
    # (they were checked against zeros: "`crow_indices[..., -1] == nnz` is not satisfied")
    dense = ember.tensor([[0.0, 2.0, 0.0], [3.0, 0.0, 4.0]])
    s = dense.to_sparse_csr() if layout == "csr" else dense.to_sparse()
    out = _roundtrip({"s": s}, _use_new_zipfile_serialization=False)["s"]
    assert out.layout is s.layout
    np.testing.assert_array_equal(out.to_dense().numpy(), dense.numpy())


def test_the_legacy_format_still_checks_sparse_invariants():
    bad = ember.sparse_coo_tensor(ember.tensor([[0, 5]]), ember.tensor([1.0, 2.0]), (3,),
                                  check_invariants=False)
    with pytest.raises(RuntimeError):
        _roundtrip(bad, _use_new_zipfile_serialization=False)


def test_mmap_needs_a_path_not_an_open_file(tmp_path):
    path = tmp_path / "x.pt"
    ember.save(ember.ones(2), path)
    with open(path, "rb") as f, pytest.raises(ValueError, match="f must be a file path"):
        ember.load(f, mmap=True)
    assert ember.load(str(path), mmap=True).tolist() == [1.0, 1.0]


def test_mmap_of_a_legacy_file_names_the_option_as_torch():
    buf = io.BytesIO()
    ember.save(ember.ones(2), buf, _use_new_zipfile_serialization=False)
    buf.seek(0)
    with pytest.raises(RuntimeError, match=r"saved with `torch.save\("
                                           r"_use_new_zipfile_serialization=True\)"):
        ember.load(buf, mmap=True)


@pytest.mark.parametrize("protocol", [0, 1])
def test_legacy_files_of_pickle_protocols_0_and_1_load(protocol):
    obj = {"a": [1, 2.5, "s", None], "s": ember.Size([2])}
    assert _roundtrip(obj, pickle_protocol=protocol,
                      _use_new_zipfile_serialization=False) == obj


def test_protocol_1_tensors_load_and_protocol_0_tensors_say_why_not():
    assert _roundtrip(ember.ones(2), pickle_protocol=1).tolist() == [1.0, 1.0]
    for weights_only in (True, False):
        buf = io.BytesIO()
        ember.save(ember.ones(2), buf, pickle_protocol=0)
        buf.seek(0)
        with pytest.raises(pickle.UnpicklingError, match="pickle_protocol=0"):
            ember.load(buf, weights_only=weights_only)


def test_a_damaged_zip_version_field_is_a_clear_error():
    buf = io.BytesIO()
    ember.save({"w": ember.arange(4.0)}, buf)
    data = bytearray(buf.getvalue())
    central = data.rfind(b"PK\x01\x02")         # the last record's central directory entry
    data[central + 6] = 0xFF                    # "version needed": far past zipfile's 6.3
    with pytest.raises(RuntimeError, match="PytorchStreamReader failed reading zip archive"):
        ember.load(io.BytesIO(bytes(data)))


def test_safetensors_keeps_0d_tensors_0d():
    out = st_load(st_save({"s": ember.tensor(2.5), "v": ember.ones(2)}))
    assert out["s"].shape == () and out["s"].item() == 2.5 and out["v"].shape == (2,)
