"""Views made before their base had history, after a write through another view, vs torch.

For each view kind: the view's ``requires_grad``, ``is_leaf`` and node name once the base
was written in place through another view, and the gradient that reaches ``x`` through it
(as an op input, or backward from the view itself).
"""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

# name -> (base shape, base dtype is complex, view of the base, write through another view)
_KINDS = {
    "select": ((2, 3), False, lambda b: b[0], lambda b, x: b[0].add_(x)),
    "slice": ((3, 3), False, lambda b: b[:2], lambda b, x: b[1].add_(x)),
    "narrow": ((3, 3), False, lambda b: b.narrow(1, 1, 2), lambda b, x: b[2].add_(x)),
    "view": ((3, 3), False, lambda b: b.view(9), lambda b, x: b[1].add_(x)),
    "transpose": ((3, 3), False, lambda b: b.transpose(0, 1), lambda b, x: b[0].mul_(x)),
    "t": ((3, 3), False, lambda b: b.t(), lambda b, x: b[:, 1].add_(x * x)),
    "diagonal": ((3, 3), False, lambda b: b.diagonal(), lambda b, x: b[1].add_(x)),
    "as_strided": ((3, 3), False, lambda b: b.as_strided((2,), (4,)),
                   lambda b, x: b[1].add_(x)),
    "unsqueeze": ((2, 3), False, lambda b: b[1].unsqueeze(0), lambda b, x: b[1].add_(x)),
    "expand": ((1, 3), False, lambda b: b.expand(2, 3), lambda b, x: b[0].add_(x)),
    "view_of_view": ((2, 3), False, lambda b: b[1][1:], lambda b, x: b[1].sub_(x)),
    "whole_base_write": ((3,), False, lambda b: b[1:], lambda b, x: b.add_(x)),
    "real": ((2, 3), True, lambda b: b.real, lambda b, x: b[0].add_(x)),
    "imag": ((2, 3), True, lambda b: b[0].imag, lambda b, x: b[0].add_(x * 1j)),
}


def _run(lib, kind, from_view):
    shape, cplx, make_view, write = _KINDS[kind]
    x = lib.tensor([0.5, -1.5, 2.0], requires_grad=True)
    base = lib.zeros(*shape, dtype=lib.complex64 if cplx else lib.float32)
    view = make_view(base)
    write(base, x)
    flags = (view.requires_grad, view.is_leaf, type(view.grad_fn).__name__.rstrip("0123456789"))
    weights = lib.arange(1.0, view.numel() + 1).reshape(view.shape)
    if from_view:
        (view * weights).sum().backward()
    else:
        (view * view * weights).sum().backward()
    return flags, x.grad.numpy(), view.detach().numpy()


@pytest.mark.parametrize("from_view", [False, True], ids=["input", "root"])
@pytest.mark.parametrize("kind", sorted(_KINDS))
def test_view_made_before_its_base_had_history(kind, from_view):
    want_flags, want_grad, want_value = _run(torch, kind, from_view)
    flags, got_grad, got_value = _run(ember, kind, from_view)
    assert flags == want_flags
    np.testing.assert_allclose(got_value, want_value, rtol=1e-6)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-6)


@pytest.mark.parametrize("kind", ["unbind", "split"])
def test_multi_output_view_of_a_base_written_later_is_refused(kind):
    def run(lib):
        x = lib.tensor([0.5, -1.5, 2.0], requires_grad=True)
        base = lib.zeros(2, 3)
        pieces = base.unbind(0) if kind == "unbind" else base.split(1, 0)
        base[0].add_(x)
        with pytest.raises(RuntimeError) as info:
            (pieces[0] * x).sum()
        return str(info.value)
    want = run(torch)
    assert "This view is the output of a function that returns multiple views." in want
    assert run(ember) == want


def test_view_read_before_and_after_grad_fn_access():
    def run(lib, read_first):
        x = lib.tensor([0.5, -1.5, 2.0], requires_grad=True)
        base = lib.zeros(2, 3)
        b = base[0]
        base[0].add_(x)
        if read_first:
            b.grad_fn
        try:
            b.mul_(2)
        except RuntimeError as e:
            return str(e)
        b.sum().backward()
        return x.grad.tolist()
    for read_first in (False, True):
        assert run(ember, read_first) == run(torch, read_first)


def test_func_grad_writing_into_an_argument_view():
    def run(lib, func):
        def f(x, arg):
            arg[:2].add_(x[:2])
            return (x * arg).sum()
        single = func.grad(f)(lib.tensor([1.0, 2.0, 3.0]), lib.zeros(2, 3)[0])
        xs = lib.tensor([[1.0, 2.0, 3.0], [4.0, -5.0, 6.0]])
        batched = func.vmap(func.grad(f))(xs, lib.zeros(2, 3))
        return single.numpy(), batched.numpy()
    import ember.func
    import torch.func
    for got, want in zip(run(ember, ember.func), run(torch, torch.func)):
        np.testing.assert_array_equal(got, want)


def _no_grad_view_program(lib, mode, write_view):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    base = lib.zeros(2, 3)
    with getattr(lib, mode)():
        b = base[0]
    if write_view:
        b.add_(x)
    else:
        base[1].add_(x)
        b * 1


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
@pytest.mark.parametrize("write_view", [False, True], ids=["base_written", "view_written"])
def test_view_made_without_grad_mode_then_base_gains_history(mode, write_view):
    with pytest.raises(RuntimeError) as want:
        _no_grad_view_program(torch, mode, write_view)
    with pytest.raises(RuntimeError) as got:
        _no_grad_view_program(ember, mode, write_view)
    assert str(got.value) == str(want.value)


def _refused_with_stale_view(lib, how):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    base = lib.zeros(2, 3)
    b = base[0]
    base[1].add_(x)                 # b now requires grad through its base
    if how == "out":
        lib.add(lib.ones(3), 1, out=b)
    elif how == "narrow_copy_out":
        lib.narrow_copy(lib.ones(5), 0, 0, 3, out=b)
    else:
        lib.nn.functional.cross_entropy(lib.zeros(4, 3), lib.tensor([0, 1, 2, 0]), weight=b)


@pytest.mark.parametrize("how", ["out", "narrow_copy_out", "class_weight"])
def test_stale_view_is_refused_where_requiring_grad_is(how):
    with pytest.raises(RuntimeError) as want:
        _refused_with_stale_view(torch, how)
    with pytest.raises(RuntimeError) as got:
        _refused_with_stale_view(ember, how)
    assert str(got.value) == str(want.value)
