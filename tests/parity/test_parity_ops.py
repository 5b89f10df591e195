"""Every OpInfo sample run through PyTorch too: values, dtypes and gradients must agree.

Skipped unless PyTorch is installed (``make parity`` installs the CPU build of 2.13).
Internal ops (names starting with ``_``) take part when their entry says how to call torch
(``torch_op`` or ``torch_name``).
"""

import contextlib
import re
import warnings

import numpy as np
import pytest

import ember
from ember._host_values import host_values
from tests.ops.opdb import OPDB
from tests.ops.opdb.core import tensor_args

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

DTYPES = (ember.float32, ember.float64, ember.int64, ember.bool, ember.complex64,
          ember.bfloat16, ember.uint8, ember.float16, ember.int8, ember.int16, ember.int32,
          ember.complex128)

# PyTorch's own defaults, except: float16 allows two ulps (2e-3, not 1e-3), since torch
# accumulates some float16 reductions partly in float16 (nansum or logsumexp over several
# dims, prod) where ember rounds the float32 result once; float32 allows a few ulps because
# NumPy's and PyTorch's vectorized math libraries differ
TOLERANCES = {ember.bfloat16: (1.6e-2, 1e-5), ember.float16: (2e-3, 1e-5),
              ember.float32: (1e-5, 1e-6), ember.complex64: (1e-5, 1e-6),
              ember.float64: (1e-7, 1e-7), ember.complex128: (1e-7, 1e-7),
              # float8 results come from conversions only, which must round identically
              ember.float8_e4m3fn: (0.0, 0.0), ember.float8_e5m2: (0.0, 0.0)}

# Known differences that ember cannot fix in its op modules (test id -> why); each is a
# strict xfail, so the test reports when the difference goes away
KNOWN_DIFFERENCES = {
    **{f"test_inplace_parity[{name}_-bool]": f"{name}_ on bool raises NotImplementedError in "
       "torch; ember's in-place machinery (_inplace.py) rejects the int64 result first"
       for name in ("cumsum", "cumprod")},
    **{f"test_out_parity[fft.ihfftn-{dtype}]": "torch's ihfftn leaves out= untouched when it "
       "transforms a single dim" for dtype in ("float32", "float64", "bool", "uint8", "int8",
                                               "int16", "int32", "int64")},
    **{f"test_inplace_parity[addbmm_-{d}]": "torch's addbmm_ resizes a self that only "
       "broadcasts to the result; ember's in-place ops never resize self, like PyTorch's "
       "addmm_/baddbmm_" for d in ("float32", "float64", "float16", "bfloat16", "uint8", "int8",
                                  "int16", "int32", "int64", "complex64", "complex128")},
}


# Samples whose torch results depend on the machine (op name -> sample names): on AVX-512
# CPUs torch's vectorized float32 erf makes gelu(inf) NaN and flushes gelu(-10) to -0, and
# the condition number of a singular matrix is LAPACK's rounding noise, or inf
MACHINE_DEPENDENT = {"nn.functional.gelu": {"edges"}, "linalg.cond": {"singular p=None"}}


def _compared_samples(info, dtype):
    """The op's samples at ``dtype``, less those whose torch results vary by machine."""
    unstable = MACHINE_DEPENDENT.get(info.name, ())
    return [s for s in info.sample_inputs(dtype, False) if s.name not in unstable]


def _param(test, *values, id):
    """pytest.param for ``test``, marked if it is a known difference."""
    reason = KNOWN_DIFFERENCES.get(f"{test}[{id}]")
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(*values, id=id, marks=marks)


# the same bits, reinterpreted: torch has no NumPy interop for these dtypes, and a round trip
# through float32 is not exact (torch turns every NaN into a negative one in bfloat16)
_BIT_VIEWS = {ember.bfloat16: (np.int16, torch.bfloat16),
              ember.float8_e4m3fn: (np.uint8, torch.float8_e4m3fn),
              ember.float8_e5m2: (np.uint8, torch.float8_e5m2)}


def to_torch(x):
    if isinstance(x, ember.Tensor):
        arr = host_values(x.detach())    # its strides too (np.array would copy densely)
        if x.dtype in _BIT_VIEWS:
            bits, dtype = _BIT_VIEWS[x.dtype]
            out = torch.from_numpy(arr.view(bits)).view(dtype)
        else:
            out = torch.from_numpy(arr)
        return out.requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(to_torch(y) for y in x)
    if isinstance(x, dict):
        return {k: to_torch(v) for k, v in x.items()}
    if isinstance(x, ember.dtype):
        return getattr(torch, x.name)
    return x


def to_numpy(t):
    if t._is_zerotensor():
        t = torch.zeros(t.shape, dtype=t.dtype)
    t = t.detach().resolve_conj().resolve_neg()
    if t.dtype in (torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2):
        t = t.float()
    return t.numpy()


def torch_function(info):
    if info.torch_op is not None:
        return info.torch_op
    name = info.torch_name or info.name
    fn = torch
    for part in name.split("."):            # "linalg.inv" is torch.linalg.inv
        fn = getattr(fn, part, None)
    if fn is None and "." not in name:
        fn = getattr(torch.Tensor, name, None)
    return fn


def compared(info):
    """Whether the parity tests run ``info``: internal ops only when torch's call is known."""
    return not info.name.startswith("_") or info.torch_op is not None \
        or info.torch_name is not None


def cases():
    for info in OPDB:
        if not compared(info):
            continue
        for dtype in info.dtypes:
            if dtype in DTYPES:
                yield _param("test_forward_parity", info, dtype, id=f"{info.name}-{dtype.name}")


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _torch_dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def _tolerance(info, dtype):
    """The default for ``dtype``, or the entry's own looser tolerance (against torch, or
    against its NumPy reference)."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return 0.0, 0.0                 # integers and bool compare exactly
    rtol, atol = TOLERANCES[dtype]
    for own in (info.parity_tol.get(dtype, (0.0, 0.0)), info.tol.get(dtype, (0.0, 0.0))):
        rtol, atol = max(rtol, own[0]), max(atol, own[1])
    return rtol, atol


@contextlib.contextmanager
def _warn_always():
    ember.set_warn_always(True)
    torch.set_warn_always(True)
    try:
        yield
    finally:
        ember.set_warn_always(False)
        torch.set_warn_always(False)


def _warnings_of(fn, *args, **kwargs):
    """(outputs, {(category, message)}) of ``fn(*args, **kwargs)``; torch's "(Triggered
    internally at ...)" suffix is dropped."""
    # both frameworks repeat their once-per-process warnings, so that what ran before (in this
    # process or this test) does not decide whether they come
    with warnings.catch_warnings(record=True) as caught, _warn_always():
        warnings.simplefilter("always")
        result = _as_tuple(fn(*args, **kwargs))
    return result, {(w.category, re.sub(r"\s*\(Triggered internally at .*\)$", "",
                                        str(w.message), flags=re.DOTALL)) for w in caught}


def _same_special(a, b):
    """Where ``a`` and ``b`` are the same infinity, or both NaN."""
    return ((a == b) & np.isinf(a)) | (np.isnan(a) & np.isnan(b))


def assert_matches(ours, theirs, rtol, atol, sample):
    """``ours`` (a Tensor) close to ``theirs`` (an array). Complex values compare as complex
    numbers (as torch.testing does) except where one part is the same infinity (or NaN) in
    both: there the other part compares alone, since inf - inf would be NaN."""
    ours, theirs = host_values(ours.detach()), np.asarray(theirs)
    if ours.dtype.kind == "c":
        re = _same_special(ours.real, theirs.real)
        im = _same_special(ours.imag, theirs.imag)
        ours = np.concatenate([ours[~re & ~im], ours[re & ~im].imag, ours[im & ~re].real])
        theirs = np.concatenate([theirs[~re & ~im], theirs[re & ~im].imag,
                                 theirs[im & ~re].real])
    ember.testing.assert_close(ours, theirs, equal_nan=True, check_dtype=False, rtol=rtol,
                               atol=atol, msg=lambda m: f"{sample}\n{m}")


def call_both(info, fn, sample):
    """(ember's outputs, torch's outputs); torch's inputs are taken before ember runs, since
    an in-place op changes its input. Both must warn alike."""
    t_input, t_args, t_kwargs = (to_torch(sample.input), to_torch(sample.args),
                                 to_torch(sample.kwargs))
    ours, our_warnings = _warnings_of(info.function(), sample.input, *sample.args,
                                      **sample.kwargs)
    theirs, their_warnings = _warnings_of(fn, t_input, *t_args, **t_kwargs)
    assert our_warnings == their_warnings, f"{sample}: warnings differ"
    assert len(ours) == len(theirs), f"{sample}: ember gives {len(ours)} outputs, torch " \
                                     f"{len(theirs)}"
    return ours, theirs


@pytest.mark.parametrize("info,dtype", list(cases()))
def test_forward_parity(info, dtype):
    """Each sample's outputs, their dtypes and shapes, and its warnings match torch's."""
    fn = torch_function(info)
    if fn is None:
        pytest.skip(f"torch has no {info.name}")
    ember.manual_seed(0)
    for sample in _compared_samples(info, dtype):
        ours, theirs = call_both(info, fn, sample)
        for o, t in zip(ours, theirs):
            if not isinstance(t, torch.Tensor):
                assert not isinstance(o, ember.Tensor) and o == t, f"{sample}: {o} vs {t}"
                continue
            assert isinstance(o, ember.Tensor), f"{sample}: ember gives {type(o).__name__}"
            assert o.dtype.name == _torch_dtype_name(t), \
                f"{sample}: ember {o.dtype} vs torch {t.dtype}"
            assert tuple(o.shape) == tuple(t.shape), sample
            assert_matches(o, to_numpy(t), *_tolerance(info, o.dtype), sample)


def torch_leaves(x, found):
    """Torch tensors requiring grad inside a converted sample, in sample order."""
    if isinstance(x, torch.Tensor):
        if x.requires_grad:
            found.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            torch_leaves(y, found)
    elif isinstance(x, dict):
        for y in x.values():
            torch_leaves(y, found)
    return found


def _cotangent(rng, o):
    """Random weights for an output (complex ones for a complex output)."""
    w = rng.standard_normal(tuple(o.shape))
    if o.dtype.is_complex:
        w = w + 1j * rng.standard_normal(tuple(o.shape))
    return np.asarray(w)


def _grad_cases():
    for info in OPDB:
        if not (info.grad and compared(info)):
            continue
        if ember.float64 in info.dtypes:
            yield _param("test_gradient_parity", info, ember.float64, id=info.name)
        # entries with grad_samples choose their complex cases themselves
        if ember.complex128 in info.dtypes and info.grad_samples is None \
                and "grad_complex" not in info.skips:   # (refused in both)
            yield _param("test_gradient_parity", info, ember.complex128,
                         id=f"{info.name}-complex128")


# float64 gradients agree to a few ulps: a looser bound once hid a float64 gradient built
# from float32 literals. polygamma's series (SciPy's) differs from torch's by ~4e-10.
_GRADIENT_RTOL = {"digamma": 1e-8, "polygamma": 1e-8}


@pytest.mark.parametrize("info,dtype", list(_grad_cases()))
def test_gradient_parity(info, dtype):
    """Gradients (for random cotangents) of each grad sample match torch's."""
    fn = torch_function(info)
    if fn is None:
        pytest.skip(f"torch has no {info.name}")
    ember.manual_seed(0)
    make = info.grad_samples or info.sample_inputs
    for sample in make(dtype, True):
        leaves = [t for t in tensor_args(sample) if t.requires_grad]
        if not leaves:
            continue
        t_input, t_args, t_kwargs = (to_torch(sample.input), to_torch(sample.args),
                                     to_torch(sample.kwargs))
        t_leaves = torch_leaves([t_input, t_args, t_kwargs], [])   # before any in-place op
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # test_forward_parity compares them
            out = _as_tuple(info.function()(sample.input, *sample.args, **sample.kwargs))
            t_out = _as_tuple(fn(t_input, *t_args, **t_kwargs))
        assert len(out) == len(t_out), sample
        for o, t in zip(out, t_out):
            if isinstance(t, torch.Tensor):
                assert o.requires_grad == t.requires_grad, \
                    f"{sample}: requires_grad ember {o.requires_grad} vs torch {t.requires_grad}"
        pairs = [(o, t) for o, t in zip(out, t_out) if isinstance(t, torch.Tensor)
                 and t.requires_grad]
        if not pairs:
            continue
        rng = np.random.default_rng(1)
        weights = [_cotangent(rng, o) for o, _ in pairs]
        ours = ember.autograd.grad([o for o, _ in pairs], leaves,
                                   [ember.tensor(w) for w in weights], allow_unused=True)
        try:
            theirs = torch.autograd.grad([t for _, t in pairs], t_leaves,
                                         [torch.from_numpy(w) for w in weights],
                                         allow_unused=True)
        except RuntimeError as e:       # aten::silu_backward has no derivative in torch
            if "is not implemented" not in str(e):
                raise
            pytest.skip(f"torch differentiates no {info.name}: {e}")
        for o, t in zip(ours, theirs):
            if t is None:
                assert o is None or not np.any(np.asarray(o)), sample
                continue
            assert o is not None, f"{sample}: ember gives no gradient, torch does"
            assert o.dtype.name == _torch_dtype_name(t), \
                f"{sample}: gradient dtype ember {o.dtype} vs torch {t.dtype}"
            rtol = _GRADIENT_RTOL.get(info.name, 1e-10)
            assert_matches(o, to_numpy(t), rtol, 1e-12, sample)


def _torch_error(fn, sample):
    """The exception torch raises for ``sample``, or None."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn(to_torch(sample.input), *to_torch(sample.args), **to_torch(sample.kwargs))
        except Exception as e:          # noqa: BLE001 (any exception is the answer)
            return e
    return None


@pytest.mark.parametrize("info", [i for i in OPDB if i.error_inputs is not None and compared(i)],
                         ids=lambda i: i.name)
def test_error_parity(info):
    """Each bad input an entry lists makes torch raise the same exception type, with a message
    the entry's pattern matches (torch's names read as ember's)."""
    fn = torch_function(info)
    if fn is None:
        pytest.skip(f"torch has no {info.name}")
    for error in info.error_inputs():
        caught = _torch_error(fn, error.sample)
        if error.unsupported:
            assert caught is None, f"{error.sample}: torch raises {caught!r}"
            continue
        assert isinstance(caught, error.error_type), \
            f"{error.sample}: torch raises {caught!r}, ember {error.error_type.__name__}"
        message = str(caught).replace("torch.", "ember.")
        # messages that name "torch.<op>:" themselves are ember's verbatim (torch.geqrf:), also
        # where they print an ember dtype (lu_unpack's "ember.int32")
        verbatim = re.sub(r"torch\.(?=[a-z]+\d+\b)", "ember.", str(caught))
        if isinstance(caught, TypeError) and "received an invalid combination of arguments" \
                in message:
            continue            # torch lists its overloads; ember names the bad argument
        assert re.search(error.match, message) or re.search(error.match, verbatim), \
            f"{error.sample}: torch says {message!r}, the entry expects {error.match!r}"


def _inplace_cases():
    for info in OPDB:
        op = ember.ops._registry.REGISTRY.get(info.name)
        if op is None or not op.inplace or not compared(info) or info.torch_op is not None:
            continue
        name = (op.method_name or op.short_name) + "_"
        if getattr(torch.Tensor, (info.torch_name or name.rstrip("_")) + "_", None) is None:
            continue
        for dtype in info.dtypes:
            if dtype in DTYPES:
                yield _param("test_inplace_parity", info, dtype, name, id=f"{name}-{dtype.name}")


def _outcome(fn, *args, **kwargs):
    """(result, None) or (None, exception) of ``fn(*args, **kwargs)``, warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args, **kwargs), None
        except Exception as e:          # noqa: BLE001 (any exception is the answer)
            return None, e


@pytest.mark.parametrize("info,dtype,name", list(_inplace_cases()))
def test_inplace_parity(info, dtype, name):
    """``x.<op>_(...)`` changes ``x`` as torch's does, or raises the same exception type."""
    t_name = (info.torch_name or name.rstrip("_")) + "_"
    ember.manual_seed(0)
    for sample in _compared_samples(info, dtype):
        if not isinstance(sample.input, ember.Tensor):
            continue
        t_input, t_args, t_kwargs = (to_torch(sample.input).clone(), to_torch(sample.args),
                                     to_torch(sample.kwargs))
        x = sample.input.clone()
        ours, our_error = _outcome(getattr(x, name), *sample.args, **sample.kwargs)
        _, their_error = _outcome(getattr(t_input, t_name), *t_args, **t_kwargs)
        if their_error is not None or our_error is not None:
            assert type(our_error) is type(their_error), \
                f"{sample}: ember raises {our_error!r}, torch {their_error!r}"
            continue
        assert ours is x, f"{sample}: {name} does not return self"
        assert x.dtype.name == _torch_dtype_name(t_input), sample
        assert_matches(x, to_numpy(t_input), *_tolerance(info, x.dtype), sample)


def _out_cases():
    for info in OPDB:
        op = ember.ops._registry.REGISTRY.get(info.name)
        if op is None or not op.supports_out or not compared(info) or info.op is not None \
                or info.torch_op is not None:
            continue
        for dtype in info.dtypes:
            if dtype in DTYPES:
                yield _param("test_out_parity", info, dtype, id=f"{info.name}-{dtype.name}")


@pytest.mark.parametrize("info,dtype", list(_out_cases()))
def test_out_parity(info, dtype):
    """Empty ``out=`` tensors of the result dtype fill as torch's do (or both raise the same
    exception type). Wider out dtypes are not compared: torch accepts them for some ops only.
    Where torch's argument parser has no overload with ``out`` for a call it otherwise
    accepts (``sum(x, out=o)`` without dim, ``var_mean``, a number first operand), ember's
    single signature takes ``out=`` anyway; those calls are not compared."""
    fn = torch_function(info)
    if fn is None:
        pytest.skip(f"torch has no {info.name}")
    ember.manual_seed(0)
    for sample in _compared_samples(info, dtype):
        expected, _ = _outcome(info.function(), sample.input, *sample.args, **sample.kwargs)
        if expected is None:
            continue                    # test_error_parity covers the calls that raise
        expected = _as_tuple(expected)
        outs = tuple(ember.empty(0, dtype=e.dtype) for e in expected)
        t_outs = tuple(torch.empty(0, dtype=to_torch(e.dtype)) for e in expected)  # resizable
        if len(outs) == 1:
            outs, t_outs = outs[0], t_outs[0]
        _, our_error = _outcome(info.function(), sample.input, *sample.args, **sample.kwargs,
                                out=outs)
        t_input, t_args, t_kwargs = (to_torch(sample.input), to_torch(sample.args),
                                     to_torch(sample.kwargs))
        _, their_error = _outcome(fn, t_input, *t_args, **t_kwargs, out=t_outs)
        if isinstance(their_error, TypeError) and our_error is None:
            _, plain_error = _outcome(fn, t_input, *t_args, **t_kwargs)
            if plain_error is None:
                continue
        if their_error is not None or our_error is not None:
            assert type(our_error) is type(their_error), \
                f"{sample}: ember raises {our_error!r}, torch {their_error!r}"
            continue
        for o, t in zip(_as_tuple(outs), _as_tuple(t_outs)):
            assert o.dtype.name == _torch_dtype_name(t), sample
            assert tuple(o.shape) == tuple(t.shape), sample
            assert_matches(o, to_numpy(t), *_tolerance(info, o.dtype), sample)


# torch checks the out= dtype of these on some paths only (by operand kind or size): ember
# accepts on all of them; the error, where both raise, must still match
_OUT_CHECKED_ON_SOME_PATHS = {"clamp", "clamp_min", "clamp_max", "lerp", "diff", "inner",
                              "linalg.matrix_power", "matrix_power", "addbmm"}
# torch words the error by path (mv as addmv when empty, matmul as dot for vectors)
_OUT_MESSAGE_BY_PATH = {"mv", "matmul"}


def _wider_out_cases():
    for info in OPDB:
        op = ember.ops._registry.REGISTRY.get(info.name)
        if op is not None and op.supports_out and compared(info) and info.op is None \
                and info.torch_op is None and ember.float32 in info.dtypes:
            yield pytest.param(info, id=info.name)


@pytest.mark.parametrize("info", list(_wider_out_cases()))
def test_wider_out_dtype_parity(info):
    """A float64 ``out=`` for a float32 result: ember accepts it where torch casts into it,
    and raises torch's error where torch's kernel demands the result's dtype
    (ops/_out_dtypes.py)."""
    fn = torch_function(info)
    if fn is None:
        pytest.skip(f"torch has no {info.name}")
    ember.manual_seed(0)
    for sample in info.sample_inputs(ember.float32, False):
        expected, _ = _outcome(info.function(), sample.input, *sample.args, **sample.kwargs)
        if expected is None or not any(e.dtype is ember.float32 for e in _as_tuple(expected)):
            continue
        dtypes = [ember.float64 if e.dtype is ember.float32 else e.dtype
                  for e in _as_tuple(expected)]
        outs = tuple(ember.empty(0, dtype=d) for d in dtypes)
        t_outs = tuple(torch.empty(0, dtype=to_torch(d)) for d in dtypes)
        if len(outs) == 1:
            outs, t_outs = outs[0], t_outs[0]
        t_input, t_args, t_kwargs = (to_torch(sample.input), to_torch(sample.args),
                                     to_torch(sample.kwargs))
        _, their_error = _outcome(fn, t_input, *t_args, **t_kwargs, out=t_outs)
        if isinstance(their_error, TypeError) or (
                their_error is not None and "INTERNAL ASSERT" in str(their_error)):
            continue                    # no out= overload for this call, or a torch bug
        _, our_error = _outcome(info.function(), sample.input, *sample.args, **sample.kwargs,
                                out=outs)
        if info.name in _OUT_CHECKED_ON_SOME_PATHS and (our_error is None) != (
                their_error is None):
            continue
        assert type(our_error) is type(their_error), \
            f"{sample}: ember raises {our_error!r}, torch {their_error!r}"
        if their_error is not None and info.name not in _OUT_MESSAGE_BY_PATH:
            assert str(our_error) == str(their_error), sample
