"""Top-level utilities against torch (round 15): device parsing and equality, the default
device's reach into tensor/as_tensor/asarray, grad-mode objects, RNG states, and the
tensor-only checks of is_floating_point/is_complex/is_nonzero/numel."""

import pickle

import numpy as np
import pytest

import ember
from tests.parity._compare import ok, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(lib, code):
    """What ``code`` gives with ``t`` bound to ``lib``: the repr of its value (with the
    library's name made neutral) or the error's type and message."""
    return outcome(eval, code, {"t": lib, "pickle": pickle, "np": np},
                   message=lambda text: text.replace("ember", "torch"),
                   describe=lambda value: ok(repr(value).replace("ember.", "torch.")))


DEVICE_CALLS = [
    "t.device('cuda:01')", "t.device(' cuda')", "t.device('cuda:1 ')", "t.device('')",
    "t.device('cpu:')", "t.device('cuda:1:2')", "t.device(':1')", "t.device('cu-da')",
    "t.device('cuda', -1)", "t.device(-1)", "t.device('cuda:-1')",
    "t.device('cuda', 1.0)", "t.device('cuda', '1')", "t.device('cuda', True)",
    "t.device('cuda', np.int64(2))", "t.device('cuda', t.tensor(3))",
    "t.device('cuda:1', 1)", "t.device('cuda', 1)", "t.device('cpu', 0)",
    "t.device('cpu') == 'cpu'", "'cpu' == t.device('cpu')", "t.device('cpu') != 'cpu'",
    "t.device('cpu') == 'xyz'", "{t.device('cpu'): 1}.get('cpu')",
    "t.device('cuda') < t.device('cpu')",
    "t.device('cpu').__reduce__()[1]", "t.device('cuda', 1).__reduce__()[1]",
    "pickle.loads(pickle.dumps(t.device('cuda:3')))",
]


@pytest.mark.parametrize("code", DEVICE_CALLS)
def test_device_construction_and_comparison_as_torch(code):
    assert _outcome(ember, code) == _outcome(torch, code)


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_device_context_stack_is_shared(lib):
    entered = lib.device("meta")
    entered.__enter__()
    lib.device("cpu").__exit__(None, None, None)        # another object leaves the block
    assert lib.zeros(1).device.type == "cpu"
    with pytest.raises(RuntimeError, match="^trying to pop from empty mode stack$"):
        entered.__exit__(None, None, None)


def _placement(lib):
    host = lib.zeros(2, device="cpu")
    array = np.zeros(2)
    lib.set_default_device("meta")
    try:
        moved = [lib.as_tensor(host), lib.asarray(host), lib.as_tensor(array),
                 lib.asarray(array), lib.from_numpy(array), lib.zeros_like(host),
                 lib.as_tensor(host, device="cpu")]
        with pytest.raises(ValueError, match="can't alias tensor from device 'cpu' to 'meta'"):
            lib.asarray(host, copy=False)
    finally:
        lib.set_default_device(None)
    return [t.device.type for t in moved], lib.as_tensor(host) is host


def test_default_device_moves_given_tensors_and_arrays():
    assert _placement(ember) == _placement(torch)
    assert _placement(ember) == (["meta", "meta", "meta", "meta", "cpu", "cpu", "cpu"], True)


def test_default_device_in_a_block_moves_given_tensors():
    for lib in (torch, ember):
        host = lib.zeros(2)
        with lib.device("meta"):
            inside = lib.as_tensor(host).device.type
        assert (inside, lib.as_tensor(host) is host) == ("meta", True)


def test_set_grad_enabled_object_as_torch():
    for lib in (torch, ember):
        made = lib.set_grad_enabled(False)
        try:
            assert repr(made).split(".", 1)[1] == "autograd.grad_mode.set_grad_enabled(mode=False)"
            assert (made.mode, made.prev) == (False, True)
            copy = made.clone()
            assert type(copy) is type(made) and copy.mode is False
        finally:
            lib.set_grad_enabled(True)
        assert lib.inference_mode(False).clone().mode is False


OTHER_CALLS = [
    "t.is_floating_point(1.0)", "t.is_complex(1j)", "t.is_nonzero(1)", "t.numel([1, 2])",
    "t.is_nonzero(t.tensor([]))", "t.is_nonzero(t.tensor([[3]]))",
    "t.Size([2 ** 63 - 1])", "t.Size([np.int64(3), True])",
    "t.Generator().set_state(t.Generator().get_state()[:-1])",
    "t.Generator().set_state(t.zeros(5056, dtype=t.uint8))",
    "hasattr(t, 'char')",
    "t.set_warn_always(1)",
]


@pytest.mark.parametrize("code", OTHER_CALLS)
def test_other_utilities_as_torch(code):
    assert _outcome(ember, code) == _outcome(torch, code)


def test_tensor_compared_with_an_ndarray_under_a_meta_default_device():
    """The array joins the CPU tensor on the host; it is not sent to the default device."""
    def run(lib):
        lib.set_default_device("meta")
        try:
            x = lib.ones(3, device="cpu")
            return (x == np.ones(3, dtype=np.float32)).tolist()
        finally:
            lib.set_default_device(None)
    assert run(ember) == run(torch) == [True, True, True]


@pytest.mark.parametrize("call", [
    lambda T: T.norm_except_dim(T.tensor([3.0, -4.0]), 2, 1),
    lambda T: T.norm_except_dim(T.tensor([3.0, -4.0]), 2, -2),
    lambda T: T.is_autocast_enabled(T.device("cpu")),
    lambda T: T.get_autocast_dtype(T.device("cpu")),
    lambda T: T.set_autocast_enabled(T.device("cpu"), True),
    lambda T: T.is_autocast_enabled(5),
    lambda T: T.is_floating_point(np.ones(2)),
    lambda T: T.set_warn_always(np.bool_(True)),
    lambda T: T.nn.utils.rnn.pad_sequence([np.ones(2)]),
])
def test_review_errors_as_torch(call):
    def outcome(lib):
        try:
            call(lib)
        except Exception as e:      # noqa: BLE001 - the error itself is compared
            return type(e).__name__, str(e).replace("torch.", "ember.")
        return None
    assert outcome(ember) == outcome(torch) is not None
