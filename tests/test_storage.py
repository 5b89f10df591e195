"""Tensor.untyped_storage / Tensor.storage and the UntypedStorage / TypedStorage objects: the
memory of a tensor's view root, its size, values, printing and sharing (checked against
PyTorch 2.13; tests/parity/test_parity_storage.py compares with PyTorch directly)."""

import warnings

import pytest

import ember
from ember import _storage
from ember._storage import TypedStorage, UntypedStorage


@pytest.fixture(autouse=True)
def quiet_typed_storage():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "TypedStorage is deprecated", UserWarning)
        yield


def test_untyped_storage_of_a_tensor():
    t = ember.arange(6.0)
    s = t.untyped_storage()
    assert isinstance(s, UntypedStorage)
    assert s.nbytes() == s.size() == len(s) == 24 and s.element_size() == 1
    assert s.data_ptr() == t.data_ptr() and s.device == ember.device("cpu")
    assert s.tolist()[4:8] == [0, 0, 128, 63] and list(s) == s.tolist() and s[7] == 63
    assert s.untyped() is s and not s.is_cuda


def test_a_view_and_its_base_share_one_storage():
    t = ember.arange(12.0).reshape(3, 4)
    for view in (t[1], t[:, 2], t.t(), t[1:, ::2]):
        s = view.untyped_storage()
        assert s.data_ptr() == t.untyped_storage().data_ptr() and s.nbytes() == 48
        assert view.data_ptr() == s.data_ptr() + view.storage_offset() * 4
        assert view.storage().size() == 12
    assert t.clone().untyped_storage().data_ptr() != t.untyped_storage().data_ptr()


def test_typed_storage_of_a_tensor():
    t = ember.tensor([[1, 2], [3, 4]], dtype=ember.int16)
    s = t[1].storage()
    assert isinstance(s, TypedStorage)
    assert s.dtype is ember.int16 and s.size() == len(s) == 4 and s.nbytes() == 8
    assert s.element_size() == 2 and s.tolist() == [1, 2, 3, 4] and list(s) == [1, 2, 3, 4]
    assert s[-1] == 4 and s.data_ptr() == t.data_ptr()
    assert isinstance(s.untyped(), UntypedStorage) and s.untyped().nbytes() == 8
    assert ember.ones(2, dtype=ember.bfloat16).storage().tolist() == [1.0, 1.0]
    assert ember.tensor([True, False]).storage().tolist() == [True, False]


def test_indexing_errors():
    s = ember.arange(4.0).untyped_storage()
    with pytest.raises(IndexError, match="^index 16 out of range for storage of size 16$"):
        s[16]
    with pytest.raises(IndexError, match="^index -1 out of range for storage of size 16$"):
        s[-17]
    with pytest.raises(TypeError, match="^can't index a ember.UntypedStorage with str$"):
        s["a"]


def test_printing():
    assert repr(ember.tensor([0.1, 2.0]).storage()) == (
        " 0.10000000149011612\n 2.0\n"
        "[ember.storage.TypedStorage(dtype=ember.float32, device=cpu) of size 2]")
    assert str(ember.tensor([True]).untyped_storage()) == (
        " 1\n[ember.storage.UntypedStorage(device=cpu) of size 1]")
    assert repr(ember.zeros(0).untyped_storage()) == (
        " \n[ember.storage.UntypedStorage(device=cpu) of size 0]")


def test_storage_warns_once_that_typed_storage_is_deprecated():
    _storage._reset_warn_typed_storage_removal()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ember.ones(2).storage()
        ember.ones(2).storage()
    assert len(caught) == 1 and caught[0].category is UserWarning
    assert str(caught[0].message).startswith("TypedStorage is deprecated. It will be removed")
    assert caught[0].filename == __file__


def test_new_storages():
    assert UntypedStorage(3).tolist() == [0, 0, 0] and UntypedStorage().size() == 0
    s = TypedStorage([1, 2], dtype=ember.int32)
    assert s.dtype is ember.int32 and s.tolist() == [1, 2]
    assert TypedStorage(3, dtype=ember.float64).size() == 3


def test_sharing_through_the_storage():
    t = ember.ones(3)
    s = t.untyped_storage()
    assert not s.is_shared() and not t.storage().is_shared()
    assert s.share_memory_() is s and s.is_shared() and t.is_shared()
    assert s.data_ptr() == t.data_ptr() and t.storage().is_shared()
    e = ember.zeros(0).share_memory_()
    assert e.untyped_storage().nbytes() == 0 and e.untyped_storage().is_shared()


def test_set_shares_a_tensors_or_a_storages_memory():
    a, b = ember.ones(2), ember.arange(6.).view(2, 3)
    assert a.set_(b) is a and a.is_set_to(b) and a._version == 1
    a.add_(1)
    assert b.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    c = ember.ones(2).set_(b.untyped_storage(), 1, (2, 2), (1, 2))
    assert c.tolist() == [[2.0, 4.0], [3.0, 5.0]] and c.storage_offset() == 1
    assert ember.ones(2).set_().shape == (0,)
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 24"):
        ember.ones(2).set_(b.untyped_storage(), 0, (10,))
    with pytest.raises(RuntimeError, match="Could not set tensor of type float to a tensor "
                                           "of type long int"):
        ember.ones(2, dtype=ember.int64).set_(b)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        ember.ones(2, requires_grad=True).set_(b)
    f = ember.ones(3)
    assert f.is_set_to(f[:]) and not f.is_set_to(f[1:]) and not f.is_set_to(f.clone())


def test_from_file_maps_a_file(tmp_path):
    import numpy as np
    path = str(tmp_path / "values.bin")
    np.arange(4, dtype=np.float64).tofile(path)
    private = ember.from_file(path, shared=False, size=4, dtype=ember.float64)
    assert private.tolist() == [0.0, 1.0, 2.0, 3.0] and private.dtype is ember.float64
    private[0] = 100
    assert np.fromfile(path)[0] == 0.0                  # copy on write
    shared = ember.from_file(path, shared=True, size=4, dtype=ember.float64)
    shared[0] = 100
    assert np.fromfile(path)[0] == 100.0                # written through
    assert ember.from_file(path, size=2, dtype=ember.int32).tolist() == [0, 1079574528]
    with pytest.raises(RuntimeError, match=r"size <32> is smaller than the required mapping "
                                           r"size <64>"):
        ember.from_file(path, size=8, dtype=ember.float64)
    created = ember.from_file(str(tmp_path / "new.bin"), shared=True, size=3)
    assert created.tolist() == [0.0, 0.0, 0.0] and created.dtype is ember.float32
    assert (tmp_path / "new.bin").stat().st_size == 12


def test_set_with_tensor_offset_size_and_stride_counts_from_the_tensor():
    base = ember.arange(6.)
    t = ember.empty(0).set_(base[2:], 1, (2,), (2,))
    assert t.tolist() == [3.0, 5.0] and t.storage_offset() == 3 and t.stride() == (2,)
    t[0] = 9
    assert base.tolist() == [0.0, 1.0, 2.0, 9.0, 4.0, 5.0]


@pytest.mark.parametrize("args,kwargs", [((None,), {}), ((None, True, None, None), {}),
                                         ((ember.ones(3), 0), {}), ((ember.ones(3),),
                                                                    {"foo": 1})])
def test_set_refuses_invalid_argument_combinations(args, kwargs):
    with pytest.raises(TypeError, match=r"^set_\(\) received an invalid combination of "
                                        r"arguments - got \("):
        ember.ones(2).set_(*args, **kwargs)
