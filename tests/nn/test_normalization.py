"""Batch, instance, layer, group, RMS and local-response normalization: functions against
NumPy references, gradients, running statistics, modules and their errors."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from ember.autograd import gradcheck, gradgradcheck

D = ember.float64


def _rand(*shape, rg=False):
    return ember.randn(shape, dtype=D, requires_grad=rg)


def _norm_ref(x, axes, eps=1e-5):
    mean = x.mean(axes, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axes, keepdims=True) + eps)


# --- batch norm -------------------------------------------------------------------------------

def test_batch_norm_training_updates_running_stats_with_unbiased_variance():
    x = _rand(4, 3, 5)
    rm, rv = ember.zeros(3, dtype=D), ember.ones(3, dtype=D)
    w, b = _rand(3), _rand(3)
    y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2)
    xn = x.numpy()
    want = _norm_ref(xn, (0, 2)) * w.numpy()[:, None] + b.numpy()[:, None]
    np.testing.assert_allclose(y.numpy(), want, atol=1e-12)
    np.testing.assert_allclose(rm.numpy(), 0.2 * xn.mean((0, 2)))
    np.testing.assert_allclose(rv.numpy(), 0.8 + 0.2 * xn.var((0, 2), ddof=1))


def test_batch_norm_eval_uses_running_stats():
    x, rm, rv = _rand(4, 3), _rand(3), ember.rand(3, dtype=D) + 0.5
    y = F.batch_norm(x, rm, rv, training=False, eps=1e-3)
    np.testing.assert_allclose(y.numpy(), (x.numpy() - rm.numpy()) / np.sqrt(rv.numpy() + 1e-3))


def test_native_norms_all_outputs_twice_differentiable():
    x, w, b = _rand(3, 2, 2, rg=True), _rand(2, rg=True), _rand(2, rg=True)
    assert gradgradcheck(lambda *a: ember.native_batch_norm(*a, None, None, True, 0.1, 1e-5),
                         (x, w, b))
    lw, lb = _rand(2, rg=True), _rand(2, rg=True)
    assert gradgradcheck(lambda *a: ember.native_layer_norm(a[0], (2,), *a[1:], 1e-5),
                         (x, lw, lb))
    assert gradgradcheck(lambda *a: ember.native_group_norm(*a, 3, 2, 2, 2, 1e-5), (x, w, b))


def test_batch_norm_functional_errors():
    with pytest.raises(ValueError, match=r"Expected more than 1 value per channel when "
                                         r"training, got input size ember.Size\(\[1, 3\]\)"):
        F.batch_norm(ember.randn(1, 3), ember.zeros(3), ember.ones(3), training=True)
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements not 4"):
        F.batch_norm(ember.randn(2, 3), ember.zeros(4), ember.ones(3), training=True)
    with pytest.raises(RuntimeError, match="running_mean should contain 4 elements not 3"):
        nn.BatchNorm2d(3)(ember.randn(2, 4, 2, 2))          # the running stats come first
    with pytest.raises(RuntimeError, match="running_var should contain 3 elements not 4"):
        F.batch_norm(ember.randn(2, 3), ember.zeros(3), ember.ones(4), ember.ones(2))
    with pytest.raises(RuntimeError, match="running_mean must be defined in evaluation mode"):
        F.batch_norm(ember.randn(2, 3), None, None)
    for eps in (0, 0.0, -1e-3):
        with pytest.raises(ValueError, match=f"^batch_norm eps must be positive during "
                                             f"training, but got {eps}$"):
            F.batch_norm(ember.randn(2, 3), None, None, training=True, eps=eps)
    with pytest.raises(ValueError, match="during training, but got 0\n"):
        nn.BatchNorm1d(3, eps=0)(ember.randn(2, 3))
    assert nn.BatchNorm1d(3, eps=0).eval()(ember.ones(2, 3)).tolist() == [[1.0] * 3] * 2


def test_batchnorm_module():
    m = nn.BatchNorm2d(3)
    assert repr(m) == ("BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, "
                       "track_running_stats=True)")
    assert [n for n, _ in m.named_buffers()] == ["running_mean", "running_var",
                                                  "num_batches_tracked"]
    assert m.weight.tolist() == [1, 1, 1] and m.bias.tolist() == [0, 0, 0]
    x = ember.randn(4, 3, 2, 2) * 3 + 1
    y = m(x)
    assert int(m.num_batches_tracked) == 1
    np.testing.assert_allclose(y.detach().numpy(), _norm_ref(x.numpy(), (0, 2, 3)), atol=1e-5)
    m.eval()
    y = m(x)
    want = (x.numpy() - m.running_mean.numpy()[:, None, None]) / np.sqrt(
        m.running_var.numpy()[:, None, None] + 1e-5)
    np.testing.assert_allclose(y.detach().numpy(), want, atol=1e-5)
    assert int(m.num_batches_tracked) == 1


def test_batchnorm_cumulative_average_when_momentum_is_none():
    m = nn.BatchNorm1d(2, momentum=None, dtype=D)
    xs = [_rand(5, 2) for _ in range(3)]
    for x in xs:
        m(x)
    np.testing.assert_allclose(m.running_mean.numpy(),
                               np.mean([x.numpy().mean(0) for x in xs], axis=0))
    np.testing.assert_allclose(m.running_var.numpy(),
                               np.mean([x.numpy().var(0, ddof=1) for x in xs], axis=0))


def test_batchnorm_without_running_stats_uses_batch_stats_in_eval():
    m = nn.BatchNorm1d(2, affine=False, track_running_stats=False).eval()
    assert m.running_mean is None and list(m.parameters()) == []
    x = ember.randn(6, 2)
    np.testing.assert_allclose(m(x).numpy(), _norm_ref(x.numpy(), (0,)), atol=1e-5)


@pytest.mark.parametrize("cls,shape,text", [
    (nn.BatchNorm1d, (2, 3, 4, 5), "expected 2D or 3D input (got 4D input)"),
    (nn.BatchNorm2d, (2, 3, 4), "expected 4D input (got 3D input)"),
    (nn.BatchNorm3d, (2, 3, 4), "expected 5D input (got 3D input)"),
    (nn.InstanceNorm1d, (2, 3, 4, 5), "expected 2D or 3D input (got 4D input)"),
    (nn.InstanceNorm2d, (3, 4), "expected 3D or 4D input (got 2D input)"),
])
def test_input_rank_errors(cls, shape, text):
    with pytest.raises(ValueError, match=text.replace("(", r"\(").replace(")", r"\)")):
        cls(3)(ember.randn(shape))


# --- instance norm ----------------------------------------------------------------------------

def test_instance_norm_and_running_stats():
    x = _rand(2, 3, 5)
    rm, rv = ember.zeros(3, dtype=D), ember.ones(3, dtype=D)
    y = F.instance_norm(x, rm, rv, momentum=0.5)
    np.testing.assert_allclose(y.numpy(), _norm_ref(x.numpy(), (2,)), atol=1e-12)
    np.testing.assert_allclose(rm.numpy(), 0.5 * x.numpy().mean(2).mean(0))
    np.testing.assert_allclose(rv.numpy(), 0.5 + 0.5 * x.numpy().var(2, ddof=1).mean(0))
    assert gradcheck(lambda x, w: F.instance_norm(x, weight=w, bias=w),
                     (_rand(2, 3, 4, rg=True), _rand(3, rg=True)))
    with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
        F.instance_norm(ember.randn(2, 6, 1))


def test_instancenorm_module():
    m = nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
    assert repr(m) == ("InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, "
                       "track_running_stats=True)")
    x = ember.randn(3, 4, 4)                    # unbatched
    np.testing.assert_allclose(m(x).detach().numpy(), _norm_ref(x.numpy(), (1, 2)), atol=1e-5)
    assert m.running_mean.abs().sum() > 0
    with pytest.raises(ValueError, match=r"expected input's size at dim=1 to match "
                                         r"num_features \(3\), but got: 4."):
        nn.InstanceNorm1d(3, affine=True)(ember.randn(2, 4, 5))


# --- layer, group, rms, local response ---------------------------------------------------------

def test_layer_norm_matches_numpy():
    x, w, b = _rand(2, 3, 4), _rand(3, 4), _rand(3, 4)
    y = F.layer_norm(x, (3, 4), w, b, 1e-3)
    np.testing.assert_allclose(y.numpy(), _norm_ref(x.numpy(), (1, 2), 1e-3) * w.numpy()
                               + b.numpy(), atol=1e-12)
    assert ember.layer_norm(x, [4]).shape == (2, 3, 4)


def test_layernorm_module():
    m = nn.LayerNorm(4)
    assert repr(m) == "LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)"
    m = nn.LayerNorm((2, 3), elementwise_affine=False, bias=False)
    assert repr(m) == "LayerNorm((2, 3), eps=1e-05, elementwise_affine=False, bias=False)"
    assert list(m.parameters()) == []
    m = nn.LayerNorm(4, bias=False)
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    x = ember.randn(3, 4)
    np.testing.assert_allclose(m(x).detach().numpy(), _norm_ref(x.numpy(), (1,)), atol=1e-5)


def test_group_norm():
    x, w, b = _rand(2, 4, 3), _rand(4), _rand(4)
    y = F.group_norm(x, 2, w, b)
    want = _norm_ref(x.numpy().reshape(2, 2, 6), (2,)).reshape(2, 4, 3)
    np.testing.assert_allclose(y.numpy(), want * w.numpy()[:, None] + b.numpy()[:, None],
                               atol=1e-12)
    m = nn.GroupNorm(2, 4)
    assert repr(m) == "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)"
    with pytest.raises(ValueError, match=r"num_channels \(4\) must be divisible by num_groups "
                                         r"\(3\)"):
        nn.GroupNorm(3, 4)


def test_rms_norm():
    x, w = _rand(2, 3, 4, rg=True), _rand(4, rg=True)
    y = F.rms_norm(x, (4,), w)
    xn = x.detach().numpy()
    eps = np.finfo(np.float64).eps
    want = xn / np.sqrt((xn * xn).mean(-1, keepdims=True) + eps) * w.detach().numpy()
    np.testing.assert_allclose(y.detach().numpy(), want, atol=1e-12)
    assert gradcheck(lambda x, w: F.rms_norm(x, (3, 4), None, 1e-3) * w, (x, w))
    m = nn.RMSNorm([2, 3], eps=1e-3, elementwise_affine=False)
    assert repr(m) == "RMSNorm((2, 3), eps=0.001, elementwise_affine=False)"
    assert repr(nn.RMSNorm(4)) == "RMSNorm((4,), eps=None, elementwise_affine=True)"
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[5\], expected input with "
                                           r"shape \[\*5\], but got input of size\[2, 6\]"):
        F.rms_norm(ember.randn(2, 6), [5])


def _lrn_ref(x, size, alpha=1e-4, beta=0.75, k=1.0):
    c = x.shape[1]
    sq = x * x
    div = np.zeros_like(x)
    for i in range(c):
        lo, hi = max(0, i - size // 2), min(c, i + (size - 1) // 2 + 1)
        div[:, i] = sq[:, lo:hi].sum(1)
    return x / (k + alpha / size * div) ** beta


def test_local_response_norm():
    x = _rand(2, 5, 3, rg=True)
    for size in (1, 2, 3, 4):
        np.testing.assert_allclose(F.local_response_norm(x, size, 0.1, 0.5, 2.0).detach().numpy(),
                                   _lrn_ref(x.detach().numpy(), size, 0.1, 0.5, 2.0))
    assert gradcheck(lambda x: F.local_response_norm(x, 3, 0.5), (x,))
    assert repr(nn.LocalResponseNorm(3)) == "LocalResponseNorm(3, alpha=0.0001, beta=0.75, k=1.0)"
    with pytest.raises(ValueError, match="Expected 3D or higher dimensionality"):
        F.local_response_norm(ember.randn(2, 6), 2)


def _cross_map_lrn_ref(x, size, alpha, beta, k):
    half = (size - 1) // 2
    sq = x * x
    div = np.zeros_like(x)
    for c in range(x.shape[1]):
        div[:, c] = sq[:, max(0, c - half):c + half + 1].sum(1)
        if c > half:    # PyTorch's running window never drops channel 0
            div[:, c] += sq[:, 0]
    return x / (k + alpha / size * div) ** beta


def test_cross_map_lrn2d():
    x = _rand(2, 6, 3, 2, rg=True)
    for size in (1, 2, 3, 4, 5):
        out = nn.CrossMapLRN2d(size, alpha=0.5, beta=0.75, k=2.0)(x)
        np.testing.assert_allclose(out.detach().numpy(),
                                   _cross_map_lrn_ref(x.detach().numpy(), size, 0.5, 0.75, 2.0),
                                   rtol=1e-6)
    assert gradcheck(nn.CrossMapLRN2d(3, 0.5, 0.75, 2.0), (x,))
    assert repr(nn.CrossMapLRN2d(3)) == "CrossMapLRN2d(3, alpha=0.0001, beta=0.75, k=1)"
    with pytest.raises(ValueError, match=r"^CrossMapLRN2d: Expected input to be 4D, got 3D "):
        nn.CrossMapLRN2d(3)(ember.ones(2, 3, 4))


def test_local_response_norm_dtypes_follow_average_pooling():
    # int64 is pooled as in PyTorch (float result); other integer dtypes have no pooling kernel
    out = F.local_response_norm(ember.ones(1, 2, 1, dtype=ember.int64), 1, alpha=3., beta=1.)
    assert out.dtype == ember.float32 and out.flatten().tolist() == [0.25, 0.25]
    with pytest.raises(NotImplementedError, match="\"avg_pool2d\" not implemented for 'Int'"):
        F.local_response_norm(ember.ones(1, 4, 3, dtype=ember.int32), 2)
    with pytest.raises(NotImplementedError,
                       match="\"avg_pool3d_out_frame\" not implemented for 'Bool'"):
        F.local_response_norm(ember.ones(1, 4, 3, 3, dtype=ember.bool), 2)
    with pytest.raises(NotImplementedError,   # 3-D pooling on CPU takes no 16-bit floats
                       match="\"avg_pool3d_out_frame\" not implemented for 'Half'"):
        F.local_response_norm(ember.ones(1, 4, 3, 3, dtype=ember.float16), 2)
    assert F.local_response_norm(ember.ones(1, 4, 3, dtype=ember.float16), 2).dtype == ember.float16


def test_normalize():
    x = _rand(3, 4, rg=True)
    for p, dim in ((2.0, 1), (1, 0), (3, -1)):
        xn = x.detach().numpy()
        norm = (np.abs(xn) ** p).sum(dim, keepdims=True) ** (1 / p)
        np.testing.assert_allclose(F.normalize(x, p, dim).detach().numpy(), xn / norm)
    assert F.normalize(ember.zeros(2, 3)).abs().sum() == 0
    assert gradcheck(lambda x: F.normalize(x, dim=0), (x,))
    out = ember.empty(0, dtype=D)
    F.normalize(x.detach(), out=out)
    np.testing.assert_allclose(out.numpy(), F.normalize(x).detach().numpy())


def test_rms_norm_checks_normalized_shape_as_pytorch_does():
    x = ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="at least 1-dimensional"):
        F.rms_norm(x, ())
    with pytest.raises(RuntimeError, match=r"expected input with shape \[\*4\]"):
        F.rms_norm(x, (4,))
    # torch 2.13's int[] parser refuses a bare int here (layer_norm's int[1] takes one)
    with pytest.raises(TypeError, match=r"rms_norm\(\): argument 'normalized_shape' \(position 2\) "
                                        r"must be tuple of ints, not int"):
        F.rms_norm(x, 3)


def test_sync_batch_norm_in_one_process_is_batch_norm():
    ember.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4),
                          nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4, bias=False)))
    model[1].running_mean.fill_(0.5)
    weight = model[1].weight
    reference = nn.BatchNorm2d(4)
    reference.load_state_dict(model[1].state_dict())
    synced = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert synced is model and isinstance(model[1], nn.SyncBatchNorm)
    assert isinstance(model[2][1], nn.SyncBatchNorm) and model[2][1].bias is None
    assert model[1].weight is weight and model[1].running_mean.tolist() == [0.5] * 4
    x = ember.randn(2, 4, 5, 5)
    assert ember.allclose(model[1](x), reference(x))
    assert ember.allclose(model[1].running_var, reference.running_var)
    assert nn.SyncBatchNorm(3)(ember.randn(5, 3)).shape == (5, 3)
    with pytest.raises(ValueError, match=r"expected at least 2D input \(got 1D input\)"):
        nn.SyncBatchNorm(3)(ember.randn(3))


def test_old_batch_norm_state_dicts_without_num_batches_tracked_load():
    import collections
    bn = nn.BatchNorm2d(3)
    bn.num_batches_tracked.fill_(5)
    old = {k: v for k, v in bn.state_dict().items() if k != "num_batches_tracked"}
    assert not bn.load_state_dict(old).missing_keys and bn.num_batches_tracked.item() == 5
    assert bn.state_dict()._metadata[""]["version"] == 2
    current = collections.OrderedDict(old)
    current._metadata = {"": {"version": 2}}
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: '
                                           '"num_batches_tracked"'):
        bn.load_state_dict(current)


def test_norm_modules_refuse_mixed_dtypes():
    msg = r"^mixed dtype \(CPU\): all inputs must share same datatype\.(\n|$)"
    x64, i64 = ember.ones(2, 3, 4, dtype=ember.float64), ember.ones(2, 3, 4, dtype=ember.int64)
    for m, x in ((nn.BatchNorm1d(3), x64), (nn.BatchNorm1d(3, affine=False), x64),
                 (nn.LayerNorm(4), x64), (nn.LayerNorm(4), i64), (nn.GroupNorm(1, 3), x64),
                 (nn.GroupNorm(1, 3), i64), (nn.InstanceNorm1d(3, affine=True), x64)):
        with pytest.raises(RuntimeError, match=msg):
            m(x)
    half = ember.ones(2, 3, 4, dtype=ember.float16)     # float32 parameters are fine for half
    assert nn.LayerNorm(4)(half).dtype == ember.float16
    assert nn.BatchNorm1d(3)(half).dtype == ember.float16


def test_instance_norm_running_stats_of_another_dtype():
    m = nn.InstanceNorm1d(3, track_running_stats=True)
    y = m(ember.arange(24.0, dtype=ember.float64).reshape(2, 3, 4))
    assert y.dtype == ember.float64 and m.running_mean.dtype == ember.float32
    assert m.running_mean.tolist() == pytest.approx([0.75, 1.15, 1.55])
    assert m.running_var.tolist() == pytest.approx([1.0667] * 3, abs=1e-4)


def test_batch_norm_repr_needs_only_pytorchs_attributes():
    # a whole BatchNorm pickled by PyTorch (torch.save(model)) has no ember-only attributes
    for bias in (True, False):
        m = nn.BatchNorm1d(3, bias=bias)
        del m.__dict__["use_bias"]
        assert repr(m) == (f"BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=True, bias={bias}, "
                           f"track_running_stats=True)")
        synced = nn.SyncBatchNorm.convert_sync_batchnorm(m)
        assert (synced.bias is None) is (not bias)
