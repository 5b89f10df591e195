"""The Module system against PyTorch: the same model built in both must print, name, save and
fail to load alike (type names differ only by the ``torch.``/``ember.`` prefix)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def build(lib):
    """One model, written against ``lib`` (ember or torch): containers, buffers, sharing."""
    nn = lib.nn

    class Affine(nn.Module):
        def __init__(self, i, o, bias=True):
            super().__init__()
            self.i, self.o = i, o
            self.weight = nn.Parameter(lib.ones(o, i))
            self.bias = nn.Parameter(lib.zeros(o)) if bias else None
            self.register_buffer("steps", lib.zeros((), dtype=lib.int64))
            self.register_buffer("cache", lib.zeros(1), persistent=False)

        def forward(self, x):
            out = x @ self.weight.t()
            return out if self.bias is None else out + self.bias

        def extra_repr(self):
            return f"in_features={self.i}, out_features={self.o}, bias={self.bias is not None}"

    class Act(nn.Module):
        def forward(self, x):
            return x.clamp(min=0)

    model = nn.Sequential()
    model.append(Affine(4, 3))
    model.append(nn.ModuleList([Act(), Act(), Affine(3, 3), Affine(3, 3), Act()]))
    model.append(nn.ModuleDict({"z": Affine(3, 2, bias=False), "a": Act()}))
    model.add_module("shared", model[0])
    model.plist = nn.ParameterList([lib.zeros(2, 3), nn.Parameter(lib.ones(1))])
    model.pdict = nn.ParameterDict({"b": lib.zeros(2), "a": lib.zeros(3)})
    return model


def ember_text(text):
    return text.replace("torch.", "ember.")


def test_repr_matches():
    assert repr(build(ember)) == ember_text(repr(build(torch)))


def test_names_and_state_dict_match():
    e, t = build(ember), build(torch)
    for method in ("named_parameters", "named_buffers", "named_modules", "named_children"):
        assert [n for n, _ in getattr(e, method)()] == [n for n, _ in getattr(t, method)()]
    assert [n for n, _ in e.named_parameters(remove_duplicate=False)] == \
        [n for n, _ in t.named_parameters(remove_duplicate=False)]
    es, ts = e.state_dict(), t.state_dict()
    assert list(es) == list(ts)
    assert dict(es._metadata) == dict(ts._metadata)
    for key in es:
        np.testing.assert_array_equal(es[key].numpy(), ts[key].numpy())


def test_load_state_dict_errors_match():
    e, t = build(ember), build(torch)
    for mutate in (lambda sd, lib: sd.pop("0.bias"),
                   lambda sd, lib: sd.__setitem__("junk.x", lib.zeros(1)),
                   lambda sd, lib: sd.__setitem__("0.weight", lib.zeros(5, 4)),
                   lambda sd, lib: sd.__setitem__("1.2.steps", lib.zeros(2, 2))):
        esd, tsd = e.state_dict(), t.state_dict()
        mutate(esd, ember)
        mutate(tsd, torch)
        with pytest.raises(RuntimeError) as eerr:
            e.load_state_dict(esd)
        with pytest.raises(RuntimeError) as terr:
            t.load_state_dict(tsd)
        assert str(eerr.value) == ember_text(str(terr.value))
        if "size mismatch" not in str(terr.value):
            assert repr(e.load_state_dict(esd, strict=False)) == \
                repr(t.load_state_dict(tsd, strict=False))


def test_hook_call_order_matches():
    logs = []
    for lib in (ember, torch):
        model = build(lib)
        log = []
        for name, m in model.named_modules():
            m.register_forward_pre_hook(lambda mod, args, name=name: log.append(("pre", name)))
            m.register_forward_hook(lambda mod, args, out, name=name: log.append(("post", name)))
        model[0](lib.ones(2, 4))
        for layer in model[1]:
            layer(lib.ones(2, 3))
        logs.append(log)
    assert logs[0] == logs[1]


def _always_call_log(lib):
    """What ``always_call`` hooks see after a later forward hook raised."""
    log = []
    m = lib.nn.Linear(1, 1, bias=False)
    with lib.no_grad():
        m.weight.fill_(3.0)
    m.register_forward_hook(lambda mod, args, out: log.append("first"), always_call=True)
    m.register_forward_hook(lambda mod, args, out: {}["missing"])
    m.register_forward_hook(lambda mod, args, out: log.append(out.tolist()), always_call=True)
    with pytest.raises(KeyError):
        m(lib.ones(1))
    return log


def test_always_call_hooks_after_a_failing_hook_match():
    assert _always_call_log(ember) == _always_call_log(torch) == ["first", [3.0]]


def _dict_output_hook_log(lib):
    class D(lib.nn.Module):
        def forward(self, x):
            return {"y": x * 2}
    log = []
    m = D()
    m.register_full_backward_hook(lambda mod, gi, go: log.append("hook"))
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="For backward hooks to be called, module output"):
        out = m(x)
    out["y"].sum().backward()
    return log, x.grad.tolist()


def test_backward_hooks_skip_dict_outputs_alike():
    assert _dict_output_hook_log(ember) == _dict_output_hook_log(torch) == ([], [2.0, 2.0])
