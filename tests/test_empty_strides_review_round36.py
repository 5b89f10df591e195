"""Review of the root fix of empty tensors' strides (_storage_place.born_row_major): a fresh
empty tensor lies over memory of one element of its own; its storage, views, set_(),
resize_() and serialization stay PyTorch's (values from PyTorch 2.13)."""
import io

import numpy as np

import ember


def _reloaded(obj):
    buffer = io.BytesIO()
    ember.save(obj, buffer)
    buffer.seek(0)
    return ember.load(buffer)


def test_set_without_source_is_row_major():
    t = ember.zeros(3).set_()
    assert (tuple(t.shape), t.stride(), t.storage_offset()) == ((0,), (1,), 0)
    assert t.unsqueeze(1).stride() == (1, 1) and t.clone().stride() == (1,)
    assert t.untyped_storage().nbytes() == 0
    assert ember.zeros(3, device="meta").set_().stride() == (1,)


def test_fresh_empties_have_empty_storages_and_views_share_them():
    t = ember.zeros(0, 3)
    assert t.untyped_storage().nbytes() == 0 and t.storage_offset() == 0
    v = t.t()
    assert v._base is t and v.stride() == (1, 3)
    assert v.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    e = t.expand(2, 0, 3)
    assert e._base is t and e.stride() == (0, 3, 1) and e.data_ptr() == t.data_ptr()


def test_empty_views_of_real_storages_keep_their_place():
    t = ember.zeros(2, 3)
    v = t[1:1]
    assert v._base is t and (v.stride(), v.storage_offset()) == ((3, 1), 3)
    assert v.untyped_storage().nbytes() == 24
    w = t[:, :0]
    assert w.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    s = ember.empty(0)
    s.set_(t.untyped_storage(), 1, (0,), (1,))
    assert (s.storage_offset(), s.stride(), s.untyped_storage().nbytes()) == (1, (1,), 24)


def test_resize_of_an_empty_tensor_grows_its_storage():
    t = ember.zeros(0)
    t.resize_(4)
    t.fill_(1)
    s = ember.empty(0)
    s.set_(t.untyped_storage(), 0, (4,), (1,))
    assert s.tolist() == [1.0] * 4 and t.untyped_storage().nbytes() == 16
    assert ember.zeros(0).resize_(0, 4).stride() == (4, 1)
    assert ember.zeros(2, 3).resize_(0, 3).t().stride() == (1, 3)


def test_saved_fresh_empties_have_empty_storages():
    # (the element a fresh empty tensor lies over is not its storage's)
    t = ember.zeros(0, 3)
    u = _reloaded(t)
    assert (tuple(u.shape), u.stride(), u.untyped_storage().nbytes()) == ((0, 3), (3, 1), 0)
    a, b = _reloaded([t, t.t()])
    assert (a.stride(), b.stride(), a.untyped_storage().nbytes()) == ((3, 1), (1, 3), 0)
    assert b.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert _reloaded(t.untyped_storage()).nbytes() == 0
    weight = _reloaded(ember.nn.Linear(0, 3).state_dict())["weight"]
    assert (weight.stride(), weight.untyped_storage().nbytes()) == ((1, 1), 0)


def test_saved_empty_views_of_real_storages_keep_them():
    u = _reloaded(ember.ones(()).expand(0, 2))
    assert (u.stride(), u.untyped_storage().nbytes()) == ((0, 0), 4)
    u = _reloaded(ember.zeros(2, 3)[:, :0])
    assert (u.stride(), u.storage_offset(), u.untyped_storage().nbytes()) == ((3, 1), 0, 24)


def test_saved_empty_view_first_keeps_a_shared_one_element_storage():
    # (only the element a fresh empty lies over is left out of its saved storage)
    a = np.ones(1, np.float32)
    empty, whole = _reloaded([ember.from_numpy(a[:0]), ember.from_numpy(a)])
    assert tuple(empty.shape) == (0,) and whole.tolist() == [1.0]
    c = ember.ones(1)
    empty, whole = _reloaded([c[:0], c])
    assert whole.tolist() == [1.0] and empty.untyped_storage().nbytes() == 4
