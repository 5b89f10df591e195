"""Argument TypeErrors against PyTorch's parser: the first line of the message of each call
with a str, float, None, float tensor or list where an int or a tuple of ints belongs, in the
method and the function forms."""

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
