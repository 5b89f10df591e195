"""Review of round 37's sorting (F2) and elementwise (F4) fixes: out= errors of namespaced
ops, autograd's refusal of out= before a kernel's checks, kthvalue/mode out= messages per
output, aliases offered to __torch_function__ as themselves, and node names (values from
torch 2.13)."""

import pytest

import ember
import ember.nn.functional as F
import ember.special as S
from ember.overrides import TorchFunctionMode

_GRAD_OUT = "functions with out=... arguments don't support automatic differentiation"


def test_out_count_errors_name_namespaced_ops_as_the_parser():
    x = ember.rand(3)
    with pytest.raises(TypeError, match=r"^special_i0e\(\): argument 'out' must be Tensor, "
                                        r"not tuple$"):
        S.i0e(x, out=(ember.empty(3),))
    with pytest.raises(TypeError, match=r"^linalg_vector_norm\(\): argument 'out' must be "
                                        r"Tensor, not tuple$"):
        ember.linalg.vector_norm(x, out=(ember.empty(()),))
    with pytest.raises(TypeError, match=r"^linalg_eigh\(\): argument 'out' must be tuple of "
                                        r"Tensors, not Tensor$"):
        ember.linalg.eigh(ember.rand(3, 3), out=ember.empty(3))
    with pytest.raises(TypeError, match=r"^special_expit\(\): argument 'out' must be Tensor"):
        S.expit(x, out=(ember.empty(3),))


@pytest.mark.parametrize("call, name", [
    (lambda x, v, i: ember.sort(x, 5, out=(v, i)), "sort"),
    (lambda x, v, i: ember.topk(x, 5, out=(v, i)), "topk"),
    (lambda x, v, i: ember.sum(x, 4, out=v), "sum"),
    (lambda x, v, i: ember.add(x, ember.rand(3), out=v), "add"),
])
def test_autograd_refuses_out_before_the_kernels_checks(call, name):
    x = ember.rand(2, requires_grad=True)
    v, i = ember.empty(2), ember.empty(2, dtype=ember.int64)
    with pytest.raises(RuntimeError, match=rf"^{name}\(\): {_GRAD_OUT}"):
        call(x, v, i)
    with pytest.raises((IndexError, RuntimeError)) as info:      # without grad: the kernel's
        call(x.detach(), v, i)
    assert _GRAD_OUT not in str(info.value)


@pytest.mark.parametrize("call, name", [
    (lambda x, v: ember.ceil(x, out=v), "ceil"),
    (lambda x, v: ember.clamp_min(x, 0, out=v), "clamp_min"),
    (lambda x, v: ember.maximum(x, x, out=v), "maximum"),
    (lambda x, v: ember.topk(x, 1, out=(v, ember.empty(2, dtype=ember.int64))), "topk"),
    (lambda x, v: ember.max(x, 0, out=(v, ember.empty(2, dtype=ember.int64))), "max"),
    (lambda x, v: ember.msort(x, out=v), "sort"),
])
def test_autograd_refuses_out_before_a_complex_refusal(call, name):
    x = ember.rand(2, dtype=ember.complex64, requires_grad=True)
    with pytest.raises(RuntimeError, match=rf"^{name}\(\): {_GRAD_OUT}"):
        call(x, ember.empty(2, dtype=ember.complex64))
    with pytest.raises((RuntimeError, NotImplementedError)) as info:
        call(x.detach(), ember.empty(2, dtype=ember.complex64))
    assert _GRAD_OUT not in str(info.value)


def test_a_composites_own_checks_still_come_before_autograds_refusal():
    x = ember.rand(3, requires_grad=True)
    v = ember.empty(())
    with pytest.raises(RuntimeError, match="^outer: Expected 1-D argument vec2, but got 2-D$"):
        ember.outer(x, ember.rand(4, 3), out=v)
    with pytest.raises(IndexError, match="^Dimension out of range"):
        ember.diff(x, dim=3, out=v)
    with pytest.raises(RuntimeError, match="^linalg.matrix_power: The input tensor A must have "
                                           "at least 2 dimensions.$"):
        ember.linalg.matrix_power(x, 2, out=v)
    with pytest.raises(RuntimeError, match=rf"^max\(\): {_GRAD_OUT}"):  # (max with a dim)
        ember.max(x, 5, out=(ember.empty(3), ember.empty(3, dtype=ember.int64)))
    with pytest.raises(RuntimeError, match=rf"^linalg_vector_norm\(\): {_GRAD_OUT}"):
        ember.norm(x, dim=3, out=ember.empty(3))


def test_kthvalue_and_mode_name_the_output_of_the_wrong_dtype():
    x = ember.tensor([1., 2.])
    v, v64 = ember.empty(()), ember.empty((), dtype=ember.float64)
    i, i32 = ember.empty((), dtype=ember.int64), ember.empty((), dtype=ember.int32)
    with pytest.raises(RuntimeError, match="^output indices must be of scalar type Long$"):
        ember.kthvalue(x, 1, out=(v, i32))
    with pytest.raises(RuntimeError, match="^output values must be of same type as input$"):
        ember.kthvalue(x, 1, out=(v64, i))
    with pytest.raises(RuntimeError, match="^expected scalar type 'Long' but got 'Int' for "
                                           "indices output$"):
        ember.mode(x, out=(v, i32))
    with pytest.raises(RuntimeError, match="^expected scalar type 'Float' but got 'Double' for "
                                           "values output$"):
        ember.mode(x, out=(v64, i))
    values, indices = ember.kthvalue(x, 2, out=(v, i))
    assert values.item() == 2.0 and indices.item() == 1
    c = ember.tensor([1j, 2])          # out's dtypes are checked before complex is refused
    with pytest.raises(RuntimeError, match="^output indices must be of scalar type Long$"):
        ember.kthvalue(c, 1, out=(ember.empty((), dtype=ember.complex64), i32))
    with pytest.raises(RuntimeError, match="^expected scalar type 'ComplexFloat' but got "
                                           "'Float' for values output$"):
        ember.mode(c, out=(v, i))
    with pytest.raises(NotImplementedError, match='"mode_cpu" not implemented'):
        ember.mode(c, out=(ember.empty((), dtype=ember.complex64), i))


class _Recording(ember.Tensor):
    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})


@pytest.mark.parametrize("func", [S.expit, S.gammaln, S.erf, S.logit, S.i0e, ember.absolute,
                                  ember.arccos, ember.sigmoid, ember.fix])
def test_torch_function_is_offered_the_alias_called(func):
    t = ember.rand(3).as_subclass(_Recording)
    _Recording.seen.clear()
    out = func(t)
    assert _Recording.seen[0] is func
    assert type(out) is _Recording


def test_torch_function_mode_is_offered_the_alias_called():
    seen = []

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    x = ember.rand(3)
    with Mode():
        S.expit(x)
        ember.sigmoid(x)
    assert seen == [S.expit, ember.sigmoid]
    assert S.expit.__name__ == "special_expit" and S.round.__name__ == "special_round"


def test_node_names_title_case_after_a_digit():
    x = ember.rand(5, requires_grad=True)
    x4 = ember.rand(1, 2, 6, 6, requires_grad=True)
    names = {
        "Log1PBackward0": ember.log1p(x), "Deg2RadBackward0": ember.deg2rad(x),
        "Rad2DegBackward0": ember.rad2deg(x), "SpecialI0EBackward0": S.i0e(x),
        "SpecialI1Backward0": S.i1(x), "SpecialXlog1PyBackward0": S.xlog1py(x, x),
        "AvgPool2DBackward0": F.avg_pool2d(x4, 2),
        "MaxPool2DWithIndicesBackward0": F.max_pool2d(x4, 2),
        "AdaptiveAvgPool2DBackward0": F.adaptive_avg_pool2d(x4, 3),
        "FractionalMaxPool2DBackward0": F.fractional_max_pool2d(x4, 2, output_size=3),
        "Expm1Backward0": ember.expm1(x), "Exp2Backward0": ember.exp2(x),
    }
    assert {name: type(t.grad_fn).__name__ for name, t in names.items()} == \
        {name: name for name in names}
