"""What the self-supervised and generative programs of round 29 (test_parity_programs_round29_ssl
.py and its _gen sibling) found, each pinned against PyTorch: an ``out=`` tensor of the wrong
shape is resized as ``Tensor.resize_`` resizes it, so a view into a larger buffer (iBOT's
``index_select(..., out=buffer[:n])`` with a stale ``n``) keeps writing into that buffer's
memory while it is large enough, instead of being given new memory of its own; and the
in-place ``torch._foreach_mul_`` multiplies a bfloat16/float16 tensor by its number rounded to
that dtype (a bfloat16 EMA teacher's momentum 0.99 scales by 0.98828125), which no other
foreach form does."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

X = np.arange(24, dtype=np.float32).reshape(6, 4)


def _write(lib, case):
    """Run ``case`` into a (5, 4) buffer of -1; the buffer, the out tensor's values and layout,
    and the warnings."""
    base = lib.full((5, 4), -1.0)
    x = lib.from_numpy(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if case == "grow_in_place":          # two rows grown to three, all inside base
            out = lib.index_select(x, 0, lib.tensor([4, 0, 2]), out=base[1:3])
        elif case == "shrink":
            out = lib.index_select(x, 0, lib.tensor([4]), out=base[1:4])
        elif case == "transposed":           # a non-contiguous out becomes contiguous
            out = lib.mul(x[:2, :3], 2, out=base.t()[1:])
        elif case == "topk":
            values, indices = lib.zeros(6, 4), lib.zeros(6, 4, dtype=lib.long)
            lib.topk(x, 2, out=(values[:1], indices[:1]))
            base[:] = values[:5]
            out = indices
        elif case == "empty":
            out = lib.sum(x, 1, out=lib.empty(0))
    return (base.numpy().copy(), out.numpy().copy(), list(out.shape), out.stride(),
            out.storage_offset(), [str(w.message)[:60] for w in caught])


@pytest.mark.parametrize("case", ["grow_in_place", "shrink", "transposed", "topk", "empty"])
def test_resized_out_keeps_its_memory_like_torch(case):
    ours, theirs = _write(ember, case), _write(torch, case)
    for a, b in zip(ours, theirs):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
        else:
            assert a == b



def _foreach_forms(lib, dtype, number):
    """Each binary foreach op with a number, on a bfloat16/float16 tensor: in place and not,
    with one number and with a list of numbers. (lerp and addcmul are left out: PyTorch's
    kernels fuse their multiply-add, which ember's do not, so a few elements differ by an ulp
    whatever the foreach form.)"""
    r = np.random.default_rng(29)
    x = lib.from_numpy(r.standard_normal(4096).astype(np.float32)).to(getattr(lib, dtype))
    y = lib.from_numpy(r.standard_normal(4096).astype(np.float32)).to(getattr(lib, dtype))
    out = {}
    for op in ("mul", "div", "add", "sub"):
        for arg in (number, [number]):
            a = [x.clone()]
            getattr(lib, f"_foreach_{op}_")(a, arg)
            out[f"{op}_ {type(arg).__name__}"] = a[0]
            out[f"{op} {type(arg).__name__}"] = getattr(lib, f"_foreach_{op}")([x], arg)[0]
    a = [x.clone()]
    lib._foreach_add_(a, [y], alpha=number)
    out["add_ alpha"] = a[0]
    a = [x.clone()]
    lib._foreach_mul_(a, lib.tensor(number))          # a 0-dim tensor is kept whole
    out["mul_ tensor"] = a[0]
    a = [x.clone()]
    x.mul_(1.0)
    a[0].mul_(number)
    out["Tensor.mul_"] = a[0]
    return {k: v.float().numpy() for k, v in out.items()}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("number", [0.99, 1 / 3, 0.0123457, 3])
def test_foreach_scalar_rounding_like_torch(dtype, number):
    ours, theirs = _foreach_forms(ember, dtype, number), _foreach_forms(torch, dtype, number)
    assert ours.keys() == theirs.keys()
    for key in theirs:
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)


def test_foreach_mul_rounds_the_number_only_in_place():
    x = torch.tensor([2.03125], dtype=torch.bfloat16)
    a = [x.clone()]
    torch._foreach_mul_(a, 0.99)
    # PyTorch scales by bfloat16(0.99) = 0.98828125 here, and by 0.99 out of place
    assert a[0].item() == 2.0 and torch._foreach_mul([x], 0.99)[0].item() == 2.015625
    b = [ember.tensor([2.03125], dtype=ember.bfloat16)]
    ember._foreach_mul_(b, 0.99)
    assert b[0].item() == a[0].item()
