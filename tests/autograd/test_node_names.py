"""Backward nodes carry PyTorch's names where PyTorch names them by the call's overload or
by the kernel it picks (printed as ``grad_fn=<...>`` in every model output)."""

import pytest

import ember
import ember.nn.functional as F

x = ember.rand(4, 5, requires_grad=True)
img = ember.rand(1, 2, 5, 5, requires_grad=True)
seq = ember.rand(1, 2, 5, requires_grad=True)
labels = ember.tensor([0, 1, 2, 3])

CASES = {
    "x.sum()": ("SumBackward0", lambda: x.sum()),
    "x.sum(1)": ("SumBackward1", lambda: x.sum(1)),
    "x.mean(0)": ("MeanBackward1", lambda: x.mean(0)),
    "1 - x": ("RsubBackward1", lambda: 1 - x),
    "x ** x": ("PowBackward1", lambda: x ** x),
    "2 ** x": ("PowBackward2", lambda: 2 ** x),
    "x.reshape(20)": ("ViewBackward0", lambda: x.reshape(20)),
    "x.t().reshape(20)": ("UnsafeViewBackward0", lambda: x.t().reshape(20)),
    "unflatten": ("ViewBackward0", lambda: x.t().unflatten(0, (5, 1))),
    "squeeze(0)": ("SqueezeBackward1", lambda: x.unsqueeze(0).squeeze(0)),
    "chunk": ("SplitBackward0", lambda: x.chunk(2, 1)[0]),
    "round(decimals=1)": ("RoundBackward1", lambda: x.round(decimals=1)),
    "outer": ("MulBackward0", lambda: ember.outer(x[0], x[1])),
    "adaptive avg to 1": ("MeanBackward1", lambda: F.adaptive_avg_pool2d(img, 1)),
    "adaptive avg to 2": ("AdaptiveAvgPool2DBackward0", lambda: F.adaptive_avg_pool2d(img, 2)),
    "nearest": ("UpsampleNearest2DBackward0", lambda: F.interpolate(img, scale_factor=2)),
    "bilinear aa": ("UpsampleBilinear2DAaBackward0",
                    lambda: F.interpolate(img, scale_factor=2, mode="bilinear", antialias=True)),
    "linear 1-D": ("UpsampleLinear1DBackward0",
                   lambda: F.interpolate(seq, scale_factor=2, mode="linear")),
    "constant pad": ("ConstantPadNdBackward0", lambda: F.pad(img, (1, 1))),
    "reflect pad": ("ReflectionPad2DBackward0", lambda: F.pad(img, (1, 1, 1, 1), mode="reflect")),
    "cross entropy": ("NllLossBackward0", lambda: F.cross_entropy(x, labels)),
    "smoothed": ("AddBackward0", lambda: F.cross_entropy(x, labels, label_smoothing=0.1)),
    "soft targets": ("DivBackward1", lambda: F.cross_entropy(x, x.detach().softmax(1))),
    "attention 4-D": ("ScaledDotProductFlashAttentionForCpuBackward0",
                      lambda: F.scaled_dot_product_attention(img, img, img)),
    "attention 3-D": ("UnsafeViewBackward0",
                      lambda: F.scaled_dot_product_attention(seq, seq, seq)),
    "mse": ("MseLossBackward0", lambda: F.mse_loss(x, x.detach() * 2)),
    "mse none": ("MseLossBackward0", lambda: F.mse_loss(x, x.detach(), reduction="none")),
    "smooth l1": ("SmoothL1LossBackward0", lambda: F.smooth_l1_loss(x, x.detach() * 2)),
    "huber": ("HuberLossBackward0", lambda: F.huber_loss(x, x.detach() * 2)),
    "logits": ("BinaryCrossEntropyWithLogitsBackward0",
               lambda: F.binary_cross_entropy_with_logits(x, x.detach())),
    "l1": ("MeanBackward0", lambda: F.l1_loss(x, x.detach() * 2)),
    "selu": ("EluBackward0", lambda: F.selu(x)),
    "prelu": ("PreluKernelBackward0", lambda: F.prelu(x, ember.ones(1) * 0.25)),
    "clamp tensor": ("ClampBackward0", lambda: x.clamp(min=ember.zeros(5))),
    "clamp number": ("ClampBackward1", lambda: x.clamp(0.2, 0.8)),
    "scatter value": ("ScatterBackward1", lambda: x.scatter(1, labels[:, None] % 5, 1.0)),
    "reciprocal": ("MulBackward0", lambda: 1 / x),
    "im2col": ("Im2ColBackward0", lambda: F.unfold(img, 2)),
    "conv_tbc": ("ConvTbcBackward0", lambda: ember.conv_tbc(seq.transpose(0, 2), x[:3, None],
                                                            ember.zeros(5), 1)),
    "ormqr": ("OrmqrBackward0", lambda: ember.ormqr(x[:, :3], x[0, :3], x[:, 3:])),
    "tensordot": ("ViewBackward0", lambda: ember.tensordot(x, x, ([1], [1]))),
    "avg_pool1d": ("SqueezeBackward1", lambda: F.avg_pool1d(seq, 2)),
    "grid_sample": ("GridSampler2DBackward0",
                    lambda: F.grid_sample(img, ember.zeros(1, 3, 3, 2), align_corners=False)),
    "pdist": ("PdistBackward0", lambda: F.pdist(x)),
    "pairwise": ("NormBackward1", lambda: F.pairwise_distance(x, x.detach())),
    "multi margin": ("MultiMarginLossBackward0", lambda: F.multi_margin_loss(x, labels)),
    "frobenius": ("LinalgVectorNormBackward0", lambda: ember.linalg.matrix_norm(x)),
    "square": ("PowBackward0", lambda: x.square()),
    "diag of a vector": ("DiagEmbedBackward0", lambda: x[0].diag()),
    "diag of a matrix": ("DiagonalBackward0_copy", lambda: x.diag()),
    "log1p": ("Log1PBackward0", lambda: x.log1p()),
    "split sizes": ("SplitWithSizesBackward0", lambda: x.split([2, 3], 1)[0]),
    "split size": ("SplitBackward0", lambda: x.split(2, 1)[0]),
    "tensor_split": ("SliceBackward0", lambda: x.tensor_split(2, 1)[1]),
    "diff": ("SubBackward0", lambda: x.diff()),
    "trapezoid": ("MulBackward1", lambda: ember.trapezoid(x)),
    "trapezoid x": ("DivBackward1", lambda: ember.trapezoid(x, ember.arange(5.))),
    "cumulative_trapezoid": ("CumsumBackward0", lambda: ember.cumulative_trapezoid(x)),
    "lerp number": ("LerpBackward0", lambda: ember.lerp(x, x * 2, 0.5)),
    "lerp tensor": ("LerpBackward1", lambda: ember.lerp(x, x * 2, x)),
    "fill_ number": ("FillBackward2", lambda: x.clone().fill_(1)),
    "fill_ tensor": ("FillBackward3", lambda: x.clone().fill_(ember.tensor(1.))),
    "zero_": ("ZeroBackward0", lambda: x.clone().zero_()),
    "rrelu": ("RreluWithNoiseBackward0", lambda: F.rrelu(x)),
    "rrelu_": ("RreluWithNoiseBackward1", lambda: F.rrelu_(x.clone())),
    "leaky_relu_": ("LeakyReluBackward1", lambda: F.leaky_relu_(x.clone())),
    "elu inplace": ("EluBackward1", lambda: F.elu(x.clone(), inplace=True)),
    "selu_": ("EluBackward1", lambda: F.selu_(x.clone())),
    "celu_": ("CeluBackward1", lambda: F.celu_(x.clone())),
    "threshold_": ("ThresholdBackward1", lambda: F.threshold_(x.clone(), 0.5, 0.)),
    "normal_": ("NormalBackward0", lambda: x.clone().normal_()),
    "uniform_": ("UniformBackward0", lambda: x.clone().uniform_()),
    "bernoulli_": ("BernoulliBackward2", lambda: x.clone().bernoulli_(0.5)),
    "random_": ("RandomBackward2", lambda: x.clone().random_()),
    "random_ to": ("RandomBackward1", lambda: x.clone().random_(5)),
    "view after in-place": ("AsStridedBackward0", lambda: _view_after_inplace()),
}


def _view_after_inplace():
    """A view of a tensor changed in place: PyTorch rebuilds its node by as_strided."""
    y = x * 1
    v = y[0]
    y.mul_(2)
    return v


@pytest.mark.parametrize("case", sorted(CASES))
def test_node_names_follow_pytorch(case):
    name, make = CASES[case]
    assert make().grad_fn.name() == name


def layer_outputs(t):
    """{case: (expected name, a result)} of recurrent layers, cells and einsum, built with
    library ``t`` (ember, or torch for the parity twin)."""
    t.manual_seed(0)
    nn = t.nn
    seq = t.rand(5, 3, 4)
    a, b = t.rand(3, 4, requires_grad=True), t.rand(4, 5, requires_grad=True)
    packed = nn.utils.rnn.pack_padded_sequence(seq, [5, 4, 2])
    return {
        "LSTM": ("MkldnnRnnLayerBackward0", lambda: nn.LSTM(4, 6)(seq)[0]),
        "LSTM float64": ("StackBackward0", lambda: nn.LSTM(4, 6).double()(seq.double())[0]),
        "LSTM projected": ("StackBackward0", lambda: nn.LSTM(4, 6, proj_size=2)(seq)[0]),
        "LSTM batch_first": ("TransposeBackward0", lambda: nn.LSTM(4, 6, batch_first=True)(seq)[0]),
        "GRU": ("StackBackward0", lambda: nn.GRU(4, 6, num_layers=2)(seq)[0]),
        "GRU batch_first": ("TransposeBackward1", lambda: nn.GRU(4, 6, batch_first=True)(seq)[0]),
        "RNN bidirectional": ("CatBackward0", lambda: nn.RNN(4, 6, bidirectional=True)(seq)[0]),
        "h_n": ("StackBackward0", lambda: nn.GRU(4, 6)(seq)[1]),
        "packed": ("CatBackward0", lambda: nn.LSTM(4, 6)(packed)[0].data),
        "unbatched": ("SqueezeBackward1", lambda: nn.GRU(4, 6)(seq[:, 0])[0]),
        "LSTMCell h": ("MulBackward0", lambda: nn.LSTMCell(4, 6)(seq[0])[0]),
        "GRUCell": ("AddBackward0", lambda: nn.GRUCell(4, 6)(seq[0])),
        "RNNCell relu": ("ReluBackward0", lambda: nn.RNNCell(4, 6, nonlinearity="relu")(seq[0])),
        "einsum matmul": ("ViewBackward0", lambda: t.einsum("ij,jk->ik", a, b)),
        "einsum transpose": ("PermuteBackward0", lambda: t.einsum("ij->ji", a)),
        "einsum sum": ("SumBackward1", lambda: t.einsum("ij->i", a)),
        "einsum diagonal": ("PermuteBackward0", lambda: t.einsum("ii->i", a[:, :3])),
        "einsum product": ("MulBackward0", lambda: t.einsum("ij,ij->ji", a, a)),
        "einsum outer": ("MulBackward0", lambda: t.einsum("i,j->ij", a[0], b[0])),
        "einsum chain": ("ViewBackward0", lambda: t.einsum("ij,jk,kl->il", a, b, b.t())),
    }


@pytest.mark.parametrize("case", sorted(layer_outputs(ember)))
def test_layer_and_einsum_node_names_follow_pytorch(case):
    name, make = layer_outputs(ember)[case]
    assert make().grad_fn.name() == name


@pytest.mark.parametrize("method, args", [("normal_", ()), ("uniform_", ()),
                                          ("bernoulli_", (0.5,)), ("exponential_", ()),
                                          ("random_", (5,)), ("cauchy_", ())])
def test_random_fills_pass_no_gradient_back(method, args):
    leaf = ember.ones(3, requires_grad=True)
    y = leaf * 2
    getattr(y, method)(*args)
    y.sum().backward()
    assert leaf.grad.tolist() == [0.0, 0.0, 0.0]


def test_random_fill_of_a_view_cuts_only_its_region():
    leaf = ember.ones(3, requires_grad=True)
    y = leaf * 2
    y[:2].normal_()
    y.sum().backward()
    assert y.grad_fn.name() == "torch::autograd::CopySlices"
    assert leaf.grad.tolist() == [0.0, 0.0, 2.0]
