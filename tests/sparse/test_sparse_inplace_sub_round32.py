"""Sparse ``sub_`` and the stored form of sums of uncoalesced COO tensors (round 32), against
values worked out by hand from PyTorch's merge rule: one pass over both entry lists in their
stored order, the smaller row-major index first, entries meeting at the heads added."""

import pytest

import ember


def _coo(indices, values, size):
    return ember.sparse_coo_tensor(ember.tensor(indices), ember.tensor(values), size)


def test_uncoalesced_sum_is_merged_in_stored_order():
    a = _coo([[0, 1, 2, 0], [1, 2, 0, 2]], [1., 2, 3, 4], (3, 3))   # positions 1 5 6 2
    c = a + a.t()                                                    # positions 3 7 2 6
    # merge: 1 | 3 | 5 | 6 | 2 (a runs out) then 7 2 6
    assert c._indices().tolist() == [[0, 1, 1, 2, 0, 2, 0, 2], [1, 0, 2, 0, 2, 1, 2, 0]]
    assert c._values().tolist() == [1., 1., 2., 3., 4., 2., 3., 4.]
    assert not c.is_coalesced()
    assert c.to_dense().tolist() == (a.to_dense() + a.to_dense().t()).tolist()


def test_equal_heads_are_added_once():
    d = _coo([[0, 0, 1], [0, 0, 1]], [1., 2, 3], (3, 3))
    c = d.add(d.coalesce(), alpha=-2)         # heads 0|0 -> 1-6, then 0 < 4 -> 2, 4|4 -> 3-6
    assert c._indices().tolist() == [[0, 0, 1], [0, 0, 1]]
    assert c._values().tolist() == [-5., 2., -3.]


def test_coalesced_sum_stays_coalesced():
    a = _coo([[0, 1], [1, 0]], [1., 2], (2, 2)).coalesce()
    c = a + a.t().coalesce()
    assert c.is_coalesced() and c._values().tolist() == [3., 3.]


def test_sub_in_place():
    s = _coo([[0, 1], [1, 0]], [1., 2], (2, 2))
    s -= _coo([[1], [0]], [5.], (2, 2))
    assert s.to_dense().tolist() == [[0., 1.], [-3., 0.]]
    d = ember.ones(2, 2)
    d.sub_(_coo([[0], [1]], [2.], (2, 2)), alpha=3)
    assert d.tolist() == [[1., -5.], [1., 1.]]


@pytest.mark.parametrize("self_dense, message", [
    (False, "add(sparse, dense) is not supported. Use add(dense, sparse) instead."),
    (True, "Can't convert result type Float to output Long in add operation")])
def test_sub_in_place_errors(self_dense, message):
    x = ember.tensor([[1, 0], [0, 2]])
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        if self_dense:
            x.sub_(x.float().to_sparse())
        else:
            x.float().to_sparse().sub_(x.float())


def test_sub_in_place_refuses_compressed():
    x = ember.tensor([[1., 0], [0, 2]])
    with pytest.raises(RuntimeError, match="unsupported tensor layout: SparseCsr"):
        x.clone().sub_(x.to_sparse_csr())


def _reference_merge(ka, kb):
    """PyTorch's merge rule step by step: the smaller head first, equal heads into one."""
    slots_a, slots_b, i, j, n = [], [], 0, 0, 0
    while i < len(ka) or j < len(kb):
        take_a = j == len(kb) or (i < len(ka) and ka[i] <= kb[j])
        take_b = i == len(ka) or (j < len(kb) and kb[j] <= ka[i])
        if take_a:
            slots_a.append(n)
            i += 1
        if take_b:
            slots_b.append(n)
            j += 1
        n += 1
    return slots_a, slots_b, n


@pytest.mark.parametrize("sortedness", ["none", "a coalesced", "b coalesced", "both"])
def test_merge_slots_follow_the_merge_rule(sortedness):
    # the planner takes a closed form when one list is strictly increasing, a loop otherwise
    import numpy as np

    from ember.sparse._merge import merge_slots
    rng = np.random.default_rng(0)
    for _ in range(400):
        ka, kb = (rng.integers(0, int(rng.integers(1, 9)), int(rng.integers(0, 10)))
                  for _ in range(2))
        if sortedness in ("a coalesced", "both"):
            ka = np.unique(ka)
        if sortedness in ("b coalesced", "both"):
            kb = np.unique(kb)
        slots_a, slots_b, n = merge_slots(ka, kb)
        assert (slots_a.tolist(), slots_b.tolist(), n) == _reference_merge(ka.tolist(),
                                                                          kb.tolist())


def test_uncoalesced_sum_with_a_coalesced_operand():
    a = _coo([[2, 0, 2, 1, 0]], [1., 2, 3, 4, 5], (3,))          # prefix maxima 2 2 2 2 2
    c = a.add(_coo([[0, 2]], [10., 20], (3,)).coalesce(), alpha=2)
    # b's 0 comes first (below a's run of 2), b's 2 meets a's head 2, then a's tail
    assert c._indices().tolist() == [[0, 2, 0, 2, 1, 0]]
    assert c._values().tolist() == [20., 41., 2., 3., 4., 5.]


def test_sum_with_non_contiguous_values_concatenates():
    # PyTorch's CPU kernel merges only contiguous values; otherwise both lists one after the
    # other, coalesced once that holds more entries than the tensor has elements
    v = ember.tensor([[1., 2, 3], [4, 5, 6]]).t()                 # (3, 2), not contiguous
    a = ember.sparse_coo_tensor(ember.tensor([[1, 0, 1]]), v, (2, 2))
    b = _coo([[0]], [[1., 1]], (2, 2))
    c = a + b
    assert c._indices().tolist() == [[1, 0, 1, 0]] and not c.is_coalesced()
    assert c._values().tolist() == [[1., 4], [2, 5], [3, 6], [1, 1]]
    d = a + a                               # coalesced, yet flagged so only under 2 entries
    assert not d.is_coalesced() and d._values().tolist() == [[4., 10], [8, 20]]
    e = ember.sparse_coo_tensor(ember.tensor([[0, 0]]), ember.arange(8.).reshape(2, 4)[:, ::2],
                                (1, 2))
    assert not e._values().is_contiguous() and (e + e).is_coalesced()
    assert (e + e)._values().tolist() == [[8., 16.]]


def test_scaled_operand_keeps_the_result_dtype():
    a = ember.sparse_coo_tensor(ember.tensor([[0, 1]]), ember.tensor([1, 2], dtype=ember.int32),
                                (2,))
    b = ember.sparse_coo_tensor(ember.tensor([[1, 1]]), ember.tensor([200, 3],
                                                                     dtype=ember.uint8), (2,))
    c = a.add(b, alpha=2)                           # 200 * 2 in int32, not wrapped in uint8
    assert c.dtype is ember.int32 and c.to_dense().tolist() == [1, 408]
    f = ember.sparse_coo_tensor(ember.tensor([[0]]), ember.tensor([True]), (2,))
    i8 = ember.sparse_coo_tensor(ember.tensor([[0]]), ember.tensor([1], dtype=ember.int8), (2,))
    assert i8.add(f, alpha=2).dtype is ember.int8


def test_in_place_alpha_is_converted_to_the_dtype_of_self():
    s = _coo([[0, 1]], [2, 3], (2,))
    d = ember.tensor([10, 10])
    d.add_(s, alpha=1.7)                            # alpha 1, as int64(1.7)
    assert d.tolist() == [12, 13]
    d.sub_(s, alpha=-1.7)
    assert d.tolist() == [14, 16]
    t = s.clone()
    t.add_(s, alpha=0.5)                            # alpha 0
    assert t.to_dense().tolist() == [2, 3]
    with pytest.raises(RuntimeError, match="argument alpha must not be a floating point"):
        s.add(s, alpha=0.5)                         # out of place: refused


@pytest.mark.parametrize("self_dense", [False, True])
def test_sub_in_place_refuses_bool(self_dense):
    m = ember.tensor([True, False])
    x = m if self_dense else m.to_sparse()
    with pytest.raises(RuntimeError, match="with two bool tensors is not supported"):
        x.clone().sub_(m.to_sparse())
    with pytest.raises(RuntimeError, match="with a bool tensor is not supported"):
        ember.ones(2).sub_(m.to_sparse()) if self_dense else m.float().to_sparse().sub_(
            m.to_sparse())


def test_dense_in_place_under_no_grad_keeps_the_node():
    v = ember.tensor([1., 2.], requires_grad=True)
    d = v * 1
    with ember.no_grad():
        d.sub_(_coo([[0]], [3.], (2,)))
    assert type(d.grad_fn).__name__ == "MulBackward0" and d.tolist() == [-2., 2.]
