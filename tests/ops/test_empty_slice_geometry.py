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


def test_views_of_an_empty_slice_keep_its_place():
    x = ember.arange(60.0).reshape(3, 4, 5)
    e = x[1:1]
    assert _geometry(e.detach()) == ((20, 5, 1), 20)
    assert _geometry(e.view(-1)) == ((1,), 20)
    assert _geometry(e.unsqueeze(1)) == ((20, 20, 5, 1), 20)
    assert _geometry(e.permute(2, 0, 1)) == ((1, 20, 5), 20)
    assert _geometry(e.unsqueeze(0).expand(2, 0, 4, 5)) == ((0, 20, 5, 1), 20)
    assert _geometry(x[1:1, 1:2].squeeze(1)) == ((20, 1), 25)
    assert _geometry(x[2:2:2].transpose(0, 1)) == ((5, 40, 1), 40)     # the step kept too
    assert _geometry(x[0, 1:1].t()) == ((1, 5), 5)


def test_empty_pieces_lie_where_they_start():
    x = ember.arange(60.0).reshape(3, 4, 5)
    assert _geometry(x.narrow(1, 2, 0)) == ((20, 5, 1), 10)
    assert _geometry(x.narrow(0, 3, 0)) == ((20, 5, 1), 60)
    assert _geometry(x.tensor_split([2, 2], 1)[1]) == ((20, 5, 1), 10)
    assert _geometry(x.split([1, 0, 3], 1)[1]) == ((20, 5, 1), 5)
    assert _geometry(x[:, 1:1].unbind(0)[1]) == ((5, 1), 25)
    assert _geometry(x[:, 1:1].diagonal(0, 0, 2)) == ((5, 21), 5)
    assert _geometry(x[:, 2:2].unfold(2, 2, 1)) == ((20, 5, 1, 1), 10)
    assert _geometry(x.to(ember.bfloat16).narrow(1, 3, 0)) == ((20, 5, 1), 15)


def test_as_strided_of_an_empty_slice_starts_at_its_offset():
    x = ember.arange(60.0).reshape(3, 4, 5)
    assert x[1:1].as_strided((2,), (1,)).tolist() == [20.0, 21.0]
    assert x.narrow(2, 3, 0).as_strided((2,), (2,)).tolist() == [3.0, 5.0]


def test_copies_of_an_empty_slice_keep_its_geometry():
    import copy
    import io
    import pickle
    x = ember.arange(60.0).reshape(3, 4, 5)
    assert _geometry(pickle.loads(pickle.dumps(x[1:1]))) == ((20, 5, 1), 20)
    assert _geometry(copy.deepcopy(x[2:2:2])) == ((40, 5, 1), 40)
    buffer = io.BytesIO()
    ember.save([x, x.narrow(1, 3, 0)], buffer)
    buffer.seek(0)
    assert _geometry(ember.load(buffer)[1]) == ((20, 5, 1), 15)


def test_detached_views_keep_their_place_after_their_base_is_gone():
    import gc

    def detached():
        x = ember.arange(60.0).reshape(3, 4, 5)
        return x[1:].detach(), x[1:1].detach()

    rest, empty = detached()
    gc.collect()
    assert _geometry(rest) == ((20, 5, 1), 20) and _geometry(empty) == ((20, 5, 1), 20)
    assert rest.untyped_storage().nbytes() == 240
