"""Functions PyTorch removed (raising its error), the sym_* functions, and the functional
recurrent cells."""

import pytest

import ember
from ember import nn


@pytest.mark.parametrize("name, replacement", [
    ("solve", "ember.linalg.solve"), ("lstsq", "ember.linalg.lstsq"),
    ("eig", "ember.linalg.eig"), ("symeig", "ember.linalg.eigh"),
    ("matrix_rank", "ember.linalg.matrix_rank")])
def test_removed_functions_name_their_replacement(name, replacement):
    with pytest.raises(RuntimeError, match="^This function was deprecated since version 1.9 and "
                                           "is now removed.") as caught:
        args = (ember.eye(2),) * (2 if name in ("solve", "lstsq") else 1)   # torch's arity
        getattr(ember, name)(*args)
    assert replacement in str(caught.value)
    if name != "matrix_rank":
        with pytest.raises(RuntimeError, match="is now removed"):
            getattr(ember.eye(2), name)(ember.eye(2))


def test_sym_functions_are_plain_arithmetic():
    assert ember.sym_int(-3.7) == -3 and ember.sym_float(2) == 2.0
    assert ember.sym_max(2, 5) == 5 and isinstance(ember.sym_max(2, 5.0), float)
    assert ember.sym_min(2.5, 1) == 1.0 and ember.sym_not(True) is False
    assert ember.sym_ite(False, 1, 2) == 2 and ember.sym_sqrt(4) == 2.0
    assert ember.sym_sum([1, 2, 3]) == 6
    with pytest.raises(AssertionError, match="expected"):
        ember.sym_max(ember.tensor(2), 3)


@pytest.mark.parametrize("mode, cell", [("lstm_cell", nn.LSTMCell), ("gru_cell", nn.GRUCell),
                                        ("rnn_tanh_cell", nn.RNNCell)])
def test_functional_cells_match_the_modules(mode, cell):
    layer = cell(3, 4)
    x, h = ember.randn(2, 3), ember.randn(2, 4)
    state = (h, ember.randn(2, 4)) if mode == "lstm_cell" else h
    want = layer(x, state)
    got = getattr(ember, mode)(x, state, layer.weight_ih, layer.weight_hh, layer.bias_ih,
                               layer.bias_hh)
    for g, w in zip(got if mode == "lstm_cell" else (got,), want if mode == "lstm_cell"
                    else (want,)):
        ember.testing.assert_close(g, w)
    relu = nn.RNNCell(3, 4, nonlinearity="relu")
    ember.testing.assert_close(ember.rnn_relu_cell(x, h, relu.weight_ih, relu.weight_hh,
                                                   relu.bias_ih, relu.bias_hh), relu(x, h))
