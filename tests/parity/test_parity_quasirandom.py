"""ember.quasirandom.SobolEngine against torch.quasirandom.SobolEngine: the unscrambled points
bit for bit (draw, draw_base2, fast_forward and reset interleaved), the direction numbers,
dtypes, out=, errors and their messages, and repr. Scrambled points come from different
generators and are not compared."""

import numpy as np
import pytest

import ember
from ember.quasirandom import SobolEngine

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity
Theirs = torch.quasirandom.SobolEngine

# (operation, argument): "draw" n, "draw64" n (float64), "ff" n, "base2" m, "reset"
SCRIPT = [("draw", 1), ("draw", 1), ("draw", 6), ("ff", 0), ("draw", 1), ("ff", 5),
          ("draw", 50), ("reset", None), ("ff", 1), ("draw", 3), ("ff", 1000), ("draw64", 37),
          ("reset", None), ("base2", 3), ("base2", 3), ("base2", 4), ("draw", 0),
          ("reset", None), ("ff", 3), ("draw64", 1), ("draw", 200)]


def _run(engine, dtypes, op, arg):
    if op == "draw":
        return engine.draw(arg)
    if op == "draw64":
        return engine.draw(arg, dtype=dtypes.float64)
    if op == "base2":
        return engine.draw_base2(arg)
    if op == "ff":
        engine.fast_forward(arg)
    else:
        engine.reset()
    return None


@pytest.mark.parametrize("dim", [1, 2, 5, 100, 1000, 21201])
def test_unscrambled_points_match(dim):
    ours, theirs = SobolEngine(dim), Theirs(dim)
    np.testing.assert_array_equal(ours.sobolstate.numpy(), theirs.sobolstate.numpy())
    for op, arg in SCRIPT:
        if dim == 21201 and op == "draw" and arg == 200:
            arg = 20
        got, want = _run(ours, ember, op, arg), _run(theirs, torch, op, arg)
        if want is not None:
            assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
            assert tuple(got.shape) == tuple(want.shape)
            np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=f"{op} {arg}")
        assert ours.num_generated == theirs.num_generated
        np.testing.assert_array_equal(ours.quasi.numpy(), theirs.quasi.numpy())


def test_long_run_and_far_fast_forward():
    ours, theirs = SobolEngine(9), Theirs(9)
    np.testing.assert_array_equal(ours.draw(5000).numpy(), theirs.draw(5000).numpy())
    ours.fast_forward(12_345_678)
    theirs.fast_forward(12_345_678)
    np.testing.assert_array_equal(ours.draw(300, dtype=ember.float64).numpy(),
                                  theirs.draw(300, dtype=torch.float64).numpy())


def test_default_dtype_and_out():
    try:
        ember.set_default_dtype(ember.float64)
        torch.set_default_dtype(torch.float64)
        got, want = SobolEngine(3).draw(5), Theirs(3).draw(5)
        assert got.dtype is ember.float64 and want.dtype is torch.float64
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    finally:
        ember.set_default_dtype(ember.float32)
        torch.set_default_dtype(torch.float32)
    for ours_dtype, their_dtype in [(ember.float64, torch.float64), (ember.int64, torch.int64),
                                    (ember.float32, torch.float32)]:
        ours_out, their_out = ember.empty(7, dtype=ours_dtype), torch.empty(7, dtype=their_dtype)
        assert SobolEngine(3).draw(4, out=ours_out) is ours_out
        Theirs(3).draw(4, out=their_out)
        np.testing.assert_array_equal(ours_out.numpy(), their_out.numpy())
    got = SobolEngine(3).draw(1, dtype=ember.int32)
    want = Theirs(3).draw(1, dtype=torch.int32)
    assert got.dtype is ember.int32 and want.dtype is torch.int32
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def _message(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as e:       # noqa: BLE001  (the error is the result)
        return type(e), str(e)
    return None


@pytest.mark.parametrize("case", [
    lambda S, t: S(0), lambda S, t: S(21202), lambda S, t: S(-4),
    lambda S, t: S(3).draw(0), lambda S, t: S(3).draw(-2),
    lambda S, t: S(3).draw(2, dtype=t.float16), lambda S, t: S(3).draw(5, dtype=t.int64),
    lambda S, t: S(3).draw(-1, dtype=t.float16), lambda S, t: S(3).draw(2, dtype=t.bool),
    lambda S, t: S(3).draw(2, dtype=t.complex64),
    lambda S, t: S(3).draw_base2(-1),
    lambda S, t: S(3).draw(2, out=t.empty(3, requires_grad=True)),
])
def test_errors_match(case):
    assert _message(case, SobolEngine, ember) == _message(case, Theirs, torch)


def test_stateful_errors_match():
    messages = []
    for S, t in [(SobolEngine, ember), (Theirs, torch)]:
        engine = S(4)
        engine.draw(3)
        messages.append([_message(engine.draw_base2, 2), _message(engine.draw, -1),
                         _message(engine.draw, 1, dtype=t.float16), engine.num_generated])
    assert messages[0] == messages[1]
    assert messages[0][0][0] is ValueError and messages[0][3] == 3
    assert _message(SobolEngine, 2.5)[0] is _message(Theirs, 2.5)[0] is TypeError


@pytest.mark.parametrize("args", [(3,), (3, True), (3, True, 0), (3, False, 7), (21201, False)])
def test_repr_and_attributes(args):
    ours, theirs = SobolEngine(*args), Theirs(*args)
    assert repr(ours) == repr(theirs)
    for name in ("dimension", "scramble", "seed", "num_generated", "MAXBIT", "MAXDIM"):
        assert getattr(ours, name) == getattr(theirs, name)
    assert tuple(ours.sobolstate.shape) == tuple(theirs.sobolstate.shape)
    assert tuple(ours.shift.shape) == tuple(theirs.shift.shape)
    assert ours.draw(3).dtype is ember.float32


def test_scrambled_is_a_scrambled_sequence_too():
    # not the same stream as torch's, but the same kind of points: in [0, 1), and each of the
    # 2**k intervals of each dimension holds 2**(6-k) of the first 64 points in both
    for engine in (SobolEngine(6, scramble=True, seed=1), Theirs(6, scramble=True, seed=1)):
        points = engine.draw_base2(6).numpy()
        assert np.all((points >= 0) & (points < 1))
        for k in range(7):
            for column in np.floor(points * 2 ** k).astype(np.int64).T:
                np.testing.assert_array_equal(np.bincount(column, minlength=2 ** k),
                                              np.full(2 ** k, 2 ** (6 - k)))
