"""Public functions an API audit found missing: ``ember.lstm``/``gru``/``rnn_tanh``/
``rnn_relu``, ``native_dropout``, ``segment_reduce``, ``norm_except_dim``, ``resize_as_``
and ``ember.nested``."""

import math

import numpy as np
import pytest

import ember


def test_gru_function_matches_the_gru_module():
    ember.manual_seed(0)
    gru = ember.nn.GRU(3, 4, num_layers=2, batch_first=True)
    x, h0 = ember.randn(2, 5, 3), ember.randn(2, 2, 4)
    want, want_h = gru(x, h0)
    got, got_h = ember.gru(x, h0, gru._flat_weights, True, 2, 0.0, False, False, True)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(got_h.detach().numpy(), want_h.detach().numpy(), rtol=1e-6)


def test_lstm_function_matches_the_lstm_module_and_packs():
    ember.manual_seed(1)
    lstm = ember.nn.LSTM(3, 4, bidirectional=True)
    x = ember.randn(3, 2, 3)
    zeros = ember.zeros(2, 2, 4)
    want, (want_h, want_c) = lstm(x, (zeros, zeros))
    got, h, c = ember.lstm(x, (zeros, zeros), lstm._flat_weights, True, 1, 0.0, False, True,
                           False)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(c.detach().numpy(), want_c.detach().numpy(), rtol=1e-6)
    packed, ph, pc = ember.lstm(x.reshape(6, 3), ember.tensor([2, 2, 2]), (zeros, zeros),
                                lstm._flat_weights, True, 1, 0.0, False, True)
    np.testing.assert_allclose(packed.detach().numpy(), want.reshape(6, 8).detach().numpy(),
                               rtol=1e-6)


def test_rnn_function_rejects_a_wrong_weight_count():
    with pytest.raises(RuntimeError, match="rnn_tanh: expected 4 weights, got 3"):
        ember.rnn_tanh(ember.ones(2, 1, 3), ember.zeros(1, 1, 4), [ember.ones(4, 3)] * 3,
                       True, 1, 0.0, False, False, False)


def test_native_dropout_returns_the_keep_mask():
    x = ember.ones(400, requires_grad=True)
    out, mask = ember.native_dropout(x, 0.5, True)
    assert mask.dtype is ember.bool and 100 < int(mask.sum()) < 300
    assert out.detach().tolist() == (mask.float() * 2).tolist()
    out.sum().backward()
    assert x.grad.tolist() == (mask.float() * 2).tolist()
    same, keep = ember.native_dropout(ember.ones(2), 0.5, False)
    assert same.tolist() == [1.0, 1.0] and keep.tolist() == [True, True]


def test_segment_reduce():
    data = ember.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
    lengths = ember.tensor([2, 0, 3])
    assert ember.segment_reduce(data, "sum", lengths=lengths).tolist() == [3.0, 0.0, 12.0]
    assert ember.segment_reduce(data, "max", lengths=lengths).tolist() == [2.0, -math.inf, 5.0]
    assert ember.segment_reduce(data, "mean", lengths=lengths, initial=7.0).tolist()[:2] == \
        [5.0, 7.0]
    out = ember.segment_reduce(data, "prod", offsets=ember.tensor([0, 2, 2, 5]))
    assert out.tolist() == [2.0, 1.0, 60.0]
    out.sum().backward()
    assert data.grad.tolist() == [2.0, 1.0, 20.0, 15.0, 12.0]


def test_norm_except_dim_and_resize_as_():
    v = ember.arange(6.0).reshape(2, 3)
    assert ember.norm_except_dim(v, 1, 1).tolist() == [[3.0, 5.0, 7.0]]
    assert ember.norm_except_dim(v, 2, 0).shape == (2, 1)
    a = ember.zeros(2)
    assert ember.resize_as_(a, ember.ones(3, 2)) is a and a.shape == (3, 2)


def test_nested_tensor_pads_and_unbinds():
    nt = ember.nested.nested_tensor([ember.ones(2, 2), ember.ones(1, 2)], dtype=ember.float64)
    assert nt.is_nested and nt.dim() == 3 and nt.size(0) == 2 and nt.size(2) == 2
    assert nt.to_padded_tensor(0.0).tolist() == [[[1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0],
                                                                              [0.0, 0.0]]]
    assert ember.nested.to_padded_tensor(nt, 5.0, output_size=(2, 2, 3)).shape == (2, 2, 3)
    assert [t.shape for t in nt.unbind()] == [(2, 2), (1, 2)]
    assert nt.unbind()[0].dtype is ember.float64
    with pytest.raises(RuntimeError, match="dimension 1 is irregular"):
        nt.size(1)


def test_grid_sampler_is_grid_sample_with_mode_codes():
    x, grid = ember.arange(16.0).reshape(1, 1, 4, 4), ember.rand(1, 2, 3, 2) * 2 - 1
    want = ember.nn.functional.grid_sample(x, grid, "nearest", "border", align_corners=True)
    assert ember.grid_sampler(x, grid, 1, 1, True).tolist() == want.tolist()
    with pytest.raises(RuntimeError, match="expected 5D input"):
        ember.grid_sampler_3d(x, grid, 0, 0, False)


def test_embedding_renorm_scales_the_indexed_rows():
    w = ember.tensor([[3.0, 4.0], [6.0, 8.0], [0.3, 0.4]])
    assert ember.embedding_renorm_(w, ember.tensor([0, 2, 0]), 1.0, 2.0) is w
    np.testing.assert_allclose(w.numpy(), [[0.6, 0.8], [6.0, 8.0], [0.3, 0.4]], rtol=1e-6)


def test_factory_kwargs():
    fk = ember.nn.factory_kwargs
    assert fk(None) == {} and fk({"factory_kwargs": {"dtype": 1}, "device": "cpu"}) == \
        {"device": "cpu", "dtype": 1}
    with pytest.raises(TypeError, match="unexpected kwargs {'foo'}"):
        fk({"foo": 1})


def test_multithreading_flag_is_a_context_manager():
    A = ember.autograd
    with A.set_multithreading_enabled(False):
        assert A.is_multithreading_enabled() is False
    assert A.is_multithreading_enabled() is True and A.is_view_replay_enabled() is False


def test_deprecated_resize_views_with_a_warning():
    t = ember.arange(6.0)
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated") as caught:
        view = t.resize(2, 3)
    assert caught[0].filename == __file__
    view[0, 0] = 9.0
    assert t.tolist()[0] == 9.0 and view.shape == (2, 3)
    with pytest.warns(UserWarning, match="non-inplace resize_as is deprecated"):
        assert t.resize_as(ember.ones(3, 2)).shape == (3, 2)
    with pytest.raises(RuntimeError, match=r"requested resize to 4 \(4 elements in total\)"):
        with pytest.warns(UserWarning):
            t.resize(4)


def test_removed_volatile_and_reinforce():
    t = ember.ones(2)
    with pytest.warns(UserWarning, match="volatile was removed"):
        assert t.volatile is False
    with pytest.raises(RuntimeError, match="reinforce.. was removed"):
        t.reinforce(1.0)


def test_selective_checkpoint_contexts_give_plain_checkpoint_gradients():
    import functools

    from ember.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                        create_selective_checkpoint_contexts)

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.PREFER_RECOMPUTE

    x = ember.tensor([[1.0, 2.0], [0.5, -1.0]], requires_grad=True)
    out = checkpoint(lambda t: (t @ t).sin(), x, use_reentrant=False,
                     context_fn=functools.partial(create_selective_checkpoint_contexts, policy))
    out.sum().backward()
    want = ember.tensor([[1.0, 2.0], [0.5, -1.0]], requires_grad=True)
    (want @ want).sin().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), want.grad.numpy(), rtol=1e-6)
    assert CheckpointPolicy.MUST_SAVE.value == 0
    with pytest.raises(TypeError, match="must be either a function or a list of ops"):
        create_selective_checkpoint_contexts(3)


def test_grouped_mm_splits_by_offsets():
    F = ember.nn.functional
    a, b = ember.arange(16.0).reshape(4, 4), ember.arange(32.0).reshape(2, 4, 4)
    offs = ember.tensor([1, 4], dtype=ember.int32)
    want = ember.cat([a[:1] @ b[0], a[1:] @ b[1]])
    assert F.grouped_mm(a, b, offs=offs).tolist() == want.tolist()
    inner = F.grouped_mm(a, a.T, offs=ember.tensor([1, 3], dtype=ember.int32))
    assert inner.tolist() == [(a[:, :1] @ a.T[:1]).tolist(), (a[:, 1:3] @ a.T[1:3]).tolist()]
    assert F.grouped_mm(b, b).tolist() == ember.bmm(b, b).tolist()
    with pytest.raises(RuntimeError, match="Have to provide offsets"):
        F.grouped_mm(a, b)


def test_legacy_storage_classes():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # TypedStorage's deprecation
        s = ember.FloatStorage([1, 2, 3])
        assert isinstance(s, ember.TypedStorage) and s.dtype is ember.float32
        assert s.tolist() == [1.0, 2.0, 3.0] and ember.LongStorage(2).size() == 2
        t = ember.ones(2, dtype=ember.int64)
        assert t.storage_type() is ember.LongStorage
        assert isinstance(t.storage(), ember.LongStorage)
        assert not isinstance(t.storage(), ember.FloatStorage)


def test_module_aliases():
    from ember.functional import einsum, unique_consecutive  # noqa: F401
    from ember.nn.utils.init import skip_init
    assert ember.functional.split is ember.split
    assert skip_init is ember.nn.utils.skip_init
    assert ember.nn.utils.init.skip_init(ember.nn.Linear, 2, 3).weight.shape == (3, 2)
