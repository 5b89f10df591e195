"""ember.func.functionalize, replace_all_batch_norm_modules_ and debug_unwrap."""

import pytest

import ember
from ember import nn
from ember.func import (debug_unwrap, functionalize, grad, replace_all_batch_norm_modules_,
                        vmap)


def _mutating(a, b):
    a.add_(1)
    b[0] = 5.0
    a.view(-1).mul_(2)
    return a + b, a


def test_functionalize_keeps_results_and_input_mutations():
    for remove in ("mutations", "mutations_and_views"):
        a, b = ember.zeros(2), ember.zeros(2)
        total, same = functionalize(_mutating, remove=remove)(a, b)
        assert total.tolist() == [7.0, 2.0] and same.tolist() == [2.0, 2.0]
        assert a.tolist() == [2.0, 2.0] and b.tolist() == [5.0, 0.0]


def test_functionalize_wraps_the_function_and_composes():
    f = functionalize(_mutating)
    assert f.__name__ == "_mutating" and f.__wrapped__ is _mutating
    g = grad(functionalize(lambda x: (x.clone().mul_(3) * x).sum()))(ember.tensor([1.0, 2.0]))
    assert g.tolist() == [6.0, 12.0]


@pytest.mark.parametrize("remove", ["views", None, 1])
def test_functionalize_rejects_unknown_remove(remove):
    with pytest.raises(RuntimeError, match=rf"received invalid argument for remove={remove}\. "
                                           r"Valid options are:\n     remove='mutations'"):
        functionalize(_mutating, remove=remove)
    with pytest.raises(TypeError):
        functionalize(_mutating, "mutations")


def test_replace_all_batch_norm_modules_in_place():
    root = nn.Sequential(nn.BatchNorm1d(3), nn.Sequential(nn.BatchNorm2d(3), nn.Linear(2, 2)),
                         nn.BatchNorm3d(2, affine=False), nn.SyncBatchNorm(3),
                         nn.InstanceNorm1d(3, track_running_stats=True))
    assert replace_all_batch_norm_modules_(root) is root
    for bn in (root[0], root[1][0], root[2], root[3]):
        assert bn.running_mean is None and bn.running_var is None
        assert bn.num_batches_tracked is None and bn.track_running_stats is False
    assert root[4].track_running_stats and root[4].running_mean is not None
    assert sorted(k for k in root.state_dict() if "running" in k or "num_batches" in k) == [
        "4.num_batches_tracked", "4.running_mean", "4.running_var"]
    root.eval()                                   # batch statistics even in eval mode
    out = root[0](ember.tensor([[0.0, 1.0, 2.0], [2.0, 3.0, 4.0]]))
    assert ember.allclose(out, ember.tensor([[-1.0] * 3, [1.0] * 3]), atol=1e-4)


def test_debug_unwrap_gives_the_whole_batch():
    x = ember.arange(6.0).reshape(3, 2)
    seen = []

    def f(t):
        seen.append(debug_unwrap(t))
        return t * 2
    vmap(f)(x)
    assert type(seen[0]) is ember.Tensor and seen[0].tolist() == x.tolist()
    seen.clear()

    def g(t):
        seen.append((debug_unwrap(t), debug_unwrap(t, recurse=False)))
        return t
    vmap(vmap(g))(x)
    full, one_level = seen[0]
    assert type(full) is ember.Tensor and full.tolist() == x.tolist()
    assert type(one_level) is not ember.Tensor and tuple(one_level.shape) == (2,)
    assert debug_unwrap(one_level).tolist() == x.tolist()
    assert debug_unwrap(x) is x
    with pytest.raises(TypeError):
        debug_unwrap(3)
