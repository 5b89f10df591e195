"""nn layers' constructors and forward checks against PyTorch (round 15): LSTMCell's hidden
state validation, Unflatten's unchecked dim, RNN's dropout conversion, Upsample's list
scale_factor, alpha dropout's ignored inplace flag, conv_transpose1d's output padding message."""

import pytest

import ember
from tests.parity._compare import assert_same

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _same_outcome(build):
    """What ``build(lib)`` gives, asserted equal in both libraries: a description of its
    result, or its error's type and first line (ember adds a line naming the failing module)."""
    return assert_same(build, describe=_described,
                       message=lambda text: text.split("\n  in model")[0])


def _described(result):
    """Output shapes, or a module's repr."""
    if isinstance(result, tuple):
        return tuple(tuple(t.shape) for t in result)
    if hasattr(result, "named_modules"):
        return repr(result)
    return tuple(result.shape)


@pytest.mark.parametrize("hx", [
    lambda lib: lib.zeros(2, 4),
    lambda lib: lib.zeros(2, 2, 4),
    lambda lib: [lib.zeros(2, 4), lib.zeros(2, 4)],
    lambda lib: (lib.zeros(2, 4),),
    lambda lib: (lib.zeros(2, 4),) * 3,
    lambda lib: (lib.zeros(2, 4), 3),
    lambda lib: (lib.zeros(2, 2, 4), lib.zeros(2, 4)),
], ids=["tensor", "3d-tensor", "list", "one", "three", "int", "3d-h"])
def test_lstm_cell_module_validates_hidden_as_torch(hx):
    def build(lib):
        lib.manual_seed(0)
        return lib.nn.LSTMCell(3, 4)(lib.ones(2, 3), hx(lib))

    _same_outcome(build)


@pytest.mark.parametrize("hx", [
    lambda lib: lib.zeros(2, 4),
    lambda lib: None,
    lambda lib: (lib.zeros(2, 4),),
    lambda lib: [lib.zeros(2, 4)] * 2,
], ids=["tensor", "none", "one", "list"])
def test_lstm_cell_function_validates_hidden_as_torch(hx):
    def build(lib):
        return lib.lstm_cell(lib.ones(2, 3), hx(lib), lib.ones(16, 3), lib.ones(16, 4))

    _same_outcome(build)


def test_lstm_cell_given_a_tensor_raises_torch_type_error():
    with pytest.raises(TypeError, match=r"argument 'hx' \(position 2\) must be tuple of "
                                        r"Tensors, not Tensor"):
        ember.nn.LSTMCell(3, 4)(ember.ones(2, 3), ember.zeros(2, 4))


@pytest.mark.parametrize("dim", ["a", 1.5, None])
def test_unflatten_does_not_check_dim_when_built(dim):
    assert _same_outcome(lambda lib: lib.nn.Unflatten(dim, (2, 3))).startswith("Unflatten(")


def test_unflatten_still_checks_the_sizes():
    expected = _same_outcome(lambda lib: lib.nn.Unflatten("a", (("b", 2), ("c", 3))))
    assert expected[0] == "TypeError"


@pytest.mark.parametrize("dropout", ["a", None, True])
def test_rnn_dropout_is_converted_to_float_first(dropout):
    expected = _same_outcome(lambda lib: lib.nn.RNN(3, 4, dropout=dropout))
    assert expected[0] in ("TypeError", "ValueError")


def test_upsample_refuses_a_list_scale_factor():
    expected = _same_outcome(lambda lib: lib.nn.Upsample(scale_factor=[2, 3]))
    assert expected[0] == "TypeError"


@pytest.mark.parametrize("name", ["AlphaDropout", "FeatureAlphaDropout"])
def test_alpha_dropout_ignores_inplace(name):
    x = ember.ones(2, 3, 4)
    ember.manual_seed(0)
    y = getattr(ember.nn, name)(0.5, inplace=True)(x)
    assert y is not x
    assert bool((x == 1).all())
    assert not bool((y == 1).all())


@pytest.mark.parametrize("kwargs", [dict(output_padding=2, stride=2), dict(output_padding=1)])
def test_conv_transpose1d_output_padding_message_names_a_unit_height(kwargs):
    def build(lib):
        return lib.nn.ConvTranspose1d(4, 6, 3, **kwargs)(lib.ones(1, 4, 5))

    expected = _same_outcome(build)
    assert "output_padding_height: 0" in expected[1]


def test_parameter_dict_popitem_of_empty_raises_key_error():
    with pytest.raises(KeyError) as caught:
        ember.nn.ParameterDict().popitem()
    with pytest.raises(KeyError) as expected:
        torch.nn.ParameterDict().popitem()
    assert caught.value.args == expected.value.args


@pytest.mark.parametrize("build", [
    lambda lib: lib.nn.RNNCell(2, 3)(lib.ones(4, 2), lib.zeros(4, 3, dtype=lib.float64)),
    lambda lib: lib.nn.GRUCell(2, 3)(lib.ones(2), lib.zeros(3, dtype=lib.float64)),
    lambda lib: lib.nn.GRUCell(2, 3)(lib.ones(4, 2), lib.zeros(4, 3, dtype=lib.float16)),
    lambda lib: lib.nn.LSTMCell(2, 3)(lib.ones(4, 2), (lib.zeros(4, 3, dtype=lib.float64),
                                                       lib.zeros(4, 3))),
    lambda lib: lib.nn.RNN(2, 3)(lib.ones(4, 2), lib.zeros(1, 3, dtype=lib.float64)),
    lambda lib: lib.nn.GRU(2, 3)(lib.ones(4, 1, 2), lib.zeros(1, 1, 3, dtype=lib.float64)),
    lambda lib: lib.gru_cell(lib.ones(4, 2), lib.zeros(4, 3, dtype=lib.float64),
                             lib.ones(9, 2), lib.ones(9, 3)),
    lambda lib: lib.rnn_tanh_cell(lib.ones(4, 2), lib.zeros(4, 3, dtype=lib.float64),
                                  lib.ones(3, 2), lib.ones(3, 3)),
], ids=["rnn-cell", "gru-cell-unbatched", "gru-cell-half", "lstm-cell", "rnn", "gru",
        "gru_cell", "rnn_tanh_cell"])
def test_hidden_state_of_another_dtype_raises_as_torch(build):
    assert _same_outcome(build)[0] == "RuntimeError"


def test_lstm_hidden_state_of_another_dtype_raises():
    lstm = ember.nn.LSTM(2, 3)
    with pytest.raises(RuntimeError, match="same dtype"):
        lstm(ember.ones(4, 2), (ember.zeros(1, 3, dtype=ember.float64), ember.zeros(1, 3)))


@pytest.mark.parametrize("dtypes", [
    ("float16", "float32", "float32", None),
    ("float64", "float32", "float32", "float32"),
    ("float32", "float32", "float32", "float64"),
    ("float32", "float32", "float64", "float64"),
    ("complex64", "float32", "float32", None),
])
def test_bilinear_of_mixed_dtypes_raises_torch_message(dtypes):
    def build(lib):
        shapes = [(2, 2), (2, 2), (3, 2, 2), (3,)]
        args = [lib.ones(s, dtype=getattr(lib, d)) for s, d in zip(shapes, dtypes) if d]
        return (lib.nn.functional.bilinear(*args),)

    assert _same_outcome(build)[1].startswith("All tensors must have the same dtype, got ")


@pytest.mark.parametrize("build", [
    lambda lib: lib.nn.Embedding(5, 2, max_norm=1.0)(lib.tensor([[1, 2], [2, 9]])),
    lambda lib: lib.nn.Embedding(5, 2, max_norm=1.0)(lib.tensor([[1, -7], [2, 9]])),
    lambda lib: lib.nn.EmbeddingBag(5, 2, max_norm=1.0)(lib.tensor([1, 9]), lib.tensor([0])),
    lambda lib: (lib.embedding_renorm_(lib.ones(5, 2), lib.tensor([1, 9]), 1.0, 2.0),),
], ids=["embedding", "negative", "bag", "renorm"])
def test_max_norm_out_of_range_index_raises_select_error(build):
    assert _same_outcome(build)[0] == "IndexError"


def test_max_norm_negative_index_in_range_is_renormed_then_refused_by_lookup():
    assert _same_outcome(lambda lib: lib.nn.Embedding(5, 2, max_norm=1.0)(
        lib.tensor([-1])))[0] == "IndexError"


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_rnn_flat_weights_hooks_exist_and_tolerate_a_deleted_weight(lib):
    gru = lib.nn.GRU(2, 3)
    gru._update_flat_weights()
    del gru.weight_ih_l0
    gru._init_flat_weights()
    assert gru._flat_weights[0] is None
    assert gru._flat_weights[1] is gru.weight_hh_l0


def test_adaptive_log_softmax_takes_torch_keyword_names():
    def build(lib):
        lib.manual_seed(0)
        m = lib.nn.AdaptiveLogSoftmaxWithLoss(4, 6, [2])
        return m(input_=lib.ones(3, 4), target_=lib.tensor([0, 3, 5]))

    assert _same_outcome(build) == ((3,), ())
