"""Every OpInfo sample run through PyTorch too: values, dtypes and gradients must agree.

Skipped unless PyTorch is installed (``make parity`` installs the CPU build of 2.13).
"""

import numpy as np
import pytest

import ember
from tests.ops.opdb import OPDB
from tests.ops.opdb.core import tensor_args

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

DTYPES = (ember.float32, ember.float64, ember.int64, ember.bool, ember.complex64,
          ember.bfloat16, ember.uint8)


# one rounding step of difference is fine for 16-bit floats (PyTorch's own defaults)
TOLERANCES = {ember.bfloat16: (1.6e-2, 1e-5), ember.float16: (1e-3, 1e-5),
              ember.float32: (1e-5, 1e-6), ember.complex64: (1e-5, 1e-6)}


def to_torch(x):
    if isinstance(x, ember.Tensor):
        if x.dtype is ember.bfloat16:
            out = torch.from_numpy(np.asarray(x.detach()).astype(np.float32)).to(torch.bfloat16)
        else:
            out = torch.from_numpy(np.array(x.detach()))
        return out.requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(to_torch(y) for y in x)
    if isinstance(x, dict):
        return {k: to_torch(v) for k, v in x.items()}
    if isinstance(x, ember.dtype):
        return getattr(torch, x.name)
    return x


def to_numpy(t):
    if t._is_zerotensor():
        t = torch.zeros(t.shape, dtype=t.dtype)
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.detach().numpy()


def torch_function(info):
    if info.torch_op is not None:
        return info.torch_op
    name = info.torch_name or info.name
    fn = getattr(torch, name, None)
    if fn is None:
        fn = getattr(torch.Tensor, name, None)
    return fn


def cases():
    for info in OPDB:
        if info.name.startswith("_") and info.torch_op is None and info.torch_name is None:
            continue
        for dtype in info.dtypes:
            if dtype in DTYPES:
                yield pytest.param(info, dtype, id=f"{info.name}-{dtype.name}")


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


@pytest.mark.parametrize("info,dtype", list(cases()))
def test_forward_parity(info, dtype):
    fn = torch_function(info)
    if fn is None:
        pytest.skip(f"torch has no {info.name}")
    ember.manual_seed(0)
    for sample in info.sample_inputs(dtype, False):
        ours = _as_tuple(info.function()(sample.input, *sample.args, **sample.kwargs))
        theirs = _as_tuple(fn(to_torch(sample.input), *to_torch(sample.args),
                              **to_torch(sample.kwargs)))
        for o, t in zip(ours, theirs):
            if not isinstance(t, torch.Tensor):
                assert o == t, sample
                continue
            assert o.dtype.name == str(t.dtype).replace("torch.", ""), \
                f"{sample}: ember {o.dtype} vs torch {t.dtype}"
            assert tuple(o.shape) == tuple(t.shape), sample
            rtol, atol = TOLERANCES.get(o.dtype, (1e-5, 1e-6))
            ember.testing.assert_close(o, to_numpy(t), equal_nan=True, check_dtype=False,
                                       rtol=rtol, atol=atol, msg=lambda m: f"{sample}\n{m}")


def torch_leaves(x, found):
    """Torch tensors requiring grad inside a converted sample, in sample order."""
    if isinstance(x, torch.Tensor):
        if x.requires_grad:
            found.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            torch_leaves(y, found)
    elif isinstance(x, dict):
        for y in x.values():
            torch_leaves(y, found)
    return found


@pytest.mark.parametrize("info", [i for i in OPDB if i.grad and ember.float64 in i.dtypes
                                  and not i.name.startswith("_")], ids=lambda i: i.name)
def test_gradient_parity(info):
    fn = torch_function(info)
    if fn is None:
        pytest.skip(f"torch has no {info.name}")
    ember.manual_seed(0)
    make = info.grad_samples or info.sample_inputs
    for sample in make(ember.float64, True):
        leaves = [t for t in tensor_args(sample) if t.requires_grad]
        if not leaves:
            continue
        out = _as_tuple(info.function()(sample.input, *sample.args, **sample.kwargs))
        t_input, t_args, t_kwargs = (to_torch(sample.input), to_torch(sample.args),
                                     to_torch(sample.kwargs))
        t_out = _as_tuple(fn(t_input, *t_args, **t_kwargs))
        t_leaves = torch_leaves([t_input, t_args, t_kwargs], [])
        pairs = [(o, t) for o, t in zip(out, t_out) if o.requires_grad]
        if not pairs:
            continue
        rng = np.random.default_rng(1)
        weights = [rng.standard_normal(tuple(o.shape)) for o, _ in pairs]
        ours = ember.autograd.grad([o for o, _ in pairs], leaves,
                                   [ember.tensor(w) for w in weights], allow_unused=True)
        theirs = torch.autograd.grad([t for _, t in pairs], t_leaves,
                                     [torch.from_numpy(w) for w in weights], allow_unused=True)
        for o, t in zip(ours, theirs):
            if t is None:
                assert o is None or not np.any(np.asarray(o)), sample
                continue
            assert o is not None, f"{sample}: ember gives no gradient, torch does"
            ember.testing.assert_close(o, to_numpy(t), rtol=1e-6, atol=1e-8, equal_nan=True,
                                       check_dtype=False, msg=lambda m: f"{sample}\n{m}")
