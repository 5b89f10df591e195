"""Containers (Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict) and lazy
modules; reprs are PyTorch's text with ember's type names."""

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import ember
import ember.nn as nn


class Scale(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.weight = nn.Parameter(ember.full((1,), float(k)))

    def forward(self, x):
        return x * self.weight

    def extra_repr(self):
        return f"k={self.k}"


class Act(nn.Module):
    def forward(self, x):
        return x.clamp(min=0)


def values(seq):
    return [m.k for m in seq]


def test_sequential_forward_and_indexing():
    s = nn.Sequential(Scale(2), Scale(3), Scale(5))
    assert float(s(ember.ones(1))) == 30.0
    assert s[1].k == 3 and s[-1].k == 5
    sub = s[1:]
    assert type(sub) is nn.Sequential and values(sub) == [3, 5]
    assert list(sub._modules) == ["1", "2"]           # slicing keeps the keys
    with pytest.raises(IndexError, match="index 3 is out of range"):
        s[3]
    assert len(s) == 3 and values(iter(s)) == [2, 3, 5]
    named = nn.Sequential(OrderedDict([("a", Scale(1)), ("b", Scale(4))]))
    assert named.b.k == 4 and [n for n, _ in named.named_children()] == ["a", "b"]


def test_sequential_mutation():
    s = nn.Sequential(Scale(1), Scale(2))
    s.append(Scale(3)).insert(0, Scale(0))
    assert values(s) == [0, 1, 2, 3] and list(s._modules) == ["0", "1", "2", "3"]
    s.extend(nn.Sequential(Scale(4)))
    del s[1]
    assert values(s) == [0, 2, 3, 4] and list(s._modules) == ["0", "1", "2", "3"]
    assert s.pop(0).k == 0 and values(s) == [2, 3, 4]
    s[0] = Scale(9)
    assert values(s) == [9, 3, 4]
    del s[1:]
    assert values(s) == [9]
    both = s + nn.Sequential(Scale(7))
    assert values(both) == [9, 7] and values(s) == [9]
    s += nn.Sequential(Scale(8))
    assert values(s) == [9, 8]
    assert values(s * 2) == [9, 8, 9, 8]
    with pytest.raises(ValueError, match="add operator supports only objects of Sequential"):
        s + Scale(1)
    with pytest.raises(IndexError, match="Index out of range: 5"):
        s.insert(5, Scale(1))
    assert "0" not in dir(s)


def test_sequential_parameters_state_dict_and_repr():
    s = nn.Sequential(Scale(1), Act(), nn.Sequential(Scale(2), Act()))
    assert [n for n, _ in s.named_parameters()] == ["0.weight", "2.0.weight"]
    assert list(s.state_dict()) == ["0.weight", "2.0.weight"]
    assert repr(s) == ("Sequential(\n"
                       "  (0): Scale(k=1)\n"
                       "  (1): Act()\n"
                       "  (2): Sequential(\n"
                       "    (0): Scale(k=2)\n"
                       "    (1): Act()\n"
                       "  )\n"
                       ")")
    assert repr(nn.Sequential(Act(), Act())) == "Sequential(\n  (0): Act()\n  (1): Act()\n)"


def test_module_list():
    ml = nn.ModuleList([Scale(1), Scale(2)])
    ml.append(Scale(3))
    ml.extend([Scale(4)])
    ml.insert(1, Scale(9))
    assert values(ml) == [1, 9, 2, 3, 4]
    assert type(ml[1:3]) is nn.ModuleList and values(ml[1:3]) == [9, 2]
    del ml[1]
    assert values(ml) == [1, 2, 3, 4] and list(ml._modules) == ["0", "1", "2", "3"]
    ml[-1] = Scale(5)
    assert ml.pop(-1).k == 5 and len(ml) == 3
    assert values(ml + [Scale(6)]) == [1, 2, 3, 6]
    ml += [Scale(7)]
    assert values(ml) == [1, 2, 3, 7]
    assert len(list(ml.parameters())) == 4
    with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable, "
                                        "but got Scale"):
        ml.extend(Scale(1))
    with pytest.raises(IndexError, match="index -9 is out of range"):
        ml[-9]
    with pytest.raises(NotImplementedError):
        ml(1)


def test_module_list_repr_compresses_repeats_like_pytorch():
    ml = nn.ModuleList([Act(), Act(), Act(), Scale(1), Scale(1), Scale(2)])
    assert repr(ml) == ("ModuleList(\n"
                        "  (0-2): 3 x Act()\n"
                        "  (3-4): 2 x Scale(k=1)\n"
                        "  (5): Scale(k=2)\n"
                        ")")
    assert repr(nn.ModuleList()) == "ModuleList()"
    nested = nn.ModuleList([nn.Sequential(Act()), nn.Sequential(Act())])
    assert repr(nested) == ("ModuleList(\n"
                            "  (0-1): 2 x Sequential(\n"
                            "    (0): Act()\n"
                            "  )\n"
                            ")")


def test_module_dict():
    md = nn.ModuleDict({"b": Scale(2), "a": Scale(1)})
    assert list(md) == ["b", "a"] and list(md.keys()) == ["b", "a"]   # insertion order
    md["c"] = Scale(3)
    md.update([("d", Scale(4))])
    assert "c" in md and len(md) == 4
    assert md.pop("b").k == 2 and list(md) == ["a", "c", "d"]
    del md["a"]
    assert [k for k, _ in md.items()] == ["c", "d"] and values(md.values()) == [3, 4]
    assert [n for n, _ in md.named_parameters()] == ["c.weight", "d.weight"]
    assert repr(md) == "ModuleDict(\n  (c): Scale(k=3)\n  (d): Scale(k=4)\n)"
    with pytest.raises(ValueError, match="ModuleDict update sequence element #0 has length 3; "
                                         "2 is required"):
        md.update([("x", Scale(1), 3)])
    md.clear()
    assert len(md) == 0


def test_parameter_list():
    pl = nn.ParameterList([nn.Parameter(ember.zeros(2, 3)), ember.ones(2)])
    assert all(isinstance(p, nn.Parameter) for p in pl)            # tensors get wrapped
    pl.append(ember.zeros(1))
    assert len(pl) == 3 and [n for n, _ in pl.named_parameters()] == ["0", "1", "2"]
    assert len(pl[1:]) == 2 and pl[-1].shape == (1,)
    pl[0] = ember.full((1,), 5.0)
    assert float(pl[0]) == 5.0 and isinstance(pl[0], nn.Parameter)
    assert repr(nn.ParameterList([nn.Parameter(ember.zeros(2, 3)), ember.zeros(2)])) == (
        "ParameterList(\n"
        "    (0): Parameter containing: [ember.float32 of size 2x3]\n"
        "    (1): Parameter containing: [ember.float32 of size 2]\n"
        ")")
    with pytest.raises(RuntimeError, match="ParameterList should not be called."):
        pl()
    with pytest.raises(TypeError, match="ParameterList.extend should be called with an "
                                        "iterable, but got Tensor"):
        pl.extend(ember.zeros(2))


def test_parameter_dict():
    pd = nn.ParameterDict({"b": nn.Parameter(ember.zeros(2)), "a": ember.zeros(3)})
    assert list(pd) == ["a", "b"]            # a plain dict is sorted, as PyTorch does
    assert isinstance(pd["a"], nn.Parameter)
    pd["c"] = ember.ones(1)
    assert pd.get("zz") is None and "c" in pd and len(pd) == 3
    assert pd.pop("c").shape == (1,) and list(pd.keys()) == ["a", "b"]
    assert [n for n, _ in pd.named_parameters()] == ["a", "b"]
    assert repr(pd) == ("ParameterDict(\n"
                        "    (a): Parameter containing: [ember.FloatTensor of size 3]\n"
                        "    (b): Parameter containing: [ember.FloatTensor of size 2]\n"
                        ")")
    single = nn.ParameterDict({"b": nn.Parameter(ember.zeros(2))})
    assert repr(single) == "ParameterDict(  (b): Parameter containing: [ember.FloatTensor of " \
                           "size 2])"
    merged = pd | nn.ParameterDict({"z": ember.zeros(1)})
    assert list(merged) == ["a", "b", "z"] and list(pd) == ["a", "b"]
    with pytest.raises(TypeError, match="Index given to ParameterDict cannot be used as a key"):
        pd[1] = ember.zeros(1)
    with pytest.raises(RuntimeError, match="ParameterDict should not be called."):
        pd()


def test_containers_copy_and_state_dict_round_trip():
    model = nn.Sequential(Scale(2), nn.ModuleList([Scale(3)]),
                          nn.ModuleDict({"x": Scale(4)}))
    model.extra = nn.ParameterList([ember.ones(2)])
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert list(clone.state_dict()) == ["0.weight", "1.0.weight", "2.x.weight",
                                            "extra.0"]
        assert float(clone[0].weight) == 2.0
    other = nn.Sequential(Scale(0), nn.ModuleList([Scale(0)]), nn.ModuleDict({"x": Scale(0)}))
    other.extra = nn.ParameterList([ember.zeros(2)])
    other.load_state_dict(model.state_dict())
    assert float(other[1][0].weight) == 3.0 and other.extra[0].tolist() == [1.0, 1.0]


# ----- lazy modules -------------------------------------------------------------------

def test_uninitialized_parameter():
    p = nn.UninitializedParameter()
    assert repr(p) == "<UninitializedParameter>" and p.requires_grad
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized"):
        p.shape
    p.materialize((2, 3))
    assert type(p) is nn.Parameter and p.shape == (2, 3) and p.requires_grad
    b = nn.UninitializedBuffer()
    b.materialize(4, dtype=ember.float64)
    assert type(b) is ember.Tensor and b.dtype == ember.float64


def test_lazy_module_mixin_materializes_on_first_call():
    class LazyScale(nn.modules.lazy.LazyModuleMixin, nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.UninitializedParameter()

        def initialize_parameters(self, x):
            if self.has_uninitialized_params():
                self.weight.materialize(x.shape[-1:])
                with ember.no_grad():
                    self.weight.fill_(2.0)

        def forward(self, x):
            return x * self.weight

    m = LazyScale()
    assert m.has_uninitialized_params()
    out = m(ember.ones(3, 4))
    assert out.shape == (3, 4) and float(out.sum()) == 24.0
    assert not m.has_uninitialized_params() and not m._forward_pre_hooks
    twin = copy.deepcopy(LazyScale())               # the copy's hooks are its own
    twin(ember.ones(2))
    assert not twin._forward_pre_hooks and float(twin.weight.sum()) == 4.0
    # loading a state dict materializes too
    fresh = LazyScale()
    fresh.load_state_dict({"weight": ember.full((4,), 3.0)})
    assert fresh.weight.shape == (4,) and float(fresh.weight.sum()) == 12.0


def test_lazy_linear_when_linear_exists():
    if not hasattr(nn, "Linear") or not hasattr(nn, "LazyLinear"):
        pytest.skip("nn.Linear is written by another helper")
    m = nn.LazyLinear(3)
    assert repr(m) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    out = m(ember.randn(2, 5))
    assert type(m) is nn.Linear and out.shape == (2, 3)
    assert m.weight.shape == (3, 5) and m.in_features == 5
    bound = 1 / np.sqrt(5)
    assert float(m.weight.abs().max()) <= bound


def test_lazy_conv_mixin_on_a_conv_shaped_layer():
    class Conv1d(nn.Module):                  # PyTorch's constructor and attribute names
        def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                     dilation=1, groups=1, bias=True, padding_mode="zeros", device=None,
                     dtype=None):
            super().__init__()
            self.in_channels, self.out_channels = in_channels, out_channels
            self.kernel_size, self.groups, self.transposed = (kernel_size,), groups, False
            self.weight = nn.Parameter(ember.empty(out_channels, in_channels // groups,
                                                   kernel_size))
            self.bias = nn.Parameter(ember.empty(out_channels)) if bias else None
            self.reset_parameters()

        def reset_parameters(self):
            nn.init.ones_(self.weight)

        def forward(self, x):
            return x

    lazy_cls = type("LazyConv1d", (nn.modules.lazy._LazyConvMixin, Conv1d),
                    {"cls_to_become": Conv1d})
    m = lazy_cls(6, 3, groups=2)
    m(ember.zeros(2, 4, 10))
    assert type(m) is Conv1d and m.in_channels == 4
    assert m.weight.shape == (6, 2, 3) and float(m.weight.sum()) == 36.0
    assert m.bias.shape == (6,)
    with pytest.raises(RuntimeError, match=r"Expected 2D \(unbatched\) or 3D \(batched\) "
                                           r"input to LazyConv1d, but got input of size"):
        lazy_cls(6, 3)(ember.zeros(4))


def test_lazy_batch_norm_when_batch_norm_exists():
    if not hasattr(nn, "LazyBatchNorm2d"):
        pytest.skip("BatchNorm2d is written by another helper")
    m = nn.LazyBatchNorm2d()
    x = ember.randn(4, 3, 5, 5)
    y = m(x)
    assert type(m) is nn.BatchNorm2d and m.num_features == 3
    assert m.running_mean.shape == (3,) and int(m.num_batches_tracked) == 1
    ref = nn.BatchNorm2d(3)
    np.testing.assert_allclose(y.detach().numpy(), ref(x).detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(m.running_var.numpy(), ref.running_var.numpy(), atol=1e-6)


def test_deprecated_container_and_nll_loss_2d():
    with pytest.warns(FutureWarning, match="`nn.Container` is deprecated"):
        box = nn.Container(a=nn.Linear(1, 1))
    assert list(box.state_dict()) == ["a.weight", "a.bias"]
    with pytest.warns(FutureWarning, match="`NLLLoss2d` has been deprecated"):
        loss = nn.NLLLoss2d(ignore_index=1)
    scores = ember.randn(2, 3, 4, 4).log_softmax(1)
    target = ember.randint(0, 3, (2, 4, 4))
    assert isinstance(loss, nn.NLLLoss) and ember.allclose(
        loss(scores, target), nn.NLLLoss(ignore_index=1)(scores, target))


def test_lazy_norms_take_bias_keyword():
    m = nn.LazyBatchNorm2d(bias=False)
    assert "bias=False" in repr(m) and list(m.state_dict()) == [
        "weight", "running_mean", "running_var", "num_batches_tracked"]
    m(ember.ones(2, 3, 4, 4))
    assert type(m) is nn.BatchNorm2d and m.bias is None and m.weight.shape == (3,)
    m = nn.LazyInstanceNorm1d(affine=True, bias=False)
    m(ember.ones(2, 5, 4))
    assert list(m.state_dict())[0] == "weight" and m.bias is None and m.weight.shape == (5,)


def test_lazy_instance_norms_default_to_affine_with_running_stats():
    # PyTorch's signature (not its docstring, nor InstanceNorm's defaults)
    m = nn.LazyInstanceNorm2d()
    assert repr(m) == ("LazyInstanceNorm2d(0, eps=1e-05, momentum=0.1, affine=True, bias=True, "
                       "track_running_stats=True)")
    m(ember.ones(2, 3, 4, 4))
    assert type(m) is nn.InstanceNorm2d and list(m.state_dict()) == [
        "weight", "bias", "running_mean", "running_var", "num_batches_tracked"]


def test_uninitialized_parameter_refuses_ops():
    p = nn.UninitializedParameter()
    msg = "Attempted to use an uninitialized parameter in <method '{}' of 'Tensor' objects>"
    for name, f in (("numel", p.numel), ("dim", p.dim), ("add", lambda: p + 1),
                    ("sum", p.sum), ("mul", lambda: nn.UninitializedBuffer() * 2)):
        with pytest.raises(ValueError, match=msg.format(name)):
            f()
    assert p.size() == (0,) and p.is_floating_point()


def test_lazy_module_cast_before_first_call_stays_lazy():
    m = nn.LazyBatchNorm1d().double()
    assert [type(b).__name__ for b in m.buffers()] == [
        "UninitializedBuffer", "UninitializedBuffer", "Tensor"]
    y = m(ember.tensor([[1.0, 2.0], [3.0, 6.0]], dtype=ember.float64))
    assert y.dtype == ember.float64 and m.running_mean.dtype == ember.float64
    assert m.running_mean.tolist() == pytest.approx([0.2, 0.4])
    lin = nn.LazyLinear(3).double()
    assert lin(ember.ones(2, 4, dtype=ember.float64)).dtype == ember.float64
    assert lin.weight.shape == (3, 4) and lin.weight.dtype == ember.float64
