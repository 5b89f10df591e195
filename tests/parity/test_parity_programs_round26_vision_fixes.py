"""What the vision and neural-field programs of round 26 (test_parity_programs_round26_vision.py
and its _fields and _backbones siblings) found, each pinned against PyTorch: global average
pooling (adaptive_avg_pool2d to 1, as a ConvNeXt/timm head or Grad-CAM's weights take it) of a
channels_last input under autograd is PyTorch's mean restrided in place to channels_last, so
its strides are (C, 1, C, C) and its node AsStridedBackward1 over MeanBackward1, as without
autograd; a row-major input keeps the plain mean. adaptive_avg_pool3d to 1 of a
channels_last_3d input does the same, with autograd and without (its other sizes stay
row-major)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _pooled(lib, shape, channels_last, size):
    """Strides, node names, value and input gradient of adaptive_avg_pool{2,3}d(x, size)."""
    x = lib.from_numpy(np.sin(np.arange(np.prod(shape))).astype(np.float32).reshape(shape))
    if channels_last:
        x = x.contiguous(memory_format=lib.channels_last if len(shape) == 4 else
                         lib.channels_last_3d)
    pool = getattr(lib.nn.functional, f"adaptive_avg_pool{len(shape) - 2}d")
    plain = pool(x, size)
    x.requires_grad_()
    y = pool(x, size)
    names = []
    node = y.grad_fn
    while node is not None and type(node).__name__ != "AccumulateGrad":
        names.append(type(node).__name__)
        node = node.next_functions[0][0]
    (y * lib.arange(y.numel()).view(y.shape).float()).sum().backward()
    return {"strides": [plain.stride(), y.stride(), x.grad.stride()], "names": names,
            "cl": y.is_contiguous(memory_format=lib.channels_last if len(shape) == 4 else
                                  lib.channels_last_3d),
            "value": y.detach().numpy(), "grad": x.grad.numpy()}


@pytest.mark.parametrize("shape,channels_last,size", [
    ((2, 4, 3, 5), True, 1), ((2, 4, 3, 5), False, 1), ((2, 4, 3, 5), True, (1, 1)),
    ((2, 1, 3, 5), True, 1), ((1, 4, 1, 1), False, 1), ((2, 4, 3, 5), True, (1, 2)),
    ((2, 4, 3, 5, 2), True, 1), ((2, 4, 3, 5, 2), False, 1), ((2, 4, 3, 5, 2), True, (1, 2, 2)),
    ((2, 4, 3, 5, 2), True, (2, 1, 1))])
def test_global_avg_pool_keeps_channels_last_like_torch(shape, channels_last, size):
    ours, theirs = _pooled(ember, shape, channels_last, size), _pooled(torch, shape,
                                                                     channels_last, size)
    for key in ("strides", "names", "cl"):
        assert ours[key] == theirs[key], key
    np.testing.assert_allclose(ours["value"], theirs["value"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ours["grad"], theirs["grad"], rtol=1e-6, atol=1e-7)


def test_channels_last_head_matches_torch():
    """A conv -> BN -> ReLU -> global pool -> linear head in channels_last: strides of every
    activation and the weight gradients as PyTorch's."""
    def program(lib):
        nn = lib.nn
        m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))
        with lib.no_grad():
            for p in m.parameters():
                p.copy_(lib.from_numpy(np.cos(np.arange(p.numel()) * 0.7).astype(np.float32)
                                       .reshape(tuple(p.shape))))
        m = m.to(memory_format=lib.channels_last)
        h = lib.from_numpy(np.sin(np.arange(2 * 3 * 5 * 6)).astype(np.float32)
                           .reshape(2, 3, 5, 6)).contiguous(memory_format=lib.channels_last)
        strides = []
        for layer in m:
            h = layer(h)
            strides.append(h.stride())
        h.pow(2).sum().backward()
        return strides, [p.grad.numpy() for p in m.parameters()]
    (s1, g1), (s2, g2) = program(ember), program(torch)
    assert s1 == s2
    for a, b in zip(g1, g2):        # (conv weight gradients of size ~1 cancel to ~1e-2)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
