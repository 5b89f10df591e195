"""Every registered op on the meta device: for each OpInfo sample, the results' shapes and
dtypes on meta tensors are those of the real results (ops/_meta.py)."""

import pytest

import ember

from tests.ops.opdb import OPDB
from tests.ops.opdb.core import replace_tensors, tensor_args

# ops whose results' shapes depend on the values, which meta tensors refuse (as in PyTorch)
VALUE_SHAPED = {"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive",
                "bincount", "repeat_interleave"}
SKIPPED = {
    # identity stand-ins are singular once reshaped to these ops' matrices
    "linalg.tensorinv", "linalg.tensorsolve",
    # numbers given as tensor inputs (contracted dims, bin counts), which meta ones cannot be
    "tensordot", "histogramdd"}


def _value_shaped(info, sample):
    if info.name in VALUE_SHAPED:
        return True
    if "rank deficient" in sample.name:         # lstsq's residuals exist at full rank only
        return None
    if info.name == "where":
        return not sample.args and not sample.kwargs
    return info.name == "nn.functional.one_hot" and \
        (sample.args or (sample.kwargs.get("num_classes", -1),))[0] == -1


def _dtype(info):
    return ember.float32 if ember.float32 in info.dtypes else info.dtypes[0]


def _outputs(result):
    if isinstance(result, ember.Tensor):
        return (result,)
    if isinstance(result, (tuple, list)):
        return tuple(r for r in result if isinstance(r, ember.Tensor))
    return ()


@pytest.mark.parametrize("info", [pytest.param(i, id=i.name) for i in OPDB
                                  if i.name not in SKIPPED])
def test_meta_results_have_the_real_shapes_and_dtypes(info):
    ember.manual_seed(0)
    for sample in info.sample_inputs(_dtype(info), False):
        try:
            real = _outputs(info.function()(sample.input, *sample.args, **sample.kwargs))
        except Exception:
            continue                        # not a valid call (error samples live elsewhere)
        tensors = tensor_args(sample)
        if any(t.dtype is ember.bool for t in tensors) and info.name == "_index":
            continue                        # a boolean mask: the shape depends on the values
        # 0-dim tensors other than the input may stand for numbers (a size, dims), which
        # meta tensors cannot give: those stay on the CPU, joining as scalars
        on_meta = replace_tensors(sample, [t.to("meta") if t.ndim or t is tensors[0] else t
                                           for t in tensors])
        value_shaped = _value_shaped(info, sample)
        if value_shaped is None:
            continue
        if value_shaped:
            with pytest.raises(NotImplementedError, match="Meta tensors|torch.nonzero"):
                info.function()(on_meta.input, *on_meta.args, **on_meta.kwargs)
            continue
        got = _outputs(info.function()(on_meta.input, *on_meta.args, **on_meta.kwargs))
        assert len(got) == len(real), f"{sample}: {len(got)} outputs, not {len(real)}"
        for g, r in zip(got, real):
            assert g.is_meta, f"{sample}: a result on {g.device}"
            assert (g.shape, g.dtype) == (r.shape, r.dtype), \
                f"{sample}: meta {g.shape} {g.dtype}, real {r.shape} {r.dtype}"
