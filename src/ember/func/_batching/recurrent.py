"""vmap of the recurrent op ``_rnn_layer``: PyTorch has no batching rules for its RNN ops.
Its fallback loops over ``gru_cell``, ``rnn_tanh_cell`` and ``rnn_relu_cell``, and cannot
loop over ``lstm_cell`` or the layers (``lstm.input``, ``gru.input``, ...): those raise."""

from ember.func._batching import FALLBACK_NAMES
from ember.ops.recurrent import CELLS

_ATEN = {"LSTM": "lstm", "GRU": "gru", "RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu"}


def _rnn_layer_aten(values, params, level):
    """The ATen op PyTorch's fallback names for a cell's step or a layer of ``mode``;
    raises as PyTorch does where it cannot loop."""
    mode = params[0]
    if CELLS.running:
        aten = f"aten::{_ATEN[mode]}_cell"
        if mode != "LSTM":
            return aten
    else:
        aten = f"aten::{_ATEN[mode]}.input"
    raise RuntimeError(f"Batching rule not implemented for {aten}. We could not generate a "
                       f"fallback.")


FALLBACK_NAMES["_rnn_layer"] = _rnn_layer_aten
