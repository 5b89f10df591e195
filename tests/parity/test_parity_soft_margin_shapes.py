"""soft_margin_loss's shape rule against torch's: the target broadcasts to the input's shape,
never the input to a larger one."""

import pytest

import ember
import ember.nn.functional as EF
from tests.parity._compare import outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(lib, functional, input_shape, target_shape):
    """The unreduced soft margin loss's shape, or its RuntimeError's type and message."""
    return outcome(lambda: functional.soft_margin_loss(
        lib.ones(input_shape), lib.ones(target_shape), reduction="none"),
        catch=RuntimeError, describe=lambda out: tuple(out.shape))


@pytest.mark.parametrize("shapes", [((3, 1), (3,)), ((3,), (3, 1)), ((3, 1), (1, 3)),
                                    ((3, 4), (4,)), ((3,), (1,)), ((3,), ()), ((3,), (4,))])
def test_soft_margin_loss_shapes_as_torch(shapes):
    import torch.nn.functional as TF
    assert _outcome(ember, EF, *shapes) == _outcome(torch, TF, *shapes)
