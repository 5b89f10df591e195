"""``ember.nn.utils._expanded_weights``: per-sample gradients through ``ExpandedWeight``
(``torch.nn.utils._expanded_weights``), the machinery under ``call_for_per_sample_grads``.

An ``ExpandedWeight`` stands in for a parameter during one forward call. The functions that
know it (linear, conv1d/2d/3d, embedding, layer_norm, group_norm, instance_norm) run as an
autograd Function whose backward writes each sample's gradient into ``orig_weight.
grad_sample`` (accumulating) and gives the parameter no ``.grad``; any other function refuses
it, as PyTorch's does. The per-sample gradients are not a second implementation of each
layer: they are ``func.vmap`` over ``func.vjp`` of the layer on one sample at a time, which is
exact because none of these layers mixes samples.
"""

import ember
from ember._tensor import Tensor
from ember.autograd.function import Function
from ember.func import vjp, vmap
from ember.nn import functional as F

__all__ = ["ExpandedWeight", "LinearPerSampleGrad", "ConvPerSampleGrad",
           "EmbeddingPerSampleGrad", "LayerNormPerSampleGrad", "GroupNormPerSampleGrad",
           "InstanceNormPerSampleGrad"]


class ExpandedWeight(Tensor):
    """A parameter seen as ``batch_size`` copies: functions that support it compute each
    sample's gradient into ``orig_weight.grad_sample``."""

    def __new__(cls, orig_weight, batch_size, loss_reduction):
        if not orig_weight.requires_grad:
            raise RuntimeError("Can only build ExpandedWeights objects of tensors that "
                               "requires_grad")
        with ember.no_grad():
            self = orig_weight.detach().as_subclass(cls)
        self.requires_grad_(True)
        return self

    allow_smaller_batches = False   # (a packed sequence's shorter steps: rnn_layers)

    def __init__(self, orig_weight, batch_size, loss_reduction):
        self.orig_weight = orig_weight
        self.batch_size = batch_size
        self.loss_reduction = loss_reduction

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """Route the supported layer functions to their per-sample Function; refuse the rest."""
        kwargs = kwargs or {}
        handler = _HANDLERS.get(func)
        if handler is None:
            name = getattr(func, "__name__", str(func))
            raise RuntimeError(f"Expanded Weights encountered but cannot handle function {name}")
        return handler(func, args, kwargs)


class _PerSampleGrad(Function):
    """forward: the layer function on the original weights; backward: the input's gradient as
    usual, and each ExpandedWeight's per-sample gradient into ``orig_weight.grad_sample``."""

    @staticmethod
    def forward(ctx, spec, *flat):
        func, recompute, names, kwargs = spec
        ctx.spec, ctx.flat = spec, flat
        call = dict(zip(names, _unexpand(flat)))
        call.update(kwargs)
        with ember.no_grad():
            return func(**call)

    @staticmethod
    def backward(ctx, grad_out):
        func, recompute, names, kwargs = ctx.spec
        flat = ctx.flat
        call_kwargs = {**kwargs, **recompute}
        raw = _unexpand(flat)
        expanded = [i for i, t in enumerate(flat) if isinstance(t, ExpandedWeight)]
        wanted = [i for i, t in enumerate(flat) if i not in expanded and isinstance(t, Tensor)
                  and ctx.needs_input_grad[i + 1]]
        grads = [None] * (len(flat) + 1)

        def call_with(values, positions, batch_input=None):
            args = list(raw)
            for i, v in zip(positions, values):
                args[i] = v
            if batch_input is not None:
                args[0] = batch_input
            return func(**dict(zip(names, args), **call_kwargs))

        if wanted:     # the ordinary gradient of the other tensor arguments (the input)
            _, pull = vjp(lambda *v: call_with(v, wanted), *[raw[i] for i in wanted])
            for i, g in zip(wanted, pull(grad_out)):
                grads[i + 1] = g
        if expanded:
            weights = [raw[i].detach() for i in expanded]

            def one_sample(x, g):
                _, pull = vjp(lambda *v: call_with(v, expanded, x.unsqueeze(0)), *weights)
                return pull(g.unsqueeze(0))
            per_sample = vmap(one_sample)(raw[0].detach(), grad_out)
            for i, g in zip(expanded, per_sample):
                ew = flat[i]
                if ew.loss_reduction == "mean":
                    g = g * ew.batch_size
                if g.shape[0] < ew.batch_size:     # (a packed step: the ended samples' rows)
                    g = ember.cat([g, g.new_zeros((ew.batch_size - g.shape[0],) + g.shape[1:])])
                w = ew.orig_weight
                prev = getattr(w, "grad_sample", None)
                w.grad_sample = g if prev is None else prev + g
        return tuple(grads)


def rnn_layers(module, x, h0, c0, sizes, packed):
    """``RNNBase._layers`` (output rows, h_n, c_n) with ExpandedWeight parameters, as
    PyTorch decomposes its recurrent kernels for them: each step's products go through
    ``F.linear``, whose per-sample gradients add up over the steps. A packed sequence's
    steps shrink with ``sizes``: the rows of the samples already ended get no gradient."""
    if module.mode == "LSTM" and module.proj_size == 0 and x.dtype is ember.float32 \
            and not packed:
        # (PyTorch's CPU decomposition of a padded batch runs its oneDNN layer, which knows
        # no ExpandedWeight)
        raise RuntimeError("Expanded Weights encountered but cannot handle function "
                           "mkldnn_rnn_layer.default")
    directions = 2 if module.bidirectional else 1
    hs, cs = [], []
    inp = x
    for layer in range(module.num_layers):
        outs = []
        for direction in range(directions):
            k = layer * directions + direction
            weights = module.all_weights[k]
            state = (h0[k], c0[k] if c0 is not None else None)
            out, h, c = _direction(module.mode, weights, module.bias, module.proj_size > 0,
                                   inp, state, sizes, reverse=direction == 1)
            outs.append(out)
            hs.append(h)
            cs.append(c)
        inp = outs[0] if directions == 1 else ember.cat(outs, 1)
        if module.training and module.dropout > 0 and layer < module.num_layers - 1:
            inp = F.dropout(inp, module.dropout)
    return inp, ember.stack(hs), (ember.stack(cs) if c0 is not None else None)


def _direction(mode, weights, bias, proj, rows, state, sizes, reverse):
    """One direction of one layer over the step-major ``rows`` (``sizes[t]`` rows at step
    ``t``): its output rows and final ``(h, c)``, the rows of the samples that ended early
    kept from the step they ended at (as PyTorch's packed loop keeps them)."""
    b_ih, b_hh = (weights[2], weights[3]) if bias else (None, None)
    w_hr = weights[-1] if proj else None
    starts = [0]
    for n in sizes:
        starts.append(starts[-1] + n)
    h, c = state
    n = sizes[-1] if reverse else sizes[0]
    h, c = h[:n], (c[:n] if c is not None else None)
    ended = []
    seq = [None] * len(sizes)
    for t in (range(len(sizes) - 1, -1, -1) if reverse else range(len(sizes))):
        b = sizes[t]
        if b > n:           # (reversed: the longer samples start here, from their state)
            h = ember.cat([h, state[0][n:b]])
            c = ember.cat([c, state[1][n:b]]) if c is not None else None
        elif b < n:         # (the samples past ``b`` ended at the step before)
            ended.append((h[b:], c[b:] if c is not None else None))
            h, c = h[:b], (c[:b] if c is not None else None)
        n = b
        with _smaller_batches(weights, b):
            gi = F.linear(rows[starts[t]:starts[t + 1]], weights[0], b_ih)
            gh = F.linear(h, weights[1], b_hh)
            h, c = _cell(mode, gi, gh, h, c)
            if w_hr is not None:
                h = F.linear(h, w_hr)
        seq[t] = h
    if ended:
        h = ember.cat([h] + [e[0] for e in reversed(ended)])
        c = ember.cat([c] + [e[1] for e in reversed(ended)]) if c is not None else None
    return ember.cat(seq), h, c


class _smaller_batches:
    """Context manager: the ExpandedWeights among ``weights`` take a step of ``b`` rows, fewer
    than their batch (PyTorch's ``allow_smaller_batches`` for packed sequences)."""

    def __init__(self, weights, b):
        self.weights = [w for w in weights if isinstance(w, ExpandedWeight) and
                        w.batch_size > b]

    def __enter__(self):
        for w in self.weights:
            w.allow_smaller_batches = True

    def __exit__(self, *exc):
        for w in self.weights:
            w.allow_smaller_batches = False


def _cell(mode, gi, gh, h, c):
    """One step of a recurrent cell from its input and hidden products: ``(h, c)``."""
    if mode == "RNN_TANH":
        return ember.tanh(gi + gh), None
    if mode == "RNN_RELU":
        return ember.relu(gi + gh), None
    if mode == "GRU":
        ir, iz, i_n = gi.chunk(3, 1)
        hr, hz, h_n = gh.chunk(3, 1)
        r, z = ember.sigmoid(ir + hr), ember.sigmoid(iz + hz)
        n = ember.tanh(i_n + r * h_n)
        return (1 - z) * n + z * h, None
    i, f, g, o = (gi + gh).chunk(4, 1)
    c = ember.sigmoid(f) * c + ember.sigmoid(i) * ember.tanh(g)
    return ember.sigmoid(o) * ember.tanh(c), c


def _unexpand(flat):
    return [t.orig_weight if isinstance(t, ExpandedWeight) else t for t in flat]


def _function(name):
    return type(name, (_PerSampleGrad,), {"__doc__": f"{name}: see _PerSampleGrad."})


LinearPerSampleGrad = _function("LinearPerSampleGrad")
ConvPerSampleGrad = _function("ConvPerSampleGrad")
EmbeddingPerSampleGrad = _function("EmbeddingPerSampleGrad")
LayerNormPerSampleGrad = _function("LayerNormPerSampleGrad")
GroupNormPerSampleGrad = _function("GroupNormPerSampleGrad")
InstanceNormPerSampleGrad = _function("InstanceNormPerSampleGrad")


def _handler(fn_cls, names, recompute=None, conv_dim=None):
    """A __torch_function__ handler: bind the call, check the batch, apply ``fn_cls``.
    ``names`` are the leading parameters passed as tensors (input first); ``recompute`` are
    keyword overrides for the per-sample recomputation (no running-stat updates, no renorm)."""
    def handle(func, args, kwargs):
        bound = dict(zip(names, args))
        rest = list(args[len(names):])
        for k in names:
            if k in kwargs:
                bound[k] = kwargs[k]
        extra = {k: v for k, v in kwargs.items() if k not in names}
        x = bound[names[0]]
        if conv_dim is not None and x.dim() != conv_dim + 2:
            raise RuntimeError(f"Expanded Weights only support convolution with batched input, "
                               f"got {func} with anunbatched input of dim {x.dim()}, expected "
                               f"input of dim {conv_dim + 2}")
        if x.dim() < 2:
            raise RuntimeError(f"Input does not have a batch dimension. Expanded Weights "
                               f"expected input of at least rank 2, got of rank {x.dim()}")
        for t in bound.values():
            if isinstance(t, ExpandedWeight) and t.batch_size != x.shape[0] and not (
                    t.allow_smaller_batches and x.shape[0] < t.batch_size):
                raise RuntimeError(f"Expected ExpandedWeights to have batch size matching "
                                   f"input but got input batch size of {x.shape[0]} with "
                                   f"ExpandedWeight of batch size {t.batch_size}")
        used = [k for k in names if k in bound]
        # positional arguments past the tensors become keywords, by the function's order
        extra.update(zip(_POSITIONAL_TAIL[func][:len(rest)], rest))
        spec = (func, _recompute(recompute, extra), used, extra)
        return fn_cls.apply(spec, *[bound[k] for k in used])
    return handle


def _recompute(recompute, extra):
    if recompute is None:
        return {}
    return recompute(extra)


def _instance_norm_recompute(kw):
    # stats come from the input in training: the per-sample pass must not update them again
    if kw.get("use_input_stats", True):
        return {"running_mean": None, "running_var": None}
    return {}


_POSITIONAL_TAIL = {
    F.linear: (),
    F.conv1d: ("stride", "padding", "dilation", "groups"),
    F.conv2d: ("stride", "padding", "dilation", "groups"),
    F.conv3d: ("stride", "padding", "dilation", "groups"),
    F.embedding: ("padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"),
    F.layer_norm: ("eps",),
    F.group_norm: ("eps",),
    F.instance_norm: ("use_input_stats", "momentum", "eps"),
}

_HANDLERS = {
    F.linear: _handler(LinearPerSampleGrad, ("input", "weight", "bias")),
    F.conv1d: _handler(ConvPerSampleGrad, ("input", "weight", "bias"), conv_dim=1),
    F.conv2d: _handler(ConvPerSampleGrad, ("input", "weight", "bias"), conv_dim=2),
    F.conv3d: _handler(ConvPerSampleGrad, ("input", "weight", "bias"), conv_dim=3),
    # as PyTorch's, per-sample gradients ignore padding_idx (the padding row gets gradient),
    # frequency scaling and sparsity; max_norm was applied by the forward
    F.embedding: _handler(EmbeddingPerSampleGrad, ("input", "weight"),
                          lambda kw: {"padding_idx": None, "max_norm": None,
                                      "scale_grad_by_freq": False, "sparse": False}),
    F.layer_norm: _handler(LayerNormPerSampleGrad,
                           ("input", "normalized_shape", "weight", "bias")),
    F.group_norm: _handler(GroupNormPerSampleGrad, ("input", "num_groups", "weight", "bias")),
    F.instance_norm: _handler(InstanceNormPerSampleGrad,
                              ("input", "running_mean", "running_var", "weight", "bias"),
                              _instance_norm_recompute),
}
