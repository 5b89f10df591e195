"""Every registered op, tested by construction from its OpInfo entry (tests/ops/opdb/)."""

import numpy as np
import pytest

import ember
from ember.ops._registry import REGISTRY
from ember.testing import assert_close

from tests.ops.opdb import OPDB
from tests.ops.opdb.core import replace_tensors, tensor_args, to_numpy

BY_NAME = {info.name: info for info in OPDB}


def test_every_op_has_an_opinfo():
    missing = set(REGISTRY) - set(BY_NAME)
    assert not missing, f"ops without an OpInfo in tests/ops/opdb/: {sorted(missing)}"


def test_every_opinfo_names_a_registered_op():
    unknown = set(BY_NAME) - set(REGISTRY)
    assert not unknown, f"OpInfo entries for ops that are not registered: {sorted(unknown)}"


def _cases(kind):
    return list(_iter_cases(kind))


def _iter_cases(kind):
    for info in OPDB:
        if kind in info.skips:
            continue
        if kind in ("forward", "inplace", "out"):
            for dtype in info.dtypes:
                yield pytest.param(info, dtype, id=f"{info.name}-{dtype.name}")
        else:
            yield pytest.param(info, id=info.name)


def _samples(info, dtype, requires_grad=False):
    ember.manual_seed(0)
    make = info.grad_samples if requires_grad and info.grad_samples else info.sample_inputs
    samples = list(make(dtype, requires_grad))
    assert samples, f"{info.name} has no samples for {dtype}"
    return samples


def _call(info, sample, **extra):
    return info.function()(sample.input, *sample.args, **sample.kwargs, **extra)


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _tolerance(info, dtype):
    if dtype in info.tol:
        return info.tol[dtype]
    return {ember.float16: (1e-3, 1e-3), ember.bfloat16: (1.6e-2, 1e-2),
            ember.float32: (1.3e-5, 1e-5), ember.complex64: (1.3e-5, 1e-5)}.get(
        dtype, (1e-7, 1e-7))


@pytest.mark.parametrize("info,dtype", _cases("forward"))
def test_forward_matches_reference(info, dtype):
    rtol, atol = _tolerance(info, dtype)
    for sample in _samples(info, dtype):
        result = _call(info, sample)
        if info.ref is None:
            continue
        expected = info.ref(to_numpy(sample.input), *to_numpy(sample.args),
                            **to_numpy(sample.kwargs))
        for got, want in zip(_as_tuple(result), _as_tuple(expected)):
            want = np.asarray(want)
            assert tuple(got.shape) == want.shape, f"{sample}: shape {got.shape} != {want.shape}"
            assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True, check_dtype=False,
                         msg=lambda m: f"{sample}:\n{m}")


@pytest.mark.parametrize("info,dtype", _cases("forward"))
def test_result_dtype(info, dtype):
    for sample in _samples(info, dtype):
        want = info.expected_dtype(dtype, sample)
        out = _as_tuple(_call(info, sample))[0]
        assert out.dtype is want, f"{sample}: dtype {out.dtype}, expected {want}"


def _check_gradients(info, dtype, check, max_numel=None):
    """Run ``check`` (gradcheck or gradgradcheck) on the op as a function of each grad
    sample's inputs that require grad (samples with inputs over ``max_numel`` elements are
    left out, to bound the numerical Jacobians' cost)."""
    fn = info.function()
    for sample in _samples(info, dtype, requires_grad=True):
        inputs = [t for t in tensor_args(sample) if t.requires_grad]
        if not inputs or max_numel and any(t.numel() > max_numel for t in inputs):
            continue

        def f(*tensors, sample=sample):
            full = iter(tensors)
            args = [next(full) if t.requires_grad else t for t in tensor_args(sample)]
            s = replace_tensors(sample, args)
            return fn(s.input, *s.args, **s.kwargs)
        assert check(f, inputs), sample


@pytest.mark.parametrize("info", _cases("grad"))
def test_gradcheck(info):
    if not info.grad or ember.float64 not in info.dtypes:
        pytest.skip("not differentiable in float64")
    _check_gradients(info, ember.float64, ember.autograd.gradcheck)


def _complex_grad_cases():
    return [pytest.param(info, id=info.name) for info in OPDB
            if info.grad and ember.complex128 in info.dtypes
            and not {"grad", "grad_complex"} & set(info.skips)]


@pytest.mark.parametrize("info", _complex_grad_cases())
def test_gradcheck_complex(info):
    """PyTorch's conjugate Wirtinger gradients, checked numerically in complex128 (wrong
    conjugation in linear's and the RNNs' gradients went unseen by the float64 check)."""
    _check_gradients(info, ember.complex128, ember.autograd.gradcheck, max_numel=40)


@pytest.mark.parametrize("info", _cases("gradgrad"))
def test_gradgradcheck(info):
    if not info.gradgrad:
        pytest.skip("second derivative not declared")
    _check_gradients(info, ember.float64, ember.autograd.gradgradcheck, max_numel=12)


@pytest.mark.parametrize("info,dtype", _cases("inplace"))
def test_inplace_variant_matches(info, dtype):
    op = REGISTRY[info.name]
    if not op.inplace:
        pytest.skip("no in-place variant")
    method = getattr(ember.Tensor, (op.method_name or op.short_name) + "_")
    for sample in _samples(info, dtype):
        if not isinstance(sample.input, ember.Tensor) or \
                info.expected_dtype(dtype, sample) is not dtype:
            continue
        expected = _call(info, sample)
        if expected.shape != sample.input.shape:
            continue
        target = sample.input.clone()
        returned = method(target, *sample.args, **sample.kwargs)
        assert returned is target
        assert target._version == 1
        assert_close(target, expected, equal_nan=True, msg=lambda m: f"{sample}:\n{m}")


@pytest.mark.parametrize("info,dtype", _cases("out"))
def test_out_variant_matches(info, dtype):
    op = REGISTRY[info.name]
    if not op.supports_out or info.op is not None:
        pytest.skip("no out= variant")
    for sample in _samples(info, dtype):
        if not _out_takes(op, sample):      # PyTorch's parser refuses the call
            with pytest.raises(TypeError):
                _call(info, sample, out=ember.empty(0, dtype=dtype))
            continue
        expected = _as_tuple(_call(info, sample))
        outs = tuple(ember.empty(0, dtype=e.dtype) for e in expected)
        result = _call(info, sample, out=outs if len(outs) > 1 else outs[0])
        for o, e in zip(_as_tuple(result), expected):
            assert_close(o, e, equal_nan=True, msg=lambda m: f"{sample}:\n{m}")


def _out_takes(op, sample):
    """Whether the op's ``out=`` form takes the sample's operands (where's: three tensors)."""
    if not getattr(op.out_prepare, "all_inputs", False):
        return True
    operands = (sample.input, *sample.args)
    return len(operands) == len(op.input_names) and all(
        isinstance(a, ember.Tensor) for a in operands)


@pytest.mark.parametrize("info", _cases("errors"))
def test_error_inputs(info):
    if info.error_inputs is None:
        pytest.skip("no error inputs")
    for err in info.error_inputs():
        with pytest.raises(err.error_type, match=err.match):
            _call(info, err.sample)
