"""ember.lobpcg and ember.histogramdd against torch's: the same inputs in both, eigenpairs
(vectors up to sign), gradients, histograms, bin edges and error messages compared. (The
OpInfo samples of histogramdd also run against torch in test_parity_ops.py.)"""

import re

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _spd(m, seed=0, batch=()):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal(batch + (m, m)))
    return (q * np.arange(1., m + 1) ** 1.5) @ np.swapaxes(q, -1, -2)


def _both(lib, x, dtype="float64", requires_grad=False):
    return None if x is None else lib.tensor(x, dtype=getattr(lib, dtype),
                                             requires_grad=requires_grad)


def _same_vectors(ours, theirs, atol):
    ours, theirs = np.asarray(ours.detach(), np.float64), theirs.detach().double().numpy()
    signs = np.sign((ours * theirs).sum(-2, keepdims=True))
    np.testing.assert_allclose(ours * signs, theirs, atol=atol)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("method", ["ortho", "basic"])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("generalized", [False, True])
def test_lobpcg_eigenpairs(dtype, method, largest, generalized):
    if generalized and method == "basic":
        pytest.skip("torch's basic method misses eigenpairs of these problems (it returns the "
                    "largest one twice); test_lobpcg.py checks ember's against SciPy")
    A, B = _spd(36, seed=1), _spd(36, seed=2) / 40 + np.eye(36) if generalized else None
    X0 = np.random.default_rng(3).standard_normal((36, 3))
    tol = 1e-10 if dtype == "float64" else None
    results = [lib.lobpcg(_both(lib, A, dtype), k=3, B=_both(lib, B, dtype),
                          X=_both(lib, X0, dtype), largest=largest, method=method, tol=tol)
               for lib in (ember, torch)]
    (E, X), (tE, tX) = results
    assert E.dtype.name == str(tE.dtype)[6:] and E.shape == tE.shape and X.shape == tX.shape
    # float32's default tolerance bounds residuals near 3e-4 of A's norm (about 200)
    rtol, atol, vec_atol = (1e-9, 0, 1e-5) if dtype == "float64" else (1e-5, 1e-3, 2e-2)
    np.testing.assert_allclose(np.asarray(E), tE.numpy(), rtol=rtol, atol=atol)
    _same_vectors(X, tX, vec_atol)


def test_lobpcg_batched_and_defaults():
    A = _spd(30, seed=4, batch=(2,))
    ours = ember.lobpcg(_both(ember, A), k=2, n=3)
    theirs = torch.lobpcg(_both(torch, A), k=2, n=3)
    np.testing.assert_allclose(np.asarray(ours[0]), theirs[0].numpy(), rtol=1e-8)
    _same_vectors(ours[1], theirs[1], 1e-4)
    for kwargs in ({}, {"n": 2}, {"X": np.eye(30)[:, :2] + 0.1},
                   {"k": 3, "X": np.eye(30)[:, :2], "niter": 20}):
        shapes = [tuple(t.shape) for lib in (ember, torch) for t in lib.lobpcg(
            _both(lib, A[0]), **{k: _both(lib, v) if k == "X" else v
                                 for k, v in kwargs.items()})]
        assert shapes[:2] == shapes[2:], kwargs


@pytest.mark.parametrize("largest", [True, False])
def test_lobpcg_gradients(largest):
    A = _spd(12, seed=5)
    rng = np.random.default_rng(6)
    gE, gX = rng.standard_normal(2), rng.standard_normal((12, 2))
    grads = []
    for lib in (ember, torch):
        a = _both(lib, A, requires_grad=True)
        E, X = lib.lobpcg(a, k=2, largest=largest, tol=1e-13, niter=-1)
        X = X * X[:1].sign()                # the same signs in both
        loss = (E * lib.tensor(gE)).sum() + (X * lib.tensor(gX)).sum()
        grads.append(lib.autograd.grad(loss, a)[0])
    np.testing.assert_allclose(np.asarray(grads[0]), grads[1].numpy(), atol=1e-9)


def _error(fn):
    try:
        fn()
    except Exception as e:          # noqa: BLE001 (any exception is the answer)
        return type(e), str(e).replace("torch.", "ember.")
    return None


@pytest.mark.parametrize("case", [
    "nonsquare", "B shape", "too many", "n too many", "X shape", "X dtype", "B dtype",
    "int", "half", "grad with B", "k=0"])
def test_lobpcg_errors(case):
    def call(lib):
        A = _both(lib, _spd(20))
        requires_grad = _both(lib, _spd(20), requires_grad=True)
        return {
            "nonsquare": lambda: lib.lobpcg(A[:, :19]),
            "B shape": lambda: lib.lobpcg(A, B=A[:19, :19]),
            "too many": lambda: lib.lobpcg(A, k=7),
            "n too many": lambda: lib.lobpcg(A, k=1, n=7),
            "X shape": lambda: lib.lobpcg(A, X=lib.ones(19, 3, dtype=lib.float64)),
            "X dtype": lambda: lib.lobpcg(A, X=lib.ones(20, 3)),
            "B dtype": lambda: lib.lobpcg(A, k=2, B=A.float()),
            "int": lambda: lib.lobpcg(A.long(), k=2),
            "half": lambda: lib.lobpcg(A.half(), k=2),
            "grad with B": lambda: lib.lobpcg(requires_grad, k=2, B=A)[0].sum().backward(),
            "k=0": lambda: lib.lobpcg(A, k=0),
        }[case]
    ours, theirs = _error(call(ember)), _error(call(torch))
    assert ours is not None and theirs is not None
    assert ours == theirs or (ours[0] is theirs[0] and case == "k=0"), (ours, theirs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_histogramdd_random_data(dtype):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((3, 50, 3)) * [1., 10., 0.1]).astype(dtype)
    w = rng.random((3, 50)).astype(dtype)
    for bins, kwargs in [(5, {}), ([3, 7, 11], {"weight": w}), ((4, 4, 2), {"density": True}),
                         (6, {"range": [-1, 1, -3.3, 4.1, 0, 0.05], "weight": w,
                              "density": True})]:
        ours = ember.histogramdd(ember.tensor(x), bins, **{
            k: ember.tensor(v) if k == "weight" else v for k, v in kwargs.items()})
        theirs = torch.histogramdd(torch.tensor(x), bins, **{
            k: torch.tensor(v) if k == "weight" else v for k, v in kwargs.items()})
        assert type(ours).__name__ == type(theirs).__name__ == "histogramdd"
        assert ours._fields == ("hist", "bin_edges") and len(theirs) == 2
        for o, t in zip((ours.hist, *ours.bin_edges), (theirs.hist, *theirs.bin_edges)):
            assert str(o.dtype)[6:] == str(t.dtype)[6:] and tuple(o.shape) == tuple(t.shape)
            np.testing.assert_allclose(np.asarray(o), t.numpy(), rtol=1e-6, atol=1e-6)


def test_histogramdd_16_bit_and_gradients():
    x = np.random.default_rng(8).random((200, 2))
    for dtype in ("float16", "bfloat16"):
        ours = ember.histogramdd(ember.tensor(x, dtype=getattr(ember, dtype)), 7,
                                 range=[0., 1., 0.25, 0.75])
        theirs = torch.histogramdd(torch.tensor(x, dtype=getattr(torch, dtype)), 7,
                                   range=[0., 1., 0.25, 0.75])
        for o, t in zip((ours.hist, *ours.bin_edges), (theirs.hist, *theirs.bin_edges)):
            assert o.dtype.name == dtype
            np.testing.assert_array_equal(np.asarray(o.float()), t.float().numpy())
    messages = []
    for lib in (ember, torch):
        r = lib.histogramdd(lib.tensor(x, requires_grad=True), [2, 3])
        assert r.hist.requires_grad and r.bin_edges[0].requires_grad
        with pytest.raises(RuntimeError) as caught:
            r.hist.sum().backward()
        messages.append(re.sub(r"torch\.", "ember.", str(caught.value)))
    assert messages[0] == messages[1]
