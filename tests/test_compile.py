"""ember.compile runs eagerly: modules come back wrapped with PyTorch's ``_orig_mod``,
functions as themselves, and bad arguments raise as in PyTorch."""

import pytest

import ember
import ember._dynamo
from ember._dynamo.eval_frame import OptimizedModule


def test_a_compiled_module_runs_the_original():
    model = ember.nn.Linear(3, 2)
    compiled = ember.compile(model)
    assert isinstance(compiled, OptimizedModule) and compiled._orig_mod is model
    x = ember.randn(4, 3)
    assert ember.equal(compiled(x), model(x))
    assert compiled.weight is model.weight and compiled.in_features == 3
    assert list(compiled.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
    compiled.eval()
    assert not model.training


def test_a_compiled_function_is_the_function():
    def double(x):
        return 2 * x
    assert ember.compile(double, mode="max-autotune") is double
    decorated = ember.compile(fullgraph=True, dynamic=False)(double)
    assert decorated is double and decorated(ember.ones(1)).item() == 2.0
    assert ember.nn.Linear(1, 1).compile() is None


@pytest.mark.parametrize("kwargs, error, message", [
    ({"mode": "default", "options": {}}, RuntimeError,
     "Either mode or options can be specified, but both can't be specified at the same time."),
    ({"mode": "fast"}, RuntimeError, "Unrecognized mode=fast, should be one of: default, lite, "
     "reduce-overhead, max-autotune-no-cudagraphs, max-autotune"),
    ({"backend": "nope"}, RuntimeError, "Invalid backend: 'nope', see "
     "`torch._dynamo.list_backends()` for available backends."),
])
def test_bad_arguments_raise(kwargs, error, message):
    with pytest.raises(error) as info:
        ember.compile(ember.nn.ReLU(), **kwargs)
    assert str(info.value) == message


def test_not_callable_raises():
    with pytest.raises(AssertionError, match="A callable function is expected, but <class "
                                             "'int'> is provided."):
        ember.compile(3)


def test_dynamo_and_inductor_settings_are_accepted():
    assert not ember.compiler.is_compiling() and not ember._dynamo.is_compiling()
    ember._dynamo.config.cache_size_limit = 64
    ember._inductor.config.triton.unique_kernel_names = True
    assert ember._dynamo.config.cache_size_limit == 64
    assert ember.compiler.disable(len) is len
    assert ember.compiler.list_backends() == ["cudagraphs", "inductor", "openxla", "tvm"]


def test_dynamic_shape_marks_are_accepted_and_change_nothing():
    x = ember.ones(2, 3)
    assert ember._dynamo.mark_dynamic(x, 0) is None
    assert ember._dynamo.mark_dynamic(x, [0, 1], min=2, max=10) is None
    assert ember._dynamo.maybe_mark_dynamic(x, 1) is None
    assert ember._dynamo.mark_static(x, 1) is None
    assert ember._dynamo.mark_static_address(x) is None
    assert ember.compile(lambda t: t * 2)(x).tolist() == [[2.0] * 3] * 2
