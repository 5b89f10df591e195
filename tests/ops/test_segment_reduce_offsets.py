"""``segment_reduce`` with ``offsets`` that need not start at 0 nor end at the data's size:
segment i is ``data[offsets[i]:offsets[i + 1]]`` (values from a NumPy reference)."""

import numpy as np
import pytest

import ember


def _reference(data, offsets, reduce, initial=None):
    fns = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "max": np.max, "min": np.min}
    empty = {"sum": 0.0, "prod": 1.0, "mean": np.nan, "max": -np.inf, "min": np.inf}
    out = []
    for start, end in zip(offsets[:-1], offsets[1:]):
        seg = data[start:end]
        if initial is not None:
            seg = np.append(seg, initial) if reduce in ("max", "min") else seg
        if seg.size == 0:
            out.append(empty[reduce] if initial is None else initial)
            continue
        value = fns[reduce](seg)
        if initial is not None and reduce in ("sum", "mean"):
            value = value + initial / (1 if reduce == "sum" else len(data[start:end]))
        if initial is not None and reduce == "prod":
            value = value * initial
        out.append(value)
    return np.array(out, dtype=np.float32)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "max", "min"])
@pytest.mark.parametrize("offsets", [[1, 3, 6], [2, 2, 4, 5], [0, 7], [3]])
def test_offsets_select_their_own_slices(reduce, offsets):
    data = np.array([0.5, -1.0, 2.0, 3.0, -0.25, 1.5, 4.0], dtype=np.float32)
    got = ember.segment_reduce(ember.from_numpy(data), reduce, offsets=ember.tensor(offsets))
    np.testing.assert_allclose(got.numpy(), _reference(data, offsets, reduce), rtol=1e-6)


def test_offsets_rows_and_gradient():
    data = np.arange(12, dtype=np.float32).reshape(2, 6)
    x = ember.from_numpy(data).requires_grad_()
    offsets = ember.tensor([[0, 2, 6], [1, 3, 4]])
    out = ember.segment_reduce(x, "sum", offsets=offsets, axis=1)
    np.testing.assert_array_equal(out.detach().numpy(), [[1.0, 14.0], [15.0, 9.0]])
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 0, 0]])


def test_checks():
    x = ember.zeros(4)
    with pytest.raises(RuntimeError, match=r"^lengths contains negative value!$"):
        ember.segment_reduce(x, "sum", lengths=ember.tensor([5, -1]))
    with pytest.raises(RuntimeError, match=r"Expected segment_length >= 0 to be true"):
        ember.segment_reduce(x, "sum", offsets=ember.tensor([0, 3, 2, 4]))
    with pytest.raises(RuntimeError, match=r"must be defined\.$"):
        ember.segment_reduce(x, "sum")
    with pytest.raises(IndexError, match="Dimension out of range"):
        ember.segment_reduce(x, "sum", lengths=ember.tensor([4]), axis=1)
    with pytest.raises(NotImplementedError, match="_segment_reduce_lengths_cpu_kernel1"):
        ember.segment_reduce(x, "sum", lengths=ember.tensor([4.0]))
