"""Round 34 leftovers: profiling node classes made while recording, cat/stack's refusal of
non-sequence arguments, stack's and cat's strides for channels-last inputs."""

import os
import subprocess
import sys

import pytest

import ember
from ember.autograd.graph import Node

# --- the profiler times node classes made while it records --------------------------------

_FRESH = """
import ember
F = ember.nn.functional
x = ember.randn(3, requires_grad=True); w = ember.randn(4, 3, requires_grad=True)
with ember.profiler.profile() as p:
    F.linear(x, w).sum().backward()
names = [e.name for e in p.events()]
print(sorted(n for n in set(names) if "Backward" in n and "evaluate" not in n))
"""


def test_fresh_process_profiles_lazily_made_reshape_nodes():
    env = dict(os.environ)
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True,
                         env=env, timeout=120, check=True).stdout.strip().splitlines()[-1]
    assert out == str(["MmBackward0", "SqueezeBackward4", "SumBackward0", "TBackward0",
                       "UnsqueezeBackward0"])


def test_node_class_made_while_profiling_is_timed_then_restored():
    def apply(self, grads):
        return grads

    with ember.profiler.profile():
        cls = type("MadeWhileProfilingBackward0", (Node,), {"apply": apply})
        assert cls.__dict__["apply"] is not apply           # timed
        cls(()).apply([ember.ones(1)])
    assert cls.__dict__["apply"] is apply                   # put back when it stopped
    later = type("MadeAfterBackward0", (Node,), {"apply": apply})
    assert later.__dict__["apply"] is apply


def test_node_class_made_while_profiling_gets_its_range():
    def apply(self, grads):
        return grads

    with ember.profiler.profile() as p:
        cls = type("OwnApplyBackward0", (Node,), {"apply": apply})
        cls(()).apply([ember.ones(1)])
    assert [e.name for e in p.events()].count("OwnApplyBackward0") == 1


# --- cat/stack take a tuple or list only ---------------------------------------------------

_A, _B = ember.ones(2), ember.zeros(2)


@pytest.mark.parametrize("fn", ["cat", "stack", "hstack", "vstack", "dstack", "column_stack",
                                "concat", "concatenate"])
def test_generator_refused(fn):
    with pytest.raises(TypeError, match=rf"^{fn}\(\): argument 'tensors' \(position 1\) must "
                                        r"be tuple of Tensors, not generator$"):
        getattr(ember, fn)(t for t in (_A, _B))


@pytest.mark.parametrize("arg, name", [({0: _A}, "dict"), ({_A}, "set"), ("ab", "str"),
                                       (range(2), "range"), (map(abs, [_A]), "map"),
                                       ({0: _A}.values(), "dict_values"), (_A, "Tensor"),
                                       (ember.nn.Parameter(_A), "Parameter"), (3, "int")])
def test_other_iterables_refused(arg, name):
    with pytest.raises(TypeError, match=rf"^cat\(\): argument 'tensors' \(position 1\) must be "
                                        rf"tuple of Tensors, not {name}$"):
        ember.cat(arg)


def test_deque_and_array_named_by_module():
    import collections

    import numpy as np
    with pytest.raises(TypeError, match="not collections.deque$"):
        ember.stack(collections.deque([_A, _B]))
    with pytest.raises(TypeError, match="not numpy.ndarray$"):
        ember.cat(np.ones(2))


def test_keyword_argument_named_without_position():
    with pytest.raises(TypeError, match=r"^cat\(\): argument 'tensors' must be tuple of "
                                        r"Tensors, not dict$"):
        ember.cat(tensors={0: _A})
    with pytest.raises(TypeError, match=r"^stack\(\): argument 'tensors' must be tuple of "
                                        r"Tensors, not generator$"):
        ember.stack(tensors=(t for t in (_A, _B)))


def test_sequences_still_taken():
    class L(list):
        pass
    assert ember.cat(L([_A, _B])).tolist() == [1, 1, 0, 0]
    assert ember.cat((_A, _B), 0).tolist() == [1, 1, 0, 0]
    assert ember.stack([_A, _B], 1).tolist() == [[1, 0], [1, 0]]
    with pytest.raises(TypeError, match="expected Tensor as element 1 in argument 0, but "
                                        "got int"):
        ember.cat([_A, 1])


def test_aten_cat_takes_a_generator():
    assert ember.ops.aten.cat.default(t for t in (_A, _B)).tolist() == [1, 1, 0, 0]
    assert ember.ops.aten.stack.default(t for t in (_A, _B)).tolist() == [[1, 1], [0, 0]]


# --- stack's and cat's strides with channels-last inputs (PyTorch's values) ---------------

def _cl(*shape):
    n = 1
    for s in shape:
        n *= s
    return ember.arange(float(n)).reshape(shape).to(memory_format=ember.channels_last)


@pytest.mark.parametrize("shape, dim, stride", [
    ((1, 2, 3, 3), 0, (18, 2, 1, 6, 2)), ((1, 2, 3, 3), 1, (4, 2, 1, 12, 4)),
    ((1, 2, 3, 3), 2, (2, 1, 18, 6, 2)), ((1, 2, 3, 3), 3, (2, 1, 12, 6, 2)),
    ((1, 2, 3, 3), 4, (36, 18, 6, 2, 1)), ((1, 2, 3, 3), -1, (36, 18, 6, 2, 1)),
    ((1, 1, 3, 3), 0, (9, 9, 9, 3, 1)), ((1, 1, 3, 3), 1, (2, 1, 18, 6, 2)),
    ((1, 1, 3, 3), 4, (18, 1, 6, 2, 1)), ((2, 3, 1, 4), 1, (24, 3, 1, 24, 6)),
    ((2, 3, 1, 4), 2, (24, 1, 12, 12, 3)), ((2, 3, 1, 4), 4, (24, 8, 8, 2, 1))])
def test_stack_channels_last_strides(shape, dim, stride):
    x, y = _cl(*shape), _cl(*shape) + 100
    r = ember.stack([x, y], dim)
    assert r.stride() == stride
    assert ember.equal(r.select(dim, 0), x) and ember.equal(r.select(dim, 1), y)


def test_stack_of_one_channels_last():
    x = _cl(1, 2, 3, 3)
    assert ember.stack([x], 0).stride() == (2, 2, 1, 6, 2)
    assert ember.stack([x], 2).stride() == (2, 1, 18, 6, 2)
    assert ember.stack([x], -1).stride() == (18, 9, 3, 1, 1)


def test_cat_channels_last_size_one_dims():
    x = _cl(1, 1, 3, 3)
    assert x.stride() == (9, 1, 3, 1)
    assert ember.cat([x, x], 0).stride() == (9, 1, 3, 1)
    assert ember.cat([x, x], 2).stride() == (18, 1, 3, 1)
    y = _cl(2, 3, 1, 4)
    r = ember.cat([y, y + 1], 2)
    assert r.stride() == (24, 1, 12, 3)
    assert ember.equal(r[:, :, 1:], y + 1)


def test_stack_row_major_unchanged():
    a, b = ember.arange(6.).reshape(2, 3), ember.arange(6.).reshape(3, 2).t()
    for d in (0, 1, 2):
        r = ember.stack([a, b], d)
        assert r.is_contiguous()
        assert ember.equal(r.select(d, 1), b)
    assert ember.stack([ember.tensor(1.), ember.tensor(2.)]).tolist() == [1., 2.]
