"""Autograd refusals PyTorch makes at the call: writing in place to (views of) the outputs of
ops returning several views, and integral ``dtype=`` results of tensors requiring grad."""

import pytest

import ember

_MESSAGE = ("Output {} of {} is a view and is being modified inplace. This view is the output "
            "of a function that returns multiple views.")


def _leaf():
    return ember.randn(4, 3, requires_grad=True)


@pytest.mark.parametrize("write,output,node", [
    (lambda y: y.split(1)[1].mul_(2), 1, "Split"),
    (lambda y: y.split(1)[0][0].mul_(2), 0, "Select"),
    (lambda y: y.split(1)[1].select(0, 0).mul_(2), 0, "Select"),
    (lambda y: y.unbind(0)[1].view(3).mul_(2), 0, "View"),
    (lambda y: y.chunk(2)[1][0].add_(1), 0, "Select"),
    (lambda y: y.split(1)[0][0].__setitem__(0, 1.5), 0, "Select"),
    (lambda y: y.unbind(0)[1].unsqueeze_(0), 1, "Unbind"),
], ids=["split", "select_of_split", "select_method", "view_of_unbind", "chunk",
        "setitem", "inplace_view_op"])
def test_views_of_multi_view_outputs_are_not_written_in_place(write, output, node):
    with pytest.raises(RuntimeError, match=_MESSAGE.format(output, node)):
        write(_leaf() * 2)


def test_views_of_independent_or_untracked_outputs_may_be_written():
    x = _leaf()
    (x * 2).tensor_split(2)[1][0].add_(1)           # tensor_split's outputs are independent
    (x * 2)[1:][0].add_(1)
    x.detach().split(1)[0][0].mul_(2)
    with ember.no_grad():
        (x * 2).split(1)[0][0].mul_(2)


@pytest.mark.parametrize("call,name", [
    (lambda x: x.sum(dtype=ember.int64), "Long"),
    (lambda x: ember.sum(x, 0, dtype=ember.int16), "Short"),
    (lambda x: x.sum(dtype=ember.bool), "Bool"),
    (lambda x: x.nansum(dtype=ember.int64), "Long"),
    (lambda x: x.prod(dtype=ember.int64), "Long"),
    (lambda x: x.cumsum(0, dtype=ember.int32), "Int"),
    (lambda x: x.cumprod(0, dtype=ember.int64), "Long"),
])
def test_integral_dtype_results_of_tensors_requiring_grad_are_refused(call, name):
    x = _leaf()
    with pytest.raises(RuntimeError, match=f"^Autograd not support dtype: {name}$"):
        call(x)
    assert call(x.detach()).dtype.is_floating_point is False
    with ember.no_grad():
        assert call(x).requires_grad is False


def test_out_refusal_comes_before_the_integral_dtype_refusal():
    x = _leaf()
    with pytest.raises(RuntimeError, match="^sum\\(\\): functions with out=... arguments"):
        ember.sum(x, 0, dtype=ember.int64, out=ember.empty((), dtype=ember.int64))
