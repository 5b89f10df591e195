"""Random programs over torch.nn.utils, run in ember and torch side by side.

The generator (_nn_utils_fuzz_round36_gen.py) builds each program from seeded random choices:
gradient clipping (norm types, foreach, non-finite norms, mixed dtypes, single tensors, empty
lists and generators), parameter vectors, weight_norm and spectral_norm in both forms (with the
power-iteration vectors set alike, as the two RNGs differ), parametrize (several originals,
assignment, caching, state-dict round trips, transfer, removal), pruning (every method, repeated
pruning through containers, removal), packed sequences (packing, padding, hand-built packs,
recurrent layers over packs) and fusion, skip_init, memory formats and functional_call. The
traces of both runs (values, dtypes, shapes, state-dict keys, hook counts, errors, warnings,
gradients) agree.
"""

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

from tests.parity import _nn_utils_fuzz_round36_gen as gen  # noqa: E402

# seeds that found the bugs fixed in round 36 (see tests/test_nn_utils_round36.py)
_FOUND = [(16, "p_vec"), (142, "p_vec"), (159, "p_parametrize"), (229, "p_parametrize"),
          (165, "p_rnn"), (655, "p_rnn"), (18, "p_pack_direct"), (238, "p_pack_direct"),
          (458, "p_pack_direct"), (635, "p_prune2")]


def _check(seeds, prog=None):
    bad = []
    for seed in seeds:
        diff = gen.compare(ember, torch, seed, prog)
        if diff is not None:
            bad.append((seed, diff[0], repr(diff[1])[:300], repr(diff[2])[:300]))
    assert not bad, bad[:3]


@pytest.mark.parametrize("chunk", range(4))
def test_random_nn_utils_programs_agree(chunk):
    _check(range(chunk * 150, (chunk + 1) * 150))


@pytest.mark.parametrize("seed, prog", _FOUND)
def test_found_seeds_agree(seed, prog):
    _check([seed], prog)
