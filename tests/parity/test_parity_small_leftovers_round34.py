"""Round 34 leftovers against torch: cat/stack's refusals of non-sequences, stack's and cat's
strides for channels-last and size-1 layouts, profiled linear's backward node ranges."""

import collections

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _error(lib, fn, make, kw):
    a, b = lib.ones(2), lib.zeros(2)
    arg = make(lib, a, b)
    with pytest.raises(TypeError) as info:
        getattr(lib, fn)(tensors=arg) if kw else getattr(lib, fn)(arg)
    return str(info.value)


_ARGS = {
    "generator": lambda lib, a, b: (t for t in (a, b)),
    "dict": lambda lib, a, b: {0: a, 1: b},
    "set": lambda lib, a, b: {a},
    "dict_values": lambda lib, a, b: {0: a}.values(),
    "deque": lambda lib, a, b: collections.deque([a, b]),
    "ndarray": lambda lib, a, b: np.ones(2),
    "tensor": lambda lib, a, b: a,
    "range": lambda lib, a, b: range(2),
    "list with int": lambda lib, a, b: [a, 1],
}


@pytest.mark.parametrize("fn", ["cat", "stack", "hstack", "vstack", "dstack", "column_stack",
                                "concat", "concatenate"])
@pytest.mark.parametrize("arg", sorted(_ARGS))
@pytest.mark.parametrize("kw", [False, True])
def test_refusals_match(fn, arg, kw):
    assert _error(ember, fn, _ARGS[arg], kw) == _error(torch, fn, _ARGS[arg], kw)


def _make(lib, shape, kind, offset):
    n = int(np.prod(shape))
    x = lib.arange(float(n)).reshape(shape) + offset
    if kind == "cl":
        return x.to(memory_format=lib.channels_last)
    if kind == "perm":
        return x.permute(1, 0, 2, 3).contiguous().permute(1, 0, 2, 3)
    if kind == "slice":
        return lib.cat([x, x], 1).contiguous(memory_format=lib.channels_last)[:, :shape[1]]
    return x


@pytest.mark.parametrize("shape", [(1, 2, 3, 3), (2, 2, 3, 3), (1, 1, 3, 3), (2, 1, 1, 1),
                                   (2, 3, 1, 4), (1, 3, 1, 1), (2, 3, 4, 1)])
@pytest.mark.parametrize("kinds", [("cl", "cl"), ("cl", "c"), ("c", "cl"), ("slice", "cl"),
                                   ("perm", "perm"), ("c", "c")])
def test_join_strides_match(shape, kinds):
    for lib_pair in [(ember, torch)]:
        got, want = [], []
        for lib, out in zip(lib_pair, (got, want)):
            x, y = _make(lib, shape, kinds[0], 0), _make(lib, shape, kinds[1], 100)
            for d in range(-5, 5):
                r = lib.stack([x, y], d)
                out.append(("stack", d, r.stride(), r.sum().item()))
            for d in range(4):
                out.append(("cat", d, lib.cat([x, y], d).stride()))
            out.append(("stack1", lib.stack([x], 2).stride()))
        assert got == want


def test_channels_last_3d_stack_matches():
    for shape in [(1, 2, 3, 4, 5), (1, 1, 2, 1, 3), (2, 3, 1, 2, 2)]:
        x = ember.randn(shape).contiguous(memory_format=ember.channels_last_3d)
        t = torch.from_numpy(x.numpy().copy()).contiguous(memory_format=torch.channels_last_3d)
        assert x.stride() == t.stride()
        for d in range(-6, 6):
            assert ember.stack([x, x], d).stride() == torch.stack([t, t], d).stride()


def _profiled_backward_nodes(lib):
    F = lib.nn.functional
    x, w = lib.randn(3, requires_grad=True), lib.randn(4, 3, requires_grad=True)
    with lib.profiler.profile() as p:
        F.linear(x, w).sum().backward()
    return [(e.name, e.cpu_parent.name if e.cpu_parent else None) for e in p.events()
            if "Backward" in e.name and "evaluate" not in e.name]


def test_profiled_linear_backward_nodes_match():
    assert _profiled_backward_nodes(ember) == _profiled_backward_nodes(torch)
