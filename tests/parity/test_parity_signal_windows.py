"""ember.signal.windows against torch.signal.windows: values (bit for bit where no
transcendental function is involved, else within an ulp of the window's scale), errors and
their messages, dtypes and requires_grad."""

import numpy as np
import pytest

import ember
from ember.signal import windows as ours
from tests.parity._compare import dtype_name, ember_names, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity
theirs = torch.signal.windows

DTYPES = [(torch.float32, ember.float32), (torch.float64, ember.float64)]
CASES = [("bartlett", {}), ("blackman", {}), ("cosine", {}), ("exponential", {}),
         ("exponential", {"tau": 2.5}), ("exponential", {"center": 1.3, "sym": False}),
         ("exponential", {"center": -2, "tau": 0.5, "sym": False}), ("gaussian", {}),
         ("gaussian", {"std": 0.37}), ("gaussian", {"std": 7}),
         ("general_cosine", {"a": [0.3, 0.2, 0.4, 0.1]}), ("general_cosine", {"a": (1, 2)}),
         ("general_hamming", {}), ("general_hamming", {"alpha": 0.61}), ("hamming", {}),
         ("hann", {}), ("kaiser", {}), ("kaiser", {"beta": 3.3}), ("kaiser", {"beta": 0.0}),
         ("nuttall", {})]


def _ulps(a, b):
    """How many representable values apart the elements of a and b are (same signs)."""
    ints = np.int32 if a.dtype == np.float32 else np.int64
    return np.abs(a.view(ints).astype(np.int64) - b.view(ints).astype(np.int64))


@pytest.mark.parametrize("name, kwargs", CASES)
@pytest.mark.parametrize("dtypes", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("M", [0, 1, 2, 5, 8, 17, 64])
def test_values_match_torch(name, kwargs, dtypes, sym, M):
    kwargs = {"sym": sym, **kwargs}
    expected = getattr(theirs, name)(M, dtype=dtypes[0], **kwargs).numpy()
    got = np.asarray(getattr(ours, name)(M, dtype=dtypes[1], **kwargs))
    assert got.dtype == expected.dtype and got.shape == (M,)
    eps = np.finfo(got.dtype).eps
    if name == "bartlett":               # linspace and 1 - |k|: no function to round
        np.testing.assert_array_equal(got, expected)
    elif name in ("cosine", "exponential", "gaussian"):
        assert _ulps(got, expected).max(initial=0) <= 1
    elif name == "kaiser":               # PyTorch's I0 and sqrt are a few ulps off
        np.testing.assert_allclose(got, expected, rtol=16 * eps, atol=eps)
    else:                                # sums of cosines: an ulp of their scale
        np.testing.assert_allclose(got, expected, rtol=0, atol=2 * eps)


def test_the_two_sided_linspace_is_bit_exact():
    # torch.linspace rounds its second half from the end: the periodic window is not symmetric
    for M in (5, 7, 100, 1001):
        for dt, et in DTYPES:
            np.testing.assert_array_equal(
                np.asarray(ours.bartlett(M, sym=False, dtype=et)),
                theirs.bartlett(M, sym=False, dtype=dt).numpy())


ERRORS = [
    "W.hann(-1)", "W.bartlett(-1, dtype=D.int32)", "W.kaiser(-2.0)", "W.cosine(3, dtype=D.float16)",
    "W.gaussian(3, dtype=D.bfloat16)", "W.exponential(3, dtype=D.int64)",
    "W.blackman(3, dtype=D.complex64)", "W.nuttall(3, layout=None)", "W.blackman(-1)",
    "W.gaussian(3, std=0)", "W.gaussian(3, std=-1.5)", "W.gaussian(-1, std=0)",
    "W.gaussian(0, std=0)", "W.gaussian(3, std=0, dtype=D.int32)", "W.exponential(3, tau=0)",
    "W.exponential(3, tau=-2)", "W.exponential(3, center=1.0)",
    "W.exponential(3, center=1.0, tau=0)", "W.exponential(0, center=1.0)",
    "W.kaiser(3, beta=-1)", "W.kaiser(0, beta=-1)", "W.kaiser(-1, beta=-1)",
    "W.general_cosine(3, a=None)", "W.general_cosine(3, a=[])", "W.general_cosine(3, a=())",
    "W.general_cosine(3, a=5)", "W.general_cosine(-1, a=None)",
    "W.general_cosine(3, a=[], dtype=D.int32)", "W.general_cosine(3, a=[1j])",
    "W.general_cosine(5, [1.0])", "W.hann(2.5)", "W.hann(3.5, device='cpu')",
    "W.gaussian(1.0)", "W.cosine(True)", "W.exponential(4.0)", "W.kaiser(3.5)",
    "W.general_cosine(2.5, a=[1.0])", "W.hann(None)", "W.gaussian(3, std=None)",
    "W.general_hamming(3, alpha=None)",
]


def _outcome(call, module, dtypes):
    """(dtype name, values) of the window ``call`` makes, or (error type, message)."""
    return outcome(eval, call, {"W": module, "D": dtypes, "np": np}, message=ember_names,
                   describe=lambda result: (dtype_name(result.dtype),
                                            str(np.asarray(result.detach()).tolist())))


@pytest.mark.parametrize("call", ERRORS)
def test_errors_match_torch(call):
    assert _outcome(call, ours, ember) == _outcome(call, theirs, torch)


@pytest.mark.parametrize("call", [
    "W.hann(0.0)", "W.hann(1.0)", "W.hann(True)", "W.hann(False)", "W.bartlett(1.0)",
    "W.kaiser(1.0)", "W.general_cosine(0, a=5)", "W.general_cosine(1, a=None)",
    "W.general_cosine(3, a=[0.5])", "W.general_cosine(3, a=[True, 2])",
    "W.general_cosine(3, a=iter([0.5, 0.5]))", "W.general_hamming(3, alpha=2)",
    "W.hann(3, sym=None)", "W.hann(3, sym=1)", "W.exponential(3, center=2, sym=0)",
    "W.gaussian(4, std=True)", "W.exponential(3, tau=True)", "W.gaussian(3, std=float('inf'))",
    "W.gaussian(3, std=float('nan'))", "W.kaiser(3, beta=float('nan'))",
    "W.exponential(3, center=float('nan'), sym=False)", "W.hann(M=3)",
    "W.hann(np.int64(4), device='cpu')", "W.kaiser(3, beta=float('inf'))",
    "W.kaiser(5, beta=1e30)", "W.general_cosine(3, a=[1e40])",
])
def test_edge_arguments_match_torch(call):
    assert _outcome(call, ours, ember) == _outcome(call, theirs, torch)


@pytest.mark.parametrize("name, kwargs", CASES[::3])
@pytest.mark.parametrize("M", [0, 1, 4])
def test_requires_grad_and_default_dtype(name, kwargs, M):
    mine = getattr(ours, name)(M, requires_grad=True, **kwargs)
    them = getattr(theirs, name)(M, requires_grad=True, **kwargs)
    assert mine.requires_grad and them.requires_grad
    assert mine.dtype == ember.float32 and them.dtype == torch.float32
    old_ours, old_theirs = ember.get_default_dtype(), torch.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    torch.set_default_dtype(torch.float64)
    try:
        mine = getattr(ours, name)(M, **kwargs)
        them = getattr(theirs, name)(M, **kwargs)
    finally:
        ember.set_default_dtype(old_ours)
        torch.set_default_dtype(old_theirs)
    assert mine.dtype == ember.float64 and them.dtype == torch.float64
    assert not mine.requires_grad and not them.requires_grad


def test_half_default_dtype_is_refused_as_torch_refuses_it():
    old_ours, old_theirs = ember.get_default_dtype(), torch.get_default_dtype()
    ember.set_default_dtype(ember.float16)
    torch.set_default_dtype(torch.float16)
    try:
        assert _outcome("W.hann(4)", ours, ember) == _outcome("W.hann(4)", theirs, torch)
    finally:
        ember.set_default_dtype(old_ours)
        torch.set_default_dtype(old_theirs)


def test_same_names():
    assert sorted(ours.__all__) == sorted(theirs.__all__)
    assert hasattr(ember, "signal") == hasattr(torch, "signal")
