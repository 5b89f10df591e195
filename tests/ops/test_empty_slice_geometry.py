"""Empty slices keep PyTorch's strides and storage offset (NumPy's empty arrays lose both)."""

import ember


def _geometry(t):
    return tuple(t.stride()), t.storage_offset()


def test_empty_slice_storage_offset_is_where_the_slice_starts():
    x = ember.arange(60.0).reshape(3, 4, 5)
    assert _geometry(x[2:2]) == ((20, 5, 1), 40)
    assert _geometry(x[10:]) == ((20, 5, 1), 60)           # start clamped to the size
    assert _geometry(x[5:2, 1]) == ((20, 1), 65)
    assert _geometry(x[:, 2:2, 1:]) == ((20, 5, 1), 11)
    assert _geometry(x[2:2][:, 1:]) == ((20, 5, 1), 45)    # a slice of an empty slice


def test_empty_slice_stride_keeps_the_step():
    x = ember.arange(60.0).reshape(3, 4, 5)
    assert _geometry(x[2:2:2]) == ((40, 5, 1), 40)
    assert _geometry(x.transpose(0, 2)[1:1, 1:]) == ((1, 5, 20), 6)
