"""Empty tensors on the GPU: fresh ones are row-major (over memory of their own, on their
device), and a copy between devices keeps an empty tensor's strides, as PyTorch's
preserve_format copy does (values from PyTorch 2.13: its ``.to("meta")`` copies agree)."""

import io

import pytest

import ember

pytestmark = pytest.mark.cuda


def test_fresh_empties_on_a_second_gpu():
    x = ember.zeros(0, 3, device="cuda:1")
    assert (x.stride(), x.t().stride(), (x + 1).stride()) == ((3, 1), (1, 3), (3, 1))
    assert (x + 1).device == ember.device("cuda:1") and x.untyped_storage().nbytes() == 0
    assert ember.ones((), device="cuda:1").expand(0, 2).stride() == (0, 0)
    t = ember.zeros(3, device="cuda:1").set_()
    assert (t.device, t.stride()) == (ember.device("cuda:1"), (1,))


def test_copies_between_devices_keep_empty_strides():
    x = ember.zeros(0, 3).t()
    y = x.to("cuda:1")
    assert (y.stride(), y.device) == ((1, 3), ember.device("cuda:1"))
    assert y.cpu().stride() == (1, 3) and y.to("cuda:0").stride() == (1, 3)
    assert y.to("cuda:0").device == ember.device("cuda:0")
    e = ember.ones(()).expand(0, 2)
    assert e.cuda().stride() == (0, 0) and e.cuda().cpu().stride() == (0, 0)
    assert ember.zeros(2, 0, 3)[:, :, ::2].cuda().stride() == (3, 3, 2)
    assert ember.zeros(0, 3).cuda().stride() == (3, 1)


def test_saved_gpu_empties_have_empty_storages():
    x = ember.zeros(0, 3, device="cuda:1")
    buffer = io.BytesIO()
    ember.save([x, x.t()], buffer)
    buffer.seek(0)
    a, b = ember.load(buffer)
    assert (a.device, a.stride(), b.stride()) == (ember.device("cuda:1"), (3, 1), (1, 3))
    assert a.untyped_storage().nbytes() == 0
