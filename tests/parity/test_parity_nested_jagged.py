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
