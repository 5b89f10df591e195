"""Round 35 leftovers: meta views computed by one run of the op (on a probe of the input's
layout), and PyTorch's copy errors for a leaf's gradient after the leaf was reshaped under
no_grad (values checked against torch 2.13)."""

import pytest

import ember as torch
from ember.ops import _meta


def _layout(t):
    return tuple(t.shape), t.stride(), t.storage_offset(), t._base is not None


@pytest.fixture
def runs(monkeypatch):
    """Counts of the stand-in runs and second (layout probe) runs meta ops make."""
    counts = {"stand_ins": 0, "second": 0}
    on_stand_ins, laid_out = _meta._on_stand_ins, _meta._laid_out_views

    def counted_stand_ins(*args, **kwargs):
        counts["stand_ins"] += 1
        return on_stand_ins(*args, **kwargs)

    def counted_laid_out(*args, **kwargs):
        counts["second"] += 1
        return laid_out(*args, **kwargs)
    monkeypatch.setattr(_meta, "_on_stand_ins", counted_stand_ins)
    monkeypatch.setattr(_meta, "_laid_out_views", counted_laid_out)
    return counts


@pytest.mark.parametrize("make", [
    lambda x: x.t(), lambda x: x[1:3], lambda x: x.view(24), lambda x: x.reshape(3, 8),
    lambda x: x.chunk(2), lambda x: x.unsqueeze(0), lambda x: x.expand(2, 4, 6),
    lambda x: x.flatten(), lambda x: x.unflatten(1, (2, 3)), lambda x: x.select(1, 2)])
def test_meta_views_run_once(runs, make):
    x = torch.empty(4, 6, device="meta")
    make(x)
    assert runs == {"stand_ins": 0, "second": 0}


def test_meta_reshape_that_copies_still_row_major(runs):
    x = torch.empty(4, 6, device="meta")
    r = x.t().reshape(24)
    assert _layout(r) == ((24,), (1,), 0, False)
    assert runs["stand_ins"] == 1


def test_meta_view_layouts_unchanged():
    x = torch.empty(4, 6, device="meta")
    assert _layout(x.t()) == ((6, 4), (1, 6), 0, True)
    assert _layout(x[1:3, 2:]) == ((2, 4), (6, 1), 8, True)
    assert _layout(x[::2, 1::3]) == ((2, 2), (12, 3), 1, True)
    assert [_layout(c) for c in x.chunk(3, 1)] == [
        ((4, 2), (6, 1), o, True) for o in (0, 2, 4)]
    assert _layout(x.t()[1:].unsqueeze(1)) == ((5, 1, 4), (1, 24, 6), 1, True)
    assert _layout(x[1:].reshape(3, 2, 3)) == ((3, 2, 3), (6, 3, 1), 6, True)
    flat = torch.empty(40, device="meta")
    odd = flat.as_strided((2, 3, 1, 1), (3, 1, 7, 5), 2)
    assert _layout(odd.flatten(0, 1)) == ((6, 1, 1), (1, 5, 5), 2, True)
    assert _layout(odd[1]) == ((3, 1, 1), (1, 7, 5), 5, True)
    assert _layout(flat.as_strided((2, 1), (1, 5)).flatten()) == ((2,), (1,), 0, True)
    c = torch.empty(2, 3, dtype=torch.complex64, device="meta")
    assert _layout(torch.view_as_real(c[1:])) == ((1, 3, 2), (6, 2, 1), 6, True)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.t().view(24)
    with pytest.raises(RuntimeError, match=r"shape '\[5\]' is invalid for input of size 24"):
        x.view(5)


def test_meta_view_of_parameter_records_graph():
    p = torch.nn.Parameter(torch.empty(3, 4, device="meta"))
    v = p.t()
    assert _layout(v) == ((4, 3), (1, 4), 0, True)
    assert type(v.grad_fn).__name__ == "TBackward0"
    v.sum().backward()
    assert p.grad.shape == (3, 4) and p.grad.is_meta


def _reshaped_leaf(change, how="mul", shape=(2, 3), **kwargs):
    a = torch.ones(*shape, requires_grad=True)
    y = (a * 2).sum() if how == "mul" else a.sum()
    with torch.no_grad():
        change(a)
    y.backward(**kwargs)
    return a


_SIZE = "The size of tensor a ({}) must match the size of tensor b ({}) at non-singleton " \
        "dimension {}"
_OUTPUT = "output with shape {} doesn't match the broadcast shape {}"


@pytest.mark.parametrize("change, how, kwargs, message", [
    (lambda a: a.t_(), "mul", {}, _SIZE.format(2, 3, 1)),
    (lambda a: a.t_(), "sum", {}, _SIZE.format(2, 3, 1)),
    (lambda a: a.t_(), "mul", {"create_graph": True}, _SIZE.format(2, 3, 1)),
    (lambda a: a.unsqueeze_(1), "sum", {}, _OUTPUT.format([2, 1, 3], [2, 2, 3])),
    (lambda a: a.as_strided_((3,), (1,)), "mul", {}, _OUTPUT.format([3], [2, 3])),
    (lambda a: a.set_(torch.ones(4, 3)), "sum", {}, _SIZE.format(4, 2, 0)),
    (lambda a: a.set_(torch.ones(4, 3)), "mul", {"create_graph": True}, _SIZE.format(4, 2, 0)),
    (lambda a: a.set_(torch.ones(1, 3)), "mul", {"create_graph": True},
     _OUTPUT.format([1, 3], [2, 3])),
    (lambda a: a.set_(torch.ones(6)), "mul", {}, _SIZE.format(6, 3, 1)),
    (lambda a: a.set_(torch.ones(2, 3, 1)), "sum", {}, _SIZE.format(3, 2, 1)),
])
def test_reshaped_leaf_gradient_refused_as_torch(change, how, kwargs, message):
    with pytest.raises(RuntimeError) as info:
        _reshaped_leaf(change, how, **kwargs)
    assert str(info.value) == message


def test_reshaped_leaf_gradient_with_more_dims_refused():
    # a (1, 3) leaf squeezed to (3,): a copied (1, 3) gradient does not fit (NumPy would
    # drop the leading 1), a stolen one is kept as it is
    with pytest.raises(RuntimeError, match=r"^output with shape \[3\] doesn't match the "
                                           r"broadcast shape \[1, 3\]$"):
        _reshaped_leaf(lambda a: a.squeeze_(), "sum", shape=(1, 3))
    with pytest.raises(RuntimeError, match=r"^output with shape \[3\] doesn't match"):
        _reshaped_leaf(lambda a: a.squeeze_(), "mul", shape=(1, 3), create_graph=True)
    a = _reshaped_leaf(lambda a: a.squeeze_(), "mul", shape=(1, 3))
    assert a.grad.shape == (1, 3) and a.grad.tolist() == [[2.0, 2.0, 2.0]]


def test_reshaped_leaf_gradient_that_fits_is_taken():
    a = _reshaped_leaf(lambda a: a.unsqueeze_(0), "sum")
    assert a.grad.shape == (1, 2, 3) and a.grad.stride() == (6, 3, 1)
    assert a.grad.tolist() == [[[1.0] * 3] * 2]
    a = _reshaped_leaf(lambda a: a.set_(torch.ones(4, 3)), "mul")     # stolen, as torch's
    assert a.grad.shape == (2, 3) and a.grad.tolist() == [[2.0] * 3] * 2
    a = _reshaped_leaf(lambda a: a.as_strided_((2, 2), (3, 1)), "mul")  # not dense: cloned
    assert a.grad.shape == (2, 3) and a.grad.stride() == (3, 1)
