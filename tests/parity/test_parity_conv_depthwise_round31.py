"""Depthwise convolutions against torch: the flattened-image columns (unit stride) and the
per-offset input gradient (strided, and transposed depthwise convolutions), forward and
backward, in float64 and float32, row-major and channels-last; and the corners next to them
(a channel multiplier, uneven 'same' padding, output padding below the dilation, no batch)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

# (layer, channels (or in and out channels, groups the fewer), kernel, kwargs, input shape)
CASES = [
    ("Conv2d", 8, 3, dict(padding=1), (2, 8, 20, 20)),                      # flat columns
    ("Conv1d", 5, 3, dict(padding=1), (2, 5, 300)),                           # same, 1-d
    ("Conv2d", 8, 3, dict(padding=1), (2, 8, 12, 12)),                      # per-channel
    ("Conv2d", 8, 3, dict(stride=2, padding=1), (3, 8, 17, 16)),
    ("Conv2d", 6, 7, dict(padding=3), (2, 6, 14, 14)),                      # ConvNeXt
    ("Conv2d", 4, (3, 5), dict(stride=(2, 3), padding=(1, 2), dilation=(2, 1)), (2, 4, 20, 25)),
    ("Conv1d", 5, 4, dict(stride=3, padding=2), (2, 5, 100)),
    ("Conv3d", 3, 3, dict(stride=2, padding=1), (1, 3, 9, 10, 11)),
    ("ConvTranspose2d", 6, 3, dict(stride=2, padding=1, output_padding=1), (2, 6, 8, 7)),
    ("ConvTranspose1d", 4, 5, dict(stride=2, padding=2), (3, 4, 40)),
    ("Conv2d", (6, 12), 3, dict(stride=2, padding=1), (2, 6, 17, 16)),      # two per group
    ("ConvTranspose2d", (12, 6), 3, dict(stride=2, padding=1), (2, 12, 9, 8)),
    ("ConvTranspose2d", (6, 12), 3, dict(stride=2, padding=1, output_padding=1), (2, 6, 9, 8)),
    ("ConvTranspose2d", 6, 3, dict(stride=3, padding=1, output_padding=2, dilation=2),
     (2, 6, 9, 8)),
    ("Conv2d", 6, 4, dict(padding="same", dilation=(1, 2)), (2, 6, 18, 17)),  # pads (1, 2)
    ("Conv1d", 5, 4, dict(padding="same"), (1, 5, 120)),
    ("Conv2d", 6, 3, dict(stride=2, padding=2, padding_mode="circular"), (2, 6, 17, 16)),
    ("Conv2d", 6, 3, dict(stride=2, padding=1), (0, 6, 17, 16)),
]


def _run(lib, layer, x, grad, channels_last):
    """Outputs and (input, weight, bias) gradients of ``layer`` at ``x`` as arrays; and the
    output and input gradient as tensors (for their layout)."""
    if channels_last:
        x = x.detach().contiguous(memory_format=lib.channels_last).requires_grad_()
    y = layer(x)
    y.backward(grad)
    return [t.detach().numpy() if lib is torch else np.asarray(t.detach())
            for t in (y, x.grad, layer.weight.grad, layer.bias.grad)], [y, x.grad]


def _strides(t):
    """``t``'s strides over its dims longer than 1 (an empty tensor's: none)."""
    return tuple(s for s, n in zip(t.stride(), t.shape) if n > 1) if t.numel() else ()


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,c,k,kwargs,shape", CASES, ids=[f"{c[0]}-{i}"
                                                              for i, c in enumerate(CASES)])
def test_depthwise_matches_torch(name, c, k, kwargs, shape, dtype):
    cin, cout = c if isinstance(c, tuple) else (c, c)
    args = (cin, cout, k)
    kwargs = dict(kwargs, groups=min(cin, cout))
    theirs = getattr(torch.nn, name)(*args, **kwargs).to(getattr(torch, dtype))
    ours = getattr(ember.nn, name)(*args, **kwargs, dtype=getattr(ember, dtype))
    for tp, ep in zip(theirs.parameters(), ours.parameters()):
        ep.data = ember.tensor(tp.detach().numpy())
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    tx = torch.tensor(x, requires_grad=True)
    ex = ember.tensor(x, requires_grad=True)
    with torch.no_grad():
        g = np.random.default_rng(1).standard_normal(tuple(theirs(tx).shape)).astype(dtype)
    # (float32: sums of some hundred products, as noisy in torch as here)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == "float64" else dict(rtol=1e-5, atol=1e-4)
    channels_last = [False, True] if len(shape) == 4 else [False]
    for cl in channels_last:
        expected, their_layout = _run(torch, theirs, tx, torch.tensor(g), cl)
        got, our_layout = _run(ember, ours, ex, ember.tensor(g), cl)
        for e, t in zip(got, expected):
            assert e.dtype == t.dtype and e.shape == t.shape
            np.testing.assert_allclose(e, t, **tol)
        assert list(map(_strides, our_layout)) == list(map(_strides, their_layout))
        for p in (*theirs.parameters(), *ours.parameters(), tx, ex):
            p.grad = None
    # a forward under no_grad equals the recorded one bit for bit
    with ember.no_grad():
        plain = np.asarray(ours(ex))
    np.testing.assert_array_equal(plain, np.asarray(ours(ex).detach()))


@pytest.mark.parametrize("transposed", [False, True])
def test_depthwise_double_backward_matches_torch(transposed):
    # the gradients' own gradients: transposed convolutions and weight gradients of the
    # depthwise convolution, strided, with output padding
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 9, 8) if transposed else (2, 6, 17, 16))
    w = rng.standard_normal((6, 1, 3, 3))
    kw = dict(stride=2, padding=1, groups=6, **(dict(output_padding=1) if transposed else {}))
    results = []
    for lib in (torch, ember):
        fn = lib.nn.functional.conv_transpose2d if transposed else lib.nn.functional.conv2d
        tx, tw = (lib.tensor(a, requires_grad=True) for a in (x, w))
        y = fn(tx, tw, **kw)
        g = lib.tensor(np.random.default_rng(4).standard_normal(tuple(y.shape)))
        gx, gw = lib.autograd.grad(y, (tx, tw), g, create_graph=True)
        v = [lib.tensor(np.random.default_rng(5 + i).standard_normal(tuple(t.shape)))
             for i, t in enumerate((gx, gw))]
        total = (gx * v[0]).sum() + (gw * v[1]).sum()
        results.append([np.asarray(t.detach()) if lib is ember else t.detach().numpy()
                        for t in lib.autograd.grad(total, (tx, tw))])
    for e, t in zip(*results):
        np.testing.assert_allclose(e, t, rtol=1e-10, atol=1e-12)
