"""ember.compile against torch.compile: what it returns, checkpoint keys, reprs, backends
and the errors of bad arguments (ember runs eagerly; torch's compiled code is not run)."""

import pytest

import ember
from tests.parity._compare import error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def test_wrapped_modules_match():
    ours, theirs = ember.compile(ember.nn.Linear(2, 3)), torch.compile(torch.nn.Linear(2, 3))
    assert type(ours).__name__ == type(theirs).__name__ == "OptimizedModule"
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("kwargs", [{"mode": "default", "options": {}}, {"mode": "fast"},
                                    {"mode": "reduce-overhead"}, {"backend": "inductor"}])
def test_argument_errors_match(kwargs):
    assert error(lambda: ember.compile(ember.nn.ReLU(), **kwargs)) == \
        error(lambda: torch.compile(torch.nn.ReLU(), **kwargs))


def test_backends_and_not_callable_match():
    assert ember.compiler.list_backends() == torch.compiler.list_backends()
    assert error(lambda: ember.compile(3)) == error(lambda: torch.compile(3))
    assert ember.compiler.is_compiling() == torch.compiler.is_compiling()
