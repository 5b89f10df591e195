"""``nn.DataParallel`` without CUDA: the wrapper runs the module itself, so a script written
for several GPUs runs unchanged on the CPU (the GPU cases are in tests/gpu)."""

import pytest

import ember
import ember.nn as nn

pytestmark = pytest.mark.skipif(ember.cuda.is_available(), reason="checks the CPU answers")


def test_without_cuda_the_module_runs_itself():
    ember.manual_seed(0)
    model = nn.Linear(4, 2)
    parallel = nn.DataParallel(model)
    assert parallel.device_ids == [] and parallel.module is model
    x = ember.randn(3, 4)
    out = parallel(x)
    assert ember.equal(out, model(x))
    out.sum().backward()
    assert model.weight.grad is not None
    assert list(parallel.state_dict()) == ["module.weight", "module.bias"]
    assert ember.equal(nn.parallel.data_parallel(model, x), model(x))
    assert ember.equal(nn.parallel.data_parallel(model, (x,), module_kwargs={}), model(x))

