"""What the discrete-latent and conditional-computation programs of round 29
(test_parity_programs_round29_discrete.py and its _cond sibling) found, pinned against PyTorch:
a hypernetwork that emits per-sample kernels of the wrong rank for F.conv{n}d (a (O, C, k)
kernel for conv2d, say) gets PyTorch's first complaint, about the stride (padding, dilation,
output_padding) its parser made n long, not the input's rank; with padding='same' the input's
rank in that path's own words ("weight[...]", no space). Under vmap, a straight-through one-hot
written by ``zeros_like(...).scatter_(...)`` (or a per-example mask by masked_fill_) warns as
PyTorch's vmap does: its fallback's warning names the in-place overload
(``aten::scatter_.value``, ``aten::masked_fill_.Tensor``, ``aten::lerp_.Scalar``), and in-place
ops PyTorch batches (masked_fill_ with a number, index_add_, index_fill_, scatter_add_,
scatter_reduce_) do not warn, while the elementwise ones it does not batch (clamp_, lerp_,
addcmul_, fmod_, comparisons, ...) do."""

import re

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _message(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the error is the result compared
        return type(e).__name__, str(e).split("\n")[0].replace("torch.", "ember.")
    return None


CASES = [
    ("conv2d", (1, 4, 5, 5), (2, 4, 3), {}),
    ("conv2d", (4, 5, 5), (2, 4, 3), {}),
    ("conv2d", (1, 4, 5, 5), (2, 4, 3, 3, 3), {"stride": 1, "padding": 0, "dilation": 1}),
    ("conv2d", (1, 4, 5, 5), (2, 4, 3, 3, 3), {"stride": (1, 1, 1)}),
    ("conv2d", (1, 4, 5, 5), (2, 4, 3, 3, 3), {"stride": (1, 1, 1), "padding": [0]}),
    ("conv2d", (1, 4, 5, 5), (2, 4, 3), {"stride": [1], "padding": [0], "dilation": [1]}),
    ("conv2d", (1, 4, 5, 5), (2, 4, 3), {"padding": "same"}),
    ("conv2d", (1, 4, 5, 5), (2, 4, 3), {"padding": "valid"}),
    ("conv3d", (1, 4, 5, 5), (2, 4, 3, 3), {}),
    ("conv3d", (1, 4, 5, 5), (2, 4, 3, 3), {"padding": "same"}),
    ("conv1d", (1, 4, 5), (2, 4, 3, 3), {}),
    ("conv1d", (1, 4, 5), (2, 4, 3, 3), {"padding": "same"}),
    ("conv_transpose2d", (1, 4, 5, 5), (4, 2, 3), {}),
    ("conv_transpose2d", (1, 4, 5, 5), (4, 2, 3), {"stride": [1], "padding": [0]}),
    ("conv_transpose2d", (1, 4, 5, 5), (4, 2, 3),
     {"stride": [1], "padding": [0], "output_padding": [0], "dilation": [1]}),
]


@pytest.mark.parametrize("name,x,w,kwargs", CASES)
def test_conv_weight_of_another_rank_errors_like_torch(name, x, w, kwargs):
    def run(lib):
        fn = getattr(lib.nn.functional, name)
        return _message(lambda: fn(lib.ones(*x), lib.ones(*w), None, **kwargs))
    theirs = run(torch)
    assert theirs is not None and theirs[0] == "RuntimeError"
    assert run(ember) == theirs


def test_hypernetwork_kernel_rank_error_like_torch():
    """A hypernetwork's per-sample kernels reshaped one dim short, applied by grouped conv2d."""
    def run(lib):
        gen = lib.nn.Linear(3, 4 * 3)
        code, img = lib.ones(2, 3), lib.ones(1, 4, 6, 6)
        kernels = gen(code).view(2 * 4, 1, 3)
        return _message(lambda: lib.nn.functional.conv2d(img, kernels, padding=1, groups=4))
    assert run(ember) == run(torch)
    assert "expected stride to be a single integer value or a list of 1 values" in run(ember)[1]


# vmapped straight-through one-hots and per-example masks write in place; PyTorch's vmap batches
# some of those writes and runs the rest through its fallback, whose warning names the in-place
# overload (aten::scatter_.value), not the out-of-place op
def _inplace_cases(t):
    return {
        "scatter_value": lambda a, j: t.zeros_like(a).scatter_(0, j, 1.0),
        "scatter_src": lambda a, j: t.zeros_like(a).scatter_(0, j, a[:1]),
        "scatter_reduce_kw": lambda a, j: t.zeros_like(a).scatter_(0, j, a[:1], reduce="add"),
        "scatter_value_reduce": lambda a, j: t.zeros_like(a).scatter_(0, j, 2.0,
                                                                      reduce="multiply"),
        "scatter_add_": lambda a, j: t.zeros_like(a).scatter_add_(0, j, a[:1]),
        "scatter_reduce_": lambda a, j: a.clone().scatter_reduce_(0, j, a[:1], "sum"),
        "index_fill_": lambda a, j: a.clone().index_fill_(0, j[0], 1.0),
        "index_add_": lambda a, j: a.clone().index_add_(0, j[0], a[:1]),
        "index_copy_": lambda a, j: a.clone().index_copy_(0, j[0], a[:1]),
        "index_reduce_": lambda a, j: a.clone().index_reduce_(0, j[0], a[:1], "amax"),
        "masked_fill_number": lambda a, j: a.clone().masked_fill_(a > 0, 1.0),
        "masked_fill_tensor": lambda a, j: a.clone().masked_fill_(a > 0, a.sum()),
        "masked_scatter_": lambda a, j: a.clone().masked_scatter_(a > 0, a * 2),
        "put_": lambda a, j: a.clone().put_(j, a[:1]),
        "fill_diagonal_": lambda a, j: a.view(2, 2).clone().fill_diagonal_(5.0),
        "tril_": lambda a, j: a.view(2, 2).clone().tril_(),
        "addmm_": lambda a, j: a.view(2, 2).clone().addmm_(a.view(2, 2), a.view(2, 2)),
        "cumsum_": lambda a, j: a.clone().cumsum_(0),
        "clamp_": lambda a, j: a.clone().clamp_(0, 1),
        "clamp_tensor": lambda a, j: a.clone().clamp_(a[:1], a[1:2] + 3),
        "lerp_scalar": lambda a, j: a.clone().lerp_(a * 2, 0.3),
        "lerp_tensor": lambda a, j: a.clone().lerp_(a * 2, a.sigmoid()),
        "addcmul_": lambda a, j: a.clone().addcmul_(a, a, value=2),
        "addcdiv_": lambda a, j: a.clone().addcdiv_(a, a + 3, value=2),
        "fmod_scalar": lambda a, j: a.clone().fmod_(2.0),
        "remainder_tensor": lambda a, j: a.clone().remainder_(a.abs() + 1),
        "xlogy_scalar": lambda a, j: a.clone().abs().xlogy_(2.0),
        "xlogy_tensor": lambda a, j: a.clone().abs().xlogy_(a.abs() + 1),
        "eq_scalar": lambda a, j: a.clone().eq_(0.0),
        "lt_tensor": lambda a, j: a.clone().lt_(a * 0.5),
        "floor_divide_": lambda a, j: a.clone().floor_divide_(2.0),
        "square_": lambda a, j: a.clone().square_(),
        "pow_scalar": lambda a, j: a.clone().pow_(2.0),
        "pow_tensor": lambda a, j: a.clone().abs().pow_(a.abs()),
        "hypot_unbatched": lambda a, j: a.clone().hypot_(t.tensor(2.0)),
        "pow_unbatched": lambda a, j: a.clone().abs().pow_(t.tensor([1.0, 2.0, 3.0, 0.5])),
        "fmod_unbatched": lambda a, j: a.clone().fmod_(t.tensor(2.0)),
        "hypot_tensor": lambda a, j: a.clone().hypot_(a * 2),
        "heaviside_": lambda a, j: a.clone().heaviside_(a * 2),
        "add_": lambda a, j: a.clone().add_(a, alpha=2),
        "mul_": lambda a, j: a.clone().mul_(3.0),
        "sigmoid_": lambda a, j: a.clone().sigmoid_(),
    }


def _vmap_warnings(lib, name):
    import warnings
    x = lib.zeros(3, 4) + lib.arange(4.0) - 1
    i = lib.tensor([[1], [2], [0]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = lib.func.vmap(_inplace_cases(lib)[name])(x, i)
    # PyTorch's C++ warnings end by naming the source line that raised them
    return out.numpy().tolist(), [re.sub(r" \(Triggered internally at .*\)$", "", str(w.message))
                                  for w in caught if "performance drop" in str(w.message)]


@pytest.mark.parametrize("name", sorted(_inplace_cases(torch)))
def test_vmap_inplace_fallback_warnings_like_torch(name):
    assert _vmap_warnings(ember, name) == _vmap_warnings(torch, name)
