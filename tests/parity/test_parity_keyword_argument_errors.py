"""Argument TypeErrors of calls passing the bad argument by keyword, against PyTorch's parser:
no "(position N)", keywords listed by name in "invalid combination" (see NOTE [Keyword
arguments in TypeErrors]). The calls are written out (not ``f(**kwargs)``), as a user writes
them."""

import pytest

import ember
from tests.parity._compare import ember_names, error, first_line

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_BAD = {"str": lambda lib: "a", "float": lambda lib: 1.5, "list": lambda lib: ["a"]}

_CALLS = {
    "sum(x, dim=b)": lambda L, x, b: L.sum(x, dim=b),
    "x.sum(dim=b)": lambda L, x, b: x.sum(dim=b),
    "x.sum(dim=b, keepdim=True)": lambda L, x, b: x.sum(dim=b, keepdim=True),
    "x.sum(b, True)": lambda L, x, b: x.sum(b, True),
    "x.mean(b, keepdim=True)": lambda L, x, b: x.mean(b, keepdim=True),
    "stack([x, x], dim=b)": lambda L, x, b: L.stack([x, x], dim=b),
    "x.sum(axis=b)": lambda L, x, b: x.sum(axis=b),
    "x.nansum(dim=b)": lambda L, x, b: x.nansum(dim=b),
    "amax(x, b)": lambda L, x, b: L.amax(x, b),
    "x.logsumexp(dim=b)": lambda L, x, b: x.logsumexp(dim=b),
    "x.cumsum(dim=b)": lambda L, x, b: x.cumsum(dim=b),
    "cumsum(x, axis=b)": lambda L, x, b: L.cumsum(x, axis=b),
    "x.mode(b)": lambda L, x, b: x.mode(b),
    "x.cummax(dim=b)": lambda L, x, b: x.cummax(dim=b),
    "x.max(dim=b)": lambda L, x, b: x.max(dim=b),
    "max(x, dim=b)": lambda L, x, b: L.max(x, dim=b),
    "x.max(b)": lambda L, x, b: x.max(b),
    "x.min(b, True)": lambda L, x, b: x.min(b, True),
    "x.median(dim=b)": lambda L, x, b: x.median(dim=b),
    "nanmedian(x, b)": lambda L, x, b: L.nanmedian(x, b),
    "x.narrow(0, 0, length=b)": lambda L, x, b: x.narrow(0, 0, length=b),
    "narrow(x, dim=0, start=b, length=1)": lambda L, x, b: L.narrow(x, dim=0, start=b, length=1),
    "x.narrow(dim=b, start=0, length=1)": lambda L, x, b: x.narrow(dim=b, start=0, length=1),
    "x.movedim(source=b, destination=0)": lambda L, x, b: x.movedim(source=b, destination=0),
    "x.squeeze(dim=b)": lambda L, x, b: x.squeeze(dim=b),
    "x.chunk(chunks=b)": lambda L, x, b: x.chunk(chunks=b),
    "x.topk(k=b)": lambda L, x, b: x.topk(k=b),
    "x.sort(dim=b)": lambda L, x, b: x.sort(dim=b),
    "x.tril(diagonal=b)": lambda L, x, b: x.tril(diagonal=b),
    "x.tril_(diagonal=b)": lambda L, x, b: x.tril_(diagonal=b),
    "x.permute(dims=b)": lambda L, x, b: x.permute(dims=b),
    "x.flip(dims=b)": lambda L, x, b: x.flip(dims=b),
    "x.reshape(shape=b)": lambda L, x, b: x.reshape(shape=b),
    "x.rot90(b)": lambda L, x, b: x.rot90(b),
    "rot90(x, 1, b)": lambda L, x, b: L.rot90(x, 1, b),
    "x.rot90(1, b)": lambda L, x, b: x.rot90(1, b),
    "x.rot90(k=b)": lambda L, x, b: x.rot90(k=b),
    "x.rot90(dims=b)": lambda L, x, b: x.rot90(dims=b),
    "x.diagflat(b)": lambda L, x, b: x.diagflat(b),
    "diagflat(x, offset=b)": lambda L, x, b: L.diagflat(x, offset=b),
    "x.unflatten(dim=b, sizes=(2, 2))": lambda L, x, b: x.unflatten(dim=b, sizes=(2, 2)),
    "unflatten(x, 0, sizes=b)": lambda L, x, b: L.unflatten(x, 0, sizes=b),
    "cat([x, x], dim=b)": lambda L, x, b: L.cat([x, x], dim=b),
    "F.softmax(x, dim=b)": lambda L, x, b: L.nn.functional.softmax(x, dim=b),
    "Tensor.sum(x, dim=b)": lambda L, x, b: L.Tensor.sum(x, dim=b),
}


def _first_line(lib, call, bad):
    x = lib.arange(16.).reshape(4, 4)
    return error(call, lib, x, _BAD[bad](lib), message=first_line)


@pytest.mark.parametrize("bad", list(_BAD))
@pytest.mark.parametrize("name", list(_CALLS))
def test_keyword_argument_errors_match(name, bad):
    call = _CALLS[name]
    ours = _first_line(ember, call, bad)
    theirs = _first_line(torch, call, bad)
    assert theirs is not None and ours == (theirs[0], ember_names(theirs[1])), name
