"""The errors for the mistakes people actually make, against PyTorch: exception type and the
first line of the message (with "torch" read as "ember"), and the warnings' text and place."""

import warnings

import numpy as np
import pytest

import ember
from tests.parity._compare import ember_names, first_line, ok, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def F(t):
    return t.nn.functional


def _twice(t):
    x = t.ones(3, requires_grad=True)
    y = x.exp().sum()
    y.backward()
    y.backward()


def _saved_modified(t):
    x = t.ones(3, requires_grad=True)
    y = x * 2
    z = y * y
    y.mul_(2)
    z.sum().backward()


def _no_grad_backward(t):
    x = t.ones(3, requires_grad=True)
    with t.no_grad():
        y = (x * 2).sum()
    y.backward()


def _load(t, state, strict=True):
    return t.nn.Linear(2, 2).load_state_dict({k: v(t) for k, v in state.items()}, strict=strict)


def _loader(t, items, **kwargs):
    return list(t.utils.data.DataLoader(items(t), **kwargs))


def _opt_generator_twice(t):
    params = t.nn.Linear(2, 2).parameters()
    t.optim.SGD(params, lr=0.1)
    t.optim.SGD(params, lr=0.1)


def _sgd(t, **kwargs):
    return t.optim.SGD([t.nn.Parameter(t.ones(2))], **kwargs)


def _adam(t, **kwargs):
    return t.optim.Adam([t.nn.Parameter(t.ones(2))], **kwargs)


def _setitem(t, x, index, value):
    x[index] = value


def _in_inference(t):
    with t.inference_mode():
        return t.ones(2)


def _no_init_module(t):
    class M(t.nn.Module):
        def __init__(self):
            self.l = t.nn.Linear(2, 2)
    M()


ONES = {"o2": lambda t: t.ones(2), "o3": lambda t: t.ones(3)}

CASES = {
    # shapes of matrix products and layers
    "linear_in_features": lambda t: t.nn.Linear(3, 2)(t.ones(4, 5)),
    "linear_dtype": lambda t: t.nn.Linear(2, 2)(t.ones(2, 2, dtype=t.float64)),
    "linear_long_input": lambda t: t.nn.Linear(2, 2)(t.ones(2, 2, dtype=t.long)),
    "F_linear": lambda t: F(t).linear(t.ones(2, 3), t.ones(4, 5)),
    "F_linear_bias": lambda t: F(t).linear(t.ones(2, 3), t.ones(4, 3), t.ones(5)),
    "mm": lambda t: t.mm(t.ones(2, 3), t.ones(4, 5)),
    "mm_1d": lambda t: t.mm(t.ones(3), t.ones(3, 4)),
    "mm_long_float": lambda t: t.mm(t.ones(2, 2, dtype=t.long), t.ones(2, 2)),
    "matmul": lambda t: t.matmul(t.ones(2, 3), t.ones(4, 5)),
    "matmul_1d": lambda t: t.matmul(t.ones(3), t.ones(4)),
    "matmul_1d_2d": lambda t: t.matmul(t.ones(3), t.ones(4, 5)),
    "matmul_2d_1d": lambda t: t.matmul(t.ones(2, 3), t.ones(4)),
    "matmul_batch": lambda t: t.matmul(t.ones(2, 2, 3), t.ones(3, 3, 4)),
    "matmul_long_float": lambda t: t.ones(2, 2, dtype=t.long) @ t.ones(2, 2),
    "matmul_double_float": lambda t: t.ones(2, 2, dtype=t.float64) @ t.ones(2, 2),
    "bmm": lambda t: t.bmm(t.ones(2, 2, 3), t.ones(2, 4, 4)),
    "bmm_batch": lambda t: t.bmm(t.ones(2, 2, 3), t.ones(3, 3, 4)),
    "bmm_2d": lambda t: t.bmm(t.ones(2, 3), t.ones(3, 4)),
    "dot": lambda t: t.dot(t.ones(3), t.ones(4)),
    "dot_2d": lambda t: t.dot(t.ones(3, 1), t.ones(3)),
    "dot_dtype": lambda t: t.dot(t.ones(3), t.ones(3, dtype=t.float64)),
    "mv": lambda t: t.mv(t.ones(2, 3), t.ones(4)),
    "bilinear": lambda t: t.nn.Bilinear(2, 3, 4)(t.ones(5, 2), t.ones(5, 4)),
    "einsum_sizes": lambda t: t.einsum("ij,jk->ik", t.ones(2, 3), t.ones(4, 5)),
    "einsum_operands": lambda t: t.einsum("ij,jk->ik", t.ones(2, 3)),
    "cdist": lambda t: t.cdist(t.ones(3, 2), t.ones(4, 3)),
    # convolutions and pooling
    "conv_channels": lambda t: t.nn.Conv2d(3, 8, 3)(t.ones(1, 4, 8, 8)),
    "conv_rank_low": lambda t: t.nn.Conv2d(3, 8, 3)(t.ones(3, 8)),
    "conv_rank_high": lambda t: t.nn.Conv2d(3, 8, 3)(t.ones(1, 1, 3, 8, 8)),
    "conv_too_small": lambda t: t.nn.Conv2d(3, 8, 5)(t.ones(1, 3, 2, 2)),
    "conv1d_channels": lambda t: t.nn.Conv1d(3, 8, 3)(t.ones(2, 4, 10)),
    "conv3d_too_small": lambda t: t.nn.Conv3d(1, 1, 3)(t.ones(1, 1, 2, 5, 5)),
    "conv_groups_in": lambda t: t.nn.Conv2d(3, 8, 3, groups=2),
    "conv_groups_out": lambda t: t.nn.Conv2d(4, 6, 3, groups=4),
    "conv_same_stride": lambda t: t.nn.Conv2d(4, 6, 3, padding="same", stride=2),
    "conv_double_input": lambda t: t.nn.Conv2d(3, 8, 3)(t.ones(1, 3, 8, 8, dtype=t.float64)),
    "conv_long_input": lambda t: t.nn.Conv2d(3, 8, 3)(t.ones(1, 3, 8, 8, dtype=t.long)),
    "conv_negative_padding": lambda t: t.nn.Conv2d(3, 4, 3, padding=-1)(t.ones(1, 3, 5, 5)),
    "conv_F_bias": lambda t: F(t).conv2d(t.ones(1, 3, 5, 5), t.ones(4, 3, 3, 3), t.ones(5)),
    "conv_F_groups": lambda t: F(t).conv2d(t.ones(1, 4, 5, 5), t.ones(4, 3, 3, 3), groups=2),
    "conv_transpose_channels": lambda t: t.nn.ConvTranspose2d(3, 8, 3)(t.ones(1, 4, 8, 8)),
    "conv_transpose_output_padding":
        lambda t: t.nn.ConvTranspose2d(3, 4, 3, output_padding=1)(t.ones(1, 3, 5, 5)),
    "conv_transpose_output_size": lambda t: t.nn.ConvTranspose2d(3, 4, 3, stride=2)(
        t.ones(1, 3, 5, 5), output_size=(20, 20)),
    "max_pool_too_small": lambda t: F(t).max_pool2d(t.ones(1, 1, 2, 2), 3),
    "max_pool_padding": lambda t: F(t).max_pool2d(t.ones(1, 1, 8, 8), 2, padding=2),
    "avg_pool_padding": lambda t: F(t).avg_pool2d(t.ones(1, 1, 8, 8), 2, padding=2),
    "max_pool_rank": lambda t: F(t).max_pool2d(t.ones(8), 2),
    # normalization layers
    "batchnorm_one_value": lambda t: t.nn.BatchNorm1d(3)(t.ones(1, 3)),
    "batchnorm_one_value_3d": lambda t: t.nn.BatchNorm1d(3)(t.ones(1, 3, 1)),
    "batchnorm_features": lambda t: t.nn.BatchNorm1d(3)(t.ones(4, 5)),
    "batchnorm_features_eval": lambda t: t.nn.BatchNorm1d(3).eval()(t.ones(2, 4)),
    "batchnorm2d_features": lambda t: t.nn.BatchNorm2d(3)(t.ones(4, 5, 2, 2)),
    "batchnorm2d_rank": lambda t: t.nn.BatchNorm2d(3)(t.ones(4, 3, 2)),
    "batchnorm1d_rank": lambda t: t.nn.BatchNorm1d(3)(t.ones(4, 3, 2, 2)),
    "batchnorm_long": lambda t: t.nn.BatchNorm1d(3)(t.ones(2, 3, dtype=t.long)),
    "batchnorm_double": lambda t: t.nn.BatchNorm1d(3)(t.ones(2, 3, dtype=t.float64)),
    "layernorm_shape": lambda t: t.nn.LayerNorm(4)(t.ones(2, 3)),
    "groupnorm_divisible": lambda t: t.nn.GroupNorm(3, 4),
    "groupnorm_channels": lambda t: t.nn.GroupNorm(2, 4)(t.ones(2, 6, 3)),
    "instancenorm_channels": lambda t: t.nn.InstanceNorm1d(3, affine=True)(t.ones(2, 4, 5)),
    "rmsnorm_shape": lambda t: t.nn.RMSNorm(4)(t.ones(2, 3)),
    # recurrent layers
    "lstm_h0_batch": lambda t: t.nn.LSTM(3, 4)(t.ones(5, 2, 3), (t.ones(1, 3, 4), t.ones(1, 2, 4))),
    "lstm_c0_size": lambda t: t.nn.LSTM(3, 4)(t.ones(5, 2, 3), (t.ones(1, 2, 4), t.ones(1, 2, 5))),
    "lstm_hidden_not_tuple": lambda t: t.nn.LSTM(3, 4)(t.ones(5, 2, 3), t.ones(1, 2, 4)),
    "lstm_rank": lambda t: t.nn.LSTM(3, 4)(t.ones(5, 2, 3, 1)),
    "lstm_unbatched_hidden":
        lambda t: t.nn.LSTM(3, 4)(t.ones(5, 3), (t.ones(1, 2, 4), t.ones(1, 2, 4))),
    "gru_h0": lambda t: t.nn.GRU(3, 4)(t.ones(5, 2, 3), t.ones(1, 3, 4)),
    "rnn_h0_layers": lambda t: t.nn.RNN(3, 4)(t.ones(5, 2, 3), t.ones(2, 2, 4)),
    "rnn_input_size": lambda t: t.nn.RNN(3, 4)(t.ones(5, 2, 6)),
    "gru_input_size_batch_first": lambda t: t.nn.GRU(3, 4, batch_first=True)(t.ones(2, 5, 6)),
    "lstm_cell_input": lambda t: t.nn.LSTMCell(3, 4)(t.ones(2, 5)),
    "lstm_cell_hidden": lambda t: t.nn.LSTMCell(3, 4)(t.ones(2, 3), (t.ones(3, 4), t.ones(3, 4))),
    "gru_cell_rank": lambda t: t.nn.GRUCell(3, 4)(t.ones(2, 2, 3)),
    "rnn_cell_hidden": lambda t: t.nn.RNNCell(3, 4)(t.ones(2, 3), t.ones(2, 5)),
    # losses
    "ce_float_target_shape": lambda t: F(t).cross_entropy(t.ones(3, 5), t.ones(3)),
    "ce_target_batch": lambda t: F(t).cross_entropy(t.ones(3, 5), t.tensor([0, 1])),
    "ce_target_0d": lambda t: F(t).cross_entropy(t.ones(3, 5), t.tensor(1)),
    "ce_target_2d": lambda t: F(t).cross_entropy(t.ones(3, 5), t.tensor([[0], [1], [2]])),
    "ce_out_of_range": lambda t: F(t).cross_entropy(t.ones(3, 5), t.tensor([0, 1, 5])),
    "ce_negative_target": lambda t: F(t).cross_entropy(t.ones(3, 5), t.tensor([0, 1, -2])),
    "ce_long_input": lambda t: F(t).cross_entropy(t.ones(3, 5, dtype=t.long), t.tensor([0, 1, 2])),
    "ce_weight_size": lambda t: F(t).cross_entropy(t.ones(3, 5), t.tensor([0, 1, 2]),
                                                   weight=t.ones(4)),
    "ce_bool_target": lambda t: F(t).cross_entropy(t.ones(3, 5), t.tensor([True, False, True])),
    "ce_1d_target": lambda t: F(t).cross_entropy(t.ones(5), t.tensor([1, 2])),
    "ce_smoothing_above_one": lambda t: F(t).cross_entropy(t.ones(3, 5), t.tensor([0, 1, 2]),
                                                           label_smoothing=1.5),
    "ce_reduction": lambda t: F(t).cross_entropy(t.ones(3, 5), t.tensor([0, 1, 2]),
                                                 reduction="avg"),
    "nll_float_target": lambda t: F(t).nll_loss(t.ones(3, 5), t.ones(3)),
    "nll_out_of_range": lambda t: F(t).nll_loss(t.ones(3, 5), t.tensor([0, 1, 5])),
    "nll_target_0d": lambda t: F(t).nll_loss(t.ones(3, 5), t.tensor(1)),
    "nll_long_input": lambda t: F(t).nll_loss(t.ones(3, 5, dtype=t.long), t.tensor([0, 1, 2])),
    "nll_long_input_1d": lambda t: F(t).nll_loss(t.ones(5, dtype=t.long), t.tensor([1])),
    "nll_3d_target": lambda t: F(t).nll_loss(t.ones(3, 5, 2), t.tensor([0, 1, 2])),
    "bce_above_one": lambda t: F(t).binary_cross_entropy(t.tensor([1.5, 0.5]), t.tensor([1., 0.])),
    "bce_below_zero":
        lambda t: F(t).binary_cross_entropy(t.tensor([-0.5, 0.5]), t.tensor([1., 0.])),
    "bce_shape": lambda t: F(t).binary_cross_entropy(t.ones(2) / 2, t.ones(3)),
    "bce_long_target": lambda t: F(t).binary_cross_entropy(t.ones(2) / 2, t.tensor([1, 0])),
    "bce_long_input": lambda t: F(t).binary_cross_entropy(t.ones(3, dtype=t.long), t.ones(3)),
    "bce_long_both": lambda t: F(t).binary_cross_entropy(t.ones(3, dtype=t.long),
                                                         t.ones(3, dtype=t.long)),
    "bce_weight": lambda t: F(t).binary_cross_entropy(t.ones(3) / 2, t.ones(3), weight=t.ones(4)),
    "bce_logits_shape": lambda t: F(t).binary_cross_entropy_with_logits(t.ones(3, 1), t.ones(3)),
    "bce_logits_pos_weight": lambda t: F(t).binary_cross_entropy_with_logits(
        t.ones(3, 2), t.ones(3, 2), pos_weight=t.ones(3)),
    "bce_logits_pos_weight_grows": lambda t: F(t).binary_cross_entropy_with_logits(
        t.ones(3, 2), t.ones(3, 2), pos_weight=t.ones(4, 1, 1)),
    "mse_no_broadcast": lambda t: F(t).mse_loss(t.ones(3), t.ones(4)),
    "mse_reduction": lambda t: F(t).mse_loss(t.ones(3), t.ones(3), reduction="avg"),
    "kl_shape": lambda t: F(t).kl_div(t.ones(3), t.ones(4), reduction="batchmean"),
    "margin_ranking_shape": lambda t: F(t).margin_ranking_loss(t.ones(3), t.ones(4), t.ones(3)),
    "gaussian_nll_negative_var":
        lambda t: F(t).gaussian_nll_loss(t.ones(3), t.ones(3), -t.ones(3)),
    # embeddings and indexing
    "embedding_out_of_range": lambda t: t.nn.Embedding(5, 2)(t.tensor([5])),
    "embedding_negative": lambda t: t.nn.Embedding(5, 2)(t.tensor([-1])),
    "embedding_float_index": lambda t: t.nn.Embedding(5, 2)(t.tensor([1.0])),
    "embedding_bag_out_of_range":
        lambda t: t.nn.EmbeddingBag(5, 2)(t.tensor([1, 7]), offsets=t.tensor([0])),
    "one_hot_float": lambda t: F(t).one_hot(t.tensor([1.0])),
    "one_hot_out_of_range": lambda t: F(t).one_hot(t.tensor([3]), 3),
    "one_hot_negative": lambda t: F(t).one_hot(t.tensor([-1])),
    "index_out_of_range": lambda t: t.ones(3)[3],
    "index_out_of_range_2d": lambda t: t.ones(3, 4)[0, 4],
    "too_many_indices": lambda t: t.ones(3)[0, 0],
    "index_tensor_out_of_range": lambda t: t.ones(3)[t.tensor([5])],
    "index_float_tensor": lambda t: t.ones(3)[t.tensor([1.0])],
    "index_mask_shape": lambda t: t.ones(3)[t.tensor([True, False])],
    "setitem_out_of_range": lambda t: _setitem(t, t.ones(3), 5, 1),
    "setitem_shape": lambda t: _setitem(t, t.ones(3, 4), 0, t.ones(3)),
    "gather_out_of_range": lambda t: t.gather(t.ones(3), 0, t.tensor([3])),
    "gather_rank": lambda t: t.gather(t.ones(3, 2), 0, t.tensor([1])),
    "gather_float_index": lambda t: t.gather(t.ones(3), 0, t.tensor([1.0])),
    "index_select_out_of_range": lambda t: t.index_select(t.ones(3), 0, t.tensor([3])),
    "scatter_out_of_range": lambda t: t.zeros(3).scatter_(0, t.tensor([5]), t.ones(1)),
    "scatter_dtype": lambda t: t.zeros(3).scatter_(0, t.tensor([0]), t.ones(1, dtype=t.float64)),
    "masked_fill_float_mask": lambda t: t.ones(2, 3).masked_fill(t.ones(2, 3), 0),
    "masked_fill_shape": lambda t: t.ones(2, 3).masked_fill(t.ones(3, 2, dtype=t.bool), 0),
    "where_float_condition": lambda t: t.where(t.ones(3), t.ones(3), t.ones(3)),
    # joining, views and shapes
    "cat_sizes": lambda t: t.cat([t.ones(2, 3), t.ones(2, 4)]),
    "cat_ranks": lambda t: t.cat([t.ones(2, 3), t.ones(3)]),
    "cat_dim": lambda t: t.cat([t.ones(2, 3), t.ones(2, 3)], dim=2),
    "cat_empty": lambda t: t.cat([]),
    "cat_tensor": lambda t: t.cat(t.ones(2, 3)),
    "stack_sizes": lambda t: t.stack([t.ones(2, 3), t.ones(2, 4)]),
    "stack_empty": lambda t: t.stack([]),
    "stack_dim": lambda t: t.stack([t.ones(2), t.ones(2)], dim=3),
    "view_non_contiguous": lambda t: t.ones(3, 4).t().view(12),
    "view_size": lambda t: t.ones(3, 4).view(5, 3),
    "view_two_inferred": lambda t: t.ones(3, 4).view(-1, -1),
    "reshape_inferred": lambda t: t.ones(3, 4).reshape(5, -1),
    "reshape_size": lambda t: t.ones(3, 4).reshape(5, 2),
    "reshape_negative": lambda t: t.ones(3, 4).reshape(-2, 6),
    "expand_size": lambda t: t.ones(3, 2).expand(3, 4),
    "expand_fewer_sizes": lambda t: t.ones(3, 2).expand(2),
    "expand_new_dim_minus_one": lambda t: t.ones(3).expand(-1, 3),
    "expand_as": lambda t: t.ones(3).expand_as(t.ones(2, 4)),
    "add_shapes": lambda t: t.ones(3) + t.ones(4),
    "add_shapes_2d": lambda t: t.ones(2, 3) + t.ones(3, 2),
    "inplace_broadcast_grows": lambda t: t.ones(3).add_(t.ones(2, 3)),
    "inplace_long_float": lambda t: t.ones(3, dtype=t.long).add_(1.5),
    "inplace_expanded": lambda t: t.ones(3).expand(2, 3).add_(1),
    "copy_shape": lambda t: t.ones(3).copy_(t.ones(4)),
    "transpose_dim": lambda t: t.ones(2, 3).transpose(0, 2),
    "permute_length": lambda t: t.ones(2, 3).permute(0),
    "permute_repeated": lambda t: t.ones(2, 3).permute(0, 0),
    "t_3d": lambda t: t.ones(2, 3, 4).t(),
    "squeeze_dim": lambda t: t.ones(2, 3).squeeze(3),
    "unsqueeze_dim": lambda t: t.ones(2, 3).unsqueeze(4),
    "sum_dim": lambda t: t.ones(2, 3).sum(2),
    "softmax_dim": lambda t: t.ones(2, 3).softmax(2),
    "narrow": lambda t: t.ones(5).narrow(0, 3, 4),
    "select": lambda t: t.ones(5).select(0, 5),
    "flatten_dims": lambda t: t.ones(2, 3).flatten(1, 0),
    "unflatten_sizes": lambda t: t.ones(2, 6).unflatten(1, (4, 2)),
    "repeat_fewer": lambda t: t.ones(2, 3).repeat(2),
    "split_zero": lambda t: t.ones(5).split(0),
    "chunk_zero": lambda t: t.ones(5).chunk(0),
    "topk_too_many": lambda t: t.ones(3).topk(4),
    "pad_too_many": lambda t: F(t).pad(t.ones(2, 3), (1, 1, 1, 1, 1, 1)),
    "pad_odd": lambda t: F(t).pad(t.ones(2, 3), (1,)),
    "pad_reflect_too_wide": lambda t: F(t).pad(t.ones(1, 2, 3), (3, 3), mode="reflect"),
    "pad_mode": lambda t: F(t).pad(t.ones(1, 2, 3), (1, 1), mode="foo"),
    "interpolate_size_and_scale": lambda t: F(t).interpolate(t.ones(1, 1, 4), size=8,
                                                             scale_factor=2),
    "interpolate_neither": lambda t: F(t).interpolate(t.ones(1, 1, 4)),
    "interpolate_mode_rank":
        lambda t: F(t).interpolate(t.ones(1, 1, 4), size=8, mode="bilinear"),
    "interpolate_size_length": lambda t: F(t).interpolate(t.ones(1, 1, 4, 4), size=(2, 2, 2)),
    "interpolate_align_nearest": lambda t: F(t).interpolate(t.ones(1, 1, 4), size=8,
                                                            align_corners=True),
    "interpolate_2d_input": lambda t: F(t).interpolate(t.ones(4, 4), size=8),
    "glu_odd": lambda t: F(t).glu(t.ones(2, 3)),
    "relu_of_list": lambda t: F(t).relu([1.0, -1.0]),
    "gelu_of_list": lambda t: F(t).gelu([1.0, -1.0]),
    "linear_of_list": lambda t: F(t).linear([1.0], t.ones(1, 1)),
    "linalg_inv_of_list": lambda t: t.linalg.inv([[1.0]]),
    "fft_of_list": lambda t: t.fft.fft([1.0]),
    "prelu_channels": lambda t: t.nn.PReLU(3)(t.ones(2, 4)),
    "mha_embed_divisible": lambda t: t.nn.MultiheadAttention(10, 3),
    "mha_key_value_shapes": lambda t: t.nn.MultiheadAttention(8, 2)(
        t.ones(3, 2, 8), t.ones(4, 2, 8), t.ones(5, 2, 8)),
    "mha_mask_shape": lambda t: t.nn.MultiheadAttention(8, 2)(
        t.ones(3, 2, 8), t.ones(3, 2, 8), t.ones(3, 2, 8), attn_mask=t.ones(4, 4, dtype=t.bool)),
    "transformer_batches": lambda t: t.nn.Transformer(8, 2, 1, 1, 16)(t.ones(3, 2, 8),
                                                                      t.ones(3, 4, 8)),
    # autograd
    "backward_twice": _twice,
    "backward_non_scalar": lambda t: (t.ones(3, requires_grad=True) * 2).backward(),
    "backward_without_grad": lambda t: (t.ones(2) * 2).sum().backward(),
    "backward_no_grad_mode": _no_grad_backward,
    "backward_gradient_shape": lambda t: (t.ones(2, requires_grad=True) * 2).backward(t.ones(3)),
    "leaf_inplace": lambda t: t.ones(3, requires_grad=True).add_(1),
    "leaf_view_inplace": lambda t: t.ones(3, requires_grad=True)[:2].add_(1),
    "leaf_setitem": lambda t: _setitem(t, t.ones(3, requires_grad=True), 0, 2.0),
    "saved_tensor_modified": _saved_modified,
    "grad_non_scalar": lambda t: t.autograd.grad(t.ones(2, requires_grad=True) * 2,
                                                 t.ones(2, requires_grad=True)),
    "requires_grad_long": lambda t: t.ones(2, dtype=t.long, requires_grad=True),
    "requires_grad_long_method": lambda t: t.ones(2, dtype=t.long).requires_grad_(),
    "inference_tensor_inplace": lambda t: _in_inference(t).add_(1),
    "numpy_requires_grad": lambda t: t.ones(2, requires_grad=True).numpy(),
    "item_many": lambda t: t.ones(2).item(),
    "item_empty": lambda t: t.ones(0).item(),
    "float_many": lambda t: float(t.ones(2)),
    "bool_many": lambda t: bool(t.ones(2)),
    "len_0d": lambda t: len(t.tensor(1.0)),
    "iter_0d": lambda t: iter(t.tensor(1.0)),
    "mean_long": lambda t: t.ones(2, dtype=t.long).mean(),
    "pow_negative_int": lambda t: t.tensor([2]) ** -1,
    "bitwise_float": lambda t: t.ones(2) & t.ones(2),
    "neg_bool": lambda t: -t.tensor([True]),
    "sub_bool": lambda t: t.tensor([True]) - t.tensor([False]),
    "max_empty": lambda t: t.ones(0).max(),
    "argmax_empty": lambda t: t.ones(0).argmax(),
    "inv_not_square": lambda t: t.linalg.inv(t.ones(2, 3)),
    "inv_long": lambda t: t.linalg.inv(t.eye(2, dtype=t.long)),
    "tensor_ragged": lambda t: t.tensor([[1, 2], [3]]),
    "tensor_of_tensors": lambda t: t.tensor([t.ones(2), t.ones(2)]),
    "ones_negative": lambda t: t.ones(-1),
    "arange_step_sign": lambda t: t.arange(0, 10, -1),
    "randint_range": lambda t: t.randint(5, 2, (3,)),
    "multinomial_too_many": lambda t: t.multinomial(t.tensor([1.0, 2.0]), 3),
    "dropout_p": lambda t: F(t).dropout(t.ones(3), p=1.5),
    # modules, state dicts, optimizers, data
    "module_too_many_args": lambda t: t.nn.Linear(2, 2)(t.ones(2), t.ones(2)),
    "module_no_args": lambda t: t.nn.Linear(2, 2)(),
    "sequential_two_args": lambda t: t.nn.Sequential(t.nn.Linear(2, 2))(t.ones(2), t.ones(2)),
    "module_without_forward": lambda t: t.nn.Module()(t.ones(1)),
    "module_list_called": lambda t: t.nn.ModuleList([t.nn.Linear(2, 2)])(t.ones(2)),
    "module_missing_attribute": lambda t: t.nn.Linear(2, 2).foo,
    "module_tensor_as_parameter": lambda t: setattr(t.nn.Linear(2, 2), "weight", t.ones(2, 2)),
    "register_parameter_tensor": lambda t: t.nn.Module().register_parameter("a", t.ones(1)),
    "register_buffer_dotted": lambda t: t.nn.Module().register_buffer("a.b", t.ones(1)),
    "add_module_int": lambda t: t.nn.Module().add_module("a", 5),
    "sequential_of_function": lambda t: t.nn.Sequential(len),
    "module_list_of_int": lambda t: t.nn.ModuleList([1]),
    "module_without_super_init": _no_init_module,
    "sequential_index": lambda t: t.nn.Sequential(t.nn.Linear(2, 2))[3],
    "module_to_long": lambda t: t.nn.Linear(2, 2).to(t.long),
    "state_dict_missing": lambda t: _load(t, {"weight": lambda t: t.ones(2, 2)}),
    "state_dict_unexpected": lambda t: _load(t, {"weight": lambda t: t.ones(2, 2),
                                                 "bias": ONES["o2"], "foo": ONES["o2"]}),
    "state_dict_size": lambda t: _load(t, {"weight": lambda t: t.ones(3, 2), "bias": ONES["o2"]}),
    "state_dict_size_not_strict": lambda t: _load(
        t, {"weight": lambda t: t.ones(3, 2), "bias": ONES["o2"]}, strict=False),
    "state_dict_nested_keys": lambda t: t.nn.Sequential(t.nn.Linear(2, 2)).load_state_dict(
        t.nn.Linear(2, 2).state_dict()),
    "optimizer_empty": lambda t: t.optim.SGD([], lr=0.1),
    "optimizer_tensor": lambda t: t.optim.SGD(t.ones(2, requires_grad=True), lr=0.1),
    "optimizer_int": lambda t: t.optim.SGD(5, lr=0.1),
    "optimizer_exhausted_generator": _opt_generator_twice,
    "optimizer_non_leaf": lambda t: t.optim.SGD([t.ones(2, requires_grad=True) * 2], lr=0.1),
    "optimizer_negative_lr": lambda t: _sgd(t, lr=-1),
    "optimizer_nesterov": lambda t: _sgd(t, lr=0.1, nesterov=True),
    "adam_betas": lambda t: _adam(t, betas=(1.5, 0.9)),
    "adam_eps": lambda t: _adam(t, eps=-1),
    "scheduler_without_optimizer": lambda t: t.optim.lr_scheduler.StepLR(None, 1),
    "plateau_mode": lambda t: t.optim.lr_scheduler.ReduceLROnPlateau(_sgd(t, lr=0.1),
                                                                     mode="foo"),
    "collate_uneven_tensors": lambda t: _loader(t, lambda t: [t.ones(2), t.ones(3)],
                                                batch_size=2),
    "collate_uneven_arrays": lambda t: _loader(t, lambda t: [np.ones(2), np.ones(3)],
                                               batch_size=2),
    "collate_uneven_lists": lambda t: _loader(t, lambda t: [[1, 2], [1, 2, 3]], batch_size=2),
    "collate_dict_keys": lambda t: _loader(t, lambda t: [{"a": 1}, {"b": 1}], batch_size=2),
    "collate_none": lambda t: _loader(t, lambda t: [None, None], batch_size=2),
    "loader_batch_size_zero": lambda t: t.utils.data.DataLoader([1, 2], batch_size=0),
    "loader_shuffle_and_sampler":
        lambda t: t.utils.data.DataLoader([1, 2], shuffle=True, sampler=[0, 1]),
    "random_split_lengths": lambda t: t.utils.data.random_split([1, 2, 3], [2, 2]),
    "tensor_dataset_sizes": lambda t: t.utils.data.TensorDataset(t.ones(3), t.ones(4)),
    "pack_padded_unsorted":
        lambda t: t.nn.utils.rnn.pack_padded_sequence(t.ones(3, 2, 1), t.tensor([1, 3])),
    "clip_grad_non_finite": lambda t: t.nn.utils.clip_grad_norm_(
        [_param_with_grad(t, [float("inf"), 1.0])], 1.0, error_if_nonfinite=True),
}


def _param_with_grad(t, grad):
    p = t.nn.Parameter(t.ones(2))
    p.grad = t.tensor(grad)
    return p


def _outcome(lib, fn):
    """(exception type name, first message line with the library's name read as ember's)."""
    return outcome(fn, lib, quiet=True, describe=lambda _: ok(""),
                   message=lambda text: ember_names(first_line(text)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_error_matches_torch(name):
    theirs = _outcome(torch, CASES[name])
    assert theirs[0] != "ok", "each case is a mistake PyTorch reports"
    assert _outcome(ember, CASES[name]) == theirs


WARNING_CASES = {
    "softmax_without_dim": lambda t: F(t).softmax(t.ones(2, 3)),
    "log_softmax_without_dim": lambda t: F(t).log_softmax(t.ones(2, 3)),
    "mse_target_size": lambda t: F(t).mse_loss(t.ones(3, 1), t.ones(3)),
    "l1_target_size": lambda t: F(t).l1_loss(t.ones(3, 1), t.ones(3)),
    "smooth_l1_target_size": lambda t: F(t).smooth_l1_loss(t.ones(3, 1), t.ones(3)),
    "non_leaf_grad": lambda t: (t.ones(3, requires_grad=True) * 2).grad,
    "kl_div_mean": lambda t: F(t).kl_div(t.ones(3), t.ones(3)),
    "rnn_dropout_one_layer": lambda t: t.nn.LSTM(3, 4, dropout=0.5),
}


def _warnings_of(lib, fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(lib)
    return [(w.category, str(w.message).split(" (Triggered internally")[0]
             .replace("torch.", "ember."), w.filename) for w in caught]


@pytest.mark.parametrize("name", sorted(WARNING_CASES))
def test_warning_matches_torch(name):
    theirs = _warnings_of(torch, WARNING_CASES[name])
    ours = _warnings_of(ember, WARNING_CASES[name])
    assert len(theirs) == 1
    assert [w[:2] for w in ours] == [w[:2] for w in theirs]
    # at the user's line where PyTorch's points there (the RNN's dropout one points at rnn.py)
    assert (ours[0][2] == __file__) == (theirs[0][2] == __file__)


def test_negative_label_smoothing_is_ignored_as_torch_does():
    x = np.sin(np.arange(15.0).reshape(3, 5))
    results = []
    for lib in (torch, ember):
        logits = lib.tensor(x, requires_grad=True)
        loss = F(lib).cross_entropy(logits, lib.tensor([0, 3, 2]), label_smoothing=-0.3,
                                    weight=lib.arange(1.0, 6.0, dtype=lib.float64))
        loss.backward()
        results.append((loss.item(), logits.grad.numpy()))
    assert results[1][0] == pytest.approx(results[0][0], rel=1e-12)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-10)
