"""Argument TypeErrors against PyTorch's parser: the first line of the message of each call
with a str, float, None, float tensor or list where an int or a tuple of ints belongs, in the
method and the function forms."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_BAD = {"str": lambda lib: "a", "float": lambda lib: 1.5, "None": lambda lib: None,
        "float tensor": lambda lib: lib.tensor(1.5), "list": lambda lib: [0]}

_CALLS = {
    "x.sum(b)": lambda L, x, b: x.sum(b),
    "sum(x, (0, b))": lambda L, x, b: L.sum(x, (0, b)),
    "mean(x, b)": lambda L, x, b: L.mean(x, b),
    "x.cumsum(b)": lambda L, x, b: x.cumsum(b),
    "cumprod(x, b)": lambda L, x, b: L.cumprod(x, b),
    "x.argmax(b)": lambda L, x, b: x.argmax(b),
    "argmin(x, b)": lambda L, x, b: L.argmin(x, b),
    "x.narrow(b, 0, 1)": lambda L, x, b: x.narrow(b, 0, 1),
    "narrow(x, 0, b, 1)": lambda L, x, b: L.narrow(x, 0, b, 1),
    "x.narrow(0, 0, b)": lambda L, x, b: x.narrow(0, 0, b),
    "x.movedim(b, 0)": lambda L, x, b: x.movedim(b, 0),
    "movedim(x, 0, b)": lambda L, x, b: L.movedim(x, 0, b),
    "x.roll(b)": lambda L, x, b: x.roll(b),
    "roll(x, 1, b)": lambda L, x, b: L.roll(x, 1, b),
    "x.split(b)": lambda L, x, b: x.split(b),
    "x.split(2, b)": lambda L, x, b: x.split(2, b),
    "x.chunk(b)": lambda L, x, b: x.chunk(b),
    "chunk(x, 2, b)": lambda L, x, b: L.chunk(x, 2, b),
    "x.squeeze(b)": lambda L, x, b: x.squeeze(b) if b is not None else x.squeeze((0, b)),
    "x.flip(b)": lambda L, x, b: x.flip(b),
    "x.flip(0, b)": lambda L, x, b: x.flip(0, b),
    "x.permute(b)": lambda L, x, b: x.permute(b),
    "x.permute(b, 0)": lambda L, x, b: x.permute(b, 0),
    "permute(x, (b, 0))": lambda L, x, b: L.permute(x, (b, 0)),
    "x.repeat(b)": lambda L, x, b: x.repeat(b),
    "x.expand(b)": lambda L, x, b: x.expand(b) if b != [0] else x.expand((b, 4)),
    "x.view(b)": lambda L, x, b: x.view(b),
    "x.view((4, b))": lambda L, x, b: x.view((4, b)),
    "x.reshape(b, 4)": lambda L, x, b: x.reshape(b, 4),
    "reshape(x, b)": lambda L, x, b: L.reshape(x, b),
    "x.size(b)": lambda L, x, b: x.size(b),
    "x.stride(b)": lambda L, x, b: x.stride(b),
    "x.topk(b)": lambda L, x, b: x.topk(b),
    "topk(x, 1, b)": lambda L, x, b: L.topk(x, 1, b),
    "x.sort(b)": lambda L, x, b: x.sort(b),
    "x.softmax(b)": lambda L, x, b: x.softmax(b),
    "F.softmax(x, b)": lambda L, x, b: L.nn.functional.softmax(x, b),
    "log_softmax(x, b)": lambda L, x, b: L.log_softmax(x, b),
    "x.gather(b, i)": lambda L, x, b: x.gather(b, L.zeros(4, 4, dtype=L.long)),
    "index_select(x, b, i)": lambda L, x, b: L.index_select(x, b, L.zeros(2, dtype=L.long)),
    "x.diagonal(b)": lambda L, x, b: x.diagonal(b),
    "diagonal(x, 0, b)": lambda L, x, b: L.diagonal(x, 0, b),
    "x.tril(b)": lambda L, x, b: x.tril(b),
    "triu(x, b)": lambda L, x, b: L.triu(x, b),
    "x.tril_(b)": lambda L, x, b: x.tril_(b),
    "x.tile(b)": lambda L, x, b: x.tile(b) if b != [0] else x.tile((0, b)),
}


def _first_line(lib, call, bad):
    x = lib.arange(16.).reshape(4, 4)
    try:
        call(lib, x, _BAD[bad](lib))
    except Exception as e:                  # noqa: BLE001 - the error itself is compared
        return type(e).__name__, str(e).splitlines()[0]
    return "no error", ""


@pytest.mark.parametrize("bad", list(_BAD))
@pytest.mark.parametrize("name", list(_CALLS))
def test_argument_errors_match(name, bad):
    call = _CALLS[name]
    ours = _first_line(ember, call, bad)
    theirs = _first_line(torch, call, bad)
    assert ours == (theirs[0], theirs[1].replace("torch.", "ember.")), name


class _Index:
    """An object with ``__index__`` only: a SymInt or an int[] element, not an int."""

    def __index__(self):
        return 1


def _shapes(value):
    return tuple(value.shape) if hasattr(value, "shape") else [tuple(v.shape) for v in value]


# calls whose outcome (the shapes, or the error's first line) must match PyTorch's
_ACCEPT_OR_REFUSE = {
    "sum(x, (0, True))": lambda L, x: L.sum(x, (0, True)),
    "x.mean([0, True])": lambda L, x: x.mean([0, True]),
    "x.split(True)": lambda L, x: x.split(True),
    "x.split(np.int64(1))": lambda L, x: x.split(np.int64(1)),
    "split(x, _Index())": lambda L, x: L.split(x, _Index()),
    "reshape(x, np.int64(16))": lambda L, x: L.reshape(x, np.int64(16)),
    "reshape(x, tensor(16))": lambda L, x: L.reshape(x, L.tensor(16)),
    "reshape(x, 16)": lambda L, x: L.reshape(x, 16),
    "x.reshape(np.int64(16))": lambda L, x: x.reshape(np.int64(16)),
    "x.reshape(_Index(), -1)": lambda L, x: x.reshape(_Index(), -1),
    "x.view((16, True))": lambda L, x: x.view((16, True)),
    "reshape(x, (True, 16))": lambda L, x: L.reshape(x, (True, 16)),
    "x.size(_Index())": lambda L, x: x.size(_Index()),
    "x.stride(_Index())": lambda L, x: x.stride(_Index()),
    "x.cumsum(_Index())": lambda L, x: x.cumsum(_Index()),
    "x.chunk(_Index())": lambda L, x: x.chunk(_Index()),
    "x.topk(_Index())": lambda L, x: x.topk(_Index()),
    "x.narrow(0, _Index(), 1)": lambda L, x: x.narrow(0, _Index(), 1),
    "x.cumsum(np.bool_(1))": lambda L, x: x.cumsum(np.bool_(1)),
    "x.chunk(np.float64(1))": lambda L, x: x.chunk(np.float64(1)),
    "x.sum(np.float32(0))": lambda L, x: x.sum(np.float32(0)),
    "x.sum((0, np.bool_(1)))": lambda L, x: x.sum((0, np.bool_(1))),
    "x.movedim((0, np.float64(1)), (0, 1))": lambda L, x: x.movedim((0, np.float64(1)), (0, 1)),
    "x.reshape(4, np.float64(4))": lambda L, x: x.reshape(4, np.float64(4)),
    "x.view(np.float32(16))": lambda L, x: x.view(np.float32(16)),
    "x.split(np.bool_(1))": lambda L, x: x.split(np.bool_(1)),
    "fft_fftn(x, s=(2, 1.5))": lambda L, x: L.fft.fftn(x, s=(2, 1.5)),
    "fft_fft(x, n=np.bool_(1))": lambda L, x: L.fft.fft(x, n=np.bool_(1)),
    "rot90(x, tensor(1))": lambda L, x: L.rot90(x, L.tensor(1)),
    "diagflat(x, tensor(1))": lambda L, x: L.diagflat(x, L.tensor(1)),
    "tril_indices(tensor(2), 2)": lambda L, x: L.tril_indices(L.tensor(2), 2),
    "F.one_hot(i, 1.5)": lambda L, x: L.nn.functional.one_hot(L.tensor([1]), 1.5),
    "x.unsafe_split(1.5)": lambda L, x: x.unsafe_split(1.5),
    "tensor_split(x, 1.5)": lambda L, x: L.tensor_split(x, 1.5),
    "x.tensor_split([1, 1.5])": lambda L, x: x.tensor_split([1, 1.5]),
    "x.tensor_split([1.5])": lambda L, x: x.tensor_split([1.5]),
    "hsplit(x, [tensor(2)])": lambda L, x: L.hsplit(x, [L.tensor(2)]),
    "hsplit(x, 1.5)": lambda L, x: L.hsplit(x, 1.5),
    "empty_strided((2,), (1.5,))": lambda L, x: L.empty_strided((2,), (1.5,)),
    "empty_strided((2, 2), (1, 1.5))": lambda L, x: L.empty_strided((2, 2), (1, 1.5)),
    "empty_strided((2,), 1)": lambda L, x: L.empty_strided((2,), 1),
}


def _outcome(lib, call):
    try:
        return "ok", _shapes(call(lib, lib.arange(16.).reshape(4, 4)))
    except Exception as e:                  # noqa: BLE001 - the error itself is compared
        return type(e).__name__, str(e).splitlines()[0]


@pytest.mark.parametrize("name", list(_ACCEPT_OR_REFUSE))
def test_int_arguments_accepted_and_refused_as_torch(name):
    call = _ACCEPT_OR_REFUSE[name]
    assert _outcome(ember, call) == _outcome(torch, call), name
