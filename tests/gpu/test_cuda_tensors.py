"""CUDA tensors: moving between host and GPU, creation and sampling on the GPU, and the
errors PyTorch raises for tensors on different devices."""

import io

import numpy as np
import pytest

import ember
from ember._host_values import host_values
import ember.nn.functional as F
from ember.testing import assert_close

pytestmark = pytest.mark.cuda

DTYPES = [ember.float32, ember.float64, ember.float16, ember.bfloat16, ember.int64,
          ember.int32, ember.uint8, ember.bool, ember.complex64]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_round_trip_keeps_values_and_dtype(dtype):
    host = ember.arange(24).reshape(2, 3, 4).to(dtype)
    gpu = host.cuda()
    assert gpu.device == ember.device("cuda", 0) and gpu.is_cuda and gpu.dtype is dtype
    assert gpu.get_device() == 0 and type(gpu._data) is ember.backend.cuda_backend().cupy.ndarray
    back = gpu.cpu()
    assert back.device.type == "cpu" and back.dtype is dtype
    assert np.array_equal(host_values(back).astype(np.float64),
                          host_values(host).astype(np.float64))


def test_to_forms_and_no_copy_when_already_there():
    x = ember.ones(3)
    y = x.to("cuda")
    assert y.to("cuda") is y and y.to("cuda:0") is y and y.cuda() is y
    assert y.to(ember.device("cuda", 0), ember.float64).dtype is ember.float64
    z = x.to(y)                                     # the other tensor's device and dtype
    assert z.is_cuda and z.dtype is ember.float32
    w = y.to("cpu", ember.float16)
    assert w.device.type == "cpu" and w.dtype is ember.float16 and w.tolist() == [1, 1, 1]


def test_noncontiguous_views_move_by_value():
    base = ember.arange(12.).reshape(3, 4)
    view = base.t()[1:]
    gpu = view.cuda()
    assert gpu.tolist() == view.tolist()
    back = base.cuda().t()[1:].cpu()
    assert back.tolist() == view.tolist()


def test_gradients_flow_back_across_devices():
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x.cuda() * 2).pow(2).sum()
    assert y.device.type == "cuda" and y.grad_fn.name() == "SumBackward0"
    y.backward()
    assert x.grad.device.type == "cpu" and x.grad.tolist() == [8.0, 16.0, 24.0]
    g = ember.ones(2, device="cuda", requires_grad=True)
    (g.cpu() * 3).sum().backward()
    assert g.grad.is_cuda and g.grad.tolist() == [3.0, 3.0]


def test_values_pytorch_gives_on_the_gpu_match_the_cpu():
    ember.manual_seed(0)
    a, b = ember.randn(64, 32), ember.randn(32, 16)
    for fn in (lambda a, b: a @ b, lambda a, b: (a @ b).softmax(-1),
               lambda a, b: a.sum(0), lambda a, b: a.exp().log1p().mean(),
               lambda a, b: ember.nn.functional.gelu(a)):
        assert_close(fn(a.cuda(), b.cuda()).cpu(), fn(a, b), rtol=1e-5, atol=1e-5)


def test_item_printing_and_python_conversions():
    t = ember.tensor([1.5, -2.0], device="cuda")
    assert t[0].item() == 1.5 and float(t[1]) == -2.0 and bool(t[0] > 0)
    assert repr(t) == "tensor([ 1.5000, -2.0000], device='cuda:0')"
    assert t.type() == "ember.cuda.FloatTensor"
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
        t.numpy()


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
def test_16bit_products_run_natively_and_match_the_cpu(monkeypatch, dtype):
    # cuBLAS multiplies 16-bit floats on tensor cores: no float32 copies (the CPU makes them)
    cupy = ember.backend.cuda_backend().cupy
    real, seen = cupy.matmul, []

    def recording(a, b, *args, **kwargs):
        seen.append(a.dtype)
        return real(a, b, *args, **kwargs)
    monkeypatch.setattr(cupy, "matmul", recording)
    ember.manual_seed(0)
    x, w, b = ember.randn(4, 6, 32), ember.randn(8, 32), ember.randn(8)
    x, w, b = x.to(dtype), w.to(dtype), b.to(dtype)
    calls = [lambda x, w, b: F.linear(x, w, b), lambda x, w, b: x @ w.T,
             lambda x, w, b: ember.bmm(x, w.T.expand(4, 32, 8)), lambda x, w, b: x[0].mm(w.T)]
    for call in calls:
        assert_close(call(x.cuda(), w.cuda(), b.cuda()).cpu(), call(x, w, b), atol=2e-2,
                     rtol=2e-2)
    assert len(seen) == len(calls) and set(seen) == {dtype.np}


def test_a_cupy_without_a_16bit_product_computes_it_in_float32(monkeypatch):
    cupy = ember.backend.cuda_backend().cupy
    real, tries = cupy.matmul, []

    def refusing(a, b, *args, **kwargs):
        if a.dtype.itemsize == 2:
            tries.append(a.dtype)
            raise TypeError("dtype is not supported")
        return real(a, b, *args, **kwargs)
    monkeypatch.setattr(cupy, "matmul", refusing)
    monkeypatch.setattr(ember.backend, "_UPCAST_PRODUCTS", set())
    a = ember.randn(5, 7).bfloat16()
    for _ in range(2):
        assert_close((a.cuda() @ a.cuda().T).cpu(), a @ a.T)
    assert len(tries) == 1                          # refused once, then not asked again


def test_mixing_devices_raises_pytorchs_message():
    g, c = ember.ones(2, device="cuda"), ember.ones(2)
    msg = "Expected all tensors to be on the same device, but found at least two devices, " \
          "cuda:0 and cpu!"
    for call in (lambda: g + c, lambda: c + g, lambda: ember.cat([g, c]),
                 lambda: ember.mm(g.view(1, 2), c.view(2, 1))):
        with pytest.raises(RuntimeError, match=msg):
            call()


def test_a_cpu_scalar_tensor_may_join_a_gpu_op():
    g = ember.tensor([1.0, 2.0], device="cuda")
    out = g * ember.tensor(3.0)
    assert out.is_cuda and out.tolist() == [3.0, 6.0]
    out = ember.tensor(2, dtype=ember.bfloat16) - g.bfloat16()
    assert out.is_cuda and out.dtype == ember.bfloat16 and out.tolist() == [1.0, 0.0]


def test_a_cpu_scalar_tensor_joins_without_an_upload(host_traffic):
    g, s = ember.tensor([1.0, 2.0], device="cuda"), ember.tensor(3.0)
    with host_traffic() as traffic:
        a, b = g * s, ember.where(g > 1, s, g)
    assert not traffic, dict(traffic)
    assert a.tolist() == [3.0, 6.0] and b.tolist() == [1.0, 3.0]


@pytest.mark.parametrize("make", [
    lambda: ember.zeros(2, 3, device="cuda"), lambda: ember.ones(2, 3, device="cuda"),
    lambda: ember.full((2, 3), 7, device="cuda"), lambda: ember.empty(2, 3, device="cuda"),
    lambda: ember.eye(3, device="cuda"), lambda: ember.arange(6, device="cuda"),
    lambda: ember.linspace(0, 1, 5, device="cuda"), lambda: ember.tensor([[1, 2]], device="cuda"),
    lambda: ember.zeros_like(ember.ones(2, device="cuda")),
    lambda: ember.ones(2, device="cuda").new_zeros(3),
    lambda: ember.logspace(0, 2, 3, device="cuda"),
    lambda: ember.empty_permuted((2, 3, 4), (0, 2, 1), device="cuda"),
    lambda: ember.ones(2, device="cuda").new(2, 3),
    lambda: ember.binomial(ember.full((3,), 5.0, device="cuda"),
                           ember.full((3,), 0.5, device="cuda")),
])
def test_factories_allocate_on_the_gpu(make):
    t = make()
    assert t.is_cuda
    assert t.cpu().numel() == t.numel()


def test_default_device_context():
    with ember.device("cuda"):
        t = ember.randn(3)
        lin = ember.nn.Linear(3, 2)
    assert t.is_cuda and lin.weight.is_cuda and ember.randn(1).device.type == "cpu"


def test_samples_drawn_on_the_host_match_the_cpu_stream_for_a_seed():
    host_drawn = [lambda d: ember.randint(0, 2 ** 40, (5,), device=d),   # a span over 2**32
                  lambda d: ember.rand(5, device=d, dtype=ember.float64),
                  lambda d: ember.randn(5, device=d, dtype=ember.complex64)]
    ember.ones(1).cuda()                            # loads the backend and its kernels
    if "random" not in ember.backend.DEVICE_KERNELS:   # no kernels: everything is host-drawn
        host_drawn += [lambda d: ember.rand(5, device=d), lambda d: ember.randn(5, device=d),
                       lambda d: ember.randint(0, 9, (5,), device=d),
                       lambda d: ember.randperm(7, device=d),
                       lambda d: ember.multinomial(ember.ones(6, device=d), 3),
                       lambda d: ember.empty(5, device=d).uniform_(-1, 1),
                       lambda d: ember.empty(5, device=d).normal_(),
                       lambda d: ember.bernoulli(ember.full((5,), 0.5, device=d))]
    for make in host_drawn:
        ember.manual_seed(11)
        gpu = make("cuda")
        ember.manual_seed(11)
        assert gpu.is_cuda and gpu.cpu().tolist() == make("cpu").tolist()


def test_cuda_seeds_are_separate_from_the_cpu_seed():
    ember.cuda.manual_seed(5)
    a = ember.rand(3, device="cuda")
    ember.manual_seed(99)
    ember.cuda.manual_seed(5)
    assert ember.rand(3, device="cuda").tolist() == a.tolist()
    assert ember.cuda.initial_seed() == 5


def test_fork_rng_restores_the_gpus_generators():
    ember.manual_seed(7)
    with ember.random.fork_rng():
        inside = ember.rand(4, device="cuda"), ember.rand(2)
    assert ember.equal(ember.rand(4, device="cuda"), inside[0])
    assert ember.equal(ember.rand(2), inside[1])


def test_dropout_on_the_gpu():
    x = ember.ones(1000, device="cuda")
    y = ember.nn.functional.dropout(x, 0.5, training=True)
    assert y.is_cuda
    kept = (y != 0).sum().item()
    assert 400 < kept < 600 and set(y.unique().tolist()) <= {0.0, 2.0}


def test_in_place_update_of_a_gpu_tensor_under_no_grad():
    w = ember.ones(3, device="cuda", requires_grad=True)
    (w * 2).sum().backward()
    with ember.no_grad():
        w.sub_(w.grad, alpha=0.5)
    assert w.cpu().tolist() == [0.0, 0.0, 0.0]


def test_save_and_load_move_through_map_location(tmp_path):
    t = ember.arange(4.).cuda()
    ember.save({"t": t}, tmp_path / "t.pt")
    assert ember.load(tmp_path / "t.pt")["t"].is_cuda
    assert ember.load(tmp_path / "t.pt", map_location="cpu")["t"].tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("where", ["cuda", {"cpu": "cuda:0"}, lambda s, loc: s.cuda()])
def test_views_loaded_onto_the_gpu_stay_views_of_one_storage(where):
    base = ember.arange(24.).reshape(4, 6)
    rg = ember.arange(3.).requires_grad_()
    buf = io.BytesIO()
    ember.save({"base": base, "row": base[2], "cols": base[1:, 1::2], "t": base.t(),
                "rg": rg, "rg_tail": rg[1:]}, buf)
    buf.seek(0)
    got = ember.load(buf, map_location=where)
    assert all(t.is_cuda for t in got.values())
    assert [got[k].storage_offset() for k in ("base", "row", "cols", "t")] == [0, 12, 7, 0]
    assert got["cols"].stride() == (6, 2) and got["t"].stride() == (1, 6)
    ptr = got["base"].untyped_storage().data_ptr()
    assert all(got[k].untyped_storage().data_ptr() == ptr for k in ("row", "cols", "t"))
    got["base"][2, 1] = -1.0                        # one storage, as in PyTorch
    assert got["row"][1].item() == -1.0 and got["t"][1, 2].item() == -1.0
    assert got["rg"].is_leaf and got["rg_tail"].requires_grad
    (got["rg"] ** 2).sum().backward()
    assert got["rg"].grad.cpu().tolist() == [0.0, 2.0, 4.0]


def test_cupy_arrays_become_tensors_without_a_copy():
    import cupy
    a = cupy.arange(3, dtype=cupy.float32)
    t = ember.as_tensor(a)
    assert t.is_cuda and t.data_ptr() == a.data.ptr


def test_dlpack_and_the_cuda_array_interface_share_gpu_memory():
    import cupy
    a = cupy.arange(6, dtype=cupy.float32).reshape(2, 3)
    t = ember.from_dlpack(a)
    assert t.device == ember.device("cuda", 0) and t.shape == (2, 3)
    assert t.data_ptr() == a.data.ptr
    t[0, 0] = 7.0                                   # one memory
    assert float(a[0, 0]) == 7.0
    back = cupy.from_dlpack(t)
    assert back.data.ptr == a.data.ptr and t.__dlpack_device__() == (2, 0)
    interface = t.__cuda_array_interface__
    assert interface["data"][0] == a.data.ptr and tuple(interface["shape"]) == (2, 3)
    with pytest.raises(RuntimeError, match="^Can't get __cuda_array_interface__ on Variable "
                                           "that requires grad"):
        t.requires_grad_().__cuda_array_interface__


def test_legacy_cuda_tensor_types():
    x = ember.cuda.LongTensor([1, 2])
    assert x.is_cuda and x.dtype == ember.int64 and isinstance(x, ember.cuda.LongTensor)
    assert not isinstance(x, ember.LongTensor) and x.type() == "ember.cuda.LongTensor"
    assert ember.cuda.FloatTensor(2, 3).device == ember.device("cuda", 0)
    moved = ember.ones(2).type(ember.cuda.DoubleTensor)
    assert moved.is_cuda and moved.dtype == ember.float64
    assert not moved.type("torch.FloatTensor").is_cuda
    ember.set_warn_always(True)         # (PyTorch warns once per process otherwise)
    try:
        with pytest.warns(UserWarning):
            ember.set_default_tensor_type(ember.cuda.FloatTensor)
        assert ember.zeros(2).is_cuda
    finally:
        ember.set_default_tensor_type(ember.FloatTensor)    # (the legacy Tensor() follows it)
        ember.set_default_device(None)
        ember.set_warn_always(False)


def test_channels_last_on_the_gpu_gives_the_cpus_values():
    ember.manual_seed(0)
    conv = ember.nn.Conv2d(3, 4, 3)
    x = ember.randn(2, 3, 8, 8)
    expected = conv(x)
    conv.cuda().to(memory_format=ember.channels_last)
    y = x.cuda().to(memory_format=ember.channels_last)
    assert y.is_cuda and y.stride() == (192, 1, 24, 3)
    assert conv.weight.is_contiguous(memory_format=ember.channels_last)
    assert_close(conv(y).cpu(), expected, rtol=1e-4, atol=1e-4)
    assert ember.empty_like(y).stride() == y.stride()


def test_copy_across_devices_carries_values_and_gradient():
    host = ember.zeros(2, 3)
    gpu = ember.arange(6.).reshape(2, 3).cuda().requires_grad_()
    host.copy_(gpu * 2)                             # GPU into CPU, differentiably
    assert host.device.type == "cpu" and host.tolist() == [[0, 2, 4], [6, 8, 10]]
    host.sum().backward()
    assert gpu.grad.is_cuda and gpu.grad.tolist() == [[2.0] * 3] * 2
    target = ember.empty(3, device="cuda")
    target.copy_(ember.tensor([1, 2, 3]))           # CPU into GPU, cast to the target's dtype
    assert target.is_cuda and target.dtype is ember.float32 and target.tolist() == [1, 2, 3]


def test_upload_keeps_a_dense_permuted_layout():
    host = ember.randn(2, 3, 4).permute(1, 0, 2)
    gpu = host.cuda()
    assert gpu.stride() == host.stride() == (4, 12, 1)
    assert np.array_equal(gpu.cpu().numpy(), host.numpy())
    sliced = ember.randn(4, 6)[:, ::2]              # not dense: arrives contiguous
    assert sliced.cuda().is_contiguous() and sliced.cuda().tolist() == sliced.tolist()


def test_out_of_range_indices_raise_at_the_next_wait_for_the_gpu():
    # NOTE [Deferred device checks]: the lookup itself does not wait to read the indices
    w = ember.randn(5, 3, device="cuda")
    out = ember.nn.functional.embedding(ember.tensor([0, 5, 1], device="cuda"), w)
    with pytest.raises(IndexError, match="index out of range in self"):
        ember.cuda.synchronize()
    ember.cuda.synchronize()                        # reported once
    bad = ember.nn.functional.embedding(ember.tensor([-1], device="cuda"), w)
    with pytest.raises(IndexError, match="index out of range in self"):
        bad.sum().item()
    good = ember.nn.functional.embedding(ember.tensor([4, 0], device="cuda"), w)
    assert_close(good.cpu(), w.cpu()[[4, 0]])
    assert out.shape == (3, 3)


def test_arange_is_made_on_the_gpu(host_traffic):
    with host_traffic() as traffic:
        ember.arange(1000, device="cuda")
    assert not traffic, dict(traffic)                # made there, not uploaded


def test_arange_values_on_the_gpu():
    assert_close(ember.arange(2, 11, 3, device="cuda").cpu(), ember.arange(2, 11, 3))
    assert_close(ember.arange(0.5, 2.0, 0.25, device="cuda").cpu(), ember.arange(0.5, 2.0, 0.25))
    t = ember.arange(4, device="cuda", dtype=ember.float16)
    assert t.device.type == "cuda" and t.dtype == ember.float16


def test_number_operands_are_filled_on_the_gpu_not_uploaded(host_traffic):
    x = ember.randn(4, 4, device="cuda")
    h = x.half()
    u = ember.tensor([250, 3], dtype=ember.uint8, device="cuda")
    with host_traffic() as traffic:
        F.threshold(x, 0.1, 20.0), ember.xlogy(x, 2.0), ember.logit(x, eps=1e-3)
        x.round(decimals=2)
        a = ember.where(x > 0, x, 0.5)
        b = x.masked_fill(x > 0, float("-inf"))
        c = ember.zeros(3, dtype=ember.uint8, device="cuda").fill_(-1)
        d = ember.nan_to_num(h)
        e = h.masked_fill(h > 0, 6e4)       # (1e6 overflows float16: PyTorch raises)
        f = u + 10
    assert not traffic, dict(traffic)
    assert f.cpu().tolist() == [4, 13]
    host = x.cpu()
    assert_close(a.cpu(), ember.where(host > 0, host, 0.5))
    assert_close(b.cpu(), host.masked_fill(host > 0, float("-inf")))
    assert c.cpu().tolist() == [255, 255, 255] and d.dtype == ember.float16
    assert_close(e.cpu(), h.cpu().masked_fill(h.cpu() > 0, 6e4))


@pytest.mark.parametrize("read,error,match", [
    (lambda x, i: x[i], IndexError, "index 7 is out of bounds for dimension 0 with size 5"),
    (lambda x, i: x.index_select(0, i), IndexError, "index out of range in self"),
    (lambda x, i: x.gather(0, i.unsqueeze(1).expand(-1, 3)), RuntimeError,
     "index 7 is out of bounds for dimension 0 with size 5"),
    (lambda x, i: x.index_add(0, i, ember.ones(3, 3, device="cuda")), RuntimeError,
     "index 7 is out of bounds for dimension 0 with size 5"),
], ids=["subscript", "index_select", "gather", "index_add"])
def test_index_ops_report_out_of_range_entries_on_the_gpu(read, error, match):
    # CuPy's indexing wraps an out-of-range entry around: without ember's check, x[7] of 5
    # rows would quietly read row 2
    x = ember.randn(5, 3, device="cuda")
    read(x, ember.tensor([0, 7, 1], device="cuda"))
    with pytest.raises(error, match=match):
        ember.cuda.synchronize()


@pytest.mark.parametrize("op", [
    lambda x: F.avg_pool2d(x, 2), lambda x: F.adaptive_avg_pool2d(x, 3),
    lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
    lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), lambda x: F.max_pool2d(x, 2),
    lambda x: F.adaptive_max_pool2d(x, 3),
], ids=["avg_pool2d", "adaptive_avg_pool2d", "bilinear", "nearest", "max_pool2d",
        "adaptive_max_pool2d"])
def test_pooling_and_resampling_tables_are_uploaded_once(host_traffic, op):
    x = ember.randn(2, 3, 8, 8, device="cuda", requires_grad=True)
    op(x).sum().backward()
    with host_traffic() as traffic:
        op(x).sum().backward()
    # what is left are reads of values (is any input non-finite, any maximum NaN)
    assert not [site for site in traffic if site.startswith("upload")], dict(traffic)


def test_a_check_queued_on_another_stream_is_reported_after_that_stream_finishes():
    w = ember.randn(5, 3, device="cuda")
    side = ember.cuda.Stream()
    side.wait_stream(ember.cuda.current_stream())
    with ember.cuda.stream(side):
        F.embedding(ember.tensor([9], device="cuda"), w)
    with pytest.raises(IndexError, match="index out of range in self"):
        w.sum().item()                              # read on the default stream


def test_custom_function_gradients_are_made_on_their_inputs_gpu():
    class Split(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):                  # gb: zeros made for the unused output
            assert ga.device == gb.device == x.device
            return (ga * 2 + gb * 3).double()       # cast back to the input's dtype

    x = ember.randn(4, device="cuda", requires_grad=True)
    a, _ = Split.apply(x)
    a.sum().backward()
    assert x.grad.device == x.device and x.grad.dtype == ember.float32
    assert x.grad.cpu().tolist() == [2.0] * 4


def test_set_shares_gpu_memory():
    b = ember.arange(6., device="cuda").view(2, 3)
    a = ember.ones(2, device="cuda").set_(b.untyped_storage(), 1, (2, 2), (1, 2))
    assert a.device == b.device and a.tolist() == [[1.0, 3.0], [2.0, 4.0]]
    a.zero_()
    assert b.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 5.0]]


def test_numbers_beside_16_bit_floats_are_read_in_float32():
    # PyTorch's CUDA kernels read a CPU scalar in float32, where its CPU kernels round it to
    # the 16-bit dtype first (NOTE [Scalars beside 16-bit floats] in ops/_dispatch.py)
    x = ember.tensor([-65504.0], dtype=ember.float16, device="cuda")
    assert (x + 70000.0).item() == 4496.0 and (x.cpu() + 70000.0).item() == float("inf")
    y = ember.tensor([256.0], dtype=ember.bfloat16, device="cuda")
    assert (y < 257).item() is True and (y.cpu() < 257).item() is False
