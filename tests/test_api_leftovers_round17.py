"""Round-17 public names, without PyTorch: ``embedding_bag`` (native form), ``slice_inverse``,
``is_distributed``, ``get_file_path``, ``nested.narrow`` and the flash-attention impl
registry of ``nn.attention`` (tests/parity/test_parity_api_leftovers_round17.py compares
them with PyTorch; tests/nn/test_batch_norm_stats.py has the batch-norm blocks)."""

import logging
import os

import pytest

import ember


def _weight():
    return ember.arange(30.0).reshape(10, 3).requires_grad_()


def test_embedding_bag_sum_mode_returns_empty_bookkeeping():
    w = _weight()
    out, offset2bag, bag_size, max_indices = ember.embedding_bag(
        w, ember.tensor([1, 2, 4, 5]), ember.tensor([0, 2, 2]))
    assert out.tolist() == [[9.0, 11.0, 13.0], [0.0, 0.0, 0.0], [27.0, 29.0, 31.0]]
    assert offset2bag.tolist() == [] and bag_size.tolist() == max_indices.tolist() == [0, 0, 0]
    out.sum().backward()
    assert w.grad.sum(1).tolist() == [0, 3, 3, 0, 3, 3, 0, 0, 0, 0]


def test_embedding_bag_mean_and_max_modes_count_bags_without_padding():
    w = _weight()
    indices, offsets = ember.tensor([1, 2, 4, 5]), ember.tensor([0, 2, 2])
    out, offset2bag, bag_size, again = ember.embedding_bag(w, indices, offsets, False, 1, False,
                                                           None, False, 2)
    assert out[0].tolist() == [3.0, 4.0, 5.0]       # row 2 is padding: the mean of row 1
    assert offset2bag.tolist() == [0, 0, 2, 2] and bag_size.tolist() == again.tolist() == [1, 0, 2]
    out, _, _, max_indices = ember.embedding_bag(w, indices, offsets, False, 2)
    assert out[2].tolist() == [15.0, 16.0, 17.0]
    assert max_indices.tolist() == [[2, 2, 2], [0, 0, 0], [5, 5, 5]]


def test_embedding_bag_checks_mode_and_offsets():
    w, i = ember.ones(5, 2), ember.tensor([1, 2])
    with pytest.raises(TypeError, match="argument 'mode' must be int, not str"):
        ember.embedding_bag(w, i, ember.tensor([0]), mode="sum")
    with pytest.raises(RuntimeError, match="`mode` must be sum, mean, or max."):
        ember.embedding_bag(w, i, ember.tensor([0]), False, 3)
    with pytest.raises(TypeError, match=r"'offsets' \(position 3\) must be Tensor, not NoneType"):
        ember.embedding_bag(w, i, None)
    with pytest.raises(RuntimeError, match="per_sample_weights only supported with mode='sum'"):
        ember.embedding_bag(w, i, ember.tensor([0]), False, 1, False, ember.ones(2))


def test_slice_inverse_is_a_view_of_input_with_the_geometry_of_src():
    base = ember.zeros(12)
    src = ember.arange(12.0).reshape(3, 4)[:, 1:3]
    view = ember.slice_inverse(base, src, 1, 1, 3)
    assert view.shape == (3, 2) and view.stride() == (4, 1) and view.storage_offset() == 1
    view.fill_(1.0)
    assert base.tolist() == [0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0]
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 12"):
        ember.slice_inverse(ember.zeros(3), ember.arange(10.0))


def test_is_distributed_and_get_file_path():
    assert ember.is_distributed(ember.ones(1)) is False
    with pytest.raises(TypeError, match=r"argument 'input' \(position 1\) must be Tensor"):
        ember.is_distributed([1])
    folder = os.path.dirname(os.path.dirname(ember.__file__))
    assert ember.get_file_path("x", "y") == os.path.join(folder, "x", "y")


def test_nested_narrow_takes_rows_along_dim_0():
    x = ember.arange(6.0).reshape(3, 2).requires_grad_()
    nt = ember.nested.narrow(x, 0, -2, 2)
    assert [t.tolist() for t in nt.unbind()] == [[2.0, 3.0], [4.0, 5.0]]
    assert nt.requires_grad and not nt.is_leaf
    with pytest.raises(RuntimeError, match="only dim=0 supported for nested tensors, but got: 1"):
        ember.nested.narrow(x, 1, 0, 1)
    with pytest.raises(RuntimeError, match=r"start \(1\) \+ length \(3\) exceeds dimension size"):
        ember.nested.narrow(x, 0, 1, 3)


@pytest.fixture
def attention():
    from ember.nn.attention import _registry
    saved = dict(_registry._IMPLS)
    yield ember.nn.attention
    ember.nn.attention.restore_flash_attention_impl(_raise_warn=False)
    _registry._IMPLS.clear()
    _registry._IMPLS.update(saved)


def test_flash_attention_impl_registry_activates_and_restores(attention):
    removed = []

    class Handle:
        def remove(self):
            removed.append(True)
    attention.register_flash_attention_impl("MINE", register_fn=Handle)
    assert attention.list_flash_attention_impls() == ["FA3", "FA4", "MINE"]
    attention.activate_flash_attention_impl("MINE")
    assert attention.current_flash_attention_impl() == "MINE" and removed == []
    attention.restore_flash_attention_impl()
    assert attention.current_flash_attention_impl() is None and removed == [True]


def test_flash_attention_impl_registry_errors(attention, caplog):
    with pytest.raises(ValueError, match=r"Unknown flash attention impl 'x'. Available "
                                         r"implementations: \['FA3', 'FA4'\]"):
        attention.activate_flash_attention_impl("x")
    with pytest.raises(ModuleNotFoundError, match="flash_attn_interface"):
        attention.activate_flash_attention_impl("FA3")
    with caplog.at_level(logging.WARNING):
        attention.restore_flash_attention_impl()
    assert "no custom impl was activated" in caplog.text


def test_sdpa_checks_are_importable_from_nn_attention():
    q = ember.ones(1, 1, 2, 4)
    params = ember.nn.attention.SDPAParams(q, q, q, None, 0.0, False, False)
    assert ember.nn.attention.can_use_flash_attention(params) is False      # no CUDA here
    assert ember.nn.attention.can_use_efficient_attention(params) is False
