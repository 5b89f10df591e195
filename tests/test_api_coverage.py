"""Names and keywords of PyTorch's API that an audit of ember's coverage found missing: the
keyword names PyTorch binds (``linalg.norm(input=...)``), ``out=`` where PyTorch takes it,
and small public names (``Tensor.module_load``, ``torch.SymInt``, ``torch.types``, ...)."""

import inspect
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F


# --- keyword names ---------------------------------------------------------------------------

_SQ = [[2.0, 1.0], [1.0, 3.0]]


@pytest.mark.parametrize("name, extra", [
    ("cholesky", {}), ("cholesky_ex", {}), ("cond", {}), ("eig", {}), ("eigh", {}),
    ("eigvals", {}), ("eigvalsh", {}), ("ldl_factor", {}), ("ldl_factor_ex", {}),
    ("matrix_exp", {}), ("matrix_norm", {}), ("matrix_power", {"n": 2}),
    ("matrix_rank", {}), ("norm", {}), ("pinv", {}), ("vector_norm", {}),
    ("solve_triangular", {"B": ember.eye(2), "upper": True}), ("lstsq", {"b": ember.eye(2)}),
])
def test_linalg_functions_take_input_by_keyword(name, extra):
    fn = getattr(ember.linalg, name)
    a = ember.tensor(_SQ)
    assert next(iter(inspect.signature(fn).parameters)) == "input"
    fn(input=a, **extra)
    with pytest.raises(TypeError, match="unexpected keyword argument 'A'"):
        fn(A=a, **extra)


def test_linalg_argument_errors_name_input():
    with pytest.raises(TypeError, match=r"argument 'input' \(position 1\) must be Tensor"):
        ember.linalg.norm("s")
    with pytest.raises(TypeError, match='^linalg_vector_norm\\(\\) missing 1 required positional '
                                        'arguments: "input"$'):
        ember.linalg.vector_norm()


def test_vector_norm_takes_the_documented_x_too():
    v = ember.tensor([3.0, 4.0])
    assert ember.linalg.vector_norm(x=v).item() == 5.0
    assert ember.linalg.vector_norm(input=v, ord=1).item() == 7.0
    with pytest.raises(TypeError, match="unexpected keyword argument 'x'"):
        ember.linalg.vector_norm(v, x=v)


def test_searchsorted_and_result_type_keyword_names():
    seq = ember.tensor([1.0, 2.0, 3.0])
    assert ember.searchsorted(seq, input=ember.tensor([2.5])).tolist() == [2]
    with pytest.raises(TypeError, match="unexpected keyword argument 'values'"):
        ember.searchsorted(seq, values=seq)
    assert ember.result_type(tensor=seq, other=1) is ember.float32
    assert ember.result_type(ember.tensor([1]), 2.5) is ember.float32


def test_set_default_device_takes_device_by_keyword():
    ember.set_default_device(device="cpu")
    try:
        assert ember.get_default_device() == ember.device("cpu")
    finally:
        ember.set_default_device(None)


# --- out= ------------------------------------------------------------------------------------

def test_conj_physical_out():
    x = ember.tensor([1 + 2j, 3 - 1j])
    out = ember.empty(2, dtype=ember.complex64)
    assert ember.conj_physical(x, out=out) is out
    assert out.tolist() == [1 - 2j, 3 + 1j]
    real = ember.empty(3)
    ember.conj_physical(ember.arange(3.0), out=real)
    assert real.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(RuntimeError, match="Found dtype Double but expected Float"):
        ember.conj_physical(ember.ones(2), out=ember.empty(2, dtype=ember.float64))


def test_narrow_copy_out():
    x = ember.arange(6.0).reshape(2, 3)
    out = ember.empty(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # resized without a warning
        assert ember.narrow_copy(x, 1, 1, 2, out=out) is out
    assert out.tolist() == [[1.0, 2.0], [4.0, 5.0]]
    with pytest.raises(RuntimeError, match=r"Expected self.dtype\(\) == output.dtype\(\)"):
        ember.narrow_copy(x, 1, 1, 2, out=ember.empty(0, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="functions with out=... arguments don't support"):
        ember.narrow_copy(x.requires_grad_(), 1, 1, 2, out=ember.empty(0))


# --- factories -------------------------------------------------------------------------------

def test_from_dlpack_copy_and_device():
    a = np.arange(3.0)
    t = ember.from_dlpack(a, copy=True)
    t[0] = 9.0
    assert a.tolist() == [0.0, 1.0, 2.0]
    t = ember.from_dlpack(a, device="cpu", copy=False)
    t[0] = 9.0
    assert a.tolist() == [9.0, 1.0, 2.0]
    x = ember.arange(3.0)
    assert ember.from_dlpack(x, copy=True).data_ptr() != x.data_ptr()
    assert ember.from_dlpack(x).data_ptr() == x.data_ptr()


def test_new_full_and_new_empty_strided_take_layout_and_pin_memory():
    x = ember.ones(2, dtype=ember.float64)
    y = x.new_full((2,), 3.0, layout=ember.strided, pin_memory=False)
    assert y.tolist() == [3.0, 3.0] and y.dtype is ember.float64
    z = x.new_empty_strided((2, 2), (1, 2), layout=ember.strided, pin_memory=False)
    assert z.stride() == (1, 2)


# --- values ----------------------------------------------------------------------------------

def test_matrix_exp_float32_is_correctly_rounded():
    # exp([[2, 1], [1, 3]]) in double precision: SciPy's float32 expm was ~30 ulps off
    got = ember.linalg.matrix_exp(ember.tensor(_SQ)).tolist()
    want = [[13.1815071, 14.88394368], [14.88394368, 28.06545077]]
    np.testing.assert_allclose(got, want, rtol=3e-7)


# --- small names -----------------------------------------------------------------------------

def test_tensor_device_kind_queries_and_module_load():
    x = ember.ones(2)
    assert not (x.is_xla or x.is_ipu or x.is_mtia or x.is_maia or x.is_vulkan)
    assert x.is_distributed() is False
    copied = x.module_load(ember.zeros(2))
    assert x.tolist() == [0.0, 0.0] and copied.tolist() == [0.0, 0.0]
    p = ember.ones(2, requires_grad=True)
    new = ember.full((2,), 5.0)
    assert p.module_load(new, assign=True).tolist() == [5.0, 5.0]
    assert p.tolist() == [1.0, 1.0]


def test_symbolic_types_and_errors():
    assert not isinstance(3, ember.SymInt)
    assert not isinstance(3.0, (ember.SymFloat, ember.SymBool))
    assert issubclass(ember.AcceleratorError, RuntimeError)
    assert ember.cuda.AcceleratorError is ember.AcceleratorError
    assert ember.DisableTorchFunctionSubclass is ember.overrides.DisableTorchFunctionSubclass


def test_torch_function_helpers_are_reexported():
    x = ember.ones(1)
    assert F.has_torch_function_variadic(x, x) is False
    assert F.has_torch_function_unary(x) is False
    assert F.handle_torch_function is ember.overrides.handle_torch_function
    assert ember.autograd.has_torch_function((x,)) is False
    assert ember.autograd.is_tensor_like(x)


def test_jit_switches_run_eagerly():
    def f(x):
        return x + 1
    assert ember.jit.script_if_tracing(f) is f
    with ember.jit.optimized_execution(False), ember.jit.fuser("fuser1"):
        pass
    with pytest.raises(Exception, match=r"unrecognized fuser option \(name: bogus\)"):
        with ember.jit.fuser("bogus"):
            pass
    old = ember.jit.set_fusion_strategy([("DYNAMIC", 3)])
    assert old == [("STATIC", 2), ("DYNAMIC", 10)]
    assert ember.jit.set_fusion_strategy(old) == [("DYNAMIC", 3)]
    with pytest.raises(ValueError, match="only supported 'STATIC' or 'DYNAMIC', got: X"):
        ember.jit.set_fusion_strategy([("X", 1)])
    assert ember.jit.onednn_fusion_enabled() is False


def test_typing_modules():
    from ember.nn.common_types import _size_2_t, _ratio_any_t  # noqa: F401
    from ember.types import Device, Number, _Number, _size  # noqa: F401
    from ember.utils.model_zoo import load_url
    from ember.hub import load_state_dict_from_url
    assert load_url is load_state_dict_from_url
    assert isinstance(2.5, _Number)
    assert _size_2_t == (int | tuple[int, int])


def test_generator_clone_state_and_offsets():
    g = ember.Generator().manual_seed(3)
    c = g.clone_state()
    assert c is not g and c.initial_seed() == 3
    assert ember.rand(3, generator=c).tolist() == ember.rand(3, generator=g).tolist()
    with pytest.raises(RuntimeError, match="CPU Generator does not use offset"):
        g.get_offset()
    with pytest.raises(RuntimeError, match="CPU Generator does not use offset"):
        g.set_offset(2)


def test_split_and_tensor_split_take_pytorchs_keyword_names():
    t = ember.arange(6.0).view(2, 3)
    assert [p.shape for p in t.split(split_size=1)] == [(1, 3), (1, 3)]
    assert [p.shape for p in ember.tensor_split(t, sections=3, dim=1)] == [(2, 1)] * 3
    assert [p.shape for p in ember.tensor_split(t, indices=[1], dim=1)] == [(2, 1), (2, 2)]
    assert len(t.tensor_split(tensor_indices_or_sections=ember.tensor(2))) == 2
    with pytest.raises(TypeError, match="unexpected keyword argument 'indices'"):
        ember.tensor_split(t, sections=2, indices=[1])
