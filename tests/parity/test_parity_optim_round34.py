"""Optimizers against PyTorch (round 34): what a step on stale state (kept from before a
parameter changed shape) leaves behind for the Adam family, single- and multi-tensor; complex
and 16-bit SGD on stale state; the dtypes ``load_state_dict`` casts state to. Skipped
without PyTorch."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

ADAM_FAMILY = [("Adam", {}), ("Adam", {"amsgrad": True, "weight_decay": 0.1}),
               ("AdamW", {}), ("Adamax", {"weight_decay": 0.1}), ("NAdam", {}),
               ("NAdam", {"decoupled_weight_decay": True, "weight_decay": 0.1}),
               ("RAdam", {}), ("RAdam", {"maximize": True}), ("Adagrad", {"lr_decay": 0.1}),
               ("Adadelta", {"weight_decay": 0.1}), ("RMSprop", {}),
               ("RMSprop", {"momentum": 0.9, "centered": True})]


def _after_stale_step(lib, name, options, old, new, stale, count, dtype="float64"):
    """(error type and text, every parameter and state array afterwards): ``count``
    parameters of shape ``old`` step once, those in ``stale`` then take shape ``new``."""
    rng = np.random.default_rng(0)
    complex_ = dtype.startswith("complex")

    def make(shape):
        a = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_ else 0)
        return lib.tensor(a).to(getattr(lib, dtype))

    params = [lib.nn.Parameter(make(old)) for _ in range(count)]
    opt = getattr(lib.optim, name)(params, **options)
    for p in params:
        p.grad = make(old)
    opt.step()
    for i in stale:
        params[i].data = make(new)
    for p in params:
        p.grad = make(tuple(p.shape))
    try:
        opt.step()
        error = None
    except RuntimeError as e:
        error = str(e)
    wide = lib.complex128 if complex_ else lib.float64
    arrays = []
    for p in params:
        arrays.append(("param", p.detach().to(wide).numpy()))
        for key, value in sorted(opt.state[p].items()):
            arrays.append((key, value.detach().to(wide if value.is_complex() or key != "step"
                                                  else lib.float64).numpy()))
    return error, arrays


def _same(*args, rtol=1e-12, atol=1e-14, **kwargs):
    ours = _after_stale_step(ember, *args, **kwargs)
    theirs = _after_stale_step(torch, *args, **kwargs)
    assert ours[0] == theirs[0]
    assert [k for k, _ in ours[1]] == [k for k, _ in theirs[1]]
    for (key, a), (_, b) in zip(ours[1], theirs[1]):
        assert a.shape == b.shape, key
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=key)
    return ours[0]


@pytest.mark.parametrize("name, options", ADAM_FAMILY)
@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("old, new", [((3,), (5,)), ((3,), (1,)), ((1,), (3,)),
                                      ((2, 3), (3,))])
@pytest.mark.parametrize("stale", [(1,), (0, 2)])
def test_adam_family_stale_state_left_behind(name, options, foreach, old, new, stale):
    """Single-tensor: the parameters before the failing one stepped, its step counted and
    its state written up to the op that fails, the ones after untouched (their steps not
    counted). Multi-tensor: every step counted, each list op done for all before the next."""
    error = _same(name, dict(options, foreach=foreach), old, new, stale=stale, count=3)
    assert error is not None


@pytest.mark.parametrize("name, options", ADAM_FAMILY[:4] + ADAM_FAMILY[9:])
@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "complex64", "float16"])
def test_adam_family_stale_state_other_dtypes(name, options, foreach, dtype):
    tol = 2e-3 if dtype == "float16" else 1e-5
    _same(name, dict(options, foreach=foreach), (2, 3), (3,), stale=(1,), count=3,
          dtype=dtype, rtol=tol, atol=tol)


def test_single_tensor_steps_counted_up_to_the_failing_parameter():
    params = [ember.nn.Parameter(ember.ones(3)) for _ in range(3)]
    opt = ember.optim.Adam(params, foreach=False)
    for p in params:
        p.grad = ember.ones(3)
    opt.step()
    params[1].data = ember.ones(5)
    for p in params:
        p.grad = ember.ones(tuple(p.shape))
    with pytest.raises(RuntimeError, match="size of tensor a \\(3\\) must match"):
        opt.step()
    assert [opt.state[p]["step"].item() for p in params] == [2.0, 2.0, 1.0]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name, options", [
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}),
    ("Adadelta", {})])
@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("old, new", [((3,), (1,)), ((2, 3), (3,)), ((3,), (5,))])
def test_complex_stale_messages_name_complex_shapes(dtype, name, options, foreach, old, new):
    """PyTorch's SGD steps complex tensors whole, Adadelta's single-tensor step its
    parameter (not its real view): their messages name [1], not [1, 2]."""
    error = _same(name, dict(options, foreach=foreach), old, new, stale=(1,), count=3,
                  dtype=dtype, rtol=1e-5, atol=1e-6)
    assert error is not None
    if name == "SGD" or not foreach:    # (multi-tensor Adadelta steps real views: [1, 2])
        assert ", 2]" not in error


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("options", [{}, {"dampening": 0.3},
                                     {"nesterov": True, "weight_decay": 0.1}])
def test_sgd_16_bit_stale_buffer_broadcast_rows(dtype, options):
    """A (2, 3) buffer kept for a parameter now (3,): the buffer takes the gradient row by
    row, each row's scalar-loop tail rounded as PyTorch's (was misaligned)."""
    _same("SGD", dict(options, lr=0.1, momentum=0.9, foreach=False), (2, 3), (3,),
          stale=(1,), count=3, dtype=dtype, rtol=0, atol=0)


def _state_kinds(lib, name, options, dtype, extra):
    p = lib.nn.Parameter(lib.ones(4, 3))
    opt = getattr(lib.optim, name)([p], **options)
    if name == "SparseAdam":
        p.grad = lib.ones(4, 3).to_sparse()
        opt.step()
    else:
        def closure():
            opt.zero_grad()
            loss = (p * p).sum()
            loss.backward()
            return loss
        opt.step(closure)
    saved = opt.state_dict()
    if extra:
        saved["state"][0].update(
            counts=lib.tensor([1, 2]), mask=lib.tensor([True]), listed=[lib.tensor([2])],
            nested={"step": lib.tensor([3])}, under_step=None)
        saved["state"][0]["listed_steps"] = {"step": [lib.tensor([4])]}
    q = lib.nn.Parameter(lib.ones(4, 3, dtype=getattr(lib, dtype)))
    loaded = getattr(lib.optim, name)([q], **options)
    loaded.load_state_dict(saved)

    def kind(v):
        if isinstance(v, dict):
            return {k: kind(x) for k, x in v.items()}
        if isinstance(v, list):
            return [kind(x) for x in v]
        if isinstance(v, lib.Tensor):
            return str(v.dtype).split(".")[-1], v.device.type
        return type(v).__name__
    return kind(dict(loaded.state[q]))


@pytest.mark.parametrize("name, options", [
    ("Adam", {}), ("Adam", {"fused": True}), ("SGD", {"momentum": 0.9}), ("ASGD", {}),
    ("Rprop", {}), ("LBFGS", {}), ("SparseAdam", {}), ("NAdam", {})])
@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16", "complex64"])
@pytest.mark.parametrize("extra", [False, True])
def test_load_state_dict_casts_state(name, options, dtype, extra):
    """Into a floating-point parameter every state tensor takes its dtype (integer and bool
    ones too; a list's items even under ``step``), but ``step`` (float32 for fused); into
    a complex one they are only moved."""
    if dtype == "complex64" and (options or name in ("SparseAdam", "LBFGS")):
        pytest.skip("(a complex parameter: fused and sparse steps refuse it)")
    if name == "LBFGS" and dtype in ("float16", "bfloat16"):
        pytest.skip("(PyTorch's LBFGS step refuses 16-bit parameters' closure dtype mix)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = _state_kinds(ember, name, options, dtype, extra)
        theirs = _state_kinds(torch, name, options, dtype, extra)
    assert ours == theirs
    if extra and dtype != "complex64":
        assert ours["counts"] == ours["mask"] == (dtype, "cpu")
        assert ours["nested"]["step"] == ("float32" if options.get("fused") else "int64", "cpu")
        assert ours["listed_steps"]["step"] == [(dtype, "cpu")]


def _outcome(fn, lib):
    try:
        return fn(lib)
    except RuntimeError as e:
        return str(e).replace("torch", "ember")


def test_reduce_lr_on_plateau_load_state_dict_follows_the_loaded_mode():
    def run(lib):
        p = lib.nn.Parameter(lib.ones(2))
        opt = lib.optim.SGD([p], lr=0.1)
        s = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max", threshold_mode="abs")
        s.load_state_dict({"mode": "min", "threshold": 0.5, "threshold_mode": "rel"})
        out = [s.mode_worse, s.mode]
        with pytest.raises(ValueError) as info:
            s.load_state_dict({"mode": "up"})
        return out + [str(info.value)]
    assert run(ember) == run(torch) == [float("inf"), "min", "mode up is unknown!"]


def test_load_state_dict_keeps_state_of_unknown_ids():
    def run(lib):
        p = lib.nn.Parameter(lib.ones(2))
        opt = lib.optim.SGD([p], lr=0.1, momentum=0.9)
        saved = opt.state_dict()
        saved["state"][5] = {"momentum_buffer": lib.ones(2)}
        opt.load_state_dict(saved)
        return (list(opt.state.keys()), opt.state[5]["momentum_buffer"].tolist(),
                sorted(opt.state_dict()["state"]))
    assert run(ember) == run(torch) == ([5], [1.0, 1.0], [5])


@pytest.mark.parametrize("name, options", [
    ("SGD", {"lr": 0.1, "momentum": 0.9}), ("Adam", {"lr": 0.1, "amsgrad": True}),
    ("Adamax", {"lr": 0.1}), ("RMSprop", {"lr": 0.1, "centered": True, "momentum": 0.5}),
    ("Adam", {"lr": 0.1}), ("NAdam", {"lr": 0.1})])
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_differentiable_steps_graph_as_pytorch(name, options, dtype):
    """Three differentiable steps then a backward through them: the same gradients, or the
    same error naming the same op and versions (PyTorch's in-place ops on state saved by an
    earlier step; SGD's buffer starts as a fresh clone at version 0)."""
    def run(lib):
        dt = getattr(lib, dtype)
        w = lib.tensor([1.0, 2.0, -0.5], dtype=dt, requires_grad=True)
        g = lib.tensor([0.3, -1.0, 0.7], dtype=dt, requires_grad=True)
        p = w.clone()
        opt = getattr(lib.optim, name)([p], differentiable=True, **options)
        for i in range(3):
            p.grad = g * (i + 1)
            opt.step()
        (p * p).abs().sum().backward()
        return [np.asarray(t.detach().tolist(), dtype=complex) for t in (p, w.grad)]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = _outcome(run, ember), _outcome(run, torch)
    if isinstance(theirs, str):
        assert ours == theirs
    else:
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-9)


def test_adam_learnable_beta2_lerps_the_squares():
    def run(lib):
        p = lib.tensor([1.0, -2.0], dtype=lib.float64, requires_grad=True).clone()
        b1 = lib.tensor(0.9, dtype=lib.float64, requires_grad=True)
        b2 = lib.tensor(0.99, dtype=lib.float64, requires_grad=True)
        opt = lib.optim.Adam([p], lr=0.1, betas=(b1, b2), differentiable=True)
        for i in range(2):
            p.grad = lib.tensor([0.5, 1.5], dtype=lib.float64) * (i + 1)
            opt.step()
        p.sum().backward()
        return [b1.grad.item(), b2.grad.item()]
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-9)
