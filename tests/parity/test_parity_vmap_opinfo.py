"""vmap over OpInfo samples against torch.func.vmap: the ops torch refuses (their messages in
tests/func/test_vmap_opinfo.py) and the batching rules fixed in audit round 16 (values)."""

import warnings

import numpy as np
import pytest

import ember
from ember.func import vmap
from ember.utils._pytree import tree_flatten
from tests.func.test_vmap_opinfo import (REFUSED, REFUSED_SAMPLES, _batched_inputs, _cases,
                                         _function)
from tests.parity.test_parity_ops import to_numpy, to_torch, torch_function

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_FIXED = ("isin", "nn.functional.max_unpool1d", "nn.functional.max_unpool2d",
          "nn.functional.max_unpool3d")
_OPS = set(REFUSED) | {op for op, _ in REFUSED_SAMPLES} | set(_FIXED)


def _torch_call(info, sample):
    """``info``'s torch function on the sample, its tensors given positionally."""
    fn = torch_function(info)

    def f(*tensors):
        it = iter(tensors)

        def walk(x):
            if isinstance(x, ember.Tensor):
                return next(it)
            if isinstance(x, (list, tuple)):
                return type(x)(walk(y) for y in x)
            return to_torch(x)
        return fn(walk(sample.input), *[walk(a) for a in sample.args],
                  **{k: walk(v) for k, v in sample.kwargs.items()})
    return f


def _outcome(f, batches, dims):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return tree_flatten(f(*batches))[0] if dims is None else \
                torch.utils._pytree.tree_flatten(f(*batches))[0]
        except RuntimeError as e:
            return str(e).splitlines()[0]


def _params():
    by_op = {}
    for info, sample, mode in _cases():
        if info.name in _OPS:
            by_op.setdefault(info.name, (info, []))[1].append((sample, mode))
    return [pytest.param(info, cases, id=name) for name, (info, cases) in by_op.items()]


@pytest.mark.parametrize("info,cases", _params())
def test_vmap_parity(info, cases):
    for sample, mode in cases:
        batches, dims = _batched_inputs(info, sample, mode)
        ours = _outcome(vmap(_function(info, sample), in_dims=dims), batches, None)
        theirs = _outcome(torch.func.vmap(_torch_call(info, sample), in_dims=dims),
                          [to_torch(b) for b in batches], dims)
        where = f"{sample!r} [{mode}]"
        if isinstance(theirs, str) or isinstance(ours, str):
            assert ours == theirs, where
            continue
        assert len(ours) == len(theirs), where
        for a, b in zip(ours, theirs):
            assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], where
            assert tuple(a.shape) == tuple(b.shape), where
            np.testing.assert_allclose(ember.Tensor.numpy(a), to_numpy(b), rtol=1e-5,
                                       atol=1e-6, err_msg=where)
