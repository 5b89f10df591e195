"""Random calls of the ops that build tensors from pieces, run in ember and torch side by side
(round 37).

The generator (_shape_ops_fuzz_round37_gen.py) picks inputs (bool, uint8, int8..int64, float16,
bfloat16, float32, float64, complex; 0-d, empty and size-1 dims; contiguous, transposed,
stepped, expanded or conj-view layouts; NaN, inf and -0.0) and one call of cat / concat /
concatenate, stack / hstack / vstack / dstack / column_stack / row_stack, split /
tensor_split / hsplit / vsplit / dsplit / chunk / unbind, tile / repeat / repeat_interleave,
roll / flip / fliplr / flipud / rot90, tril / triu (and their in-place forms), diag /
diag_embed / diagflat / diagonal_scatter / select_scatter / slice_scatter, block_diag,
cartesian_prod, combinations, meshgrid, atleast_1d/2d/3d, broadcast_tensors / broadcast_to,
kron, cross / linalg.cross, trace, vander or tril_indices / triu_indices, with arguments in
and out of range, of wrong types, by keyword or position, and out= of a right or wrong dtype
and shape. The results (values, dtype, shape, strides, requires_grad, node names), the errors
and the warnings agree, and for inputs that need a gradient so do the gradients, the
double-backward gradients and (float64) the forward-mode tangents.
"""

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

from tests.parity._shape_ops_fuzz_round37_gen import run_program  # noqa: E402

# Programs where ember keeps its own behaviour: PyTorch's is a bug
_KNOWN = {
    # kron of a second operand whose dims cannot be viewed as one (transposed, 3-D): PyTorch's
    # kernel calls view where it needs reshape ("view size is not compatible ...")
    "kron's view of a non-contiguous operand": (125, 217),
    # vander's backward: PyTorch copies cumprod's result over cumprod's own saved input
    # ("one of the variables needed for gradient computation has been modified by an inplace
    # operation"); ember's graph differs there (CumprodBackward0, not CopySlices)
    "vander's backward": (679, 988, 3993, 5899, 9674),
    # broadcast_to with -1 for a new leading dim: PyTorch says "numel: integer multiplication
    # overflow"; ember gives expand's own message (as torch.Tensor.expand does)
    "broadcast_to's -1 in a new dim": (939, 2821),
    # block_diag's backward with a 1-D empty block: PyTorch's forward makes it a 1 x 0 block
    # (a zero row), its backward gives it no row, so every later block's gradient is read
    # one row too high
    "block_diag's gradient after an empty vector": (1929, 10189),
}
# Programs where ember differs and is left so for now (see the round-37 report)
_LEFT = {
    # meshgrid's error for a 2-D input prints the tensor as PyTorch's C++ operator<< does
    "meshgrid's printed tensor": (220, 292, 612),
    # Tensor.repeat_interleave's "invalid combination" lists self and output_size=None
    "repeat_interleave method's listing": (3214, 5445),
}
# Programs that found ember bugs (each fixed): select_scatter / slice_scatter recorded a
# clone and a copy (CopySlices), took no out=, accepted a zero step and complex or integral
# results needing grad; diagonal_scatter copied row-major and named no argument in its type
# errors; tril / triu checked the dims before the diagonal's type and kept the input's layout;
# a whole-dim piece of tensor_split was an alias; atleast_2d/3d reshaped a 1-D tensor;
# rot90 recorded flips and transposes; combinations an index; cross refused mixed dtypes
# before bool; stack checked sizes before the dim; flip dims' range before their repeats;
# cat(conj view) named the ConjView class; cat / chunk / tensor_split / cross checked the
# dim's type late; roll skipped its shifts check for empty inputs; repeat_interleave
# checked the dim before the repeats' sign (and a tensor repeats' dim type late); chunk
# checked its chunks before the input's dims, and of an empty dim is PyTorch's split_with_sizes
_FOUND = [908, 983, 1068, 1084, 1085, 1170, 1171, 1370, 1382, 1454, 1569, 1632, 1727, 1759,
          1843, 2057, 2454, 2580, 3089, 3677, 4250, 5172, 5370, 5910, 5949, 8135, 8430, 9009,
          9054, 9660, 9740, 10662, 11092, 11140, 11234, 11449, 13509, 18781, 19446, 19991]
_SKIP_SEEDS = {s for table in (_KNOWN, _LEFT) for seeds in table.values() for s in seeds}
_SEEDS = [s for s in range(900) if s not in _SKIP_SEEDS] + _FOUND


@pytest.mark.parametrize("chunk", range(3))
def test_random_shape_op_calls_agree(chunk):
    bad = [(s, run_program(s)) for s in _SEEDS[chunk::3]]
    bad = [b for b in bad if b[1] is not None]
    assert not bad, bad[:3]


def test_known_torch_bugs_still_differ():
    """The seeds kept out above still differ (a PyTorch fix would show here)."""
    agreed = [s for seeds in _KNOWN.values() for s in seeds if run_program(s) is None]
    assert not agreed, agreed
