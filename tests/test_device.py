"""Device objects and the default-device context."""

import numpy as np
import pytest

import ember


def test_device_parsing_and_equality():
    assert ember.device("cpu").type == "cpu" and ember.device("cpu").index is None
    d = ember.device("cuda:1")
    assert (d.type, d.index) == ("cuda", 1) and str(d) == "cuda:1"
    assert ember.device("cuda", 1) == d and ember.device("cuda") != d
    assert repr(d) == "device(type='cuda', index=1)"
    assert ember.device(d) is d
    if ember.cuda.is_available():
        assert ember.device(0) == ember.device("cuda:0")
    else:       # as torch: a bare index names the accelerator, and there is none
        with pytest.raises(RuntimeError, match="Cannot access accelerator device"):
            ember.device(0)
    # as torch's: a device never equals a string
    assert ember.device("cpu") != "cpu" and hash(ember.device("cpu")) == hash(ember.device("cpu"))
    with pytest.raises(RuntimeError):
        ember.device("tpu")
    with pytest.raises(RuntimeError):
        ember.device("cuda:x")


def test_default_device_context_manager():
    assert ember.get_default_device() == ember.device("cpu")
    with ember.device("cpu"):
        assert ember.zeros(1).device == ember.device("cpu")
    ember.set_default_device("cpu")
    assert ember.get_default_device().type == "cpu"
    ember.set_default_device(None)


def test_cuda_default_device_requires_cuda():
    if ember.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="not compiled with CUDA enabled"):
        ember.set_default_device("cuda")
    with pytest.raises(RuntimeError, match="not compiled with CUDA enabled"):
        with ember.device("cuda"):
            pass
    assert ember.get_default_device().type == "cpu"


def test_device_constants_are_built_once_per_device_and_read_only():
    from ember.backend import device_constant
    made = []

    def make():
        made.append(1)
        return np.arange(3), np.ones(2)
    like = np.zeros(1)
    first = device_constant(like, ("test table", 3), make)
    again = device_constant(like, ("test table", 3), make)
    assert made == [1] and again is first
    assert first[0].tolist() == [0, 1, 2] and not first[1].flags.writeable


def test_host_input_checks_raise_at_once():
    from ember.backend import device_assert
    device_assert(np.array([1, 2]).min() < 0, lambda: IndexError("never"))
    with pytest.raises(IndexError, match="bad index"):
        device_assert(np.array([1, -2]).min() < 0, lambda: IndexError("bad index"))


def test_device_strings_parsed_strictly_as_pytorch():
    for text in ("cuda:01", " cuda", "cpu:", "cuda:1:2", "cu-da"):
        with pytest.raises(RuntimeError, match=f"^Invalid device string: '{text}'$"):
            ember.device(text)
    with pytest.raises(RuntimeError, match="^Device string must not be empty$"):
        ember.device("")
    with pytest.raises(RuntimeError, match="^Device index must not be negative$"):
        ember.device("cuda", -1)
    with pytest.raises(TypeError, match=r"^device\(\): argument 'index' \(position 2\) must be "
                                        r"int, not bool$"):
        ember.device("cuda", True)
    assert ember.device("cuda", ember.tensor(3)).index == 3
    assert ember.device("cpu").__reduce__() == (ember.device, ("cpu",))


def test_default_device_reaches_tensors_given_to_as_tensor():
    host = ember.zeros(2)
    ember.set_default_device("meta")
    try:
        moved = ember.as_tensor(host), ember.asarray(host), ember.tensor(host.detach())
    finally:
        ember.set_default_device(None)
    assert [t.device.type for t in moved] == ["meta"] * 3
    assert ember.as_tensor(host) is host


def test_device_blocks_share_one_stack():
    ember.device("meta").__enter__()
    ember.device("cpu").__exit__(None, None, None)
    assert ember.get_default_device().type == "cpu"
    with pytest.raises(RuntimeError, match="^trying to pop from empty mode stack$"):
        ember.device("cpu").__exit__(None, None, None)
