"""The meta device: tensors with shapes and dtypes but no memory."""

import copy
import warnings

import numpy as np
import pytest

import ember
from ember import nn


def meta(*shape, **kwargs):
    return ember.empty(shape, device="meta", **kwargs)


def test_factories_make_meta_tensors_without_memory():
    x = ember.zeros(1 << 20, 1 << 20, device="meta")      # 4 TiB if it were real
    assert x.is_meta and x.device == ember.device("meta") and x.device.type == "meta"
    assert x.shape == (1 << 20, 1 << 20) and x.dtype is ember.float32
    assert x.stride() == (1 << 20, 1) and x.data_ptr() == 0 and x.get_device() == -1
    assert ember.full((2, 2), 7, device="meta").dtype is ember.int64
    assert ember.arange(5, device="meta").shape == (5,)
    assert ember.arange(0, 1, 0.25, device="meta").shape == (4,)
    assert ember.eye(3, 4, device="meta").shape == (3, 4)
    assert ember.tensor([1.0, 2.0], device="meta").shape == (2,)
    assert ember.linspace(0, 1, 5, device="meta").shape == (5,)
    assert ember.randn(2, 3, device="meta").is_meta
    assert ember.zeros_like(x).is_meta and not ember.empty_like(meta(2), device="cpu").is_meta
    assert meta(2).new_zeros(4).is_meta and meta(2).new_tensor([1, 2]).is_meta
    assert not ember.ones(1).is_meta


def test_default_device_meta():
    with ember.device("meta"):
        x = ember.ones(3)
    assert x.is_meta and not ember.ones(3).is_meta


def test_repr_matches_pytorch():
    assert repr(meta(2, 3)) == "tensor(..., device='meta', size=(2, 3))"
    assert repr(meta(0, 3)) == "tensor(..., device='meta', size=(0, 3))"
    assert repr(meta()) == "tensor(..., device='meta', size=())"
    assert repr(meta(3, dtype=ember.int64)) == \
        "tensor(..., device='meta', size=(3,), dtype=ember.int64)"
    assert repr(meta(2, requires_grad=True) * 2) == \
        "tensor(..., device='meta', size=(2,), grad_fn=<MulBackward0>)"
    assert repr(nn.Parameter(meta(2))) == \
        "Parameter containing:\ntensor(..., device='meta', size=(2,), requires_grad=True)"


def test_values_cannot_be_read():
    x = meta(2, 3)
    with pytest.raises(RuntimeError, match="^a Tensor with 6 elements cannot be converted"):
        x.item()
    with pytest.raises(RuntimeError, match=r"^Tensor.item\(\) cannot be called on meta"):
        bool(meta())
    with pytest.raises(NotImplementedError, match="^Cannot copy out of meta tensor; no data!"):
        x.tolist()
    with pytest.raises(NotImplementedError, match="^Cannot copy out of meta tensor"):
        x.cpu()
    with pytest.raises(NotImplementedError, match="^Cannot copy out of meta tensor"):
        ember.ones(2, 3).copy_(x)
    with pytest.raises(TypeError, match="^can't convert meta device type tensor to numpy"):
        x.numpy()


def test_ops_give_shapes_and_dtypes():
    x, w = meta(2, 3), meta(3, 5)
    assert (x @ w).shape == (2, 5)
    assert x.sum(0).shape == (3,) and x.t().shape == (3, 2)
    assert x.max(1).indices.dtype is ember.int64
    assert ember.cat([x, x], 1).shape == (2, 6)
    assert (x > 0).dtype is ember.bool
    assert (meta(3, dtype=ember.int32) + 1.5).dtype is ember.float32
    assert (x + ember.tensor(1.0)).is_meta          # CPU 0-dim tensors join as scalars
    assert x[ember.tensor([0, 1, 1])].shape == (3, 3)
    assert x[0, ember.tensor([0, 1], device="meta")].shape == (2,)
    q = meta(2, 4, 8, 16)
    assert nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).shape == \
        (2, 4, 8, 16)
    img, kernel = meta(1, 3, 8, 8), meta(4, 3, 3, 3)
    assert nn.functional.conv2d(img, kernel).shape == (1, 4, 6, 6)
    assert ember.linalg.cholesky(meta(3, 3)).shape == (3, 3)   # identity stand-ins
    assert ember.multinomial(meta(4, 6), 2).shape == (4, 2)


def test_elementwise_ops_cost_nothing_at_any_size():
    huge = meta(1 << 30, 1 << 10)
    out = (huge * 2 + 1).exp().add_(huge)
    assert out.shape == huge.shape
    assert ember.where(huge > 0, huge, 0.0).shape == huge.shape


def test_shape_errors_are_checked():
    x = meta(2, 3)
    with pytest.raises(RuntimeError, match="The size of tensor a .3. must match the size of "
                                           "tensor b .5."):
        x + meta(5)
    with pytest.raises(RuntimeError, match=r"output with shape \[2, 3\] doesn't match the "
                                           r"broadcast shape \[4, 2, 3\]"):
        x.add_(meta(4, 2, 3))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        meta(3, dtype=ember.int64).add_(meta(3))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied"):
        ember.mm(meta(2, 3), meta(4, 5))


def test_device_mismatch_words_as_pytorch():
    x = meta(2, 3)
    with pytest.raises(RuntimeError, match="^Tensor on device cpu is not on the expected "
                                           "device meta!$"):
        x + ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="^Tensor on device meta is not on the expected "
                                           "device cpu!$"):
        ember.ones(2, 3) + x


def test_value_dependent_shapes_raise():
    x = meta(2, 3)
    for f in (ember.nonzero, ember.unique, lambda t: t[t > 0]):
        with pytest.raises(NotImplementedError, match="Meta tensors|torch.nonzero"):
            f(x)


def test_in_place_ops_write_nothing():
    x = meta(2, 3)
    version = x._version
    assert x.fill_(3) is x and x.zero_() is x and x.uniform_() is x and x.normal_() is x
    x[0] = 1.0
    x[x > 0] = 2.0
    assert x._version == version + 6
    assert ember.empty(3, 4, device="meta").t_().shape == (4, 3)
    out = meta(0)
    assert ember.add(x, x, out=out) is out and out.shape == (2, 3)


def test_backward_gives_meta_gradients():
    w = meta(3, 2, requires_grad=True)
    b = meta(2, requires_grad=True)
    loss = (meta(5, 3) @ w + b).relu().sum()
    loss.backward()
    assert w.grad.is_meta and w.grad.shape == (3, 2)
    assert b.grad.is_meta and b.grad.shape == (2,)


def test_module_on_meta_then_real_memory():
    with ember.device("meta"):
        big = nn.Sequential(*[nn.Linear(1 << 14, 1 << 14) for _ in range(4)])  # 4 GiB real
        nn.init.trunc_normal_(big[0].weight, std=0.02)
        nn.init.orthogonal_(ember.empty(64, 64))
    assert all(p.is_meta for p in big.parameters())
    small = nn.Linear(4, 3, device="meta")
    copied = copy.deepcopy(small).to_empty(device="cpu")
    assert copied.weight.device.type == "cpu" and small.weight.is_meta
    moved = small.to_empty(device="cpu")
    assert moved is small and small.weight.device.type == "cpu"
    assert isinstance(small.weight, nn.Parameter) and small.weight.shape == (3, 4)


def test_load_state_dict_onto_meta():
    source = nn.Linear(2, 3)
    model = nn.Linear(2, 3, device="meta")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.load_state_dict(source.state_dict())
    assert model.weight.is_meta
    assert any("copying from a non-meta parameter in the checkpoint to a meta parameter"
               in str(w.message) for w in caught)
    model.load_state_dict(source.state_dict(), assign=True)
    assert not model.weight.is_meta and model.weight.requires_grad
    np.testing.assert_array_equal(model.weight.detach().numpy(), source.weight.detach().numpy())


def test_meta_forward_and_backward_of_a_model():
    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.emb = nn.Embedding(100, d)
            self.ln = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
            self.lstm = nn.LSTM(d, d, batch_first=True)

        def forward(self, idx):
            x = self.emb(idx)
            h = self.ln(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return self.lstm(x)[0].mean()

    block = Block(16).to("meta")
    out = block(ember.zeros(2, 7, dtype=ember.int64, device="meta"))
    assert out.is_meta and out.shape == ()
    out.backward()
    assert all(p.grad is not None and p.grad.is_meta and p.grad.shape == p.shape
               for p in block.parameters())


def test_functional_call_over_a_meta_base_model():
    model = nn.Linear(4, 2)
    base = copy.deepcopy(model).to("meta")
    x = ember.randn(5, 4)
    out = ember.func.functional_call(base, dict(model.named_parameters()), (x,))
    np.testing.assert_allclose(out.detach().numpy(), model(x).detach().numpy())


def test_skip_init_builds_on_meta_then_allocates():
    layer = nn.utils.skip_init(nn.Linear, 3, 4)
    assert layer.weight.device.type == "cpu" and layer.weight.shape == (4, 3)
    with pytest.raises(RuntimeError, match="Module must support a 'device' arg"):
        nn.utils.skip_init(nn.ReLU)


def test_save_and_load_meta_tensors(tmp_path):
    path = tmp_path / "meta.pt"
    ember.save({"a": meta(2, 3, requires_grad=True), "p": nn.Parameter(meta(4)),
                "c": ember.ones(2)}, path)
    loaded = ember.load(path)
    assert loaded["a"].is_meta and loaded["a"].shape == (2, 3) and loaded["a"].requires_grad
    assert isinstance(loaded["p"], nn.Parameter) and loaded["p"].is_meta
    assert loaded["c"].tolist() == [1.0, 1.0]
    assert ember.load(path, map_location="meta")["c"].is_meta


LAYERS = {
    "conv": (lambda: nn.Conv2d(3, 4, 3, padding=1), (2, 3, 8, 8)),
    "conv transpose": (lambda: nn.ConvTranspose2d(3, 4, 3, stride=2), (2, 3, 8, 8)),
    "batch norm": (lambda: nn.BatchNorm2d(3), (2, 3, 8, 8)),
    "group norm": (lambda: nn.GroupNorm(1, 3), (2, 3, 8, 8)),
    "max pool": (lambda: nn.MaxPool2d(2), (2, 3, 8, 8)),
    "adaptive max pool": (lambda: nn.AdaptiveMaxPool2d(3), (2, 3, 8, 8)),
    "upsample": (lambda: nn.Upsample(scale_factor=2, mode="bilinear"), (2, 3, 8, 8)),
    "dropout": (lambda: nn.Dropout(0.5), (2, 5, 6)),
    "feature dropout": (lambda: nn.Dropout2d(0.5), (2, 3, 8, 8)),
    "alpha dropout": (lambda: nn.AlphaDropout(0.5), (2, 5, 6)),
    "gru": (lambda: nn.GRU(6, 4, batch_first=True), (2, 5, 6)),
    "bidirectional lstm": (lambda: nn.LSTM(6, 4, num_layers=2, bidirectional=True), (2, 5, 6)),
    "transformer": (lambda: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(6, 2, 12, batch_first=True), 2), (2, 5, 6)),
    "unfold": (lambda: nn.Unfold(2), (2, 3, 8, 8)),
    "bilinear": (lambda: nn.Bilinear(6, 6, 3), (2, 5, 6), (2, 5, 6)),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layers_on_meta_give_the_real_shapes(name):
    make, *shapes = LAYERS[name]
    layer = make()
    real = layer(*(ember.randn(s) for s in shapes))
    out = layer.to("meta")(*(meta(*s) for s in shapes))
    real, out = (real[0], out[0]) if isinstance(real, tuple) else (real, out)
    assert out.is_meta and out.shape == real.shape and out.dtype is real.dtype
    if out.requires_grad:               # (parameter-free layers record nothing)
        out.sum().backward()
        assert all(p.grad.shape == p.shape for p in layer.parameters())


def test_embedding_bag_on_meta():
    bag = nn.EmbeddingBag(10, 4).to("meta")
    out = bag(ember.zeros(2, 5, dtype=ember.int64, device="meta"))
    assert out.is_meta and out.shape == (2, 4)
