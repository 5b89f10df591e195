"""The forward path's shortcuts (recording, in-place snapshots, zeros_like, unsqueeze, cat,
stack, vector_norm) give what the general paths gave: values, layouts, errors, graphs."""

import math

import numpy as np
import pytest

import ember
from ember.ops._inplace import _reads_self
from ember.ops._registry import REGISTRY


# --- recording: the edges of leaves, non-leaves and views ------------------------------------

def test_edges_of_leaves_nonleaves_and_views():
    x = ember.ones(2, 3, requires_grad=True)
    h = x * 2
    y = h + x
    (fn_h, nr_h), (acc, nr_x) = y.grad_fn.next_functions
    assert fn_h is h.grad_fn and nr_h == 0 and nr_x == 0
    assert type(acc).__name__ == "AccumulateGrad" and acc.variable is x
    # the same accumulator for every op on the leaf, made once
    assert (x - 1).grad_fn.next_functions[0][0] is acc
    z = x[0] * 3                        # a view's edge goes through its view node
    assert z.grad_fn.next_functions[0][0] is not acc
    (y.sum() + z.sum()).backward()
    assert x.grad.tolist() == [[6.0, 6.0, 6.0], [3.0, 3.0, 3.0]]


def test_an_input_without_grad_has_no_edge():
    x = ember.ones(3, requires_grad=True)
    y = x + ember.ones(3)
    assert y.grad_fn.next_functions[1] == (None, 0)
    assert y.grad_fn.next_functions[0][0].variable is x


# --- in-place ops: self is copied only when a gradient reads it -------------------------------

def test_inplace_snapshots_copy_self_only_where_read():
    assert _reads_self(REGISTRY["mul"]) is True
    assert _reads_self(REGISTRY["index_add"]) is False
    assert _reads_self(REGISTRY["masked_fill"]) is False
    assert _reads_self(REGISTRY["add"]) is False        # (saves no inputs at all)


def test_index_add_inplace_gradients_and_saved_values():
    src = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    x = ember.zeros(3, 2, requires_grad=True)
    y = x * 1
    y.index_add_(0, ember.tensor([2, 0]), src, alpha=2)
    assert y.tolist() == [[6.0, 8.0], [0.0, 0.0], [2.0, 4.0]]
    assert y.grad_fn.name() == "IndexAddBackward0" and y._version == 1
    assert y.grad_fn._saved_source is src
    y.mul_(ember.tensor([[1.0, 10.0]]))         # self's old values are read by no gradient
    y.sum().backward()
    assert src.grad.tolist() == [[2.0, 20.0], [2.0, 20.0]]
    assert x.grad.tolist() == [[1.0, 10.0]] * 3


def test_mul_inplace_still_saves_selfs_values_from_before_the_write():
    w = ember.tensor([2.0, 3.0], requires_grad=True)
    y = ember.tensor([5.0, 7.0], requires_grad=True) * 1
    y.mul_(w)
    y.add_(100)                             # after the write: w's gradient reads y's old values
    y.sum().backward()
    assert w.grad.tolist() == [5.0, 7.0]


def test_masked_fill_inplace_on_a_leafs_clone():
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.clone()
    y.masked_fill_(ember.tensor([True, False, True]), 0.5)
    assert y.tolist() == [0.5, 2.0, 0.5]
    (y * y).sum().backward()
    assert x.grad.tolist() == [0.0, 4.0, 0.0]


def test_inplace_on_an_operand_sharing_self_dates_it_before_the_write():
    y = ember.tensor([2.0, 3.0], requires_grad=True) * 1
    y.mul_(y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


# --- zeros_like ---------------------------------------------------------------------------

def test_zeros_like_fast_path_matches_the_general_one():
    x = ember.ones(2, 3, requires_grad=True)
    z = ember.zeros_like(x)
    assert z.tolist() == [[0.0] * 3] * 2 and z.dtype == ember.float32
    assert not z.requires_grad and z.grad_fn is None and z._base is None
    assert z.stride() == (3, 1) and z.device.type == "cpu"
    assert ember.zeros_like(ember.ones(2, dtype=ember.bfloat16)).dtype == ember.bfloat16
    assert ember.zeros_like(ember.ones(2, dtype=ember.int16)).dtype == ember.int16
    cl = ember.ones(2, 3, 4, 5).to(memory_format=ember.channels_last)
    assert ember.zeros_like(cl).stride() == (60, 1, 15, 3)     # preserve_format: the slow path
    assert ember.zeros_like(x, requires_grad=True).requires_grad
    assert ember.zeros_like(ember.ones(0, 2)).shape == (0, 2)
    with ember.inference_mode():
        assert ember.zeros_like(x).is_inference()
    assert not ember.zeros_like(x).is_inference()


# --- unsqueeze ----------------------------------------------------------------------------

def test_unsqueeze_views_with_pytorchs_strides():
    a = ember.ones(4, 6)[:, ::2]
    assert [a.unsqueeze(d).stride() for d in (0, 1, 2, -1)] == \
        [(24, 6, 2), (6, 6, 2), (6, 2, 1), (6, 2, 1)]
    x = ember.arange(6.0, requires_grad=True)
    u = x.reshape(2, 3).unsqueeze(1)
    assert u.shape == (2, 1, 3) and u._base is not None and u._is_view()
    assert u.grad_fn.name() == "UnsqueezeBackward0"
    (u * ember.arange(6.0).reshape(2, 1, 3)).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    with pytest.raises(IndexError, match=r"range of \[-3, 2\], but got 3"):
        ember.ones(2, 2).unsqueeze(3)


# --- cat and stack ------------------------------------------------------------------------

def test_cat_checks_in_pytorchs_order_and_words():
    with pytest.raises(RuntimeError, match=r"zero-dimensional tensor \(at position 1\)"):
        ember.cat([ember.ones(2), ember.tensor(1.0)])
    with pytest.raises(RuntimeError, match="Expected size 3 but got size 4 for tensor number 1"):
        ember.cat([ember.ones(2, 3), ember.ones(2, 4)], 0)
    with pytest.raises(RuntimeError, match="same number of dimensions: got 2 and 1"):
        ember.cat([ember.ones(2, 3), ember.ones(2)], 0)
    with pytest.raises(TypeError, match="must be tuple of Tensors, not Tensor"):
        REGISTRY["cat"](ember.ones(2), 0)
    out = ember.cat([ember.ones(2, 3), ember.ones(0), ember.zeros(1, 3)])   # 1-D empty skipped
    assert out.shape == (3, 3) and out.sum().item() == 6.0
    assert ember.cat([ember.ones(0), ember.ones(0)]).shape == (0,)


def test_cat_and_stack_gradients_and_layouts():
    a = ember.ones(2, 3, requires_grad=True)
    b = ember.full((2, 2), 2.0, requires_grad=True)
    c = ember.cat((a, b), dim=-1)
    assert c.shape == (2, 5) and c.grad_fn.name() == "CatBackward0"
    (c * ember.arange(5.0)).sum().backward()
    assert a.grad.tolist() == [[0.0, 1.0, 2.0]] * 2 and b.grad.tolist() == [[3.0, 4.0]] * 2
    t = ember.ones(3, 4).t()
    s = ember.stack([t, t * 2], 1)
    assert s.shape == (4, 2, 3) and s.stride() == (6, 3, 1)
    assert ember.stack([t, t], -1).shape == (4, 3, 2)
    assert s[:, 1].tolist() == [[2.0] * 3] * 4
    xs = [ember.full((2,), float(i), requires_grad=True) for i in range(3)]
    st = ember.stack(xs)
    assert st.tolist() == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
    (st * ember.tensor([[1.0], [2.0], [3.0]])).sum().backward()
    assert [x.grad.tolist() for x in xs] == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]
    assert ember.stack([ember.tensor(1.0), ember.tensor(2.0)]).tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match=r"got \[2, 3\] at entry 0 and \[3, 2\] at entry 1"):
        ember.stack([ember.ones(2, 3), ember.ones(3, 2)])


# --- vector_norm --------------------------------------------------------------------------

def test_vector_norm_orders():
    v = ember.tensor([3.0, -4.0, 0.0])
    got = [ember.linalg.vector_norm(v, o).item() for o in (0, 1, 2, math.inf, -math.inf, 3)]
    assert got[:5] == [2.0, 7.0, 5.0, 4.0, 0.0]
    assert got[5] == pytest.approx(4.497941493988037)
    m = ember.tensor([[3.0, 4.0], [6.0, 8.0]], requires_grad=True)
    n = ember.linalg.vector_norm(m, dim=1, keepdim=True)
    assert n.tolist() == [[5.0], [10.0]] and n.grad_fn.name() == "LinalgVectorNormBackward0"
    n.sum().backward()
    assert np.allclose(m.grad.numpy(), [[0.6, 0.8], [0.6, 0.8]])
    half = ember.linalg.vector_norm(ember.tensor([3.0, 4.0], dtype=ember.float16))
    assert half.dtype == ember.float16 and half.item() == 5.0


# --- review (RC2): every op whose in-place calls skip self's copy ------------------------------

_SKIPPING = sorted(name for name, o in REGISTRY.items()
                   if o.inplace and o.saves_inputs and not _reads_self(o))


def test_the_ops_skipping_selfs_copy_are_the_declared_ones():
    # each reads no value of self in its gradients (reads_inputs' first entry is ())
    assert _SKIPPING == ["addbmm", "addcdiv", "addcmul", "addmm", "addmv", "addr", "baddbmm",
                         "index_add", "index_copy", "index_fill", "ldexp", "masked_fill",
                         "masked_scatter", "put", "scatter", "scatter_add"]


@pytest.mark.parametrize("name", _SKIPPING)
def test_inplace_without_selfs_copy_has_the_out_of_place_gradients(name):
    """The in-place call, its self overwritten again afterwards, gives the gradients of the
    out-of-place call: no gradient read self's old values (which were not copied)."""
    from tests.ops.opdb import OPDB
    from tests.ops.opdb.core import replace_tensors, tensor_args
    info = next(i for i in OPDB if i.name == name)
    method = getattr(ember.Tensor, (REGISTRY[name].method_name or REGISTRY[name].short_name)
                     + "_")
    ember.manual_seed(0)
    checked = 0
    for sample in info.sample_inputs(ember.float64, False):
        if not isinstance(sample.input, ember.Tensor) or sample.input.dtype != ember.float64 \
                or sample.kwargs.get("reduce") is not None:     # (scatter's: no derivative)
            continue

        def leaves():
            return [t.detach().clone().requires_grad_(t.dtype == ember.float64)
                    for t in tensor_args(sample)]
        ref = leaves()
        s = replace_tensors(sample, ref)
        expected = info.function()(s.input * 1, *s.args, **s.kwargs)
        if expected.shape != sample.input.shape:
            continue
        weight = ember.rand(expected.shape, dtype=ember.float64) + 0.5
        (expected * weight).sum().backward()
        got = leaves()
        s = replace_tensors(sample, got)
        y = s.input * 1
        method(y, *s.args, **s.kwargs)
        if REGISTRY[name].needs_output:     # (ldexp's node saves the result, self)
            y = y * weight
        else:
            y.mul_(weight)              # self written again: its old values are gone
        y.sum().backward()
        for a, b in zip(ref, got):
            if a.requires_grad:
                assert (a.grad is None) == (b.grad is None), sample
                if a.grad is not None:
                    np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-12)
        checked += 1
    assert checked, f"no sample of {name} checked"
