"""PyTorch's deprecated beta-first forms of the matrix products, as old actor-critic code writes
its layers: ``m.addmm(beta, [alpha,] a, b)`` and ``torch.addmm(beta, m, [alpha,] a, b)`` (and
addmv, addr, addbmm, baddbmm) compute ``beta * m + alpha * (a @ b)`` and warn."""

import warnings

import numpy as np
import pytest

import ember


def _arrays():
    rng = np.random.default_rng(29)
    return [rng.standard_normal(s).astype(np.float32) for s in ((2, 3), (2, 4), (4, 3))]


@pytest.mark.parametrize("form", ["method", "method_alpha", "inplace", "function",
                                  "function_alpha"])
def test_addmm_beta_first_matches_numpy(form):
    m, a, b = _arrays()
    alpha = 2.0 if form.endswith("alpha") else 1.0
    tm, ta, tb = map(ember.from_numpy, (m, a, b))
    extra = (2.0,) if form.endswith("alpha") else ()
    ember.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if form.startswith("method"):
                out = tm.addmm(0.5, *extra, ta, tb)
            elif form == "inplace":
                out = tm.clone().addmm_(0.5, ta, tb)
            else:
                out = ember.addmm(0.5, tm, *extra, ta, tb)
    finally:
        ember.set_warn_always(False)
    np.testing.assert_allclose(out.numpy(), 0.5 * m + alpha * (a @ b), rtol=1e-5, atol=1e-6)
    assert len(caught) == 1 and caught[0].category is UserWarning
    assert str(caught[0].message).startswith("This overload of addmm")


def test_addmv_beta_first_gradient():
    m = ember.ones(2, requires_grad=True)
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    v = ember.tensor([1.0, -1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = m.addmv(0.5, 3.0, a, v)
    np.testing.assert_allclose(out.detach().numpy(), [0.5 - 3.0, 0.5 - 3.0])
    out.sum().backward()
    np.testing.assert_allclose(m.grad.numpy(), [0.5, 0.5])
    np.testing.assert_allclose(a.grad.numpy(), [[3.0, -3.0], [3.0, -3.0]])


def test_beta_first_with_a_keyword_too_is_refused():
    with pytest.raises(TypeError, match=r"^addmm\(\) takes 2 positional arguments but 3 were "
                                        r"given$"):
        ember.ones(2, 2).addmm(0.5, ember.ones(2, 2), ember.ones(2, 2), alpha=2)
