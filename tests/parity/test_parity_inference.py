"""Inference tensors against PyTorch's: which tensors are inference tensors, and which uses
outside inference mode both libraries refuse, with the same error."""

import pytest

import ember
from tests.parity._compare import is_tensor, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _made(t):
    """(inference tensor, normal tensor, a view of the normal one made in inference mode)."""
    normal = t.ones(3)
    with t.inference_mode():
        return t.ones(3), normal, normal[:2]


def _mul_saved(t):
    made = _made(t)[0]
    return made * t.ones(3, requires_grad=True)


CASES = {
    "made": lambda t: _made(t)[0].is_inference(),
    "view of normal": lambda t: _made(t)[2].is_inference(),
    "view outside": lambda t: _made(t)[0][1:].is_inference(),
    "detach": lambda t: _made(t)[0].detach().is_inference(),
    "op outside": lambda t: (_made(t)[0] * 2).is_inference(),
    "clone": lambda t: _made(t)[0].clone().is_inference(),
    "function": lambda t: t.is_inference(_made(t)[0]),
    "add_": lambda t: _made(t)[0].add_(1),
    "setitem": lambda t: _made(t)[0].__setitem__(0, 2.0),
    "out=": lambda t: t.mul(t.ones(3), 2, out=_made(t)[0]),
    "view's add_": lambda t: _made(t)[2].add_(1),
    "copy from": lambda t: t.zeros(3).copy_(_made(t)[0]),
    "saved": _mul_saved,
    "not saved": lambda t: (_made(t)[0] + t.ones(3, requires_grad=True)).sum(),
    "requires_grad_": lambda t: _made(t)[0].requires_grad_(),
    "Parameter": lambda t: t.nn.Parameter(_made(t)[0]),
    "no_grad use": lambda t: t.no_grad()(lambda: _made(t)[0] * t.ones(3))(),
}


def _outcome(lib, case):
    """A tensor's values, another value as is, or the RuntimeError's type and message."""
    return outcome(CASES[case], lib, catch=RuntimeError,
                   describe=lambda r: r.tolist() if is_tensor(r) else r)


@pytest.mark.parametrize("case", list(CASES))
def test_inference_tensors_match_pytorch(case):
    assert _outcome(ember, case) == _outcome(torch, case)
