"""Round 34 leftovers (values and messages from PyTorch 2.13): argument errors before a
kernel's refusal of uint16/32/64, functional_call's keys and write-back, transposed
convolutions with a bias of another dtype, and quantile's ``out=`` check."""

import pytest

import ember

F = ember.nn.functional
SIZES = "The size of tensor a \\(2\\) must match the size of tensor b \\(3\\)"


def u(*shape, dtype=ember.uint32):
    return ember.zeros(*shape, dtype=dtype)


# --- uint16/32/64 -----------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda: u(2) + u(3),
    lambda: u(2) < u(3),
    lambda: u(2) % u(3),
    lambda: u(2) ** u(3),
    lambda: ember.lerp(u(2), u(3), 0.5),
    lambda: ember.clamp(u(2), u(3), u(3)),
    lambda: ember.logical_and(u(2), u(3)),
    lambda: ember.div(u(2), u(3), rounding_mode="trunc"),
    lambda: u(2, dtype=ember.uint16) < u(3),              # (then: no promotion)
    lambda: u(2) + ember.zeros(3, dtype=ember.int64),
    lambda: ember.zeros(2, dtype=ember.int64) % ember.zeros(3, dtype=ember.int64),
])
def test_shapes_are_checked_before_the_dtypes(fn):
    with pytest.raises(RuntimeError, match=SIZES):
        fn()


@pytest.mark.parametrize("fn, message", [
    (lambda: u(2) + u(2), "\"add_stub\" not implemented for 'UInt32'"),
    (lambda: u(2) % u(2), "\"remainder_cpu\" not implemented for 'UInt32'"),   # (zero divisor)
    (lambda: u(2) ** u(2), "\"pow\" not implemented for 'UInt32'"),
    (lambda: u(2, dtype=ember.uint16) + 70000, "\"add_stub\" not implemented for 'UInt16'"),
    (lambda: ember.clamp(u(2), -1), "\"clamp_min_scalar_cpu\" not implemented"),
    (lambda: ember.clamp(u(2), ember.tensor(1, dtype=ember.uint32)),
     "\"maximum_cpu\" not implemented"),
    (lambda: ember.clamp(u(2), None, ember.tensor(1, dtype=ember.uint32)),
     "\"minimum_cpu\" not implemented"),
    (lambda: ember.clamp(u(2), ember.tensor(0, dtype=ember.uint32),
                         ember.tensor(1, dtype=ember.uint32)), "\"clamp_cpu\" not implemented"),
    (lambda: ember.clamp(u(2), ember.tensor(0, dtype=ember.uint32), 5),
     "\"clamp_scalar_cpu\" not implemented"),
    (lambda: u(2).clamp_(ember.tensor(1, dtype=ember.uint32)), "\"maximum_cpu\" not implemented"),
    (lambda: F.hardtanh(u(2)), "\"clamp_scalar_cpu\" not implemented for 'UInt32'"),
    (lambda: u(2).to_sparse(), "\"nonzero_count_cpu\" not implemented for 'UInt32'"),
    (lambda: u(2, 2).to_sparse_csr(), "\"index_select\" not implemented for 'UInt32'"),
    (lambda: ember.nested.nested_tensor([u(2), u(3)]),
     "\"create_nt_buffer\" not implemented for 'UInt32'"),
    (lambda: ember.nested.as_nested_tensor([u(2)], dtype=ember.float),
     "\"create_nt_buffer\" not implemented for 'UInt32'"),
    (lambda: ember.sparse_coo_tensor(ember.tensor([[0, 1]]), ember.ones(2, dtype=ember.uint32),
                                     (2,)).coalesce(), "\"coalesce\" not implemented"),
    (lambda: ember.sparse_coo_tensor(ember.tensor([[0, 1]]), ember.ones(2, dtype=ember.uint32),
                                     (2,), is_coalesced=True).to_dense(),
     "\"add_dense_sparse_non_hybrid\" not implemented"),
])
def test_refusals_name_pytorchs_kernels(fn, message):
    with pytest.raises(NotImplementedError, match=message):
        fn()


def test_argument_errors_still_come_first():
    with pytest.raises(IndexError, match="Dimension out of range"):
        u(2).max(5)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        u(2).topk(5)
    with pytest.raises(RuntimeError, match="alpha must not be a floating point"):
        ember.add(u(2), u(2), alpha=2.5)
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max'"):
        ember.clamp(u(2))
    with pytest.raises(RuntimeError, match=r"output with shape \[2\] doesn't match the broadcast "
                                           r"shape \[2, 2\]"):
        u(2).add_(u(2, 2))
    with pytest.raises(RuntimeError, match=r"output with shape \[1\] doesn't match"):
        ember.tensor([1.5]).remainder_(ember.tensor([1 + 2j, 3 - 1j]))
    with pytest.raises(NotImplementedError, match="clamp is not supported for complex types"):
        ember.clamp(ember.zeros(2, dtype=ember.complex64), ember.zeros(3, dtype=ember.complex64))
    # an integer division by zero is still refused where the dtypes have a kernel
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        ember.zeros(2, dtype=ember.int64) % ember.zeros(2, dtype=ember.int64)


def test_out_of_another_dtype_is_checked_before_the_refusal():
    with pytest.raises(RuntimeError, match="Found dtype Float but expected UInt32"):
        ember.neg(u(2), out=ember.zeros(2))
    with pytest.raises(RuntimeError, match="Found dtype Float but expected UInt16"):
        ember.abs(u(2, dtype=ember.uint16), out=ember.zeros(2))
    with pytest.raises(NotImplementedError, match="\"sign_cpu\" not implemented"):
        ember.sgn(u(2), out=u(2))
    with pytest.raises(NotImplementedError, match="\"add_stub\" not implemented"):
        ember.add(u(2), u(2), out=ember.zeros(2))      # (add casts into out)


def test_errors_read_as_pytorchs_types():
    with pytest.raises(RuntimeError) as info:
        u(2) + ember.zeros(2, dtype=ember.int64)
    assert type(info.value).__name__ == "RuntimeError"
    assert "Promotion for uint16, uint32, uint64 types is not supported" in str(info.value)


def test_review_inplace_and_overflow_order():
    # (review) an in-place call's output shape before a promotion refusal and before an
    # integer division by zero; a complex self's refusal before both; numbers beyond 64 bits
    # refused by PyTorch's Scalar before the kernel
    shape = "output with shape \\[3, 1\\] doesn't match the broadcast shape \\[3, 4\\]"
    with pytest.raises(RuntimeError, match=shape):
        u(3, 1).add_(ember.zeros(3, 4, dtype=ember.int64))
    with pytest.raises(RuntimeError, match=shape):
        ember.zeros(3, 1, dtype=ember.float8_e4m3fn).add_(ember.zeros(3, 4))
    with pytest.raises(RuntimeError, match=shape):
        ember.ones(3, 1, dtype=ember.int64).floor_divide_(ember.zeros(3, 4, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="size of tensor a \\(3\\) must match .* b \\(4\\)"):
        u(3).add_(ember.zeros(4, dtype=ember.int64))
    with pytest.raises(NotImplementedError, match="^clamp is not supported for complex types"):
        ember.zeros(3, 1, dtype=ember.complex64).clamp_(ember.zeros(3, 4, dtype=ember.complex64))
    with pytest.raises(NotImplementedError, match="^clamp is not supported for complex types"):
        ember.zeros(3, dtype=ember.complex64).clamp_(ember.zeros(4, dtype=ember.complex64))
    with pytest.raises(RuntimeError, match="result type ComplexFloat can't be cast"):
        ember.zeros(3).clamp_(ember.zeros(3, dtype=ember.complex64))
    with pytest.raises(RuntimeError, match=shape):
        ember.zeros(3, 1).clamp_(ember.zeros(3, 4, dtype=ember.complex64))
    with pytest.raises(NotImplementedError, match="^floor is not supported for complex inputs"):
        ember.floor(ember.zeros(2, dtype=ember.complex64), out=ember.zeros(2))
    with pytest.raises(OverflowError, match="^int too big to convert"):
        u(2) + 2 ** 70
    with pytest.raises(OverflowError, match="^can't convert negative int to unsigned"):
        u(2) + (-2 ** 63 - 1)
    with pytest.raises(NotImplementedError, match="add_stub"):
        u(2) + 2 ** 40


def test_review_errors_pickle_as_pytorchs_types():
    import pickle
    errors = []
    for fn in (lambda: u(2) + ember.zeros(2, dtype=ember.int64),
               lambda: ember.ones(2, dtype=ember.int64) // ember.zeros(2, dtype=ember.int64),
               lambda: ember.clamp(ember.zeros(2, dtype=ember.complex64), 0)):
        with pytest.raises(Exception) as info:
            fn()
        errors.append(pickle.loads(pickle.dumps(info.value)))
    assert [(type(e), str(e)) for e in errors] == [
        (RuntimeError, "Promotion for uint16, uint32, uint64 types is not supported, "
                       "attempted to promote UInt32 and Long"),
        (RuntimeError, "ZeroDivisionError"),
        (NotImplementedError, "clamp is not supported for complex types")]


def test_what_still_runs():
    assert ember.clamp(u(2), 0.5).dtype is ember.float32
    assert (u(2) * u(2)).dtype is ember.uint32
    assert ember.nested.nested_tensor([u(2), u(3)], layout=ember.jagged).dtype is ember.uint32
    assert ember.nested.nested_tensor([u(2), ember.zeros(3)]).dtype is ember.uint32
    assert u(2, 2).to_sparse_bsr(1).layout is ember.sparse_bsr
    empty = ember.sparse_coo_tensor(ember.zeros(1, 0, dtype=ember.int64),
                                    ember.ones(0, dtype=ember.uint32), (2,))
    assert empty.to_dense().tolist() == [0, 0]


def test_to_sparse_dims_as_pytorch():
    with pytest.raises(RuntimeError, match="sparse_dim argument must be in >0 when"):
        ember.zeros(2, 3).to_sparse(0)
    with pytest.raises(RuntimeError, match="dense_dim argument must be !=self.dim\\(\\) when"):
        ember.zeros(2, 3).to_sparse(layout=ember.sparse_coo, dense_dim=2)
    assert ember.tensor(3.).to_sparse().to_dense().item() == 3.0


# --- functional_call ---------------------------------------------------------------------------

class Rebind(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("n", ember.zeros(1))
        self.lin = ember.nn.Linear(1, 1)

    def forward(self, x):
        self.n = self.n + 1
        return x + self.n


def test_functional_call_writes_rebound_tensors_back():
    m = Rebind()
    state = {"n": ember.full((1,), 5.)}
    assert ember.func.functional_call(m, state, (ember.zeros(1),)).tolist() == [6.]
    assert state["n"].tolist() == [6.] and m.n.tolist() == [0.]
    split = ({"n": ember.zeros(1)},)          # (a merged copy: the caller's dicts stay)
    ember.func.functional_call(m, split, (ember.zeros(1),))
    assert split[0]["n"].tolist() == [0.]


def test_functional_call_key_errors():
    m = Rebind()
    x = (ember.zeros(1),)
    with pytest.raises(KeyError, match="be empty string"):
        ember.func.functional_call(m, {"": ember.ones(1)}, x)
    with pytest.raises(TypeError, match="submodule `n`: .* is not an instance of torch.nn.Module"):
        ember.func.functional_call(m, {"n.": ember.ones(1)}, x)
    with pytest.raises(TypeError, match="attribute `training`: True is not an instance of "
                                        "torch.Tensor"):
        ember.func.functional_call(m, {"training": ember.ones(1)}, x)
    with pytest.raises(ValueError, match="Expected all elements of parameter_and_buffer_dicts"):
        ember.func.functional_call(m, [{}, 3], x)
    with pytest.raises(ValueError, match="to be a dict, or a list/tuple of dicts, but got "
                                         "<class 'NoneType'>"):
        ember.func.functional_call(m, None, x)
    with pytest.raises(ValueError, match=r"\['n', 'lin.bias'\] appeared in multiple"):
        ember.func.functional_call(m, ({"n": ember.ones(1), "lin.bias": ember.ones(1)},
                                       {"lin.bias": ember.ones(1), "n": ember.ones(1)}), x)


# --- transposed convolutions with a bias of another dtype ----------------------------------------

def test_conv_transpose_adds_a_bias_of_another_dtype_in_place():
    x = ember.ones(1, 2, 3, 3)
    w = ember.ones(2, 2, 2, 2)
    out = F.conv_transpose2d(x, w, ember.tensor([1 / 3, 0.5], dtype=ember.float64))
    assert out.dtype is ember.float32
    assert out[0, :, 0, 0].tolist() == pytest.approx([2 + 1 / 3, 2.5])
    b = ember.tensor([0.5, 1.0], dtype=ember.float64, requires_grad=True)
    F.conv_transpose1d(ember.ones(1, 2, 3), ember.ones(2, 2, 2), b).sum().backward()
    assert b.grad.dtype is ember.float64 and b.grad.tolist() == [4.0, 4.0]
    assert F.conv_transpose2d(x.double(), w.double(), ember.ones(2, dtype=ember.bool)).dtype \
        is ember.float64


@pytest.mark.parametrize("fn, message", [
    (lambda: F.conv_transpose3d(ember.ones(1, 2, 3, 3, 3), ember.ones(2, 2, 2, 2, 2),
                                ember.ones(2, dtype=ember.float64)),
     "expected scalar type Float but found Double"),
    (lambda: F.conv_transpose2d(ember.ones(1, 2, 3, 3), ember.ones(2, 1, 2, 2),
                                ember.ones(2, dtype=ember.float64), groups=2),
     r"Input type \(ember.FloatTensor\) and bias type \(ember.DoubleTensor\) should be the same "
     "or input should be a MKLDNN tensor and bias is a dense tensor"),
    (lambda: F.conv_transpose2d(ember.ones(1, 2, 3, 3), ember.ones(2, 2, 2, 2),
                                ember.ones(2, dtype=ember.complex64)),
     "result type ComplexFloat can't be cast to the desired output type Float"),
    (lambda: F.conv_transpose1d(ember.ones(1, 2, 3, dtype=ember.int64),
                                ember.ones(2, 2, 2, dtype=ember.int64), ember.ones(2)),
     "result type Float can't be cast to the desired output type Long"),
    (lambda: F.conv_transpose2d(ember.ones(1, 2, 3, 3, dtype=ember.complex64),
                                ember.ones(2, 2, 2, 2, dtype=ember.complex64),
                                ember.ones(3, dtype=ember.float64)),        # (before the size)
     r"Input type \(CPUComplexFloatType\) and bias type \(ember.DoubleTensor\) should be the "
     "same$"),
    (lambda: F.conv_transpose2d(ember.ones(1, 2, 3, 3, dtype=ember.float16),
                                ember.ones(2, 2, 2, 2, dtype=ember.float16),
                                ember.ones(3, dtype=ember.float64)),
     "expected bias to be 1-dimensional with 2 elements"),
])
def test_conv_transpose_bias_dtype_errors(fn, message):
    with pytest.raises(RuntimeError, match=message):
        fn()


# --- quantile's out= ------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [ember.quantile, ember.nanquantile])
def test_quantile_checks_out_before_dim_and_q_values(fn):
    x = ember.rand(3, 4)
    wrong = ember.zeros(1, dtype=ember.int64)
    message = "quantile\\(\\) out tensor must be same dtype as the input tensor"
    with pytest.raises(RuntimeError, match=message):
        fn(x, ember.tensor([1.5]), out=wrong)
    with pytest.raises(RuntimeError, match=message):
        fn(x, ember.tensor([0.5]), dim=5, out=wrong)
    with pytest.raises(RuntimeError, match="q tensor must be same dtype"):
        fn(x, ember.tensor([0.5], dtype=ember.float64), out=wrong)
    with pytest.raises(RuntimeError, match="interpolation must be one of"):
        fn(x, 0.5, interpolation="foo", out=wrong)
    out = ember.zeros(2)
    assert fn(ember.arange(5.), ember.tensor([0.25, 0.5]), out=out) is out
    assert out.tolist() == [1.0, 2.0]
