"""ember.cond and ember.while_loop against torch's, run eagerly: results and the errors
both raise the same way."""

import numpy as np
import pytest

import ember
from ember._control_flow import cond, while_loop

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _both(make):
    """make(lib) for torch and ember."""
    return make(torch), make(ember)


@pytest.mark.parametrize("pred", [True, False, 1, 0, 2.5, "tensor-true", "tensor-1el-false",
                                  "tensor-int", "tensor-2el", "tensor-empty", "a", None, 1j])
def test_cond_preds(pred):
    def make(lib):
        p = {"tensor-true": lambda: lib.tensor(True),
             "tensor-1el-false": lambda: lib.tensor([False]),
             "tensor-int": lambda: lib.tensor(3),
             "tensor-2el": lambda: lib.tensor([True, False]),
             "tensor-empty": lambda: lib.tensor([], dtype=lib.bool)}.get(pred, lambda: pred)()
        x = lib.arange(3.0)
        f = torch.cond if lib is torch else cond
        try:
            return f(p, lambda t: t + 1, lambda t: t - 1, (x,)).tolist()
        except RuntimeError as e:
            return str(e).replace("torch", "ember")
    want, got = _both(make)
    assert got == want


def test_while_loop_results_and_gradients():
    def make(lib):
        f = torch.while_loop if lib is torch else while_loop
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        i, y = f(lambda i, t: i < 4, lambda i, t: (i + 1, t * 1.5), (lib.tensor(0), x))
        y.sum().backward()
        return i.item(), y.tolist(), x.grad.tolist()
    want, got = _both(make)
    np.testing.assert_allclose(got[1], want[1])
    assert got[0] == want[0] and got[2] == want[2]


@pytest.mark.parametrize("case", ["not-callable", "float-leaf", "cond-not-bool", "body-dtype",
                                  "body-count", "body-alias"])
def test_while_loop_errors_raise_the_same_type(case):
    def make(lib):
        f = torch.while_loop if lib is torch else while_loop
        x = lib.zeros(2)
        args = {"not-callable": (5, lambda t: (t,), (x,)),
                "float-leaf": (lambda a: False, lambda a: (a,), (0.5,)),
                "cond-not-bool": (lambda t: t.sum(), lambda t: (t + 1,), (x,)),
                "body-dtype": (lambda t: t.sum() < 3, lambda t: (t.double() + 1,), (x,)),
                "body-count": (lambda t: t.sum() < 3, lambda t: (t + 1, t + 2), (x,)),
                "body-alias": (lambda i, t: i < 3, lambda i, t: (i + 1, t), (0, x))}[case]
        try:
            f(*args)
        except Exception as e:
            return type(e).__name__, isinstance(e, RuntimeError)
        return None
    want, got = _both(make)
    assert got == want and got is not None
