"""What the sensing/array-processing programs of round 33
(test_parity_programs_round33_sensing*.py) found, pinned against PyTorch.

- A convolution whose input is complex (a complex-valued beamforming front end fed a real
  weight) said "expected scalar type ComplexFloat but found Float"; PyTorch compares the tensor
  types first: "Input type (CPUComplexFloatType) and weight type (torch.FloatTensor) should be
  the same". Half and bfloat16 inputs add "... or input should be a MKLDNN tensor and weight is
  a dense tensor".
- float32/float64/integer inputs with a weight of another dtype complained before the argument
  checks (negative padding, non-positive stride/groups) and the shape checks (channels, kernel
  larger than the input); PyTorch's kernel only compares dtypes after them.
- bool inputs (and narrow integers in transposed or dilated convolutions) named the wrong
  missing kernel ("slow_conv3d_cpu" for conv3d, "slow_conv2d_cpu" for transposed ones) and
  raised before the shape checks and regardless of the weight; PyTorch says "compute_columns3d",
  "slow_conv_transpose{2,3}d_out_cpu", "slow_conv_dilated<>" after the shape checks.

Found and left alone: conv_transpose with a bias of another dtype (PyTorch adds it in place:
float64 input + float32 bias works, int64 + float bias fails the in-place cast; ember refuses
"Input type (double) and bias type (float) should be the same"); conv_transpose2d with a kernel
larger than the input picks PyTorch's MKLDNN path and its message; 1-d dilation=0 messages
(PyTorch reports the 2-d view, "[1, 0]")."""

import itertools

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

DTYPES = ["float32", "float64", "float16", "bfloat16", "complex64", "complex128", "int64",
          "int32", "int8", "bool"]


def _error(lib, fn, nd, x_dtype, w_dtype, cin=2, k=2, **kw):
    x = lib.ones((1, 2) + (5,) * nd, dtype=getattr(lib, x_dtype))
    shape = (cin, 2) if fn.startswith("conv_transpose") else (2, cin)
    w = lib.ones(shape + (k,) * nd, dtype=getattr(lib, w_dtype))
    try:
        getattr(lib.nn.functional, fn)(x, w, **kw)
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e).replace("ember", "torch")
    return None


@pytest.mark.parametrize("fn", ["conv1d", "conv2d", "conv3d", "conv_transpose1d",
                                "conv_transpose2d", "conv_transpose3d"])
def test_conv_weight_of_another_dtype(fn):
    nd = int(fn[-2])
    for a, b in itertools.product(DTYPES, DTYPES):
        if a != b:
            assert _error(ember, fn, nd, a, b) == _error(torch, fn, nd, a, b), (a, b)


@pytest.mark.parametrize("fn", ["conv1d", "conv3d", "conv_transpose1d"])
@pytest.mark.parametrize("kw", [{"padding": -1}, {"stride": 0}, {"groups": 0},
                                {"dilation": 2}, {"cin": 3}, {"k": 9}],
                         ids=["padding", "stride", "groups", "dilation", "channels", "kernel"])
@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("float16", "float32"),
                                    ("complex64", "float32"), ("bool", "float32"),
                                    ("bool", "bool"), ("int32", "int32"), ("int32", "float32"),
                                    ("int64", "float32")])
def test_conv_dtype_errors_come_in_pytorchs_order(fn, kw, dtypes):
    nd = int(fn[-2])
    if fn == "conv_transpose1d" and dtypes[0] != dtypes[1] and "k" in kw:
        pytest.skip("PyTorch's MKLDNN path for a kernel larger than the input")
    assert _error(ember, fn, nd, *dtypes, **kw) == _error(torch, fn, nd, *dtypes, **kw)


def test_complex_conv_against_torch():
    # the supported case still computes, and matches
    x = [[[1 + 2j, 0.5, -1j, 2, 1]]]
    w = [[[1j, 1 - 1j]]]
    got = ember.nn.functional.conv1d(ember.tensor(x), ember.tensor(w))
    want = torch.nn.functional.conv1d(torch.tensor(x), torch.tensor(w))
    assert got.flatten().tolist() == pytest.approx(want.flatten().tolist())
