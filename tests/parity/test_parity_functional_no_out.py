"""F.sigmoid and F.tanh take only the input, as torch's (torch.sigmoid and torch.tanh take
``out=``): the same refusals and values."""

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcomes(lib, name):
    f = getattr(lib.nn.functional, name)
    x = lib.tensor([0.5, -1.0])
    outcomes = [[round(v, 6) for v in f(x).tolist()], [round(v, 6) for v in f(input=x).tolist()]]
    for call in (lambda: f(x, out=lib.empty(2)), lambda: f(x, 1)):
        with pytest.raises(TypeError) as error:
            call()
        outcomes.append(str(error.value))
    return outcomes


@pytest.mark.parametrize("name", ["sigmoid", "tanh"])
def test_functional_sigmoid_tanh_refuse_out(name):
    assert _outcomes(ember, name) == _outcomes(torch, name)
