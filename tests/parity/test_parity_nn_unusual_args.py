"""nn layers with rarely used arguments against PyTorch: LPPool with an infinite norm,
InstanceNorm with momentum=None, sparse Embedding with scale_grad_by_freq."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _value_and_grad(lib, functional, x, *args, **kwargs):
    t = lib.tensor(x, requires_grad=True)
    out = getattr(lib.nn.functional, functional)(t, *args, **kwargs)
    out.sum().backward()
    return np.asarray(out.detach().numpy()), np.asarray(t.grad.numpy())


@pytest.mark.parametrize("norm_type", [float("inf"), float("-inf")])
@pytest.mark.parametrize("functional, shape, kernel", [
    ("lp_pool1d", (2, 3, 7), 2),
    ("lp_pool2d", (2, 3, 5, 6), (2, 3)),
    ("lp_pool3d", (1, 2, 4, 5, 4), 2),
])
def test_lp_pool_infinite_norm_is_max_of_absolute_values(functional, shape, kernel, norm_type):
    x = np.random.default_rng(0).standard_normal(shape)
    kwargs = dict(ceil_mode=True) if functional != "lp_pool3d" else {}
    want = _value_and_grad(torch, functional, x, norm_type, kernel, **kwargs)
    got = _value_and_grad(ember, functional, x, norm_type, kernel, **kwargs)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)


def test_lp_pool_module_infinite_norm():
    x = np.array([[[-3.0, 1.0, -0.5, 0.2, 4.0]]])
    out = ember.nn.LPPool1d(float("inf"), 2)(ember.tensor(x))
    assert out.tolist() == [[[3.0, 0.5]]]


@pytest.mark.parametrize("name, shape", [("InstanceNorm1d", (4, 3, 6)),
                                         ("InstanceNorm2d", (3, 4, 5))])
def test_instance_norm_momentum_none_leaves_running_stats(name, shape):
    x = np.random.default_rng(1).standard_normal(shape) * 2 + 1
    stats = []
    for lib in (torch, ember):
        m = getattr(lib.nn, name)(3, momentum=None, track_running_stats=True, affine=True)
        m.double() if lib is torch else m.to(ember.float64)
        m(lib.tensor(x))
        stats.append((m.running_mean.numpy().copy(), m.running_var.numpy().copy()))
    np.testing.assert_allclose(stats[1][0], stats[0][0])
    np.testing.assert_allclose(stats[1][1], stats[0][1])
    assert stats[1][0].tolist() == [0.0, 0.0, 0.0]


def test_instance_norm_num_features_warning_points_at_caller():
    m = ember.nn.InstanceNorm1d(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m(ember.randn(2, 4, 5))
    assert [w.filename for w in caught] == [__file__]


@pytest.mark.parametrize("cls", ["Embedding", "EmbeddingBag"])
def test_sparse_scale_grad_by_freq_raises_at_backward(cls):
    index = [[0, 2, 4, 2], [1, 1, 9, 0]]
    for lib in (torch, ember):
        m = getattr(lib.nn, cls)(10, 3, sparse=True, scale_grad_by_freq=True)
        out = m(lib.tensor(index)).sum()
        with pytest.raises(RuntimeError, match="scale_grad_by_freq not supported with sparse"):
            out.backward()


@pytest.mark.parametrize("dtype, torch_name", [("int64", "Long"), ("uint8", "Byte"),
                                               ("int32", "Int")])
def test_max_pool1d_without_indices_refuses_integers(dtype, torch_name):
    message = f"\"max_pool1d_impl\" not implemented for '{torch_name}'"
    for lib in (torch, ember):
        x = lib.ones(1, 1, 4, dtype=getattr(lib, dtype))
        with pytest.raises(NotImplementedError, match=message):
            lib.nn.functional.max_pool1d(x, 2)
        out, _ = lib.nn.functional.max_pool1d(x, 2, return_indices=True)
        assert out.tolist() == [[[1, 1]]]
