"""Conv, padding and fold layers against torch: same weights, same outputs and gradients."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

CASES = [
    ("Conv2d", (1, 6, 5), {}, (2, 1, 12, 12), {}),
    ("Conv2d", (4, 6, (3, 2)), dict(stride=2, padding=1, dilation=2, groups=2, bias=False,
                                    padding_mode="reflect"), (2, 4, 9, 9), {}),
    ("Conv1d", (2, 6, 4), dict(padding="same", padding_mode="circular"), (2, 2, 9), {}),
    ("Conv3d", (2, 4, 3), dict(padding="same", padding_mode="replicate"), (2, 5, 4, 6), {}),
    ("ConvTranspose2d", (4, 6, 3), dict(stride=2), (1, 4, 5, 5), dict(output_size=[12, 12])),
    ("ConvTranspose1d", (4, 6, 3), dict(stride=2, output_padding=1, groups=2), (1, 4, 5), {}),
    ("ConvTranspose3d", (4, 2, 2), dict(stride=2, dilation=2), (4, 3, 3, 3), {}),
    ("ReflectionPad2d", ((1, 2, 0, 3),), {}, (3, 4, 5), {}),
    ("ReplicationPad3d", (2,), {}, (1, 2, 3, 4, 5), {}),
    ("CircularPad1d", ((3, -1),), {}, (2, 3, 4), {}),
    ("ConstantPad2d", ((1, -1, 2, 0), 1.5), {}, (2, 3, 4), {}),
    ("ZeroPad3d", (1,), {}, (2, 2, 2, 2), {}),
    ("Fold", ((4, 5), 2), dict(stride=1), (2, 12, 12), {}),
    ("Unfold", (2,), dict(padding=1, dilation=(1, 2)), (2, 3, 4, 5), {}),
]


@pytest.mark.parametrize("name,args,kwargs,shape,call", CASES, ids=[c[0] for c in CASES])
def test_layer_matches_torch(name, args, kwargs, shape, call):
    theirs = getattr(torch.nn, name)(*args, **kwargs).double()
    ours = getattr(ember.nn, name)(*args, **kwargs, **(
        {"dtype": ember.float64} if name.startswith("Conv") else {}))
    assert repr(ours) == repr(theirs)
    for (n, tp), (m, ep) in zip(theirs.named_parameters(), ours.named_parameters()):
        assert n == m and tuple(tp.shape) == tuple(ep.shape)
        ep.data = ember.tensor(tp.detach().numpy())
    x = np.random.default_rng(0).standard_normal(shape)
    tx = torch.tensor(x, requires_grad=True)
    ex = ember.tensor(x, requires_grad=True)
    ty, ey = theirs(tx, **call), ours(ex, **call)
    np.testing.assert_allclose(np.asarray(ey.detach()), ty.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    g = np.random.default_rng(1).standard_normal(tuple(ty.shape))
    ty.backward(torch.tensor(g))
    ey.backward(ember.tensor(g))
    np.testing.assert_allclose(np.asarray(ex.grad), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for tp, ep in zip(theirs.parameters(), ours.parameters()):
        np.testing.assert_allclose(np.asarray(ep.grad), tp.grad.numpy(), rtol=1e-10,
                                   atol=1e-12)
