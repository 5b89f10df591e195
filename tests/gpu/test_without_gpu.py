"""The CUDA surface on a machine without CUDA: CPU code never loads CuPy, ember.cuda answers
as PyTorch's does without a GPU, and the CUDA helpers that need no device work."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ember
from ember.cuda import _CudaDeviceProperties
from ember.cuda.memory import format_size

SRC = Path(ember.__file__).parent.parent
no_cuda = pytest.mark.skipif(ember.cuda.is_available(), reason="checks the no-CUDA answers")


def test_cpu_work_never_imports_cupy():
    code = textwrap.dedent("""
        import io, sys
        attempts = []

        class Watch:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("cupy", "cupyx"):
                    attempts.append(name)
                return None
        sys.meta_path.insert(0, Watch())
        import ember
        from ember import nn
        from ember.utils.data import DataLoader, TensorDataset
        ember.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 2))
        opt = ember.optim.Adam(model.parameters())
        data = TensorDataset(ember.randn(16, 4), ember.randint(0, 2, (16,)))
        for x, y in DataLoader(data, batch_size=4, shuffle=True):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with ember.autocast("cpu"):
            model(ember.randn(2, 4)).float().sum().item()
        t = ember.arange(6.).reshape(2, 3).to(ember.float64).cpu()
        buf = io.BytesIO()
        ember.save(model.state_dict(), buf)
        buf.seek(0)
        ember.load(buf)
        repr(t), t.is_pinned(), ember.cuda.memory_allocated(), ember.cuda.empty_cache()
        ember.cuda.manual_seed_all(1)
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("cupy", "cupyx"))
        assert not attempts and not loaded, (attempts, loaded)
        print("clean")
    """)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "clean"


@no_cuda
def test_queries_that_pytorch_answers_without_a_gpu():
    assert ember.cuda.is_available() is False
    assert ember.cuda.device_count() == 0
    assert ember.cuda.get_arch_list() == []
    assert ember.cuda.is_initialized() is False
    assert (ember.cuda.memory_allocated(), ember.cuda.max_memory_allocated(),
            ember.cuda.memory_reserved()) == (0, 0, 0)
    ember.cuda.empty_cache()
    ember.cuda.manual_seed(3)
    ember.cuda.manual_seed_all(3)
    with ember.cuda.stream(None):
        pass
    assert ember.tensor([1.0]).is_pinned() is False


@no_cuda
@pytest.mark.parametrize("factory", [ember.empty, ember.zeros, ember.rand,
                                     lambda n, **kw: ember.tensor([1.0] * n, **kw)])
def test_pinned_factories_need_an_accelerator(factory):
    with pytest.raises(RuntimeError, match="pin_memory=True requires a CUDA or other "
                                           "accelerator backend"):
        factory(2, pin_memory=True)
    assert factory(2, pin_memory=False).shape == (2,)


@no_cuda
@pytest.mark.parametrize("call", [
    ember.cuda.current_device, ember.cuda.get_device_name, ember.cuda.get_device_properties,
    ember.cuda.get_device_capability, ember.cuda.synchronize, ember.cuda.Stream,
    ember.cuda.Event, ember.cuda.current_stream, ember.cuda.initial_seed,
    ember.cuda.reset_peak_memory_stats, ember.cuda.mem_get_info, ember.cuda.init,
    ember.cuda.get_per_process_memory_fraction, lambda: ember.cuda.nvtx.range_push("x"),
    ember.cuda.ipc_collect, lambda: ember.cuda.can_device_access_peer(0, 1),
    lambda: ember.cuda.set_per_process_memory_fraction(0.5),
    lambda: ember.cuda.set_device(0), lambda: ember.cuda.device(0).__enter__(),
    lambda: ember.tensor([1.0]).pin_memory(), lambda: ember.tensor([1.0]).to("cuda:0"),
    lambda: ember.ones(2, device="cuda"), lambda: ember.rand(2, device="cuda"),
    lambda: ember.arange(3, device="cuda"), lambda: ember.tensor([1], device="cuda"),
])
def test_calls_that_need_a_gpu_raise_not_compiled(call):
    with pytest.raises(RuntimeError, match="not compiled with CUDA enabled"):
        call()


@no_cuda
def test_pin_memory_in_a_dataloader_warns_and_is_ignored():
    data = ember.utils.data.TensorDataset(ember.arange(4.))
    loader = ember.utils.data.DataLoader(data, batch_size=2, pin_memory=True)
    with pytest.warns(UserWarning, match="no accelerator is found"):   # when iterated
        (batch,) = next(iter(loader))
    assert batch.tolist() == [0.0, 1.0] and not batch.is_pinned()


def test_pinning_recurses_into_batches_as_pytorch_does():
    from collections import namedtuple

    from ember.utils.data._pin import pin_memory

    class Pinnable:
        def pin_memory(self):
            return "pinned"
    Pair = namedtuple("Pair", "a b")
    batch = {"x": (Pinnable(), "s"), "y": Pair(Pinnable(), [Pinnable(), 3])}
    assert pin_memory(batch) == {"x": ["pinned", "s"], "y": Pair("pinned", ["pinned", 3])}


def test_sizes_are_written_as_pytorch_writes_them():
    assert [format_size(n) for n in (0, 512, 1024, 1025, 20 * 2 ** 20, 2 ** 30,
                                     int(1.5 * 2 ** 30))] == \
        ["0 bytes", "512 bytes", "1024 bytes", "1.00 KiB", "20.00 MiB", "1024.00 MiB",
         "1.50 GiB"]


def test_device_properties_take_pytorchs_names():
    props = _CudaDeviceProperties({"name": b"NVIDIA H200", "major": 9, "minor": 0,
                                   "totalGlobalMem": 150_000 * 2 ** 20,
                                   "multiProcessorCount": 132, "l2CacheSize": 60 * 2 ** 20})
    assert (props.name, props.major, props.minor, props.multi_processor_count) == \
        ("NVIDIA H200", 9, 0, 132)
    assert repr(props) == ("_CudaDeviceProperties(name='NVIDIA H200', major=9, minor=0, "
                           "total_memory=150000MB, multi_processor_count=132, "
                           "L2_cache_size=60MB)")


def test_device_indices_and_bad_devices():
    from ember.cuda._common import index_of
    assert [index_of(x) for x in (None, 1, "cuda:2", ember.device("cuda", 3), "cuda")] == \
        [None, 1, 2, 3, None]
    with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
        index_of("cpu")


def test_to_on_the_same_device_keeps_the_tensor_and_parses_non_blocking():
    t = ember.ones(2)
    assert t.to("cpu") is t and t.to("cpu", non_blocking=True) is t and t.cpu() is t
    u = t.to(ember.float64, True)                   # to(dtype, non_blocking)
    assert u.dtype is ember.float64 and u.tolist() == [1.0, 1.0]
    assert t.type() == "ember.FloatTensor"


def test_a_seed_reaches_the_cuda_generators_without_a_gpu():
    from ember.cuda.random import default_generator
    ember.manual_seed(123)
    assert default_generator(0).initial_seed() == 123
    assert default_generator(5).initial_seed() == 123    # made after the seed
    ember.cuda.manual_seed(7)
    assert default_generator(0).initial_seed() == 7 and default_generator(5).initial_seed() == 123


def test_cuda_overrides_replace_only_the_gpu_forward(monkeypatch):
    import numpy as np

    from ember.backend import cuda_kernels
    from ember.ops._registry import REGISTRY
    op = REGISTRY["neg"]
    monkeypatch.setattr(op, "forward", op.forward)          # restored afterwards
    monkeypatch.setattr(cuda_kernels, "OVERRIDES", {})

    class DeviceXp:                                         # stands for cupy
        def __getattr__(self, name):
            return getattr(np, name)

    @cuda_kernels.override("neg")
    def fast(xp, x):
        return "fast" if x.ndim == 0 else None              # None: not covered, fall back
    assert cuda_kernels.OVERRIDES == {"neg": fast}
    assert op.forward(DeviceXp(), np.float32(2).reshape(())) == "fast"
    assert op.forward(DeviceXp(), np.ones(2)).tolist() == [-1.0, -1.0]
    assert op.forward(np, np.ones(())) == -1.0                  # the CPU never sees it
    assert ember.neg(ember.ones(2)).tolist() == [-1.0, -1.0]


def test_cuda_kernel_overrides_name_registered_ops():
    # the names are checked here, without Triton or a GPU: a wrong one would stop the CUDA
    # backend from loading
    import ast
    from ember.ops._registry import REGISTRY
    names = []
    for module in ("forwards", "gradients"):
        tree = ast.parse((SRC / f"ember/backend/cuda_kernels/{module}.py").read_text())
        names += [d.args[0].value for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                  for d in node.decorator_list if isinstance(d, ast.Call)
                  and getattr(d.func, "id", None) in ("override", "override_derivative")]
    assert len(names) >= 14
    assert [n for n in names if n not in REGISTRY] == []


@pytest.mark.parametrize("name", ["maximum", "minimum", "logaddexp"])
@pytest.mark.parametrize("n", [1, 2, 3, 8, 9])
def test_log_step_scan_matches_ufunc_accumulate(name, n):
    import types
    import numpy as np
    from ember.backend import accumulate
    gpu_like = types.SimpleNamespace(maximum=np.maximum, minimum=np.minimum,
                                     logaddexp=np.logaddexp, moveaxis=np.moveaxis)
    x = np.random.default_rng(n).standard_normal((4, n, 3))
    x[0, 0, 0], x[1, -1, 1], x[2, :, 2] = np.nan, -np.inf, -np.inf
    for axis in (1, -1, 0):         # logaddexp rounds in another order: close, not equal
        np.testing.assert_allclose(accumulate(gpu_like, name, x, axis),
                                   getattr(np, name).accumulate(x, axis=axis),
                                   rtol=1e-13 if name == "logaddexp" else 0)
