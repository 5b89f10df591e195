"""vmap over every registered op, tested by construction from its OpInfo (tests/ops/opdb/).

For each op (float32, or its first dtype), the tensors of a few samples are stacked with two
seeded perturbations of themselves (B=3), and ``vmap(f)`` must equal ``f`` looped over the
batch and stacked (values, dtypes, shapes): all inputs batched at dim 0, batched at dim 1,
and (ops of several tensors) the first input unbatched. Ops that ``torch.func.vmap`` refuses
must raise here too, with PyTorch's message. The OpInfo database holds no random op (random
functions reach it through deterministic nodes such as ``_sampled``), so none is skipped.
"""

import re
import warnings

import numpy as np
import pytest

import ember
from ember.func import vmap
from ember.testing import assert_close
from ember.utils._pytree import tree_flatten
from tests.ops.opdb import OPDB
from tests.ops.opdb.core import replace_tensors, tensor_args

B = 3
SAMPLES_PER_OP = 3
MODES = ("dim0", "dim1", "none")

_DYNAMIC = "vmap: We do not support batching operators that can output dynamic shape"

# ops torch.func.vmap refuses for every sample (op -> PyTorch's message)
REFUSED = {
    "nonzero": _DYNAMIC + r"\. Attempted to vmap over aten::nonzero\.",
    "unique": _DYNAMIC + r"\. Attempted to vmap over aten::_unique2\.",
    "unique_consecutive": _DYNAMIC + r"\. Attempted to vmap over aten::unique_consecutive\.",
    "masked_select": r"vmap: Attempted to vmap over `mask` in torch\.masked_select",
    "histogramdd": r"(Batching rule not implemented for aten::histogramdd(\.int_bins|"
                   r"\.TensorList_bins)?\. We could not generate a fallback\.|vmap: It looks "
                   r"like you're calling \.item\(\) on a Tensor)",  # batched int bins
}
# ember's own ops refused as PyTorch refuses the ATen op they stand for (no torch function to
# compare in tests/parity): _rnn_layer called as a layer (a GRU or RNN cell's step loops:
# tests/func/test_rnn_vmap_round31.py)
REFUSED_INTERNAL = {
    "_rnn_layer": r"Batching rule not implemented for aten::(lstm|gru|rnn_tanh|rnn_relu)"
                  r"\.input\. We could not generate a fallback\.",
}
# torch.func.vmap also refuses unsafe_split_with_sizes and as_strided_scatter (it has no rule
# for them); ember runs them as the loop does (tests/ops/test_as_strided.py keeps that)

# samples torch.func.vmap refuses ((op, sample name) -> PyTorch's message); one_hot's
# unnamed sample has no num_classes
REFUSED_SAMPLES = {
    ("nn.functional.one_hot", ""): r"please provide an explicit positive num_classes",
    # a uint8 target: torch's decomposition gathers with it, and gather wants int32/int64
    **{(op, "noncontiguous_byte_ignore"): r"gather\(\): Expected dtype int32/int64 for index"
       for op in ("nn.functional.cross_entropy", "nn.functional.nll_loss")},
}

# Known gaps (op -> modes skipped, with why)
SKIPPED_MODES = {
    # the batched tensors sit in a list parameter (the indices, the bin edges) while the
    # input is not batched: the op call does not reach vmap (the public x[i] path does)
    "_index": {"none"},
    "histogramdd": {"none"},
}

# ops whose perturbed copies keep their integer inputs: factorization pivots (permuted, they
# are invalid: LAPACK reads past its buffers) and max_unpool's indices (permuted, they repeat
# within a plane, where the order of the writes is unspecified)
KEPT_INTS = {"linalg.lu_solve", "lu_unpack", "linalg.ldl_solve",
             *(f"nn.functional.max_unpool{k}d" for k in (1, 2, 3))}

# outputs torch.func.vmap shapes unlike a loop, and ember like torch (op -> outputs compared):
# solve_ex's info broadcasts with the batch-aligned operands ([B, 1, 2], not [B, 2])
COMPARED_OUTPUTS = {"linalg.solve_ex": 1}

# ops whose one answer covers the whole batch, unbatched (PyTorch's rule for the verdicts
# distributions validate with, expanded as vmap expands any unbatched output): compared with
# the op on the whole stacked batch, not with a loop
OVER_BATCH = {"_is_all_true", "_is_any_true"}

# samples checked besides each op's first SAMPLES_PER_OP (op -> sample names): edge cases
# whose batching rules were wrong
EXTRA_SAMPLES = {
    "nn.functional.linear": {"0d_bias"},
    "prelu": {"0d"},
    "tensordot": {"[2, 0]x[0, 3]_1"},
    "inner": {"[2, 0]x[3, 0]"},
    "histogramdd": {"int_tensor_bins"},
    "index_add": {"(0, 3)-d1"},
    "index_copy": {"(0, 3)-d1"},
    "index_reduce": {"(0, 3)-d1-prod-selfTrue"},
}


def _dtype(info):
    return ember.float32 if ember.float32 in info.dtypes else info.dtypes[0]


def _variant(t, k, keep_ints):
    """The k-th batch element made from ``t``: itself, or a seeded perturbation that keeps
    signs and zeros (floats) or the set of values (integers, so indices stay valid)."""
    if k == 0:
        return t.detach().clone()
    rng = np.random.default_rng(k)
    if t.dtype.is_floating_point or t.dtype.is_complex:
        noise = ember.tensor(rng.uniform(-1, 1, tuple(t.shape)), dtype=ember.float32)
        # float8 does not promote (as in PyTorch): perturbed in float32, then rounded back
        base = t.detach().float() if t.dtype in (ember.float8_e4m3fn, ember.float8_e5m2) \
            else t.detach()
        return (base * (1 + 0.05 * noise)).to(t.dtype)
    if keep_ints:
        return t.detach().clone()
    flat = t.detach().reshape(-1)
    return flat[ember.tensor(rng.permutation(flat.numel()))].reshape(t.shape)


def _batched_inputs(info, sample, mode):
    """The sample's tensors stacked into batches, and their in_dims, for ``mode``."""
    tensors = tensor_args(sample)
    batches = [ember.stack([_variant(t, k, info.name in KEPT_INTS) for k in range(B)])
               for t in tensors]
    dims = [0] * len(tensors)
    if mode == "dim1":
        dims = [1 if t.ndim else 0 for t in tensors]
        batches = [b.movedim(0, d) for b, d in zip(batches, dims)]
    elif mode == "none":
        dims[0], batches[0] = None, tensors[0]
    return batches, tuple(dims)


def _cases():
    for info in OPDB:
        ember.manual_seed(0)
        samples = [s for s in info.sample_inputs(_dtype(info), False) if tensor_args(s)]
        extra = EXTRA_SAMPLES.get(info.name, ())
        for sample in samples[:SAMPLES_PER_OP] + [s for s in samples if s.name in extra]:
            tensors = tensor_args(sample)
            for mode in MODES:
                if mode == "none" and len(tensors) < 2 or \
                        mode == "dim1" and not any(t.ndim for t in tensors) or \
                        mode in SKIPPED_MODES.get(info.name, ()):
                    continue
                yield info, sample, mode


def _params():
    by_op = {}
    for info, sample, mode in _cases():
        by_op.setdefault(info.name, (info, []))[1].append((sample, mode))
    return [pytest.param(info, cases, id=name) for name, (info, cases) in by_op.items()]


def _function(info, sample):
    fn = info.function()

    def f(*tensors):
        s = replace_tensors(sample, tensors)
        return fn(s.input, *s.args, **s.kwargs)
    return f


def _looped(f, batches, dims):
    """f on each batch element (a dense copy, as the example would be on its own), stacked."""
    outs = [tree_flatten(f(*[x if d is None else x.select(d, b).clone()
                             for x, d in zip(batches, dims)]))[0] for b in range(B)]
    return [ember.stack(col) if isinstance(col[0], ember.Tensor) else col[0]
            for col in zip(*outs)]


def _check_case(info, sample, mode):
    f = _function(info, sample)
    batches, dims = _batched_inputs(info, sample, mode)
    refused = REFUSED.get(info.name) or REFUSED_INTERNAL.get(info.name) or \
        REFUSED_SAMPLES.get((info.name, sample.name))
    if refused:
        with pytest.raises(RuntimeError, match=refused):
            vmap(f, in_dims=dims)(*batches)
        return
    got = tree_flatten(vmap(f, in_dims=dims)(*batches))[0]
    expected = ([f(*batches).expand(B)] if info.name in OVER_BATCH else
                _looped(f, batches, dims))
    assert len(got) == len(expected)
    for out, want in list(zip(got, expected))[:COMPARED_OUTPUTS.get(info.name)]:
        if not isinstance(want, ember.Tensor):
            assert out == want
            continue
        assert out.dtype is want.dtype
        assert tuple(out.shape) == tuple(want.shape)
        assert_close(out, want, rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("info,cases", _params())
def test_vmap_matches_loop(info, cases):
    for sample, mode in cases:
        ember.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # the loop fallback's performance warning
            try:
                _check_case(info, sample, mode)
            except AssertionError as e:
                raise AssertionError(f"{sample!r} [{mode}]: {e}") from None


def test_every_op_is_checked():
    """Every OpInfo with tensor inputs has at least one vmap case."""
    checked = {info.name for info, _, _ in _cases()}
    missing = {info.name for info in OPDB} - checked
    assert not missing, f"ops with no vmap case: {sorted(missing)}"


def test_refused_entries_name_ops():
    names = {info.name for info in OPDB}
    stale = (set(REFUSED) | set(REFUSED_INTERNAL) | {op for op, _ in REFUSED_SAMPLES} |
             set(SKIPPED_MODES) |
             set(EXTRA_SAMPLES)) - names
    assert not stale and all(re.compile(m) for m in REFUSED.values()), sorted(stale)


def test_extra_samples_exist():
    """Every sample named in EXTRA_SAMPLES is drawn (a renamed sample would drop silently)."""
    drawn = {(info.name, sample.name) for info, sample, _ in _cases()}
    missing = {(op, n) for op, names in EXTRA_SAMPLES.items() for n in names} - drawn
    assert not missing, sorted(missing)
