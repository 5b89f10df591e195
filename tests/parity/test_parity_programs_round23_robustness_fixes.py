"""What the robustness and regularisation programs of round 23
(test_parity_programs_round23_robustness.py) found, each pinned against PyTorch: affine_grid's
rounding (which decides nearest grid_sample at pixel centres), linspace in 16-bit floats (every
operation rounded to the dtype) with its overflow errors, affine_grid's refusal of 16-bit
unit-size grids, AveragedModel's multi_avg_fn calls per dtype, the multi-tensor EMA/SWA updates
(picked by the first tensor; SWA's float32 1 / (n + 1)), and integer lerp_'s kernel error. The
smoothing program's Clopper-Pearson bound is checked against SciPy here too."""

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same_error, dtype_name, outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _grid(lib, theta, size, dtype, align_corners):
    theta = lib.from_numpy(theta).to(getattr(lib, dtype))
    return lib.nn.functional.affine_grid(theta, size, align_corners=align_corners)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("size", [[1, 1, 4, 4], [2, 3, 9, 5], [2, 1, 6, 10], [3, 1, 20, 20],
                                  [2, 1, 3, 4, 5]])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_rounds_like_torch(dtype, size, align_corners):
    # PyTorch's grid is a bmm of the base grid and theta^T; below 400 multiply-adds per matrix
    # its bmm is an in-order unfused loop (16-bit floats in float32), which ours pins bit for
    # bit; above, it calls BLAS, whose rounding depends on the CPU's kernel (FMA, order): there
    # both may differ by the error bound of a 3-term dot product. (The exact sizes avoid 7, 8,
    # 11, 13-16, 18-20: there the base grid's linspace rounds differently in torch's scalar
    # kernel than in its AVX2/AVX512 ones, which ember follows.)
    nd = len(size) - 2
    theta = np.random.default_rng(len(size) * 10 + size[-1]).standard_normal(
        (size[0], nd, nd + 1)).astype(np.float32)
    ours = _grid(ember, theta, size, dtype, align_corners)
    theirs = _grid(torch, theta, size, dtype, align_corners)
    assert dtype_name(ours.dtype) == dtype_name(theirs.dtype)
    ours, theirs = ours.double().numpy(), theirs.double().numpy()
    if (nd + 1) * nd * int(np.prod(size[2:])) < 400:
        np.testing.assert_array_equal(ours, theirs)
        return
    base = _grid(torch, np.eye(nd, nd + 1, dtype=np.float32)[None], [1, 1] + size[2:],
                 "float64", align_corners).numpy().reshape(-1, nd)
    terms = np.abs(base) @ np.abs(theta[:, :, :nd]).transpose(0, 2, 1) + np.abs(theta[:, :, nd])[
        :, None]
    bound = 3 * np.finfo(dtype).eps * terms.reshape(theirs.shape)
    assert np.all(np.abs(ours - theirs) <= bound)


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_nearest_rotation_picks_torch_pixels(padding_mode, align_corners):
    # grid points computed to land on x.5 must fall on PyTorch's side of it
    def run(lib):
        F = lib.nn.functional
        x = lib.arange(16.0).reshape(1, 1, 4, 4)
        theta = lib.tensor([[[0.9, -0.5, 0.1], [0.5, 0.9, -0.2]]])
        grid = F.affine_grid(theta, [1, 1, 4, 4], align_corners=align_corners)
        return F.grid_sample(x, grid, mode="nearest", padding_mode=padding_mode,
                             align_corners=align_corners).numpy()
    np.testing.assert_array_equal(run(ember), run(torch))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("start, end, steps", [
    (-1, 1, 7), (-1, 1, 4), (0, 10, 5), (3, -2, 11), (0.1, 0.2, 300),
    (-9.2115, -5.6776, 562), (1.1587, -0.8601, 520), (-3.18, 8.71, 2250), (-1, 1, 70000),
    (0, 1, 0), (0, 1, 1), (2.5, -7.0, 2)])
def test_linspace_16bit_like_torch(dtype, start, end, steps):
    # PyTorch rounds each operation to the dtype: the ends, the step (divided by steps - 1
    # rounded), each count (inexact past 256 in bfloat16, 2048 in float16) and each sum
    ours = ember.linspace(start, end, steps, dtype=getattr(ember, dtype))
    theirs = torch.linspace(start, end, steps, dtype=getattr(torch, dtype))
    assert dtype_name(ours.dtype) == dtype
    np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_linspace_16bit_tensor_end_and_out_like_torch(dtype):
    def run(lib):
        out = lib.empty(9, dtype=getattr(lib, dtype))
        lib.linspace(lib.tensor(0.3), 2, 9, out=out)
        return out.float().numpy()
    np.testing.assert_array_equal(run(ember), run(torch))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("start, end, steps", [(60000, 70000, 5), (0, 1e39, 3), (1e39, 0, 1),
                                               (70000, 0, 1), (0, 1e39, 1),
                                               (0, float("inf"), 3), (float("nan"), 1, 3)])
def test_linspace_float_overflow_like_torch(dtype, start, end, steps):
    # the kernel converts both ends when it runs; one step only fills with start (unchecked
    # in 16 bits)
    def run(lib):
        try:
            return lib.linspace(start, end, steps, dtype=getattr(lib, dtype)).float().tolist()
        except RuntimeError as error:
            return str(error)
    ours, theirs = run(ember), run(torch)
    if isinstance(theirs, str):
        assert ours == theirs
    else:
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("size", [[1, 1, 1, 1], [1, 1, 2, 1], [1, 1, 2, 1, 3]])
def test_affine_grid_16bit_unit_size_refused_like_torch(dtype, size):
    nd = len(size) - 2
    assert_same_error(lambda lib, theta: lib.nn.functional.affine_grid(theta, size,
                                                                       align_corners=False),
                      lambda lib: lib.ones(1, nd, nd + 1, dtype=getattr(lib, dtype)))


@pytest.mark.parametrize("lib", [ember, torch], ids=["ember", "torch"])
@pytest.mark.parametrize("successes, trials", [(1, 50), (25, 50), (49, 50), (50, 50),
                                               (97, 100)])
def test_smoothing_clopper_pearson_bound_matches_scipy(lib, successes, trials):
    # the smoothing program's bound (bisection on Binomial tails, as torch's Beta has no
    # icdf) is the Beta quantile of Cohen et al.'s statsmodels call
    from scipy.stats import beta
    from tests.parity.test_parity_programs_round23_robustness import _clopper_pearson_lower
    expected = beta.ppf(0.05, successes, trials - successes + 1)
    assert _clopper_pearson_lower(lib, successes, trials, 0.05) == pytest.approx(expected,
                                                                                rel=1e-9)


def _averaged_calls(lib, model):
    calls = []
    ema = lib.optim.swa_utils.AveragedModel(
        model, multi_avg_fn=lambda a, b, n: calls.append([dtype_name(x.dtype) for x in a]),
        use_buffers=True)
    ema.update_parameters(model)
    ema.update_parameters(model)
    return calls


@pytest.mark.parametrize("layers", [["double", "float", "bn"], ["bn_double", "half", "float"],
                                    ["half", "bfloat16", "float", "double"]])
def test_averaged_model_groups_by_dtype_like_torch(layers):
    # multi_avg_fn gets one list per device and dtype (the last-seen group first), so an
    # EMA of a BatchNorm model lerps the floats and truncates num_batches_tracked apart
    def run(lib):
        nn = lib.nn
        make = {"double": lambda: nn.Linear(2, 1).double(), "float": lambda: nn.Linear(2, 2),
                "half": lambda: nn.Linear(2, 2).half(),
                "bfloat16": lambda: nn.Linear(2, 2).bfloat16(),
                "bn": lambda: nn.BatchNorm1d(2), "bn_double": lambda: nn.BatchNorm1d(2).double()}
        return _averaged_calls(lib, nn.Sequential(*[make[name]() for name in layers]))
    assert run(ember) == run(torch)


@pytest.mark.parametrize("make_fn", ["ema", "swa"])
def test_averaged_model_with_batchnorm_buffers_like_torch(make_fn):
    def run(lib):
        swa = lib.optim.swa_utils
        model = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.BatchNorm1d(2))
        fn = swa.get_ema_multi_avg_fn(0.9) if make_fn == "ema" else swa.get_swa_multi_avg_fn()
        ema = swa.AveragedModel(model, multi_avg_fn=fn, use_buffers=True)
        with lib.no_grad():
            for step in range(3):
                for p in model.parameters():
                    p.fill_(0.5 + step)
                model(lib.arange(6.0).reshape(3, 2) * (step + 1))
                ema.update_parameters(model)
        return [t.detach().double().tolist() for t in ema.module.state_dict().values()]
    # (for SWA, PyTorch's foreach addcdiv refuses num_batches_tracked; its message names
    # torch.trunc in ember too)
    assert outcome(run, ember) == outcome(run, torch)


def test_swa_multi_avg_fn_rounds_like_torch():
    # the running mean is a lerp by 1 / (n + 1), a float32 number when n is a tensor: float64
    # averages carry its rounding (~3e-8, was the gap), beside the last bit of the lerp's
    # fused multiply-add
    values = [np.random.default_rng(i).standard_normal(20) for i in range(6)]

    def run(lib, as_tensor):
        fn = lib.optim.swa_utils.get_swa_multi_avg_fn()
        avg = [lib.tensor(values[0]), lib.tensor(values[0], dtype=lib.float32)]
        for n, v in enumerate(values[1:], 1):
            fn(avg, [lib.tensor(v), lib.tensor(v, dtype=lib.float32)],
               lib.tensor(n) if as_tensor else n)
        return [a.numpy() for a in avg]
    for as_tensor in (True, False):
        for ours, theirs in zip(run(ember, as_tensor), run(torch, as_tensor)):
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-15 if ours.dtype ==
                                       np.float64 else 1e-7)


@pytest.mark.parametrize("fn", ["ema", "swa"])
@pytest.mark.parametrize("first", ["float", "long"])
def test_multi_avg_fns_pick_update_by_first_tensor_like_torch(fn, first):
    def run(lib):
        swa = lib.optim.swa_utils
        update = swa.get_ema_multi_avg_fn(0.9) if fn == "ema" else swa.get_swa_multi_avg_fn()
        floats, longs = lib.tensor([1.0, 2.0]), lib.tensor([1, 2])
        avgs = [floats, longs] if first == "float" else [longs, floats]
        ends = [lib.tensor([3.0, 5.0]) if a is floats else lib.tensor([5, 6]) for a in avgs]
        try:
            update(avgs, ends, lib.tensor(2))
            error = None
        except (RuntimeError, NotImplementedError) as e:
            error = (type(e).__name__, str(e))
        return error, [a.tolist() for a in avgs]
    assert run(ember) == run(torch)


@pytest.mark.parametrize("weight", [0.5, "tensor"])
def test_integer_lerp_inplace_refused_like_torch(weight):
    # a number weight is not promoted with the operands: the integer kernel is missing
    assert_same_error(
        lambda lib, x: x.lerp_(lib.tensor([3, 4]), lib.tensor(0.5) if weight == "tensor"
                               else weight), lambda lib: lib.tensor([1, 2]))


def test_foreach_lerp_reads_a_0dim_weight_as_a_number_like_torch():
    assert_same_error(lambda lib, xs: lib._foreach_lerp_(xs, [lib.tensor([3, 4])],
                                                         lib.tensor(0.5)),
                      lambda lib: [lib.tensor([1, 2])])
