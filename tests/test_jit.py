"""ember.jit: PyTorch's TorchScript entry points, run eagerly."""

import typing

import pytest

import ember
from ember import jit, nn


def test_script_and_trace_return_what_they_are_given():
    def f(x):
        return x * 2
    model = nn.Linear(3, 2)
    assert jit.script(f) is f and jit.script(model) is model
    assert jit.trace(model, ember.ones(4, 3)) is model
    assert jit.trace_module(model, {"forward": ember.ones(1, 3)}) is model
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        jit.trace(model, ember.ones(4, 5))          # the example inputs run, as in tracing
    assert not isinstance(model, jit.ScriptModule)
    assert jit.optimize_for_inference(jit.freeze(model.train())) is model
    assert not model.training


def test_decorators_and_queries():
    class Block(nn.Module):
        @jit.ignore
        def helper(self, x):
            return x + 1

        @jit.ignore(drop=True)
        def dropped(self, x):
            return x - 1

        @jit.unused
        def unused(self, x):
            return x

        @jit.export
        def exported(self, x):
            return x * 3

        def forward(self, x):
            if jit.is_scripting() or jit.is_tracing():
                return x
            return self.exported(self.helper(self.dropped(self.unused(x))))
    out = Block()(ember.tensor([1.0, 2.0]))
    assert out.tolist() == [3.0, 6.0]
    assert jit.annotate(typing.List[int], []) == []
    assert jit.Attribute(3, int).value == 3 and jit.Final is typing.Final


def test_fork_and_wait():
    future = jit.fork(lambda x: x + 1, ember.ones(2))
    assert jit.wait(future).tolist() == [2.0, 2.0]
    failing = jit.fork(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.wait()


def test_isinstance_of_container_types():
    assert jit.isinstance([1, 2], typing.List[int])
    assert not jit.isinstance([1, "a"], typing.List[int])
    assert jit.isinstance({"a": ember.ones(1)}, typing.Dict[str, ember.Tensor])
    assert jit.isinstance(None, typing.Optional[int]) and jit.isinstance(3, int | None)
    assert jit.isinstance((1, "a"), typing.Tuple[int, str])
    assert not jit.isinstance((1, 2), typing.Tuple[int, str])
    assert jit.isinstance((1, 2, 3), typing.Tuple[int, ...])


def test_archives_cannot_be_written_or_read(tmp_path):
    with pytest.raises(RuntimeError, match="ember has no TorchScript"):
        jit.save(nn.Linear(1, 1), tmp_path / "m.pt")
    with pytest.raises(RuntimeError, match="ember has no TorchScript"):
        jit.load(tmp_path / "m.pt")


def test_script_module_subclass_is_an_eager_module():
    with pytest.warns(DeprecationWarning, match="`torch.jit.script_method` is deprecated"):
        class Scaled(jit.ScriptModule):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(2, 2, bias=False)

            @jit.script_method
            def forward(self, x):
                return self.lin(x) * 3

    m = Scaled()
    with ember.no_grad():
        m.lin.weight.copy_(ember.tensor([[1.0, 2.0], [0.0, -1.0]]))
    y = m(ember.tensor([[1.0, 1.0]]))
    assert y.tolist() == [[9.0, -3.0]]
    assert isinstance(m, nn.Module) and isinstance(m, jit.ScriptModule)
    assert list(m.state_dict()) == ["lin.weight"]
