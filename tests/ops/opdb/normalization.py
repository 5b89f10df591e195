"""OpInfo entries for ember/ops/norm_batch.py and norm_rows.py: native_batch_norm,
native_layer_norm, native_group_norm and _fused_rms_norm (the fused kernels behind
F.batch_norm, F.layer_norm, F.group_norm and F.rms_norm)."""

import numpy as np

import ember
from ember.ops.normalization import _fused_rms_norm
from tests.ops.opdb.core import FLOATS, LOW, ErrorInput, OpInfo, SampleInput, make


def _s(x, *args, name="", **kwargs):
    return SampleInput(x, args, kwargs, name=name)


def _normalized(x, axes, eps):
    x = x.astype(np.float64)
    mean = x.mean(axes, keepdims=True)
    var = x.var(axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps), mean, 1 / np.sqrt(var + eps)


# --- batch norm -------------------------------------------------------------------------------

def _bn_ref(x, w, b, rm, rv, training, momentum, eps):
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    axes = (0,) + tuple(range(2, x.ndim))
    if training:
        xhat, mean, invstd = _normalized(x, axes, eps)
        mean, invstd = mean.reshape(-1), invstd.reshape(-1)
    else:
        xhat = (x - rm.reshape(shape)) / np.sqrt(rv.reshape(shape) + eps)
        mean = invstd = np.zeros(0)
    out = xhat
    if w is not None:
        out = out * w.reshape(shape)
    if b is not None:
        out = out + b.reshape(shape)
    return out.astype(x.dtype), mean, invstd


def _bn_samples(dtype, rg):
    def mk(*shape, **kw):
        return make(shape, dtype, rg, **kw)

    def stats(c):                       # running stats get no gradient
        return make((c,), dtype, low=-1, high=1), make((c,), dtype, low=0.5, high=2)
    yield _s(mk(3, 2, 4), mk(2), mk(2), None, None, True, 0.1, 1e-5, name="train_3d")
    yield _s(mk(4, 3), None, None, None, None, True, 0.1, 1e-5, name="train_2d_no_affine")
    yield _s(mk(2, 2, 2, 2), mk(2), None, *stats(2), True, 0.3, 1e-3, name="train_4d_stats")
    yield _s(mk(3, 2, 4), mk(2), mk(2), *stats(2), False, 0.1, 1e-5, name="eval")
    yield _s(mk(3, 2, 4, noncontiguous=True), mk(2), mk(2), None, None, True, 0.1, 1e-5,
             name="noncontiguous")
    # 16 or more values per (sample, channel): the (C, L) plane path of the kernels
    yield _s(mk(2, 3, 4, 4), mk(3), mk(3), None, None, True, 0.1, 1e-5, name="train_planes")
    yield _s(mk(2, 3, 4, 5), mk(3), mk(3), *stats(3), False, 0.1, 1e-5, name="eval_planes")
    if not rg:
        yield _s(mk(0, 3), mk(3), mk(3), *stats(3), False, 0.1, 1e-5, name="empty_eval")


def _bn_errors():
    f = ember.ones
    yield ErrorInput(_s(f(2, 3, dtype=ember.int64), None, None, None, None, True, 0.1, 1e-5),
                     NotImplementedError, "\"batch_norm\" not implemented for 'Long'")
    # (eval mode without running stats: PyTorch's native_batch_norm crashes; F.batch_norm's
    # error is tested in tests/nn/test_normalization.py)


# --- layer norm -------------------------------------------------------------------------------

def _ln_ref(x, normalized_shape, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    xhat, mean, invstd = _normalized(x, axes, eps)
    out = xhat
    if w is not None:
        out = out * w
    if b is not None:
        out = out + b
    return out.astype(x.dtype), mean, invstd


def _ln_samples(dtype, rg):
    def mk(*shape, **kw):
        return make(shape, dtype, rg, **kw)
    yield _s(mk(3, 4), (4,), mk(4), mk(4), 1e-5, name="2d")
    yield _s(mk(2, 3, 4), (3, 4), mk(3, 4), None, 1e-3, name="two_dims_weight_only")
    yield _s(mk(5), (5,), None, None, 1e-5, name="1d_no_affine")
    yield _s(mk(3, 4, noncontiguous=True), (4,), mk(4), mk(4), 1e-5, name="noncontiguous")
    if not rg:
        yield _s(mk(0, 4), (4,), mk(4), mk(4), 1e-5, name="empty")


def _ln_errors():
    f = ember.ones
    yield ErrorInput(_s(f(2, 3), (4,), None, None, 1e-5), RuntimeError,
                     r"Given normalized_shape=\[4\], expected input with shape \[\*, 4\], but "
                     r"got input of size\[2, 3\]")
    yield ErrorInput(_s(f(2, 3), (3,), f(4), None, 1e-5), RuntimeError,
                     r"Expected weight to be of same shape as normalized_shape, but got weight "
                     r"of shape \[4\] and normalized_shape = \[3\]")
    yield ErrorInput(_s(f(2, 3, dtype=ember.int64), (3,), None, None, 1e-5), NotImplementedError,
                     "\"LayerNormKernelImpl\" not implemented for 'Long'")


# --- group norm -------------------------------------------------------------------------------

def _gn_ref(x, w, b, n, c, hxw, group, eps):
    xhat, mean, invstd = _normalized(x.reshape(n, group, -1), (2,), eps)
    out = xhat.reshape(n, c, -1)
    if w is not None:
        out = out * w[:, None]
    if b is not None:
        out = out + b[:, None]
    return out.reshape(x.shape).astype(x.dtype), mean.reshape(n, group), \
        invstd.reshape(n, group)


def _gn_samples(dtype, rg):
    def mk(*shape, **kw):
        return make(shape, dtype, rg, **kw)
    yield _s(mk(2, 4, 3), mk(4), mk(4), 2, 4, 3, 2, 1e-5, name="3d")
    yield _s(mk(2, 6), None, None, 2, 6, 1, 3, 1e-5, name="2d_no_affine")
    yield _s(mk(1, 4, 2, 2), mk(4), None, 1, 4, 4, 1, 1e-3, name="4d_one_group")
    yield _s(mk(2, 4, 3), mk(4), mk(4), 2, 4, 3, 4, 1e-5, name="group_per_channel")


def _gn_errors():
    f = ember.ones
    yield ErrorInput(_s(f(2, 6), None, None, 2, 6, 1, 4, 1e-5), RuntimeError,
                     r"Expected number of channels in input to be divisible by num_groups, but "
                     r"got input of shape \[2, 6\] and num_groups=4")
    yield ErrorInput(_s(f(2, 6, 3), f(5), None, 2, 6, 3, 3, 1e-5), RuntimeError,
                     r"Expected weight to be a vector of size equal to the number of channels "
                     r"in input, but got weight of shape \[5\] and input of shape \[2, 6, 3\]")


# --- RMS norm ---------------------------------------------------------------------------------

def _rms_ref(x, normalized_shape, w=None, eps=None):
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    axes = tuple(range(x.ndim - len(ns), x.ndim))
    if eps is None:                     # the computation dtype's: float32 for 16-bit inputs
        eps = np.finfo(np.float32 if x.dtype.itemsize == 2 else x.dtype).eps
    wide = x.astype(np.float64)
    out = wide / np.sqrt((wide * wide).mean(axes, keepdims=True) + eps)
    if w is not None:
        out = out * w
    return out.astype(x.dtype)


def _rms_samples(dtype, rg):
    def mk(*shape, **kw):
        return make(shape, dtype, rg, **kw)
    yield _s(mk(3, 4), (4,), mk(4), None, name="2d")
    yield _s(mk(2, 3, 4), (3, 4), mk(3, 4), 1e-3, name="two_dims")
    yield _s(mk(2, 5), (5,), None, 1e-5, name="no_weight")
    yield _s(mk(3, 4, noncontiguous=True), [4], mk(4), None, name="noncontiguous")
    if not rg:
        yield _s(mk(0, 4), (4,), mk(4), None, name="empty")


def _rms_errors():
    f = ember.ones
    yield ErrorInput(_s(f(2, 6), (5,)), RuntimeError,
                     r"Given normalized_shape=\[5\], expected input with shape \[\*5\], but got "
                     r"input of size\[2, 6\]")
    yield ErrorInput(_s(f(2, 3), (3,), f(4)), RuntimeError,
                     r"Expected weight to be of same shape as normalized_shape, but got weight "
                     r"of shape \[4\] and normalized_shape = \[3\]")
    yield ErrorInput(_s(f(2, 3, dtype=ember.int64), (3,)), NotImplementedError,
                     "\"rms_norm\" not implemented for 'Long'")


def _rms_output():
    def theirs(*args, **kwargs):            # torch._fused_rms_norm takes no defaults
        import torch
        return torch.rms_norm(*args, **kwargs)
    return {"op": lambda *args, **kwargs: _fused_rms_norm(*args, **kwargs)[0],
            "torch_op": theirs}


def _output(name):
    """The op's normalized output only: PyTorch's saved mean and invstd do not require grad
    (ember's do, so the derivative can use them for double backward); see
    tests/nn/test_normalization.py for the checks of all three outputs."""
    def ours(*args, **kwargs):
        return getattr(ember, name)(*args, **kwargs)[0]

    def theirs(*args, **kwargs):
        import torch
        return getattr(torch, name)(*args, **kwargs)[0]
    return {"op": ours, "torch_op": theirs}


def _first(ref):
    return lambda *args, **kwargs: ref(*args, **kwargs)[0]


# torch rounds some 16-bit intermediates (the normalized value before the affine step)
_LOW_PARITY = {ember.float16: (5e-3, 5e-3), ember.bfloat16: (4e-2, 4e-2)}

OPS = [
    # (a float16 input normalizes with its statistics rounded to float16, as PyTorch's)
    OpInfo("native_batch_norm", _first(_bn_ref), _bn_samples, dtypes=FLOATS + LOW, gradgrad=True,
           error_inputs=_bn_errors, tol={ember.float32: (1e-4, 1e-4),
                                         ember.float16: (5e-3, 5e-3)},
           parity_tol=_LOW_PARITY, **_output("native_batch_norm")),
    OpInfo("native_layer_norm", _first(_ln_ref), _ln_samples, dtypes=FLOATS + LOW, gradgrad=True,
           error_inputs=_ln_errors, tol={ember.float32: (1e-4, 1e-4)},
           parity_tol=_LOW_PARITY, **_output("native_layer_norm")),
    OpInfo("native_group_norm", _first(_gn_ref), _gn_samples, dtypes=FLOATS + LOW, gradgrad=True,
           error_inputs=_gn_errors, tol={ember.float32: (1e-4, 1e-4)},
           parity_tol=_LOW_PARITY, **_output("native_group_norm")),
    OpInfo("_fused_rms_norm", _rms_ref, _rms_samples, dtypes=FLOATS + LOW, gradgrad=True,
           error_inputs=_rms_errors, tol={ember.float32: (1e-5, 1e-5)}, **_rms_output()),
]


def _norm_input_grad_samples(dtype, requires_grad):
    full, chan = (2, 3, 4), (1, 3, 1)
    yield SampleInput(make(full, dtype, requires_grad),
                      (make(chan, dtype, requires_grad), make(full, dtype, requires_grad),
                       make(chan, dtype, requires_grad), make(chan, dtype, requires_grad)),
                      name="per_channel")
    yield SampleInput(make((4, 5), dtype, requires_grad, noncontiguous=True),
                      (make((4, 1), dtype, requires_grad), make((4, 5), dtype, requires_grad),
                       make((4, 1), dtype, requires_grad), make((), dtype, requires_grad)),
                      name="per_row")


OPS.append(OpInfo("_norm_input_grad", lambda g, a, x, b, c: g * a + x * b + c,
                  _norm_input_grad_samples, dtypes=FLOATS + LOW, gradgrad=True))


# --- batch norm's fused backward ----------------------------------------------------------------

def _bn_backward_ref(g, x, w, rm, rv, train, eps):
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    axes = (0,) + tuple(range(2, x.ndim))
    g64 = g.astype(np.float64)
    if train:
        xhat, _, invstd = _normalized(x, axes, eps)
    else:
        invstd = 1 / np.sqrt(rv.reshape(shape) + eps)
        xhat = (x - rm.reshape(shape)) * invstd
    scale = invstd if w is None else invstd * w.reshape(shape)
    gx = g64 - g64.mean(axes, keepdims=True) - xhat * (g64 * xhat).mean(axes, keepdims=True) \
        if train else g64
    return ((scale * gx).astype(x.dtype), (g64 * xhat).sum(axes).astype(x.dtype),
            g64.sum(axes).astype(x.dtype))


def _bn_backward(g, x, w, rm, rv, train, eps):
    """The op with the statistics native_batch_norm saves for ``x`` (read as constants)."""
    from ember.ops.norm_batch_backward import _native_batch_norm_backward
    with ember.no_grad():
        _, mean, invstd = ember.native_batch_norm(x, w, None, rm, rv, train, 0.0, eps)
    return _native_batch_norm_backward(g, x, w, rm, rv, mean, invstd, train, eps)


def _torch_bn_backward(g, x, w, rm, rv, train, eps):
    import torch
    with torch.no_grad():
        _, mean, invstd = torch.native_batch_norm(x, w, None, rm, rv, train, 0.0, eps)
    if w is None:       # (torch's double backward fails for a weight gradient without weight)
        w = torch.ones(x.shape[1], dtype=x.dtype)
    return torch.ops.aten.native_batch_norm_backward(g, x, w, rm, rv, mean, invstd, train, eps,
                                                     [True, True, True])


def _bn_backward_samples(dtype, rg):
    def mk(*shape, **kw):
        return make(shape, dtype, rg, **kw)
    rm, rv = make((2,), dtype, low=-1, high=1), make((2,), dtype, low=0.5, high=2)
    yield _s(mk(3, 2, 4), mk(3, 2, 4), mk(2), None, None, True, 1e-5, name="train")
    yield _s(mk(4, 2), mk(4, 2), None, None, None, True, 1e-3, name="train_no_weight")
    yield _s(mk(2, 2, 4, 5, noncontiguous=True), mk(2, 2, 4, 5), mk(2), None, None, True, 1e-5,
             name="train_planes")
    yield _s(mk(3, 2, 4), mk(3, 2, 4), mk(2), rm, rv, False, 1e-5, name="eval")
    yield _s(mk(3, 2, 4), mk(3, 2, 4), None, rm, rv, False, 1e-5, name="eval_no_weight")


OPS.append(OpInfo("_native_batch_norm_backward", _bn_backward_ref, _bn_backward_samples,
                  dtypes=FLOATS, gradgrad=True, op=_bn_backward, torch_op=_torch_bn_backward,
                  tol={ember.float32: (1e-4, 1e-4)}))
