"""What the combinatorial-optimisation and graph-generation programs of round 33
(test_parity_programs_round33_combo*.py: attention model, POMO, pointer network,
Gumbel-Sinkhorn, NeuroSAT, GraphRNN, GRAN, DiGress-lite) found, each pinned against PyTorch.
A sole bool mask written with one value into an expanded tensor (``visited[mask] = 1`` on a
mask expanded from a shared template) runs PyTorch's index_put_, which hands the write to
masked_fill_: both warn that writing into expanded memory is deprecated; ember warned once."""

import warnings

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _writes(lib):
    mask2d = [[True, False, False], [False, False, False]]
    return {
        "mask_scalar": lambda m: m.__setitem__(lib.tensor(mask2d), 1.0),
        "mask_0dim": lambda m: m.__setitem__(lib.tensor(mask2d), lib.tensor(1.0)),
        "mask_one_element": lambda m: m.__setitem__(lib.tensor(mask2d), lib.tensor([1.0])),
        "mask_1d_rows": lambda m: m.__setitem__(lib.tensor([True, False]), 1.0),
        "mask_after_slice": lambda m: m.__setitem__(
            (slice(None), lib.tensor([True, False, True])), 1.0),
        "mask_values": lambda m: m.__setitem__(
            lib.tensor([[True, False, True], [False] * 3]), lib.tensor([1.0, 2.0])),
        "uint8_mask": lambda m: m.__setitem__(lib.tensor(mask2d, dtype=lib.uint8), 1.0),
        "index_put_user": lambda m: m.index_put_((lib.tensor(mask2d),), lib.tensor(1.0)),
        "index_put_accumulate": lambda m: m.index_put_(
            (lib.tensor(mask2d),), lib.tensor(1.0), accumulate=True),
        "two_masks": lambda m: m.__setitem__(
            (lib.tensor([True, False]), lib.tensor([True, False, False])), 1.0),
        "mask_and_int": lambda m: m.__setitem__((lib.tensor([True, False]), lib.tensor([0])), 1.0),
        "int_index": lambda m: m.__setitem__((lib.tensor([0]), lib.tensor([1])), 2.0),
        "masked_fill_": lambda m: m.masked_fill_(lib.tensor(mask2d), 1.0),
    }


def _outcome(lib, name):
    m = lib.zeros(1, 3).expand(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            _writes(lib)[name](m)
            result = m.tolist()
        except RuntimeError as e:
            result = ("RuntimeError", str(e))
    return result, [str(w.message).split(" (Triggered internally")[0] for w in caught]


@pytest.mark.parametrize("name", sorted(_writes(ember)))
def test_mask_write_on_expanded_tensor_warns_like_torch(name):
    assert _outcome(ember, name) == _outcome(torch, name)
