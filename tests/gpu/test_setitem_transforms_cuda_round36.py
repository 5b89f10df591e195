"""``x[key] = value`` on the GPU agrees with the CPU: values, node names and versions for
low-precision, complex, bool and float8 targets (float8_e4m3fn numbers saturate to +-448),
values left on the CPU, vmap, forward-mode tangents and inference mode."""

import pytest

import ember
import ember.autograd.forward_ad as fwAD

pytestmark = pytest.mark.cuda

_DTYPES = [ember.float32, ember.float16, ember.bfloat16, ember.complex64, ember.bool,
           ember.int64, ember.float8_e4m3fn]
_KEYS = {"row": 0, "col": (slice(None), 1), "elem": (0, 1), "all": Ellipsis, "true": True,
         "adv": "adv", "mask": "mask"}


def _write(device, dtype, key, value):
    x = ember.zeros(2, 3, dtype=dtype, device=device)
    if dtype.is_floating_point and dtype is not ember.float8_e4m3fn or dtype.is_complex:
        x = x.requires_grad_().clone()
    if key == "adv":
        key = ember.tensor([1], device=device)
    elif key == "mask":
        key = ember.tensor([True, False], device=device)
    if value == "t0":
        value = ember.tensor(2.5, device=device)
    elif value == "t0cpu":
        value = ember.tensor(2.5)
    elif value == "t1":
        value = ember.tensor([1., 2., 3.], device=device)
    try:
        x[key] = value
    except RuntimeError as e:
        return "error", str(e)
    wide = x.float() if dtype in (ember.float8_e4m3fn, ember.bfloat16) else x
    return (type(x.grad_fn).__name__ if x.grad_fn is not None else None, x._version,
            wide.cpu().tolist(), x.dtype, x.device.type == device)


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
def test_writes_agree_with_the_cpu(dtype):
    for key in _KEYS.values():
        for value in (3, 2.7, 1e10, -1e10, "t0", "t0cpu", "t1"):
            got = _write("cuda", dtype, key, value)
            assert got == _write("cpu", dtype, key, value), (key, value, got)


def test_float8_saturates_on_the_gpu():
    x = ember.zeros(2, 3, dtype=ember.float8_e4m3fn, device="cuda")
    x[:, 1] = 1e10
    x[0, 0] = float("-inf")
    assert x.float().cpu().tolist() == [[-448.0, 448.0, 0.0], [0.0, 448.0, 0.0]]


def test_transforms_and_inference_mode_on_the_gpu():
    def both(x, v):
        x = x.clone()
        x[:, 0] = v
        return x
    r = ember.func.vmap(both)(ember.zeros(2, 3, 4, device="cuda"),
                              ember.arange(6., device="cuda").reshape(2, 3))
    assert r.device.type == "cuda" and r[:, :, 0].cpu().tolist() == [[0., 1., 2.], [3., 4., 5.]]
    with fwAD.dual_level():
        x = ember.zeros(3, 4, device="cuda")
        x[:, 1:3] = fwAD.make_dual(ember.ones(3, 2, device="cuda"),
                                   ember.arange(6., device="cuda").reshape(3, 2))
        t = fwAD.unpack_dual(x).tangent
        assert t.device.type == "cuda" and t[:, 1:3].cpu().tolist() == [[0., 1.], [2., 3.],
                                                                         [4., 5.]]
        d = fwAD.make_dual(ember.ones(3, device="cuda"), ember.full((3,), 2., device="cuda"))
        with ember.inference_mode():
            d[0] = 5.
        assert fwAD.unpack_dual(d).tangent.cpu().tolist() == [2., 2., 2.]

    def f(x, v):
        y = x.clone()
        y[1:] = v
        return y
    _, tangent = ember.func.jvp(f, (ember.arange(3., device="cuda"),
                                    ember.tensor([7., 8.], device="cuda")),
                                (ember.ones(3, device="cuda"),
                                 ember.tensor([2., 3.], device="cuda")))
    assert tangent.device.type == "cuda" and tangent.cpu().tolist() == [1., 2., 3.]
