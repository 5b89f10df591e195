"""``torch.nested`` in the jagged layout: building (from lists, values and offsets, lengths,
narrow, masked_select), parts, shapes, padding, elementwise ops, linear, sums and means,
softmax and attention give PyTorch's values, gradients and errors."""

import re
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _text(text):
    """A result as comparable text: torch's names as ember's, ragged sizes as ``j``."""
    text = text.replace("torch", "ember")
    text = re.sub(r"\bj\d+\b", "j", text)
    return re.sub(r" object at 0x[0-9a-f]+", "", text)


def _run(lib, calls):
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in calls:
            try:
                out.append(_text(repr(call(lib))))
            except Exception as e:  # noqa: BLE001  (the errors are compared)
                out.append(_text(f"{type(e).__name__}: {e}"))
    return out


def _nt(lib, **kwargs):
    return lib.nested.nested_tensor([lib.arange(6.0).reshape(2, 3),
                                     lib.arange(3.0).reshape(1, 3) + 10],
                                    layout=lib.jagged, **kwargs)


def _from_jagged(lib, **kwargs):
    return lib.nested.nested_tensor_from_jagged(lib.arange(12.0).reshape(4, 3), **kwargs)


_BUILD = [
    lambda lib: _nt(lib),
    lambda lib: _nt(lib).shape,
    lambda lib: (_nt(lib).values(), _nt(lib).offsets(), _nt(lib).lengths(), _nt(lib).numel()),
    lambda lib: (_nt(lib).size(1), _nt(lib).size(-1), _nt(lib).dim(), _nt(lib)._ragged_idx),
    lambda lib: _nt(lib, requires_grad=True),
    lambda lib: _nt(lib, dtype=lib.float64).values().dtype,
    lambda lib: _from_jagged(lib, offsets=lib.tensor([0, 1, 4])),
    lambda lib: _from_jagged(lib, lengths=lib.tensor([1, 3])).unbind(),
    lambda lib: _from_jagged(lib, offsets=lib.tensor([0, 1, 4]), lengths=lib.tensor([1, 2])),
    lambda lib: _from_jagged(lib, offsets=lib.tensor([0, 1, 4]),
                             lengths=lib.tensor([1, 2])).unbind(),
    lambda lib: _from_jagged(lib, offsets=lib.tensor([0, 1, 4]), jagged_dim=2).shape,
    lambda lib: _from_jagged(lib),
    lambda lib: _from_jagged(lib, offsets=[0, 4]),
    lambda lib: _from_jagged(lib, offsets=lib.tensor([0, 4]), jagged_dim=0),
    lambda lib: lib.nested.nested_tensor([lib.ones(2, 3), lib.ones(2, 4)],
                                         layout=lib.jagged).shape,
    lambda lib: lib.nested.nested_tensor([lib.ones(2, 3), lib.ones(3, 4)], layout=lib.jagged),
    lambda lib: lib.nested.nested_tensor([], layout=lib.jagged),
    lambda lib: lib.nested.nested_tensor([lib.tensor(1.0)], layout=lib.jagged),
    lambda lib: lib.nested.nested_tensor([[1, 2], [3]], layout=lib.jagged).values(),
    lambda lib: lib.nested.as_nested_tensor(lib.ones(2, 3, 4), layout=lib.jagged).offsets(),
    lambda lib: lib.nested.narrow(lib.arange(24.0).reshape(2, 4, 3), 1, lib.tensor([0, 1]),
                                  lib.tensor([2, 3]), layout=lib.jagged).unbind(),
    lambda lib: lib.nested.narrow(lib.arange(24.0).reshape(2, 4, 3), 1, 1, 2,
                                  layout=lib.jagged),
    lambda lib: lib.nested.narrow(lib.ones(2, 4), 0, 1, 2, layout=lib.jagged),
    lambda lib: lib.nested.masked_select(lib.arange(6.0).reshape(2, 3),
                                         lib.arange(6).reshape(2, 3) % 2 == 0).values(),
    lambda lib: _nt(lib).unbind(),
    lambda lib: _nt(lib).unbind(1),
    lambda lib: (_nt(lib)[1], _nt(lib)[0, 1]),
    lambda lib: _nt(lib).to_padded_tensor(-1.0),
    lambda lib: lib.nested.to_padded_tensor(_nt(lib), 0.0, output_size=(2, 3, 3)),
    lambda lib: _from_jagged(lib, offsets=lib.tensor([0, 1, 4]),
                             lengths=lib.tensor([1, 2])).to_padded_tensor(0.0),
]


def test_building_and_parts_match_torch():
    assert _run(ember, _BUILD) == _run(torch, _BUILD)


_OPS = [
    lambda lib: (lib.sin(_nt(lib)) * 2 + 1).values(),
    lambda lib: (_nt(lib) + lib.tensor([1.0, 2.0]).reshape(2, 1, 1)).values(),
    lambda lib: (_nt(lib) + lib.ones(1, 3)).values(),
    lambda lib: _nt(lib) + lib.ones(2, 3),
    lambda lib: (_nt(lib) + lib.arange(12.0).reshape(2, 2, 3)).values(),     # a padded batch
    lambda lib: _nt(lib) + lib.ones(2, 3, 3),
    lambda lib: _nt(lib) + lib.ones(2, 1, 3, 1),
    lambda lib: _nt(lib) + _nt(lib),
    lambda lib: (lambda nt: lib.where(nt > 3, nt, 0.0).values())(_nt(lib)),
    lambda lib: lib.nn.functional.relu(_nt(lib).add_(-5)).values(),
    lambda lib: lib.nn.functional.linear(_nt(lib), lib.ones(4, 3), lib.ones(4)),
    lambda lib: (_nt(lib) @ lib.arange(6.0).reshape(3, 2)).values(),
    lambda lib: lib.nn.functional.layer_norm(_nt(lib), (3,)).values(),
    lambda lib: _nt(lib).softmax(-1).values(),
    lambda lib: lib.softmax(_nt(lib), 1).values(),
    lambda lib: (_nt(lib).sum(), _nt(lib).mean(), _nt(lib).sum(1), _nt(lib).mean(dim=(0, 1))),
    lambda lib: (_nt(lib).sum(-1), _nt(lib).mean(-1).values(), _nt(lib).sum(1, keepdim=True)),
    lambda lib: _nt(lib).mean(dim=(0, 1), keepdim=True),
    lambda lib: _nt(lib).sum(0),
    lambda lib: _nt(lib).sum(dim=(1, 2)),
    lambda lib: _nt(lib).transpose(1, 2).shape,
    lambda lib: _nt(lib).transpose(0, 1),
    lambda lib: _nt(lib).transpose(1, 2).unbind(),
    lambda lib: _nt(lib).to(lib.float64).values().dtype,
    lambda lib: (lambda nt: lib.cat([nt, nt * 2], -1).values())(_nt(lib)),
    lambda lib: (lib.zeros_like(_nt(lib)).values(), lib.ones_like(_nt(lib)).offsets()),
    lambda lib: lib.nn.Sequential(lib.nn.LayerNorm(3), lib.nn.ReLU())(_nt(lib)).values().detach(),
]


def test_ops_match_torch():
    assert _run(ember, _OPS) == _run(torch, _OPS)


def _training_step(lib):
    rng = np.random.default_rng(0)
    parts = [lib.tensor(rng.standard_normal((n, 2, 4)).astype("float32")) for n in (3, 5)]
    weight = lib.tensor(rng.standard_normal((3, 4)).astype("float32"), requires_grad=True)
    nt = lib.nested.nested_tensor(parts, layout=lib.jagged, requires_grad=True)
    q = nt.transpose(1, 2)
    attended = lib.nn.functional.scaled_dot_product_attention(q, q, q).transpose(1, 2)
    y = lib.nn.functional.linear(attended, weight).softmax(-1)
    loss = (y.to_padded_tensor(0.0) * lib.arange(30.0).reshape(2, 5, 1, 3)).sum() \
        + (nt * nt).sum()
    loss.backward()
    return [y.values().detach().numpy(), nt.grad.values().numpy(), weight.grad.numpy()]


def test_gradients_through_attention_and_linear_match_torch():
    for got, want in zip(_training_step(ember), _training_step(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_gradients_reach_values_of_a_view():
    grads = []
    for lib in (ember, torch):
        v = lib.arange(12.0).reshape(4, 3).requires_grad_()
        nt = lib.nested.nested_tensor_from_jagged(v, lib.tensor([0, 1, 4]), max_seqlen=3)
        weights = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        (nt.exp().mean(-1).to_padded_tensor(0.0) * weights).sum().backward()
        grads.append(v.grad.numpy())
    np.testing.assert_allclose(*grads, rtol=1e-5)


@pytest.mark.parametrize("build", ["from_jagged", "from_jagged max_seqlen=5", "components",
                                   "doubled"])
def test_padding_length_and_keepdim_sums_match_torch(build):
    def made(T):
        values, offsets = T.arange(18.0).reshape(6, 3), T.tensor([0, 2, 6])
        if build == "components":
            return T.nested.nested_tensor([values[:2], values[2:]], layout=T.jagged)
        nt = T.nested.nested_tensor_from_jagged(
            values, offsets, max_seqlen=5 if "max_seqlen" in build else None)
        return nt * 2 if build == "doubled" else nt
    ours, theirs = made(ember), made(torch)
    np.testing.assert_array_equal(ours.to_padded_tensor(-1.0).numpy(),
                                  theirs.to_padded_tensor(-1.0).numpy())
    assert tuple(ours.sum(None, keepdim=True).shape) == tuple(theirs.sum(None, keepdim=True)
                                                               .shape)


_VIEWS_AND_EXTREMES = [
    lambda lib: _nt(lib)[..., 1:].values(),
    lambda lib: (_nt(lib)[..., 1:].is_contiguous(), _nt(lib)[..., :].is_contiguous()),
    lambda lib: _nt(lib)[..., -1].unbind(),
    lambda lib: _nt(lib)[..., None].shape,
    lambda lib: (_nt(lib)[lib.tensor(1)], _nt(lib)[1, 0, 2]),
    lambda lib: _nt(lib)[1, 5],
    lambda lib: _nt(lib)[:, :, 1:],
    lambda lib: _nt(lib)[1:],
    lambda lib: _nt(lib)[..., 1:2, 1],
    lambda lib: _nt(lib)[..., lib.tensor([0, 2])],
    lambda lib: _nt(lib)[...],
    lambda lib: _nt(lib).transpose(1, 2)[..., 1:],
    lambda lib: _nt(lib).transpose(1, 2).select(1, 0).values(),
    lambda lib: (_nt(lib).select(0, -1), _nt(lib).select(2, 1).values()),
    lambda lib: _nt(lib).select(1, 0),
    lambda lib: _from_jagged(lib, offsets=lib.tensor([0, 1, 4]),
                             lengths=lib.tensor([1, 2])).select(2, 1),
    lambda lib: _nt(lib).narrow(2, 1, 2).values(),
    lambda lib: (_nt(lib).narrow(1, 0, 1), _nt(lib).narrow(0, 0, 1)),
    lambda lib: _nt(lib).unsqueeze(1).unbind(),
    lambda lib: [t.values() for t in _nt(lib).chunk(3, -1)],
    lambda lib: [t.values() for t in _nt(lib).split([1, 2], -1)],
    lambda lib: _nt(lib).chunk(2, 0),
    lambda lib: _nt(lib).split(1, 1),
    lambda lib: (_nt(lib).amax(), _nt(lib).amax(1), _nt(lib).amax((0, 1), keepdim=True)),
    lambda lib: (_nt(lib).amin(-1).values(), _nt(lib).prod(-1).values()),
    lambda lib: _nt(lib).amax(0),
    lambda lib: (_nt(lib).max(), _nt(lib).max(1), _nt(lib).max(1, keepdim=True)),
    lambda lib: (lambda r: (r.values.values(), r.indices.values()))(_nt(lib).min(-1)),
    lambda lib: _nt(lib).max(0),
    lambda lib: (_nt(lib).argmax(), _nt(lib).argmax(1), _nt(lib).argmin(-1).values()),
    lambda lib: _nt(lib).transpose(1, 2).amax(1).values(),
    lambda lib: ((_nt(lib) > 2).any(-1).values(), (_nt(lib) > 2).all()),
    lambda lib: _from_jagged(lib, offsets=lib.tensor([0, 1, 4]),
                             lengths=lib.tensor([1, 2])).max(1),
    lambda lib: lib.maximum(_nt(lib), _nt(lib)),
    lambda lib: lib.bmm(_nt(lib), lib.arange(24.0).reshape(2, 3, 4)).values(),
    lambda lib: lib.matmul(_nt(lib), lib.ones(3)),
    lambda lib: (lib.bmm(_nt(lib), lib.ones(3, 4)), lib.bmm(_nt(lib), lib.ones(3, 3, 4))),
    lambda lib: (lambda n: (n @ n.transpose(-1, -2)).values())(lib.nested.nested_tensor(
        [lib.arange(12.0).reshape(3, 2, 2), lib.arange(8.0).reshape(2, 2, 2)],
        layout=lib.jagged)),
    lambda lib: _nt(lib) @ _nt(lib).transpose(1, 2),
    lambda lib: lib.cat([_nt(lib), _nt(lib)], 0),
    lambda lib: (lambda nt: lib.cat([nt, nt], 1))(_nt(lib)),
]


def test_views_indexing_and_extremes_match_torch():
    assert _run(ember, _VIEWS_AND_EXTREMES) == _run(torch, _VIEWS_AND_EXTREMES)


def _round_trips(lib):
    import copy
    import io
    import pickle
    nt = _nt(lib, requires_grad=True)
    buffer = io.BytesIO()
    lib.save({"a": nt, "b": nt.detach() * 2}, buffer)
    buffer.seek(0)
    loaded = lib.load(buffer)
    return [pickle.loads(pickle.dumps(nt)), pickle.loads(pickle.dumps(nt.transpose(1, 2))),
            copy.deepcopy(nt), copy.deepcopy(nt.detach() * 2), loaded["a"], loaded["b"].unbind(),
            loaded["a"].shape[1] is loaded["b"].shape[1], lib.nn.Dropout(1.0)(nt).values().detach(),
            lib.nn.functional.dropout(nt, 0.5).shape]


def test_pickle_save_deepcopy_and_dropout_match_torch():
    import copy
    calls = [_round_trips, lambda lib: copy.deepcopy(_nt(lib, requires_grad=True) * 2)]
    assert _run(ember, calls) == _run(torch, calls)


_SHAPE_CHANGES = [
    lambda lib: (_nt(lib).view(2, -1, 3, 1).values().shape, _nt(lib).reshape(2, -1, 1, 3).shape),
    lambda lib: _nt(lib)[..., 1:].reshape(2, -1, 2).is_contiguous(),
    lambda lib: _nt(lib).view(-1, 3),
    lambda lib: _nt(lib).reshape(2, -1, 4),
    lambda lib: (_nt(lib).squeeze(-1), _nt(lib).unsqueeze(-1).squeeze(-1).shape),
    lambda lib: _nt(lib).squeeze(1),
    lambda lib: _nt(lib).unsqueeze(1).squeeze(1),
    lambda lib: _nt(lib).squeeze(),
    lambda lib: (_nt(lib).permute(0, 2, 1).unbind(), _nt(lib).permute(0, 2, 1)._ragged_idx),
    lambda lib: _nt(lib).unsqueeze(-1).permute(0, 3, 1, 2).unbind(),
    lambda lib: _nt(lib).permute(1, 0, 2),
    lambda lib: _nt(lib).permute(0, 1),
    lambda lib: lib.nested.nested_tensor([lib.ones(2, 2, 3), lib.ones(1, 2, 3)],
                                         layout=lib.jagged).flatten(-2).unbind(),
    lambda lib: (_nt(lib).flatten(-2), _nt(lib).flatten()),
    lambda lib: (_nt(lib).expand(2, -1, 3), _nt(lib).expand_as(_nt(lib))),
    lambda lib: (lambda n: lib.stack([n, n * 2], 2).unbind())(_nt(lib)),
    lambda lib: (lambda n: lib.stack([n, n], 1))(_nt(lib)),
    lambda lib: lib.stack([_nt(lib), _nt(lib)], 2),
    lambda lib: (lambda n: n.masked_fill(n > 3, 0.0).values())(_nt(lib)),
    lambda lib: _nt(lib).masked_fill(_nt(lib) > 3, 0.0),
    lambda lib: lib.cat([_nt(lib), _nt(lib)], 2).values(),
    lambda lib: lib.cat([_nt(lib), _nt(lib).unsqueeze(-1)], 2),
    lambda lib: lib.nn.functional.embedding(
        lib.nested.nested_tensor([lib.tensor([1, 2, 3]), lib.tensor([4, 0])], layout=lib.jagged),
        lib.arange(20.0).reshape(5, 4)),
    lambda lib: lib.nn.functional.rms_norm(_nt(lib), (3,), lib.arange(3.0), eps=0.1).values(),
    lambda lib: lib.nn.functional.rms_norm(_nt(lib), (2, 3)),
    lambda lib: (lambda n: (n.fill_(2.0) is n, n.zero_().values()))(_nt(lib)),
    lambda lib: (lambda n: n.copy_(n * 2).values())(_nt(lib)),
    lambda lib: _nt(lib).copy_(lib.ones(2, 2, 3)),
    lambda lib: (lambda t: (t, t.values().is_contiguous(), t.transpose(1, 2)))(
        _nt(lib).transpose(1, 2).contiguous()),
    lambda lib: (lambda t: (t, t.values(), t.unbind()))(
        _from_jagged(lib, offsets=lib.tensor([0, 1, 4]), lengths=lib.tensor([1, 2])).contiguous()),
]


def test_shape_changes_match_torch():
    assert _run(ember, _SHAPE_CHANGES) == _run(torch, _SHAPE_CHANGES)


def _grads_through_views(lib):
    rng = np.random.default_rng(1)
    parts = [lib.tensor(rng.standard_normal((n, 4)).astype("float32")) for n in (3, 2)]
    nt = lib.nested.nested_tensor(parts, layout=lib.jagged, requires_grad=True)
    weight = lib.tensor(rng.standard_normal((2, 4, 3)).astype("float32"), requires_grad=True)
    y = lib.bmm(nt, weight).amax(-1) * nt.amin(-1)       # (PyTorch has no backward for
    z = lib.stack([y, y.unsqueeze(-1).view(2, -1, 1).squeeze(-1).exp()], 2)  # slices, select)
    (z.to_padded_tensor(0.0).pow(2).sum() + z.permute(0, 2, 1).values().sum()).backward()
    return [nt.grad.values().numpy(), weight.grad.numpy()]


def test_gradients_through_views_and_extremes_match_torch():
    for got, want in zip(_grads_through_views(ember), _grads_through_views(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("build", ["components", "requires_grad", "transposed", "holes"])
def test_checkpoints_load_in_the_other_library(build):
    import io

    def made(T):
        if build == "holes":
            return T.nested.nested_tensor_from_jagged(T.arange(12.0).reshape(4, 3),
                                                      T.tensor([0, 1, 4]),
                                                      lengths=T.tensor([1, 2]))
        nt = _nt(T, requires_grad=build == "requires_grad")
        return nt.transpose(1, 2) if build == "transposed" else nt
    for src, dst in ((ember, torch), (torch, ember)):
        buffer = io.BytesIO()
        original = made(src)
        src.save([original, original.detach() * 2], buffer)
        buffer.seek(0)
        loaded, doubled = dst.load(buffer)
        assert loaded.shape[1 if build != "transposed" else 2] is doubled.shape[
            1 if build != "transposed" else 2]
        assert (loaded.requires_grad, loaded._ragged_idx) == (original.requires_grad,
                                                             original._ragged_idx)
        for got, want in zip(loaded.unbind(), original.unbind()):
            np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        if build == "components":
            np.testing.assert_array_equal(loaded.to_padded_tensor(-1.0).numpy(),
                                          original.to_padded_tensor(-1.0).numpy())


def _token_classifier_step(lib):
    rng = np.random.default_rng(0)
    emb, lin, norm, head = (lib.nn.Embedding(10, 8), lib.nn.Linear(8, 8), lib.nn.LayerNorm(8),
                            lib.nn.Linear(8, 3))
    with lib.no_grad():
        for p in (emb.weight, lin.weight, lin.bias, head.weight, head.bias):
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype("float32")))
    ids = lib.nested.nested_tensor([lib.tensor([1, 2, 3, 4]), lib.tensor([5, 6]),
                                    lib.tensor([7, 8, 9])], layout=lib.jagged)
    x = emb(ids)
    h = lib.nn.Dropout(0.0)(lib.nn.functional.gelu(norm(lin(x)))) + x
    pooled = (h * h.amax(-1, keepdim=True).sigmoid()).to_padded_tensor(0.0).sum(1)
    loss = lib.nn.functional.cross_entropy(head(pooled), lib.tensor([0, 2, 1]))
    loss.backward()
    return [loss.detach().numpy(), emb.weight.grad.numpy(), lin.weight.grad.numpy(),
            norm.weight.grad.numpy()]


def test_token_classifier_on_jagged_ids_matches_torch():
    for got, want in zip(_token_classifier_step(ember), _token_classifier_step(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call", [
    lambda nt: nt.flatten(1, 1), lambda nt: nt.flatten(2, 2).shape[2],
    lambda nt: nt.transpose(1, 2).chunk(2, -1), lambda nt: nt.transpose(1, 2).split(2, -1)])
def test_flattening_the_ragged_dim_and_splitting_a_transposed_tensor_as_torch(call):
    outcomes = []
    for lib in (ember, torch):
        lib.manual_seed(0)
        nt = lib.nested.nested_tensor([lib.randn(2, 4), lib.randn(3, 4)], layout=lib.jagged)
        try:
            outcomes.append(call(nt))
        except (RuntimeError, ValueError) as e:
            outcomes.append((type(e).__name__, str(e)))
    assert outcomes[0] == outcomes[1]
