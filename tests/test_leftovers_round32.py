"""Round 32's small fixes, without PyTorch: a CUDA generator refused without CUDA (the CUDA
default generators still seedable), SGD keeping no momentum buffer from a step that failed,
``where``'s ``out=`` refusing numbers, sparse COO adds of bool and float16 refused as
PyTorch's CPU kernel refuses them (messages as PyTorch 2.13 gives them)."""

import warnings

import numpy as np
import pytest

import ember

_NO_CUDA = "Cannot get CUDA generator without ATen_cuda library. PyTorch splits its backend"


# --- Generator(device="cuda") --------------------------------------------------------------

@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:1"])
def test_cuda_generator_refused_without_cuda(device):
    if ember.cuda.is_available():
        pytest.skip("needs a machine without CUDA")
    with pytest.raises(RuntimeError) as info:
        ember.Generator(device=device)
    assert str(info.value).startswith(_NO_CUDA)
    assert str(info.value).endswith("dependency on *_cuda.so library.")


def test_cuda_default_generators_still_seeded_without_cuda():
    from ember.cuda import random as cuda_random
    gen = cuda_random.default_generator(0)
    before = gen.initial_seed()
    try:
        ember.cuda.manual_seed(1234)
        assert gen.initial_seed() == 1234
        twin = gen.clone_state()
        assert twin.device == gen.device and twin.initial_seed() == 1234
    finally:
        gen.manual_seed(before)


def test_cpu_generator_unchanged():
    g = ember.Generator("cpu:0").manual_seed(7)
    assert str(g.device) == "cpu" and g.initial_seed() == 7
    clone = g.clone_state()
    np.testing.assert_array_equal(ember.rand(4, generator=g).numpy(),
                                  ember.rand(4, generator=clone).numpy())


# --- SGD: no buffer from a failed step -----------------------------------------------------

@pytest.mark.parametrize("foreach", [False, True])
def test_sgd_failed_differentiable_step_keeps_no_buffer(foreach):
    p = ember.nn.Parameter(ember.tensor([1.0, 2.0]))
    p.grad = ember.tensor([0.5, -0.5])
    opt = ember.optim.SGD([p], lr=0.1, momentum=0.9, differentiable=True, foreach=foreach)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used "
                                           "in an in-place operation."):
        opt.step()
    assert dict(opt.state[p]) == {}
    np.testing.assert_array_equal(p.detach().numpy(), [1.0, 2.0])


@pytest.mark.parametrize("foreach", [False, True])
def test_sgd_buffers_kept_after_good_steps(foreach):
    p = ember.nn.Parameter(ember.tensor([1.0, 2.0]))
    q = ember.nn.Parameter(ember.tensor([3.0]))
    opt = ember.optim.SGD([p, q], lr=0.1, momentum=0.9, foreach=foreach)
    p.grad, q.grad = ember.tensor([0.5, -0.5]), ember.tensor([2.0])
    opt.step()
    np.testing.assert_allclose(opt.state[p]["momentum_buffer"].numpy(), [0.5, -0.5])
    opt.step()      # b = 0.9 b + g
    np.testing.assert_allclose(opt.state[p]["momentum_buffer"].numpy(), [0.95, -0.95],
                               rtol=1e-6)
    np.testing.assert_allclose(opt.state[q]["momentum_buffer"].numpy(), [3.8], rtol=1e-6)
    np.testing.assert_allclose(p.detach().numpy(), [1.0 - 0.1 * 1.45, 2.0 + 0.1 * 1.45],
                               rtol=1e-6)


# --- where(..., out=) ------------------------------------------------------------------------

def _where_inputs():
    return (ember.tensor([True, False, True]), ember.tensor([1.0, 2.0, 3.0]),
            ember.tensor([4.0, 5.0, 6.0]), ember.full((3,), -1.0))


@pytest.mark.parametrize("call, message", [
    (lambda c, x, y, o: ember.where(c, x, 0.5, out=o),
     "where(): argument 'other' (position 3) must be Tensor, not float"),
    (lambda c, x, y, o: ember.where(c, 0.5, y, out=o),
     "where(): argument 'input' (position 2) must be Tensor, not float"),
    (lambda c, x, y, o: ember.where(c, 1, 2, out=o),
     "where(): argument 'input' (position 2) must be Tensor, not int"),
    (lambda c, x, y, o: ember.where(c, input=x, other=0.5, out=o),
     "where(): argument 'other' must be Tensor, not float"),
    (lambda c, x, y, o: ember.where(c, x.requires_grad_(), 0.5, out=o),
     "where(): argument 'other' (position 3) must be Tensor, not float"),
])
def test_where_out_refuses_numbers(call, message):
    c, x, y, o = _where_inputs()
    with pytest.raises(TypeError) as info:
        call(c, x, y, o)
    assert str(info.value) == message
    np.testing.assert_array_equal(o.numpy(), [-1.0, -1.0, -1.0])   # untouched


def test_where_out_condition_only_lists_signatures():
    c, x, y, o = _where_inputs()
    with pytest.raises(TypeError) as info:
        ember.where(c, out=o)
    lines = str(info.value).split("\n")
    assert lines[0] == ("where() received an invalid combination of arguments - got (Tensor, "
                        "out=Tensor), but expected one of:")
    assert lines[2] == " * (Tensor condition, Tensor input, Tensor other, *, Tensor out = None)"


def test_where_out_with_tensors_and_numbers_without_out():
    c, x, y, o = _where_inputs()
    assert ember.where(c, x, y, out=o) is o
    np.testing.assert_array_equal(o.numpy(), [1.0, 5.0, 3.0])
    np.testing.assert_array_equal(ember.where(c, x, ember.tensor(0.5), out=o).numpy(),
                                  [1.0, 0.5, 3.0])
    np.testing.assert_array_equal(ember.where(c, x, 0.5).numpy(), [1.0, 0.5, 3.0])
    r = ember.where(c, 0.5, 1.5)
    assert r.dtype is ember.float32
    np.testing.assert_array_equal(r.numpy(), [0.5, 1.5, 0.5])


# --- sparse COO adds ---------------------------------------------------------------------------

def _coo(dtype, nnz=3, coalesced=False):
    indices = ember.tensor([[0, 1, 1], [1, 0, 0]])[:, :nnz]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = ember.sparse_coo_tensor(indices, ember.arange(1, nnz + 1).to(dtype), (2, 2))
    return s.coalesce() if coalesced else s


@pytest.mark.parametrize("dtype, name", [(ember.bool, "Bool"), (ember.float16, "Half")])
@pytest.mark.parametrize("call", [
    lambda d: _coo(d) + _coo(d),
    lambda d: _coo(d, 2, True) + _coo(d, 2, True),
    lambda d: ember.add(_coo(d), _coo(d), alpha=2),
    lambda d: _coo(d).add_(_coo(d)),
    lambda d: _coo(d) + _coo(d, 2),
])
def test_sparse_add_refused_for_bool_and_half(call, dtype, name):
    with pytest.raises(NotImplementedError) as info:
        call(dtype)
    assert str(info.value) == f"\"cadd_sparse\" not implemented for '{name}'"


def test_sparse_half_sub_and_half_with_long_refused():
    with pytest.raises(NotImplementedError, match="\"cadd_sparse\" not implemented for 'Half'"):
        _coo(ember.float16) - _coo(ember.float16)
    with pytest.raises(NotImplementedError, match="\"cadd_sparse\" not implemented for 'Half'"):
        _coo(ember.float16) + _coo(ember.int64)


def test_sparse_bool_add_into_empty_refused_as_long_alpha():
    with pytest.raises(RuntimeError) as info:
        _coo(ember.bool, 0) + _coo(ember.bool)
    assert str(info.value) == "result type Long can't be cast to the desired output type Bool"
    out = ember.add(_coo(ember.bool, 0), _coo(ember.bool), alpha=True)
    np.testing.assert_array_equal(out.to_dense().numpy(), [[False, True], [True, False]])


def test_sparse_adds_that_still_work():
    dense = np.array([[0.0, 1.0], [5.0, 0.0]])     # 1 at (0, 1); 2 + 3 at (1, 0)
    for dtype in (ember.bfloat16, ember.int8, ember.float32):
        out = _coo(dtype) + _coo(dtype)
        assert out.dtype is dtype
        np.testing.assert_array_equal(out.to_dense().float().numpy(), 2 * dense)
    out = _coo(ember.float16) + _coo(ember.float32)         # common dtype float32
    assert out.dtype is ember.float32
    np.testing.assert_array_equal(out.to_dense().numpy(), 2 * dense)
    out = _coo(ember.float16) + _coo(ember.float16, 0)      # nothing to add
    assert out.dtype is ember.float16
    np.testing.assert_array_equal(out.to_dense().float().numpy(), dense)
    out = _coo(ember.bool) + _coo(ember.int64)
    assert out.dtype is ember.int64
    np.testing.assert_array_equal(out.to_dense().numpy(), [[0, 2], [7, 0]])    # True is 1


def test_sparse_bool_alpha_needs_bool_result():
    with pytest.raises(RuntimeError, match="^Boolean alpha only supported for Boolean "
                                           "results.$"):
        ember.add(_coo(ember.float32), _coo(ember.float32), alpha=True)
    out = _coo(ember.float32).add_(_coo(ember.float32), alpha=True)     # in place: converted
    np.testing.assert_array_equal(out.to_dense().numpy(), [[0.0, 2.0], [10.0, 0.0]])
