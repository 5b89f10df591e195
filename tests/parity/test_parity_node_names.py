"""Backward node names against PyTorch's, for the ops ember names per overload or kernel."""

import pytest

import ember
from tests.autograd.test_node_names import CASES, layer_outputs

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _torch_case(expression):
    x = torch.rand(4, 5, requires_grad=True)
    img = torch.rand(1, 2, 5, 5, requires_grad=True)
    seq = torch.rand(1, 2, 5, requires_grad=True)
    labels = torch.tensor([0, 1, 2, 3])
    F = torch.nn.functional
    return {
        "x.sum()": lambda: x.sum(), "x.sum(1)": lambda: x.sum(1),
        "x.mean(0)": lambda: x.mean(0), "1 - x": lambda: 1 - x, "x ** x": lambda: x ** x,
        "2 ** x": lambda: 2 ** x, "x.reshape(20)": lambda: x.reshape(20),
        "x.t().reshape(20)": lambda: x.t().reshape(20),
        "unflatten": lambda: x.t().unflatten(0, (5, 1)),
        "squeeze(0)": lambda: x.unsqueeze(0).squeeze(0), "chunk": lambda: x.chunk(2, 1)[0],
        "round(decimals=1)": lambda: x.round(decimals=1),
        "outer": lambda: torch.outer(x[0], x[1]),
        "adaptive avg to 1": lambda: F.adaptive_avg_pool2d(img, 1),
        "adaptive avg to 2": lambda: F.adaptive_avg_pool2d(img, 2),
        "nearest": lambda: F.interpolate(img, scale_factor=2),
        "bilinear aa": lambda: F.interpolate(img, scale_factor=2, mode="bilinear",
                                             antialias=True),
        "linear 1-D": lambda: F.interpolate(seq, scale_factor=2, mode="linear"),
        "constant pad": lambda: F.pad(img, (1, 1)),
        "reflect pad": lambda: F.pad(img, (1, 1, 1, 1), mode="reflect"),
        "cross entropy": lambda: F.cross_entropy(x, labels),
        "smoothed": lambda: F.cross_entropy(x, labels, label_smoothing=0.1),
        "soft targets": lambda: F.cross_entropy(x, x.detach().softmax(1)),
        "attention 4-D": lambda: F.scaled_dot_product_attention(img, img, img),
        "attention 3-D": lambda: F.scaled_dot_product_attention(seq, seq, seq),
        "mse": lambda: F.mse_loss(x, x.detach() * 2),
        "mse none": lambda: F.mse_loss(x, x.detach(), reduction="none"),
        "smooth l1": lambda: F.smooth_l1_loss(x, x.detach() * 2),
        "huber": lambda: F.huber_loss(x, x.detach() * 2),
        "logits": lambda: F.binary_cross_entropy_with_logits(x, x.detach()),
        "l1": lambda: F.l1_loss(x, x.detach() * 2),
        "selu": lambda: F.selu(x),
        "prelu": lambda: F.prelu(x, torch.ones(1) * 0.25),
        "clamp tensor": lambda: x.clamp(min=torch.zeros(5)),
        "clamp number": lambda: x.clamp(0.2, 0.8),
        "scatter value": lambda: x.scatter(1, labels[:, None] % 5, 1.0),
        "reciprocal": lambda: 1 / x,
        "im2col": lambda: F.unfold(img, 2),
        "tensordot": lambda: torch.tensordot(x, x, ([1], [1])),
        "avg_pool1d": lambda: F.avg_pool1d(seq, 2),
        "grid_sample": lambda: F.grid_sample(img, torch.zeros(1, 3, 3, 2), align_corners=False),
        "pdist": lambda: F.pdist(x),
        "pairwise": lambda: F.pairwise_distance(x, x.detach()),
        "multi margin": lambda: F.multi_margin_loss(x, labels),
        "frobenius": lambda: torch.linalg.matrix_norm(x),
        "square": lambda: x.square(), "diag of a vector": lambda: x[0].diag(),
        "diag of a matrix": lambda: x.diag(), "log1p": lambda: x.log1p(),
        "split sizes": lambda: x.split([2, 3], 1)[0], "split size": lambda: x.split(2, 1)[0],
        "tensor_split": lambda: x.tensor_split(2, 1)[1], "diff": lambda: x.diff(),
        "trapezoid": lambda: torch.trapezoid(x),
        "trapezoid x": lambda: torch.trapezoid(x, torch.arange(5.)),
        "cumulative_trapezoid": lambda: torch.cumulative_trapezoid(x),
        "lerp number": lambda: torch.lerp(x, x * 2, 0.5),
        "lerp tensor": lambda: torch.lerp(x, x * 2, x),
        "fill_ number": lambda: x.clone().fill_(1),
        "fill_ tensor": lambda: x.clone().fill_(torch.tensor(1.)),
        "zero_": lambda: x.clone().zero_(), "rrelu": lambda: F.rrelu(x),
        "rrelu_": lambda: F.rrelu_(x.clone()), "leaky_relu_": lambda: F.leaky_relu_(x.clone()),
        "elu inplace": lambda: F.elu(x.clone(), inplace=True),
        "selu_": lambda: F.selu_(x.clone()), "celu_": lambda: F.celu_(x.clone()),
        "threshold_": lambda: F.threshold_(x.clone(), 0.5, 0.),
        "normal_": lambda: x.clone().normal_(), "uniform_": lambda: x.clone().uniform_(),
        "bernoulli_": lambda: x.clone().bernoulli_(0.5), "random_": lambda: x.clone().random_(),
        "random_ to": lambda: x.clone().random_(5),
        "view after in-place": lambda: _view_after_inplace(x),
        "conv_tbc": lambda: torch.conv_tbc(seq.transpose(0, 2).contiguous(), x[:3, None],
                                           torch.zeros(5), 1),
        "ormqr": lambda: torch.ormqr(x[:, :3], x[0, :3], x[:, 3:]),
    }[expression]()


def _view_after_inplace(x):
    y = x * 1
    v = y[0]
    y.mul_(2)
    return v


@pytest.mark.parametrize("case", sorted(CASES))
def test_node_names_match_pytorch(case):
    assert CASES[case][1]().grad_fn.name() == _torch_case(case).grad_fn.name()



@pytest.mark.parametrize("case", sorted(layer_outputs(ember)))
def test_layer_and_einsum_node_names_match_pytorch(case):
    assert layer_outputs(ember)[case][1]().grad_fn.name() == \
        layer_outputs(torch)[case][1]().grad_fn.name()
