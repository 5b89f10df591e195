"""What the classic-model programs of round 24 (test_parity_programs_round24_classic_models.py)
found, each pinned against PyTorch: clip_grad_value_ raises when no parameter has a gradient
(PyTorch groups the gradients by device and dtype, which rejects an empty list; clip_grad_norm_
returns a zero norm instead), and ``torch.sparse.torch`` is the torch module itself, which the
popular CapsNet code uses for its one-hot rows."""

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same, recorded

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _params(lib, grads):
    """One parameter per entry of ``grads``: with that gradient, or none for None."""
    params = []
    for g in grads:
        p = lib.nn.Parameter(lib.ones(3))
        if g is not None:
            p.grad = lib.tensor(g)
        params.append(p)
    return params


@pytest.mark.parametrize("grads", [[], [None], [None, None]], ids=["none", "no_grad", "two"])
@pytest.mark.parametrize("form", ["list", "generator", "tensor"])
@pytest.mark.parametrize("foreach", [None, False, True])
def test_clip_grad_value_without_gradients_raises_like_torch(grads, form, foreach):
    def clip(lib):
        params = _params(lib, grads)
        if form == "generator":
            params = (p for p in params)
        elif form == "tensor":
            if not params:
                return "skipped"
            params = params[0]
        return lib.nn.utils.clip_grad_value_(params, 1.0, foreach=foreach)
    answer = assert_same(clip)
    assert answer == "skipped" or answer[0] == "RuntimeError"


@pytest.mark.parametrize("clip_value", [1.0, 0.25, -1.0, 3])
def test_clip_grad_value_clamps_the_gradients_there_are(clip_value):
    def clip(lib):
        params = _params(lib, [None, [-3.0, 0.5, 2.0], [0.1, -0.2, 5.0]])
        ret = lib.nn.utils.clip_grad_value_(params, clip_value)
        return ret, [None if p.grad is None else p.grad.tolist() for p in params]
    answer = assert_same(clip)
    assert answer[0] is None and answer[1][0] is None


@pytest.mark.parametrize("clip_value", ["a", None, [1.0]])
def test_clip_grad_value_checks_the_value_first(clip_value):
    # the conversion to float comes before the gradients are looked at
    assert_same(lambda lib: lib.nn.utils.clip_grad_value_([], clip_value))


def test_clip_grad_norm_without_gradients_returns_zero():
    # (unlike clip_grad_value_): a zero norm, a warning only for an empty generator
    def clip(lib):
        return recorded(lambda: float(lib.nn.utils.clip_grad_norm_(
            (p for p in _params(lib, [])), 1.0)))
    assert clip(ember) == clip(torch)
    assert assert_same(lambda lib: float(lib.nn.utils.clip_grad_norm_(
        _params(lib, [None]), 1.0))) == 0.0


def test_sparse_torch_is_the_module():
    def one_hot(lib):
        labels = lib.tensor([2, 0, 1, 2])
        rows = lib.sparse.torch.eye(3).index_select(dim=0, index=labels)
        return lib.sparse.torch is lib, rows.tolist(), str(rows.dtype).split(".")[-1]
    assert assert_same(one_hot)[0] is True


def test_sparse_unknown_attribute_still_raises():
    def missing(lib):
        return getattr(lib.sparse, "no_such_function")
    ours = recorded(missing, ember)[0]
    theirs = recorded(missing, torch)[0]
    assert ours[0] == theirs[0] == "AttributeError"
    assert ours[1] == theirs[1].replace("torch", "ember")


def _lbfgs_state(lib, start, dtype, lr, iters, line_search_fn):
    """The state LBFGS keeps after ``iters`` iterations on a quartic: each entry as its
    type's name and its value(s)."""
    x = lib.nn.Parameter(lib.tensor(start, dtype=getattr(lib, dtype)))
    opt = lib.optim.LBFGS([x], lr=lr, max_iter=iters, line_search_fn=line_search_fn)

    def closure():
        opt.zero_grad()
        loss = ((x - 0.5) ** 4).sum() + (x ** 2).sum()
        loss.backward()
        return loss
    opt.step(closure)
    state = opt.state[x]

    def describe(v):
        if isinstance(v, lib.Tensor):   # (a NumPy scalar has a dtype too)
            return "Tensor", str(v.dtype).split(".")[-1], v.tolist()
        return type(v).__name__, v
    return {k: describe(state[k]) for k in ("t", "H_diag", "n_iter", "func_evals")}


@pytest.mark.parametrize("start", [[3.0, -2.0, 0.5], [0.1, 0.05, -0.02]], ids=["big", "small"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("lr", [1, 0.7])
def test_lbfgs_first_step_length_is_torch_s(start, dtype, lr):
    # t = min(1, 1 / |g|_1) * lr: PyTorch's is a 0-dim tensor of the gradient's dtype when
    # 1 / |g|_1 < 1 (ember's was a float64 number), the number lr otherwise; H_diag stays the
    # number 1 until a curvature pair is kept
    ours = _lbfgs_state(ember, start, dtype, lr, 1, None)
    theirs = _lbfgs_state(torch, start, dtype, lr, 1, None)
    assert ours == theirs


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lbfgs_state_types_after_iterations_are_torch_s(line_search_fn, dtype):
    # the step lengths and curvature scalars of several iterations, in float32 arithmetic
    # for float32 parameters as PyTorch's 0-dim tensors compute them; the dot products'
    # summation order may differ in the last bit, hence the tolerance
    ours = _lbfgs_state(ember, [3.0, -2.0, 0.5], dtype, 1, 4, line_search_fn)
    theirs = _lbfgs_state(torch, [3.0, -2.0, 0.5], dtype, 1, 4, line_search_fn)
    assert ours.keys() == theirs.keys()
    for key, (kind, *rest) in theirs.items():
        assert ours[key][0] == kind, key
        if kind == "Tensor":
            assert ours[key][1] == rest[0], key
            np.testing.assert_allclose(ours[key][2], rest[1], rtol=1e-6, err_msg=key)
        else:
            assert ours[key][1] == pytest.approx(rest[0], rel=1e-6), key


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
@pytest.mark.parametrize("scale", [0.1, 3.0])
def test_lbfgs_iterates_like_torch_to_float32_rounding(line_search_fn, scale):
    # a weighted quadratic, whose gradients both libraries compute exactly alike: with the
    # scalars in float32 and PyTorch's fused x + alpha * y parameter update (add(alpha=) is
    # a fused multiply-add) the iterates stay within float32 rounding of PyTorch's. The two-loop
    # recursion's updates are not fused in ember: emulating the fused add through float64
    # made LBFGS's own work ~3x slower on large models, for bit-identity that holds only on
    # vectors of a few coordinates (PyTorch's dot product sums longer ones in another order)
    def run(lib, iters):
        rng = np.random.default_rng(5)
        x = lib.nn.Parameter(lib.from_numpy((rng.standard_normal(3) * scale).astype(
            np.float32)))
        w = lib.from_numpy(rng.uniform(0.5, 3, 3).astype(np.float32))
        opt = lib.optim.LBFGS([x], max_iter=iters, history_size=3,
                              line_search_fn=line_search_fn)

        def closure():
            opt.zero_grad()
            loss = (w * (x - 1) ** 2).sum()
            loss.backward()
            return loss
        opt.step(closure)
        return x.tolist()
    for iters in range(1, 8):
        np.testing.assert_allclose(run(ember, iters), run(torch, iters), rtol=1e-5,
                                   err_msg=str(iters))


def test_lbfgs_failed_line_search_keeps_torch_s_zero():
    # a line search that finds no lower point returns the low end of its bracket [0, t]:
    # PyTorch's start is the int 0, which becomes the stored step length. The second step's
    # closure reports the negated gradient, so its direction climbs the convex loss and every
    # trial point is higher in exact arithmetic (near the minimum, whether the search fails
    # is a float32 coin-flip that differs between CPUs)
    def run(lib):
        x = lib.nn.Parameter(lib.tensor([3.0, -2.0, 0.5]))
        z = lib.nn.Parameter(lib.tensor([1 + 2j, 0.5j]))
        opt = lib.optim.LBFGS([x, z], line_search_fn="strong_wolfe", max_iter=6,
                              history_size=3)

        def closure(uphill):
            opt.zero_grad()
            loss = ((x - 1) ** 4).sum() + (x ** 2).sum() + (z.abs() ** 2).sum()
            if uphill:
                loss = 2 * loss.detach() - loss
            loss.backward()
            return loss
        steps = []
        for uphill in (False, True):
            opt.step(lambda: closure(uphill))
            state = opt.state[x]
            steps.append((type(state["t"]).__name__, float(state["t"]), state["n_iter"],
                          state["func_evals"]))
        return steps, x.detach().numpy().copy()
    (ours, x_ours), (theirs, x_theirs) = run(ember), run(torch)
    assert [s[:1] + s[2:] for s in ours] == [s[:1] + s[2:] for s in theirs]
    assert theirs[-1][:2] == ("int", 0.0)
    np.testing.assert_allclose([s[1] for s in ours], [s[1] for s in theirs], rtol=1e-6)
    np.testing.assert_allclose(x_ours, x_theirs, rtol=1e-5)
