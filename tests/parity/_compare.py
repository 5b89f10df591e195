"""One way for the parity tests to run a program under ember and under PyTorch and compare what
each gives: its value (described by the caller), or the type and message of the error it raises.

``outcome`` captures one library's answer (``error`` when it must raise), ``recorded`` adds the
warnings raised on the way, ``assert_same`` runs ``fn(lib)`` for both libraries and asserts the
answers are equal (``assert_same_error``: the errors, PyTorch's names read as ember's), and
``assert_close``/``same_floats`` compare values within tolerances.
"""

import warnings

import numpy as np

import ember


def as_is(value):
    """The value unchanged (the default description of a result and of a message)."""
    return value


def ok(value):
    """``value`` tagged as a success, so that no value reads as an (error type, message) pair."""
    return "ok", value


def dtype_name(dtype):
    """The dtype's bare name ('float32') whichever library it comes from."""
    return str(dtype).split(".")[-1]


def is_tensor(value):
    """Whether ``value`` is an ember or a PyTorch tensor."""
    return hasattr(value, "requires_grad") and hasattr(value, "stride")


def first_line(text):
    """The first line of ``text`` (ember and PyTorch may add different detail below it)."""
    return text.split("\n")[0]


def ember_names(text):
    """``text`` with PyTorch's qualified names (``torch.x``) read as ember's (``ember.x``)."""
    return text.replace("torch.", "ember.")


def outcome(fn, *args, describe=as_is, message=as_is, catch=Exception, quiet=False):
    """``describe(fn(*args))``, or ``(error type name, message(str(error)))`` when it raises
    one of ``catch`` (just the type name when ``message`` is None); ``quiet`` hides warnings."""
    try:
        with warnings.catch_warnings():
            if quiet:
                warnings.simplefilter("ignore")
            result = fn(*args)
    except catch as error:
        if message is None:
            return type(error).__name__
        return type(error).__name__, message(str(error))
    return describe(result)


def error(fn, *args, **options):
    """``outcome`` of a call expected to fail: the error's (type name, message), None when
    ``fn(*args)`` returns."""
    return outcome(fn, *args, describe=lambda _: None, **options)


def recorded(fn, *args, **options):
    """``(outcome(fn, *args, **options), [(warning category name, message), ...])``, every
    warning raised on the way recorded."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        answer = outcome(fn, *args, **options)
    return answer, [(w.category.__name__, str(w.message)) for w in caught]


def same_floats(ours, theirs, rtol=0.0, atol=0.0):
    """Whether two flat sequences of floats have one length and agree within ``rtol``/``atol``
    (exactly by default), NaN matching NaN and inf matching only the same inf."""
    return len(ours) == len(theirs) and bool(
        np.allclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True))


def as_array(value):
    """A tensor of either library (detached, on the CPU), or any array-like, as a NumPy array."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def assert_close(ours, theirs, rtol=1e-7, atol=0.0, *, same_dtype=False, float32=None):
    """Assert two tensors (or arrays) have one shape, one dtype when ``same_dtype``, and values
    within ``rtol``/``atol``, NaN matching NaN; ``float32`` is an (rtol, atol) floor for
    float32 data, whose math libraries differ by a few ulps."""
    ours, theirs = as_array(ours), as_array(theirs)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    if same_dtype:
        assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    if float32 is not None and ours.dtype == np.float32:
        rtol, atol = max(rtol, float32[0]), max(atol, float32[1])
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)


def assert_same(fn, **options):
    """Assert that ``fn(ember)`` and ``fn(torch)`` have equal outcomes; return the outcome."""
    import torch

    ours = outcome(fn, ember, **options)
    theirs = outcome(fn, torch, **options)
    assert ours == theirs, f"ember gives {ours!r}, torch gives {theirs!r}"
    return ours


def assert_same_result(fn):
    """Assert that ``fn(ember)`` and ``fn(torch)`` return equal values (an error in either
    fails the test); return ember's."""
    return assert_same(fn, catch=())


def assert_same_error(call, make_input):
    """Assert that ``call(lib, make_input(lib))`` raises in PyTorch, and raises in ember the
    same error type with the same message (PyTorch's qualified names read as ember's)."""
    import torch

    theirs = error(call, torch, make_input(torch))
    assert theirs is not None, "torch does not raise"
    ours = error(call, ember, make_input(ember))
    assert ours == (theirs[0], ember_names(theirs[1])), f"ember {ours!r}, torch {theirs!r}"
