"""What the classic NLP programs of round 32 (test_parity_programs_round32_nlp*.py) found,
pinned against PyTorch.

- ``F.embedding_bag`` with a weight that is not 2-D raised an index-range RuntimeError (or the
  indices' dtype error) instead of PyTorch's ValueError "weight has to be a 2D Tensor, but got
  Tensor of dimension N", which PyTorch raises before it looks at the indices.
- ``F.embedding_bag(weight, input, ...)``, the old argument order (an int64 "weight" and a
  floating "input"), failed; PyTorch swaps them back with a UserWarning.
- ``AdaptiveLogSoftmaxWithLoss`` ran its head before its tails, so an input of the wrong width
  failed in the head's matmul, not in the first tail's as PyTorch's does (another message).
- ``torch.jit.fork``/``wait``/``freeze``/``optimize_for_inference``/``set_fusion_strategy``/
  ``interface`` (fairseq/AllenNLP utilities still call them) did not give PyTorch 2.13's
  DeprecationWarning ("... is deprecated. Please use `torch.compile` instead.").
- ``torch.jit.isinstance(x, list)`` (a container type without its element types) answered;
  PyTorch refuses it ("Attempted to use list without a contained type. ...").

Found and left alone: ``jit.freeze``/``optimize_for_inference`` of a plain module return it
(PyTorch refuses anything but a ScriptModule, which ember's ``jit.script`` never makes), and
(PyTorch 2.13 CPU bugs, ember gives the documented result)
embedding_bag's dense backward with scale_grad_by_freq divides by the wrong index's count
(pytorch/pytorch#190063); include_last_offset with offsets[-1] < len(input) lets the trailing
indices into the last bag in max mode and into the divisor in mean mode."""

import typing
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        # ember adds a line naming the failing module (NOTE [Module error context])
        return type(e).__name__, str(e).split("\n  in model")[0].replace("ember", "torch")
    return None


@pytest.mark.parametrize("weight_shape", [(3,), (2, 2, 2)])
@pytest.mark.parametrize("indices", [[0, 1], [[0, 1]], [0.5]])
def test_embedding_bag_weight_must_be_2d(weight_shape, indices):
    def call(lib):
        inp = lib.tensor(indices)
        offsets = lib.tensor([0]) if inp.ndim == 1 else None
        return _error(lambda: lib.nn.functional.embedding_bag(inp, lib.ones(weight_shape),
                                                              offsets))
    got = call(ember)
    assert got is not None and got == call(torch)
    assert got[0] == "ValueError"


def test_embedding_bag_old_argument_order_warns_and_swaps():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 3)).astype(np.float32)

    def call(lib):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = lib.nn.functional.embedding_bag(lib.from_numpy(w), lib.tensor([0, 4, 2, 2]),
                                                  lib.tensor([0, 1]), mode="sum")
        return out.numpy(), [(c.category.__name__, str(c.message)) for c in caught]

    (ours, ours_w), (theirs, theirs_w) = call(ember), call(torch)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    np.testing.assert_allclose(ours, np.stack([w[0], w[4] + w[2] + w[2]]), rtol=1e-6)
    assert ours_w == theirs_w and len(ours_w) == 1
    # the swap happens before per_sample_weights is checked against the (new) input
    bad = [_error(lambda lib=lib: lib.nn.functional.embedding_bag(
        lib.ones(3, 2), lib.tensor([0, 2]), lib.tensor([0]), per_sample_weights=lib.ones(5)))
        for lib in (ember, torch)]
    assert bad[0] == bad[1] and "Size([2])" in bad[0][1]


def test_adaptive_softmax_tails_run_before_head():
    def call(lib):
        lib.manual_seed(0)
        asm = lib.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [2])
        return _error(lambda: asm(lib.ones(3, 5), lib.tensor([1, 2, 3])))
    got = call(ember)
    assert got == call(torch)
    assert got == ("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (2x5 and 4x1)")


def test_adaptive_softmax_values_unchanged_by_reordering():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 6)).astype(np.float32)
    y = np.array([0, 3, 9, 12, 2, 15, 5])

    def call(lib):
        asm = lib.nn.AdaptiveLogSoftmaxWithLoss(6, 16, [3, 8], div_value=2.0)
        with lib.no_grad():
            for p in asm.parameters():
                p.copy_(lib.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
        inp = lib.from_numpy(x).requires_grad_()
        out = asm(inp, lib.from_numpy(y))
        out.loss.backward()
        return out.output.detach().numpy(), out.loss.item(), inp.grad.numpy()

    state = rng.bit_generator.state
    ours = call(ember)
    rng.bit_generator.state = state
    theirs = call(torch)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


class _Iface:
    pass


@pytest.mark.parametrize("call", [
    lambda lib: lib.jit.fork(lambda x: x + 1, lib.ones(1)),
    lambda lib: lib.jit.wait(lib.jit.fork(lambda x: x + 1, lib.ones(1))),
    lambda lib: lib.jit.set_fusion_strategy([("STATIC", 2)]),
    lambda lib: lib.jit.interface(_Iface),
    lambda lib: lib.jit.freeze(lib.jit.script(lib.nn.Linear(1, 1).eval())),
    lambda lib: lib.jit.optimize_for_inference(lib.jit.script(lib.nn.Linear(1, 1).eval())),
], ids=["fork", "wait", "set_fusion_strategy", "interface", "freeze", "optimize_for_inference"])
def test_jit_entry_points_warn_deprecated(call):
    def caught(lib):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            call(lib)
        return [(w.category.__name__, str(w.message)) for w in got
                if "jit" in str(w.message)]
    ours, theirs = caught(ember), caught(torch)
    assert ours == theirs and ours


@pytest.mark.parametrize("target", [list, dict, tuple, typing.List, typing.Dict, typing.Tuple,
                                    typing.Optional, set, int, typing.List[int],
                                    typing.Optional[int], dict[str, int]],
                         ids=str)
def test_jit_isinstance_needs_contained_types(target):
    def call(lib):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _error(lambda: lib.jit.isinstance([1], target)) or \
                lib.jit.isinstance([1], target)
    assert call(ember) == call(torch)
