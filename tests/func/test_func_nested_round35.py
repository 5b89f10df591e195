"""Nested func transforms (round 35): zero-tangent links through nested forward levels and
from a forward-mode transform nested in reverse-mode ones, vjp of an identity inside jvp,
vjp returning its input itself. Expected values are PyTorch 2.13's."""

import numpy as np

import ember as torch
from ember import func as F

X = [0.3, 0.7, -0.2]
C = [1.0, 2.0, 3.0]
W = [0.5, -1.0, 2.0]


def test_jvp_of_jvp_with_a_constant_derivative_links_both_results():
    x = torch.tensor(X, requires_grad=True)
    c, t = torch.tensor(C), torch.ones(3)
    p, tt = F.jvp(lambda x: F.jvp(lambda y: y * c, (x,), (t,))[1], (x,), (t,))
    assert p.tolist() == C and tt.tolist() == [0.0, 0.0, 0.0]
    assert p.requires_grad and tt.requires_grad
    assert type(p.grad_fn).__name__ == "AliasBackward0"
    gp, gt = (torch.autograd.grad(r.sum(), [x], retain_graph=True)[0] for r in (p, tt))
    assert gp.tolist() == [0.0, 0.0, 0.0] and gt.tolist() == [0.0, 0.0, 0.0]


def test_jvp_of_jvp_without_an_outside_tensor_stays_out_of_graphs():
    x = torch.tensor(X)
    c, t = torch.tensor(C), torch.ones(3)
    p, tt = F.jvp(lambda x: F.jvp(lambda y: y * c, (x,), (t,))[1], (x,), (t,))
    assert not p.requires_grad and not tt.requires_grad


def test_jvp_of_jvp_through_no_grad_keeps_its_values():
    w = torch.tensor(W, requires_grad=True)
    x = torch.tensor(X, requires_grad=True)

    def f(y):
        with torch.no_grad():
            z = y * w
        return z * y
    inner = lambda x: F.jvp(f, (x,), (torch.ones(3),))[1]      # noqa: E731
    r = F.jvp(inner, (x,), (torch.ones(3),))[1]
    np.testing.assert_allclose(r.tolist(), [1.0, -2.0, 4.0], rtol=1e-6)
    assert r.requires_grad


def test_grad_over_jvp_links_the_zero_term_to_the_input():
    x = torch.tensor(X, requires_grad=True)
    g = F.grad(lambda y: (lambda o, t: (o * t).sum())(*F.jvp(
        lambda z: z * 2.0, (y,), (torch.ones(3),))))(x)
    assert g.tolist() == [4.0, 4.0, 4.0]
    assert g.requires_grad
    assert torch.autograd.grad(g.sum(), [x])[0].tolist() == [0.0, 0.0, 0.0]


def test_vjp_of_an_identity_inside_jvp():
    x = torch.tensor(X)
    p, t = F.jvp(lambda x: F.vjp(lambda y: y, x)[1](torch.ones(3))[0], (x,),
                 (torch.ones(3),))
    assert p.tolist() == [1.0, 1.0, 1.0] and t.tolist() == [0.0, 0.0, 0.0]


def test_vjp_returns_an_input_returned_as_it_is():
    for req in (False, True):
        x = torch.tensor(X, requires_grad=req)
        out, fn = F.vjp(lambda y: y, x)
        assert out is x
        assert fn(torch.ones(3))[0].tolist() == [1.0, 1.0, 1.0]
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0], requires_grad=True)
    (o0, o1), fn = F.vjp(lambda a, b: (b, a * 2), a, b)
    assert o0 is b and o1.tolist() == [2.0, 4.0]
    ga, gb = fn((torch.ones(2), torch.ones(2)))
    assert ga.tolist() == [2.0, 2.0] and gb.tolist() == [1.0, 1.0]


def test_reverse_mode_aux_that_is_an_input_is_the_callers_tensor():
    # (RC4) PyTorch 2.13 gives back the caller's tensor itself as aux too (vjp, grad,
    # grad_and_value, jacrev), a leaf without grad_fn; not jvp's or jacfwd's (a new tensor)
    for req in (False, True):
        x = torch.tensor([1.0, 2.0], requires_grad=req)
        out, fn, aux = F.vjp(lambda y: (y * 2, y), x, has_aux=True)
        assert aux is x and aux.grad_fn is None
        assert fn(torch.ones(2))[0].tolist() == [2.0, 2.0]
        g, aux = F.grad(lambda y: ((y * 3).sum(), y), has_aux=True)(x)
        assert aux is x and g.tolist() == [3.0, 3.0]
        g, (v, aux) = F.grad_and_value(lambda y: ((y * y).sum(), y), has_aux=True)(x)
        assert aux is x and g.tolist() == [2.0, 4.0] and v.item() == 5.0
        j, aux = F.jacrev(lambda y: (y * 2, y), has_aux=True)(x)
        assert aux is x and j.tolist() == [[2.0, 0.0], [0.0, 2.0]]
        p, t, aux = F.jvp(lambda y: (y * 2, y), (x,), (torch.ones(2),), has_aux=True)
        assert aux is not x and aux.tolist() == [1.0, 2.0]
        j, aux = F.jacfwd(lambda y: (y * 2, y), has_aux=True)(x)
        assert aux is not x and aux.tolist() == [1.0, 2.0]


def test_vjp_nested_in_reverse_mode_returns_the_input_itself():
    # (RC4) inside grad / vjp, PyTorch's inner vjp of an identity gives back its input, so
    # the outer vjp's result is the caller's leaf itself (no grad_fn)
    x = torch.tensor(X, requires_grad=True)
    seen = []

    def f(v):
        o, fn, aux = F.vjp(lambda y: (y, y * 2), v, has_aux=True)
        seen.append((o is v, aux.tolist()))
        return (o * v).sum()
    g = F.grad(f)(x)
    np.testing.assert_allclose(g.tolist(), [0.6, 1.4, -0.4], rtol=1e-6)
    assert seen == [(True, [0.6000000238418579, 1.399999976158142, -0.4000000059604645])]
    o, fn = F.vjp(lambda v: F.vjp(lambda y: y, v)[0], x)
    assert o is x and o.grad_fn is None
    assert fn(torch.ones(3) * 2)[0].tolist() == [2.0, 2.0, 2.0]


def test_linked_tangent_of_a_nested_jvp_reports_forward_mode_flags():
    # (RC4) inside an outer jvp's function, the inner jvp's tangent linked to x (zero term
    # of y * c) is that function's result: PyTorch reports requires_grad=False, no grad_fn,
    # a leaf (inside grad it requires grad); the outer results still link to x
    x = torch.tensor(X, requires_grad=True)
    c = torch.tensor(C)
    flags = []

    def f(v):
        t = F.jvp(lambda y: y * c, (v,), (torch.ones(3),))[1]
        flags.append((t.requires_grad, t.grad_fn is None, t.is_leaf))
        return t * v
    p, tt = F.jvp(f, (x,), (torch.ones(3),))
    assert flags == [(False, True, True)]
    assert p.tolist() == [0.30000001192092896, 1.399999976158142, -0.6000000238418579]
    assert tt.tolist() == C and tt.requires_grad
    assert torch.autograd.grad(tt.sum(), [x])[0].tolist() == [0.0, 0.0, 0.0]

    def g(v):
        t = F.jvp(lambda y: y * c, (v,), (torch.ones(3),))[1]
        flags.append((t.requires_grad, t.grad_fn is None, t.is_leaf))
        return (t * v).sum()
    assert F.grad(g)(x).tolist() == C
    assert flags[1] == (True, False, False)
