"""What the privacy and optimizer programs of round 29 (test_parity_programs_round29_privacy.py
and its _optim sibling) found, each pinned against PyTorch: per-sample gradients of a class
loss whose every target is ignored are zero (not NaN), a ``grad``/``jacrev``/``jacfwd``/
``hessian`` function may write into the arguments it does not differentiate (BatchNorm buffers
handed to ``functional_call``), vmap runs over an empty (Poisson) batch, the DataLoader's empty
batch reaches collate as an empty list, and an opacus-style optimizer that never runs
``Optimizer.__init__`` steps under a scheduler."""

import warnings

import numpy as np
import pytest

import ember
from tests.optim.test_optimizer_wrapper_round29 import wrapper_class

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _np(t):
    return t.detach().numpy()


# --- per-sample gradients of an ignored example --------------------------------------------

def _ignored_case(lib, case):
    F = lib.nn.functional
    rng = np.random.default_rng(29)
    x = lib.from_numpy(rng.standard_normal((3, 2, 4)).astype(np.float32))
    t = lib.tensor([[-100, -100], [1, -100], [3, 0]])
    w = lib.tensor([0.5, 1.0, 2.0, 1.5])

    def loss(xi, ti, wi=None):
        if case == "cross_entropy":
            return F.cross_entropy(xi, ti)
        if case == "nll_loss":
            return F.nll_loss(xi.log_softmax(-1), ti)
        if case == "label_smoothing":
            return F.cross_entropy(xi, ti, label_smoothing=0.2)
        if case == "weight":
            return F.cross_entropy(xi, ti, weight=w)
        return F.cross_entropy(xi, ti, weight=wi)           # per-example (batched) weights
    if case == "batched_weight":
        ws = lib.stack([w, w * 2, w + 1])
        args, dims = (x, t, ws), (0, 0, 0)
    else:
        args, dims = (x, t), (0, 0)
    grads = lib.func.vmap(lib.func.grad(loss), in_dims=dims)(*args)
    values = lib.vmap(loss, in_dims=dims)(*args)
    return _np(grads), _np(values)


@pytest.mark.parametrize("case", ["cross_entropy", "nll_loss", "label_smoothing", "weight",
                                  "batched_weight"])
def test_vmap_grad_of_an_example_with_every_target_ignored(case):
    ours, theirs = _ignored_case(ember, case), _ignored_case(torch, case)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert np.isnan(theirs[1][0]) and not np.isnan(theirs[0][0]).any()
    assert (theirs[0][0] == 0).all()


# --- arguments a grad transform does not differentiate --------------------------------------

def _written(lib, how):
    fn = lib.func
    x = lib.tensor([1.0, 2.0])
    b = lib.zeros(3)

    def sq(x):
        return (x * x).sum()
    if how == "positional":
        out = fn.grad(lambda x, b: (b.add_(1), sq(x))[1])(x, b)
    elif how == "view":
        out = fn.grad(lambda x, b: (b[1:].mul_(0).add_(2), sq(x))[1])(x, b)
    elif how == "list":
        out = fn.grad(lambda x, bs: (bs[0].add_(1), sq(x))[1])(x, [b])
    elif how == "dict":
        out = fn.grad(lambda x, bs: (bs["b"].add_(1), sq(x))[1])(x, {"b": b})
    elif how == "kwarg":
        out = fn.grad(lambda x, b=None: (b.add_(1), sq(x))[1])(x, b=b)
    elif how == "argnums":
        out = fn.grad(lambda b, x: (b.add_(1), sq(x))[1], argnums=1)(b, x)
    elif how == "grad_and_value":
        out = fn.grad_and_value(lambda x, b: (b.add_(x.sum().detach()), sq(x))[1])(x, b)[1]
    elif how == "jacrev":
        out = fn.jacrev(lambda x, b: (b.add_(1), x * x)[1])(x, b)
    elif how == "jacfwd":
        out = fn.jacfwd(lambda x, b: (b.add_(1), x * x)[1])(x, b)
    elif how == "hessian":
        out = fn.hessian(lambda x, b: (b.add_(1), sq(x))[1])(x, b)
    elif how == "from_input":           # the caller's tensor keeps no history of x
        out = fn.grad(lambda x, b: (b[:2].add_(x * 2), (b[:2] * b[:2] * x).sum())[1])(x, b)
    elif how == "hessian_from_input":
        out = fn.hessian(lambda x, b: (b[1:].add_(x), (b[1:] * x * x).sum())[1])(x, b)
    elif how == "vmap_grad":
        out = lib.vmap(fn.grad(lambda x, b: (b.add_(1), sq(x))[1]),
                       in_dims=(0, None))(x.expand(2, 2), b)
    return _np(out), _np(b), b.grad_fn is None


@pytest.mark.parametrize("how", ["positional", "view", "list", "dict", "kwarg", "argnums",
                                 "grad_and_value", "jacrev", "jacfwd", "hessian",
                                 "vmap_grad", "from_input", "hessian_from_input"])
def test_grad_function_may_write_into_arguments_it_does_not_differentiate(how):
    ours, theirs = _written(ember, how), _written(torch, how)
    for a, b in zip(ours[:2], theirs[:2]):
        np.testing.assert_allclose(a, b)
    assert ours[2] == theirs[2]


def _captured_write(lib):
    b = lib.zeros(3)
    try:
        lib.func.grad(lambda x, c: (b.add_(1), (x * x).sum())[1])(lib.ones(2), lib.ones(1))
    except RuntimeError as e:
        return str(e)
    return "no error"


def test_a_captured_tensor_is_still_refused():
    assert _captured_write(ember) == _captured_write(torch)
    assert "mutate a captured Tensor" in _captured_write(torch)


def _batchnorm_per_sample(lib):
    nn, F = lib.nn, lib.nn.functional
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def loss(p, b, xi, yi):
        out = lib.func.functional_call(model, (p, b), (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))
    try:
        lib.func.vmap(lib.func.grad(loss), in_dims=(None, None, 0, 0))(
            params, buffers, lib.ones(4, 3), lib.zeros(4, dtype=lib.long))
    except (RuntimeError, ValueError) as e:
        return type(e).__name__, str(e).replace("torch.Size", "Size").replace(
            "ember.Size", "Size").split("\n")[0]
    return "no error"


def test_per_sample_grads_through_batchnorm_in_training_raise_torchs_error():
    """The functorch tutorial's warning case: the buffers are arguments, so BatchNorm's
    num_batches_tracked update may run, and the per-example (1, C) batch is refused."""
    assert _batchnorm_per_sample(ember) == _batchnorm_per_sample(torch)


# --- vmap over an empty batch ------------------------------------------------------------------

_EMPTY = {
    "norm": lambda lib, x: x.norm(),
    "argmax": lambda lib, x: x.argmax(),
    "max": lambda lib, x: x.max(),
    "median": lambda lib, x: x.median(),
    "prod": lambda lib, x: x.prod(),
    "roll": lambda lib, x: x.roll(1),
    "mse": lambda lib, x: lib.nn.functional.mse_loss(x, lib.zeros(3, 4)),
    "huber": lambda lib, x: lib.nn.functional.huber_loss(x, lib.zeros(3, 4)),
    "bce_logits": lambda lib, x: lib.nn.functional.binary_cross_entropy_with_logits(
        x, lib.zeros(3, 4)),
}


@pytest.mark.parametrize("name", sorted(_EMPTY))
def test_vmap_over_an_empty_batch(name):
    def run(lib):
        out = lib.vmap(lambda x: _EMPTY[name](lib, x))(lib.ones(0, 3, 4))
        return tuple(out.shape), str(out.dtype).rsplit(".", 1)[-1]
    assert run(ember) == run(torch)


def _empty_per_sample(lib):
    F = lib.nn.functional
    model = lib.nn.Linear(4, 3)

    def loss(p, xi, yi):
        return F.cross_entropy(lib.func.functional_call(model, p, (xi.unsqueeze(0),)),
                               yi.unsqueeze(0))
    params = {k: v.detach() for k, v in model.named_parameters()}
    gs = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))(
        params, lib.ones(0, 4), lib.zeros(0, dtype=lib.long))
    return {k: tuple(v.shape) for k, v in gs.items()}


def test_per_sample_grads_of_an_empty_poisson_batch():
    assert _empty_per_sample(ember) == _empty_per_sample(torch) == {
        "weight": (0, 3, 4), "bias": (0, 3)}


# --- DataLoader: an empty batch from a batch sampler ------------------------------------------

def _empty_batches(lib, collate):
    data = lib.utils.data
    ds = data.TensorDataset(lib.arange(6.0).view(6, 1), lib.arange(6))
    seen = []

    def wrapped(batch):
        seen.append(len(batch))
        if batch:
            return data.default_collate(batch)
        return [lib.zeros(0, 1), lib.zeros(0, dtype=lib.long)]
    loader = data.DataLoader(ds, batch_sampler=[[0, 1], [], [4]],
                             collate_fn=wrapped if collate else None)
    try:
        out = [[tuple(t.shape) for t in b] for b in loader]
    except IndexError as e:
        return "IndexError", str(e)
    return out, seen


@pytest.mark.parametrize("collate", [False, True])
def test_dataloader_empty_batch_reaches_collate(collate):
    assert _empty_batches(ember, collate) == _empty_batches(torch, collate)


# --- an optimizer that never ran Optimizer.__init__ ---------------------------------------------

def _wrapper_optimizer(lib):
    Wrapper = wrapper_class(lib)

    m = lib.nn.Linear(2, 1)
    with lib.no_grad():
        m.weight.fill_(0.5)
        m.bias.fill_(0.1)
    inner = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    calls = []
    inner.register_step_pre_hook(lambda o, a, k: calls.append(type(o).__name__))
    opt = Wrapper(inner)
    sched = lib.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    lrs = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            opt.zero_grad()
            m(lib.ones(3, 2)).sum().backward()
            opt.step()
            sched.step()
            lrs.append(opt.param_groups[0]["lr"])
    return lrs, _np(m.weight).tolist(), calls, [str(w.message) for w in caught]


def test_optimizer_wrapper_without_optimizer_init_steps_under_a_scheduler():
    ours, theirs = _wrapper_optimizer(ember), _wrapper_optimizer(torch)
    assert ours[0] == theirs[0] and ours[2:] == theirs[2:]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)
    assert theirs[2] == ["SGD"] * 3


# --- grad keeps the function's name ------------------------------------------------------------

def _named_transforms(lib):
    def per_sample_loss(w, x):
        """The loss of one example."""
        return (w * x).sum()
    out = []
    for name in ("grad", "grad_and_value"):
        t = getattr(lib.func, name)(per_sample_loss)
        out.append((t.__name__, t.__doc__, t.__wrapped__ is per_sample_loss))
    try:
        lib.func.vmap(lib.func.grad(per_sample_loss), in_dims=(None, 0, 0))(
            lib.ones(2), lib.ones(3, 2))
    except ValueError as e:
        out.append(str(e).split(":")[0])
    return out


def test_grad_keeps_the_function_name_that_vmap_errors_show():
    assert _named_transforms(ember) == _named_transforms(torch)


# --- a backward pre-hook alone, on a module whose inputs need no grad ---------------------------

def _pre_hook_only(lib, x_requires_grad):
    m = lib.nn.Linear(2, 3)
    seen = []
    m.register_full_backward_pre_hook(lambda mod, go: seen.append(tuple(go[0].shape)))
    x = lib.ones(4, 2, requires_grad=x_requires_grad)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m(x).sum().backward()
    return seen, [(w.category.__name__, str(w.message)) for w in caught]


@pytest.mark.parametrize("x_requires_grad", [False, True])
def test_backward_pre_hook_alone_warns_like_torch(x_requires_grad):
    """opacus's first layer sees data that needs no grad: PyTorch's hook warns that it fires
    for the outputs, with a full backward pre-hook alone too."""
    ours, theirs = _pre_hook_only(ember, x_requires_grad), _pre_hook_only(torch, x_requires_grad)
    assert ours == theirs
    assert bool(theirs[1]) == (not x_requires_grad)
