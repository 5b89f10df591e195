"""Round 36 leftovers (values and messages as PyTorch 2.13's): a view taken before its base
called ``requires_grad_()`` (it requires grad, has no history, and the nodes of ops on it
compute nothing), ``out=`` of ops without a derivative written into a tensor with history
(recorded as NotImplemented), ``view(dtype)`` as no view to autograd, ``TypedStorage.fill_``,
normal samples of an empty integer shape, and complex powers of a zero base."""

import cmath
import math
import warnings

import pytest

import ember


def _names(node):
    return [None if f is None else type(f).__name__ for f, _ in node.next_functions]


# --- a view made before its base required grad ---------------------------------------------

_VIEWS = {"mT": lambda t: t.mT, "select": lambda t: t[0], "view": lambda t: t.view(9),
          "expand": lambda t: t[:1].expand(3, 3)}


def _late_view(make):
    t = ember.arange(9, dtype=ember.float64).reshape(3, 3) + ember.eye(3, dtype=ember.float64)
    x = make(t)
    t.requires_grad_()
    return t, x


@pytest.mark.parametrize("view", sorted(_VIEWS))
def test_late_view_is_a_leaf_without_history(view):
    t, x = _late_view(_VIEWS[view])
    assert (x.requires_grad, x.grad_fn, x.is_leaf) == (True, None, True)


@pytest.mark.parametrize("name, fn, node", [
    ("solve", lambda x: ember.linalg.solve(x, ember.ones(3, 2, dtype=ember.float64)),
     "LinalgSolveExBackward0"),
    ("inv", ember.linalg.inv, "LinalgInvExBackward0"),
    ("det", ember.linalg.det, "LinalgDetBackward0"),
    ("mul", lambda x: x * 2, "MulBackward0"),
    ("matmul", lambda x: x @ x, "MmBackward0"),
    ("qr", lambda x: ember.linalg.qr(x)[0], "LinalgQrBackward0"),
    ("cat", lambda x: ember.cat([x, x]), "CatBackward0")])
def test_ops_on_a_late_view_backward_to_nothing(name, fn, node):
    t, x = _late_view(_VIEWS["mT"])
    y = fn(x)
    assert type(y.grad_fn).__name__ == node
    assert y.requires_grad and y.grad_fn.next_functions == ((None, 0),) * len(
        y.grad_fn.next_functions)
    y.sum().backward()          # (solve's derivative read a saved input it had not kept)
    assert t.grad is None and x.grad is None


def test_late_view_beside_a_tracked_input():
    t, x = _late_view(_VIEWS["mT"])
    (x * 2 + t * 3).sum().backward()
    assert t.grad.tolist() == [[3.0] * 3] * 3


def test_late_view_written_in_place_is_refused():
    t, x = _late_view(_VIEWS["mT"])
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is "
                                           "being used in an in-place operation."):
        x.mul_(2)


# --- out= of ops with no derivative into a tensor with history -------------------------------

_NO_DERIVATIVE = {
    "floor_divide": lambda x, o: ember.floor_divide(x, 2, out=o),
    "heaviside": lambda x, o: ember.heaviside(x, ember.ones(4), out=o),
    "softmax": lambda x, o: ember.softmax(x, 0, out=o)}


def _input(requires_grad):
    x = ember.tensor([0.5, -1.5, 2.5, 3.0], requires_grad=requires_grad)
    return x.exp() if requires_grad else x


@pytest.mark.parametrize("name", sorted(_NO_DERIVATIVE))
@pytest.mark.parametrize("input_grad", [True, False])
def test_out_with_history_records_not_implemented(name, input_grad):
    out = ember.zeros(4, requires_grad=True).sin()
    res = _NO_DERIVATIVE[name](_input(input_grad), out)
    assert res is out and out.requires_grad
    assert type(out.grad_fn).__name__ == "NotImplemented"
    # the inputs requiring grad, then out's former history
    assert _names(out.grad_fn) == (["ExpBackward0"] if input_grad else []) + ["SinBackward0"]
    with pytest.raises(RuntimeError, match=f"derivative for aten::{name} is not implemented"):
        out.sum().backward()


@pytest.mark.parametrize("input_grad", [True, False])
def test_out_view_with_history_goes_through_copy_slices(input_grad):
    base = ember.zeros(2, 4, requires_grad=True).sin()
    out = base[0]
    ember.floor_divide(_input(input_grad), 2, out=out)
    assert type(base.grad_fn).__name__ == "CopySlices"
    assert _names(base.grad_fn) == ["SinBackward0"] + (["SelectBackward0"] if input_grad
                                                       else [])
    assert type(out.grad_fn).__name__ == "AsStridedBackward0"
    with pytest.raises(RuntimeError, match="derivative for aten::floor_divide is not"):
        base.sum().backward()


@pytest.mark.parametrize("input_grad", [True, False])
def test_out_leaf_requiring_grad_is_refused(input_grad):
    for out in (ember.zeros(4, requires_grad=True), ember.zeros(2, 4, requires_grad=True)[0]):
        with pytest.raises(RuntimeError, match=r"aten::floor_divide\(\): functions with "
                                               r"out=\.\.\. arguments don't support"):
            ember.floor_divide(_input(input_grad), 2, out=out)


def test_out_untracked_when_nothing_requires_grad():
    out = ember.zeros(4)
    ember.floor_divide(_input(False), 2, out=out)
    assert out.grad_fn is None and not out.requires_grad
    assert out.tolist() == [0.0, -1.0, 1.0, 1.0]


def test_out_with_history_in_no_grad_is_untracked():
    out = ember.zeros(4, requires_grad=True).sin()
    node = out.grad_fn
    with ember.no_grad():
        ember.floor_divide(_input(True), 2, out=out)
    assert out.grad_fn is node


# --- view(dtype) ------------------------------------------------------------------------------

@pytest.mark.parametrize("src, dst", [(ember.float32, ember.int32),
                                      (ember.float32, ember.float32),
                                      (ember.float32, ember.int16),
                                      (ember.float64, ember.float32),
                                      (ember.int8, ember.int32)])
def test_dtype_view_has_no_base_but_shares_memory_and_version(src, dst):
    x = ember.zeros(8, dtype=src)
    v = x.view(dst)
    assert v._base is None and not v._is_view()
    assert v.data_ptr() == x.data_ptr()
    assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    v.fill_(1)
    assert x._version == v._version == 1
    assert x.view(ember.uint8).tolist() == v.view(ember.uint8).tolist()
    assert any(x.view(ember.uint8).tolist())


def test_views_of_a_dtype_view_are_based_on_it():
    x = ember.zeros(8)
    v = x.view(ember.int32)
    w = v[:2]
    assert w._base is v
    w.fill_(1065353216)             # the bits of 1.0
    assert x.tolist()[:3] == [1.0, 1.0, 0.0]


def test_dtype_view_of_a_slice_keeps_its_storage_place():
    x = ember.zeros(2, 4)
    v = x[1].view(ember.int16)
    assert v._base is None and v.storage_offset() == 8
    assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_dtype_view_never_requires_grad():
    x = ember.zeros(4, requires_grad=True)
    assert not x.view(ember.float32).requires_grad
    with ember.no_grad():
        v = x.view(ember.float32)
    assert not v.requires_grad and v._base is None
    y = x.clone()
    y.view(ember.float32).mul_(2)   # (no view to autograd: y's history is untouched)
    assert type(y.grad_fn).__name__ == "CloneBackward0" and y._version == 1


def test_dtype_view_in_inference_mode():
    with ember.inference_mode():
        v = ember.zeros(4).view(ember.int32)
    assert v.is_inference() and v._base is None


# --- TypedStorage.fill_, UntypedStorage.fill_ -------------------------------------------------

def test_typed_storage_fill():
    x = ember.zeros(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (TypedStorage is deprecated: once per process)
        s = x.storage()
    assert s.fill_(2.5) is s
    assert x.tolist() == [2.5] * 4 and x._version == 0     # (PyTorch's: no version bump)
    s.fill_(True)
    assert x.tolist() == [1.0] * 4
    xi = ember.zeros(3, dtype=ember.int32)
    xi.storage().fill_(2.7)
    assert xi.tolist() == [2, 2, 2]
    y = ember.zeros(2, 3)
    y[1].storage().fill_(1)         # the whole memory
    assert y.tolist() == [[1.0] * 3] * 2


def test_typed_storage_fill_errors():
    s = ember.zeros(4).storage()
    with pytest.raises(RuntimeError, match="value cannot be converted to type float without "
                                           "overflow"):
        s.fill_(1 + 2j)
    with pytest.raises(TypeError, match="can't assign a str to a torch.FloatTensor"):
        s.fill_("a")


def test_storage_constructors_fill():
    assert ember.FloatStorage(3).fill_(1).tolist() == [1.0] * 3
    assert ember.TypedStorage(3, dtype=ember.float64).fill_(1.5).tolist() == [1.5] * 3
    assert ember.UntypedStorage(3).fill_(7).tolist() == [7, 7, 7]


# --- normal samples of an empty integer shape -------------------------------------------------

@pytest.mark.parametrize("dtype", [ember.int64, ember.int32, ember.bool, ember.uint8,
                                   ember.uint16])
def test_randn_like_empty_integers(dtype):
    r = ember.randn_like(ember.empty(0, 3, dtype=dtype))
    assert r.shape == (0, 3) and r.dtype is dtype
    assert ember.randn(0, dtype=dtype).dtype is dtype
    assert ember.normal(0.0, 1.0, (0,), dtype=dtype).dtype is dtype
    if dtype is not ember.uint16:   # (refused by the mean's add: see below)
        assert ember.normal(ember.empty(0, dtype=dtype), 1.0).dtype is dtype
    with pytest.raises(NotImplementedError, match='"normal_kernel_cpu" not implemented'):
        ember.randn_like(ember.empty(2, dtype=dtype))


def test_randn_empty_integer_refusals():
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype "
                                           "can require gradients"):
        ember.randn_like(ember.empty(0, dtype=ember.int64), requires_grad=True)
    with pytest.raises(NotImplementedError, match='"check_uniform_bounds" not implemented'):
        ember.rand_like(ember.empty(0, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        ember.normal(ember.empty(0), 1.0, out=ember.empty(0, dtype=ember.int64))
    assert ember.randn(0, out=ember.empty(2, dtype=ember.int64)).shape == (0,)
    # (no draw: the refusals of the mean's add, and of the copy into out)
    with pytest.raises(NotImplementedError, match="\"add_stub\" not implemented for 'UInt16'"):
        ember.normal(ember.zeros(0, dtype=ember.uint16), 1.0)
    with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported"):
        ember.normal(ember.zeros(0), 1.0, out=ember.empty(0, dtype=ember.float8_e5m2))


# --- complex powers of a zero base ------------------------------------------------------------

def _same(got, want):
    """Equal complex numbers, NaN equal to NaN and the signs of zeros compared."""
    def parts(z):
        return [("nan", 0) if math.isnan(p) else (p, math.copysign(1, p)) for p in (z.real, z.imag)]
    return [parts(z) for z in got] == [parts(z) for z in want]


NAN, INF = complex(math.nan, math.nan), complex(math.inf, math.nan)
MZ = complex(0.0, -0.0)    # (the literal -0j is complex(-0.0, -0.0))
_EXPONENTS = [0j, 0.5j, 1 + 0j, -1 + 0j, 2 + 1j, -2 + 1j, 1 - 1j, complex(math.inf, 0),
              complex(-math.inf, 0), complex(1, math.inf), complex(math.nan, 0)]
_AT_ZERO = [NAN, NAN, MZ, INF, MZ, INF, 0j, MZ, INF, NAN, NAN]


@pytest.mark.parametrize("dtype", [ember.complex64, ember.complex128])
@pytest.mark.parametrize("base", [0j, complex(-0.0, -0.0)])
def test_zero_base_tensor_exponent(dtype, base):
    b = ember.full((len(_EXPONENTS),), base, dtype=dtype)
    e = ember.tensor(_EXPONENTS, dtype=dtype)
    assert _same(ember.pow(b, e).tolist(), _AT_ZERO)
    assert _same((b ** e).tolist(), _AT_ZERO)
    assert _same(ember.pow(0j, e).tolist(), _AT_ZERO)
    assert _same(ember.pow(0, e).tolist(), _AT_ZERO)
    assert _same(ember.float_power(b, e).tolist(), _AT_ZERO)
    assert _same(b.clone().pow_(e).tolist(), _AT_ZERO)


@pytest.mark.parametrize("dtype", [ember.complex64, ember.complex128])
def test_zero_base_number_exponent(dtype):
    z = ember.zeros(1, dtype=dtype)
    got = [ember.pow(z, e).item() for e in _EXPONENTS]
    # a number exponent of 0 or 1 takes PyTorch's own kernels: ones, a copy
    assert _same(got, [1 + 0j, NAN, 0j] + _AT_ZERO[3:])
    got = [ember.pow(z, e).item() for e in (4.0, -3.0, 1.5, -1.5, 0.0, 1.0, math.inf)]
    assert _same(got, [MZ, INF, MZ, INF, 1 + 0j, 0j, MZ])
    got = [ember.float_power(z, e).item() for e in (0, 1, 2, 3, 0.5, -0.5, -1, -2, 4)]
    assert _same(got, [1 + 0j, 0j, 0j, 0j, 0j, INF, INF, INF, MZ])


def test_zero_base_real_tensor_and_nonzero_bases():
    assert _same(ember.pow(ember.zeros(2), ember.tensor([0j, -1 + 0j])).tolist(), [NAN, INF])
    b = ember.tensor([0, 1 + 1j, 2], dtype=ember.complex128)
    got = ember.pow(b, ember.tensor(2 + 1j, dtype=ember.complex128)).tolist()
    assert _same(got[:1], [MZ])
    for z, want in zip(got[1:], [(1 + 1j) ** (2 + 1j), 2 ** (2 + 1j)]):
        assert cmath.isclose(z, want, rel_tol=1e-12)
