"""Recurrent layers: RNN, LSTM, GRU and their single-step cells.

A layer projects the inputs of all time steps with one matmul per layer and direction, then
runs the recurrence as one ``_rnn_layer`` op (ember/ops/recurrent.py), which also takes
packed sequences (see ember.nn.utils.rnn).
"""

import math
import numbers
import warnings

import ember
from ember.amp._cache import cast_weight
from ember._warn import warn_once
from ember.amp._state import STATE as _AMP
from ember.backends.cpu import _onednn_supports
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.nn.utils.rnn import PackedSequence
from ember.ops._registry import rename_node
from ember.ops.recurrent import cell_layer, recurrence, rnn_layer

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _init_uniform(module):
    """PyTorch's init for recurrent weights: U(-1/sqrt(hidden), 1/sqrt(hidden)) on all."""
    bound = 1.0 / math.sqrt(module.hidden_size) if module.hidden_size > 0 else 0
    with ember.no_grad():
        for p in module.parameters():
            p.uniform_(-bound, bound)


def _dropout(x, p):
    keep = (ember.rand(x.shape, dtype=x.dtype, device=x.device) >= p).to(x.dtype)
    return x * keep * (1.0 / (1.0 - p))


def _projection(x, w_ih, b_ih, b_hh):
    """``x W_ih^T + b_ih (+ b_hh)`` for all rows of ``x`` at once."""
    w_t = cast_weight(w_ih).t()     # cast, then transposed, as PyTorch's linear does
    if b_ih is None:
        return x.matmul(w_t)
    # under autocast each bias is cast on its own, as PyTorch's kernels take it: its cached
    # copy, stale after an in-place update inside the region just as the weights' are
    bias = b_ih if b_hh is None else cast_weight(b_ih) + cast_weight(b_hh)
    return ember.addmm(bias, x, w_t)


def _check_state_dtype(h, w_hh, b_hh):
    """PyTorch's error for a hidden state whose dtype is not the weights': that of the product
    ``h W_hh^T (+ b_hh)`` it computes (``rnn_layer`` would silently promote instead)."""
    if h.dtype == w_hh.dtype or ember.is_autocast_enabled(h.device.type):
        return
    if b_hh is None:
        h.matmul(w_hh.t())
    else:
        ember.addmm(b_hh, h, w_hh.t())


def _check_biases(x, h, w_ih, w_hh, b_ih, b_hh):
    """PyTorch's error for a cell's bias of another dtype than its weight's or of another
    shape: its cell computes ``linear(x, w_ih, b_ih)``, then ``linear(h, w_hh, b_hh)``,
    where ember folds the biases (which would promote or broadcast them instead)."""
    if _odd_bias(w_ih, b_ih) or _odd_bias(w_hh, b_hh):
        for inp, w, b in ((x, w_ih, b_ih), (h, w_hh, b_hh)):
            if b is not None:
                ember.addmm(b, inp, w.t())


def _refuse_weights(mode, w_ih, w_hh):
    """The TypeError of PyTorch's cell ops (parsing their arguments) for a weight that is no
    tensor (a None given to functional_call)."""
    for name, pos, w in (("w_ih", 3, w_ih), ("w_hh", 4, w_hh)):
        if not isinstance(w, ember.Tensor):
            raise TypeError(f"{mode.lower()}_cell(): argument '{name}' (position {pos}) must "
                            f"be Tensor, not {type(w).__name__}")


def _odd_bias(w, b):
    return b is not None and (b.dtype is not w.dtype or b.dim() != 1 or w.dim() == 0
                              or len(b) != len(w))


def _expanded(layers):
    """Whether the weights are ExpandedWeights (``call_for_per_sample_grads``)."""
    return type(layers.all_weights[0][0]).__name__ == "ExpandedWeight"


def _check_types(**args):
    """PyTorch's TypeError for each ``name=(value, type)`` whose value is of another type."""
    for name, (value, kind) in args.items():
        if not isinstance(value, kind):
            raise TypeError(f"{name} should be of type {kind.__name__}, got: "
                            f"{type(value).__name__}")


class RNNBase(Module):
    """Base class of RNN, LSTM and GRU (``torch.nn.RNNBase``)."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        factory_kwargs = {"device": device, "dtype": dtype}
        float(dropout)  # PyTorch converts first: a string or None fails as float() fails
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or \
                isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"dropout option adds dropout after all but last recurrent layer, so "
                          f"non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        _check_types(bias=(bias, bool), batch_first=(batch_first, bool),
                     input_size=(input_size, int))
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        _check_types(hidden_size=(hidden_size, int))
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(directions):
                layer_input = input_size if layer == 0 else real_hidden * directions
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = [("weight_ih", (gate_size, layer_input)),
                          ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for name, shape in shapes:
                    setattr(self, name + suffix, Parameter(ember.empty(shape, **factory_kwargs)))
                    names.append(name + suffix)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        """Draw every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        _init_uniform(self)

    def flatten_parameters(self):
        """No-op: ember keeps no fused weight buffer (kept for PyTorch compatibility)."""

    def _init_flat_weights(self):
        """No-op: ``_flat_weights`` is always read from the current attributes."""

    def _update_flat_weights(self):
        """No-op: ``_flat_weights`` is always read from the current attributes."""

    @property
    def _flat_weights(self):
        return [getattr(self, name, None) for name in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters as a list per layer and direction."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ----- forward -----------------------------------------------------------------------

    def forward(self, input, hx=None):
        is_lstm = self.mode == "LSTM"
        packed = isinstance(input, PackedSequence)
        directions = 2 if self.bidirectional else 1
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        if packed:
            input, batch_sizes, sorted_indices, unsorted_indices = input
            sizes = tuple(int(b) for b in batch_sizes.tolist())
            batched = True
            batch = sizes[0]
        else:
            sorted_indices = unsorted_indices = None
            name = {"LSTM": "LSTM", "GRU": "GRU"}.get(self.mode, "RNN")
            if input.dim() not in (2, 3):
                extra = " tensor" if name == "RNN" else ""
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got "
                                 f"{input.dim()}D{extra} instead")
            batched = input.dim() == 3
            if not batched:
                input = input.unsqueeze(1)
            elif self.batch_first:
                input = input.transpose(0, 1)
            steps, batch = input.shape[0], input.shape[1]
            sizes = (batch,) * steps
        hx = self._check_hidden(hx, batched, is_lstm)
        self._check_input(input, packed)
        expected = (self.num_layers * directions, batch, real_hidden)
        if hx is None:
            dtype, device = input.dtype, input.device
            h0 = ember.zeros(expected, dtype=dtype, device=device)
            c0 = ember.zeros(expected[:2] + (self.hidden_size,), dtype=dtype, device=device) \
                if is_lstm else None
        else:
            h0, c0 = (hx if is_lstm else (hx, None))
            if not batched:
                h0 = h0.unsqueeze(1)
                c0 = c0.unsqueeze(1) if c0 is not None else None
            if sorted_indices is not None:
                h0 = h0.index_select(1, sorted_indices)
                c0 = c0.index_select(1, sorted_indices) if c0 is not None else None
            self.check_hidden_size(h0, expected, "Expected hidden[0] size {}, got {}"
                                   if is_lstm else "Expected hidden size {}, got {}")
            if is_lstm:
                self.check_hidden_size(c0, expected[:2] + (self.hidden_size,),
                                       "Expected hidden[1] size {}, got {}")
            _check_state_dtype(h0[0], self.weight_hh_l0, getattr(self, "bias_hh_l0", None))
        if not packed and sizes == ():
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        if not packed:
            warn_lstm_projections(self, input)
        x = input if packed else input.reshape(len(sizes) * batch, input.shape[2])
        output, h_n, c_n = self._layers(x, h0, c0, sizes, packed)
        if packed:
            if unsorted_indices is not None:
                h_n = h_n.index_select(1, unsorted_indices)
                c_n = c_n.index_select(1, unsorted_indices) if c_n is not None else None
            output = PackedSequence(rename_node(output, "CatBackward0"), batch_sizes,
                                    sorted_indices, unsorted_indices)
        else:
            output = output.reshape(len(sizes), batch, output.shape[-1])
            if not batched:
                output, h_n = output.squeeze(1), h_n.squeeze(1)
                c_n = c_n.squeeze(1) if c_n is not None else None
            else:
                if self.batch_first:
                    output = output.transpose(0, 1)
                rename_node(output, self._output_node_name(output.dtype))
        return (output, (h_n, c_n)) if is_lstm else (output, h_n)

    def _output_node_name(self, dtype):
        """The name of PyTorch's (CPU) backward node for the output of a batched sequence:
        its oneDNN LSTM kernel's for a float32 LSTM without projections, else that of the
        op its per-step loop ends with."""
        if _expanded(self):
            return "TransposeBackward0" if self.batch_first else "CatBackward0"
        if self.batch_first:
            return "TransposeBackward0" if self.mode == "LSTM" else "TransposeBackward1"
        if self.bidirectional:
            return "CatBackward0"
        if self.mode == "LSTM" and self.proj_size == 0 and dtype is ember.float32:
            return "MkldnnRnnLayerBackward0"
        return "StackBackward0"

    def _layers(self, x, h0, c0, sizes, packed=False):
        if _expanded(self):         # (PyTorch's decomposition for per-sample gradients)
            from ember.nn.utils._expanded_weights import rnn_layers
            return rnn_layers(self, x, h0, c0, sizes, packed)
        directions = 2 if self.bidirectional else 1
        fold_bias = self.mode != "GRU"      # b_hh adds to the projection except in GRU's n
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                k = layer * directions + direction
                w = dict(zip(("w_ih", "w_hh", "b_ih", "b_hh"), self.all_weights[k][:4]))
                w_hr = self.all_weights[k][-1] if self.proj_size > 0 else None
                b_ih, b_hh = (w["b_ih"], w["b_hh"]) if self.bias else (None, None)
                composed = _composed_layer(self) and _cpu_autocast(x)
                fold = fold_bias and not composed   # PyTorch's cells add b_hh in linear_hh
                proj = _projection(x, w["w_ih"], b_ih, b_hh if fold else None)
                run = _stepwise if composed else rnn_layer
                out, h, c = run(proj, h0[k], w["w_hh"],
                                      c0[k] if c0 is not None else None,
                                      None if fold else b_hh, w_hr, mode=self.mode,
                                      batch_sizes=sizes, reverse=direction == 1)
                outs.append(out)
                hs.append(h)
                cs.append(c)
            x = outs[0] if directions == 1 else ember.cat(outs, 1)
            if self.training and self.dropout > 0 and layer < self.num_layers - 1:
                x = _dropout(x, self.dropout)
        h_n = ember.stack(hs)
        c_n = ember.stack(cs) if c0 is not None else None
        return x, h_n, c_n

    def _check_hidden(self, hx, batched, is_lstm):
        if hx is None:
            return None
        if is_lstm:
            h, c = hx[0], hx[1]         # indexed as torch does: a bare tensor raises IndexError
            want = 3 if batched else 2
            if h.dim() != want or c.dim() != want:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D but "
                                   f"got ({h.dim()}-D, {c.dim()}-D) tensors")
            return h, c
        else:
            want = 3 if batched else 2
            if hx.dim() != want:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx should also be {want}-D but got "
                                   f"{hx.dim()}-D tensor")
        return hx

    def _check_input(self, input, packed):
        weight = self.weight_ih_l0
        # under autocast the layer runs in its low dtype whatever the input's (PyTorch checks
        # only outside autocast too)
        if input.dtype != weight.dtype and not ember.is_autocast_enabled(input.device.type):
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype "
                             f"({weight.dtype}). Convert input: input.to({weight.dtype}), or "
                             f"convert model: model.to({input.dtype})")
        want = 2 if packed else 3
        if input.dim() != want:
            raise RuntimeError(f"input must have {want} dimensions, got {input.dim()}")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")

    # ----- PyTorch's public checks, for subclasses that write their own forward ----------

    def check_input(self, input, batch_sizes):
        """Check the input's dtype, dimensions (2 when packed) and feature size."""
        self._check_input(input, batch_sizes is not None)

    def get_expected_hidden_size(self, input, batch_sizes):
        """The shape the hidden state must have for ``input``."""
        return self._expected_size(input, batch_sizes, self.proj_size or self.hidden_size)

    def _expected_size(self, input, batch_sizes, features):
        if batch_sizes is not None:
            batch = int(batch_sizes[0])
        else:
            batch = input.size(0) if self.batch_first else input.size(1)
        return (self.num_layers * (2 if self.bidirectional else 1), batch, features)

    def check_hidden_size(self, hx, expected_hidden_size, msg="Expected hidden size {}, got {}"):
        """Raise ``msg`` unless ``hx`` has the expected size."""
        if hx.size() != expected_hidden_size:
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(self, input, hidden, batch_sizes):
        """Check the input and the hidden state."""
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        """The hidden state reordered along the batch (a packed sequence's sorting)."""
        return hx if permutation is None else hx.index_select(1, permutation)


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             f"'relu'.")
        super().__init__(mode, *args, **kwargs)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o), with an optional projection of h."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input, batch_sizes):
        """The shape the cell state must have for ``input``."""
        return self._expected_size(input, batch_sizes, self.hidden_size)

    def check_forward_args(self, input, hidden, batch_sizes):
        """Check the input and the (h, c) state."""
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def permute_hidden(self, hx, permutation):
        """The (h, c) state reordered along the batch (a packed sequence's sorting)."""
        if permutation is None:
            return hx
        return hx[0].index_select(1, permutation), hx[1].index_select(1, permutation)


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n): n = tanh(W_in x + b_in + r * (W_hn h + b_hn))."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


# ----- cells --------------------------------------------------------------------------------

class RNNCellBase(Module):
    """Base class of the single-step cells (``torch.nn.RNNCellBase``)."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        factory_kwargs = {"device": device, "dtype": dtype}
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(ember.empty((num_chunks * hidden_size, input_size),
                                               **factory_kwargs))
        self.weight_hh = Parameter(ember.empty((num_chunks * hidden_size, hidden_size),
                                               **factory_kwargs))
        if bias:
            self.bias_ih = Parameter(ember.empty(num_chunks * hidden_size, **factory_kwargs))
            self.bias_hh = Parameter(ember.empty(num_chunks * hidden_size, **factory_kwargs))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Draw every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        _init_uniform(self)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _step(self, mode, input, states):
        """Check shapes, then run one step of ``mode`` on ``input`` (B, I) and the states."""
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} "
                               f"expected {self.input_size}")
        for i, s in enumerate(states):
            if s.shape[0] != input.shape[0]:
                raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{i} "
                                   f"batch size {s.shape[0]}")
            if s.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {s.shape[1]}, "
                                   f"expected {self.hidden_size}")
        return cell_step(mode, input, states, self.weight_ih, self.weight_hh, self.bias_ih,
                         self.bias_hh)

    def _batch(self, input, hx):
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D "
                             f"instead")
        if hx is not None and hx.dim() not in (1, 2):   # (a tuple hx fails here, as in PyTorch)
            raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {hx.dim()}D "
                             f"instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        return input, batched

    def _zeros(self, input):
        return ember.zeros((input.shape[0], self.hidden_size), dtype=input.dtype,
                           device=input.device)


def _composed_layer(layer):
    """Whether PyTorch's CPU ``layer`` (a module, or torch.lstm's arguments) is a composition
    of autocast's ops rather than a oneDNN kernel: GRU, and LSTM with projections."""
    return layer.mode == "GRU" or (layer.mode == "LSTM" and layer.proj_size > 0)


def warn_lstm_projections(layer, input):
    """PyTorch's CPU LSTM on a padded sequence picks oneDNN for the input's dtype (float32;
    bfloat16 and, without grad mode, float16 where the CPU runs them) and, when the layer has
    projections, warns once that it falls back to its own implementation."""
    if layer.mode != "LSTM" or not layer.proj_size or input.device.type != "cpu" \
            or not ember.backends.mkldnn.enabled or input.numel() == 0:
        return
    dtype = input.dtype
    if dtype is ember.float32 or (dtype is ember.bfloat16 and _onednn_supports("bfloat16")) \
            or (dtype is ember.float16 and not ember.is_grad_enabled()
                and _onednn_supports("float16")):
        warn_once("LSTM with projections is not supported with oneDNN. Using default "
                  "implementation.")


def _cpu_autocast(x):
    """Whether CPU autocast is on for ``x``. PyTorch's CPU LSTM and GRU cells, its CPU GRU
    layers and its LSTM layers with projections (which have no oneDNN kernel, unlike other
    LSTM layers) are then compositions of autocast's ops: matrix products in the low dtype,
    the state updates in the states' dtype (float32 for a float32 input)."""
    return x.device.type == "cpu" and bool(_AMP.enabled.get("cpu"))


def _stepwise(x, hx, w_hh, cx=None, b_hh=None, w_hr=None, *, mode, batch_sizes,
              reverse=False):
    """``rnn_layer`` computed step by step with ember ops (as ``rnn_layer`` returns it)."""
    res = recurrence(x, hx, w_hh, cx, b_hh, w_hr, mode=mode, batch_sizes=tuple(batch_sizes),
                     reverse=reverse)
    return res if mode == "LSTM" else (*res, None)


def cell_step(mode, input, states, w_ih, w_hh, b_ih, b_hh):
    """``(h', c')`` (``c'`` None but for LSTM) after one step of ``mode`` from ``states``
    (``(h,)`` or ``(h, c)``) on ``input`` (B, I)."""
    if not (isinstance(w_ih, ember.Tensor) and isinstance(w_hh, ember.Tensor)):
        _refuse_weights(mode, w_ih, w_hh)
    _check_state_dtype(states[0], w_hh, b_hh)
    composed = mode in ("LSTM", "GRU") and _cpu_autocast(input)
    if not _cpu_autocast(input):
        _check_biases(input, states[0], w_ih, w_hh, b_ih, b_hh)
    fold_bias = mode != "GRU" and not composed
    proj = _projection(input, w_ih, b_ih, b_hh if fold_bias else None)
    run = _stepwise if composed else cell_layer
    _, h, c = run(proj, states[0], w_hh, states[1] if len(states) > 1 else None,
                  None if fold_bias else b_hh, mode=mode, batch_sizes=(input.shape[0],))
    # named as the op PyTorch's cell ends h with (h and c share a node here: an LSTM's c
    # shows MulBackward0 where PyTorch's shows AddBackward0)
    return rename_node(h, _CELL_NODE_NAMES[mode]), c


_CELL_NODE_NAMES = {"LSTM": "MulBackward0", "GRU": "AddBackward0", "RNN_TANH": "TanhBackward0",
                    "RNN_RELU": "ReluBackward0"}


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step with the given weights: ``(h', c')`` from ``hx = (h, c)``
    (``torch.lstm_cell``)."""
    return cell_step("LSTM", input, _lstm_states(hx), w_ih, w_hh, b_ih, b_hh)


def _lstm_states(hx):
    """``hx`` as a ``(h, c)`` tuple, refused as ``torch.lstm_cell`` refuses it."""
    if not isinstance(hx, (tuple, list)):
        raise TypeError(f"lstm_cell(): argument 'hx' (position 2) must be tuple of Tensors, "
                        f"not {type(hx).__name__}")
    for i, h in enumerate(hx):
        if not isinstance(h, ember.Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 1, but got "
                            f"{type(h).__name__}")
    if len(hx) != 2:
        raise RuntimeError("lstm_cell expects two hidden states")
    return tuple(hx)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One GRU step with the given weights (``torch.gru_cell``)."""
    return cell_step("GRU", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One tanh RNN step with the given weights (``torch.rnn_tanh_cell``)."""
    return cell_step("RNN_TANH", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One relu RNN step with the given weights (``torch.rnn_relu_cell``)."""
    return cell_step("RNN_RELU", input, (hx,), w_ih, w_hh, b_ih, b_hh)[0]


def _unsqueeze(h, batched):
    return h if batched else h.unsqueeze(0)


class RNNCell(RNNCellBase):
    """One step of an Elman RNN (tanh or relu)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device,
                         dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        input, batched = self._batch(input, hx)
        hx = self._zeros(input) if hx is None else _unsqueeze(hx, batched)
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        h, _ = self._step("RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU", input,
                          (hx,))
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One step of an LSTM; returns ``(h', c')``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device,
                         dtype=dtype)

    def forward(self, input, hx=None):
        input, batched = self._batch(input, None)
        if hx is None:
            zeros = self._zeros(input)
            hx = (zeros, zeros)
        else:
            for i, h in enumerate(hx):
                if h.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{i}] to be 1D or 2D, got "
                                     f"{h.dim()}D instead")
            hx = hx if batched else (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        h, c = self._step("LSTM", input, _lstm_states(hx))
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One step of a GRU."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device,
                         dtype=dtype)

    def forward(self, input, hx=None):
        input, batched = self._batch(input, hx)
        hx = self._zeros(input) if hx is None else _unsqueeze(hx, batched)
        h, _ = self._step("GRU", input, (hx,))
        return h if batched else h.squeeze(0)
