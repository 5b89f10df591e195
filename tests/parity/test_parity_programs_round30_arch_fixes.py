"""What the architecture programs of round 30 (test_parity_programs_round30_arch.py and its
_mixers sibling) found, pinned against PyTorch: harmonic filters built as
``polar(einsum(radial weights, basis), angle)`` get negative moduli, and PyTorch's backward of
polar takes d/d(abs) as sgn(out) (a negative abs flips it, abs 0 gives 0) with its double
backward running through that formula, while its forward mode keeps the plain e^{i angle};
ember gave e^{i angle} in reverse mode too, and did not keep the result (so an in-place
write into it did not refuse backward)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_ABS = np.array([-1.5, 0.0, 2.0, -0.25], np.float32)
_ANGLE = np.array([0.3, -1.2, 2.5, -3.0], np.float32)


def _close(ours, theirs):
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def _backward(lib):
    a = lib.tensor(_ABS, requires_grad=True)
    t = lib.tensor(_ANGLE, requires_grad=True)
    w = lib.polar(a, t)
    (lib.view_as_real(w) * lib.tensor([[1.0, -2.0], [0.5, 3.0], [2.0, 1.0], [-1.0, 0.25]])
     ).sum().backward()
    return [a.grad, t.grad]


def test_polar_backward_negative_and_zero_abs_like_torch():
    ours, theirs = _backward(ember), _backward(torch)
    _close(ours, theirs)
    assert theirs[0][1] == 0 and theirs[0][0] != 0      # abs 0: no gradient; abs < 0: flipped


def _double_backward(lib):
    a = lib.tensor(_ABS, requires_grad=True)
    t = lib.tensor(_ANGLE, requires_grad=True)
    w = lib.polar(a, t)
    ga, gt = lib.autograd.grad((w * w).real.sum() + w.abs().sum(), (a, t), create_graph=True)
    return [ga, gt, *lib.autograd.grad(ga.pow(2).sum() + gt.sum(), (a, t))]


def test_polar_double_backward_like_torch():
    _close(_double_backward(ember), _double_backward(torch))


def _through_einsum(lib):
    # the harmonic-network pattern: a radial profile from an einsum, then polar
    rng = np.random.default_rng(7)
    radial = lib.tensor(rng.standard_normal((2, 1, 3)).astype(np.float32), requires_grad=True)
    basis = lib.tensor(rng.standard_normal((3, 4, 4)).astype(np.float32))
    angle = lib.tensor(rng.standard_normal((2, 1, 4, 4)).astype(np.float32))
    w = lib.polar(lib.einsum("oir,rhw->oihw", radial, basis), angle)
    lib.view_as_real(w).pow(3).sum().backward()
    return [radial.grad]


def test_polar_of_signed_profile_gradient_like_torch():
    _close(_through_einsum(ember), _through_einsum(torch))


def _forward_mode(lib):
    a, t = lib.tensor(_ABS), lib.tensor(_ANGLE)
    ta, tt = lib.ones(4), lib.full((4,), 0.5)
    _, jvp = lib.func.jvp(lib.polar, (a, t), (ta, tt))
    fa = lib.autograd.forward_ad
    with fa.dual_level():
        dual = lib.polar(fa.make_dual(a, ta), fa.make_dual(t, tt))
        tangent = fa.unpack_dual(dual).tangent
    jac = lib.func.jacfwd(lambda a: lib.view_as_real(lib.polar(a, t)))(a)
    return [lib.view_as_real(jvp), lib.view_as_real(tangent), jac]


def test_polar_forward_mode_keeps_the_plain_formula_like_torch():
    ours, theirs = _forward_mode(ember), _forward_mode(torch)
    _close(ours, theirs)
    # forward mode is not the transpose of reverse mode here, in PyTorch too
    rev = torch.func.jacrev(lambda a: torch.view_as_real(torch.polar(a, torch.tensor(_ANGLE))))(
        torch.tensor(_ABS))
    assert not torch.allclose(rev, theirs[2])


def test_polar_keeps_its_result_for_backward_like_torch():
    # PyTorch's polar backward reads its result: writing into it in place refuses backward
    messages = []
    for lib in (ember, torch):
        a = lib.tensor([1.0, -2.0], requires_grad=True)
        w = lib.polar(a, lib.tensor([0.3, 0.4]))
        w.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
            w.abs().sum().backward()
        messages.append(str(info.value).split(" Hint")[0])
    assert messages[0] == messages[1]
