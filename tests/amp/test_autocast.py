import threading
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.amp._policy import POLICY
from ember.ops._registry import REGISTRY


def test_every_listed_op_exists():
    assert [n for n in POLICY if n not in REGISTRY and not hasattr(F, n)
            and not hasattr(ember, n)] == []


def test_cpu_defaults_and_queries():
    assert not ember.is_autocast_enabled("cpu")
    assert ember.get_autocast_dtype("cpu") == ember.bfloat16
    assert ember.get_autocast_dtype("cuda") == ember.float16
    with ember.autocast("cpu"):
        assert ember.is_autocast_enabled("cpu")
        assert not ember.is_autocast_enabled()          # the default device type is cuda
    assert not ember.is_autocast_enabled("cpu")
    assert ember.is_autocast_available("cpu") and not ember.is_autocast_available("xla")


def test_lower_fp32_and_promote_ops():
    a = ember.ones(2, 2)
    with ember.autocast("cpu"):
        assert (a @ a).dtype == ember.bfloat16
        assert ember.nn.Linear(2, 2)(a).dtype == ember.bfloat16
        assert ember.nn.Conv2d(1, 1, 1)(ember.ones(1, 1, 2, 2)).dtype == ember.bfloat16
        assert ember.softmax(a, 0).dtype == ember.float32            # not listed on CPU
        assert ember.cat([a, a.bfloat16()]).dtype == ember.float32   # promote
        assert ember.cat([a.bfloat16(), a.bfloat16()]).dtype == ember.bfloat16
        y = a.bfloat16()
        assert ember.prod(y).dtype == ember.float32
        assert ember.cdist(y, y).dtype == ember.float32
        assert F.mse_loss(y, y).dtype == ember.float32               # a composition
        assert ember.mm(a.double(), a.double()).dtype == ember.float64   # never downcast
        assert (a.int() + 1).dtype == ember.int32


def test_values_are_those_of_the_lower_precision_product():
    gen = np.random.default_rng(0)
    x = ember.tensor(gen.standard_normal((8, 16)).astype(np.float32))
    w = ember.tensor(gen.standard_normal((16, 4)).astype(np.float32))
    with ember.autocast("cpu"):
        got = x @ w
    want = (x.bfloat16() @ w.bfloat16())
    assert got.dtype == ember.bfloat16
    assert ember.equal(got, want)
    with ember.autocast("cpu", dtype=ember.float16):
        assert (x @ w).dtype == ember.float16


def test_gradients_flow_back_in_the_original_dtype():
    lin = ember.nn.Linear(3, 2)
    x = ember.randn(4, 3, requires_grad=True)
    with ember.autocast("cpu"):
        y = lin(x)
        loss = y.float().pow(2).sum()
        loss.backward()                     # inside the region: backward runs without casts
    assert lin.weight.grad.dtype == ember.float32 and x.grad.dtype == ember.float32
    # the gradient is the bfloat16 computation's, cast back
    ref_w = lin.weight.detach().bfloat16().requires_grad_()
    ref_x = x.detach().bfloat16().requires_grad_()
    ref = (ref_x @ ref_w.T + lin.bias.detach().bfloat16()).float().pow(2).sum()
    ref.backward()
    assert ember.allclose(x.grad, ref_x.grad.float(), rtol=1e-2, atol=1e-2)


def test_composite_ops_take_the_dtype_pytorchs_decomposition_gives():
    x, v = ember.ones(4, 4), ember.ones(4)
    with ember.autocast("cpu"):
        # einsum contracts pairs with bmm (autocast) when they share a summed label, else mul
        for equation, operands in [("ij,jk->ik", (x, x)), ("i,i->", (v, v)),
                                   ("bij,bjk->bik", (x[None], x[None]))]:
            assert ember.einsum(equation, *operands).dtype is ember.bfloat16, equation
        for equation, operands in [("i,j->ij", (v, v)), ("ij,ij->ij", (x, x)), ("ii", (x,))]:
            assert ember.einsum(equation, *operands).dtype is ember.float32, equation
        assert ember.einsum("ij,jk->ik", x.double(), x.double()).dtype is ember.float64
        # the CPU LSTM and GRU cells and bilinear are no autocast ops; the Elman cell is
        assert ember.nn.LSTMCell(4, 4)(x)[1].dtype is ember.float32
        assert ember.nn.GRUCell(4, 4)(x).dtype is ember.float32
        assert ember.nn.RNNCell(4, 4)(x).dtype is ember.bfloat16
        assert F.bilinear(x, x, ember.ones(2, 4, 4)).dtype is ember.float32


@pytest.mark.parametrize("layer", ["LSTM", "RNN"])
def test_recurrent_layers_run_in_the_low_dtype_whatever_their_input(layer):
    # PyTorch's oneDNN LSTM layer (and its Elman cells, all in the low dtype) under
    # autocast: the recurrence, states included, runs in the low dtype; the weights'
    # gradients come back in float32
    ember.manual_seed(0)
    model = getattr(ember.nn, layer)(4, 6, num_layers=2, bidirectional=True)
    x = ember.randn(5, 3, 4)
    with ember.autocast("cpu"):
        want, _ = model(x.bfloat16().float())
        for feed in (x, x.bfloat16()):
            out, state = model(feed)
            h = state[0] if layer == "LSTM" else state
            assert out.dtype == h.dtype == ember.bfloat16
            assert ember.equal(out, want)
    out.float().sum().backward()
    assert all(p.grad.dtype == ember.float32 and bool(p.grad.isfinite().all())
               for p in model.parameters())
    ref = getattr(ember.nn, layer)(4, 6, num_layers=2, bidirectional=True)
    ref.load_state_dict(model.state_dict())
    assert ember.allclose(ref(x)[0], out.float(), atol=0.05)
    with pytest.raises(ValueError, match="input dtype .ember.bfloat16. does not match weight"):
        model(x.bfloat16())                         # outside autocast, as in PyTorch


class _Product(ember.autograd.Function):
    """x @ w, noting the dtypes and autocast state its forward and backward saw."""

    seen = {}

    @staticmethod
    @ember.amp.custom_fwd(device_type="cpu")
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        _Product.seen["forward"] = (x.dtype, (x @ w).dtype)
        return x @ w

    @staticmethod
    @ember.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        _Product.seen["backward"] = ember.is_autocast_enabled("cpu")
        return grad @ w.T, x.T @ grad


class _Float32Product(_Product):
    """_Product whose forward takes its inputs in float32 with autocast off."""

    @staticmethod
    @ember.amp.custom_fwd(device_type="cpu", cast_inputs=ember.float32)
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        _Product.seen["forward"] = (x.dtype, (x @ w).dtype)
        return x @ w


@pytest.mark.parametrize("function, inside, backward", [
    (_Product, (ember.float32, ember.bfloat16), True),
    (_Float32Product, (ember.float32, ember.float32), False)])
def test_custom_functions_run_under_the_autocast_state_they_declare(function, inside, backward):
    x = ember.randn(3, 4, requires_grad=True)
    w = ember.randn(4, 2, requires_grad=True)
    with ember.autocast("cpu"):
        out = function.apply(x if function is _Product else x.bfloat16(), w)
    assert _Product.seen["forward"] == inside
    out.float().sum().backward()                    # outside the region: custom_bwd restores it
    assert _Product.seen["backward"] is backward
    assert x.grad.shape == x.shape and w.grad.dtype == ember.float32
    out = function.apply(x, w)                      # without autocast: nothing changes
    assert _Product.seen["forward"] == (ember.float32, ember.float32)
    out.sum().backward()
    assert _Product.seen["backward"] is False
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        ember.amp.custom_fwd(device_type=None)


def test_cuda_amp_custom_fwd_is_deprecated():
    with pytest.warns(FutureWarning, match=r"torch\.cuda\.amp\.custom_fwd\(args\.\.\.\)` is "
                                           r"deprecated"):
        ember.cuda.amp.custom_fwd(cast_inputs=ember.float32)
    with pytest.warns(FutureWarning, match="custom_bwd"):
        ember.cuda.amp.custom_bwd(lambda ctx, g: g)


def test_pytorchs_older_names_for_autocast_state():
    with pytest.warns(DeprecationWarning, match=r"torch\.get_autocast_gpu_dtype\(\) is "
                                                r"deprecated\. Please use "
                                                r"torch\.get_autocast_dtype\('cuda'\)"):
        assert ember.get_autocast_gpu_dtype() == ember.float16
    with pytest.warns(DeprecationWarning):
        ember.set_autocast_cpu_enabled(True)
    try:
        with pytest.warns(DeprecationWarning):
            assert ember.is_autocast_cpu_enabled()
        assert (ember.ones(2, 2) @ ember.ones(2, 2)).dtype == ember.bfloat16
        with pytest.warns(DeprecationWarning):
            ember.set_autocast_cpu_dtype(ember.float16)
        with pytest.warns(DeprecationWarning):
            assert ember.get_autocast_cpu_dtype() == ember.float16
    finally:
        ember.set_autocast_enabled("cpu", False)
        ember.set_autocast_dtype("cpu", ember.bfloat16)
    assert ember.is_autocast_cache_enabled()
    ember.set_autocast_cache_enabled(False)
    assert not ember.is_autocast_cache_enabled()
    ember.set_autocast_cache_enabled(True)
    ember.clear_autocast_cache()


def test_disabled_nested_and_decorator():
    a = ember.ones(2, 2)
    with ember.autocast("cpu"):
        with ember.autocast("cpu", enabled=False):
            assert (a @ a).dtype == ember.float32
        assert (a @ a).dtype == ember.bfloat16

    @ember.autocast("cpu")
    def f(t):
        return t @ t
    assert f(a).dtype == ember.bfloat16
    assert (a @ a).dtype == ember.float32


def test_state_is_per_thread():
    seen = []
    with ember.autocast("cpu"):
        t = threading.Thread(target=lambda: seen.append(ember.is_autocast_enabled("cpu")))
        t.start()
        t.join()
    assert seen == [False]


def test_bad_arguments():
    with pytest.raises(RuntimeError, match="^Expected one of cpu, cuda, ipu, .*, privateuseone "
                                           "device type at start of device string: xyz$"):
        ember.autocast("xyz")           # not a device type: torch.device's error
    with pytest.raises(RuntimeError, match="^User specified an unsupported autocast "
                                           "device_type 'xla'$"):
        ember.autocast("xla")           # a device type ember has no autocast for
    with pytest.raises(RuntimeError, match="device string: tpu$"):
        ember.get_autocast_dtype("tpu")
    assert ember.get_autocast_dtype("cpu:0") is ember.bfloat16
    with ember.autocast("cpu:0"):
        assert ember.is_autocast_enabled("cpu")
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        ember.autocast(ember.device("cpu"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ctx = ember.autocast("cpu", dtype=ember.float32)
    assert "target dtype is not supported" in str(caught[0].message)
    with ctx:
        assert not ember.is_autocast_enabled("cpu")


@pytest.mark.skipif(ember.cuda.is_available(), reason="checks the no-CUDA fallback")
def test_cuda_autocast_without_cuda_warns_and_disables():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        ctx = ember.autocast("cuda")
    with ctx:
        assert not ember.is_autocast_enabled("cuda")


def test_warnings_inside_autocast_wrapped_functions_point_at_the_caller():
    """The wrapper autocast puts around nn.functional compositions is not counted by their
    warnings' stacklevel: they blame the line that called the function, as PyTorch's do."""
    import warnings

    import ember.nn.functional as F
    x = ember.rand(3, 4)
    calls = [lambda: F.mse_loss(x, x[0]), lambda: F.kl_div(x, x),
             lambda: F.softmin(x), lambda: F.l1_loss(x, x, size_average=True)]
    for call in calls:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        assert caught and all(w.filename == __file__ for w in caught), \
            [(w.filename, str(w.message)) for w in caught]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ember.autocast("cpu", dtype=ember.bfloat16):
            F.mse_loss(x, x[0])
    assert [w.filename for w in caught] == [__file__]


def test_cpu_gru_layers_and_cells_update_the_state_in_its_own_dtype():
    # PyTorch's CPU GRU layer has no oneDNN kernel: its cells' matrix products run in the
    # low dtype, and h' = n + z * (h - n) takes the dtype of h (float32 for float32 input)
    ember.manual_seed(0)
    gru = ember.nn.GRU(3, 4, num_layers=2, bidirectional=True)
    x = ember.randn(5, 2, 3)
    with ember.autocast("cpu"):
        out, h = gru(x)
        out16, h16 = gru(x, ember.zeros(4, 2, 4, dtype=ember.bfloat16))
        cell_out = ember.nn.GRUCell(3, 4).to(ember.bfloat16)(x[0].bfloat16())
    assert (out.dtype, h.dtype) == (ember.float32, ember.float32)
    assert (out16.dtype, h16.dtype) == (ember.bfloat16, ember.bfloat16)
    assert cell_out.dtype == ember.bfloat16
    assert ember.allclose(out, gru(x)[0], atol=0.03)
    out.sum().backward()
    assert all(p.grad.dtype == ember.float32 for p in gru.parameters())
    with ember.autocast("cpu", dtype=ember.float16):   # float16 gates, bfloat16 states
        lstm_cell = ember.nn.LSTMCell(3, 4).to(ember.bfloat16)
        h, c = lstm_cell(x[0].bfloat16())
    assert (h.dtype, c.dtype) == (ember.float32, ember.float32)


def test_compositions_of_matrix_products_lower_like_their_mm():
    # PyTorch builds these from mm after checking their operands share one dtype; a
    # contraction down to one number is a dot product, which CPU autocast does not list
    m, v = ember.ones(3, 4), ember.ones(4)
    with ember.autocast("cpu"):
        lower = [ember.tensordot(m, m.T, dims=1), ember.tensordot(v, v, dims=0),
                 ember.tensordot(v, m.T, dims=1), ember.inner(m, v), m.inner(m),
                 ember.linalg.multi_dot([v, v]), ember.chain_matmul(m, m.T),
                 ember.linalg.multi_dot([m, m.T, m]), ember.linalg.matrix_power(m[:, :3], 2),
                 m[:, :3].matrix_power(3)]
        assert [t.dtype for t in lower] == [ember.bfloat16] * len(lower)
        single = [ember.tensordot(v, v, dims=1), ember.tensordot(m, m, dims=2),
                  ember.tensordot(v, ember.ones(4, 1), dims=1), ember.inner(v, v),
                  ember.inner(m[:1], m[:1]), ember.inner(v, ember.tensor(2.0)),
                  ember.linalg.matrix_power(m[:, :3], 1), ember.linalg.matrix_power(m[:, :3], 0),
                  ember.chain_matmul(m)]
        assert [t.dtype for t in single] == [ember.float32] * len(single)
        a = ember.eye(3) * 2
        assert ember.linalg.matrix_power(a.bfloat16(), -1).dtype == ember.float32
        assert ember.tensordot(m.double(), m.T.double(), dims=1).dtype == ember.float64
        assert ember.tensordot(m.long(), m.T.long(), dims=1).dtype == ember.int64
        with pytest.raises(RuntimeError, match="both inputs should have same dtype"):
            ember.tensordot(m, m.T.bfloat16(), dims=1)
        with pytest.raises(RuntimeError, match="all tensors must have be the same dtype"):
            ember.linalg.multi_dot([m, m.T.bfloat16()])
        gen = np.random.default_rng(0)
        x = ember.tensor(gen.standard_normal((3, 4)).astype(np.float32))
        y = ember.tensor(gen.standard_normal((4, 2)).astype(np.float32))
        assert ember.equal(ember.tensordot(x, y, dims=1), x.bfloat16() @ y.bfloat16())


def test_generic_convolution_is_not_cast_but_the_affine_grids_product_is():
    # PyTorch lists conv1d...conv_transpose3d, not the generic convolution they share; and
    # affine_grid multiplies its base grid by theta with bmm, which autocast lists
    x, w = ember.ones(1, 2, 5), ember.ones(3, 2, 3)
    theta = ember.tensor([[[1.0, 0.1, 0.0], [0.2, 1.0, 0.3]]])
    for device_type in ("cpu", "cuda"):
        assert "convolution" not in POLICY or device_type not in POLICY["convolution"]
    with ember.autocast("cpu"):
        assert ember.convolution(x, w, None, [1], [0], [1], False, [0], 1).dtype == ember.float32
        assert F.conv1d(x, w).dtype == ember.bfloat16
        grid = F.affine_grid(theta, [1, 1, 2, 3], align_corners=False)
    assert grid.dtype == ember.bfloat16
    want = F.affine_grid(theta.bfloat16().float(), [1, 1, 2, 3], align_corners=False)
    assert ember.allclose(grid.float(), want, atol=1e-2)


def test_cpu_float32_kernels_pytorch_lists():
    x3, x4 = ember.ones(1, 2, 6).bfloat16(), ember.ones(1, 2, 4, 4).bfloat16()
    x5 = ember.ones(1, 2, 4, 4, 4).bfloat16()
    with ember.autocast("cpu"):
        # F.pad runs a listed kernel for reflection (1-D, 2-D) and replication (1-D to 3-D)
        assert F.pad(x3, (1, 1), mode="reflect").dtype == ember.float32
        assert F.pad(x4, (1, 1, 1, 1), mode="reflect").dtype == ember.float32
        assert F.pad(x5, (1, 1, 1, 1, 1, 1), mode="reflect").dtype == ember.bfloat16
        for pad, x in (((1, 1), x3), ((1, 1, 1, 1), x4), ((1,) * 6, x5)):
            assert F.pad(x, pad, mode="replicate").dtype == ember.float32
        assert F.pad(x4, (1, 1, 1, 1), mode="circular").dtype == ember.bfloat16
        assert F.pad(x4, (1, 1)).dtype == ember.bfloat16
        assert ember.nn.ReflectionPad2d(1)(x4).dtype == ember.float32
        samples = ember.full((1, 2, 2), 0.5, dtype=ember.bfloat16)
        assert F.fractional_max_pool2d(x4, 2, output_size=2,
                                       _random_samples=samples).dtype == ember.float32
        out, idx = F.max_pool1d(x3, 2, return_indices=True)
        assert F.max_unpool1d(out, idx, 2).dtype == ember.float32
        a, b = (ember.eye(3) * 2).bfloat16(), ember.ones(3, 2).bfloat16()
        assert [t.dtype for t in ember.triangular_solve(b, a)] == [ember.float32] * 2
        assert [t.dtype for t in ember.geqrf(a)] == [ember.float32] * 2
        tau = ember.ones(2)
        assert ember.orgqr(a, tau).dtype == ember.float32
        assert ember.linalg.householder_product(a, tau).dtype == ember.float32
        lu, piv = ember.linalg.lu_factor(ember.eye(3) * 2)
        assert ember.lu_solve(b, lu, piv).dtype == ember.float32   # the legacy op is listed
        with pytest.raises(RuntimeError, match="Expected LU and B to have the same dtype"):
            ember.linalg.lu_solve(lu, piv, b)                       # linalg.lu_solve is not


def test_promote_ops_leave_float64_aside():
    a = ember.ones(3, 2, dtype=ember.float64)
    src = ember.ones(2, 2, dtype=ember.bfloat16)
    with ember.autocast("cpu"):
        assert ember.cat([a, src]).dtype == ember.float64        # cat promotes by itself
        assert ember.cat([a.float(), src]).dtype == ember.float32
        with pytest.raises(RuntimeError, match=r"self and source expected to have the same "
                                               r"dtype, but got \(self\) Double and \(source\) "
                                               r"BFloat16"):
            a.index_copy(0, ember.tensor([0, 2]), src)


def test_unsupported_dtype_warning_names_the_dtypes_and_nesting_is_counted():
    with pytest.warns(UserWarning, match=r"CPU Autocast only supports dtypes of "
                                         r"ember\.bfloat16, ember\.float16 currently\."):
        ember.autocast("cpu", dtype=ember.float64)
    start = ember.autocast_increment_nesting()
    with ember.autocast("cpu", enabled=False):
        assert ember.autocast_increment_nesting() == start + 2
        assert ember.autocast_decrement_nesting() == start + 1
    assert ember.autocast_decrement_nesting() == start - 1


def test_compositions_pytorch_casts_op_by_op():
    # linalg.pinv decomposes in float32 and multiplies back in bfloat16; a negative power
    # inverts in float32, then multiplies in bfloat16; torch.max_pool3d is listed, the kernel
    # F.max_pool3d runs for indices is not; Tensor.lu_solve is the listed torch.lu_solve
    a = ember.tensor([[2.0, 1.0, 0.5], [0.3, 3.0, 1.0], [0.2, 0.1, 4.0]], requires_grad=True)
    x5 = ember.arange(64.).reshape(1, 1, 4, 4, 4).bfloat16()
    with ember.autocast("cpu"):
        p = ember.linalg.pinv(a)
        assert p.dtype == ember.bfloat16 and type(p.grad_fn).__name__ == "LinalgPinvBackward0"
        assert ember.linalg.pinv(a.double()).dtype == ember.float64
        assert ember.pinverse(a).dtype == ember.float32
        with pytest.raises(RuntimeError, match=r"linalg.pinv\(BFloat16\{\[3, 3\]\}\)"):
            ember.linalg.pinv(a.bfloat16())
        powers = [ember.linalg.matrix_power(a, n) for n in (-3, -2, -1)]
        assert [t.dtype for t in powers] == [ember.bfloat16, ember.bfloat16, ember.float32]
        assert ember.linalg.matrix_power(a.detach().bfloat16(), -2).dtype == ember.bfloat16
        assert a.matrix_power(-2).dtype == ember.bfloat16
        assert F.max_pool3d(x5, 2).dtype == ember.float32
        out, idx = F.max_pool3d(x5, 2, return_indices=True)
        assert out.dtype == ember.bfloat16 and idx.dtype == ember.int64
        assert ember.nn.MaxPool3d(2, return_indices=True)(x5)[0].dtype == ember.bfloat16
        lu, piv = ember.linalg.lu_factor(a.detach())
        assert ember.ones(3, 2).bfloat16().lu_solve(lu, piv).dtype == ember.float32
    inverse = ember.linalg.inv(a.detach())
    expected = inverse.bfloat16() @ inverse.bfloat16()
    assert ember.equal(powers[1].detach(), expected)
    p.float().sum().backward()
    assert a.grad.dtype == ember.float32
    np.testing.assert_allclose(p.float().detach().numpy(),
                               ember.linalg.pinv(a.detach()).numpy(), rtol=1e-2, atol=1e-2)


def test_autocast_without_dtype_uses_the_dtype_in_effect():
    with ember.autocast("cpu", dtype=ember.float16):
        with ember.autocast("cpu"):                     # the outer region's dtype, not bf16
            assert ember.get_autocast_dtype("cpu") == ember.float16
            assert ember.mm(ember.ones(2, 2), ember.ones(2, 2)).dtype == ember.float16
    ember.set_autocast_dtype("cpu", ember.float16)
    try:
        assert ember.autocast("cpu").fast_dtype == ember.float16
    finally:
        ember.set_autocast_dtype("cpu", ember.bfloat16)
    assert ember.autocast("cpu").fast_dtype == ember.bfloat16


def test_cache_enabled_is_the_regions_and_restored_after():
    assert ember.is_autocast_cache_enabled()
    with ember.autocast("cpu", cache_enabled=False) as region:
        assert region._cache_enabled is False
        assert not ember.is_autocast_cache_enabled()
        with ember.autocast("cpu"):                     # None: the switch in effect
            assert not ember.is_autocast_cache_enabled()
    assert ember.is_autocast_cache_enabled()

    @ember.autocast("cpu", cache_enabled=False)
    def decorated():
        return ember.is_autocast_cache_enabled()
    assert decorated() is False


def test_state_queries_parse_device_strings():
    ember.set_autocast_enabled(True)                    # PyTorch's older form: cuda
    try:
        assert ember.is_autocast_enabled("cuda:0") and ember.is_autocast_enabled()
    finally:
        ember.set_autocast_enabled("cuda", False)
    assert not ember.is_autocast_enabled("cuda")
    with pytest.raises(RuntimeError, match="device type at start of device string: foo"):
        ember.is_autocast_enabled("foo")
    with pytest.raises(RuntimeError, match="device type at start of device string: foo"):
        ember.amp.is_autocast_available("foo")
    assert ember.amp.is_autocast_available("cpu:0")


def test_calls_with_out_run_uncast_as_in_pytorch():
    a, b = ember.randn(3, 3), ember.randn(3, 3)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        assert ember.mm(a, b).dtype is ember.bfloat16
        out = ember.empty(3, 3)
        assert ember.mm(a, b, out=out) is out and out.dtype is ember.float32
        np.testing.assert_allclose(out.numpy(), a.numpy() @ b.numpy(), rtol=1e-6)
        with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float"):
            ember.mm(a, b, out=ember.empty(3, 3, dtype=ember.bfloat16))


@pytest.mark.parametrize("args,position", [(("cpu",), 1), ((1,), 1), (("cpu", 1), 2)])
def test_set_autocast_enabled_takes_only_bools(args, position):
    with pytest.raises(TypeError, match=f"argument 'enabled' \\(position {position}\\) must be "
                                        f"bool"):
        ember.set_autocast_enabled(*args)
    assert not ember.is_autocast_enabled("cpu")
