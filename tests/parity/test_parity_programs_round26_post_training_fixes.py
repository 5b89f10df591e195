"""What the post-training programs of round 26 (test_parity_programs_round26_post_training.py)
found, each pinned against PyTorch: a per-example write through a batched boolean mask under
vmap (DPO's ``labels[labels == -100] = 0`` inside ``vmap(grad(...))``) is refused, as
PyTorch refuses it, while an unbatched mask still batches; ``nonzero_static`` is an op of its
own (vmap's fallback runs it, ``out=``, meta tensors, PyTorch's argument errors); and vmap's
fallback names the ATen operator and warns on every call."""

import re

import numpy as np
import pytest

import ember
from tests.parity._compare import recorded

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _values(result):
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], str):
        return result                   # (error type, message)
    return str(result.dtype).split(".")[-1], result.detach().numpy().tolist()


def _answer(fn, lib):
    """fn(lib)'s dtype and values or its error, and its warnings (PyTorch's C++ source
    suffix dropped)."""
    got, warned = recorded(fn, lib)
    warned = [(c, re.sub(r" \(Triggered internally at .*\)$", "", m)) for c, m in warned]
    return _values(got), warned


def _setitem(lib, value):
    def f(x):
        y = x.clone()
        y[y > 1] = value(lib)
        return y
    return lib.func.vmap(f)(lib.arange(6.0).view(2, 3))


def _dpo_labels(lib):
    """get_batch_logps' masking inside vmap(grad): a per-example boolean write."""
    def loss(w, labels):
        labels = labels[1:].clone()
        loss_mask = labels != -100
        labels[labels == -100] = 0
        return (w[labels] * loss_mask).sum()
    labels = lib.tensor([[3, -100, 1, 2], [-100, 0, -100, 4]])
    return lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0))(lib.arange(5.0), labels)


BATCHED_MASK_WRITES = {
    "setitem_scalar": lambda lib: _setitem(lib, lambda lib: 0.0),
    "setitem_tensor": lambda lib: _setitem(lib, lambda lib: lib.tensor(0.0)),
    "index_put": lambda lib: lib.func.vmap(
        lambda x: x.index_put((x > 1,), lib.tensor(0.0)))(lib.arange(6.0).view(2, 3)),
    "index_put_accumulate_": lambda lib: lib.func.vmap(
        lambda x: x.clone().index_put_((x > 1,), lib.tensor(1.0), accumulate=True))(
        lib.arange(6.0).view(2, 3)),
    "into_unbatched": lambda lib: lib.func.vmap(
        lambda x: lib.zeros(3).index_put((x > 1,), lib.tensor(0.0)))(lib.arange(6.0).view(2, 3)),
    "mask_of_2d": lambda lib: lib.func.vmap(
        lambda x: x.index_put((x > 4,), lib.tensor(-1.0)))(lib.arange(12.0).view(2, 2, 3)),
    "after_an_index": lambda lib: lib.func.vmap(
        lambda x: x.clone().index_put_((lib.tensor([0, 1]), x[:2] > 1), lib.tensor(0.0)))(
        lib.arange(12.0).view(2, 2, 3)),
    "dpo_labels_in_grad": _dpo_labels,
}


@pytest.mark.parametrize("case", BATCHED_MASK_WRITES)
def test_vmap_refuses_writes_through_a_batched_boolean_mask(case):
    ours = _answer(BATCHED_MASK_WRITES[case], ember)
    assert ours == _answer(BATCHED_MASK_WRITES[case], torch)
    assert ours[0][0] == "RuntimeError"


UNBATCHED_MASK_WRITES = {
    "setitem": lambda lib: lib.func.vmap(
        lambda x: x.clone().__setitem__(lib.tensor([True, False, True]), 0.0) or x)(
        lib.arange(6.0).view(2, 3)),
    "index_put": lambda lib: lib.func.vmap(
        lambda x: x.index_put((lib.tensor([True, False, True]),), lib.tensor(-2.0)))(
        lib.arange(6.0).view(2, 3)),
    "index_put_batched_values": lambda lib: lib.func.vmap(
        lambda x, v: x.index_put((lib.tensor([False, True, True]),), v))(
        lib.arange(6.0).view(2, 3), lib.tensor([[7.0, 8.0], [9.0, 10.0]])),
    "where_form": lambda lib: lib.func.vmap(lambda y: lib.where(y != -100, y, 0))(
        lib.tensor([[3, -100, 1], [-100, 0, 4]])),
}


@pytest.mark.parametrize("case", UNBATCHED_MASK_WRITES)
def test_vmap_still_batches_an_unbatched_mask(case):
    assert _answer(UNBATCHED_MASK_WRITES[case], ember) == \
        _answer(UNBATCHED_MASK_WRITES[case], torch)


def _x(lib):
    return lib.tensor([[0, 1, 2], [3, 0, 0]])


NONZERO_STATIC = {
    "padded": lambda lib: lib.nonzero_static(_x(lib), size=5),
    "cut": lambda lib: _x(lib).nonzero_static(size=2),
    "fill_value": lambda lib: lib.nonzero_static(_x(lib), size=4, fill_value=-7),
    "zero_size": lambda lib: lib.nonzero_static(_x(lib), size=0),
    "0-dim": lambda lib: lib.nonzero_static(lib.tensor(3.0), size=2),
    "out": lambda lib: (lambda o: (lib.nonzero_static(_x(lib), size=4, out=o), o)[1])(
        lib.empty(0, dtype=lib.long)),
    "meta": lambda lib: lib.tensor(list(lib.nonzero_static(
        lib.empty(2, 3, device="meta"), size=4).shape)),
    "vmap": lambda lib: lib.func.vmap(lambda x: lib.nonzero_static(x > 1, size=3))(
        lib.arange(6.0).view(2, 3)),
    "vmap_fill": lambda lib: lib.func.vmap(
        lambda x: lib.nonzero_static(x, size=2, fill_value=9))(_x(lib)),
    "negative_size": lambda lib: lib.nonzero_static(_x(lib), size=-1),
    "float_size": lambda lib: lib.nonzero_static(_x(lib), size=2.0),
    "bool_size": lambda lib: lib.nonzero_static(_x(lib), size=True),
    "float_fill": lambda lib: lib.nonzero_static(_x(lib), size=2, fill_value=0.5),
}


@pytest.mark.parametrize("case", NONZERO_STATIC)
def test_nonzero_static_as_torch(case):
    assert _answer(NONZERO_STATIC[case], ember) == _answer(NONZERO_STATIC[case], torch)


FALLBACKS = {
    "argwhere": lambda lib: lib.func.vmap(lambda x: lib.argwhere(x > -1))(
        lib.arange(6.0).view(2, 3)),
    "histc": lambda lib: lib.func.vmap(lambda x: lib.histc(x, bins=3))(
        lib.arange(6.0).view(2, 3)),
    "bincount": lambda lib: lib.func.vmap(lambda x: lib.bincount(x, minlength=6))(
        lib.arange(6).view(2, 3)),
}


@pytest.mark.parametrize("case", FALLBACKS)
def test_vmap_fallback_names_the_aten_op_on_every_call(case):
    for lib in (ember, torch):
        answers = [_answer(FALLBACKS[case], lib) for _ in range(2)]
        assert answers[0] == answers[1]                 # warned again on the second call
        assert answers[0][1] == [("UserWarning", f"There is a performance drop because we "
                                  f"have not yet implemented the batching rule for aten::"
                                  f"{case}. Please file us an issue on GitHub so that we can "
                                  f"prioritize its implementation.")]
    assert np.array_equal(_answer(FALLBACKS[case], ember)[0][1],
                          _answer(FALLBACKS[case], torch)[0][1])
