"""The strides of elementwise results against PyTorch's TensorIterator: with channels-last,
channels-last-3d, permuted and sliced operands beside row-major ones, in either position,
broadcast (a (C, 1, 1) bias, size-1 dims), with numbers and 0-dim tensors, type promotion,
in-place and ``out=`` variants, and the gradients of a channels-last ResNet block."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

N, C, H, W, DEPTH = 2, 3, 4, 5, 2


def _made(lib, shape, layout, dtype="float32", seed=0):
    """A tensor of ``shape`` (the same values in either library) laid out as ``layout``:
    rm (row-major), cl / cl3d (channels-last), perm (dims reversed in memory), slice (every
    other element of the last dim: not dense)."""
    a = np.random.default_rng(seed).standard_normal(shape)
    a = (a * 3).round() if dtype.startswith("int") else a
    t = lib.from_numpy(a.astype(dtype))
    if layout == "cl":
        return t.contiguous(memory_format=lib.channels_last)
    if layout == "cl3d":
        return t.contiguous(memory_format=lib.channels_last_3d)
    if layout == "perm":
        dims = tuple(range(len(shape)))[::-1]
        return t.permute(*dims).contiguous().permute(*dims)
    if layout == "slice":
        wide = lib.from_numpy(np.repeat(a.astype(dtype), 2, axis=-1))
        return wide[..., ::2]
    return t.contiguous()


def _both(shape, layout, dtype="float32", seed=0):
    return _made(torch, shape, layout, dtype, seed), _made(ember, shape, layout, dtype, seed)


def _same(t, e, size_one_dims=True):
    """Same shape, values and strides; ``size_one_dims=False``: but for dims of size 1 (the
    layout formats each fits must still agree)."""
    assert tuple(e.shape) == tuple(t.shape)
    if size_one_dims:
        assert e.stride() == t.stride(), (e.stride(), t.stride())
    else:
        assert [s for s, n in zip(e.stride(), e.shape) if n != 1] == \
            [s for s, n in zip(t.stride(), t.shape) if n != 1], (e.stride(), t.stride())
        formats = {4: "channels_last", 5: "channels_last_3d"}
        for f in ["contiguous_format"] + ([formats[t.dim()]] if t.dim() in formats else []):
            assert e.is_contiguous(memory_format=getattr(ember, f)) == \
                t.is_contiguous(memory_format=getattr(torch, f))
    np.testing.assert_allclose(e.detach().double().numpy(), t.detach().double().numpy(),
                               rtol=1e-5, atol=1e-6)


def _tied(first):
    """Whether ember may lay dims of size 1 otherwise than PyTorch: after a row-major first
    operand it keeps NumPy's strides, which for two dims of equal stride (one of size 1)
    differ from TensorIterator's (``ops/_pointwise_layout.py``: the check costs no more)."""
    return first.is_contiguous() and 1 in first.shape


FULL4 = (N, C, H, W)
FULL5 = (N, C, DEPTH, H, W)
# (first operand's shape and layout, second's)
PAIRS = [
    (FULL4, "cl", FULL4, "rm"), (FULL4, "rm", FULL4, "cl"), (FULL4, "cl", FULL4, "cl"),
    (FULL4, "cl", FULL4, "perm"), (FULL4, "perm", FULL4, "cl"), (FULL4, "slice", FULL4, "cl"),
    (FULL4, "cl", FULL4, "slice"), (FULL4, "perm", FULL4, "rm"), (FULL4, "slice", FULL4, "rm"),
    (FULL4, "cl", (C, 1, 1), "rm"), ((C, 1, 1), "rm", FULL4, "cl"),
    (FULL4, "cl", (1, C, 1, 1), "rm"), ((1, C, 1, 1), "rm", FULL4, "cl"),
    (FULL4, "cl", (N, C, H, 1), "rm"), ((N, C, H, 1), "rm", FULL4, "cl"),
    (FULL4, "cl", (W,), "rm"), ((W,), "rm", FULL4, "cl"), (FULL4, "cl", (), "rm"),
    ((N, 1, H, W), "rm", FULL4, "cl"), (FULL4, "cl", (N, 1, H, W), "rm"),
    ((N, C, 1, 1), "cl", (N, C, 1, 1), "rm"), ((N, C, 1, W), "cl", (N, C, 1, W), "rm"),
    ((N, C, 1, W), "rm", (N, C, 1, W), "cl"), ((N, 1, H, W), "cl", (N, 1, H, W), "perm"),
    (FULL5, "cl3d", FULL5, "rm"), (FULL5, "rm", FULL5, "cl3d"),
    (FULL5, "cl3d", (C, 1, 1, 1), "rm"), ((C, 1, 1, 1), "rm", FULL5, "cl3d"),
    (FULL5, "cl3d", FULL5, "cl3d"), ((3, 4), "perm", (3, 4), "rm"), ((3, 4), "rm", (3, 4), "perm"),
    ((3, 4), "perm", (4,), "rm"), ((3, 1), "rm", (3, 4), "perm"),
]


def _id(pair):
    return f"{pair[1]}{list(pair[0])}-{pair[3]}{list(pair[2])}"


BINARY = {
    "add": lambda lib, a, b: a + b,
    "sub_alpha": lambda lib, a, b: lib.sub(a, b, alpha=2),
    "mul": lambda lib, a, b: a * b,
    "div": lambda lib, a, b: a / b,
    "maximum": lambda lib, a, b: lib.maximum(a, b),
    "pow": lambda lib, a, b: a.abs() ** b,
    "gt": lambda lib, a, b: a > b,
    "atan2": lambda lib, a, b: lib.atan2(a, b),
    "logical_and": lambda lib, a, b: lib.logical_and(a, b),
    "where": lambda lib, a, b: lib.where(a > 0, a, b),
    "where_cond_second": lambda lib, a, b: lib.where(b > 0, a, b),
    "clamp_min": lambda lib, a, b: lib.clamp(a, min=b),
    "lerp": lambda lib, a, b: lib.lerp(a, b, 0.25),
    "addcmul": lambda lib, a, b: lib.addcmul(a, b, b, value=0.5),
    "addcdiv": lambda lib, a, b: lib.addcdiv(a, b, b.abs() + 1, value=0.5),
    "isclose": lambda lib, a, b: lib.isclose(a, b.round()),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("pair", PAIRS, ids=_id)
def test_binary_result_strides(name, pair):
    ta, ea = _both(pair[0], pair[1], seed=1)
    tb, eb = _both(pair[2], pair[3], seed=2)
    _same(BINARY[name](torch, ta, tb), BINARY[name](ember, ea, eb), not _tied(ea))


@pytest.mark.parametrize("name", ["ldexp", "complex", "polar"])
@pytest.mark.parametrize("pair", [(FULL4, "cl", FULL4, "rm"), (FULL4, "cl", (C, 1, 1), "rm"),
                                  (FULL4, "cl", FULL4, "cl"), (FULL4, "perm", (W,), "rm")],
                         ids=_id)
def test_binary_kernels_of_their_own(name, pair):
    """ldexp (PyTorch: ``input * 2 ** other``, whose power is row-major), complex and polar
    (ember's forwards assemble row-major results) after a first operand not row-major."""
    ta, ea = _both(pair[0], pair[1], seed=1)
    tb, eb = _both(pair[2], pair[3], seed=2)

    def run(lib, a, b):
        if name == "ldexp":
            return lib.ldexp(a, b.round())
        out = lib.complex(a, b) if name == "complex" else lib.polar(a.abs(), b)
        return lib.view_as_real(out)[..., 1]
    _same(run(torch, ta, tb), run(ember, ea, eb))

UNARY = {
    "exp": lambda lib, a: a.exp(),
    "neg": lambda lib, a: -a,
    "abs": lambda lib, a: a.abs(),
    "sigmoid": lambda lib, a: a.sigmoid(),
    "relu": lambda lib, a: lib.relu(a),
    "gelu": lambda lib, a: lib.nn.functional.gelu(a),
    "silu": lambda lib, a: lib.nn.functional.silu(a),
    "leaky_relu": lambda lib, a: lib.nn.functional.leaky_relu(a, 0.1),
    "hardtanh": lambda lib, a: lib.nn.functional.hardtanh(a),
    "add_number": lambda lib, a: a + 1.5,
    "rsub_number": lambda lib, a: 1.5 - a,
    "gt_number": lambda lib, a: a > 0,
    "pow_number": lambda lib, a: a ** 2,
    "clamp_numbers": lambda lib, a: a.clamp(-0.5, 0.5),
    "where_number": lambda lib, a: lib.where(a > 0, a, 0.0),
    "add_0dim": lambda lib, a: a + lib.tensor(1.5),
    "isnan": lambda lib, a: lib.isnan(a),
    "logical_not": lambda lib, a: lib.logical_not(a),
    "to_double": lambda lib, a: a.double(),
}
SINGLES = [(FULL4, "cl"), (FULL4, "perm"), (FULL4, "slice"), (FULL5, "cl3d"),
           ((N, C, 1, W), "cl"), ((N, 1, H, W), "cl"), ((N, C, 1, 1), "cl"), ((3, 4), "perm")]


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("single", SINGLES, ids=lambda s: f"{s[1]}{list(s[0])}")
def test_unary_result_strides(name, single):
    t, e = _both(*single)
    _same(UNARY[name](torch, t), UNARY[name](ember, e))


def test_odd_stride_of_a_size_one_dim():
    """A channels-last-contiguous operand whose size-1 dim has an odd stride: a unary op
    takes the fast channels-last layout, a number operand (a 0-dim tensor) the general one.
    (Ember keeps one operand's layout as NumPy does: the size-1 dim's stride may differ.)"""
    rng = np.random.default_rng(3).standard_normal((2, 3, 5, 1)).astype("float32")

    def odd(lib):
        return lib.from_numpy(rng.copy()).contiguous(memory_format=lib.channels_last) \
            .as_strided((2, 3, 5, 1), (15, 1, 3, 7))
    for f in (lambda x: x + 1, lambda x: x > 0, lambda x: x + x):
        _same(f(odd(torch)), f(odd(ember)))
    for f in (lambda x: x.exp(), lambda x: x ** 2):
        _same(f(odd(torch)), f(odd(ember)), size_one_dims=False)



@pytest.mark.parametrize("layout", ["cl", "perm", "slice"])
@pytest.mark.parametrize("call", [lambda lib, x: 2 ** x, lambda lib, x: lib.pow(2.5, x),
                                  lambda lib, x: lib.float_power(2, x),
                                  lambda lib, x: lib.pow(x, 2), lambda lib, x: 2 * x],
                         ids=["rpow", "pow_number_base", "float_power_number_base",
                              "pow_number_exponent", "mul_number"])
def test_number_base_of_pow_is_row_major(call, layout):
    """pow(number, tensor) is a kernel of its own in PyTorch, its result row-major whatever the
    exponent's layout (a number exponent, or another op's number, keeps the tensor's)."""
    t, e = _both(FULL4, layout)
    _same(call(torch, t), call(ember, e))


@pytest.mark.parametrize("loss", ["mse_loss", "huber_loss", "smooth_l1_loss"])
@pytest.mark.parametrize("layouts", [("cl", "rm"), ("rm", "cl"), ("cl", "cl")], ids="-".join)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_pointwise_loss_kernels_lay_out_as_their_operands(loss, layouts, dtype):
    """reduction="none": the loss kernel is a TensorIterator over input and target; the
    gradients of the mean follow."""
    (t, e), (tt, et) = (_both(FULL4, layouts[0]), _both(FULL4, layouts[1], seed=1))
    t, tt = (x.to(getattr(torch, dtype)) for x in (t, tt))
    e, et = (x.to(getattr(ember, dtype)) for x in (e, et))
    t.requires_grad_(), e.requires_grad_()
    _same(getattr(torch.nn.functional, loss)(t, tt, reduction="none").float(),
          getattr(ember.nn.functional, loss)(e, et, reduction="none").float())
    getattr(torch.nn.functional, loss)(t, tt).backward()
    getattr(ember.nn.functional, loss)(e, et).backward()
    _same(t.grad.float(), e.grad.float())

@pytest.mark.parametrize("pair", [(FULL4, "cl", FULL4, "rm"), (FULL4, "rm", FULL4, "cl"),
                                  (FULL4, "cl", (C, 1, 1), "rm"), ((N, C, 1, W), "rm",
                                                                   (N, C, 1, W), "cl")],
                         ids=_id)
@pytest.mark.parametrize("dtypes", [("int32", "float32"), ("float32", "int64"),
                                    ("float16", "float64"), ("bool", "float32"),
                                    ("float16", "float16"), ("bfloat16", "bfloat16")],
                         ids=lambda d: "-".join(d))
def test_type_promoting_result_strides(pair, dtypes):
    ta, ea = _both(pair[0], pair[1], "float32", seed=1)
    tb, eb = _both(pair[2], pair[3], "float32", seed=2)
    ta, ea = ta.to(getattr(torch, dtypes[0])), ea.to(getattr(ember, dtypes[0]))
    tb, eb = tb.to(getattr(torch, dtypes[1])), eb.to(getattr(ember, dtypes[1]))
    _same(ta + tb, ea + eb, not _tied(ea))
    _same(ta * tb, ea * eb, not _tied(ea))


@pytest.mark.parametrize("pair", [(FULL4, "cl", FULL4, "rm"), (FULL4, "rm", FULL4, "cl"),
                                  (FULL4, "cl", (C, 1, 1), "rm")], ids=_id)
def test_in_place_keeps_the_written_tensors_strides(pair):
    ta, ea = _both(pair[0], pair[1], seed=1)
    tb, eb = _both(pair[2], pair[3], seed=2)
    _same(ta.add_(tb), ea.add_(eb))
    _same(ta.mul_(tb).relu_(), ea.mul_(eb).relu_())
    assert ea.stride() == ta.stride()


@pytest.mark.parametrize("out_layout", ["rm", "cl", "empty"])
@pytest.mark.parametrize("pair", [(FULL4, "cl", FULL4, "rm"), (FULL4, "rm", FULL4, "cl"),
                                  (FULL4, "cl", (C, 1, 1), "rm")], ids=_id)
def test_out_strides(pair, out_layout):
    """out= of the right shape keeps its strides; a resized one gets the result's."""
    ta, ea = _both(pair[0], pair[1], seed=1)
    tb, eb = _both(pair[2], pair[3], seed=2)
    if out_layout == "empty":
        to, eo = torch.empty(0), ember.empty(0)
    else:
        to, eo = _both(FULL4, out_layout, seed=3)
    torch.add(ta, tb, out=to)
    ember.add(ea, eb, out=eo)
    _same(to, eo)
    torch.mul(ta, tb, out=to)
    ember.mul(ea, eb, out=eo)
    _same(to, eo)


def _block(lib, seed=0):
    """A ResNet basic block's layers (conv-bn-relu-conv-bn, identity skip), in float64."""
    lib.manual_seed(seed)
    nn = lib.nn
    rng = np.random.default_rng(seed)
    layers = [nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4),
              nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)]
    for layer in layers:
        for p in layer.parameters():
            p.data = lib.from_numpy(rng.standard_normal(tuple(p.shape)) * 0.3)
    return [layer.double() for layer in layers]


@pytest.mark.parametrize("skip_layout", ["cl", "rm"])
def test_resnet_block_gradient_strides(skip_layout):
    """Gradients of a channels-last ResNet block: params and input, the skip operand laid
    out channels-last or row-major (a residual added to a channels-last conv output)."""
    got = {}
    for lib in (torch, ember):
        conv1, bn1, conv2, bn2 = _block(lib)
        for m in (conv1, conv2):
            m.to(memory_format=lib.channels_last)
        x = _made(lib, (2, 4, 6, 6), "cl", "float64", seed=4).requires_grad_()
        skip = _made(lib, (2, 4, 6, 6), skip_layout, "float64", seed=5).requires_grad_()
        h = lib.relu(bn1(conv1(x)))
        y = lib.relu(bn2(conv2(h)) + skip)
        z = lib.relu(skip + bn2(conv2(h)))
        h.retain_grad()
        y.retain_grad()
        ((y * y).sum() + z.sum()).backward()
        got[lib] = [y, z, h.grad, y.grad, x.grad, skip.grad, conv1.weight.grad,
                    conv2.weight.grad, bn1.weight.grad]
    for t, e in zip(got[torch], got[ember]):
        assert e.stride() == t.stride(), (e.shape, e.stride(), t.stride())
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-7,
                                   atol=1e-9)
